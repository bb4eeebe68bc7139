"""Spawning a plugin and ending its whole process tree.

Theory of operation. :func:`spawn` starts a resolved
:class:`~sandbox.launch.Launch` with three pipes (stdin, stdout, stderr) and
a fresh per-instance token, set as ``HOSTD_SANDBOX_TOKEN`` in the plugin's
environment; every descendant inherits it unless it clears its environment.
:meth:`SandboxedProcess.stop` ends the tree in the order the MCP stdio
transport prescribes (close stdin, wait, SIGTERM, wait, SIGKILL), then sweeps
by token, so nothing of the tree is alive when it returns.

Two ways to run a plugin, chosen by ``launch.isolation``:

- ``"shim"`` listed (the default from :func:`~sandbox.launch.resolve_launch`):
  the fork server (:class:`_ForkServer`, started once from the trio thread
  as ``sys.executable -I -S sandbox/shim.py --serve``) forks a shim in a new
  session (``SHIM_START = "exec"``: hostd starts ``sys.executable -I -S
  sandbox/shim.py`` itself, one interpreter per plugin, ~25 ms more), and
  the shim starts the plugin (see ``shim.py`` for the protocol). The shim is
  a child subreaper, holds a lifeline pipe whose write end only hostd holds
  (so hostd's death, SIGKILL included, ends the tree), and sets the
  plugin's parent-death signal from its single thread. hostd uses no
  ``preexec_fn`` (it forces ``fork`` and is not thread-safe) and never sets
  ``PR_SET_PDEATHSIG`` itself: trio forks from worker threads that retire
  after 10 s idle, and the kernel ties that signal to the forking thread.
- otherwise, the direct variant: the plugin is a child of hostd in a new
  session; ``stop`` finds the tree through the token, the session and
  psutil. It does not survive hostd's death; it exists as a fallback and
  to compare.

Where this differs from the mcp SDK's stdio client (new session +
``killpg``): a ``setsid`` grandchild or a double-forked daemon leaves the
process group, so the SDK misses it; here the subreaper and the token find it.

The class of bug this guards against: any way for a process of the plugin
to outlive its stop or hostd (double fork, ``setsid``, a cleared
environment, forking faster than a sweep walks ``/proc``, a killed shim).
A sweep (the shim's, or the token sweep here) races the tree and trusts
what the tree can erase; so where the probe finds user namespaces work the
plan has ``pidns``: the tree lives in a pid namespace whose pid 1 is the
shim's child, the kernel kills every process of the namespace when that
pid 1 goes (stop, the main process's exit, the shim's death through its
parent-death signal, hostd's death through the lifeline), and no process
can leave a pid namespace. The sweeps stay for launches without it.
"""

from __future__ import annotations

import array
import contextlib
import errno
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil
import trio

from sandbox.launch import Launch, LaunchError
from sandbox.limits import plugin_nofile_soft
from sandbox.paths import PathRefused, ensure_private_dir
from sandbox.policy import IsolationPlan, order_layers

__all__ = [
    "NOFILE_LIMIT",
    "SHIM_PATH",
    "TOKEN_VAR",
    "SandboxedProcess",
    "StopReport",
    "spawn",
    "sweep_leftovers",
    "sweep_orphans",
]

#: The environment variable that carries the per-instance token.
TOKEN_VAR = "HOSTD_SANDBOX_TOKEN"
_TOKEN_PREFIX = "hs1."
_POLL = 0.02  # seconds between liveness checks while waiting for a tree to end

#: The supervisor shim, run by path (never imported by hostd).
SHIM_PATH = str(Path(__file__).resolve().with_name("shim.py"))
#: ``RLIMIT_NOFILE`` cap (soft and hard) applied under the ``"rlimits"`` layer.
NOFILE_LIMIT = 65536
#: Seconds the shim gets to start and report the plugin's pid.
SPAWN_TIMEOUT = 10.0
#: Seconds allowed, beyond a grace, for the shim to finish its kill sweep.
_SHIM_SLACK = 3.0
#: Seconds a sweep waits for SIGKILLed processes to become zombies.
_DEATH_WAIT = 2.0
#: How shims start: ``"fork"`` (forked by the fork server, Linux with pidfds) or ``"exec"`` (a fresh
#: ``python -I -S shim.py`` per plugin: elsewhere, and the baseline ``bench.spawn_cost`` compares with).
SHIM_START = "fork" if sys.platform.startswith("linux") and hasattr(os, "pidfd_open") else "exec"
#: The fork server's environment slot (``shim.TOKEN_SLOT``, ``shim.TOKEN_SLOT_SIZE``; the shim is not imported).
_TOKEN_SLOT = ("HOSTD_SHIM_TOKEN_SLOT", 96)


@dataclass(frozen=True)
class StopReport:
    """How :meth:`SandboxedProcess.stop` ended a plugin.

    ``step``: what ended the plugin's main process: ``"already-exited"``
    (it had exited before ``stop`` was called), ``"stdin-eof"`` (it exited
    within the grace after stdin was closed), ``"sigterm"`` or ``"sigkill"``.
    ``returncode``: its exit status (negative = killed by that signal), or
    ``None`` if it could not be learnt. ``seconds``: wall time ``stop`` took.
    """

    step: str
    returncode: int | None
    seconds: float


