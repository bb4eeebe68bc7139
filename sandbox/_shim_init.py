"""pid 1 of a plugin's pid namespace (the ``pidns`` layer) and the plugin's main process inside it.

``shim.py`` loads this file by path (as it loads the layer modules) when a
spec asks for ``pidns`` (the fork server: before its first fork), before it
forks, and hands it itself as :data:`shim`; pid 1 is a forked copy of the
shim, so it reads no file. Stdlib only.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import types
from typing import Any, NoReturn

#: ``shim.py`` itself (``_own_session``, ``_confine_and_exec``, ``_fail``...), set by
#: ``shim.load_sibling`` right after this file is loaded.
shim = types.ModuleType("shim")  # a placeholder until then

#: Signals pid 1 of a plugin's pid namespace passes on to every process of the namespace.
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _host_ppid() -> int:
    """Our parent's pid as ``/proc`` (the host's pid namespace) sees it.

    ``getppid()`` says 0 when the parent is outside our pid namespace.
    """
    with open("/proc/self/stat", "rb") as fh:
        data = fh.read()
    return int(data[data.rfind(b")") + 2 :].split()[1])


def _forward(sig: int, _frame: object) -> None:
    """pid 1's handler: the signal to every other process of the namespace (one atomic ``kill(-1)``)."""
    with contextlib.suppress(OSError):
        os.kill(-1, sig)


def init_main(
    spec: dict[str, Any],
    shim_pid: int,
    err_w: int,
    modules: dict[str, types.ModuleType],
    *,
    status_w: int,
    entered: list[str],
) -> NoReturn:
    """pid 1 of the plugin's pid namespace (the ``pidns`` layer). Never returns.

    Forked (no exec) by the shim right after it entered the namespaces
    (``entered``: their layer names). Sets its parent-death signal (the shim
    is single-threaded) and checks that the shim is still its parent, applies
    ``rlimits`` (inherited by the whole tree), then forks the plugin's main
    process (:func:`plugin_main`). From then on it only forwards SIGTERM,
    SIGINT and SIGHUP to every process of the namespace (``kill(-1, sig)``:
    atomic against ``fork`` in the kernel, so no member is missed), reaps
    every process re-parented to it, and when the main process exits writes
    its raw wait status as ``<status>\\n`` to ``status_w`` and exits 0; the
    kernel then SIGKILLs whatever is left in the namespace, and the shim's
    ``waitpid`` of this process returns only once all of it is gone. The
    shim ends the namespace early by SIGKILLing this process (a member of
    the namespace cannot: pid 1 only gets signals it handles from inside).
    Setup failures are ``E`` records on ``err_w``, like ``shim.child_main``.
    """
    stage = ["signals"]
    layers = shim.requested_layers(spec)
    applied = list(entered)
    try:
        shim._own_session(stage, _host_ppid, shim_pid)
        stage[0] = "pidns"
        if os.getpid() != 1:
            raise OSError(errno.EINVAL, f"the first process of the new pid namespace is pid {os.getpid()}, not 1")
        if "rlimits" in layers:
            stage[0] = "rlimits"
            shim._apply_rlimits(spec)
            applied.append("rlimits")
        stage[0] = "init"
        keep = sorted({0, 1, 2, err_w, status_w})
        for low, high in zip(keep, [*keep[1:], 65536], strict=True):
            os.closerange(low + 1, high)
        # Blocked across fork: the plugin process must not run _forward before it resets its handlers.
        signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
        for sig in _FORWARDED:
            signal.signal(sig, _forward)
        plugin = os.fork()
        if plugin == 0:
            plugin_main(spec, err_w, modules, applied)
    except BaseException as exc:
        shim._fail(err_w, stage[0], exc)
        os._exit(shim.EXIT_SETUP_FAILED)
    try:
        os.close(err_w)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            if pid == plugin:
                os.write(status_w, b"%d\n" % status)
                break
    finally:
        os._exit(0)


