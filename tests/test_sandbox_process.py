"""Spawning real plugin trees and ending them: nothing may outlive stop()."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from sandbox import process as sandbox_process
from sandbox.environment import EnvPolicy
from sandbox.launch import DEFAULT_ISOLATION, Launch, LaunchError, resolve_launch
from sandbox.policy import order_layers
from sandbox.process import SandboxedProcess, spawn
from sandbox.sweep import TOKEN_VAR, _pids_with_token, sweep_leftovers, sweep_orphans
from tests.platform_facts import need_layers
from tests.plugin_pids import host_pids
from tests.waiting import GENEROUS, alive, exited, until

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox"
PYTHON_DIR = os.path.dirname(os.path.realpath(sys.executable))
HOST_ENV = {
    "PATH": f"{PYTHON_DIR}:/usr/bin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "OPENAI_API_KEY": "sk-planted",
    "AWS_SECRET_ACCESS_KEY": "aws-planted",
    "HOSTD_TEST_SECRET": "hostd-planted",
    "HTTPS_PROXY": "http://proxy.invalid:3128",
}


def _ours() -> list[int]:
    """Live processes carrying a token issued by this test process."""
    prefix = f"{TOKEN_VAR}=hs1.{os.getpid()}.".encode()
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            with open(f"/proc/{proc.pid}/environ", "rb") as fh:
                if any(item.startswith(prefix) for item in fh.read().split(b"\0")):
                    found.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(autouse=True)
def no_leftovers() -> Iterator[None]:
    yield
    left = _ours()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes left behind: {left}"


DIRECT: tuple[str, ...] = ()
#: The shim with the plugin's tree in a pid namespace of its own (its pid 1 forked by the shim).
PIDNS: tuple[str, ...] = order_layers((*DEFAULT_ISOLATION, "pidns"))


@pytest.fixture(params=[DEFAULT_ISOLATION, PIDNS, DIRECT], ids=["shim", "pidns", "direct"])
def isolation(request: pytest.FixtureRequest) -> tuple[str, ...]:
    layers: tuple[str, ...] = request.param
    if "pidns" in layers:
        need_layers("pidns")
    return layers


def fixture_launch(
    script: str,
    *args: str,
    policy: EnvPolicy | None = None,
    tmpdir: str = "/tmp",
    isolation: tuple[str, ...] = DEFAULT_ISOLATION,
) -> Launch:
    launch = resolve_launch(
        "python3", [script, *args], FIXTURES, {}, policy or EnvPolicy(), host_env=HOST_ENV, tmpdir=tmpdir
    )
    return dataclasses.replace(launch, isolation=isolation)


async def read_line(stream: trio.abc.ReceiveStream, buf: bytearray | None = None) -> bytes:
    data = bytearray() if buf is None else buf
    while b"\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
    line, _, rest = bytes(data).partition(b"\n")
    data[:] = rest
    return line + b"\n"


async def read_pids(proc: SandboxedProcess) -> list[int]:
    report = json.loads(await read_line(proc.stdout))
    return host_pids(report["pidns"], report["pids"])


async def test_echo_a_line_then_stdin_eof_ends_it(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("echo.py", isolation=isolation))
        try:
            await proc.stdin.send_all(b"first\n")  # once it answers, exec has surely finished
            assert await read_line(proc.stdout) == b"first\n"
            assert psutil.Process(proc.pid).cmdline()[1:] == ["echo.py"]
            await proc.stdin.send_all(b"hello sandbox\n")
            assert await read_line(proc.stdout) == b"hello sandbox\n"
            assert proc.returncode is None
        finally:
            report = await proc.stop()
        assert report.step == "stdin-eof"
        assert report.returncode == 0
        assert proc.returncode == 0
        assert not alive(proc.pid)


async def test_child_environment_has_no_secrets_and_carries_the_token(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        launch = fixture_launch("env_dump.py", tmpdir="/tmp/x", isolation=isolation)
        proc = await spawn(launch)
        try:
            env = json.loads(await read_line(proc.stdout))
        finally:
            await proc.stop()
        assert env == {**launch.env, TOKEN_VAR: proc.token}
        assert sorted(env) == sorted(["PATH", "HOME", "LANG", "TMPDIR", "PYTHONUNBUFFERED", "PYTHONUTF8", TOKEN_VAR])
        assert env["TMPDIR"] == "/tmp/x"

        launch = fixture_launch("env_dump.py", policy=EnvPolicy(pass_proxy=True), isolation=isolation)
        proc = await spawn(launch)
        try:
            env = json.loads(await read_line(proc.stdout))
        finally:
            await proc.stop()
        assert env["HTTPS_PROXY"] == "http://proxy.invalid:3128"
        assert "OPENAI_API_KEY" not in env and "HOSTD_TEST_SECRET" not in env


async def test_stubborn_child_ends_with_sigkill(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("stubborn.py", isolation=isolation))
        assert await read_line(proc.stdout) == b"ready\n"
        report = await proc.stop(grace=0.3)
        assert report.step == "sigkill"
        assert report.returncode == -signal.SIGKILL
        assert report.seconds >= 0.6  # both graces were given (a lower bound: how long it took is bench/'s)
        assert not alive(proc.pid)


async def test_stop_is_idempotent_and_shielded(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("stubborn.py", isolation=isolation))
        assert await read_line(proc.stdout) == b"ready\n"
        with trio.CancelScope() as scope:
            scope.cancel()
            report = await proc.stop(grace=0.1)
        assert report.step == "sigkill"
        assert await proc.stop(grace=5) is report
        assert not alive(proc.pid)


async def test_hostile_tree_with_setsid_and_double_fork_is_ended(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "stubborn", isolation=isolation))
        pids = await read_pids(proc)
        assert pids[0] == proc.pid
        assert len(pids) == 4
        assert all(alive(pid) for pid in pids)
        report = await proc.stop(grace=0.3)
        assert report.step == "sigkill"
        assert [pid for pid in pids if alive(pid)] == []


async def test_main_exits_on_eof_but_its_children_are_still_ended(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "eof", isolation=isolation))
        pids = await read_pids(proc)
        report = await proc.stop(grace=GENEROUS)
        assert report.step == "stdin-eof"
        assert report.returncode == 0
        assert [pid for pid in pids if alive(pid)] == []


async def test_wait_returns_on_main_exit_although_grandchildren_hold_the_pipes(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "eof", isolation=isolation))
        pids = await read_pids(proc)
        await proc.stdin.aclose()
        assert await proc.wait() == 0
        assert proc.returncode == 0
        if "shim" not in isolation:
            # Direct mode: the grandchild still holds stdout, so wait() did not need EOF. (Under the
            # shim, the shim ends the rest of the tree as soon as the main process exits: a race.)
            assert alive(pids[1])
        report = await proc.stop()
        assert report.step == "already-exited"
        assert report.returncode == 0
        assert [pid for pid in pids if alive(pid)] == []


async def test_wrapper_that_does_not_forward_sigterm(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("wrapper.py", "stubborn.py", isolation=isolation))
        line = json.loads(await read_line(proc.stdout))
        pids = host_pids(line["pidns"], line["pids"])
        assert line["child"] == "ready"
        report = await proc.stop(grace=GENEROUS)
        assert report.step == "stdin-eof"  # the wrapper exits at EOF; its child would not
        assert report.returncode == 0
        assert [pid for pid in pids if alive(pid)] == []


async def test_graceful_slow_exit_gets_the_default_grace(tmp_path: Path, isolation: tuple[str, ...]) -> None:
    marker = tmp_path / "flushed"
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("slow_exit.py", str(marker), isolation=isolation))
        assert await read_line(proc.stdout) == b"ready\n"
        report = await proc.stop()
        assert report.step == "stdin-eof"
        assert report.returncode == 0
        assert report.seconds >= 1.0  # the plugin's flush was waited for (a lower bound)
        assert marker.read_text() == "flushed\n"


async def test_exec_failure_is_a_launch_error(tmp_path: Path, isolation: tuple[str, ...]) -> None:
    script = tmp_path / "bad"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    launch = resolve_launch("./bad", [], tmp_path, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir="/tmp")
    launch = dataclasses.replace(launch, isolation=isolation)
    with trio.fail_after(10), pytest.raises(LaunchError) as info:
        await spawn(launch)
    assert info.value.kind == "EXEC_FAILED"
    assert "No such file or directory" in str(info.value)
    assert "./bad" in str(info.value)


async def test_sweep_leftovers_kills_every_token_carrier(isolation: tuple[str, ...]) -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "stubborn", isolation=isolation))
        pids = await read_pids(proc)
        other = await spawn(fixture_launch("stubborn.py", isolation=isolation))
        try:
            assert await read_line(other.stdout) == b"ready\n"
            count = sweep_leftovers(proc.token)
            assert count >= 4
            assert [pid for pid in pids if alive(pid)] == []
            assert alive(other.pid)  # another instance's token is left alone
            assert sweep_leftovers(proc.token) == 0
        finally:
            await proc.stop(grace=0.1)
            await other.stop(grace=0.1)


# -- the supervisor shim ---------------------------------------------------------------------


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as fh:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in fh.read().splitlines())}


async def wait_gone(pids: list[int], seconds: float) -> bool:
    """Wait until every process of ``pids`` has exited (its pidfd turns readable; any process, not only
    a child); True if they all did within ``seconds`` (a guard against a hang, not a measure)."""
    with trio.move_on_after(seconds):
        for pid in pids:
            await exited(pid)
        return True
    return False


async def test_pid_is_the_plugin_under_the_shim() -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("stubborn.py"))
        try:
            assert await read_line(proc.stdout) == b"ready\n"
            assert proc.shim_pid is not None and proc.shim_pid != proc.pid
            plugin = psutil.Process(proc.pid)
            shim = psutil.Process(proc.shim_pid)
            assert plugin.ppid() == proc.shim_pid
            assert plugin.cmdline() == ["python3", "stubborn.py"]
            assert plugin.cwd() == str(FIXTURES)
            assert shim.cmdline()[1:3] == ["-I", "-S"]
            assert shim.cmdline()[3].endswith("sandbox/shim.py")
            # The shim is forked by this host's fork server, itself this host's child (sandbox.process).
            server = psutil.Process(shim.ppid())
            assert (server.name(), server.ppid(), shim.name()) == ("hostd-shimsrv", os.getpid(), "hostd-shim")
            assert os.getsid(proc.pid) == proc.pid  # its own session
            assert _status(proc.shim_pid)["NoNewPrivs"] == "0"  # the layers are the plugin's, not the shim's
            # The shim holds no plugin pipe: only the plugin tree keeps them open.
            assert {os.readlink(f"/proc/{proc.shim_pid}/fd/{fd}") for fd in (0, 1, 2)} == {"/dev/null"}
            assert sorted(os.listdir(f"/proc/{proc.pid}/fd")) == ["0", "1", "2"]
        finally:
            report = await proc.stop(grace=0.2)
        assert report.step == "sigkill"
        assert not alive(proc.shim_pid)


@pytest.mark.parametrize("layers", [DEFAULT_ISOLATION, PIDNS], ids=["shim", "pidns"])
async def test_plugin_gets_rlimits_no_new_privs_and_default_signals(tmp_path: Path, layers: tuple[str, ...]) -> None:
    if "pidns" in layers:
        need_layers("pidns")
    # cat (not python, which ignores SIGPIPE itself) reports its own state.
    launch = resolve_launch(
        "cat",
        ["/proc/self/status", "/proc/self/limits"],
        tmp_path,
        {},
        EnvPolicy(),
        host_env=HOST_ENV,
        tmpdir=str(tmp_path),
    )
    launch = dataclasses.replace(launch, isolation=layers)
    # Dispositions hostd itself inherited must not reach the plugin: a script that starts hostd with `cmd &`
    # leaves SIGQUIT (and SIGINT, which Python resets) ignored, `nohup` SIGHUP; a parent may ignore others.
    inherited = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGQUIT, signal.SIGUSR1, signal.SIGHUP)}
    try:
        with trio.fail_after(10):
            proc = await spawn(launch)
            out = b""
            while chunk := await proc.stdout.receive_some(65536):
                out += chunk
            report = await proc.stop()
    finally:
        for sig, previous in inherited.items():
            signal.signal(sig, previous)
    assert report.step == "already-exited" or report.step == "stdin-eof"
    assert report.returncode == 0
    text = out.decode()
    status = {k: v.strip() for k, v in (ln.split(":", 1) for ln in text.splitlines() if ":" in ln)}
    assert status["NoNewPrivs"] == "1"
    assert status["SigIgn"] == "0000000000000000"
    assert status["SigBlk"] == "0000000000000000"
    limits = {ln[:26].strip(): ln[26:].split()[:2] for ln in text.splitlines() if ln.startswith("Max ")}
    assert limits["Max core file size"] == ["0", "0"]
    soft, hard = limits["Max open files"]
    assert int(hard) <= 65536
    assert int(soft) <= int(hard)


async def test_pid_is_the_plugin_inside_its_pid_namespace() -> None:
    need_layers("pidns")
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("stubborn.py", isolation=PIDNS))
        try:
            assert await read_line(proc.stdout) == b"ready\n"
            assert proc.isolation == PIDNS
            plugin = psutil.Process(proc.pid)
            init = psutil.Process(plugin.ppid())
            assert plugin.cmdline() == ["python3", "stubborn.py"]
            assert init.ppid() == proc.shim_pid
            # The plugin is pid 2 of a namespace of its own; pid 1 is the shim's forked init.
            assert _status(proc.pid)["NSpid"].split() == [str(proc.pid), "2"]
            assert _status(init.pid)["NSpid"].split() == [str(init.pid), "1"]
            namespace = os.readlink(f"/proc/{proc.pid}/ns/pid")
            assert namespace == os.readlink(f"/proc/{init.pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
            assert os.readlink(f"/proc/{proc.shim_pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
            assert os.getsid(proc.pid) == proc.pid  # its own session, as without the namespace
            # init holds no plugin pipe and nothing of the shim's.
            assert {os.readlink(f"/proc/{init.pid}/fd/{fd}") for fd in (0, 1, 2)} == {"/dev/null"}
            assert len(os.listdir(f"/proc/{init.pid}/fd")) == 4  # stdio + the status pipe
        finally:
            report = await proc.stop(grace=0.2)
        assert report.step == "sigkill" and report.returncode == -signal.SIGKILL
        assert not alive(init.pid) and not alive(proc.pid)


@pytest.mark.parametrize(
    ("code", "expected"),
    [("raise SystemExit(7)", 7), ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", -signal.SIGSEGV)],
    ids=["exit-7", "sigsegv"],
)
async def test_exit_status_passes_through_unchanged(isolation: tuple[str, ...], code: str, expected: int) -> None:
    """The main process's status, also through the namespace's pid 1 (which cannot die of a signal)."""
    launch = dataclasses.replace(fixture_launch("-c", code), isolation=isolation)
    with trio.fail_after(10):
        proc = await spawn(launch)
        assert await proc.wait() == expected
        report = await proc.stop()
    assert report.returncode == expected
    assert report.step == "already-exited"


async def test_plugin_main_exit_status_and_the_shim_ending_its_rest() -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "eof"))
        pids = await read_pids(proc)
        await proc.stdin.aclose()
        assert await proc.wait() == 0
        # The shim kills the rest of the tree on its own once the main process has exited.
        assert await wait_gone(pids, 2.0)
        report = await proc.stop()
        assert report.step == "already-exited"
        assert report.returncode == 0


async def test_sigterm_step_is_reported() -> None:
    with trio.fail_after(30):
        proc = await spawn(fixture_launch("wrapper.py", "stubborn.py", "--ignore-eof"))
        line = json.loads(await read_line(proc.stdout))
        pids = host_pids(line["pidns"], line["pids"])
        report = await proc.stop(grace=GENEROUS)
        assert report.step == "sigterm"
        assert report.returncode == 0  # the wrapper's handler exits 0 without forwarding
        assert report.seconds >= GENEROUS  # the grace was given (a lower bound: how long it took is bench/'s)
        assert [pid for pid in pids if alive(pid)] == []


async def test_fork_storm_is_ended_by_the_stop_sweep() -> None:
    with trio.fail_after(15):
        proc = await spawn(fixture_launch("forker.py", "120"))
        assert await read_line(proc.stdout) == b"ready\n"
        shim = psutil.Process(proc.shim_pid or 0)
        await until(lambda: len(shim.children(recursive=True)) > 10)  # the storm is under way
        report = await proc.stop(grace=0.2)
        assert report.step == "sigkill"
        # no_leftovers (autouse) checks that no process with our tokens is alive


def _host_cmd() -> list[str]:
    return [sys.executable, str(FIXTURES / "host.py"), HOST_ENV["PATH"]]


async def test_host_killed_with_sigkill_takes_the_whole_tree_along() -> None:
    with trio.fail_after(15):
        host = await trio.lowlevel.open_process(_host_cmd(), stdout=subprocess.PIPE)
        try:
            assert host.stdout is not None
            info = json.loads(await read_line(host.stdout))
            tree = [*info["pids"], info["shim"]]
            if sandbox_process.SHIM_START == "fork":  # the host's fork server goes too (hostd's own child)
                server = psutil.Process(info["server"])
                assert (server.name(), server.ppid()) == ("hostd-shimsrv", host.pid)
                tree.append(server.pid)
            assert len(tree) == (6 if sandbox_process.SHIM_START == "fork" else 5)
            assert all(alive(pid) for pid in tree)
            host.kill()
            await host.wait()
            assert await wait_gone(tree, 2.0)
            assert [pid for pid in tree if alive(pid)] == []
        finally:
            host.kill()
            await host.wait()
            if host.stdout is not None:
                await host.stdout.aclose()
            if "info" in locals():
                sweep_leftovers(info["token"])


async def test_plugin_survives_trio_retiring_the_thread_that_forked_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # trio retires idle worker threads after 10 s; the kernel ties PR_SET_PDEATHSIG to the forking thread.
    # Lower the idle timeout to reproduce in a fraction of a second.
    thread_cache = pytest.importorskip("trio._core._thread_cache")
    if not hasattr(thread_cache, "IDLE_TIMEOUT"):
        pytest.skip("this trio has no IDLE_TIMEOUT to lower")
    monkeypatch.setattr(thread_cache, "IDLE_TIMEOUT", 0.05)
    with trio.fail_after(10):
        # Control: a parent-death signal set from trio's side dies with the worker thread.
        def pdeathsig() -> None:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)

        # The plugin first: its forking thread goes idle (and retires) no later than the control's.
        proc = await spawn(fixture_launch("stubborn.py"))
        naive = await trio.lowlevel.open_process(
            [sys.executable, "-c", "import time; time.sleep(30)"], preexec_fn=pdeathsig
        )
        try:
            assert await read_line(proc.stdout) == b"ready\n"
            # The control dies once its forking thread retires: that is the moment to look.
            assert await naive.wait() == -signal.SIGKILL, "the trap did not reproduce"
            assert alive(proc.pid)
            assert proc.returncode is None
        finally:
            naive.kill()
            await naive.wait()
            await proc.stop(grace=0.1)


async def test_killed_shim_leaves_leftovers_that_sweep_leftovers_ends() -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "stubborn"))
        try:
            pids = await read_pids(proc)
            assert proc.shim_pid is not None
            os.kill(proc.shim_pid, signal.SIGKILL)
            # The main process dies of its parent-death signal ...
            assert await proc.wait() == -signal.SIGKILL
            assert not alive(pids[0])
            # ... but a setsid child and the double-forked daemon were re-parented away: leftovers.
            survivors = [pid for pid in pids[1:] if alive(pid)]
            assert len(survivors) == 3
            assert sweep_leftovers(proc.token) == 3
            assert [pid for pid in pids if alive(pid)] == []
        finally:
            report = await proc.stop(grace=0.1)
        assert report.step == "already-exited"
        assert report.returncode == -signal.SIGKILL


@pytest.mark.parametrize("delay", [0.0, 0.005, 0.02, 0.05])
async def test_cancelled_spawn_leaves_nothing(delay: float) -> None:
    with trio.fail_after(10):
        result: SandboxedProcess | None = None
        with trio.move_on_after(delay):
            result = await spawn(fixture_launch("tree.py", "stubborn"))
        if result is not None:
            await result.stop(grace=0.1)
            assert result.shim_pid is not None
            assert not alive(result.shim_pid)
    # Cancelled before, during or after the spawn: no process of it is left (no_leftovers checks it again).
    assert _ours() == []


async def test_sweep_orphans_spares_live_hosts_and_ends_a_dead_hosts_leftovers() -> None:
    with trio.fail_after(15):
        host = await trio.lowlevel.open_process(_host_cmd(), stdout=subprocess.PIPE)
        mine = await spawn(fixture_launch("stubborn.py"))
        info: dict[str, Any] = {}
        try:
            assert host.stdout is not None
            info = json.loads(await read_line(host.stdout))
            assert await read_line(mine.stdout) == b"ready\n"
            token = str(info["token"])
            assert token.startswith(f"hs1.{host.pid}.")
            assert len(token.split(".")) == 4
            pids: list[int] = info["pids"]
            assert sorted(_pids_with_token(token)) == sorted([*pids, info["shim"]])
            assert set(_pids_with_token(None)) >= {*pids, mine.pid, mine.shim_pid}
            # Kill the shim first (leftovers stay: the lifeline's owner still lives), then the host.
            os.kill(info["shim"], signal.SIGKILL)
            await wait_gone([pids[0]], 2.0)
            host.kill()
            await host.wait()
            assert len([pid for pid in pids if alive(pid)]) == 3
            assert sweep_orphans() >= 3
            assert [pid for pid in pids if alive(pid)] == []
            assert alive(mine.pid)  # its host (this test) is alive
        finally:
            host.kill()
            await host.wait()
            if host.stdout is not None:
                await host.stdout.aclose()
            if info:
                sweep_leftovers(str(info["token"]))
            await mine.stop(grace=0.1)


async def test_sigterm_to_the_shim_terminates_the_tree() -> None:
    with trio.fail_after(10):
        proc = await spawn(fixture_launch("tree.py", "eof"))
        pids = await read_pids(proc)
        assert proc.shim_pid is not None
        os.kill(proc.shim_pid, signal.SIGTERM)
        assert await proc.wait() == -signal.SIGTERM  # the main process does not handle SIGTERM
        assert await wait_gone(pids, 2.0)  # its children ignore SIGTERM: the sweep killed them
        report = await proc.stop()
        assert report.step == "already-exited"
        assert report.returncode == -signal.SIGTERM
