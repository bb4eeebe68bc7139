"""The public link API other parts build on (``PluginLink.request``, ``on_request``, era and capabilities),
driven against the real echo fixture process (no hostd in between).

Classes covered: a server-to-client request answered by the wrong party or not at all (handler result,
handler error, no handler, ``ping`` always by the link); a generic request's outcome misreported (result,
JSON-RPC error, cancellation reaching the server as ``notifications/cancelled``). They failed before the
link API existed (no ``request``, no ``on_request``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.mcp.link import PluginLink, PluginRequestError, RequestHandler
from hostd.mcp.transport.stdio import StdioLink
from hostd.wire import lazy
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.redact import Redactor
from sandbox.environment import EnvPolicy
from sandbox.launch import resolve_launch
from sandbox.process import spawn

ECHO = Path(__file__).resolve().parent.parent / "fixtures" / "mcp-echo"
HOST_ENV = {"PATH": f"{os.path.dirname(os.path.realpath(sys.executable))}:/usr/bin:/bin", "LANG": "C.UTF-8"}


async def _ignore(*_args: Any) -> None:
    return None


@asynccontextmanager
async def open_link(*args: str, on_request: RequestHandler | None = None) -> AsyncIterator[PluginLink]:
    """The echo fixture running ``args``, linked and started (direct spawn: no shim)."""
    launch = resolve_launch("python3", ["server.py", *args], ECHO, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir="/tmp")
    process = await spawn(launch)
    link = StdioLink(
        "echo", process, redact=Redactor([]), on_log=_ignore, on_notification=_ignore, on_request=on_request
    )
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(link.run, 20.0)
            yield link
            link.close()
    finally:
        with trio.CancelScope(shield=True):
            await process.stop(grace=1.0)


async def echo_replies(link: PluginLink) -> dict[str, Any]:
    result = await link.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    return dict(result["structuredContent"]["replies"])


async def test_the_link_reports_era_version_and_capabilities() -> None:
    with trio.fail_after(30):
        async with open_link() as link:
            assert (link.era, link.protocol_version) == ("legacy", "2025-11-25")
            assert link.server_capabilities == {"tools": {"listChanged": True}}


async def test_server_requests_go_to_on_request_and_its_errors_become_json_rpc_errors() -> None:
    asked: list[tuple[str, Any]] = []

    async def answer(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        asked.append((method, params))
        if method == "roots/list":
            return {"roots": [{"uri": "file:///granted", "name": "granted"}]}
        raise PluginRequestError(-32001, "the user declined", {"why": "declined"})

    with trio.fail_after(30):
        async with open_link("--variant", "server-requests", on_request=answer) as link:
            replies = await echo_replies(link)
    assert replies == {
        "ping": {},  # answered by the link itself, never the handler
        "roots/list": {"roots": [{"uri": "file:///granted", "name": "granted"}]},
        "sampling/createMessage": {"code": -32001, "message": "the user declined", "data": {"why": "declined"}},
    }
    assert [method for method, _ in asked] == ["roots/list", "sampling/createMessage"]
    assert asked[1][1] == {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 16}


async def test_without_a_handler_server_requests_get_method_not_found() -> None:
    with trio.fail_after(30):
        async with open_link("--variant", "server-requests") as link:
            replies = await echo_replies(link)
    assert replies == {
        "ping": {},
        "roots/list": {"code": -32601, "message": "hostd does not serve roots/list"},
        "sampling/createMessage": {"code": -32601, "message": "hostd does not serve sampling/createMessage"},
    }


async def test_request_returns_the_result_and_raises_the_servers_error() -> None:
    with trio.fail_after(30):
        async with open_link() as link:
            result = await link.request("tools/call", {"name": "echo", "arguments": {"text": "hé"}})
            assert result["structuredContent"] == {"text": "hé", "length": 2}
            with pytest.raises(PluginRequestError) as missing:
                await link.request("no/such/method", {})
            assert (missing.value.code, missing.value.message) == (-32601, "Method not found: no/such/method")
            with pytest.raises(PluginRequestError) as failed:
                await link.request("tools/call", {"name": "fail", "arguments": {"code": -32042, "message": "m"}})
            assert (failed.value.code, failed.value.message) == (-32042, "m")


async def test_cancelling_a_request_sends_cancelled_and_progress_reaches_the_caller() -> None:
    steps: list[tuple[float, float | None, str | None]] = []
    with trio.fail_after(30):
        async with open_link() as link:
            with trio.CancelScope() as scope:

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    steps.append((progress, total, message))
                    scope.cancel()  # the caller gives up after the first step

                await link.request(
                    "tools/call", {"name": "sleep", "arguments": {"seconds": 20, "steps": 20}}, on_progress=on_progress
                )
            assert scope.cancelled_caught
            seen = (await link.request("tools/call", {"name": "seen", "arguments": {}}))["structuredContent"]
            assert link.orphans == 0
    assert steps == [(1, 20, "step 1/20")]
    assert seen["notifications"] == ["notifications/initialized", "notifications/cancelled"]
    assert len(seen["cancelled"]) == 1


#: Exits 1 without reading stdin (its end closed), its stdout kept open by a child: the exit is seen only by the
#: exit watch, so writing ``initialize`` fails with EPIPE first, every time.
EXITS_LEAVING_STDOUT_OPEN = (
    "import os, subprocess, sys; os.close(0); subprocess.Popen(['sleep', '60'], stdin=subprocess.DEVNULL); sys.exit(1)"
)


async def test_a_server_that_exited_before_its_first_message_is_reported_by_its_exit() -> None:
    """The class: a pipe's end reported in place of the exit that caused it (issue 28). The server has exited
    (and been waited for) before the link writes ``initialize``, and nothing closed its stdout: that write
    fails with EPIPE before the exit is seen, and the start failure names the exit status, as when the exit
    is seen first, never "closed its stdin"."""
    launch = resolve_launch(
        "python3", ["-c", EXITS_LEAVING_STDOUT_OPEN], ECHO, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir="/tmp"
    )
    await lazy.load_async("hostd.mcp.handshake", "the test")  # loaded, as in a hostd that started one plugin
    process = await spawn(launch)
    try:
        assert await process.wait() == 1
        link = StdioLink("echo", process, redact=Redactor([]), on_log=_ignore, on_notification=_ignore)
        with trio.fail_after(30), pytest.raises(HostError) as failed:
            await link.run(20.0, task_status=trio.TASK_STATUS_IGNORED)
        assert failed.value.kind is ErrorKind.PLUGIN_START_FAILED
        assert failed.value.data["reason"] == "exited with code 1 during start"
        assert link.failure == "exited with code 1"
    finally:
        with trio.CancelScope(shield=True):
            await process.stop(grace=1.0)
