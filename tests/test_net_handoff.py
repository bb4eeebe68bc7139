"""hostd/net/handoff.py: what the shim hands over is checked, descriptor by descriptor (issue 26, transparent mode).

The class: *a descriptor taken for what it is not* (a UDP socket served as a listener, a listener as DNS, a
message whose kind letters and descriptors differ in number) or *kept when refused* (a leak into hostd). Each
member is sent over the real Unix socket with ``SCM_RIGHTS`` and must be refused with its reason, every received
descriptor closed (hostd's count of open descriptors is the same after). The well-formed message gives the proxy
listener, the DNS sockets and the transparent listeners in order.
"""

from __future__ import annotations

import array
import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest
import trio

from hostd.net.handoff import Handoff, HandoffError, Received
from sandbox import _shim_net
from tests.conftest import ROOT
from tests.platform_facts import need_layers
from tests.waiting import GENEROUS


def open_sockets() -> set[str]:
    """The sockets this process holds open, by their inode (``socket:[N]``). A test asks whether ITS sockets are
    still open, never how many descriptors the process has: a count also moves when an earlier test's objects
    are collected in between (it once read 19 where 21 were before, after test_prepare_network)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed since the listing
        if target.startswith("socket:"):
            found.add(target)
    return found


def inode(sock: socket.socket) -> str:
    return f"socket:[{os.fstat(sock.fileno()).st_ino}]"


def tcp_listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def udp() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock


async def hand(kinds: bytes, socks: list[socket.socket]) -> Received | str:
    """Send ``kinds`` with ``socks`` as the shim does, close the sender's copies; what ``receive`` gives or raises."""
    handoff = await Handoff.open()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
            channel.connect(handoff.path)
            fds = array.array("i", [s.fileno() for s in socks])
            channel.sendmsg([kinds], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
        for sock in socks:
            sock.close()
        try:
            return await handoff.receive(5)
        except HandoffError as exc:
            return str(exc)
    finally:
        handoff.close()


async def test_the_proxy_listener_dns_sockets_and_transparent_listeners_arrive_in_order() -> None:
    first, dns, second = tcp_listener(), udp(), tcp_listener()
    wanted = [first.getsockname(), dns.getsockname(), second.getsockname()]
    received = await hand(b"LDT", [first, dns, second])
    assert not isinstance(received, str)
    got = [received.listener.socket.getsockname(), received.dns[0].getsockname()]
    got.append(received.transparent[0].socket.getsockname())
    assert got == wanted
    for listener in (received.listener, *received.transparent):
        await listener.aclose()
    received.dns[0].close()


@pytest.mark.parametrize(
    ("kinds", "make", "reason"),
    [
        (b"LT", [tcp_listener, udp], "the shim sent a descriptor that is no TCP socket"),
        (b"LD", [tcp_listener, tcp_listener], "the shim sent a DNS socket that is no UDP socket"),
        (b"DL", [udp, tcp_listener], "the shim sent b'DL' with 2 descriptors, not its listeners"),
        (b"LL", [tcp_listener], "the shim sent b'LL' with 1 descriptors, not its listeners"),
        (b"LX", [tcp_listener, tcp_listener], "the shim sent b'LX' with 2 descriptors, not its listeners"),
    ],
)
async def test_a_descriptor_not_what_its_kind_says_is_refused_and_nothing_leaks(
    kinds: bytes, make: list[Callable[[], socket.socket]], reason: str
) -> None:
    socks = [factory() for factory in make]
    sent = {inode(sock) for sock in socks}
    assert await hand(kinds, socks) == reason
    await trio.lowlevel.checkpoint()
    assert sent & open_sockets() == set()  # hostd kept none of the descriptors it received


async def test_a_connected_tcp_socket_is_no_listener() -> None:
    server = tcp_listener()
    client = socket.create_connection(server.getsockname())
    sockets = [tcp_listener(), client]
    sent = {inode(sock) for sock in sockets}
    refused = await hand(b"LT", sockets)
    assert isinstance(refused, str) and refused.startswith("the shim sent a TCP socket that does not listen")
    assert sent & open_sockets() == set()  # the sender's copies are closed, and no received descriptor is kept
    server.close()


async def shim_hand_off(occupy: int) -> tuple[Received | str, list[str]]:
    """fixtures/sandbox/shim_net_handoff.py in a fresh user + network namespace: what hostd receives, and which
    addresses are local there afterwards."""
    handoff = await Handoff.open()
    command = ["unshare", "-Urn", sys.executable, str(ROOT / "fixtures" / "sandbox" / "shim_net_handoff.py")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done: list[subprocess.CompletedProcess[bytes]] = []

    async def run() -> None:
        argv = [*command, handoff.path, str(occupy)]
        done.append(await trio.run_process(argv, env=env, capture_stdout=True, check=True))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            try:
                received: Received | str = await handoff.receive(GENEROUS)
            except HandoffError as exc:
                received = str(exc)
        return received, json.loads(done[0].stdout.decode())
    finally:
        handoff.close()


async def test_the_shim_makes_names_servers_and_the_fake_range_local_and_hands_all_over() -> None:
    """The shim's own code (route netlink, binds) in a real namespace; never on the host's network."""
    need_layers("netns")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    servers = _shim_net.nameservers()
    received, local = await shim_hand_off(0)
    assert not isinstance(received, str)
    assert local == ["198.18.0.77", "198.19.255.254", *servers]  # the whole /15 and each name server
    assert received.listener.socket.getsockname() == ("127.0.0.1", 3128)
    assert [s.getsockname() for s in received.dns] == [(server, 53) for server in servers]
    assert [t.socket.getsockname() for t in received.transparent] == [("0.0.0.0", p) for p in (80, 443, 8443)]
    assert received.transparent_off is None
    for listener in (received.listener, *received.transparent):
        await listener.aclose()
    for sock in received.dns:
        sock.close()
    # A port already taken: the proxy listener goes alone, with the reason (hostd logs it; nothing opens).
    received, _ = await shim_hand_off(443)
    assert not isinstance(received, str)
    assert (received.dns, received.transparent, received.transparent_off) == (
        [],
        [],
        "Address already in use (0.0.0.0:443)",
    )
    await received.listener.aclose()
