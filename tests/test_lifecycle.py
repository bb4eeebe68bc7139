"""End to end: a parent drives a real hostd through the echo fixture plugin."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from sandbox import cgroups
from tests.conftest import ECHO_TOOLS, MakePlugin, ready, spawn_hostd
from tests.platform_facts import need_layers, platform_offers


async def test_enable_lists_both_pages_and_calls_echo(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    status = await ready(hostd, make_plugin())
    assert status["status"] == "ready"
    assert status["tools_count"] == 7
    assert status["server_name"] == "mcp-echo"
    assert status["server_version"] == "1.0.0"
    assert status["protocol_version"] == "2025-11-25"
    listing = await hostd.request("tools/list", {})
    assert [t["name"] for t in listing["tools"]] == sorted(f"mcp-echo.{t}" for t in ECHO_TOOLS)
    echo = next(t for t in listing["tools"] if t["name"] == "mcp-echo.echo")
    assert echo["function_name"] == "mcp-echo_echo"
    assert echo["permission"] == "echo.use"
    assert echo["plugin"] == "mcp-echo"
    result = await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "héllo"}})
    assert result == {
        "content": [{"type": "text", "text": "héllo"}],
        "structuredContent": {"text": "héllo", "length": 5},
    }
    states = [n["status"] for n in hostd.seen("plugins/statusChanged")]
    assert states == ["starting", "ready"]
    assert hostd.seen("tools/listChanged") == [{"revision": listing["revision"]}]


async def test_disable_stops_and_unregisters(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    status = await hostd.request("plugins/disable", {"id": "mcp-echo"})
    assert status["status"] == "stopped"
    assert status["tools_count"] == 0
    assert (await hostd.request("tools/list", {}))["tools"] == []
    with pytest.raises(RpcError) as info:
        await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "x"}})
    # Its plugin is installed, not missing: said so, with its state and that retrying will not help.
    assert (info.value.kind, info.value.data["state"], info.value.data["transient"]) == (
        "PLUGIN_NOT_READY",
        "stopped",
        False,
    )


async def test_enable_requires_grant_then_approval(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    info = await hostd.request("plugins/install", {"path": str(make_plugin())})
    assert info["status"] == "stopped"
    assert info["launch"]["args"] == ["server.py"]
    assert info["launch"]["digest"].startswith("sha256:")
    with pytest.raises(RpcError) as denied:
        await hostd.request("plugins/enable", {"id": "mcp-echo"})
    assert denied.value.kind == "PERMISSION_NOT_GRANTED"
    assert denied.value.data["permissions"] == ["echo.inspect", "echo.use"]
    await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": ["echo.use", "echo.inspect"]})
    with pytest.raises(RpcError) as gated:
        await hostd.request("plugins/enable", {"id": "mcp-echo"})
    assert gated.value.kind == "MCP_TRUST_APPROVAL_REQUIRED"
    assert gated.value.data["launch"]["digest"] == info["launch"]["digest"]
    with pytest.raises(RpcError) as wrong:
        await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": "sha256:00"})
    assert wrong.value.kind == "MCP_TRUST_APPROVAL_REQUIRED"
    await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": "mcp-echo"}))["status"] == "ready"


async def test_is_error_and_upstream_error(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    with pytest.raises(RpcError) as failed:
        await hostd.request("tools/call", {"name": "mcp-echo.fail", "arguments": {"message": "nope"}})
    assert failed.value.kind == "MCP_TOOL_CALL_FAILED"
    assert failed.value.data["content"] == [{"type": "text", "text": "nope"}]
    with pytest.raises(RpcError) as invalid:
        await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": 5}})
    assert invalid.value.kind == "INVALID_ARGUMENTS"
    assert invalid.value.data["pointer"] == "/text"
    status = await hostd.request("plugins/status", {"id": "mcp-echo"})
    assert status["status"] == "ready"


async def test_result_too_large(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    ok = await hostd.request("tools/call", {"name": "mcp-echo.large", "arguments": {"bytes": 200_000}})
    assert ok["content"][0]["text"] == "x" * 200_000
    with pytest.raises(RpcError) as big:
        await hostd.request("tools/call", {"name": "mcp-echo.large", "arguments": {"bytes": 4_200_000}})
    assert big.value.kind == "MCP_TOOL_RESULT_TOO_LARGE"
    assert big.value.data["limit"] == 4 * 1024 * 1024


async def test_cancel_request_reaches_the_plugin(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    response = await hostd.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 30, "steps": 300}})
    rid = response.request_id  # type: ignore[attr-defined]
    await hostd.wait_for("$/progress", lambda n: n["requestId"] == rid)  # the plugin is inside the call
    await hostd.notify("$/cancelRequest", {"id": rid})
    with trio.fail_after(2):
        with pytest.raises(RpcError) as cancelled:
            await response()
    assert cancelled.value.code == -32800
    seen = await hostd.request("tools/call", {"name": "mcp-echo.seen", "arguments": {}})
    assert len(seen["structuredContent"]["cancelled"]) == 1
    assert "notifications/cancelled" in seen["structuredContent"]["notifications"]


async def test_timeout_sends_cancelled_and_plugin_stays_ready(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    with pytest.raises(RpcError) as slow:
        await hostd.request("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 30}, "timeoutMs": 300})
    assert slow.value.kind == "TOOL_TIMEOUT"
    seen = await hostd.request("tools/call", {"name": "mcp-echo.seen", "arguments": {}})
    assert len(seen["structuredContent"]["cancelled"]) == 1
    assert (await hostd.request("plugins/status", {"id": "mcp-echo"}))["status"] == "ready"


async def test_progress_is_relayed_with_the_parent_request_id(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    response = await hostd.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 0.4, "steps": 4}})
    result = await response()
    assert result["content"] == [{"type": "text", "text": "slept 0.4"}]
    rid = response.request_id  # type: ignore[attr-defined]
    progress = [n for n in hostd.seen("$/progress") if n["requestId"] == rid]
    assert [n["progress"] for n in progress] == [1, 2, 3, 4]
    assert progress[-1] == {"requestId": rid, "progress": 4, "total": 4, "message": "step 4/4"}


async def test_crash_makes_plugin_unhealthy_and_fails_pending(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path, "--restart", "never") as hostd:
        await _crash_then_restart(hostd, make_plugin)


async def _crash_then_restart(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    pending = await hostd.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 20, "steps": 200}})
    rid = pending.request_id  # type: ignore[attr-defined]
    await hostd.wait_for("$/progress", lambda n: n["requestId"] == rid)  # the call is in flight in the plugin
    with pytest.raises(RpcError) as gone:
        await hostd.request("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 3}})
    assert gone.value.kind == "PLUGIN_HOST_UNAVAILABLE"
    with trio.fail_after(5), pytest.raises(RpcError) as also_gone:
        await pending()
    assert also_gone.value.kind == "PLUGIN_HOST_UNAVAILABLE"
    status = await hostd.request("plugins/status", {"id": "mcp-echo"})
    assert status["status"] == "unhealthy"
    assert status["error"]["reason"] == "exited with code 3"
    assert status["tools_count"] == 0
    restarted = await hostd.request("plugins/restart", {"id": "mcp-echo"})
    assert restarted["status"] == "ready"
    assert restarted["restarts"] == 1


async def test_restart_of_a_disabled_plugin_conflicts(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await hostd.request("plugins/install", {"path": str(make_plugin())})
    with pytest.raises(RpcError) as conflict:
        await hostd.request("plugins/restart", {"id": "mcp-echo"})
    assert conflict.value.kind == "PLUGIN_STATE_CONFLICT"
    assert (await hostd.request("plugins/status", {"id": "mcp-echo"}))["status"] == "stopped"


async def test_crash_is_restarted_with_backoff(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await ready(hostd, make_plugin())
    with pytest.raises(RpcError):
        await hostd.request("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 4}})
    back = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "ready" and s["restarts"] == 1)
    assert back["tools_count"] == 7
    states = [s["status"] for s in hostd.seen("plugins/statusChanged")]
    assert states[:2] == ["starting", "ready"]
    assert "unhealthy" in states[2:]
    unhealthy = next(s for s in hostd.seen("plugins/statusChanged") if s["status"] == "unhealthy")
    assert unhealthy["error"]["kind"] == "PLUGIN_HOST_UNAVAILABLE"
    assert unhealthy["error"]["reason"] == "exited with code 4"
    result = await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "again"}})
    assert result["structuredContent"] == {"text": "again", "length": 5}


async def test_a_failed_enable_is_not_retried(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    # exit-at-start never becomes ready: the first enable fails, and nothing retries an enable failure.
    # (Giving up after 5 crashes in 60 s is the restart policy's arithmetic: tests/test_policy.py.)
    folder = make_plugin(variant="exit-at-start")
    with pytest.raises(RpcError) as failed:
        await ready(hostd, folder)
    assert failed.value.kind == "PLUGIN_START_FAILED"
    assert failed.value.data["reason"] == "exited with code 1 during start"
    assert failed.value.data["stderrTail"] == ["API key missing"]
    status = await hostd.request("plugins/status", {"id": "mcp-echo"})
    assert status["status"] == "error"
    assert status["next_retry_at"] is None


async def test_changed_tool_definition_is_withheld_until_approved(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    folder = make_plugin()
    await ready(hostd, folder)
    (folder / "echo-description.txt").write_text("Now also sends your text somewhere else.")
    restarted = await hostd.request("plugins/restart", {"id": "mcp-echo"})
    assert restarted["status"] == "ready"
    assert restarted["withheld"] == ["mcp-echo.echo"]
    assert restarted["tools_count"] == 6
    names = [t["name"] for t in (await hostd.request("tools/list", {}))["tools"]]
    assert "mcp-echo.echo" not in names
    with pytest.raises(RpcError) as changed:
        await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "x"}})
    assert changed.value.kind == "TOOL_DEFINITION_CHANGED"
    assert changed.value.data["approvedDigest"] != changed.value.data["currentDigest"]
    assert changed.value.data["currentDigest"].startswith("sha256:")
    info = (await hostd.request("plugins/list", {}))["plugins"][0]
    await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})
    status = await hostd.request("plugins/status", {"id": "mcp-echo"})
    assert status["withheld"] == []
    assert status["tools_count"] == 7
    result = await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "x"}})
    assert result["structuredContent"] == {"text": "x", "length": 1}


async def test_timeout_resets_on_progress_up_to_the_maximum(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    folder = make_plugin(
        backend={"tool_timeout_seconds": 0.6, "tool_timeout_reset_on_progress": True, "tool_timeout_max_seconds": 5}
    )
    await ready(hostd, folder)
    # 2 s in 8 steps: progress every 0.25 s keeps a 0.6 s timeout alive.
    result = await hostd.request("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 2, "steps": 8}})
    assert result["content"] == [{"type": "text", "text": "slept 2"}]
    # 8 s in 32 steps would pass the 5 s ceiling.
    with pytest.raises(RpcError) as capped:
        await hostd.request("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 8, "steps": 32}})
    assert capped.value.kind == "TOOL_TIMEOUT"


async def test_isolation_in_force_is_reported(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    status = await ready(hostd, make_plugin())
    expected = ["shim", "rlimits", "no_new_privs"]
    # The layers the kernel offers (asked of it, not of the probe: a layer the sandbox lost fails here).
    expected += [layer for layer in ("landlock-fs", "landlock-scope") if platform_offers(layer)[0]]
    assert [layer for layer in status["isolation"] if layer in expected] == expected
    info = (await hostd.request("plugins/list", {}))["plugins"][0]
    assert info["launch"]["isolation"] == status["isolation"]


async def test_memory_limit_stops_the_plugin_and_names_the_limit(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path, "--max-rss-mb", "100", "--restart", "never") as hostd:
        if cgroups.detect().usable:  # the kernel's bound (issue 29): the hog is ended while it allocates, at start
            with pytest.raises(RpcError) as failed:
                await ready(hostd, make_plugin(variant="hog"))
            limit = failed.value.data["limit"]
            assert 90 * 1024 * 1024 < limit["value"] <= 100 * 1024 * 1024  # the cgroup's peak
            assert "the kernel stopped it for exceeding a limit: memory" in failed.value.message
        else:  # the watchdog's counting: it becomes ready, then is stopped
            await ready(hostd, make_plugin(variant="hog"))
            stopped = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "unhealthy", timeout=20)
            limit = stopped["error"]["limit"]
            assert limit["value"] > 250 * 1024 * 1024
            assert "exceeding a limit" in stopped["error"]["reason"]
        assert limit["limit"] == "rss"
        assert limit["threshold"] == 100 * 1024 * 1024


async def test_a_plugin_that_stops_answering_ping_is_ended_and_calls_fail(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # half-then-silence stops writing anything after its first tools/call.
    args = ("--ping-interval", "0.3", "--ping-timeout", "0.5", "--restart", "never")
    async with spawn_hostd(tmp_path, *args) as hostd:
        await ready(hostd, make_plugin(variant="half-then-silence"))
        pending = await hostd.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "x"}})
        with trio.fail_after(10), pytest.raises(RpcError) as gone:
            await pending()
        assert gone.value.kind == "PLUGIN_HOST_UNAVAILABLE"
        status = await hostd.request("plugins/status", {"id": "mcp-echo"})
        assert status["status"] == "unhealthy"
        assert status["error"]["reason"] == "did not answer ping within 0.5 s"


def user_command(tmp_path: Path, name: str) -> Path:
    """An executable ``tmp_path/user-tools/name`` that runs the echo fixture's server.py: a command only a
    login shell's PATH finds. Returns its path; the folder is its parent."""
    tools = tmp_path / "user-tools"
    tools.mkdir()
    launcher = tools / name
    launcher.write_text('#!/bin/sh\nexec /usr/bin/python3 server.py "$@"\n')
    launcher.chmod(0o755)
    return launcher


