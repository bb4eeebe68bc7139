"""Network "deny" covers every kind of socket, not only the ones its rules were written for.

The class of hole (issue 9): a socket kind the active network rules do not cover. Landlock's
TCP rules do not see MPTCP (an ``IPPROTO_MPTCP`` socket connected to a port plain TCP was
refused); a network namespace does not cover vsock and other non-IP families; ICMP, SCTP,
raw and packet sockets and netlink's kernel interfaces are covered by neither. The
``seccomp-net`` layer turns ``socket(2)`` into an allowlist (``sandbox/_seccomp.py``). These
tests check the filter program itself for both architectures (a small classic-BPF
interpreter runs it on synthetic ``seccomp_data``), then real plugins under ``spawn``.
"""

from __future__ import annotations

import errno
import socket
import struct
from pathlib import Path

import pytest
import trio

from sandbox import _seccomp
from sandbox.policy import IsolationPolicy, plan_layers
from sandbox.probe import CAPABILITY_NAMES, Capability
from tests.test_sandbox_isolation import need, poke, strict

# -- the filter program, for both architectures ----------------------------------------------

ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
ARCHES = {
    # machine: (AUDIT_ARCH, socket, socketpair, ptrace) numbers, written here independently of _seccomp's tables
    "x86_64": (0xC000003E, 41, 53, 101),
    "aarch64": (0xC00000B7, 198, 199, 117),
}
SOCK_NONBLOCK_CLOEXEC = 0o4000 | 0o2000000

ALLOWED = [
    ("TCP", 2, 1, 0),
    ("TCP explicit, with SOCK_NONBLOCK|SOCK_CLOEXEC", 2, 1 | SOCK_NONBLOCK_CLOEXEC, 6),
    ("TCP6", 10, 1, 6),
    ("UDP", 2, 2, 0),
    ("UDP6 explicit", 10, 2 | SOCK_NONBLOCK_CLOEXEC, 17),
    ("netlink route, raw", 16, 3, 0),
    ("netlink route, dgram", 16, 2 | SOCK_NONBLOCK_CLOEXEC, 0),
]
REFUSED = [
    ("MPTCP", 2, 1, 262, errno.EPROTONOSUPPORT),
    ("MPTCP6", 10, 1 | SOCK_NONBLOCK_CLOEXEC, 262, errno.EPROTONOSUPPORT),
    ("SCTP stream", 2, 1, 132, errno.EPROTONOSUPPORT),
    ("SCTP seqpacket", 10, 5, 132, errno.EPROTONOSUPPORT),
    ("ICMP ping socket", 2, 2, 1, errno.EPROTONOSUPPORT),
    ("ICMPv6 ping socket", 10, 2, 58, errno.EPROTONOSUPPORT),
    ("UDP-Lite", 2, 2, 136, errno.EPROTONOSUPPORT),
    ("raw IP", 2, 3, 255, errno.EPROTONOSUPPORT),
    ("raw IP, protocol 0", 2, 3, 0, errno.EPROTONOSUPPORT),
    ("RDM", 2, 4, 0, errno.EPROTONOSUPPORT),
    ("SOCK_PACKET", 2, 10, 0x300, errno.EPROTONOSUPPORT),
    ("TCP protocol on a dgram socket", 2, 2, 6, errno.EPROTONOSUPPORT),
    ("netlink sock_diag", 16, 3, 4, errno.EPROTONOSUPPORT),
    ("netlink audit", 16, 3, 9, errno.EPROTONOSUPPORT),
    ("netlink uevent", 16, 2, 15, errno.EPROTONOSUPPORT),
    ("unix stream", 1, 1, 0, errno.EACCES),
    ("unix dgram", 1, 2 | SOCK_NONBLOCK_CLOEXEC, 0, errno.EACCES),
    ("AF_UNSPEC", 0, 1, 0, errno.EAFNOSUPPORT),
    ("AF_PACKET", 17, 3, 0x300, errno.EAFNOSUPPORT),
    ("AF_VSOCK", 40, 1, 0, errno.EAFNOSUPPORT),
    ("AF_BLUETOOTH", 31, 3, 0, errno.EAFNOSUPPORT),
    ("AF_CAN", 29, 3, 1, errno.EAFNOSUPPORT),
    ("AF_ALG", 38, 5, 0, errno.EAFNOSUPPORT),
    ("AF_XDP", 44, 3, 0, errno.EAFNOSUPPORT),
    ("AF_KEY", 15, 3, 2, errno.EAFNOSUPPORT),
    ("AF_TIPC", 30, 5, 0, errno.EAFNOSUPPORT),
    ("AF_RDS", 21, 5, 0, errno.EAFNOSUPPORT),
    ("a family not yet assigned", 46, 1, 0, errno.EAFNOSUPPORT),
]


