"""Landlock through ctypes: the three syscalls, nothing else. Stdlib only.

The supervisor shim (``python -I -S``, no ``sys.path`` of ours) loads this
file by path; :mod:`sandbox.probe` imports it normally. It never raises at
import, also on a kernel or OS without Landlock.

Theory of operation. :func:`abi_version` asks the kernel for the highest
Landlock ABI it offers (``landlock_create_ruleset(NULL, 0,
LANDLOCK_CREATE_RULESET_VERSION)``; 0 = none). :func:`restrict_self` builds
one ruleset and enforces it on the calling thread (the shim's child, single
threaded, just before ``execve``; the domain is inherited across ``execve``
and ``fork`` and cannot be lifted):

- filesystem (ABI 1+): every access right the ABI knows is *handled* (denied
  by default); ``read`` paths get execute + read file + read directory,
  ``write`` paths every right, ``devices_rw`` / ``devices_r`` (character
  devices such as ``/dev/null``) read/write/truncate/ioctl or read/ioctl;
- TCP (ABI 4+): binding is always denied, connecting is allowed only to
  ``tcp_connect`` ports;
- scoping (ABI 6+): signals and abstract unix sockets cannot reach a process
  outside the domain (hostd, the shim, any other process of the user).

Paths are opened with no symlink followed anywhere (:func:`open_no_follow`):
hostd resolved and checked them (``sandbox.paths``), so a link met here is a
swap after the check and fails the launch (``ELOOP``). Paths that do not
exist or cannot be opened (``ENOENT``, ``EACCES``, ``ENOTDIR``) are
skipped: a rule for them would grant nothing.
Errors are raised as ``OSError`` with the real errno; ``errno`` is reset
before every call (the PyPI ``landlock`` package's sticky-errno bug).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections.abc import Iterable

__all__ = [
    "ABI_FS_MASK",
    "ACCESS_FS_READ",
    "abi_version",
    "handled_fs",
    "open_no_follow",
    "restrict_self",
]

# Same numbers on every architecture that uses the generic syscall table and on x86-64.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446

_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REFER = 1 << 13
FS_TRUNCATE = 1 << 14
FS_IOCTL_DEV = 1 << 15

NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

#: Filesystem rights each ABI knows (ABI 1: bits 0-12, 2: +REFER, 3: +TRUNCATE, 5: +IOCTL_DEV).
ABI_FS_MASK = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
#: Rights granted beneath a read-only path.
ACCESS_FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
#: The only rights the kernel accepts in a rule on a non-directory.
_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
#: A rule on a path that does not exist (or cannot be reached at all) grants nothing: skipped.
#: ``ELOOP`` is not here: a link where hostd saw a real path fails the launch (see open_no_follow).
_SKIP_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.EPERM})


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


_syscall = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
        _syscall = _libc.syscall
        _syscall.restype = ctypes.c_long
    except (OSError, AttributeError):  # pragma: no cover - a libc without syscall()
        _syscall = None


def _call(number: int, *args: int | ctypes.c_void_p) -> int:
    """syscall(2) with errno reset first; raise OSError on -1."""
    if _syscall is None:
        raise OSError(errno.ENOSYS, "Landlock needs Linux")
    ctypes.set_errno(0)
    converted = [a if isinstance(a, ctypes.c_void_p) else ctypes.c_long(a) for a in args]
    result = int(_syscall(ctypes.c_long(number), *converted))
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def abi_version() -> int:
    """The highest Landlock ABI this kernel offers; 0 when it offers none (or not Linux)."""
    if _syscall is None:
        return 0
    try:
        return _call(_SYS_CREATE_RULESET, ctypes.c_void_p(None), 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def handled_fs(abi: int) -> int:
    """Every filesystem right known to ``abi`` (0 for no Landlock)."""
    if abi <= 0:
        return 0
    return ABI_FS_MASK.get(abi, ABI_FS_MASK[5])


def _attr_size(abi: int) -> int:
    # Older kernels reject a larger struct only if its extra words are non-zero; be exact anyway.
    if abi >= 6:
        return 24
    if abi >= 4:
        return 16
    return 8


def open_no_follow(path: str) -> int:
    """An ``O_PATH`` descriptor of the absolute ``path``, opened with no symlink followed anywhere.

    Each component is opened relative to the previous one with
    ``O_NOFOLLOW``; a symlink at any component raises ``OSError(ELOOP)``
    naming it. hostd hands the shim real paths (``sandbox.paths``), so a link
    here means the path changed after hostd checked it: the caller must fail
    the launch, never follow it. Missing components raise ``ENOENT``.
    """
    if not path.startswith("/"):
        raise OSError(errno.EINVAL, f"not an absolute path: {path}")
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    walked = ""
    try:
        for part in [p for p in path.split("/") if p]:
            walked += "/" + part
            if part in (".", ".."):
                raise OSError(errno.EINVAL, f"{path}: not a real path ({part!r})")
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.ELOOP, f"{walked} became a symbolic link after hostd checked {path}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _add_path(ruleset: int, path: str, access: int) -> bool:
    try:
        fd = open_no_follow(path)
    except OSError as exc:
        if exc.errno in _SKIP_ERRNOS:
            return False
        raise
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS
        if not access:
            return False
        rule = _PathBeneathAttr(access, fd)
        _call(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_void_p(ctypes.addressof(rule)), 0)
    finally:
        os.close(fd)
    return True


def restrict_self(
    *,
    read: Iterable[str] = (),
    write: Iterable[str] = (),
    devices_rw: Iterable[str] = (),
    devices_r: Iterable[str] = (),
    filesystem: bool = True,
    tcp_connect: Iterable[int] | None = None,
    scope: bool = False,
) -> list[str]:
    """Enforce one Landlock domain on the calling thread; return the layers now in force.

    ``filesystem``: handle (deny by default) every filesystem right of this
    ABI and grant the listed paths. ``tcp_connect``: ``None`` leaves TCP
    alone; a list (possibly empty) handles TCP bind and connect and allows
    connect to those ports only (needs ABI 4). ``scope``: signal and
    abstract-unix-socket scoping (needs ABI 6). The caller must have set
    ``PR_SET_NO_NEW_PRIVS`` (or hold ``CAP_SYS_ADMIN``). Returns a subset of
    ``["landlock-fs", "landlock-net", "landlock-scope"]``, exactly what was
    asked; raises ``OSError`` (``EOPNOTSUPP`` when the ABI lacks a requested
    part) rather than enforcing less.
    """
    abi = abi_version()
    if abi <= 0:
        raise OSError(errno.EOPNOTSUPP, "Landlock is not available")
    if tcp_connect is not None and abi < 4:
        raise OSError(errno.EOPNOTSUPP, f"Landlock ABI {abi} has no TCP rules (needs 4)")
    if scope and abi < 6:
        raise OSError(errno.EOPNOTSUPP, f"Landlock ABI {abi} has no scoping (needs 6)")
    fs_mask = handled_fs(abi) if filesystem else 0
    attr = _RulesetAttr(
        fs_mask,
        NET_BIND_TCP | NET_CONNECT_TCP if tcp_connect is not None else 0,
        SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if scope else 0,
    )
    if not (attr.handled_access_fs or attr.handled_access_net or attr.scoped):
        return []
    ruleset = _call(_SYS_CREATE_RULESET, ctypes.c_void_p(ctypes.addressof(attr)), _attr_size(abi), 0)
    try:
        if filesystem:
            grants = (
                (read, ACCESS_FS_READ),
                (write, fs_mask),
                (devices_rw, FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV),
                (devices_r, FS_READ_FILE | FS_IOCTL_DEV),
            )
            for paths, access in grants:
                for path in paths:
                    _add_path(ruleset, path, access & fs_mask)
        for port in tcp_connect or ():
            rule = _NetPortAttr(NET_CONNECT_TCP, int(port))
            _call(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.c_void_p(ctypes.addressof(rule)), 0)
        _call(_SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    layers = []
    if filesystem:
        layers.append("landlock-fs")
    if tcp_connect is not None:
        layers.append("landlock-net")
    if scope:
        layers.append("landlock-scope")
    return layers
