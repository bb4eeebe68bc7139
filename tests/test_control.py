"""The control channel and the process contract, against a real hostd process."""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from tests.conftest import MakePlugin, ready, spawn_hostd


def _replies(client: HostdClient) -> list[dict[str, object]]:
    return [m for m in client.stray if isinstance(m, dict)]


async def _wait_replies(client: HostdClient, count: int) -> list[dict[str, object]]:
    await client.wait_until(lambda: len(_replies(client)) >= count, timeout=10)
    return _replies(client)


async def test_requests_before_initialize_get_32002(tmp_path: Path) -> None:
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "s")], handshake=False) as client:
        with pytest.raises(RpcError) as early:
            await client.request("plugins/list", {})
        assert early.value.code == -32002
        assert early.value.kind == "SERVER_NOT_INITIALIZED"
        with pytest.raises(RpcError) as early_ping:
            await client.request("ping", {})
        assert early_ping.value.code == -32002
        result = await client.request("initialize", {"clientInfo": {"name": "t", "version": "1"}})
        assert result["serverInfo"]["name"] == "hostd"
        assert result["protocolVersion"] == "0"
        assert await client.request("plugins/list", {}) == {"plugins": []}


async def test_bad_frames_are_answered_with_id_null_and_the_channel_keeps_serving(tmp_path: Path) -> None:
    async with spawn_hostd(tmp_path, "--max-message-bytes", "1024") as client:
        await client.send_raw(b"this is not json\n")
        await client.send_raw(b'{"jsonrpc":"2.0","id":' + b"1" * 2000 + b"}\n")
        await client.send_raw(b'{"jsonrpc":"1.0","id":5,"method":"ping"}\n')
        await client.send_raw(b"[1,2]\n")
        await client.send_raw(b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n')
        replies = await _wait_replies(client, 5)
        kinds = [(r["id"], r["error"]["data"]["kind"]) for r in replies]  # type: ignore[index]
        assert kinds == [
            (None, "PARSE_ERROR"),
            (None, "FRAME_TOO_LARGE"),
            (5, "INVALID_REQUEST"),
            (None, "INVALID_REQUEST"),
            (None, "INVALID_REQUEST"),
        ]
        assert replies[1]["error"]["data"]["limit"] == 1024  # type: ignore[index]
        assert await client.request("ping", {}) == {}
        with pytest.raises(RpcError) as unknown:
            await client.request("plugins/frobnicate", {})
        assert unknown.value.code == -32601
        with pytest.raises(RpcError) as bad_params:
            await client.request("plugins/enable", {"identifier": "x"})
        assert bad_params.value.kind == "INVALID_PARAMS"
        assert [e["field"] for e in bad_params.value.data["errors"]] == ["id", "identifier"]


async def test_slow_call_does_not_delay_other_requests(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    # A call that would take 60 s is in flight in the plugin (its first progress arrived); a ping and
    # another call are answered meanwhile, then the slow one is cancelled: ordering, not a speed target.
    slow = await hostd.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 600}})
    rid = slow.request_id  # type: ignore[attr-defined]
    await hostd.wait_for("$/progress", lambda n: n["requestId"] == rid)
    assert await hostd.request("ping", {}) == {}
    echoed = await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "quick"}})
    assert echoed["structuredContent"]["text"] == "quick"
    await hostd.notify("$/cancelRequest", {"id": rid})
    with pytest.raises(RpcError) as cancelled:
        await slow()
    assert cancelled.value.code == -32800


async def test_sigterm_is_an_orderly_shutdown(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path) as client:
        await ready(client, make_plugin())
        client.process.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            code = await client.process.wait()
        assert code == 0
        states = [s["status"] for s in client.seen("plugins/statusChanged")]
        assert states[-1] == "stopped"


async def test_stdin_eof_stops_every_plugin(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path) as client:
        await ready(client, make_plugin())
        assert client.process.stdin is not None
        await client.process.stdin.aclose()
        with trio.fail_after(15):
            assert await client.process.wait() == 0


async def test_exit_without_shutdown_is_code_1(tmp_path: Path) -> None:
    async with spawn_hostd(tmp_path) as client:
        await client.notify("exit", None)
        with trio.fail_after(10):
            assert await client.process.wait() == 1


async def test_ready_1_on_notify_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(10)
        env = plugin_environment()
        env["NOTIFY_SOCKET"] = path
        async with HostdClient.spawn(["--state-dir", str(tmp_path / "s")], env=env):
            message = await trio.to_thread.run_sync(sock.recv, 64)
        assert message == b"READY=1"