def _proc_read(pid: int | str, name: str) -> bytes | None:
    """``/proc/<pid>/<name>`` (proc(5)) as bytes, or None when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` from field 3 (the state letter) on, or None when it cannot be read.

    They start after the last ``)``: the command name before them may hold spaces and parens."""
    data = _proc_read(pid, "stat")
    return None if data is None else data[data.rfind(b")") + 2 :].split()


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    fields = _stat_fields(pid)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


def _pid_namespace(pid: int | str) -> int | None:
    """The inode of ``/proc/<pid>/ns/pid`` (the pid namespace the process lives in), or None."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _new_token() -> str:
    """``hs1.<host pid>.<host start ticks>.<16 hex>-<host pid namespace inode>``: names the issuing host.

    A pid means something only inside its pid namespace, so the token also
    records the issuer's namespace (``/proc/self/ns/pid``): a sweep leaves
    alone every token issued in a namespace other than its own (issue 31,
    class 4). The start time comes from ``/proc/self`` (always this process,
    even when ``/proc`` was mounted by another pid namespace).
    """
    fields = _stat_fields("self")
    ticks = fields[19].decode() if fields is not None and len(fields) > 19 else "0"
    namespace = _pid_namespace("self") or 0
    # Still four dot-separated parts with the pid and start time first: a hostd of before the
    # namespace was recorded reads it as before and leaves this hostd's live plugins alone.
    return f"{_TOKEN_PREFIX}{os.getpid()}.{ticks}.{secrets.token_hex(8)}-{namespace}"


def _read_tokens(pid: int) -> str | None:
    data = _proc_read(pid, "environ")
    if data is None:
        return None
    needle = (TOKEN_VAR + "=").encode()
    for item in data.split(b"\0"):
        if item.startswith(needle):
            return item[len(needle) :].decode("utf-8", "replace")
    return None


def _pids_with_token(token: str | None) -> list[int]:
    """Pids of live processes of this user whose environment carries the token.

    ``token=None`` matches any ``HOSTD_SANDBOX_TOKEN``. Reads
    ``/proc/<pid>/environ``; processes we may not read are skipped. Our own
    pid is never listed.
    """
    return [pid for pid, value in _token_carriers() if token is None or value == token]


def _token_carriers() -> list[tuple[int, str]]:
    """``(pid, token)`` for every readable process of this user carrying a token, except ourselves.

    "Of this user": the process's real and effective uids (``/proc/<pid>/status``)
    both equal our effective uid, root included: a hostd run as root never
    lists (so never signals) another user's processes (issue 31, class 4).
    The owner of ``/proc/<pid>`` is not used: it reads root for any process
    that is not dumpable.
    """
    me = os.getpid()
    uid = os.geteuid()
    found: list[tuple[int, str]] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        value = _read_tokens(int(name))
        if value is not None and _uids(int(name)) == (uid, uid):
            found.append((int(name), value))
    return found


def _uids(pid: int) -> tuple[int, int] | None:
    """The real and effective uid of a process (``/proc/<pid>/status`` ``Uid:``), or None when unreadable."""
    data = _proc_read(pid, "status")
    if data is None:
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"Uid:"):
            words = line.split()
            if len(words) >= 3 and words[1].isdigit() and words[2].isdigit():
                return int(words[1]), int(words[2])
    return None


def _kill_all(pids_of_pass: Callable[[], list[int]]) -> int:
    """SIGSTOP + SIGKILL what each pass lists until a pass lists nothing; then wait for the deaths."""
    killed: set[int] = set()
    for _ in range(50):
        pids = [pid for pid in pids_of_pass() if not _is_zombie(pid)]
        if not pids:
            break
        _signal_all(set(pids), signal.SIGSTOP)
        _signal_all(set(pids), signal.SIGKILL)
        killed.update(pids)
        time.sleep(0.002)
    # SIGKILL is asynchronous, and a dying process stops showing its environment before it is a
    # zombie: wait (bounded) until every signalled process is a zombie or gone.
    deadline = time.monotonic() + _DEATH_WAIT
    pending = set(killed)
    while pending and time.monotonic() < deadline:
        pending = {pid for pid in pending if not _is_zombie(pid)}
        if pending:
            time.sleep(0.002)
    return len(killed)


def sweep_leftovers(token: str | None = None) -> int:
    """Kill (SIGSTOP, then SIGKILL) every process carrying ``HOSTD_SANDBOX_TOKEN``.

    ``token``: kill only processes whose ``HOSTD_SANDBOX_TOKEN`` equals it;
    ``None`` kills every process of this user that carries any token, which
    includes the plugins of this and of any other running hostd of the same
    user (at startup prefer :func:`sweep_orphans`). Repeats until a pass finds
    nothing (a forking process cannot outrun it: its children inherit the
    token). The calling process is never killed; zombies are skipped (they
    are dead). Returns once every signalled process is dead (a zombie or
    gone), or after 2 s for one stuck in the kernel. Blocking (about 12 microseconds per process on the system):
    call it from a thread in async code. Returns the number of distinct
    processes signalled. Never raises for vanished processes.
    """
    return _kill_all(lambda: _pids_with_token(token))


_TOKEN_SHAPE = re.compile(r"hs1\.([0-9]{1,10})\.([0-9]{1,20})\.[0-9a-f]{16}-([0-9]{1,20})")


def _orphaned(token: str, namespace: int) -> bool:
    """Whether ``token`` was issued in pid namespace ``namespace`` (ours) by a host process now gone.

    Only a token of the current shape issued in our own pid namespace can be
    judged: its pid names a process we can look up. A token of unknown shape
    (an older hostd's, or any process that sets the variable), or one issued
    in another pid namespace (a hostd in a sandboxed app or a container that
    shares this user's processes: its pid means nothing here) is not ours to
    judge, so it is never an orphan. The issuer is alive when the process at
    that pid has the recorded start time and namespace.
    """
    shape = _TOKEN_SHAPE.fullmatch(token)
    if shape is None or int(shape[3]) != namespace:
        return False
    pid = int(shape[1])
    return not (_start_ticks(pid) == shape[2] and _pid_namespace(pid) == namespace)


def _own_proc() -> bool:
    """Whether ``/proc`` shows our own pid namespace (``/proc/self`` is our pid), so its pids are ours."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def sweep_orphans() -> int:
    """Kill every token carrier of this user whose issuing host process, in our pid namespace, is gone.

    A token names the hostd process that issued it (pid, start time and pid
    namespace), so this ends what a crashed or killed hostd (or a killed
    shim) left behind without touching plugins of a hostd that is still
    running. Left alone (issue 31, class 4): tokens issued in another pid
    namespace, tokens of unknown shape, processes of other users (root or
    not), and everything when ``/proc`` belongs to another pid namespace.
    Blocking, like :func:`sweep_leftovers`; returns the number of processes
    signalled.
    """
    namespace = _pid_namespace("self")
    if namespace is None or not _own_proc():
        return 0
    return _kill_all(lambda: [pid for pid, value in _token_carriers() if _orphaned(value, namespace)])


def _is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[:1] in ([b"Z"], [b"X"])


def _tree(root: int, token: str) -> set[int]:
    """Live members of a plugin tree: token carriers, the session and descendants of ``root``."""
    pids = set(_pids_with_token(token))
    with contextlib.suppress(psutil.Error):
        pids.update(child.pid for child in psutil.Process(root).children(recursive=True))
    with contextlib.suppress(OSError):
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getsid(proc.pid) == root:
                    pids.add(proc.pid)
    pids.add(root)
    pids.discard(os.getpid())
    return {pid for pid in pids if not _is_zombie(pid)}


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


class _ProcessHandle(Protocol):
    """What a :class:`SandboxedProcess` needs of the process hostd supervises: ``trio.Process`` or a forked shim."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> trio.abc.SendStream | None: ...
    @property
    def stdout(self) -> trio.abc.ReceiveStream | None: ...
    @property
    def stderr(self) -> trio.abc.ReceiveStream | None: ...
    def poll(self) -> int | None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...
    def terminate(self) -> None: ...


class SandboxedProcess:
    """A running plugin tree (returned by :func:`spawn`; do not construct).

    ``pid``: the plugin's main process (never the shim). ``stdin``
    (``trio.abc.SendStream``), ``stdout``, ``stderr``
    (``trio.abc.ReceiveStream``): its pipes; ``stop`` closes ``stdin`` only,
    so drain and close ``stdout``/``stderr`` yourself (they reach EOF once the
    tree is gone). ``token``: the per-instance token, in every plugin
    process's environment as ``HOSTD_SANDBOX_TOKEN``. ``returncode``: the
    main process's exit status once known (negative = killed by that
    signal), else ``None``. ``shim_pid``: the supervisor's pid, or ``None``
    without the ``"shim"`` layer. ``isolation``: the layers in force for
    this plugin as the shim reported them after applying them (in
    :data:`~sandbox.policy.LAYER_ORDER`; ``()`` without the shim), never
    merely what was requested.

    Always call :meth:`stop`, also after the plugin exited by itself: it ends
    the rest of the tree and reaps what hostd started.
    """

    pid: int
    stdin: trio.abc.SendStream
    stdout: trio.abc.ReceiveStream
    stderr: trio.abc.ReceiveStream
    token: str
    shim_pid: int | None
    isolation: tuple[str, ...]

    def __init__(self, proc: _ProcessHandle, pid: int, token: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        self.pid = pid
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.token = token
        self.shim_pid = None
        self.isolation = ()
        self._report: StopReport | None = None
        self._stop_lock = trio.Lock()

    @property
    def returncode(self) -> int | None:
        """The main process's exit status once known, else ``None``."""
        raise NotImplementedError

    async def wait(self) -> int:
        """Wait until the plugin's main process exits; return its status.

        Waits for the process, not for pipe EOF (a grandchild can hold the
        pipes open). Negative = killed by that signal. Cancellable; the
        process is left running if cancelled. If the shim itself is killed
        before reporting, the main process dies of its parent-death signal
        and the result is ``-9`` (SIGKILL).
        """
        raise NotImplementedError

    async def stop(self, grace: float = 2.0) -> StopReport:
        """End the whole tree; idempotent, shielded from cancellation.

        ``grace`` in seconds. Steps, per the MCP stdio transport: close stdin
        and wait ``grace`` for the main process; else SIGTERM every member
        of the tree and wait ``grace``; else SIGSTOP and SIGKILL every member.
        Whatever ended the main process, the rest of the tree is then killed,
        everything hostd started is reaped and a token sweep follows, so
        nothing of the tree is alive when this returns. Takes at most
        ``2 * grace`` plus a few tens of milliseconds (plus 3 s per step if
        the shim itself hangs). A second call returns the first call's
        report. Never raises for an already-dead tree.
        """
        with trio.CancelScope(shield=True):
            async with self._stop_lock:
                if self._report is None:
                    self._report = await self._stop(grace)
        assert self._report is not None
        return self._report

    def kill_now(self) -> None:
        """Skip the graces of a stop in progress: SIGKILL the plugin's main process now.

        The stop then proceeds as if the main process had died: the rest of
        the tree is killed and reaped. A no-op once the main process is gone.
        """
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    async def _close_stdin(self) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self.stdin.aclose()

    async def _stop(self, grace: float) -> StopReport:
        raise NotImplementedError


class _DirectProcess(SandboxedProcess):
    """The plugin is the caller's child in a new session (no ``"shim"`` layer).

    hostd never launches this way (:func:`~sandbox.launch.resolve_launch` always lists ``"shim"``),
    and it gives none of the shim's whole-tree guarantees. It stays as the public API's answer to a
    launch without layers, and as the baseline every layer's cost is measured against
    (``bench/spawn_cost.py``, the cost table in ``sandbox/README.md``); tests/test_sandbox_process.py
    runs the stop contract against it too.
    """

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await self._proc.wait()

    async def _stop(self, grace: float) -> StopReport:
        started = time.monotonic()
        step = "already-exited" if self._proc.poll() is not None else ""
        await self._close_stdin()
        if not step:
            with trio.move_on_after(grace):
                await self._proc.wait()
                step = "stdin-eof"
        if not step:
            _signal_all(_tree(self.pid, self.token), signal.SIGTERM)
            with trio.move_on_after(grace):
                await self._proc.wait()
                step = "sigterm"
        if not step:
            step = "sigkill"
        await self._kill_tree()
        return StopReport(step=step, returncode=self._proc.returncode, seconds=time.monotonic() - started)

    async def _kill_tree(self) -> None:
        signalled: set[int] = set()
        for _ in range(50):
            members = await trio.to_thread.run_sync(_tree, self.pid, self.token)
            if self._proc.poll() is not None:
                members.discard(self.pid)
            if not members:
                break
            _signal_all(members, signal.SIGSTOP)
            _signal_all(members, signal.SIGKILL)
            signalled |= members
            await trio.sleep(_POLL / 4)
        await self._proc.wait()
        # A dying process hides its environment before it is a zombie: wait for the deaths.
        for _ in range(int(_DEATH_WAIT / (_POLL / 4))):
            signalled = {pid for pid in signalled if not _is_zombie(pid)}
            if not signalled:
                break
            await trio.sleep(_POLL / 4)


class _ControlReader:
    """Line reader over the shim's control pipe; keeps partial lines across cancellation.

    A forked shim's last line, ``done <exit code>``, is kept in ``done``
    (hostd is not that shim's parent, so no ``waitpid`` tells it) and never
    returned. Readers take turns (a lock): the plugin's waiter and the
    shim's waiter may read at once.
    """

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.done: int | None = None
        self._lock = trio.Lock()

    async def line(self) -> str | None:
        """The next line without its newline, or ``None`` at EOF (or if closed)."""
        async with self._lock:
            return await self._line()

    async def _line(self) -> str | None:
        while True:
            while b"\n" not in self.buffer:
                try:
                    chunk = await self.stream.receive_some(4096)
                except (trio.ClosedResourceError, trio.BrokenResourceError, OSError):
                    chunk = b""
                if not chunk:
                    return None
                self.buffer += chunk
            line, _, rest = bytes(self.buffer).partition(b"\n")
            self.buffer[:] = rest
            text = line.decode("utf-8", "replace")
            words = text.split()
            if len(words) == 2 and words[0] == "done" and words[1].lstrip("-").isdigit():
                self.done = int(words[1])
                continue
            return text


class _ForkedShim:
    """A shim the fork server forked: the part of ``trio.Process`` that :class:`_ShimProcess` uses.

    ``pid``: the shim's pid; hostd holds a pidfd on it (it is the fork
    server's child, not ours: no ``waitpid``, no pid reuse race for
    signals). ``returncode``: ``None`` until :meth:`wait` has seen it exit;
    then its ``done`` line's code, or ``-SIGKILL`` if it died without one.
    """

    def __init__(
        self,
        pid: int,
        pidfd: int,
        streams: tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream, trio.lowlevel.FdStream],
        control: _ControlReader,
    ) -> None:
        self.pid = pid
        self._pidfd = pidfd
        self.stdin, self.stdout, self.stderr = streams
        self._control = control
        self.returncode: int | None = None
        self._lock = trio.Lock()

    def poll(self) -> int | None:
        return self.returncode

    async def wait(self) -> int:
        """Wait until the shim has exited (its pidfd turns readable) and its control pipe is at EOF.

        Several tasks may wait at once; cancellable (nothing is lost).
        """
        async with self._lock:
            if self.returncode is None:
                await trio.lowlevel.wait_readable(self._pidfd)
                while self._control.done is None and await self._control.line() is not None:
                    pass
                self.returncode = self._control.done if self._control.done is not None else -signal.SIGKILL
                os.close(self._pidfd)
        return self.returncode

    def _signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)


