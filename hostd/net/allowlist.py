"""A plugin's network allowlist (manifest field ``network``; issue 26): parsing, matching, address rules. Sans-IO.

An **entry** names the hosts a plugin may reach and on which ports:

- ``api.example.com``: exactly that host (any letter case, with or without the trailing dot of a fully
  qualified name, a Unicode name in its IDNA form or not: one host, one spelling, :func:`canonical_host`);
- ``*.example.com``: every host *below* ``example.com`` (``a.example.com``, ``a.b.example.com``), not
  ``example.com`` itself; the suffix must have two labels at least (``*.com`` is refused);
- ``127.0.0.1``, ``[::1]``: exactly that address (an IPv6 address always in brackets; an IPv4-mapped IPv6
  address is its IPv4 address);
- any of them followed by ``:PORT`` (1..65535, decimal): that port only. Without a port an entry allows the web
  ports, :data:`DEFAULT_PORTS` (80 and 443).

The class of defect this module closes: **two spellings of one destination** (``API.Example.COM.``, ``xn--``
forms, ``127.1``, ``2130706433``, ``0x7f.0.0.1``, ``0177.0.0.1``, ``::ffff:127.0.0.1``). Every host, entry or
request, goes through :func:`canonical_host`, which gives one spelling or refuses: a name whose last label is
numeric is an IPv4 address to every resolver, so it must be written as four decimal parts or it is refused (a
resolver would read ``2130706433`` as ``127.0.0.1``). Every entry is attacker input (a manifest, a bundle, a
registry entry): anything outside this grammar raises :class:`EntryError` naming the entry and why.

**Private addresses.** A name in the allowlist is a name on the internet: the proxy refuses to connect when it
resolves to a loopback, private, link-local or otherwise non-public address (DNS rebinding: a public name
pointed at ``127.0.0.1`` would reach the user's own services), unless the allowlist names that host in
``private`` too (:meth:`Allowlist.may_reach_private`). An IP literal entry names its address explicitly, so it
may be any kind.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import idna

__all__ = [
    "DEFAULT_PORTS",
    "MAX_ENTRIES",
    "AddressKind",
    "Allowlist",
    "EntryError",
    "HostEntry",
    "address_kind",
    "addresses_problem",
    "canonical_entries",
    "canonical_host",
    "host_port",
    "parse_entry",
    "split_host_port",
]

#: The ports an entry without ``:PORT`` allows: HTTP and HTTPS.
DEFAULT_PORTS: Final = (80, 443)
#: The most entries one allowlist holds (manifest ``network.hosts`` plus the parent's grants).
MAX_ENTRIES: Final = 256
#: The longest entry, in characters: a 253-character name, ``*.``, ``:65535`` and brackets fit.
MAX_ENTRY_CHARS: Final = 270

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_PORT = re.compile(r"^[1-9][0-9]{0,4}$")
#: A last label a resolver reads as (part of) an IPv4 address: decimal, octal or hexadecimal digits.
_NUMERIC = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
#: NAT64's well-known prefix (RFC 6052): ``64:ff9b::a.b.c.d`` reaches the IPv4 address ``a.b.c.d``.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class EntryError(ValueError):
    """An allowlist entry or a requested host outside the grammar; the message names it and says why."""


#: What a non-public address is (:func:`address_kind`; the wire's ``network/request`` ``addressKind``).
AddressKind = Literal["loopback", "private", "link-local", "multicast", "unspecified"]


def _ip(text: str) -> IPAddress:
    """The address ``text`` writes (an IPv4-mapped IPv6 address as its IPv4 address); raises ValueError."""
    ip = ipaddress.ip_address(text)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def host_port(host: str, port: int) -> str:
    """``host:port`` as an allowlist entry and every refusal spell it: an IPv6 address in brackets (RFC 3986
    section 3.2.2), a name or an IPv4 address as it is. ``host`` is canonical already (:func:`canonical_host`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def canonical_host(host: str) -> tuple[str, IPAddress | None]:
    """``(the one spelling of host, its address when host is an IP literal)``; raises :class:`EntryError`.

    ``host`` is a name or an IP literal without port (an IPv6 literal with or without its brackets). Names come
    back lowercase, without a trailing dot, in IDNA (A-label) form; addresses in their compressed form. Refused:
    empty or over 253 characters, an empty label, a label outside letters, digits and inner hyphens (after
    IDNA), invalid IDNA, a zone id, and a name whose last label is numeric but is not a four-part decimal IPv4
    address (``127.1``, ``2130706433``, ``0x7f.0.0.1``, ``010.0.0.1``: resolvers read them as addresses).
    """
    text = host
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
        if ":" not in text:
            raise EntryError(f"{host!r}: brackets hold an IPv6 address only")
    if ":" in text:
        if "%" in text:
            raise EntryError(f"{host!r}: an IPv6 zone id is not allowed")
        try:
            ip = _ip(text)
        except ValueError:
            raise EntryError(f"{host!r} is not an IPv6 address") from None
        return str(ip), ip
    if not text or any(ch.isspace() or ord(ch) < 0x20 or ch == "\x7f" for ch in text):
        raise EntryError(f"{host!r}: a host must be a name or an address, without spaces or control characters")
    name = text[:-1] if text.endswith(".") else text
    try:
        ascii_name = name.lower() if name.isascii() else idna.encode(name, uts46=True).decode("ascii")
    except UnicodeError as exc:  # idna.IDNAError is one
        raise EntryError(f"{host!r} is not a valid international name: {exc}") from None
    labels = ascii_name.split(".")
    if _NUMERIC.match(labels[-1]):
        try:
            ip4 = ipaddress.IPv4Address(ascii_name)
        except ValueError:
            raise EntryError(
                f"{host!r}: a name ending in a number is an IPv4 address to resolvers; write the address as "
                "four decimal parts (e.g. 127.0.0.1)"
            ) from None
        return str(ip4), ip4
    if len(ascii_name) > 253:
        raise EntryError(f"{host!r}: a host name has at most 253 characters")
    for label in labels:
        if not _LABEL.match(label):
            raise EntryError(
                f"{host!r}: each part of a name is 1 to 63 letters, digits or inner hyphens (part {label!r})"
            )
        if label.startswith("xn--"):
            try:
                idna.decode(label)
            except UnicodeError:
                raise EntryError(f"{host!r}: {label!r} is not valid IDNA") from None
    return ascii_name, None


def split_host_port(text: str) -> tuple[str, int | None]:
    """``"host:port"`` -> ``("host", port)``; ``"host"`` -> ``("host", None)``; IPv6 in brackets: ``"[::1]:80"``.

    Raises :class:`EntryError` for a port outside 1..65535 or not plain decimal, and for an IPv6 address
    without brackets (``::1:80`` cannot be split).
    """
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise EntryError(f"{text!r}: an IPv6 address opened with '[' must close with ']'")
        host, rest = text[: close + 1], text[close + 1 :]
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise EntryError(f"{text!r}: only ':PORT' may follow ']'")
        return host, _port(text, rest[1:])
    if text.count(":") > 1:
        raise EntryError(f"{text!r}: write an IPv6 address in brackets, e.g. [::1]:443")
    host, colon, port = text.partition(":")
    return host, _port(text, port) if colon else None


def _port(text: str, port: str) -> int:
    if not _PORT.match(port) or int(port) > 65535:
        raise EntryError(f"{text!r}: a port is a decimal number from 1 to 65535")
    return int(port)


@dataclass(frozen=True)
class HostEntry:
    """One parsed entry: ``host`` (canonical name, the suffix of a wildcard, or an address), ``wildcard``,
    ``ports`` (sorted; :data:`DEFAULT_PORTS` when the entry named none) and ``address`` (IP literals)."""

    host: str
    wildcard: bool
    ports: tuple[int, ...]
    address: IPAddress | None
    port_given: bool

    @property
    def text(self) -> str:
        """The entry's canonical spelling (what the approval shows and the digest covers)."""
        host = f"[{self.host}]" if isinstance(self.address, ipaddress.IPv6Address) else self.host
        host = f"*.{host}" if self.wildcard else host
        return f"{host}:{self.ports[0]}" if self.port_given else host

    def covers(self, host: str, address: IPAddress | None) -> bool:
        """Whether the canonical ``host`` (``address``: its IP when it is a literal) is one this entry names."""
        if self.address is not None or address is not None:
            return self.address is not None and self.address == address
        if self.wildcard:
            return host.endswith("." + self.host)
        return host == self.host


def parse_entry(text: object) -> HostEntry:
    """Parse one allowlist entry (module text for the grammar); raises :class:`EntryError` naming it and why."""
    if not isinstance(text, str):
        raise EntryError(f"an entry is a string, not {type(text).__name__}")
    if len(text) > MAX_ENTRY_CHARS:
        raise EntryError(f"{text[:40]!r}...: an entry has at most {MAX_ENTRY_CHARS} characters")
    wildcard = text.startswith("*.")
    body = text[2:] if wildcard else text
    if "*" in body:
        raise EntryError(f"{text!r}: '*' may only start an entry, as '*.' followed by a name")
    if any(ch in body for ch in "/@?#\\%"):
        raise EntryError(f"{text!r}: an entry is a host and an optional port, not a URL")
    host_text, port = split_host_port(body)
    host, address = canonical_host(host_text)
    if wildcard:
        if address is not None:
            raise EntryError(f"{text!r}: a wildcard names a domain, not an address")
        if host.count(".") < 1:
            raise EntryError(f"{text!r}: a wildcard's domain needs two labels at least (e.g. '*.example.com')")
    ports = (port,) if port is not None else DEFAULT_PORTS
    return HostEntry(host=host, wildcard=wildcard, ports=ports, address=address, port_given=port is not None)


def canonical_entries(texts: Iterable[object]) -> list[str]:
    """The canonical spellings of the entries of ``texts`` that parse, sorted, without duplicates; the others
    are dropped (for stored grants, which were checked when given: a damaged state file loses an entry, never
    widens one)."""
    found: set[str] = set()
    for text in texts:
        try:
            found.add(parse_entry(text).text)
        except EntryError:
            continue
    return sorted(found)


@dataclass(frozen=True)
class Allowlist:
    """A plugin's allowlist: ``entries`` (where it may connect) and ``private`` (entries whose names may resolve
    to non-public addresses; their ports are ignored). Build with :meth:`parse`. An empty allowlist allows
    nothing."""

    entries: tuple[HostEntry, ...] = ()
    private: tuple[HostEntry, ...] = ()

    @classmethod
    def parse(cls, hosts: Iterable[object], private: Iterable[object] = ()) -> Allowlist:
        """Parse ``hosts`` and ``private`` (lists of entry strings). Raises :class:`EntryError` for the first bad
        entry (its message names it), for more than :data:`MAX_ENTRIES`, or for a ``private`` entry that is an
        address (an address entry is explicit already)."""
        entries = tuple(parse_entry(h) for h in hosts)
        privates = tuple(parse_entry(h) for h in private)
        if len(entries) + len(privates) > MAX_ENTRIES:
            raise EntryError(f"an allowlist holds at most {MAX_ENTRIES} entries")
        for entry in privates:
            if entry.address is not None:
                raise EntryError(f"{entry.text!r}: an address entry may reach its address already; name hosts here")
        return cls(entries=entries, private=privates)

    @property
    def texts(self) -> list[str]:
        """The entries' canonical spellings, sorted and without duplicates."""
        return sorted({e.text for e in self.entries})

    def match(self, host: str, port: int) -> HostEntry | None:
        """The first entry allowing ``host`` (any spelling :func:`canonical_host` takes) on ``port``, or None.

        Raises :class:`EntryError` when ``host`` itself is outside the grammar (then nothing may match it).
        """
        name, address = canonical_host(host)
        for entry in self.entries:
            if port in entry.ports and entry.covers(name, address):
                return entry
        return None

    def may_reach_private(self, host: str) -> bool:
        """Whether ``host`` may resolve to a non-public address: it is an IP literal (named explicitly by the
        entry that matched it), or a ``private`` entry covers it."""
        name, address = canonical_host(host)
        if address is not None:
            return True
        return any(entry.covers(name, None) for entry in self.private)

    def exact_names(self, port: int) -> list[str]:
        """The exact (not wildcard, not address) names allowed on ``port``: the names an IP literal request may
        be checked against (:meth:`hostd.net.proxy.Proxy` resolves them)."""
        return [e.host for e in self.entries if not e.wildcard and e.address is None and port in e.ports]


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address leads to: IPv4-mapped, NAT64 (well-known prefix) or 6to4; else None."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def address_kind(address: str) -> AddressKind | None:
    """``"loopback"``, ``"private"``, ``"link-local"``, ``"multicast"`` or ``"unspecified"`` for a non-public
    address, None for a public one. An IPv6 address that leads to an IPv4 address (IPv4-mapped, NAT64, 6to4) is
    that address's kind; reserved, shared (100.64/10) and documentation ranges count as ``"private"``."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:
            return "private"
        ip = _embedded_ipv4(ip) or ip
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_private or ip.is_reserved or not ip.is_global:
        return "private"
    return None


def addresses_problem(host: str, addresses: Sequence[str], allowlist: Allowlist) -> str | None:
    """Why the proxy may not connect to ``host`` resolved to ``addresses``, or None.

    Every address must be public unless :meth:`Allowlist.may_reach_private` says the allowlist names the host
    explicitly: one non-public address refuses the whole answer (the DNS-rebinding class: a listed name turned
    into a loopback or LAN address). No address at all is refused too.
    """
    if not addresses:
        return f"{host} resolves to no address"
    if allowlist.may_reach_private(host):
        return None
    for address in addresses:
        kind = address_kind(address)
        if kind is not None:
            return (
                f"{host} resolves to the {kind} address {address}; a plugin reaches a {kind} address only when "
                "its allowlist names the host in network.private, or names the address itself"
            )
    return None
