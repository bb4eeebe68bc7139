"""A seccomp deny-list as a hand-assembled classic BPF filter. Stdlib only.

Loaded by path by the supervisor shim (like ``_landlock.py``) and imported
by :mod:`sandbox.probe`. No libseccomp: the filter is a dozen lines of
``struct sock_filter`` built here and installed with
``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`` (which needs
``PR_SET_NO_NEW_PRIVS`` first).

The program:

1. a foreign architecture (i386 ``int 0x80`` on x86-64, arm32 on aarch64)
   gets ``ENOSYS`` for every call; on x86-64 so does the x32 ABI
   (numbers with bit 30 set), so no alias of a denied call slips through;
2. the denied calls (:data:`DENIED`) fail with ``EPERM`` (the io_uring calls
   with ``ENOSYS``, so runtimes such as libuv fall back to threads);
3. optionally ``socket(AF_UNIX, ...)`` fails with ``EACCES``: no connection to
   pathname unix sockets (D-Bus, docker.sock, ssh-agent), which neither a
   network namespace nor Landlock ABI 7 covers; ``socketpair`` stays allowed;
4. everything else is allowed.

A denied call returns an error; nothing is killed, so a runtime that probes
an optional feature (io_uring, perf events) keeps working.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

__all__ = ["DENIED", "build_filter", "install", "supported"]

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_AF_UNIX = 1
_X32_BIT = 0x40000000

#: Denied system calls by name (the numbers are per architecture below).
DENIED: tuple[str, ...] = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "syslog",
    "lookup_dcookie",
    "open_by_handle_at",
    "iopl",
    "ioperm",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)
_ENOSYS_CALLS = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register"})

# (AUDIT_ARCH, syscall numbers, number of socket()).
_X86_64 = (
    0xC000003E,
    {
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "bpf": 321,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "acct": 163,
        "quotactl": 179,
        "syslog": 103,
        "lookup_dcookie": 212,
        "open_by_handle_at": 304,
        "iopl": 172,
        "ioperm": 173,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    41,
)
_AARCH64 = (
    0xC00000B7,
    {
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "bpf": 280,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "acct": 89,
        "quotactl": 60,
        "syslog": 116,
        "lookup_dcookie": 18,
        "open_by_handle_at": 265,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    198,
)
_TABLES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def supported(machine: str | None = None) -> bool:
    """True on Linux x86-64 and aarch64 (the architectures this filter knows)."""
    return sys.platform.startswith("linux") and (machine or os.uname().machine).lower() in _TABLES


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: str | None = None, *, deny_unix_sockets: bool = False) -> bytes:
    """The BPF program as packed ``struct sock_filter`` entries."""
    arch, numbers, socket_nr = _TABLES[(machine or os.uname().machine).lower()]
    prog = [
        _insn(_LD_W_ABS, 4),  # A = seccomp_data.arch
        _insn(_JEQ_K, arch, jt=1, jf=0),
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),
        _insn(_LD_W_ABS, 0),  # A = seccomp_data.nr
    ]
    if arch == _X86_64[0]:
        prog += [_insn(_JGE_K, _X32_BIT, jt=0, jf=1), _insn(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    for name in DENIED:
        if name not in numbers:
            continue
        err = errno.ENOSYS if name in _ENOSYS_CALLS else errno.EPERM
        prog += [_insn(_JEQ_K, numbers[name], jt=0, jf=1), _insn(_RET_K, _RET_ERRNO | err)]
    if deny_unix_sockets:
        prog += [
            _insn(_JEQ_K, socket_nr, jt=0, jf=3),
            _insn(_LD_W_ABS, 16),  # A = low 32 bits of args[0] (the kernel reads an int)
            _insn(_JEQ_K, _AF_UNIX, jt=0, jf=1),
            _insn(_RET_K, _RET_ERRNO | errno.EACCES),
        ]
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(*, deny_unix_sockets: bool = False) -> None:
    """Install the filter on the calling thread (inherited across fork and execve).

    Needs ``PR_SET_NO_NEW_PRIVS`` (or ``CAP_SYS_ADMIN``). Raises ``OSError``
    (``EOPNOTSUPP`` on an unknown architecture or OS).
    """
    if not supported():
        raise OSError(errno.EOPNOTSUPP, f"no seccomp filter for {sys.platform}/{os.uname().machine}")
    program = build_filter(deny_unix_sockets=deny_unix_sockets)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl.restype = ctypes.c_int
    ctypes.set_errno(0)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
