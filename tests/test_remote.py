"""Remote plugins over HTTP: real SDK servers on 127.0.0.1 driven through a real hostd (issue 15).

The fixture (fixtures/remote/remote_server.py) is the SDK v2 server over Streamable HTTP (it serves
both eras), over legacy HTTP+SSE, or an endpoint that answers every POST with 404, 405 or 500.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from hostd.cli.client import HostdClient, RequestHandler, RpcError, plugin_environment
from tests.conftest import FIXTURES, ready

SERVER = FIXTURES / "remote" / "remote_server.py"
TOOLS = ["ask", "drop", "echo", "fail", "large", "slow"]


@asynccontextmanager
async def fixture_server(command: list[str]) -> AsyncIterator[int]:
    """Run a fixture server that prints ``PORT <n>`` once it listens; yield the port; kill it at the end."""
    async with trio.open_nursery() as nursery:
        process = await nursery.start(functools.partial(trio.run_process, command, stdout=subprocess.PIPE, check=False))
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, f"{command[1]} exited before listening"
            line += chunk
        assert line.startswith(b"PORT ")
        try:
            yield int(line.split()[1])
        finally:
            process.kill()
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def remote_server(mode: str, port: int = 0) -> AsyncIterator[int]:
    """Run fixtures/remote/remote_server.py in ``mode``; yield its port."""
    async with fixture_server([sys.executable, str(SERVER), mode, "--port", str(port)]) as bound:
        yield bound


@asynccontextmanager
async def asking_parent(
    tmp_path: Path, mode: str, serves: dict[str, Any], parent: RequestHandler
) -> AsyncIterator[tuple[HostdClient, str]]:
    """A remote fixture server in ``mode`` and a hostd whose parent declares ``serves`` and answers the
    requests hostd forwards with ``parent``; yield the client and the server's MCP url."""
    hello = {"clientInfo": {"name": "test", "version": "0"}, "capabilities": serves}
    args = ["--state-dir", str(tmp_path / "state")]
    async with (
        remote_server(mode) as port,
        HostdClient.spawn(args, env=plugin_environment(), initialize=hello) as client,
    ):
        client.on_request = parent
        yield client, f"http://127.0.0.1:{port}/mcp"


def remote_plugin(
    tmp_path: Path, url: str, plugin_id: str = "remote", permissions: tuple[str, ...] = (), **backend: Any
) -> Path:
    """A plugin folder whose manifest reaches ``url`` (``remote.use`` and ``permissions``)."""
    folder = tmp_path / plugin_id
    folder.mkdir()
    manifest = {
        "id": plugin_id,
        "name": "Remote fixture",
        "version": "1.0.0",
        "permissions": ["remote.use", *permissions],
        "contributes": {"tools": [f"{plugin_id}.{name}" for name in TOOLS]},
        "backend": {"type": "mcp", "transport": "streamable-http", "url": url, **backend},
    }
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


@pytest.mark.parametrize(
    "command",
    [
        [str(SERVER), "streamable-http"],
        [str(SERVER), "sse"],
        [str(FIXTURES / "remote" / "oauth_server.py")],
        [str(FIXTURES / "remote" / "header_server.py")],
    ],
    ids=["remote-streamable-http", "remote-sse", "oauth", "header"],
)
async def test_a_fixture_server_accepts_as_soon_as_it_prints_its_port(command: list[str]) -> None:
    """Every remote fixture's ``PORT <n>`` line comes after its socket listens (fixtures/remote/remote_server.py
    ``run``): a connect made the moment the line is read succeeds. Before, the line came before uvicorn's
    ``listen`` and this connect was refused (``ConnectionRefusedError``); under load a test's hostd met the same
    refusal (``ConnectError: all attempts to connect``, tests/test_remote_oauth.py in a full run)."""
    async with fixture_server([sys.executable, *command]) as port:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.aclose()


@pytest.mark.parametrize(("protocol", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_streamable_http_in_both_eras(hostd: HostdClient, tmp_path: Path, protocol: str, version: str) -> None:
    async with remote_server("streamable-http") as port:
        folder = remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp", protocol=protocol)
        status = await ready(hostd, folder)
        assert (status["status"], status["transport"], status["protocol_version"]) == (
            "ready",
            "streamable-http",
            version,
        )
        assert status["tools_count"] == len(TOOLS)
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "hi"}})
        assert result["content"] == [{"type": "text", "text": "hi"}]
        with pytest.raises(RpcError) as failed:
            await hostd.request("tools/call", {"name": "remote.fail", "arguments": {}})
        assert failed.value.kind == "MCP_TOOL_CALL_FAILED"
        await hostd.request("plugins/disable", {"id": "remote"})


