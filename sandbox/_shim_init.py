"""pid 1 of a plugin's pid namespace (the ``pidns`` layer) and the plugin's main process inside it.

``shim.py`` loads this file by path (as it loads the layer modules) when a
spec asks for ``pidns`` (the fork server: before its first fork), before it
forks, and hands it itself as :data:`shim`; pid 1 is a forked copy of the
shim, so it reads no file. Stdlib only.
"""

from __future__ import annotations

import contextlib
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
    ``err_w`` (the pid hostd knows it by), then confines itself and execs
    like ``shim.child_main``.
    """
    stage = ["signals"]
    try:
        shim._own_session(stage, os.getppid, 1)
        stage[0] = "pid"
        os.write(err_w, b"P%d\n" % int(os.readlink("/proc/self")))
        shim._confine_and_exec(spec, applied, err_w, modules, stage)
    except BaseException as exc:
        shim._fail(err_w, stage[0], exc)
    finally:
        os._exit(shim.EXIT_SETUP_FAILED)
