"""The fake-address DNS of a plugin's network namespace (issue 26, transparent mode). Sans-IO.

A client that ignores the proxy variables resolves names itself: glibc's ``getaddrinfo`` (Python's ``socket``,
Node's ``dns.lookup`` behind ``fetch`` and ``https``), Go's own resolver. Inside the namespace the shim makes the
addresses of ``/etc/resolv.conf``'s name servers local and hands their UDP port 53 to hostd
(``sandbox/_shim_net.py``), which answers with :func:`respond`: an ``A`` question for a name the plugin may reach
gets an address of :data:`FAKE_NETWORK` (RFC 2544's benchmarking range, local in the namespace), remembered in
:class:`FakeNames`; a connection to that address lands on a listener hostd accepts on, which maps the address back
to the name and decides it like a ``CONNECT`` (:mod:`hostd.net.proxy`). hostd never resolves anything for real
here: no DNS leaves the namespace, and the real resolution happens at connect time, in the proxy.

Answers (RFC 1035 section 4.1): ``A`` -> one fake address (TTL :data:`TTL_SECONDS`); ``AAAA`` -> ``NOERROR``
without an answer (clients fall back to IPv4, which the namespace serves); any other type -> ``NOERROR`` without an
answer; a name the plugin may not reach -> ``NXDOMAIN``; a class other than ``IN`` or an opcode other than
``QUERY`` -> ``NOTIMP``.

Every query is attacker input (the plugin writes it). The class of defect closed: **a malformed packet that
reaches past the parser** (an exception, a loop, an unbounded name). :func:`respond` never raises on any bytes:
fewer than 12 bytes or a packet with the ``QR`` bit set (a response, never answered: no loops) -> no reply (None);
a packet over :data:`MAX_QUERY_BYTES`, a question count other than 1, a truncated question, a label over 63 octets
or of a reserved kind, a name over 255 octets, or a compression pointer (a question has nothing before it to point
at: pointer loops cannot start) -> ``FORMERR`` with the header only.
"""

from __future__ import annotations

import ipaddress
import struct
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "FAKE_NETWORK",
    "MAX_NAMES",
    "MAX_QUERY_BYTES",
    "TYPE_A",
    "TYPE_AAAA",
    "FakeNames",
    "Query",
    "QueryError",
    "parse_query",
    "respond",
]

#: The fake addresses (RFC 2544's benchmarking range, never routed on the internet): one ``/15`` on the
#: namespace's ``lo``, so every address in it is local there.
FAKE_NETWORK: Final = ipaddress.IPv4Network("198.18.0.0/15")
#: Names one plugin's table holds; the oldest answered is recycled beyond (see :class:`FakeNames`).
MAX_NAMES: Final = 4096
#: The longest query taken (RFC 1035 section 4.2.1's UDP bound); a longer one is ``FORMERR``.
MAX_QUERY_BYTES: Final = 512
#: The TTL of a fake answer, in seconds: short, so a client asks again rather than keep an old mapping long.
TTL_SECONDS: Final = 5
#: The longest name, in octets of its wire form (RFC 1035 section 2.3.4), and the longest label.
MAX_NAME_OCTETS: Final = 255
MAX_LABEL_OCTETS: Final = 63

TYPE_A: Final = 1
TYPE_AAAA: Final = 28
CLASS_IN: Final = 1
NOERROR, FORMERR, NXDOMAIN, NOTIMP = 0, 1, 3, 4
_HEADER = struct.Struct("!HHHHHH")
_QR, _AA, _RD, _RA = 0x8000, 0x0400, 0x0100, 0x0080
_OPCODE = 0x7800
#: The octets a name may carry to be one a plugin could reach (letters, digits, ``-``, ``_``); others: NXDOMAIN.
_NAME_OCTETS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


class QueryError(Exception):
    """A query :func:`parse_query` cannot take: ``rcode`` is what to answer (``FORMERR``, ``NOTIMP``)."""

    def __init__(self, rcode: int, why: str) -> None:
        super().__init__(why)
        self.rcode = rcode


@dataclass(frozen=True)
class Query:
    """One parsed question: ``ident`` and ``flags`` (the header's), ``name`` (lower case, dots between labels, no
    trailing dot; None when an octet is outside letters, digits, ``-`` and ``_``), ``qtype``, ``qclass`` and
    ``question`` (its wire form, echoed in the answer)."""

    ident: int
    flags: int
    name: str | None
    qtype: int
    qclass: int
    question: bytes


