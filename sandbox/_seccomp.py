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
4. optionally (``socket_allowlist``, the ``seccomp-net`` layer, under network
   ``"deny"``) ``socket(2)`` and ``socketpair(2)`` become an allowlist, see
   below;
5. everything else is allowed.

A denied call returns an error; nothing is killed, so a runtime that probes
an optional feature (io_uring, perf events, MPTCP) keeps working.

The socket allowlist. The class of hole it closes: *a socket kind the active
network rules do not cover*. Landlock's network rules cover TCP only (an
``IPPROTO_MPTCP`` socket connects to a port plain TCP was refused, measured on
6.18), and a network namespace covers the IP stack only (``AF_VSOCK`` reaches
the hypervisor host, ``AF_BLUETOOTH``, ``AF_CAN``, ``AF_ALG``, netlink's
kernel interfaces are not per namespace, or not all). So rather than
enumerate what to refuse, the filter lists what the rules were written for:

- ``socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP)``: plain TCP,
  what ``landlock-net`` governs;
- ``socket(AF_INET or AF_INET6, SOCK_DGRAM, 0 or IPPROTO_UDP)``: UDP, for DNS
  when TCP ports are granted (inside ``netns`` it reaches only loopback);
- ``socket(AF_NETLINK, any, NETLINK_ROUTE)``: interface and address queries
  (glibc's ``getaddrinfo(AI_ADDRCONFIG)``, ``getifaddrs``, libuv);
- ``socketpair(AF_UNIX, ...)``: a connected pair inside the plugin.

The type is compared as ``type & 0xf`` (``SOCK_NONBLOCK`` / ``SOCK_CLOEXEC``
are or-ed in; the kernel refuses any other bit with ``EINVAL``). Everything
else fails: ``socket(AF_UNIX)`` with ``EACCES`` (as rule 3); any other family
(``AF_PACKET``, ``AF_VSOCK``, ``AF_BLUETOOTH``, ``AF_CAN``, ``AF_ALG``,
``AF_XDP``, ``AF_KEY``, ``AF_TIPC``, ...) with ``EAFNOSUPPORT``; an
``AF_INET``/``AF_INET6`` type or protocol not listed (``IPPROTO_MPTCP``,
SCTP, ICMP "ping" sockets, UDP-Lite, ``SOCK_RAW``, ``SOCK_SEQPACKET``,
``SOCK_RDM``, ``SOCK_PACKET``) and a netlink protocol other than route
(``NETLINK_SOCK_DIAG``, ``NETLINK_AUDIT``, ``NETLINK_KOBJECT_UEVENT``, ...)
with ``EPROTONOSUPPORT``; ``socketpair`` of any other family with
``EAFNOSUPPORT``. Those are the errnos a kernel built without the family or
protocol gives, which is what runtimes test for before falling back (Go's
MPTCP dialer and listener fall back to TCP; callers of libaudit's ``audit_open``,
D-Bus for one, carry on when it fails with ``EPROTONOSUPPORT``/``EAFNOSUPPORT``
but warn on other errnos); systemd's ``RestrictAddressFamilies=`` and Flatpak answer
``EAFNOSUPPORT`` for the same reason. No other system call creates a
socket on these ABIs: ``socketcall`` exists only for the foreign ABIs (rule 1)
and io_uring's ``IORING_OP_SOCKET`` is behind rule 2.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

__all__ = ["DENIED", "SOCKET_ALLOWLIST", "build_filter", "install", "supported"]

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K
_AF_UNIX = 1
_AF_INET = 2
_AF_INET6 = 10
_AF_NETLINK = 16
_SOCK_STREAM = 1
_SOCK_DGRAM = 2
_SOCK_TYPE_MASK = 0xF
_IPPROTO_TCP = 6
_IPPROTO_UDP = 17
_NETLINK_ROUTE = 0
# Offsets in struct seccomp_data: nr, arch, instruction_pointer, args[6] (u64 each; the low
# 32 bits come first on these little-endian ABIs, and socket() reads ints).
_NR, _ARCH = 0, 4
_ARG0, _ARG1, _ARG2 = 16, 24, 32

#: What the socket allowlist lets through, in words (``hostd doctor`` shows it).
SOCKET_ALLOWLIST = (
    "under network deny: sockets are TCP/UDP over IPv4/IPv6, route netlink and unix socketpair only "
    "(MPTCP, SCTP, ICMP, raw, packet, vsock, unix, ... refused)"
)
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
    # File ownership and extended attributes: Landlock (ABI 7) governs opening files, not chown or
    # xattrs, so without these a plugin could give away or relabel any file its user owns, outside
    # its rules. chmod itself cannot be refused (npm and uv set modes while installing; tested):
    # its setuid, setgid and sticky bits are (MODE_CHECKED below).
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
)
#: chmod-family calls and the index of their mode argument: refused (EPERM) when the mode sets
#: setuid, setgid or sticky. Without it a root plugin (its user namespace maps uid 0 to itself)
#: made any root-owned program setuid root for every local user. Left: a plugin can still change
#: the other mode bits of files its user owns outside its rules (sandbox/README.md, honest limits).
MODE_CHECKED: dict[str, int] = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2}
_SPECIAL_MODE_BITS = 0o7000
_ARG_OFFSETS = {1: 24, 2: 32}