def login_shell(tmp_path: Path, tools: Path, first: str = "") -> dict[str, str]:
    """The plugin environment with ``SHELL`` a script ``tmp_path/login-shell`` that runs ``first`` (a shell
    line; "" none), puts ``tools`` first on PATH, then runs the command hostd gives it, as a login shell would."""
    shell = tmp_path / "login-shell"
    lines = ["#!/bin/sh", *([first] if first else []), f'PATH="{tools}:$PATH"', "shift", 'exec /bin/sh "$@"']
    shell.write_text("\n".join(lines) + "\n")
    shell.chmod(0o755)
    env = plugin_environment()
    env["SHELL"] = str(shell)
    return env


async def test_command_found_through_the_login_shell_path(tmp_path: Path, make_plugin: MakePlugin) -> None:
    # A desktop-launched parent has a minimal PATH; the user's profile adds the folder of the command.
    launcher = user_command(tmp_path, "echo-server-xyz")
    tools = launcher.parent
    env = login_shell(tmp_path, tools)
    folder = make_plugin(backend={"command": "echo-server-xyz", "args": []})
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "s")], env=env) as hostd:
        assert (await ready(hostd, folder))["status"] == "ready"
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "s2"), "--no-login-path"], env=env) as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        assert info["launch"]["kind"] == "COMMAND_NOT_FOUND"
        assert "echo-server-xyz" in info["launch"]["error"]
        assert str(tools) not in info["launch"]["error"]