def parse_query(packet: bytes) -> Query:
    """Parse a DNS query (RFC 1035 section 4.1). Raises :class:`QueryError` (module text for which packets);
    the caller answers a packet under 12 bytes or with ``QR`` set with nothing (:func:`respond` does)."""
    if len(packet) > MAX_QUERY_BYTES:
        raise QueryError(FORMERR, f"a query has at most {MAX_QUERY_BYTES} bytes")
    ident, flags, qdcount, _, _, _ = _HEADER.unpack_from(packet)
    if flags & _OPCODE:
        raise QueryError(NOTIMP, "only standard queries (opcode 0) are answered")
    if qdcount != 1:
        raise QueryError(FORMERR, f"a query asks one question, not {qdcount}")
    at, labels, octets = 12, [], 1
    while True:
        if at >= len(packet):
            raise QueryError(FORMERR, "the question ends inside its name")
        size = packet[at]
        if size & 0xC0:
            raise QueryError(FORMERR, "a question's name is labels only (no pointer, no extended label)")
        at += 1
        if size == 0:
            break
        octets += size + 1
        if octets > MAX_NAME_OCTETS:
            raise QueryError(FORMERR, f"a name has at most {MAX_NAME_OCTETS} octets")
        if at + size > len(packet):
            raise QueryError(FORMERR, "the question ends inside a label")
        labels.append(packet[at : at + size])
        at += size
    if at + 4 > len(packet):
        raise QueryError(FORMERR, "the question ends before its type and class")
    qtype, qclass = struct.unpack_from("!HH", packet, at)
    if qclass != CLASS_IN:
        raise QueryError(NOTIMP, "only class IN is answered")
    readable = all(octet in _NAME_OCTETS for label in labels for octet in label)
    name = b".".join(labels).decode("ascii").lower() if readable else None
    return Query(ident, flags, name, qtype, qclass, packet[12 : at + 4])


def _reply(ident: int, flags: int, rcode: int, question: bytes = b"", answer: bytes = b"") -> bytes:
    flags = _QR | _AA | _RA | (flags & (_OPCODE | _RD)) | rcode
    return _HEADER.pack(ident, flags, 1 if question else 0, 1 if answer else 0, 0, 0) + question + answer


def respond(packet: bytes, names: FakeNames, allowed: Callable[[str, int], bool]) -> bytes | None:
    """The answer to the query ``packet`` (module text), or None for no answer. Never raises.

    ``allowed(name, qtype)``: whether the plugin may look ``name`` up (its allowlist covers it on some port, or a
    parent may be asked at connect time); it is called once per well-formed ``IN`` query and may log a refusal.
    An allowed ``A`` question takes (or refreshes) the name's address in ``names``.
    """
    if len(packet) < _HEADER.size:
        return None
    ident, flags = struct.unpack_from("!HH", packet)
    if flags & _QR:
        return None
    try:
        query = parse_query(packet)
    except QueryError as exc:
        return _reply(ident, flags, exc.rcode)
    if not query.name or not allowed(query.name, query.qtype):
        return _reply(ident, flags, NXDOMAIN, query.question)
    if query.qtype != TYPE_A:
        return _reply(ident, flags, NOERROR, query.question)
    address = ipaddress.IPv4Address(names.address_for(query.name)).packed
    record = struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, TTL_SECONDS, 4) + address
    return _reply(ident, flags, NOERROR, query.question, record)


class FakeNames:
    """One plugin's names and their fake addresses, both ways, at most ``capacity`` names.

    Each new name takes the next free address of ``network`` (from ``.1``); when the table is full, the name
    answered least recently gives its address up. Recycling is safe: an address is only a way back to a name,
    and the allowlist is checked on that NAME when a connection arrives (:meth:`hostd.net.proxy.PluginProxy.decide`),
    so a client that kept a recycled address reaches, at most, another name the plugin may reach now; a name it
    may not reach never gets an address. ``capacity`` is bounded by the network's size.
    """

    def __init__(self, capacity: int = MAX_NAMES, network: ipaddress.IPv4Network = FAKE_NETWORK) -> None:
        self.capacity = min(capacity, network.num_addresses - 2)
        self.network = network
        self._by_name: OrderedDict[str, str] = OrderedDict()
        self._by_address: dict[str, str] = {}

    def address_for(self, name: str) -> str:
        """``name``'s fake address (dotted text): its own, else a new one, else the least recent name's."""
        address = self._by_name.get(name)
        if address is not None:
            self._by_name.move_to_end(name)
            return address
        if len(self._by_name) >= self.capacity:
            _, address = self._by_name.popitem(last=False)
        else:
            address = str(self.network.network_address + len(self._by_name) + 1)
        self._by_name[name] = address
        self._by_address[address] = name
        return address

    def name_for(self, address: str) -> str | None:
        """The name ``address`` was last given to, or None (an address hostd never answered)."""
        return self._by_address.get(address)

    def __len__(self) -> int:
        return len(self._by_name)