class _ForkServer:
    """The one fork server of this hostd process: started at the first spawn, restarted when found dead.

    Theory of operation (the choice and its numbers: ``docs/performance.md``,
    "Spawn cost"). A fresh ``python -I -S shim.py`` costs an interpreter
    start (~20 ms, the whole of the sandbox's spawn overhead) and ~2.2 MiB
    of its own memory per plugin; a shim forked from one interpreter that
    already imported everything costs a ``fork`` (~1 ms) and only the pages
    it dirties. So hostd starts ``shim.py --serve`` once, from the calling
    (trio) thread with ``subprocess.Popen``, in a new session, with no
    descriptor but its end of a private ``SOCK_SEQPACKET`` socketpair and
    an environment of one placeholder (the token slot), and asks it to fork
    each shim (see ``shim.serve``). What stays true:

    - Nothing outlives hostd: each shim holds its own lifeline (hostd's
      death: EOF, the shim ends its tree), and the server dies of EOF on its
      socket and of ``PR_SET_PDEATHSIG``. The server holds no lifeline's
      write end (only read ends, closed right after each fork).
    - The shim's death still kills the tree (the plugin's parent-death
      signal is the shim's, as before); the layers are still applied by the
      shim's child before ``execve``; the spec (environment trimmed, no
      shell) still comes over the lifeline, from hostd alone.
    - No plugin can reach the server: the socketpair has no name, and each
      forked shim closes its copy before anything else; the plugin gets
      only its three pipes.
    - A dead server is found at the next spawn (``poll``) and restarted;
      one that dies during a request makes that start fail with
      ``EXEC_FAILED`` naming the server and its exit status.

    Not thread-safe: used from the trio thread only (a ``sendmsg`` is atomic).
    """

    def __init__(self) -> None:
        self.popen: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None

    def _close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.popen is not None:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                self.popen.kill()
                self.popen.wait(timeout=_SHIM_SLACK)
            self.popen = None

    def ensure(self) -> subprocess.Popen[bytes]:
        """The running server (started, or restarted if it has exited). Raises OSError if it cannot start."""
        if self.popen is not None and self.popen.poll() is None and self.sock is not None:
            return self.popen
        self._close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            name, size = _TOKEN_SLOT
            command, options = _shim_command(
                ["--serve", str(theirs.fileno()), str(os.getpid())],
                {name: "x" * size},
                subprocess.DEVNULL,
                theirs.fileno(),
            )
            self.popen = subprocess.Popen(command, **options)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours
        return self.popen

    async def request(self, token: str, fds: list[int]) -> None:
        """Ask for one shim with ``fds`` (stdin, stdout, stderr, lifeline read, control write). Raises OSError."""
        self.ensure()
        assert self.sock is not None
        message = [f"fork {token}".encode()]
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())]
        while True:
            try:
                self.sock.sendmsg(message, rights)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)
            else:
                return

    async def death(self) -> str:
        """Why the server dropped a request: its exit status (waited for, bounded), or that it still runs."""
        popen = self.popen
        if popen is None:
            return "the supervisor fork server is not running"
        code = popen.poll()
        if code is None:
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(popen.pid)
                try:
                    with trio.move_on_after(_SHIM_SLACK):
                        await trio.lowlevel.wait_readable(pidfd)
                finally:
                    os.close(pidfd)
            code = popen.poll()
        self._close()  # a server that dropped a request is not trusted with the next one either
        if code is None:
            return f"the supervisor fork server (pid {popen.pid}) dropped the request (restarted at the next spawn)"
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return f"supervisor fork server (pid {popen.pid}) {how} before it forked a shim (restarted at the next spawn)"