async def test_host_answers_before_the_login_shell_and_resolution_waits_for_it(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # The class: work hostd does at start that no early request needs runs in the background, and
    # the first request that does need it waits for it. Members: the host's first answer
    # (plugins/list) comes while the login shell still runs; a launch resolved meanwhile
    # (plugins/install) waits for the shell and finds the command on the PATH it printed.
    # Synchronised on a FIFO: the shell blocks reading it until the test writes.
    launcher = user_command(tmp_path, "echo-server-slowlogin")
    tools = launcher.parent
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    env = login_shell(tmp_path, tools, first=f'read line < "{gate}"')
    folder = make_plugin(backend={"command": "echo-server-slowlogin", "args": []})

    def release() -> None:
        with open(gate, "w") as writer:  # blocks until the shell opens the FIFO to read it
            writer.write("go\n")

    async with HostdClient.spawn(["--state-dir", str(tmp_path / "s")], env=env) as hostd:
        assert await hostd.request("plugins/list", {}) == {"plugins": []}
        installing = await hostd.start("plugins/install", {"path": str(folder)})
        # The shell is still blocked (hostd's 3 s limit would have killed it, and this open
        # would then wait forever: the old start path fails here).
        with trio.fail_after(30):
            await trio.to_thread.run_sync(release, abandon_on_cancel=True)
        info = await installing()
        assert "error" not in info["launch"]
        assert info["launch"]["executable"] == str(launcher)


async def test_disable_during_a_slow_start_abandons_it(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="slow-start", args=["--delay", "20"], backend={"startup_timeout_seconds": 30})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})
    enabling = await hostd.start("plugins/enable", {"id": "mcp-echo"})
    await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "starting")
    # The plugin runs and is still loading (its stderr says so), well inside its 20 s delay.
    await hostd.wait_for("plugins/log", lambda n: n["source"] == "stderr" and n["message"] == "loading 1")
    with trio.fail_after(5):
        stopped = await hostd.request("plugins/disable", {"id": "mcp-echo"})
    assert stopped["status"] == "stopped"
    with pytest.raises(RpcError) as abandoned:
        await enabling()
    assert abandoned.value.kind == "PLUGIN_STATE_CONFLICT"
    assert [s["status"] for s in hostd.seen("plugins/statusChanged")] == ["starting", "stopped"]


