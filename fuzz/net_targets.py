"""The fuzz targets of the network allowlist (issue 26): the proxy's request-head parser and the allowlist parser.

Both read a stranger's bytes: a plugin writes the request head its proxy parses (hostd/net/proxy.py), and a
manifest, a bundle, a registry entry or a parent writes the allowlist entries (hostd/net/allowlist.py).

Properties (anything else is a crash):

- ``proxy-head``: :func:`hostd.net.proxy._parse_head` returns or refuses with ``400``; a head it accepts holds
  no CR, LF or NUL inside a line (a bare LF is a line end to lenient servers: a header smuggled to the upstream
  through the head hostd rebuilds); the target's authority (:func:`_authority`) gives a port in 1..65535 or a
  ``400``; the host goes to the allowlist (``match``) without another exception than :class:`EntryError`; the
  head passed upstream (:func:`_origin_head`) has exactly the lines it was built from.
- ``allowlist``: each line is an entry (``!``-prefixed: a ``private`` one); :class:`Allowlist.parse` and
  :func:`parse_entry` return or raise :class:`EntryError`; an entry's canonical spelling parses to itself
  (one destination, one spelling), and an exact entry matches its own host on each of its ports.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from hostd.net.allowlist import Allowlist, EntryError, canonical_host, parse_entry, split_host_port
from hostd.net.proxy import Refused, _authority, _origin_head, _parse_head

__all__ = ["allowlist", "proxy_head"]

_EMPTY = Allowlist()


def _line_is_clean(line: bytes) -> bool:
    return not any(c in line for c in b"\r\n\x00")


def proxy_head(data: bytes) -> None:
    """The bytes as a request head (without its final blank line), through the proxy's parsing (module text)."""
    head = data.partition(b"\r\n\r\n")[0]
    try:
        method, target, version, headers = _parse_head(head)
    except Refused as refused:
        assert refused.status == 400, refused.status
        return
    lines = [method + b" " + target + b" " + version, *(n + b": " + v for n, v in headers)]
    assert all(_line_is_clean(line) for line in lines), f"a line of an accepted head holds CR, LF or NUL: {lines}"
    text = target.decode("ascii", "replace")
    try:
        if method == b"CONNECT":
            host, port = _authority(text, None)
            netloc = ""
        else:
            url = urlsplit(text)
            netloc = url.netloc
            host, port = _authority(netloc, 80)
    except Refused as refused:
        assert refused.status == 400, refused.status
        return
    except ValueError:  # urlsplit's own refusal of a malformed authority: the proxy answers it 400 too
        return
    assert 1 <= port <= 65535, port
    try:
        _EMPTY.match(host, port)
        canonical_host(host)
    except EntryError:
        return
    if netloc:
        rebuilt = _origin_head(method, b"/", version, headers, netloc)
        assert rebuilt.endswith(b"\r\n\r\n")
        kept = rebuilt[:-4].split(b"\r\n")
        assert all(_line_is_clean(line) for line in kept), f"the head passed upstream holds CR, LF or NUL: {kept}"


def allowlist(data: bytes) -> None:
    """The bytes as allowlist entries, one a line (``!``: a ``private`` entry), through the parser (module text)."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")[:64]
    hosts = [line for line in lines if not line.startswith("!")]
    private = [line[1:] for line in lines if line.startswith("!")]
    for line in lines:
        try:
            split_host_port(line)
        except EntryError:
            pass
    try:
        parsed = Allowlist.parse(hosts, private)
    except EntryError:
        return
    for entry in parsed.entries:
        again = parse_entry(entry.text)
        assert again == entry, f"{entry.text!r} parses to {again} and not to itself ({entry})"
        if not entry.wildcard:
            host = f"[{entry.host}]" if entry.address is not None and ":" in entry.host else entry.host
            for port in entry.ports:
                assert parsed.match(host, port) is not None, f"{entry.text!r} does not match {host}:{port}"
    parsed.texts  # noqa: B018 (the canonical listing the approval shows must build)