_FORK_SERVER = _ForkServer()


_PHASE_STEP = {"term": "sigterm", "kill": "sigkill", "lost": "sigkill"}


class _ShimProcess(SandboxedProcess):
    """The plugin runs under a supervisor shim (the ``"shim"`` layer)."""

    def __init__(
        self,
        shim: _ProcessHandle,
        pid: int,
        token: str,
        lifeline: trio.lowlevel.FdStream,
        control: _ControlReader,
        *,
        isolation: tuple[str, ...],
    ) -> None:
        super().__init__(shim, pid, token)
        self.shim_pid = shim.pid
        self.isolation = isolation
        self._lifeline = lifeline
        self._control = control
        self._wait_lock = trio.Lock()
        self._returncode: int | None = None
        self._exit_phase = ""
        self._exit_time = 0.0

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait(self) -> int:
        async with self._wait_lock:
            while self._returncode is None:
                line = await self._control.line()
                if line is None:
                    await self._lost()
                    break
                words = line.split()
                if len(words) == 4 and words[0] == "exit":
                    self._returncode = int(words[1])
                    self._exit_phase = words[2]
                    self._exit_time = float(words[3])
        assert self._returncode is not None
        return self._returncode

    async def _lost(self) -> None:
        """The control pipe ended without an ``exit`` line: the shim died."""
        noticed = time.monotonic()
        await self._proc.wait()
        # Its child had PR_SET_PDEATHSIG(SIGKILL); wait until the kernel has delivered it.
        for _ in range(int(_SHIM_SLACK / (_POLL / 4))):
            if not _alive(self.pid):
                break
            await trio.sleep(_POLL / 4)
        self._returncode = -signal.SIGKILL
        self._exit_phase = "lost"
        self._exit_time = noticed

    async def _ask_stop(self, grace: float) -> None:
        try:
            await self._lifeline.send_all(f"stop {grace:.3f}\n".encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError, OSError):
            with contextlib.suppress(ProcessLookupError):
                self._proc.terminate()

    async def _stop(self, grace: float) -> StopReport:
        started = time.monotonic()
        await self._close_stdin()
        if self._returncode is None:
            with trio.move_on_after(grace):
                await self.wait()
        if self._returncode is None:
            await self._ask_stop(grace)
            with trio.move_on_after(grace + _SHIM_SLACK):
                await self.wait()
        if self._returncode is None:  # the shim does not answer: end it; PDEATHSIG ends the plugin
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            with trio.move_on_after(_SHIM_SLACK):
                await self.wait()
        # The shim exits by itself once waitpid says ECHILD.
        with trio.move_on_after(_SHIM_SLACK):
            await self._proc.wait()
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
        # With "pidns" a shim that exited by itself has reaped the namespace's pid 1, and the kernel
        # returns that only once every process of the namespace is gone: nothing can be left to sweep.
        # Otherwise (no pid namespace, or a shim that had to be killed) sweep by token: belt and braces
        # for what escaped the shim's own sweep; a tree that clears its environment escapes this too.
        contained = "pidns" in self.isolation and self._proc.returncode is not None and self._proc.returncode >= 0
        if not contained:
            await trio.to_thread.run_sync(sweep_leftovers, self.token)
        await self._lifeline.aclose()
        await self._control.stream.aclose()

        if self._returncode is not None and self._exit_time < started:
            step = "already-exited"
        else:
            step = _PHASE_STEP.get(self._exit_phase, "stdin-eof" if self._exit_phase == "run" else "sigkill")
        return StopReport(step=step, returncode=self._returncode, seconds=time.monotonic() - started)


