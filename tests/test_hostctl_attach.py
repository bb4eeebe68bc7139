"""hostctl answers without starting plugins, and through the hostd already serving its state folder (issue 28).

The class: *a command that only reads starting what it reads about*. Every hostctl command used to start a
hostd that started every enabled plugin (seconds each, their start-up lines on every command's stderr, a
failed one tried again at each command). Members tested: each reading command (``list``, ``status``,
``logs``, ``tools``) with an enabled plugin; a plugin whose start failed (shown ``error`` with the recorded
reason, not tried again); a second hostd on the folder (refused by name); a hostd already serving the folder
(hostctl uses it, through a 0600 socket, and says so).

Proof of "not started" is the plugin's own: the fixture appends its pid to ``starts`` in its data folder's
cache (writable for it under Landlock) before serving; hostd's view of it is not trusted for that.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.control.attach import socket_address, socket_path
from tests.conftest import MakePlugin, run_hostctl, run_quietly
from tests.waiting import until_answered

#: The echo server, after it appended its pid to $XDG_CACHE_HOME/starts (the plugin's own data folder).
COUNTING = (
    "import os, runpy; d = os.environ['XDG_CACHE_HOME']; os.makedirs(d, exist_ok=True); "
    "open(os.path.join(d, 'starts'), 'a').write(f'{os.getpid()}\\n'); "
    "runpy.run_path('server.py', run_name='__main__')"
)
#: Appends its pid the same way, then fails at start with one stderr line.
FAILING = (
    "import os, sys; d = os.environ['XDG_CACHE_HOME']; os.makedirs(d, exist_ok=True); "
    "open(os.path.join(d, 'starts'), 'a').write(f'{os.getpid()}\\n'); "
    "sys.stderr.write('attach-fixture: cannot start\\n'); sys.exit(3)"
)


def starts(state: Path, plugin_id: str = "mcp-echo") -> int:
    """How many times the plugin's process began (its own count)."""
    marker = state / "data" / plugin_id / "cache" / "starts"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


async def hostctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_hostctl(state, *args, env={**os.environ, "HOSTD_SECRETS": "file"})


async def installed(state: Path, make_plugin: MakePlugin, code: str = COUNTING) -> None:
    folder = make_plugin(backend={"args": ["-c", code]})
    for verb in (["install", str(folder)], ["grant", "mcp-echo", "--all"], ["approve", "mcp-echo", "--yes"]):
        done = await hostctl(state, *verb)
        assert done.returncode == 0, done.stderr


