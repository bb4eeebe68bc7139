"""The shim's fork server (``python -I -S shim.py --serve SOCK HOST_PID``): it forks one shim per plugin.

``shim.py`` loads this file by path (as it loads the layer modules) for
``--serve`` only, and hands it itself as :data:`shim`; the forked shims run
on in the server's memory, so none reads a file at start. Stdlib only.

Why a fork server (measured, ``python -m bench.spawn_cost``, both ways side
by side in one run, every layer incl. ``pidns``, stdlib echo plugin, root,
2 vCPU): spawn to first reply 1.25x a bare spawn forked (36.4 vs 29.1 ms)
against 2.17x exec'd (63.1 ms); the interpreter's start was the whole
difference, the layers together cost ~5 ms. One plugin's supervision
(the shim and its pid 1) 1.83 MiB USS forked against 2.17 MiB exec'd,
plus 1.6 MiB once for the server (0.16 MiB a plugin at ten). A native
shim would start faster still but needs a C compiler or a prebuilt binary
per target, a second implementation of every layer, and a Python fallback
for the PyInstaller sidecar; the forked shim is this very file, so the
sidecar (``packaging/sidecar_main.py`` runs ``--serve`` like any shim
command) and every layer stay as they are. A forked shim is what an
exec'd one is from its first line on: it writes ``shim <pid>`` on its
control pipe, then follows the protocol below, and ends with ``done
<exit code>`` (hostd is not its parent). It carries its plugin's token in
its environment (:data:`TOKEN_SLOT`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import types
from typing import NoReturn

#: ``shim.py`` itself (``supervise``, ``write_line``, ``prctl``, ``load_modules``...), set by
#: ``shim.load_sibling`` right after this file is loaded.
shim = types.ModuleType("shim")  # a placeholder until then


TOKEN_SLOT = "HOSTD_SHIM_TOKEN_SLOT"
TOKEN_SLOT_SIZE = 96
#: Request of hostd to the fork server: one SOCK_SEQPACKET message ``fork <token>`` with exactly
#: these descriptors attached (SCM_RIGHTS): the plugin's stdin, stdout, stderr, the lifeline's read
#: end, the control pipe's write end.
FORK_FDS = 5
_SLOT_PREFIX = (TOKEN_SLOT + "=").encode()


def _write_token_slot(token: str) -> None:
    """Overwrite the fork server's environment slot with ``HOSTD_SANDBOX_TOKEN=<token>`` (NUL-padded)."""
    value = ("HOSTD_SANDBOX_TOKEN=" + token).encode("ascii", "replace")
    environ = ctypes.POINTER(ctypes.c_void_p).in_dll(shim._libc, "environ")
    index = 0
    while environ[index]:
        address = environ[index]
        text = ctypes.string_at(address)
        if text.startswith(_SLOT_PREFIX) and len(value) <= len(text):
            ctypes.memmove(address, value.ljust(len(text), b"\0"), len(text))
            return
        index += 1


def _forked_shim(fds: list[int], token: str) -> NoReturn:
    """A shim forked by :func:`serve`: take the request's descriptors, then supervise as an exec'd shim does.

    Writes ``shim <pid>`` on the control pipe first (hostd learns the shim's
    pid from it), then follows the protocol of ``main``. Never returns.
    """
    code = shim.EXIT_SHIM_BUG
    try:
        stdin, stdout, stderr, lifeline, control = fds
        os.setsid()
        os.chdir("/")
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
        for fd in (stdin, stdout, stderr):
            if fd > 2:
                os.close(fd)
        _write_token_slot(token)
        with contextlib.suppress(OSError):
            shim._write_file("/proc/self/comm", "hostd-shim")
        shim.write_line(control, f"shim {os.getpid()}")
        code = shim.supervise(lifeline, control)
        shim.write_line(control, f"done {code}")  # hostd is not our parent: it learns our exit code here
    finally:
        os._exit(code)


def serve(sock: int, host_pid: int) -> int:
    """The fork server: fork one shim per request on ``sock`` until hostd closes it; returns 0.

    Run as ``python -I -S shim.py --serve SOCK HOST_PID`` by
    ``sandbox.forkserver`` once per hostd, at the first spawn. ``sock``: hostd's
    private ``SOCK_SEQPACKET`` socketpair (nothing else holds either end:
    hostd passes it alone, each forked shim closes it first, no plugin ever
    sees it). A request is ``fork <token>`` plus :data:`FORK_FDS`
    descriptors; the server forks, closes its copies and reads the next
    request: it never parses a spec nor applies a policy (the shim reads
    both from the lifeline, which only hostd writes), so nothing it does
    depends on what a request says but the token. A request with the
    wrong shape is answered ``error fork`` on its control pipe when one came
    with it, else dropped. A failed ``fork`` is ``error fork <errno>
    <text>`` on that control pipe. The server dies with hostd:
    ``PR_SET_PDEATHSIG(SIGKILL)`` (tied to the hostd thread that started
    it, see ``sandbox.process``) and EOF on ``sock``. Its children are
    reaped by the kernel (``SIGCHLD`` ignored); each shim is held to hostd
    by its own lifeline, not by the server. Everything a shim runs is
    imported and the heap frozen (``gc.freeze``) before the first fork, so a
    shim dirties only the pages it writes (its USS).
    """
    import array  # noqa: PLC0415 - the server only
    import gc  # noqa: PLC0415
    import socket  # noqa: PLC0415

    if shim.LINUX:
        shim.prctl(shim.PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != host_pid:
            return 0
        with contextlib.suppress(OSError):
            shim._write_file("/proc/self/comm", "hostd-shimsrv")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    shim.load_modules((*shim._LANDLOCK_LAYERS, *shim._SECCOMP_LAYERS, "pidns"))  # cached: every shim finds them loaded
    channel = socket.socket(fileno=sock)
    gc.collect()
    gc.freeze()
    room = socket.CMSG_SPACE(FORK_FDS * array.array("i").itemsize)
    while True:
        try:
            data, ancillary, _, _ = channel.recvmsg(4096, room)
        except InterruptedError:
            continue
        fds: list[int] = []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received = array.array("i")
                received.frombytes(payload[: len(payload) - len(payload) % received.itemsize])
                fds.extend(received)
        if not data:
            for fd in fds:
                os.close(fd)
            return 0  # hostd closed its end (or died)
        words = data.decode("ascii", "replace").split()
        if len(fds) != FORK_FDS or len(words) != 2 or words[0] != "fork":
            if len(fds) == FORK_FDS:
                shim.write_line(fds[4], "error fork 0 malformed request to the fork server")
            for fd in fds:
                os.close(fd)
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            shim.write_line(fds[4], f"error fork {exc.errno or 0} {exc.strerror or exc}")
            pid = -1
        if pid == 0:
            channel.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _forked_shim(fds, words[1])
        for fd in fds:
            os.close(fd)