def _exec_failed(launch: Launch, detail: str) -> LaunchError:
    return LaunchError(
        "EXEC_FAILED", launch.command, f"cannot start {launch.command!r} ({launch.executable}): {detail}"
    )


#: Error stages of the shim that mean "a layer could not be applied".
_LAYER_STAGES = frozenset(
    {
        "rlimits",
        "no_new_privs",
        "netns",
        "userns",
        "pidns",
        "landlock",
        "seccomp",
        "layers",
        "load",
        "pdeathsig",
        "setsid",
        "init",
        "pid",
    }
)


def _spec(launch: Launch, env: dict[str, str]) -> bytes:
    layers = [layer for layer in launch.isolation if layer != "shim"]
    spec: dict[str, object] = {
        "executable": launch.executable,
        "argv": launch.argv,
        "cwd": launch.cwd,
        "env": env,
        "layers": layers,
        "nofile": NOFILE_LIMIT,
        "grace": 2.0,
    }
    plugin_soft = plugin_nofile_soft()
    if plugin_soft is not None:
        spec["nofile_soft"] = plugin_soft
    plan = launch.plan or IsolationPlan(tmpdir="")
    if any(layer.startswith("landlock-") for layer in layers):
        if launch.plan is None:
            raise _isolation_failed(launch, "Landlock layers need launch.plan (from resolve_launch with a policy)")
        try:  # at every start: a plugin may have swapped its TMPDIR or data folder for a link since the last
            for folder in (plan.tmpdir, plan.data_dir):
                if folder:
                    ensure_private_dir(folder)
        except (OSError, PathRefused) as exc:
            raise _isolation_failed(launch, f"private folder: {exc}") from exc
        rules: dict[str, object] = dict(plan.rule_lists())
        rules["tcp_connect"] = list(plan.tcp_ports)
        spec["landlock"] = rules
    if "seccomp" in layers:
        spec["seccomp"] = {"deny_unix_sockets": plan.deny_unix_sockets}
    return json.dumps(spec).encode("ascii") + b"\n"


