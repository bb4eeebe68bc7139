"""The supervisor shim's fork server, the shim it forks, and the shim's command line and control pipe.

:class:`_ForkServer` (one per hostd process, :data:`_FORK_SERVER`) runs
``sandbox/shim.py --serve`` and forks a shim per plugin (``SHIM_START ==
"fork"`` in :mod:`sandbox.process`); :class:`_ForkedShim` is such a shim as
hostd sees it. :func:`_shim_command` (the ``python -I -S shim.py`` command
line) and :class:`_ControlReader` (the shim's control pipe) also serve the
exec'd shim of ``SHIM_START == "exec"``. :mod:`sandbox.process` drives them.
"""

from __future__ import annotations

import array
import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

__all__ = ["SHIM_PATH"]

#: The supervisor shim, run by path (never imported by hostd).
SHIM_PATH = str(Path(__file__).resolve().with_name("shim.py"))
#: Seconds allowed, beyond a grace, for the shim to finish its kill sweep.
_SHIM_SLACK = 3.0
#: The fork server's environment slot (``_shim_serve.TOKEN_SLOT``, ``TOKEN_SLOT_SIZE``; the shim is not imported).
_TOKEN_SLOT = ("HOSTD_SHIM_TOKEN_SLOT", 96)


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
    each shim (see ``_shim_serve.serve``). What stays true:

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