async def test_reading_commands_start_no_plugin(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    await installed(state, make_plugin)
    enabled = await hostctl(state, "enable", "mcp-echo")
    assert enabled.returncode == 0, enabled.stderr
    assert starts(state) == 1
    for verb in (["list"], ["status"], ["status", "mcp-echo"], ["logs", "mcp-echo"], ["tools"], ["tools", "mcp-echo"]):
        done = await hostctl(state, *verb)
        assert done.returncode == 0, (verb, done.stdout, done.stderr)
        assert starts(state) == 1, verb
        assert f"hostctl: read {state} directly (no hostd serves it; nothing started)" in done.stderr
    listed = await hostctl(state, "list")
    row = listed.stdout.splitlines()[2].split()
    assert row[:5] == ["mcp-echo", "1.0.0", "-", "stopped", "yes"]
    # A command that needs it starts it (that one only), and the next reading command again does not.
    called = await hostctl(state, "call", "mcp-echo", "echo", '{"text": "x"}')
    assert called.returncode == 0, called.stderr
    assert called.stdout == "x\n"
    assert starts(state) == 2
    assert (await hostctl(state, "status")).returncode == 0
    assert starts(state) == 2


async def test_a_failed_start_is_reported_and_not_tried_again(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    await installed(state, make_plugin, FAILING)
    failed = await hostctl(state, "enable", "mcp-echo")
    assert failed.returncode == 1
    assert "error: PLUGIN_START_FAILED" in failed.stderr
    assert starts(state) == 1
    for verb in (["list"], ["status"], ["logs", "mcp-echo"]):
        done = await hostctl(state, *verb)
        assert starts(state) == 1, verb
        assert "attach-fixture: cannot start" not in done.stderr, verb  # no start, no start-up line
    listed = await hostctl(state, "list")
    assert listed.stdout.splitlines()[2].split()[:5] == ["mcp-echo", "1.0.0", "-", "error", "yes"]
    status = await hostctl(state, "status", "mcp-echo")
    assert status.returncode == 1
    row = status.stdout.splitlines()[2].split(maxsplit=6)
    assert row[:4] == ["mcp-echo", "error", "yes", "-"]  # serves no tool (it said 0/0)
    assert row[6] == "exited with code 3 during start"
    assert "error: mcp-echo is enabled but error: exited with code 3 during start" in status.stderr
    as_json = await run_quietly(
        [sys.executable, "-m", "hostd.cli.hostctl", "status", "mcp-echo", "--json", "--state-dir", str(state)],
        env=None,
        timeout=120,
    )
    assert '"kind": "PLUGIN_START_FAILED"' in as_json.stdout
    assert "(its last start, at " in as_json.stdout
    assert "failed; not tried again here)" in as_json.stdout
    # enable is the way to try again: it does (and fails again, recorded again).
    again = await hostctl(state, "enable", "mcp-echo")
    assert again.returncode == 1
    assert starts(state) == 2
    # Disabled, the recorded failure is forgotten.
    assert (await hostctl(state, "disable", "mcp-echo")).returncode == 0
    listed = await hostctl(state, "list")
    assert listed.stdout.splitlines()[2].split()[:5] == ["mcp-echo", "1.0.0", "-", "stopped", "no"]


async def test_hostctl_uses_the_hostd_already_serving_the_folder(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    await installed(state, make_plugin)
    args = ["--state-dir", str(state), "--log-level", "error"]
    async with HostdClient.spawn(args, env=plugin_environment()) as running:
        # Only this hostd starts the plugin; a hostd of hostctl's own would show it stopped.
        await running.request("plugins/enable", {"id": "mcp-echo"}, timeout=60)
        assert starts(state) == 1
        sock = socket_path(state)
        assert stat.S_ISSOCK(os.stat(sock).st_mode)
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        assert sock.stat().st_uid == os.getuid()

        status = await hostctl(state, "status")
        assert status.returncode == 0, status.stderr
        assert f"hostctl: using the hostd already serving {state} (pid {running.process.pid})" in status.stderr
        assert status.stdout.splitlines()[2].split()[:4] == ["mcp-echo", "ready", "yes", "7/7"]
        called = await hostctl(state, "call", "mcp-echo", "echo", '{"text": "through the socket"}')
        assert called.returncode == 0, called.stderr
        assert called.stdout == "through the socket\n"
        assert starts(state) == 1  # the running instance answered

        # The session's shutdown ended the session only: the parent's hostd and its plugin serve on.
        assert await running.request("ping", {}) == {}
        assert (await running.request("plugins/status", {"id": "mcp-echo"}))["status"] == "ready"
        # What the session did reached the parent too (a notification of a call made through the socket
        # is not sent; the parent sees the plugin's state, unchanged).
        assert running.process.returncode is None
    assert not socket_path(state).exists()  # removed when that hostd stopped
    after = await hostctl(state, "list")
    assert f"hostctl: read {state} directly" in after.stderr


async def test_a_second_hostd_on_one_folder_is_refused_by_name(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with HostdClient.spawn(["--state-dir", str(state)], env=plugin_environment()) as running:
        second = await run_quietly(
            [sys.executable, "-m", "hostd", "serve", "--state-dir", str(state)], env=None, timeout=60
        )
        assert second.returncode == 75
        assert f"state directory {state} is in use by another hostd (pid {running.process.pid})" in second.stderr
        # Through initialize too (a parent naming the folder): STATE_LOCKED, named.
        async with HostdClient.spawn(handshake=False, env=plugin_environment()) as other:
            with pytest.raises(RpcError) as refused:
                await other.request("initialize", {"clientInfo": {"name": "t", "version": "0"}, "stateDir": str(state)})
            assert refused.value.kind == "STATE_LOCKED"
            assert f"state directory {state} is in use by another hostd" in refused.value.message
        assert await running.request("ping", {}) == {}


async def test_a_session_may_not_name_another_state_folder(tmp_path: Path) -> None:
    """The session would unlock the parent's folder: refused, and the folder stays locked."""
    state = tmp_path / "state"
    async with HostdClient.spawn(["--state-dir", str(state)], env=plugin_environment()) as running:
        await running.request("plugins/list", {})  # answered once the host is built: it listens by then
        sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
        with socket_address(socket_path(state)) as address:
            await sock.connect(address)
        stream = trio.SocketStream(sock)
        await stream.send_all(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"t","version":"0"},'
            b'"stateDir":"' + str(tmp_path / "other").encode() + b'"}}\n'
        )
        answer = b""
        while not answer.endswith(b"\n"):
            answer += await stream.receive_some(65536)
        assert b'"kind":"INVALID_PARAMS"' in answer
        assert f"this hostd serves the state folder {state}".encode() in answer
        await stream.aclose()
        second = await run_quietly(
            [sys.executable, "-m", "hostd", "serve", "--state-dir", str(state)], env=None, timeout=60
        )
        assert second.returncode == 75


async def test_a_state_folder_too_long_for_a_socket_address_is_reached_too(tmp_path: Path) -> None:
    """A ``sockaddr_un`` holds 107 bytes; a longer folder's socket is bound and reached through /proc/self/fd."""
    state = tmp_path / ("long-" + "x" * 60) / ("folder-" + "y" * 60) / "state"
    assert len(os.fsencode(socket_path(state))) > 107
    async with HostdClient.spawn(["--state-dir", str(state)], env=plugin_environment()) as running:
        await running.request("plugins/list", {})
        assert stat.S_IMODE(os.stat(socket_path(state)).st_mode) == 0o600
        listed = await hostctl(state, "list")
        assert listed.returncode == 0, listed.stderr
        assert f"hostctl: using the hostd already serving {state} (pid {running.process.pid})" in listed.stderr
    assert not socket_path(state).exists()


async def test_approving_a_plugin_its_approval_refused_names_the_start_next(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """A start refused for its approval (the launch is not the one approved: here the recorded digest replaced, as a
    PATH that resolves the command elsewhere does) is what ``approve`` answers: its hint is the start with this
    approval, not the log of the refused one (a new user's README walk: "see why its start failed"). A failure of
    another kind keeps the log as its next step (tests/test_hostctl_remedies.py)."""
    state = tmp_path / "state"
    await installed(state, make_plugin)
    assert (await hostctl(state, "enable", "mcp-echo")).returncode == 0
    document = json.loads((state / "state.json").read_text())
    document["plugins"]["mcp-echo"]["approvedDigest"] = "sha256:" + "0" * 64
    (state / "state.json").write_text(json.dumps(document))
    # A serving hostd restores the enabled plugin: refused, recorded (as the walk's `hostd serve` with another PATH).
    args = ["--state-dir", str(state), "--log-level", "error", "--no-control-socket"]
    async with HostdClient.spawn(args, env=plugin_environment()) as serving:

        async def refused() -> bool:
            return bool((await serving.request("plugins/status", {"id": "mcp-echo"}))["status"] == "error")

        await until_answered(refused)
        status = await serving.request("plugins/status", {"id": "mcp-echo"})
    assert "approve" in status["error"]["message"], status["error"]
    approved = await hostctl(state, "approve", "mcp-echo", "--yes")
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.splitlines()[-1] == (
        f"next: start it with this approval: {sys.executable} -m hostd.cli.hostctl --state-dir {state} enable mcp-echo"
    )
    assert (await hostctl(state, "enable", "mcp-echo")).returncode == 0
    assert starts(state) == 2  # the first enable and this one: the refused restore ran nothing