def _isolation_failed(launch: Launch, detail: str) -> LaunchError:
    return LaunchError(
        "ISOLATION_FAILED",
        launch.command,
        f"cannot isolate {launch.command!r} ({launch.executable}) as {','.join(launch.isolation)}: {detail}",
    )


async def _spawn_shim(launch: Launch, token: str, env: dict[str, str]) -> SandboxedProcess:
    if not sys.executable:
        raise _exec_failed(launch, "no Python interpreter for the supervisor shim (sys.executable is empty)")
    spec = _spec(launch, env)  # before anything starts: it may refuse the launch
    if SHIM_START == "fork":
        shim, lifeline, control = await _fork_shim(launch, token)
    else:
        shim, lifeline, control = await _exec_shim(launch, token)
    return await _start_plugin(launch, token, spec, shim=shim, lifeline=lifeline, control=control)


def _shim_command(args: list[str], env: dict[str, str], stdio: int, *fds: int) -> tuple[list[str], dict[str, Any]]:
    """``(argv, keyword arguments)`` of ``Popen`` / ``open_process`` for ``python -I -S shim.py <args>``.

    A new session, working folder ``/``, exactly ``env``, ``stdio`` for all
    three streams, no descriptor but ``fds``.
    """
    return [sys.executable, "-I", "-S", SHIM_PATH, *args], {
        "env": env,
        "cwd": "/",
        "stdin": stdio,
        "stdout": stdio,
        "stderr": stdio,
        "start_new_session": True,
        "close_fds": True,
        "pass_fds": fds,
    }