def plugin_main(spec: dict[str, Any], err_w: int, modules: dict[str, types.ModuleType], applied: list[str]) -> NoReturn:
    """The plugin's main process inside the pid namespace (forked by :func:`init_main`). Never returns.

    Resets its signals, starts a session of its own, ties its parent-death
    signal to pid 1, writes ``P<its pid in /proc's namespace>\\n`` to
    ``err_w`` (the pid hostd knows it by), then (``private-proc``) gives its
    tree a ``/proc`` of its own namespace (:func:`mount_private_proc`: after
    that ``P`` record, which needs the host's ``/proc``), then confines
    itself and execs like ``shim.child_main``.
    """
    stage = ["signals"]
    try:
        shim._own_session(stage, os.getppid, 1)
        stage[0] = "pid"
        os.write(err_w, b"P%d\n" % int(os.readlink("/proc/self")))
        if "private-proc" in shim.requested_layers(spec):
            stage[0] = "private-proc"
            mount_private_proc()
            applied.append("private-proc")
        shim._confine_and_exec(spec, applied, err_w, modules, stage)
    except BaseException as exc:
        shim._fail(err_w, stage[0], exc)
    finally:
        os._exit(shim.EXIT_SETUP_FAILED)


#: mount(2) flags (linux/mount.h) and unshare(2)'s CLONE_NEWNS (linux/sched.h).
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
CLONE_NEWNS = 0x00020000
#: ``hidepid`` values tried in order (proc(5), Linux 5.8+ for the name); the last, no option, is every kernel's.
_HIDEPID = (b"hidepid=ptraceable", b"")


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    """mount(2) through libc; raises OSError."""
    mount = shim._libc.mount
    mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    mount.restype = ctypes.c_int
    ctypes.set_errno(0)
    if mount(source, target, fstype, flags, data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target.decode()}: {os.strerror(err)}")


def mount_private_proc() -> str:
    """Give the caller (and every process it starts) a ``/proc`` that shows only its pid namespace.

    Issue 25: the host's procfs lists every process of the machine, and
    ``/proc/<pid>/cmdline`` of each (hostd's, another plugin's) is readable by
    anyone. The class is "a plugin reaches another process through the host's
    procfs": by listing it, by a pid it learned elsewhere (hostd's pid, a
    second plugin's), through ``cmdline``, ``status``, ``mountinfo``,
    ``environ``; every member ends with a procfs that has no entry for them.

    The caller must be a member (not the creator) of a pid namespace whose
    user namespace it holds ``CAP_SYS_ADMIN`` in (``plugin_main``, forked by
    pid 1 of the ``pidns`` layer). Steps: ``unshare(CLONE_NEWNS)`` (a mount
    namespace of its own), every mount made private (``MS_REC |
    MS_PRIVATE``: nothing propagates in or out; the kernel makes a mount
    namespace of a less privileged user namespace a slave already), then a
    fresh ``proc`` mounted over ``/proc`` (``nosuid,nodev,noexec`` as the
    kernel demands of a procfs mounted in a user namespace) for the
    caller's pid namespace, with ``hidepid=ptraceable`` where the kernel
    knows it (a process then sees only the processes it may ptrace: under
    Landlock, not even the namespace's pid 1). ``self``, ``cpuinfo``,
    ``meminfo``, ``sys``... stay: only the pid entries change. The mounts
    below the host's ``/proc`` stay, covered by the new one. Landlock rules
    naming ``/proc`` are made after this, so they name the new mount.

    Returns the mount options used. Raises OSError (EPERM where the kernel
    refuses: no user namespace, or a host ``/proc`` with masked parts, as in
    a container, which the kernel then will not let a user namespace mount
    again). Runs single-threaded before ``execve``; no cancellation.
    """
    if shim._unshare is None:
        raise OSError(errno.ENOSYS, "a private /proc needs Linux")
    ctypes.set_errno(0)
    if shim._unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    for option in _HIDEPID:
        try:
            _mount(b"proc", b"/proc", b"proc", flags, option or None)
        except OSError as exc:
            if exc.errno != errno.EINVAL or not option:
                raise
            continue
        return option.decode() or "no hidepid"
    raise OSError(errno.EINVAL, "no mount option was accepted")  # unreachable: the last option raises