_ENOSYS_CALLS = frozenset({"io_uring_setup", "io_uring_enter", "io_uring_register"})

#: The calls numbered after Linux 5.0 (424 and up): since then a new system call has the same number on
#: every architecture (the kernel's syscall.tbl, "unified" numbering), so both tables take these as they are.
_UNIFIED: dict[str, int] = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "fchmodat2": 452,
}

# (AUDIT_ARCH, syscall numbers, number of socket(), number of socketpair()).
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
        "chmod": 90,
        "fchmod": 91,
        "fchmodat": 268,
        "chown": 92,
        "fchown": 93,
        "lchown": 94,
        "fchownat": 260,
        "setxattr": 188,
        "lsetxattr": 189,
        "fsetxattr": 190,
        "removexattr": 197,
        "lremovexattr": 198,
        "fremovexattr": 199,
        **_UNIFIED,
    },
    41,
    53,
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
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "acct": 89,
        "quotactl": 60,
        "syslog": 116,
        "lookup_dcookie": 18,
        "open_by_handle_at": 265,
        "fchmod": 52,
        "fchmodat": 53,
        "fchown": 55,
        "fchownat": 54,
        "setxattr": 5,
        "lsetxattr": 6,
        "fsetxattr": 7,
        "removexattr": 14,
        "lremovexattr": 15,
        "fremovexattr": 16,
        **_UNIFIED,
    },
    198,
    199,
)
_TABLES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def supported(machine: str | None = None) -> bool:
    """True on Linux x86-64 and aarch64 (the architectures this filter knows)."""
    return sys.platform.startswith("linux") and (machine or os.uname().machine).lower() in _TABLES


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


# An instruction whose jump targets may be labels (resolved by _assemble), or a label.
_Item = tuple[int, int, int | str, int | str] | str


