"""The shim's ``--probe``: which layers this kernel lets this user apply, each tried for real.

``python -I -S shim.py --probe`` prints one JSON line describing which
layers this kernel lets this user apply, each tried for real in a
throwaway child (used by ``sandbox.probe``). ``shim.py`` loads this file by
path (as it loads the layer modules) for that command only, and hands it
itself as :data:`shim`. Stdlib only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import types
from typing import Any

#: ``shim.py`` itself (its primitives: ``prctl``, ``enter_namespaces``, ``load_layer_module``), set by
#: ``shim.load_sibling`` right after this file is loaded.
shim = types.ModuleType("shim")  # a placeholder until then


def _trial(body: Any) -> list[object]:
    """Run ``body()`` in a throwaway child; ``[ok, detail]`` (detail: its result or the error)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            message = "ok " + str(body())
        except BaseException as exc:
            message = "no " + (f"{exc.strerror} (errno {exc.errno})" if isinstance(exc, OSError) else repr(exc))
        with contextlib.suppress(BaseException):
            os.write(write_end, message.encode("utf-8", "replace"))
        os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 4096):
        data += chunk
    os.close(read_end)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    text = data.decode("utf-8", "replace")
    return [text.startswith("ok "), text[3:] or "the trial died"]


def _status_field(name: str) -> str:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return ""


def _try_netns() -> str:
    shim.enter_namespaces(network=True)
    with open("/proc/self/net/dev") as fh:
        interfaces = sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])
    if interfaces != ["lo"]:
        raise OSError(errno.EINVAL, f"unexpected interfaces {interfaces}")
    return "unprivileged user + network namespace (loopback only)"


def _try_pidns() -> str:
    """Enter a user + pid namespace; the next child must be pid 1 there, and its orphan must die with it."""
    shim.enter_namespaces(network=False, pid=True)
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(read_end)
        if os.getpid() != 1:
            os._exit(1)
        ack_r, ack_w = os.pipe()
        if os.fork() == 0:  # a member that outlives pid 1 unless the kernel ends it (holds write_end)
            os.write(ack_w, b"1" if os.getppid() == 1 else b"0")
            while True:
                signal.pause()
        os.write(write_end, os.read(ack_r, 1))
        os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(first, 0)
    seen = os.read(read_end, 1)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0 or seen != b"1":
        raise OSError(errno.EINVAL, "the first child of a new pid namespace was not its pid 1")
    # pid 1 exited: the kernel killed the member, so the pipe's last writer is gone (EOF).
    import select  # noqa: PLC0415 - only for this trial

    ready, _, _ = select.select([read_end], [], [], 2.0)
    if not ready or os.read(read_end, 1):
        raise OSError(errno.EINVAL, "a process of the pid namespace outlived its pid 1")
    return "unprivileged user + pid namespace (the tree ends with its pid 1)"


#: Why the kernel refuses a procfs mount in a user namespace (fs/namespace.c ``mount_too_revealing``).
_PROC_REFUSED = (
    "; the kernel mounts a procfs in a user namespace only where the host's /proc is fully visible "
    "(a container that masks parts of /proc forbids it)"
)


def _try_private_proc() -> str:
    """Enter a user + pid namespace; its pid 1 mounts a private ``/proc`` and must see itself alone there."""
    shim.enter_namespaces(network=False, pid=True)
    init = shim.load_sibling("_shim_init")
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(read_end)
        try:
            used = init.mount_private_proc()
            seen = sorted(name for name in os.listdir("/proc") if name.isdigit())
            message = f"ok {used}" if seen == ["1"] else f"no {errno.EINVAL} /proc lists {seen}, not only pid 1"
        except OSError as exc:
            message = f"no {exc.errno} {exc.strerror}"
        os.write(write_end, message.encode("utf-8", "replace"))
        os._exit(0)
    os.close(write_end)
    data = b""
    while chunk := os.read(read_end, 4096):
        data += chunk
    os.close(read_end)
    os.waitpid(first, 0)
    verdict, code, text = [*data.decode("utf-8", "replace").split(" ", 2), "", ""][:3]
    if verdict != "ok":
        number = int(code) if code.isdigit() else errno.EINVAL
        raise OSError(number, (text or "the trial died") + (_PROC_REFUSED if number == errno.EPERM else ""))
    return f"mount + pid namespace: /proc shows only the plugin's own processes ({code}{' ' + text if text else ''})"


def _try_landlock() -> str:
    module = shim.load_layer_module("_landlock")
    abi = int(module.abi_version())
    if abi <= 0:
        raise OSError(errno.ENOSYS, "the kernel offers no Landlock")
    shim.prctl(shim.PR_SET_NO_NEW_PRIVS, 1)
    module.restrict_self(read=["/usr"], tcp_connect=[] if abi >= 4 else None, scope=abi >= 6)
    try:
        os.close(os.open("/proc/self/status", os.O_RDONLY))
    except PermissionError:
        return f"ABI {abi}"
    raise OSError(errno.EINVAL, "a Landlock ruleset was accepted but not enforced")


def _try_seccomp() -> str:
    module = shim.load_layer_module("_seccomp")
    shim.prctl(shim.PR_SET_NO_NEW_PRIVS, 1)
    module.install(deny_unix_sockets=True)
    if _status_field("Seccomp") != "2":
        raise OSError(errno.EINVAL, "the filter was accepted but is not in force")
    return "classic BPF deny-list (no libseccomp needed)"


def _try_seccomp_net() -> str:
    import socket  # noqa: PLC0415 - the probe only, not on a plugin's spawn path

    module = shim.load_layer_module("_seccomp")
    shim.prctl(shim.PR_SET_NO_NEW_PRIVS, 1)
    module.install(deny_calls=False, socket_allowlist=True)
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262).close()  # IPPROTO_MPTCP
        raise OSError(errno.EINVAL, "the socket allowlist let an MPTCP socket through")
    except OSError as exc:
        if exc.errno != errno.EPROTONOSUPPORT:
            raise
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    return str(module.SOCKET_ALLOWLIST)


def probe() -> dict[str, object]:
    """What this kernel lets this user apply, each layer tried in a throwaway child."""
    result: dict[str, object] = {"linux": shim.LINUX}
    if not shim.LINUX:
        for name in ("landlock", "netns", "pidns", "private-proc", "seccomp", "seccomp-net", "subreaper"):
            result[name] = [False, f"Linux only (this is {sys.platform})"]
        result["landlock_abi"] = 0
        return result
    try:
        shim.prctl(shim.PR_SET_CHILD_SUBREAPER, 1)
        result["subreaper"] = [True, "PR_SET_CHILD_SUBREAPER + PR_SET_PDEATHSIG"]
    except OSError as exc:
        result["subreaper"] = [False, f"{exc.strerror} (errno {exc.errno})"]
    result["landlock_abi"] = int(shim.load_layer_module("_landlock").abi_version())
    result["landlock"] = _trial(_try_landlock)
    result["netns"] = _trial(_try_netns)
    result["pidns"] = _trial(_try_pidns)
    result["private-proc"] = _trial(_try_private_proc)
    result["seccomp"] = _trial(_try_seccomp)
    result["seccomp-net"] = _trial(_try_seccomp_net)
    return result


#: ``execve``'s environment of the fork server: one variable whose bytes each forked shim overwrites in