async def _exec_shim(launch: Launch, token: str) -> tuple[_ProcessHandle, trio.lowlevel.FdStream, _ControlReader]:
    """A fresh ``python -I -S shim.py LIFELINE CONTROL`` (``SHIM_START == "exec"``)."""
    lifeline_r, lifeline_w = os.pipe()
    control_r, control_w = os.pipe()
    try:
        command, options = _shim_command(
            [str(lifeline_r), str(control_w)], {TOKEN_VAR: token}, subprocess.PIPE, lifeline_r, control_w
        )
        shim = await trio.lowlevel.open_process(command, **options)
    except BaseException as exc:
        os.close(lifeline_w)
        os.close(control_r)
        if isinstance(exc, OSError):
            raise _exec_failed(launch, f"supervisor shim: {exc.strerror or exc}") from exc
        raise
    finally:
        os.close(lifeline_r)
        os.close(control_w)
    return shim, trio.lowlevel.FdStream(lifeline_w), _ControlReader(trio.lowlevel.FdStream(control_r))


async def _fork_shim(launch: Launch, token: str) -> tuple[_ProcessHandle, trio.lowlevel.FdStream, _ControlReader]:
    """A shim forked by the fork server (``SHIM_START == "fork"``); it reports ``shim <pid>`` first.

    The wait for that line is shielded (a fork takes a millisecond or two):
    a shim whose pid hostd never learnt could not be waited for.
    """
    ends = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, lifeline, control
    theirs = [ends[0][0], ends[1][1], ends[2][1], ends[3][0], ends[4][1]]
    ours = [ends[0][1], ends[1][0], ends[2][0], ends[3][1], ends[4][0]]
    try:
        await _FORK_SERVER.request(token, theirs)
    except BaseException as exc:
        for fd in ours:
            os.close(fd)
        if isinstance(exc, ConnectionError):  # EPIPE, ECONNRESET: it died between the check and the request
            raise _exec_failed(launch, await _FORK_SERVER.death()) from exc
        if isinstance(exc, OSError):
            raise _exec_failed(launch, f"supervisor fork server: {exc.strerror or exc}") from exc
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    streams = [trio.lowlevel.FdStream(fd) for fd in ours]
    lifeline = streams[3]
    control = _ControlReader(streams[4])
    line: str | None = None
    with trio.CancelScope(shield=True):
        with trio.move_on_after(SPAWN_TIMEOUT):
            line = await control.line()
        words = (line or "").split()
        pidfd = -1
        if len(words) == 2 and words[0] == "shim" and words[1].isdigit():
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(int(words[1]))
        if pidfd < 0:
            if line is None:
                detail = await _FORK_SERVER.death()
            elif words[:1] == ["error"]:
                _, stage, code, *text = [*line.split(" ", 3), ""]
                detail = f"supervisor fork server: {text[0]} (errno {code}, at {stage})"
            else:
                detail = f"supervisor shim: unexpected first line {line!r}"
            for stream in streams:
                await stream.aclose()
            raise _exec_failed(launch, detail)
    shim = _ForkedShim(int(words[1]), pidfd, (streams[0], streams[1], streams[2]), control)
    return shim, lifeline, control


