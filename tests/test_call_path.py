"""The call path's fast path keeps every rule of the slow one (hostd/control/server.py, hostd/wire/pipes.py).

Replies are written inline by the task that made them while the outbox is idle;
requests run on parked worker tasks that are woken, not started. The class of
fault these guard against: *a shortcut that lets one message overtake, cut into
or replace another, or lets one request's wait hold up the rest*. Each test runs a
real hostd with the echo fixture; the outbox tests use a real pipe.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import orjson
import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from hostd.control.outbox import Outbox
from hostd.wire.pipes import write_now
from tests.conftest import MakePlugin, ready, spawn_hostd
from tests.waiting import until

#: A reply far over a pipe's buffer (64 KiB on Linux): the inline write can only take its start.
LARGE = 1_000_000


async def test_a_reply_larger_than_the_pipe_is_never_cut_into_by_the_replies_after_it(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    await ready(hostd, make_plugin())
    # Each large reply is written partly inline; the calls and pings answered meanwhile must queue
    # behind its rest. A reply written into the middle of it would make a line that is not JSON.
    large = [
        await hostd.start("tools/call", {"name": "mcp-echo.large", "arguments": {"bytes": LARGE}}) for _ in range(3)
    ]
    small = [
        await hostd.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": f"t{i}"}}) for i in range(40)
    ]
    pings = [await hostd.start("ping", {}) for _ in range(40)]
    with trio.fail_after(60):
        for call in large:
            assert (await call())["content"] == [{"type": "text", "text": "x" * LARGE}]
        assert [(await call())["structuredContent"]["text"] for call in small] == [f"t{i}" for i in range(40)]
        assert [await ping() for ping in pings] == [{}] * 40
    assert hostd.stray == []


async def test_a_hung_plugin_blocks_neither_ping_nor_another_plugin_and_every_hung_call_cancels(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    await ready(hostd, make_plugin("hung", "never-answers"))
    await ready(hostd, make_plugin())
    # More hung calls than workers are kept parked (16): each holds a worker of its own.
    hung = [
        await hostd.start("tools/call", {"name": "hung.sleep", "arguments": {"seconds": 0, "steps": 0}})
        for _ in range(40)
    ]
    with trio.fail_after(30):
        assert await hostd.request("ping", {}) == {}
        echoed = await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "alive"}})
        assert echoed["structuredContent"]["text"] == "alive"
        for call in hung:
            await hostd.notify("$/cancelRequest", {"id": call.request_id})  # type: ignore[attr-defined]
        for call in hung:
            with pytest.raises(RpcError) as cancelled:
                await call()
            assert (cancelled.value.code, cancelled.value.kind) == (-32800, "REQUEST_CANCELLED")
        # The workers that served the cancelled calls serve the next ones.
        again = [
            await hostd.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": f"n{i}"}})
            for i in range(40)
        ]
        assert [(await call())["structuredContent"]["text"] for call in again] == [f"n{i}" for i in range(40)]


async def test_cancelling_one_call_on_a_reused_worker_cancels_that_call_only(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    record = tmp_path / "shared" / "received.jsonl"
    async with spawn_hostd(tmp_path) as client:
        await ready(client, make_plugin(args=["--record", str(record)]))
        for round_ in range(3):  # the same parked workers serve each round
            slow = await client.start(
                "tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 600}}
            )
            other = await client.start(
                "tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 0.2, "steps": 2}}
            )
            rid = slow.request_id
            await client.wait_for("$/progress", lambda n, rid=rid: n["requestId"] == rid)
            await client.notify("$/cancelRequest", {"id": rid})
            with trio.fail_after(30):
                with pytest.raises(RpcError) as cancelled:
                    await slow()
                assert cancelled.value.code == -32800
                assert (await other())["content"] == [{"type": "text", "text": "slept 0.2"}]

            def plugin_cancelled(count: int = round_ + 1) -> bool:
                lines = record.read_text().splitlines() if record.exists() else []
                methods = [orjson.loads(line)["msg"].get("method") for line in lines]
                return methods.count("notifications/cancelled") == count

            await until(plugin_cancelled)  # the plugin was told, once per cancelled call


def _pipe() -> tuple[trio.lowlevel.FdStream, int]:
    """A real pipe: hostd's end as trio sees stdout, and the fd the test reads."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    return trio.lowlevel.FdStream(write_fd), read_fd


def _fill(stream: trio.lowlevel.FdStream) -> int:
    """Write filler until the pipe is full (a parent that is behind); return the bytes written."""
    total = 0
    while sent := write_now(stream, b"f" * 4096):
        total += sent
    return total


def _drain(read_fd: int) -> bytes:
    out = bytearray()
    while True:
        try:
            chunk = os.read(read_fd, 65536)
        except BlockingIOError:
            return bytes(out)
        out += chunk


async def test_outbox_inline_write_goes_first_and_its_rest_is_never_replaced_or_overtaken() -> None:
    stream, read_fd = _pipe()
    try:
        outbox = Outbox(1024, write_now=functools.partial(write_now, stream))
        # Idle and empty: written at once, nothing waits.
        outbox.put_state("k", b"S0\n")
        outbox.put_reply(b"R0\n")
        assert outbox.bytes == 0
        assert _drain(read_fd) == b"S0\nR0\n"
        # The parent is behind: the pipe takes only the start of the next message (one page is free;
        # a write over PIPE_BUF may be split, a smaller one never is).
        filled = _fill(stream)
        assert len(os.read(read_fd, 4096)) == 4096
        first = b"S1" + b"s" * 9997 + b"\n"
        outbox.put_state("k", first)  # 4096 bytes out, the rest waits
        rest = len(first) - 4096
        assert outbox.bytes == rest and outbox.over_budget
        written = _drain(read_fd)  # the parent catches up: the pipe has room again
        reply = b"R1" + b"r" * 997 + b"\n"
        outbox.put_reply(reply)  # but the rest of the first is still queued: this one goes behind it
        assert outbox.bytes == rest + len(reply)
        assert _drain(read_fd) == b""
        # Over budget a queued state notification with the same key is replaced; the rest of one
        # whose start is out must not be (the parent would get half of one and half of another).
        outbox.put_state("k", b"S2\n")
        assert outbox.bytes == rest + len(reply) + 3
        taken = outbox.take(1 << 20, trio.current_time())
        outbox.written(taken)
        assert len(written) == filled and written.endswith(first[:4096])
        assert b"".join(entry.data for entry in taken) == first[4096:] + reply + b"S2\n"
        assert outbox.bytes == 0
        # The writer's batch is out: the next message goes inline again.
        outbox.put_reply(b"R2\n")
        assert outbox.bytes == 0 and _drain(read_fd) == b"R2\n"
    finally:
        stream.close()
        os.close(read_fd)


async def test_outbox_never_writes_inline_past_a_batch_the_writer_holds() -> None:
    stream, read_fd = _pipe()
    try:
        outbox = Outbox(1024, write_now=functools.partial(write_now, stream))
        _fill(stream)
        outbox.put_reply(b"A\n")  # the pipe is full: queued
        taken = outbox.take(1 << 20, trio.current_time())  # the writer holds it (about to send_all)
        _drain(read_fd)
        outbox.put_reply(b"B\n")  # the queue is empty, but A is not out: B must wait behind it
        assert outbox.bytes == 4
        assert _drain(read_fd) == b""
        outbox.written(taken)
        assert [entry.data for entry in outbox.take(1 << 20, trio.current_time())] == [b"B\n"]
    finally:
        stream.close()
        os.close(read_fd)
