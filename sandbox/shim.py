"""The per-plugin supervisor shim: one small process between hostd and a plugin.

Run as ``python -I -S shim.py LIFELINE_FD CONTROL_FD`` (isolated mode: no
site-packages, no ``PYTHON*`` variables, so nothing can inject code into it).
Stdlib only, single-threaded; never imported by hostd (``sandbox.process``
only runs it by path).

Theory of operation.

- It makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``): a plugin
  process that double-forks or calls ``setsid`` is re-parented to the shim,
  not to init, so "every descendant of the shim" is the whole plugin tree.
- It reads one JSON line, the launch spec, from the lifeline pipe, whose
  write end only hostd holds. EOF on the lifeline means hostd died (SIGKILL
  included): the tree is killed at once. Later lines are commands:
  ``stop <grace seconds>``.
- Its child calls ``setsid``, sets ``PR_SET_PDEATHSIG(SIGKILL)`` and checks
  ``getppid()`` (the shim is single-threaded, so the signal is tied to the
  shim itself and not to a thread that may retire: the trio worker-thread
  trap), sets ``RLIMIT_CORE=0``, bounds ``RLIMIT_NOFILE``, sets
  ``PR_SET_NO_NEW_PRIVS`` and ``execve``-s the plugin. Its stdin, stdout and
  stderr are the pipes hostd gave the shim; the shim then points its own at
  ``/dev/null`` so only the plugin tree holds them. A failure before or at
  ``execve`` comes back over a close-on-exec pipe.
- Control lines to hostd (CONTROL_FD): ``pid <pid>`` after a successful
  exec; ``error <stage> <errno> <text>`` when setup or exec failed (the shim
  then exits 127); ``exit <returncode> <phase> <monotonic seconds>`` when the
  plugin's main process has exited (``returncode`` negative = signal;
  ``phase`` is ``run``, ``term``, ``kill`` or ``lost``: whether it exited by
  itself, during the SIGTERM grace, by the final SIGKILL sweep, or after
  hostd vanished; the time is ``CLOCK_MONOTONIC``, comparable with hostd's
  ``time.monotonic()``).
- Stop (``stop <grace>`` or SIGTERM/SIGHUP/SIGINT, which use the spec's
  grace): SIGTERM to every descendant, wait the grace for the main process,
  then a SIGSTOP sweep until no new process appears, a SIGKILL to all, and
  ``waitpid`` until ``ECHILD`` proves nothing is left. When the main process
  exits by itself the rest is killed the same way without grace. The shim
  then exits with the main process's status (``128 + n`` for signal ``n``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import selectors
import signal
import sys
import time
from collections.abc import Iterable
from typing import Any, NoReturn

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

EXIT_SETUP_FAILED = 127
EXIT_SHIM_BUG = 70

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.prctl.restype = ctypes.c_int

_HANDLED = (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def prctl(option: int, arg2: int = 0) -> None:
    """Call prctl(2); raise OSError on failure."""
    if _libc.prctl(option, arg2, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def write_line(fd: int, text: str) -> None:
    """Write one control line; hostd may be gone, so EPIPE is ignored."""
    data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass


def descendants(root: int) -> list[int]:
    """Pids of every live process below ``root`` (from /proc's ppid links)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 2:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def decode_status(status: int) -> int:
    """A waitpid status as a Popen-style returncode (negative = signal)."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return -1


def child_main(spec: dict[str, Any], shim_pid: int, err_w: int) -> NoReturn:
    """In the forked child: isolate, then exec the plugin. Never returns."""
    stage = "signals"
    try:
        signal.set_wakeup_fd(-1)
        for sig in (*_HANDLED, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        stage = "setsid"
        os.setsid()
        stage = "pdeathsig"
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != shim_pid:
            os._exit(EXIT_SETUP_FAILED)
        if spec.get("rlimits", True):
            stage = "rlimits"
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            cap = int(spec.get("nofile", 65536))
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
            soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if spec.get("no_new_privs", True):
            stage = "no_new_privs"
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        stage = "chdir"
        os.chdir(spec["cwd"])
        os.closerange(3, err_w)
        os.closerange(err_w + 1, 65536)
        stage = "exec"
        os.execve(spec["executable"], spec["argv"], spec["env"])
    except OSError as exc:
        code = exc.errno or 0
        text = exc.strerror or str(exc)
        os.write(err_w, f"{stage}\0{code}\0{text}".encode("utf-8", "replace"))
    except BaseException as exc:
        os.write(err_w, f"{stage}\0{0}\0{exc!r}".encode("utf-8", "replace"))
    finally:
        os._exit(EXIT_SETUP_FAILED)


class Shim:
    """The supervisor's state; one instance per shim process."""

    def __init__(self, lifeline: int, control: int) -> None:
        self.lifeline = lifeline
        self.control = control
        self.me = os.getpid()
        self.main_pid: int | None = None
        self.main_status: int | None = None
        self.phase = "run"
        self.deadline: float | None = None
        self.grace = 2.0
        self.buffer = b""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    # -- start ------------------------------------------------------------

    def install_signals(self) -> None:
        for sig in _HANDLED:
            signal.signal(sig, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def read_spec(self) -> dict[str, Any] | None:
        """Block until the spec line arrives; None if hostd closed the lifeline first."""
        while b"\n" not in self.buffer:
            try:
                chunk = os.read(self.lifeline, 65536)
            except InterruptedError:
                continue
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        spec: dict[str, Any] = json.loads(line.decode("utf-8", "surrogateescape"), strict=False)
        return spec

    def start(self, spec: dict[str, Any]) -> bool:
        """Fork and exec the plugin; report ``pid`` or ``error``. False on failure."""
        self.grace = float(spec.get("grace", 2.0))
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(err_r)
            child_main(spec, self.me, err_w)
        os.close(err_w)
        # Only the plugin tree holds the stdio pipes from now on.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        report = b""
        while True:
            try:
                chunk = os.read(err_r, 4096)
            except InterruptedError:
                continue
            if not chunk:
                break
            report += chunk
        os.close(err_r)
        if report:
            stage, code, text = [*report.decode("utf-8", "replace").split("\0"), "", ""][:3]
            self.reap_blocking(pid)
            write_line(self.control, f"error {stage or 'exec'} {code or '0'} {text}")
            return False
        self.main_pid = pid
        write_line(self.control, f"pid {pid}")
        return True

    # -- stopping ---------------------------------------------------------

    def begin_stop(self, grace: float) -> None:
        if self.phase != "run":
            return
        self.phase = "term"
        signal_all(descendants(self.me), signal.SIGTERM)
        self.deadline = time.monotonic() + max(0.0, grace)

    def kill_everything(self) -> None:
        """SIGSTOP sweep until stable, SIGKILL all, reap until ECHILD."""
        stopped: set[int] = set()
        for _ in range(1000):
            fresh = [pid for pid in descendants(self.me) if pid not in stopped]
            if not fresh:
                break
            signal_all(fresh, signal.SIGSTOP)
            stopped.update(fresh)
        signal_all(stopped, signal.SIGKILL)
        signal_all(descendants(self.me), signal.SIGKILL)
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            self.note_exit(pid, status)

    def reap_blocking(self, pid: int) -> None:
        while True:
            try:
                os.waitpid(pid, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                pass
            return

    def note_exit(self, pid: int, status: int) -> None:
        if pid == self.main_pid and self.main_status is None:
            self.main_status = status
            phase = self.phase
            if phase == "term" and self.deadline is not None and time.monotonic() >= self.deadline:
                phase = "kill"
            write_line(self.control, f"exit {decode_status(status)} {phase} {time.monotonic():.6f}")

    def reap_some(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            self.note_exit(pid, status)

    # -- main loop --------------------------------------------------------

    def on_lifeline(self) -> bool:
        try:
            chunk = os.read(self.lifeline, 4096)
        except InterruptedError:
            return True
        if not chunk:
            return False
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, _, self.buffer = self.buffer.partition(b"\n")
            words = line.split()
            if words[:1] == [b"stop"]:
                grace = float(words[1]) if len(words) > 1 else self.grace
                self.begin_stop(grace)
        return True

    def on_signals(self) -> None:
        try:
            data = os.read(self.wake_r, 4096)
        except (BlockingIOError, InterruptedError):
            return
        if any(sig in data for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)):
            self.begin_stop(self.grace)

    def run(self) -> int:
        """Supervise until the plugin's main process is gone; return the exit code."""
        selector = selectors.DefaultSelector()
        selector.register(self.lifeline, selectors.EVENT_READ, "lifeline")
        selector.register(self.wake_r, selectors.EVENT_READ, "signals")
        while True:
            self.reap_some()
            if self.main_status is not None:
                # The main process is gone: nothing of its tree may stay.
                self.kill_everything()
                break
            timeout = None
            if self.deadline is not None:
                timeout = self.deadline - time.monotonic()
                if timeout <= 0:
                    self.phase = "kill"
                    self.kill_everything()
                    break
            host_gone = False
            for key, _ in selector.select(timeout):
                if key.data == "lifeline":
                    host_gone = not self.on_lifeline()
                else:
                    self.on_signals()
            if host_gone:
                self.phase = "lost"
                self.kill_everything()
                break
        status = self.main_status
        if status is None:
            return EXIT_SHIM_BUG
        code = decode_status(status)
        return 128 - code if code < 0 else code


def main(argv: list[str]) -> int:
    lifeline, control = int(argv[1]), int(argv[2])
    for fd in (lifeline, control):
        os.set_inheritable(fd, False)
    shim = Shim(lifeline, control)
    try:
        shim.install_signals()
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        spec = shim.read_spec()
        if spec is None:
            return 0
        if not shim.start(spec):
            return EXIT_SETUP_FAILED
        return shim.run()
    except BaseException as exc:
        write_line(control, f"error shim {getattr(exc, 'errno', 0) or 0} {exc!r}")
        with contextlib.suppress(BaseException):
            shim.kill_everything()
        return EXIT_SHIM_BUG


if __name__ == "__main__":
    os._exit(main(sys.argv))