async def test_progress_reaches_the_parent(hostd: HostdClient, tmp_path: Path) -> None:
    async with remote_server("streamable-http") as port:
        await ready(hostd, remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp", protocol="legacy"))
        response = await hostd.start("tools/call", {"name": "remote.slow", "arguments": {"steps": 3}})
        result = await response()
        assert result["content"] == [{"type": "text", "text": "done"}]
        rid = response.request_id  # type: ignore[attr-defined]
        progress = [n["progress"] for n in hostd.seen("$/progress") if n["requestId"] == rid]
        # Progress is coalesced (latest wins at a bounded rate): the last value always arrives, as an int.
        assert progress[-1] == 3 and all(type(value) is int for value in progress), progress
        await hostd.request("plugins/disable", {"id": "remote"})


async def test_legacy_sse_when_configured(hostd: HostdClient, tmp_path: Path) -> None:
    async with remote_server("sse") as port:
        folder = remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp", transport="sse")
        status = await ready(hostd, folder)
        assert (status["status"], status["transport"], status["protocol_version"]) == ("ready", "sse", "2025-11-25")
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "over sse"}})
        assert result["content"] == [{"type": "text", "text": "over sse"}]
        await hostd.request("plugins/disable", {"id": "remote"})


@pytest.mark.parametrize("status_code", [404, 405])
async def test_first_answer_404_or_405_falls_back_to_sse(hostd: HostdClient, tmp_path: Path, status_code: int) -> None:
    async with remote_server(f"status-{status_code}") as port:
        status = await ready(hostd, remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp"))
        assert (status["status"], status["protocol_version"]) == ("ready", "2025-11-25")
        logs = [n["message"] for n in hostd.seen("plugins/log") if n["plugin"] == "remote"]
        assert any(f"with {status_code}; using the legacy HTTP+SSE transport" in m for m in logs), logs
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "fell back"}})
        assert result["content"] == [{"type": "text", "text": "fell back"}]
        await hostd.request("plugins/disable", {"id": "remote"})


async def test_first_answer_500_does_not_fall_back(hostd: HostdClient, tmp_path: Path) -> None:
    async with remote_server("status-500") as port:
        with pytest.raises(RpcError) as failed:
            await ready(hostd, remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp"))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.data["status"] == 500
        assert "(HTTP 500)" in failed.value.data["reason"]
        assert not [n for n in hostd.seen("plugins/log") if "legacy HTTP+SSE" in n["message"]]


async def test_a_dropped_stream_fails_the_call_and_the_plugin_reconnects(hostd: HostdClient, tmp_path: Path) -> None:
    async with remote_server("streamable-http") as port:
        await ready(hostd, remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp"))
        with pytest.raises(RpcError) as failed:
            await hostd.request("tools/call", {"name": "remote.drop", "arguments": {}})
        assert failed.value.kind in ("PLUGIN_HOST_UNAVAILABLE", "MCP_UPSTREAM_ERROR"), failed.value.data
    # The same address serves again: the restart policy reconnects (its backoff) and the plugin is ready.
    async with remote_server("streamable-http", port):
        await hostd.wait_for(
            "plugins/statusChanged", lambda s: s["status"] == "ready" and s["restarts"] >= 1, timeout=60
        )
        result = await hostd.request("tools/call", {"name": "remote.echo", "arguments": {"text": "again"}})
        assert result["content"] == [{"type": "text", "text": "again"}]
        await hostd.request("plugins/disable", {"id": "remote"})


@pytest.mark.parametrize("mode", ["streamable-http-json", "streamable-http"])
async def test_an_answer_over_the_bound_fails_only_its_call(hostd: HostdClient, tmp_path: Path, mode: str) -> None:
    # The class: a body hostd reads from a remote server is bounded like a stdio frame, whether it
    # comes as one JSON body or as an SSE event; the link goes on serving.
    async with remote_server(mode) as port:
        folder = remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp", max_message_bytes=64 * 1024)
        await ready(hostd, folder)
        with pytest.raises(RpcError) as failed:
            await hostd.request("tools/call", {"name": "remote.large", "arguments": {"size": 100_000}})
        assert failed.value.kind in ("MCP_UPSTREAM_ERROR", "PLUGIN_HOST_UNAVAILABLE"), failed.value.data
        result = await hostd.request("tools/call", {"name": "remote.large", "arguments": {"size": 10}})
        assert result["content"] == [{"type": "text", "text": "x" * 10}]
        await hostd.request("plugins/disable", {"id": "remote"})


async def test_a_redirect_to_another_origin_is_not_followed(hostd: HostdClient, tmp_path: Path) -> None:
    async with remote_server("streamable-http") as target, remote_server(f"redirect-http://localhost:{target}") as port:
        with pytest.raises(RpcError) as failed:
            await ready(hostd, remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp"))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert f"http://localhost:{target}/mcp" in failed.value.message
        assert "not followed" in failed.value.message


#: The parent's answer to each client feature the ``ask`` tool requests.
ANSWERS: dict[str, dict[str, Any]] = {
    "elicitation/create": {"action": "accept", "content": {"name": "Ada"}},
    "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"},
}


@pytest.mark.parametrize("method", sorted(ANSWERS))
@pytest.mark.parametrize(("mode", "protocol"), [("streamable-http", "legacy"), ("sse", "legacy")])
async def test_client_features_reach_the_parent_from_a_remote_server(
    tmp_path: Path, mode: str, protocol: str, method: str
) -> None:
    # Bug class: a client feature (sampling, elicitation) wired for stdio plugins only; a remote
    # server's request then found no handler (its link was built without one) and the answer was
    # written to a stdin the remote link does not have, which killed the connection.
    serves: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}}
    asked: list[tuple[str, dict[str, Any]]] = []

    async def parent(name: str, params: dict[str, Any]) -> Any:
        asked.append((name, params))
        return ANSWERS[name]

    async with asking_parent(tmp_path, mode, serves, parent) as (client, url):
        folder = remote_plugin(tmp_path, url, permissions=("mcp.elicitation", "mcp.sampling"), protocol=protocol)
        status = await ready(client, folder)
        assert status["status"] == "ready", status
        result = await client.request("tools/call", {"name": "remote.ask", "arguments": {"method": method}})
    assert [name for name, _ in asked] == [method]
    assert asked[0][1]["plugin"] == "remote"
    answer = json.loads(result["content"][0]["text"])
    assert {key: answer[key] for key in ANSWERS[method]} == ANSWERS[method]


