"""``hostd mcp``: a client's requests in flight are bounded in number and in bytes (issue 27).

The class: *a client that holds the gateway's memory or tasks without bound* by keeping requests open. Members:
many small requests (the count, 256) and fewer large ones (the bytes of their messages, 64 MiB); over either,
one more is answered at once with ``HOST_OVERLOADED`` and its numbers (never a hang), requests already in flight
stay in flight, and ``ping`` is still answered. ``subscriptions/listen`` stays in flight until cancelled, so it
holds a slot without any plugin. What the gateway writes to a client that does not read is bounded by the outbox
(tests/test_gateway.py, the progress flood). One real ``hostd mcp`` process on a raw pipe (the SDK's client
would not send 256 requests without waiting).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from hostd.cli.client import plugin_environment
from hostd.control.core import MAX_INFLIGHT_BYTES, MAX_INFLIGHT_REQUESTS
from hostd.wire.framing import LineDecoder, Message
from tests.conftest import ROOT
from tests.test_gateway import OPENING
from tests.waiting import GENEROUS


def line(rid: int, method: str, params: dict[str, Any]) -> bytes:
    """One request as its compact JSON line (without the newline: the size the gateway counts)."""
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, separators=(",", ":")).encode()


async def test_requests_in_flight_are_bounded_in_number_and_bytes_with_a_named_error(tmp_path: Path) -> None:
    assert (MAX_INFLIGHT_REQUESTS, MAX_INFLIGHT_BYTES) == (256, 64 * 1024 * 1024)  # the documented defaults
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hostd", "mcp", "--state-dir", str(tmp_path / "state")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=plugin_environment(),
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    answers: dict[int, dict[str, Any]] = {}
    arrived = trio.Event()

    async def reader() -> None:
        nonlocal arrived
        assert process.stdout is not None
        decoder = LineDecoder(64 * 1024 * 1024)
        while data := await process.stdout.receive_some(65536):
            for event in decoder.feed(data):
                if isinstance(event, Message) and isinstance(event.value.get("id"), int):
                    answers[event.value["id"]] = event.value
                    arrived.set()
                    arrived = trio.Event()

    async def answer(rid: int) -> dict[str, Any]:
        while rid not in answers:
            await arrived.wait()
        return answers[rid]

    pad = "x" * (320 * 1024)
    big = [line(rid, "subscriptions/listen", {"notifications": {}, "pad": pad}) for rid in range(1, 201)]
    small = [line(rid, "subscriptions/listen", {"notifications": {}}) for rid in range(201, 256)]
    held = sum(len(request) for request in big + small)
    assert MAX_INFLIGHT_BYTES - 2 * 1024 * 1024 < held < MAX_INFLIGHT_BYTES - 1024 * 1024
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            with trio.fail_after(120):
                await process.stdin.send_all(line(0, "initialize", OPENING) + b"\n")
                assert "result" in await answer(0)
                await process.stdin.send_all(b"\n".join(big + small) + b"\n")
                # 255 in flight, 1 to 2 MiB under the bytes bound: a 2 MiB request is over it.
                over_bytes = line(300, "subscriptions/listen", {"notifications": {}, "pad": "y" * (2 * 1024 * 1024)})
                one_more = line(301, "subscriptions/listen", {"notifications": {}})
                over_count = line(302, "subscriptions/listen", {"notifications": {}})
                ping = line(303, "ping", {})
                await process.stdin.send_all(b"\n".join([over_bytes, one_more, over_count, ping]) + b"\n")
                refused_bytes, refused_count = await answer(300), await answer(302)
                assert await answer(303) == {"jsonrpc": "2.0", "id": 303, "result": {}}
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await process.stdin.aclose()
            with trio.move_on_after(GENEROUS):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
    bounds = {"maxInFlight": 256, "maxInFlightBytes": 64 * 1024 * 1024}
    assert refused_bytes["error"]["code"] == -32033
    assert refused_bytes["error"]["data"] == {
        "kind": "HOST_OVERLOADED",
        "inFlight": 255,
        "inFlightBytes": held,
        **bounds,
    }
    assert refused_count["error"]["data"] == {
        "kind": "HOST_OVERLOADED",
        "inFlight": 256,
        "inFlightBytes": held + len(one_more),
        **bounds,
    }
    assert set(answers) == {0, 300, 302, 303}  # the 256 listens stayed in flight, unanswered