def run_filter(program: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """The action ``program`` returns for one system call (a classic-BPF interpreter for its opcodes)."""
    full = (*args, *([0] * (6 - len(args))))
    data = struct.pack("<iIQ6Q", nr, arch, 0, *full)
    code: list[tuple[int, int, int, int]] = [
        struct.unpack_from("=HBBI", program, offset) for offset in range(0, len(program), 8)
    ]
    assert 0 < len(code) <= 4096
    a = pc = 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:  # LD W ABS
            a, pc = struct.unpack_from("<I", data, k)[0], pc + 1
        elif op == 0x54:  # ALU AND K
            a, pc = a & k, pc + 1
        elif op in (0x15, 0x35):  # JEQ K, JGE K
            pc += 1 + (jt if (a == k if op == 0x15 else a >= k) else jf)
        elif op == 0x06:  # RET K
            return k
        else:
            raise AssertionError(f"unexpected opcode {op:#x} at {pc}")
        assert pc < len(code), "ran off the end of the program"


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_socket_allowlist_lets_through_exactly_what_the_rules_cover(machine: str) -> None:
    arch, socket_nr, socketpair_nr, ptrace_nr = ARCHES[machine]
    program = _seccomp.build_filter(machine, deny_unix_sockets=True, socket_allowlist=True)
    got = {name: run_filter(program, arch, socket_nr, (f, t, p)) for name, f, t, p in ALLOWED}
    assert got == {name: ALLOW for name, *_ in ALLOWED}
    got = {name: run_filter(program, arch, socket_nr, (f, t, p)) for name, f, t, p, _ in REFUSED}
    assert got == {name: RET_ERRNO | err for name, *_, err in REFUSED}
    # The kernel reads int arguments: the upper 32 bits are ignored by it and by the filter.
    assert run_filter(program, arch, socket_nr, (2 | 1 << 32, 1 | 7 << 40, 262)) == RET_ERRNO | errno.EPROTONOSUPPORT
    assert run_filter(program, arch, socket_nr, (2 | 1 << 32, 1 | 7 << 40, 6 | 1 << 33)) == ALLOW
    # socketpair: AF_UNIX only (a pair inside the plugin); no other family.
    assert run_filter(program, arch, socketpair_nr, (1, 1, 0)) == ALLOW
    assert run_filter(program, arch, socketpair_nr, (1, 5 | SOCK_NONBLOCK_CLOEXEC, 0)) == ALLOW
    assert run_filter(program, arch, socketpair_nr, (2, 1, 0)) == RET_ERRNO | errno.EAFNOSUPPORT
    assert run_filter(program, arch, socketpair_nr, (30, 5, 0)) == RET_ERRNO | errno.EAFNOSUPPORT
    # The rest of the filter is as before: the deny-list, other calls allowed, a foreign ABI refused.
    assert run_filter(program, arch, ptrace_nr) == RET_ERRNO | errno.EPERM
    assert run_filter(program, arch, 0) == ALLOW
    assert run_filter(program, 0x40000003, socket_nr, (2, 1, 0)) == RET_ERRNO | errno.ENOSYS  # i386
    # Only the allowlist (the policy turned the deny-list off): ptrace passes, MPTCP does not.
    only_net = _seccomp.build_filter(machine, deny_calls=False, socket_allowlist=True)
    assert run_filter(only_net, arch, ptrace_nr) == ALLOW
    assert run_filter(only_net, arch, socket_nr, (2, 1, 262)) == RET_ERRNO | errno.EPROTONOSUPPORT
    assert run_filter(only_net, arch, socket_nr, (1, 1, 0)) == RET_ERRNO | errno.EACCES


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_without_the_allowlist_sockets_are_as_before(machine: str) -> None:
    arch, socket_nr, _, _ = ARCHES[machine]
    for deny_unix in (False, True):
        program = _seccomp.build_filter(machine, deny_unix_sockets=deny_unix)
        for name, family, kind, proto, _ in REFUSED:
            expected = RET_ERRNO | errno.EACCES if deny_unix and family == 1 else ALLOW
            assert run_filter(program, arch, socket_nr, (family, kind, proto)) == expected, name


def test_the_layer_is_planned_for_network_deny_only() -> None:
    def caps(*available: str) -> list[Capability]:
        return [Capability(name, name in available, "test") for name in CAPABILITY_NAMES]

    everything = caps("shim", "landlock-fs", "landlock-net", "landlock-scope", "netns", "seccomp", "seccomp-net")
    assert "seccomp-net" not in plan_layers(IsolationPolicy(), everything, euid=1000)
    deny = plan_layers(IsolationPolicy(network="deny"), everything, euid=1000)
    assert deny[-2:] == ("seccomp", "seccomp-net")
    ports = plan_layers(IsolationPolicy(network="deny", allowed_tcp_ports=(443,)), everything, euid=1000)
    assert ports[-2:] == ("seccomp", "seccomp-net")
    # Part of the network denial, not of the optional deny-list: planned with seccomp=False too.
    no_deny_list = plan_layers(IsolationPolicy(network="deny", seccomp=False), everything, euid=1000)
    assert no_deny_list[-1] == "seccomp-net" and "seccomp" not in no_deny_list
    # Optional like seccomp itself: left out where the kernel offers no seccomp.
    assert "seccomp-net" not in plan_layers(IsolationPolicy(network="deny"), caps("shim", "netns"), euid=1000)


# -- real plugins ----------------------------------------------------------------------------

KINDS: list[tuple[str, int, int, int]] = [
    ("tcp", 2, 1, 0),
    ("tcp6", 10, 1, 6),
    ("udp", 2, 2, 0),
    ("netlink route", 16, 3, 0),
    ("mptcp", 2, 1, 262),
    ("mptcp6", 10, 1, 262),
    ("sctp", 2, 1, 132),
    ("icmp ping", 2, 2, 1),
    ("raw", 2, 3, 255),
    ("inet seqpacket", 2, 5, 0),
    ("packet", 17, 3, 0x300),
    ("vsock", 40, 1, 0),
    ("alg", 38, 5, 0),
    ("netlink sock_diag", 16, 3, 4),
    ("netlink uevent", 16, 2, 15),
    ("unix", 1, 1, 0),
]
REFUSED_KINDS = {
    "tcp": "ok",
    "tcp6": "ok",
    "udp": "ok",
    "netlink route": "ok",
    "mptcp": "EPROTONOSUPPORT",
    "mptcp6": "EPROTONOSUPPORT",
    "sctp": "EPROTONOSUPPORT",
    "icmp ping": "EPROTONOSUPPORT",
    "raw": "EPROTONOSUPPORT",
    "inet seqpacket": "EPROTONOSUPPORT",
    "packet": "EAFNOSUPPORT",
    "vsock": "EAFNOSUPPORT",
    "alg": "EAFNOSUPPORT",
    "netlink sock_diag": "EPROTONOSUPPORT",
    "netlink uevent": "EPROTONOSUPPORT",
    "unix": "EACCES",
}
SOCKET_OPS: list[list[object]] = [["socket", f, t, p] for _, f, t, p in KINDS] + [["socketpair", 1, 1]]


def by_kind(results: list[str]) -> dict[str, str]:
    return dict(zip([name for name, *_ in KINDS] + ["unix socketpair"], results, strict=True))


async def test_network_deny_refuses_every_socket_kind_its_rules_do_not_cover(tmp_path: Path) -> None:
    need("seccomp-net")
    with trio.fail_after(20):
        results, proc = await poke(SOCKET_OPS, strict(), str(tmp_path))
    assert "seccomp-net" in proc.isolation
    assert by_kind(results) == {**REFUSED_KINDS, "unix socketpair": "ok"}


async def test_the_socket_allowlist_does_not_depend_on_the_deny_list(tmp_path: Path) -> None:
    need("seccomp-net")
    ops: list[list[object]] = [["ptrace"], ["socket", 2, 1, 262], ["socket", 40, 1, 0], ["status", "Seccomp"]]
    with trio.fail_after(20):
        results, proc = await poke(ops, strict(landlock=False, seccomp=False), str(tmp_path))
    assert "seccomp-net" in proc.isolation and "seccomp" not in proc.isolation
    assert results == ["ok", "EPROTONOSUPPORT", "EAFNOSUPPORT", "2"]


async def test_granted_ports_open_plain_tcp_only(tmp_path: Path) -> None:
    need("seccomp-net", "landlock-net")
    granted = socket.create_server(("127.0.0.1", 0), backlog=16)
    other = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        port, other_port = granted.getsockname()[1], other.getsockname()[1]
        ops: list[list[object]] = [
            ["connect", "127.0.0.1", port],
            ["connect", "127.0.0.1", other_port],
            ["connect", "127.0.0.1", other_port, 262],  # MPTCP to the port plain TCP was refused
            ["connect", "127.0.0.1", port, 262],  # a granted port opens plain TCP only
            *SOCKET_OPS,
        ]
        with trio.fail_after(20):
            results, proc = await poke(ops, strict(allowed_tcp_ports=(port,)), str(tmp_path))
        assert "seccomp-net" in proc.isolation and "netns" not in proc.isolation
        assert results[:4] == ["ok", "EACCES", "EPROTONOSUPPORT", "EPROTONOSUPPORT"]
        assert by_kind(results[4:]) == {**REFUSED_KINDS, "unix socketpair": "ok"}
        # Nothing reached the refused port (the kernel queues a completed connection without accept()).
        other.setblocking(False)
        with pytest.raises(BlockingIOError):
            other.accept()
        granted.setblocking(False)
        granted.accept()[0].close()  # the plain TCP connection, and only it
        with pytest.raises(BlockingIOError):
            granted.accept()
    finally:
        granted.close()
        other.close()


async def test_network_allow_leaves_sockets_alone(tmp_path: Path) -> None:
    need("seccomp")
    ops: list[list[object]] = [["socket", 2, 1, 262], ["socket", 40, 1, 0], ["socket", 1, 1, 0], ["status", "Seccomp"]]
    with trio.fail_after(20):
        results, proc = await poke(ops, IsolationPolicy(), str(tmp_path))
    assert "seccomp" in proc.isolation and "seccomp-net" not in proc.isolation
    assert results[1:] == ["ok", "ok", "2"]
    assert results[0] in ("ok", "ENOPROTOOPT", "EPROTONOSUPPORT")  # what this kernel says about MPTCP