async def _start_plugin(
    launch: Launch,
    token: str,
    spec: bytes,
    *,
    shim: _ProcessHandle,
    lifeline: trio.lowlevel.FdStream,
    control: _ControlReader,
) -> SandboxedProcess:
    """Send the spec to a started shim and wait for its ``pid`` (or ``error``) line."""
    line: str | None = None
    try:
        with trio.move_on_after(SPAWN_TIMEOUT):
            await lifeline.send_all(spec)
            line = await control.line()
        if line is not None and line.startswith("pid "):
            words = line.split()
            applied = order_layers(words[2].split(",") if len(words) > 2 else ["shim"])
            missing = [layer for layer in launch.isolation if layer not in applied]
            if not missing:
                return _ShimProcess(shim, int(words[1]), token, lifeline, control, isolation=applied)
            line = f"error layers 0 the shim reports {','.join(applied)}; missing {','.join(missing)}"
    except BaseException:
        line = None
        with trio.CancelScope(shield=True):
            await _abandon(shim, lifeline, control, token)
        raise
    with trio.CancelScope(shield=True):
        await _abandon(shim, lifeline, control, token)
        stage = ""
        if line is not None and line.startswith("error "):
            _, stage, code, *text = [*line.split(" ", 3), ""]
            detail = f"{text[0]} (errno {code}, at {stage})"
        else:
            tail = b""
            with (
                trio.move_on_after(0.5),
                contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError),
            ):
                assert shim.stderr is not None
                tail = bytes(await shim.stderr.receive_some(4096))
            detail = f"supervisor shim exited with status {shim.returncode}: {tail.decode(errors='replace')}"
        for stream in (shim.stdin, shim.stdout, shim.stderr):
            if stream is not None:
                await stream.aclose()
    if stage in _LAYER_STAGES:
        raise _isolation_failed(launch, detail)
    raise _exec_failed(launch, detail)


async def _abandon(shim: _ProcessHandle, lifeline: trio.lowlevel.FdStream, control: _ControlReader, token: str) -> None:
    """End a shim whose spawn did not complete: lifeline EOF, then SIGKILL, then a sweep."""
    await lifeline.aclose()
    with trio.move_on_after(_SHIM_SLACK):
        await shim.wait()
    if shim.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            shim.kill()
        await shim.wait()
    await control.stream.aclose()
    await trio.to_thread.run_sync(sweep_leftovers, token)


async def spawn(launch: Launch) -> SandboxedProcess:
    """Start ``launch`` and return the running :class:`SandboxedProcess`.

    The plugin gets ``launch.env`` plus ``HOSTD_SANDBOX_TOKEN`` (a fresh
    token), ``cwd=launch.cwd``, ``argv = [launch.command, *launch.args]``
    executed from ``launch.executable``, three pipes, its own session and no
    other file descriptors. Never a shell. With ``"shim"`` in
    ``launch.isolation`` it runs under the supervisor shim (forked by the
    fork server, started at the first spawn: a few milliseconds more; the
    first spawn also starts the server, about 20 ms), and the shim's child applies the other listed layers just before
    ``execve``, single-threaded (never from a trio thread, never with
    ``preexec_fn``): ``"rlimits"`` (``RLIMIT_CORE=0``, ``RLIMIT_NOFILE``
    capped at :data:`NOFILE_LIMIT`), ``"no_new_privs"``, ``"netns"`` or ``"userns"``, ``"pidns"``
    (the tree in a pid namespace of its own: nothing of it outlives the stop),
    ``"landlock-fs"`` / ``"landlock-net"`` / ``"landlock-scope"`` (the real
    paths ``launch.plan.rules`` pinned at resolution; the plan's ``TMPDIR``
    and data folder are checked again first, see
    :func:`sandbox.paths.ensure_private_dir`) and ``"seccomp"``; see
    ``sandbox/README.md``. Every layer other than ``"shim"`` needs the shim.
    Returns once the plugin's executable is running (exec succeeded), with
    :attr:`SandboxedProcess.isolation` set to what the shim reported applied.

    Raises :class:`~sandbox.launch.LaunchError` with ``kind="EXEC_FAILED"``
    when the process cannot be started (the message names the command and
    carries the errno text, e.g. ``"No such file or directory"``, or says
    that the fork server died before it forked the shim, with its exit
    status; the next spawn starts a new server), or
    ``kind="ISOLATION_FAILED"`` when a listed layer could not be applied
    (nothing keeps running). If cancelled midway, whatever was started is
    ended before the cancellation propagates.
    """
    token = _new_token()
    env = dict(launch.env)
    env[TOKEN_VAR] = token
    if "shim" in launch.isolation:
        return await _spawn_shim(launch, token, env)
    if launch.isolation:
        raise _isolation_failed(launch, "these layers are applied by the supervisor shim, which is not listed")
    try:
        proc = await trio.lowlevel.open_process(
            launch.argv,
            executable=launch.executable,
            cwd=launch.cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise _exec_failed(launch, exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))) from exc
    return _DirectProcess(proc, proc.pid, token)
