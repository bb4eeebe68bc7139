"""The start-up sweep ends only what this user's hostd, in this pid namespace, started (issue 31, class 4).

A token records its issuer's pid, start time and pid namespace. The sweep
leaves alone a token issued in another pid namespace (its pid means nothing
here), a token of unknown shape, and any process of another user, root or
not. Each test runs a real process carrying a token, runs the real sweep and
asserts whether that process is alive afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.sweep import TOKEN_VAR, _pids_with_token, sweep_orphans
from tests.nobody import NOBODY, SETPRIV, SYSTEM_PYTHON
from tests.waiting import alive

ROOT = Path(__file__).resolve().parent.parent
#: A child that waits for its stdin to close (no sleep: it lives exactly as long as the test wants).
WAIT_FOR_EOF = [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.buffer.read()"]
#: The "hostd-like" issuer: makes a token the way hostd does, starts a child carrying it, prints the
#: token once the child runs, then waits for its stdin to close.
ISSUER = f"""
import subprocess, sys
from sandbox.sweep import TOKEN_VAR, _new_token
token = _new_token()
child = subprocess.Popen({WAIT_FOR_EOF!r}, env={{TOKEN_VAR: token}}, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
assert child.stdout.readline() == b"ready\\n"  # the child runs its own code: it is listed with its token
print(token, flush=True)
sys.stdin.buffer.read()
child.stdin.close()
child.wait()
"""


@contextlib.contextmanager
def running(argv: list[str], env: dict[str, str], *, ready: bool = True) -> Iterator[subprocess.Popen[bytes]]:
    """A process that lives until the block ends (its stdin closes, then SIGKILL if it is still there).

    ``ready``: ``argv`` prints ``ready`` once it runs its own code (:data:`WAIT_FOR_EOF`), and the block starts
    only then. Until its exec, a child's ``/proc/<pid>/environ`` is its parent's, without the token: a test that
    looked right after ``Popen`` found ``[]`` under load (the class of 8905b71, whose issuer now waits too)."""
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if ready:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n"
        yield proc
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def dead_issuer() -> tuple[int, str]:
    """The pid and start ticks of a process that has exited (a hostd that crashed)."""
    with running(WAIT_FOR_EOF, {}) as proc:
        with open(f"/proc/{proc.pid}/stat", "rb") as fh:
            data = fh.read()
        ticks = data[data.rfind(b")") + 2 :].split()[19].decode()
    return proc.pid, ticks


def orphan_token() -> str:
    """A token of the current shape, issued in our pid namespace by a host process that is gone."""
    pid, ticks = dead_issuer()
    return f"hs1.{pid}.{ticks}.{'0' * 16}-{os.stat('/proc/self/ns/pid').st_ino}"


#: A pid namespace of its own with its own /proc, as a sandboxed desktop app or a container has.
UNSHARE = ["unshare", "--user", "--pid", "--fork", "--mount-proc", "--map-root-user"]


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run([*UNSHARE, "true"], check=False).returncode == 0


@pytest.mark.skipif(not unshare_works(), reason="no user and pid namespaces here")
def test_a_live_hostd_in_another_pid_namespace_keeps_its_plugins() -> None:
    # The issuer is pid 1 of a pid namespace of its own; from out here pid 1 is another process, so
    # the old sweep took the issuer for dead and killed its live plugin. Fails before.
    command = [*UNSHARE, sys.executable, "-c", ISSUER]
    with running(command, {"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}, ready=False) as issuer:
        assert issuer.stdout is not None
        token = issuer.stdout.readline().decode().strip()
        assert token.split(".")[1] == "1"  # the issuer's pid, inside its namespace
        [plugin] = _pids_with_token(token)  # it printed "ready" before the issuer printed the token
        sweep_orphans()
        assert alive(plugin)
        assert _pids_with_token(token) == [plugin]
        namespace = os.stat(f"/proc/{plugin}/ns/pid").st_ino  # the issuer's (its child shares it)
        assert token.split("-")[-1] == str(namespace) != str(os.stat("/proc/self/ns/pid").st_ino)


@pytest.mark.parametrize("token", ["garbage", "", "hs1.1.1.0123456789abcdef", "hs1.x.1.0123456789abcdef-1"])
def test_a_token_of_unknown_shape_is_left_alone(token: str) -> None:
    # Any process of the user may carry the variable; the old sweep killed every such one. Fails before.
    with running(WAIT_FOR_EOF, {TOKEN_VAR: token}) as proc:
        assert proc.pid in _pids_with_token(token)
        sweep_orphans()
        assert alive(proc.pid)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")
def test_root_never_signals_another_users_process() -> None:
    # A hostd run as root swept every user's processes. Fails before.
    token = orphan_token()
    with running([*SETPRIV, SYSTEM_PYTHON, *WAIT_FOR_EOF[1:]], {TOKEN_VAR: token}) as theirs:
        with open(f"/proc/{theirs.pid}/status", "rb") as fh:
            assert f"Uid:\t{NOBODY}\t{NOBODY}\t".encode() in fh.read()
        sweep_orphans()
        assert alive(theirs.pid)
        assert theirs.pid not in _pids_with_token(token)


def test_an_orphan_of_our_own_namespace_and_user_is_still_ended() -> None:
    # The control for the tests above: the same kind of token on our own process is swept. Every hostd sweeps
    # at its start, so under pytest-xdist another worker's hostd may end this orphan first (it is one of theirs
    # to sweep too: same user, same namespace, a dead issuer); .ci/run saw it end before it printed 'ready'
    # (b'' == b'ready\n') and, earlier, before the test listed it ([] == [pid]). Either sweep must end it with
    # SIGKILL; only when ours finds it alive is ours asserted to be the one.
    token = orphan_token()
    with running(WAIT_FOR_EOF, {TOKEN_VAR: token}, ready=False) as mine:
        assert mine.stdout is not None
        if mine.stdout.readline() == b"ready\n":  # it runs its own code, token in its environ
            swept = sweep_orphans()
            assert swept >= 1 or mine.wait(timeout=10) == -signal.SIGKILL  # ours, or another worker's just before
        assert mine.wait(timeout=10) == -signal.SIGKILL
        assert not alive(mine.pid)