def _assemble(items: list[_Item]) -> list[bytes]:
    """Packed instructions; a ``str`` item is a label, a ``str`` jump target jumps to it (forward only)."""
    where: dict[str, int] = {}
    code: list[tuple[int, int, int | str, int | str]] = []
    for item in items:
        if isinstance(item, str):
            where[item] = len(code)
        else:
            code.append(item)
    out = []
    for index, (op, k, jt, jf) in enumerate(code):
        offsets = [where[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if not all(0 <= off <= 255 for off in offsets):
            raise ValueError(f"jump out of range at instruction {index}: {offsets}")
        out.append(_insn(op, k, offsets[0], offsets[1]))
    return out


def _socket_allowlist(socket_nr: int, socketpair_nr: int) -> list[_Item]:
    """The allowlist for socket/socketpair (module text); expects A = nr, falls through otherwise."""
    err = _RET_ERRNO
    return [
        (_JEQ_K, socket_nr, "socket", 0),
        (_JEQ_K, socketpair_nr, "socketpair", "allow"),
        "socket",
        (_LD_W_ABS, _ARG0, 0, 0),
        (_JEQ_K, _AF_INET, "inet", 0),
        (_JEQ_K, _AF_INET6, "inet", 0),
        (_JEQ_K, _AF_NETLINK, "netlink", 0),
        (_JEQ_K, _AF_UNIX, "eacces", "eafnosupport"),
        "inet",
        (_LD_W_ABS, _ARG1, 0, 0),
        (_AND_K, _SOCK_TYPE_MASK, 0, 0),
        (_JEQ_K, _SOCK_STREAM, 0, "dgram"),
        (_LD_W_ABS, _ARG2, 0, 0),
        (_JEQ_K, 0, "allow", 0),
        (_JEQ_K, _IPPROTO_TCP, "allow", "eprotonosupport"),
        "dgram",
        (_JEQ_K, _SOCK_DGRAM, 0, "eprotonosupport"),
        (_LD_W_ABS, _ARG2, 0, 0),
        (_JEQ_K, 0, "allow", 0),
        (_JEQ_K, _IPPROTO_UDP, "allow", "eprotonosupport"),
        "netlink",
        (_LD_W_ABS, _ARG2, 0, 0),
        (_JEQ_K, _NETLINK_ROUTE, "allow", "eprotonosupport"),
        "socketpair",
        (_LD_W_ABS, _ARG0, 0, 0),
        (_JEQ_K, _AF_UNIX, "allow", "eafnosupport"),
        "eacces",
        (_RET_K, err | errno.EACCES, 0, 0),
        "eafnosupport",
        (_RET_K, err | errno.EAFNOSUPPORT, 0, 0),
        "eprotonosupport",
        (_RET_K, err | errno.EPROTONOSUPPORT, 0, 0),
        "allow",
    ]


def build_filter(
    machine: str | None = None,
    *,
    deny_calls: bool = True,
    deny_unix_sockets: bool = False,
    socket_allowlist: bool = False,
) -> bytes:
    """The BPF program as packed ``struct sock_filter`` entries (8 bytes each; at most a few hundred).

    ``machine``: ``os.uname().machine`` spelling (default: this machine's).
    ``deny_calls``: rule 2 (:data:`DENIED`; the ``seccomp`` layer).
    ``deny_unix_sockets``: rule 3. ``socket_allowlist``: rule 4 (the
    ``seccomp-net`` layer; implies rule 3). Rule 1 is always there. Raises
    ``KeyError`` for an architecture without a table.
    """
    arch, numbers, socket_nr, socketpair_nr = _TABLES[(machine or os.uname().machine).lower()]
    prog = [
        _insn(_LD_W_ABS, _ARCH),  # A = seccomp_data.arch
        _insn(_JEQ_K, arch, jt=1, jf=0),
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),
        _insn(_LD_W_ABS, _NR),  # A = seccomp_data.nr
    ]
    if arch == _X86_64[0]:
        prog += [_insn(_JGE_K, _X32_BIT, jt=0, jf=1), _insn(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    for name in DENIED if deny_calls else ():
        if name not in numbers:
            continue
        err = errno.ENOSYS if name in _ENOSYS_CALLS else errno.EPERM
        prog += [_insn(_JEQ_K, numbers[name], jt=0, jf=1), _insn(_RET_K, _RET_ERRNO | err)]
    for name, index in MODE_CHECKED.items() if deny_calls else ():
        if name not in numbers:
            continue
        prog += [
            _insn(_JEQ_K, numbers[name], jt=0, jf=4),
            _insn(_LD_W_ABS, _ARG_OFFSETS[index]),  # A = the mode (low 32 bits)
            _insn(_AND_K, _SPECIAL_MODE_BITS),
            _insn(_JEQ_K, 0, jt=1, jf=0),
            _insn(_RET_K, _RET_ERRNO | errno.EPERM),
            _insn(_LD_W_ABS, _NR),  # A = seccomp_data.nr again for the rules below
        ]
    if socket_allowlist:
        prog += _assemble(_socket_allowlist(socket_nr, socketpair_nr))
    elif deny_unix_sockets:
        prog += [
            _insn(_JEQ_K, socket_nr, jt=0, jf=3),
            _insn(_LD_W_ABS, _ARG0),  # A = low 32 bits of args[0] (the kernel reads an int)
            _insn(_JEQ_K, _AF_UNIX, jt=0, jf=1),
            _insn(_RET_K, _RET_ERRNO | errno.EACCES),
        ]
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(*, deny_calls: bool = True, deny_unix_sockets: bool = False, socket_allowlist: bool = False) -> None:
    """Install the filter (:func:`build_filter`'s rules) on the calling thread (inherited across fork and execve).

    Needs ``PR_SET_NO_NEW_PRIVS`` (or ``CAP_SYS_ADMIN``). Raises ``OSError``
    (``EOPNOTSUPP`` on an unknown architecture or OS).
    """
    if not supported():
        raise OSError(errno.EOPNOTSUPP, f"no seccomp filter for {sys.platform}/{os.uname().machine}")
    program = build_filter(
        deny_calls=deny_calls, deny_unix_sockets=deny_unix_sockets, socket_allowlist=socket_allowlist
    )
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl.restype = ctypes.c_int
    ctypes.set_errno(0)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
