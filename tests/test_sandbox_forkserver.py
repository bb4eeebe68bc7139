"""The shim fork server (``sandbox.forkserver._ForkServer``): its failure modes, with real processes.

The class of fault: a process hostd starts once and shares across plugins becomes a way around the
per-plugin guarantees: it outlives hostd, it keeps a start failing after it died, it holds something
of hostd's, or a plugin reaches it and asks for a shim of its own. Each test covers one member;
hostd's SIGKILL taking the server along is tests/test_sandbox_process.py's
test_host_killed_with_sigkill_takes_the_whole_tree_along.
"""

from __future__ import annotations

import os
import signal
import sys

import psutil
import pytest
import trio
import trio.testing

from sandbox import forkserver as sandbox_forkserver
from sandbox import process as sandbox_process
from sandbox.launch import DEFAULT_ISOLATION, LaunchError
from sandbox.process import SandboxedProcess, spawn
from tests.platform_facts import need_layers
from tests.test_sandbox_process import PIDNS, fixture_launch, no_leftovers, read_line
from tests.waiting import alive, exited

__all__ = ["no_leftovers"]  # the autouse fixture: no process with this test's tokens is left

#: Where shims can be forked (a fork server needs pidfds to watch its shims): a platform fact.
FORKS = sys.platform.startswith("linux") and hasattr(os, "pidfd_open")
pytestmark = pytest.mark.skipif(not FORKS, reason="shims are exec'd here (no Linux pidfds)")


def test_shims_are_forked_where_the_platform_allows() -> None:
    assert sandbox_process.SHIM_START == "fork"  # else every test below would test the exec'd shim's path


def _server_pid() -> int:
    popen = sandbox_forkserver._FORK_SERVER.popen
    assert popen is not None and popen.poll() is None
    return popen.pid


async def _ready(layers: tuple[str, ...] = DEFAULT_ISOLATION) -> SandboxedProcess:
    proc = await spawn(fixture_launch("stubborn.py", isolation=layers))
    assert await read_line(proc.stdout) == b"ready\n"
    return proc


async def _kill_server() -> int:
    pid = _server_pid()
    os.kill(pid, signal.SIGKILL)
    await exited(pid)
    return pid


async def test_a_dead_server_is_restarted_at_the_next_spawn_and_running_plugins_keep_their_shims() -> None:
    with trio.fail_after(15):
        before = await _ready()
        try:
            old = await _kill_server()
            # The plugin started by the dead server is held by its own shim and lifeline, not the server.
            assert alive(before.pid) and alive(before.shim_pid or 0)
            after = await _ready()
            try:
                new = _server_pid()
                assert new != old
                assert psutil.Process(after.shim_pid or 0).ppid() == new
            finally:
                report = await after.stop(grace=0.1)
            assert report.step == "sigkill"
        finally:
            report = await before.stop(grace=0.1)
        # The old server's shim still ends its plugin on stop, and reports how.
        assert (report.step, report.returncode) == ("sigkill", -signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
async def test_a_server_dying_during_a_request_is_a_precise_start_error_then_recovered(sig: int) -> None:
    with trio.fail_after(15):
        await (await _ready()).stop(grace=0.1)  # the server is running
        pid = _server_pid()
        os.kill(pid, signal.SIGSTOP)  # it cannot fork while stopped: the request waits in its socket
        errors: list[LaunchError] = []

        async def start() -> None:
            try:
                proc = await spawn(fixture_launch("stubborn.py"))
            except LaunchError as exc:
                errors.append(exc)
            else:
                await proc.stop(grace=0.1)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(start)
            await trio.testing.wait_all_tasks_blocked()  # the request is sent; spawn waits for the shim
            os.kill(pid, sig)
            os.kill(pid, signal.SIGCONT)
        assert len(errors) == 1
        assert errors[0].kind == "EXEC_FAILED"
        assert str(errors[0]) == (
            f"cannot start 'python3' ({fixture_launch('stubborn.py').executable}): "
            f"supervisor fork server (pid {pid}) was killed by signal {int(sig)} before it forked a shim "
            "(restarted at the next spawn)"
        )
        proc = await _ready()
        try:
            assert _server_pid() != pid
        finally:
            await proc.stop(grace=0.1)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[len("socket:[") : -1])
    return found


@pytest.mark.parametrize("layers", [DEFAULT_ISOLATION, PIDNS], ids=["shim", "pidns"])
async def test_no_plugin_process_can_reach_the_server(layers: tuple[str, ...]) -> None:
    if "pidns" in layers:
        need_layers("pidns")
    with trio.fail_after(15):
        proc = await _ready(layers)
        try:
            server = _server_pid()
            channel = sandbox_forkserver._FORK_SERVER.sock
            assert channel is not None
            pair = {str(os.fstat(channel.fileno()).st_ino), *_socket_inodes(server)}
            assert len(pair) == 2  # the server holds its end of the pair and nothing else
            # Nameless: no path and no abstract name any process could connect to.
            rows = [line.split() for line in _read("/proc/net/unix").decode().splitlines()[1:]]
            assert [row[7:] for row in rows if row[6] in pair] == [[], []]
            shim = psutil.Process(proc.shim_pid or 0)
            tree = [shim, *shim.children(recursive=True)]
            assert proc.pid in {member.pid for member in tree}
            assert len(tree) == (3 if "pidns" in layers else 2)
            assert {member.pid: _socket_inodes(member.pid) & pair for member in tree} == {
                member.pid: set() for member in tree
            }
            assert sorted(os.listdir(f"/proc/{proc.pid}/fd")) == ["0", "1", "2"]
        finally:
            await proc.stop(grace=0.1)


async def test_the_server_holds_nothing_of_the_host_and_no_token() -> None:
    with trio.fail_after(15):
        await (await _ready()).stop(grace=0.1)
        await _kill_server()
        leak_r, leak_w = os.pipe()
        os.set_inheritable(leak_r, True)  # an inheritable descriptor of the host: the server must not get it
        try:
            proc = await _ready()
            try:
                server = _server_pid()
                fds = {fd: os.readlink(f"/proc/{server}/fd/{fd}") for fd in os.listdir(f"/proc/{server}/fd")}
                assert {fd: target for fd, target in fds.items() if not target.startswith("socket:")} == {
                    "0": "/dev/null",
                    "1": "/dev/null",
                    "2": "/dev/null",
                }
                assert len(fds) == 4
                assert _read(f"/proc/{server}/environ") == b"HOSTD_SHIM_TOKEN_SLOT=" + b"x" * 96 + b"\0"
                # Each shim carries its own plugin's token in the server's slot, like an exec'd shim.
                token = _read(f"/proc/{proc.shim_pid}/environ").split(b"\0")[0]
                assert token == f"HOSTD_SANDBOX_TOKEN={proc.token}".encode()
            finally:
                await proc.stop(grace=0.1)
        finally:
            os.close(leak_r)
            os.close(leak_w)