async def test_sighup_rereads_manifests(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as client:
        info = await ready(client, folder)
        assert info["status"] == "ready"
        listed = await client.request("plugins/list", {})
        assert listed["plugins"][0]["launch"]["approved"] is True
        manifest = folder / "plugin.yaml"
        manifest.write_text(
            manifest.read_text().replace("args:\n  - server.py", "args:\n  - server.py\n  - --record\n  - r.jsonl")
        )
        client.process.send_signal(signal.SIGHUP)
        note = await client.wait_for("plugins/log", lambda n: "manifest changed" in n["message"])
        assert note["plugin"] == "mcp-echo"
        listed = await client.request("plugins/list", {})
        assert listed["plugins"][0]["launch"]["approved"] is False
        assert listed["plugins"][0]["launch"]["args"] == ["server.py", "--record", "r.jsonl"]
        with pytest.raises(RpcError) as gated:
            await client.request("plugins/restart", {"id": "mcp-echo"})
        assert gated.value.kind == "MCP_TRUST_APPROVAL_REQUIRED"


async def test_usage_error_exits_2() -> None:
    done = await trio.run_process(
        [sys.executable, "-m", "hostd", "serve", "--no-such-flag"],
        stdin=subprocess.DEVNULL,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == b""


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.randint(-(2**63), 2**63 - 1)
    if kind == 3:
        return "".join(rng.choice('ab\u00e9\u2028"\\{}') for _ in range(rng.randrange(12)))
    if kind == 4:
        return rng.choice(["2.0", "initialize", "plugins/list", "tools/call", "$/cancelRequest", "exit!"])
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["jsonrpc", "id", "method", "params", "name", "arguments", "result"]
    return {rng.choice(keys): _random_value(rng, depth + 1) for _ in range(rng.randrange(5))}


async def test_fuzzed_input_never_crashes_and_every_request_is_answered(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    async with spawn_hostd(tmp_path) as client:
        pending = []
        for index in range(600):
            choice = rng.randrange(4)
            if choice == 0:
                frame = bytes(rng.randrange(256) for _ in range(rng.randrange(60))).replace(b"\n", b"")
            elif choice == 1:
                frame = orjson.dumps(_random_value(rng))[: rng.randrange(1, 80)]  # truncated lines
            else:
                value = _random_value(rng)
                if isinstance(value, dict) and value.get("method") == "exit!":
                    value["method"] = "exit?"
                frame = orjson.dumps(value)
            await client.send_raw(frame + b"\n")
            if index % 20 == 0:
                pending.append(await client.start("ping", {}, id=f"fuzz-{index}"))
        for response in pending:
            with trio.fail_after(10):
                assert await response() == {}
        assert client.process.returncode is None
        assert await client.request("plugins/list", {}) == {"plugins": []}


async def _read_until(stream: trio.abc.ReceiveStream, seen: bytearray, needle: bytes) -> None:
    with trio.fail_after(10):
        while needle not in seen:
            chunk = await stream.receive_some(65536)
            assert chunk, f"hostd's stderr ended before {needle!r}: {bytes(seen)!r}"
            seen += chunk


async def test_second_sigterm_skips_the_graces(tmp_path: Path, make_plugin: MakePlugin) -> None:
    # slow-exit writes its marker a while after stdin EOF, and an orderly stop waits for it within the grace
    # (test_corpus_processes::test_e7_slow_exit_gets_its_grace). A second SIGTERM, sent as soon as hostd
    # says the first one started the shutdown, skips the graces: the plugin is killed before its marker.
    # Its delay here (60 s) is far past any grace, so only skipping the graces can end hostd in time.
    shared = tmp_path / "shared"
    shared.mkdir()
    env = {"ECHO_MARKER_DIR": str(shared), "ECHO_EXIT_DELAY": "60"}
    folder = make_plugin(variant="slow-exit", backend={"env": env})
    args = ["--state-dir", str(tmp_path / "state"), "--allow-write", str(shared)]
    async with HostdClient.spawn(args, env=plugin_environment(), stderr=subprocess.PIPE) as client:
        await ready(client, folder)
        stderr = client.process.stderr
        assert stderr is not None
        seen = bytearray()
        client.process.send_signal(signal.SIGTERM)
        await _read_until(stderr, seen, b"SIGTERM: shutting down")
        client.process.send_signal(signal.SIGTERM)
        await _read_until(stderr, seen, b"second SIGTERM: skipping the graces")
        with trio.fail_after(15):
            assert await client.process.wait() == 0
    assert not (shared / "exited.marker").exists()


async def test_requests_written_before_shutdown_in_the_same_write_are_answered(tmp_path: Path) -> None:
    """docs/protocol.md, ``shutdown``: *after* it every request gets SHUTTING_DOWN; the requests before it are
    served. The class: work the parent asked for before ``shutdown`` (pipelined in one write, or still waiting
    for the host to load) dropped by the shutdown instead of answered (issue 28)."""
    async with spawn_hostd(tmp_path) as client:
        lines = [
            {"jsonrpc": "2.0", "id": 101, "method": "plugins/list"},
            {"jsonrpc": "2.0", "id": 102, "method": "nope/x"},
            {"jsonrpc": "2.0", "id": 103, "method": "tools/list", "params": {}},
            {"jsonrpc": "2.0", "id": 104, "method": "shutdown"},
            {"jsonrpc": "2.0", "id": 105, "method": "ping"},
        ]
        await client.send_raw(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        replies = {reply["id"]: reply for reply in await _wait_replies(client, 5)}
        assert replies[101]["result"] == {"plugins": []}
        assert replies[102]["error"]["data"]["kind"] == "METHOD_NOT_FOUND"  # type: ignore[index]
        assert replies[103]["result"] == {"tools": [], "revision": 0}
        assert replies[104]["result"] is None
        assert replies[105]["error"]["data"]["kind"] == "SHUTTING_DOWN"  # type: ignore[index]