async def test_parent_grants_ports_and_per_plugin_limits(tmp_path: Path, make_plugin: MakePlugin) -> None:
    need_layers("landlock-net", "netns")
    folder = make_plugin(variant="hog", backend={"tcp_ports": [443]})
    async with spawn_hostd(tmp_path, "--sandbox", "strict", "--restart", "never") as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        assert "netns" in info["launch"]["isolation"]  # no port granted: no network at all
        with pytest.raises(RpcError) as undeclared:
            await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": [], "networkPorts": [80]})
        assert undeclared.value.kind == "INVALID_PARAMS"
        granted = await hostd.request(
            "plugins/grant",
            {
                "id": "mcp-echo",
                "permissions": info["permissions"],
                "networkPorts": [443],
                "limits": {"maxRssMb": 100},
            },
        )
        assert granted["networkPorts"] == [443]
        assert granted["limits"] == {
            "maxRssMb": 100.0,
            "maxCpuPercent": None,
            "maxDiskMb": None,
            "maxTools": None,
            "maxListingMb": None,
        }
        layers = granted["launch"]["isolation"]
        assert "landlock-net" in layers and "netns" not in layers  # TCP 443 only, by Landlock
        assert granted["launch"]["digest"] != info["launch"]["digest"]
        await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": granted["launch"]["digest"]})
        if cgroups.detect().usable:  # the kernel's bound (issue 29): the hog is ended while it allocates, at start
            with pytest.raises(RpcError) as failed:
                await hostd.request("plugins/enable", {"id": "mcp-echo"})
            limit = failed.value.data["limit"]
            assert "the kernel stopped it for exceeding a limit: memory" in failed.value.message
        else:  # the watchdog's counting: it becomes ready, then is stopped
            await hostd.request("plugins/enable", {"id": "mcp-echo"})
            stopped = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "unhealthy", timeout=20)
            limit = stopped["error"]["limit"]
        assert limit["limit"] == "rss"
        assert limit["threshold"] == 100 * 1024 * 1024