@pytest.mark.parametrize("mode", ["streamable-http", "sse"])
async def test_a_remote_server_asking_for_a_feature_not_granted_is_refused_and_stays_connected(
    tmp_path: Path, mode: str
) -> None:
    asked: list[str] = []

    async def parent(name: str, params: dict[str, Any]) -> Any:
        asked.append(name)
        return ANSWERS[name]

    async with asking_parent(tmp_path, mode, {"elicitation": {"form": {}}}, parent) as (client, url):
        status = await ready(client, remote_plugin(tmp_path, url, protocol="legacy"))  # mcp.elicitation not declared
        assert status["status"] == "ready", status
        with pytest.raises(RpcError) as refused:
            await client.request("tools/call", {"name": "remote.ask", "arguments": {"method": "elicitation/create"}})
        assert "elicitation was not offered to plugin remote" in refused.value.message
        echoed = await client.request("tools/call", {"name": "remote.echo", "arguments": {"text": "still here"}})
        assert echoed["content"][0]["text"] == "still here"
        listed = await client.request("plugins/list", {})
    assert asked == []
    assert [plugin["status"] for plugin in listed["plugins"]] == ["ready"]


async def test_the_http_libraries_log_no_request_line(tmp_path: Path) -> None:
    """hostd's stderr at the default level (info) carries no request line of httpx2/httpcore: such a line holds
    the full URL, whose query may carry a credential (an OAuth redirect's code, a key in the URL). The class:
    a library's own INFO logging that hostd's redactor never sees; every library logger is capped at WARNING."""
    log = tmp_path / "hostd.log"
    with log.open("wb") as sink:
        async with (
            remote_server("streamable-http") as port,
            HostdClient.spawn(
                ["--state-dir", str(tmp_path / "state"), "--log-level", "info"],
                env=plugin_environment(),
                stderr=sink.fileno(),
            ) as client,
        ):
            folder = remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp?key=sekrit-in-query")
            status = await ready(client, folder)
            assert status["status"] == "ready"
            result = await client.request("tools/call", {"name": "remote.echo", "arguments": {"text": "hi"}})
            assert result["content"] == [{"type": "text", "text": "hi"}]
    text = log.read_text()
    assert "hostd INFO" in text  # hostd's own info lines are there: the capture works
    assert [line for line in text.splitlines() if "HTTP Request" in line or "sekrit-in-query" in line] == []
