"""Transparent mode of a plugin's proxy (issue 26): clients that ignore the proxy variables reach allowlisted hosts.

A client that resolves names and connects itself (Node 20's built-in ``fetch`` and ``https``, Go's resolver, a
raw ``socket.create_connection``) asks the name servers of ``/etc/resolv.conf``; inside the plugin's namespace
those addresses are local and their port 53 is one of hostd's DNS sockets (``sandbox/_shim_net.py``). hostd
answers (:func:`hostd.net.dns.respond`): a name the plugin may reach gets a fake address of ``198.18.0.0/15``
(:class:`hostd.net.dns.FakeNames`, per plugin), any other name ``NXDOMAIN`` at once, with the proxy's refusal
line to the parent. The client connects to that address on port 80, 443 or a port its allowlist names, and lands
on one of hostd's transparent listeners there (``0.0.0.0:<port>``); hostd maps the local address back to the
name and runs the same decision as ``CONNECT`` (:meth:`hostd.net.proxy.PluginProxy.handle_transparent`): the
allowlist on the name and port, the parent's consent, the real resolution by hostd, the private-address rule,
the per-plugin limits; then it splices the bytes (TLS untouched end to end).

Which names get an address: one an allowlist entry covers on some port (the port is checked at connect time),
or one the parent could let through at connect time (``askable(name)``: it declared ``capabilities.network``,
or it answered ``always`` for that name before);
never an IP literal nor a name outside :func:`hostd.net.allowlist.canonical_host`'s grammar. hostd never
resolves a name for real at DNS time: no DNS channel leaves the namespace. ``AAAA`` questions get no answer
(clients use IPv4, the only family served).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import trio

from hostd.net.allowlist import Allowlist, EntryError, canonical_host
from hostd.net.dns import MAX_QUERY_BYTES, TYPE_A, FakeNames, respond

__all__ = [
    "ACCEPT_PAUSE_SECONDS",
    "DNS_QUERIES_PER_SECOND",
    "ConnectionDecider",
    "Pace",
    "accept",
    "serve_transparent_mode",
]


#: DNS queries one plugin gets answered per second (a burst of as many); beyond, its queries wait in the kernel's
#: socket buffer (and are dropped there when it is full): a plugin flooding its DNS costs hostd a bounded share.
DNS_QUERIES_PER_SECOND = 512


_S = TypeVar("_S", bound=trio.abc.AsyncResource)
#: How long a listener of a plugin waits before accepting again when hostd is out of descriptors or memory.
ACCEPT_PAUSE_SECONDS = 0.1
#: The errors of ``accept`` that are hostd's resources running out, not the connection's (trio re-raises them).
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


async def accept(listener: trio.abc.Listener[_S], on_error: Callable[[str], None]) -> _S:
    """The next connection of ``listener`` (one of a plugin's: the proxy's or a transparent one).

    The class closed here: *hostd's own shortage ending a plugin's proxy*. When hostd is out of descriptors or
    memory (``EMFILE``, ``ENFILE``, ``ENOMEM``, ``ENOBUFS``: many plugins, or one filling what the others left),
    trio's ``accept`` raises, and the proxy's accept loop ended with it: the plugin's proxy and transparent mode
    closed for good, or hostd with them. Here each such error is told once to ``on_error`` (its words), and
    accepting resumes after :data:`ACCEPT_PAUSE_SECONDS` (the connections wait in the backlog meanwhile), as
    ``trio.serve_listeners`` does. Other errors propagate. Cancellation passes.
    """
    while True:
        try:
            return await listener.accept()
        except OSError as exc:
            if exc.errno not in _RESOURCE_ERRNOS:
                raise
            on_error(f"hostd could not accept a connection ({os.strerror(exc.errno)}); retrying")
            await trio.sleep(ACCEPT_PAUSE_SECONDS)


class Pace(Protocol):
    """A token bucket (``hostd.net.proxy._Bucket``): ``take(count)`` waits until ``count`` tokens are there."""

    async def take(self, count: int) -> None:
        """Take ``count`` tokens, sleeping (trio's clock) while there are too few."""


class ConnectionDecider(Protocol):
    """What transparent mode asks of :class:`hostd.net.proxy.PluginProxy` (which imports this module)."""

    plugin: str
    allowlist: Allowlist

    def report(self, host: str, port: int, status: int | str, reason: str) -> None:
        """One refusal line to the parent."""

    async def handle_transparent(self, stream: trio.SocketStream, host: str | None, port: int, address: str) -> None:
        """Decide and serve one connection to ``address:port`` standing for ``host``."""


def dns_allowed(proxy: ConnectionDecider, askable: Callable[[str], bool]) -> Callable[[str, int], bool]:
    """The ``allowed(name, qtype)`` of :func:`hostd.net.dns.respond` for ``proxy``'s plugin (module text); a name
    refused on an ``A`` question is reported once per question (``AAAA`` for the same name is not reported)."""

    def allowed(name: str, qtype: int) -> bool:
        try:
            host, address = canonical_host(name)
        except EntryError:
            host, address = name, None
            ok = False
        else:
            entries = proxy.allowlist.entries  # read at each question: a replaced allowlist applies at once
            ok = address is None and (any(e.covers(host, None) for e in entries) or askable(host))
        if not ok and qtype == TYPE_A:
            reason = (
                f"{host} is not in the plugin's allowlist on any port (to let it through: hostctl grant "
                f"{proxy.plugin} --host {host}:PORT)"
            )
            proxy.report(host, 0, "NXDOMAIN", reason)
        return ok

    return allowed


async def serve_dns(
    sock: trio.socket.SocketType, names: FakeNames, allowed: Callable[[str, int], bool], pace: Pace
) -> None:
    """Answer the queries arriving on the UDP socket ``sock`` until cancelled (then closes it), one token of
    ``pace`` each (:data:`DNS_QUERIES_PER_SECOND`, shared by the plugin's DNS sockets). A datagram over
    :data:`hostd.net.dns.MAX_QUERY_BYTES` is read truncated and answered ``FORMERR``; a reply that cannot be sent
    is dropped (UDP), and so is the ICMP refusal a vanished client's port may leave (``ECONNREFUSED``)."""
    with sock:
        while True:
            try:
                packet, peer = await sock.recvfrom(MAX_QUERY_BYTES + 1)
            except ConnectionRefusedError:
                continue
            await pace.take(1)
            reply = respond(packet, names, allowed)
            if reply is not None:
                try:
                    await sock.sendto(reply, peer)
                except OSError:
                    continue


async def serve_listener(listener: trio.SocketListener, proxy: ConnectionDecider, names: FakeNames) -> None:
    """Accept on one transparent listener until cancelled; each connection is decided by the name its local
    address stands for (:meth:`hostd.net.proxy.PluginProxy.handle_transparent`). Cancellation closes the listener
    and its connections."""
    async with listener, trio.open_nursery() as nursery:
        while True:
            stream = await accept(listener, lambda why: proxy.report("", 0, "error", why))
            try:
                address, port = stream.socket.getsockname()[:2]
            except OSError:  # gone already
                await stream.aclose()
                continue
            nursery.start_soon(proxy.handle_transparent, stream, names.name_for(address), port, address)


async def serve_transparent_mode(
    proxy: ConnectionDecider,
    dns: Sequence[trio.socket.SocketType],
    transparent: Sequence[trio.SocketListener],
    askable: Callable[[str], bool],
    pace: Pace,
) -> None:
    """Serve ``proxy``'s plugin's DNS sockets and transparent listeners with one :class:`FakeNames` until
    cancelled (module text); ``pace`` bounds the DNS queries (:data:`DNS_QUERIES_PER_SECOND` tokens a second)."""
    names = FakeNames()
    allowed = dns_allowed(proxy, askable)
    async with trio.open_nursery() as nursery:
        for sock in dns:
            nursery.start_soon(serve_dns, sock, names, allowed, pace)
        for listener in transparent:
            nursery.start_soon(serve_listener, listener, proxy, names)
