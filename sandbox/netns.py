"""The ``netproxy`` layer (issue 26): a plugin in its own network namespace whose only way out is hostd's proxy.

A launch with ``netproxy`` (planned by :func:`sandbox.policy.plan_layers` for a policy with an allowlist, where
unprivileged user, network and pid namespaces work) runs in a network namespace with nothing but its own
loopback: no route out. The shim opens its ways out inside it and hands them to hostd (``sandbox/_shim_net.py``),
whose proxy (:mod:`hostd.net.proxy`) decides every connection on the NAME the plugin asked for. Two ways in, at
once, to the same decision:

**Proxy-aware clients** find the proxy on ``127.0.0.1:``:data:`PROXY_PORT` through :func:`proxy_environment`:
Python (``urllib``, ``requests``, ``httpx``, ``aiohttp`` with ``trust_env``), curl, pip, uv, npm, git, Go's
``net/http`` and Deno read ``HTTP_PROXY`` / ``HTTPS_PROXY`` (or the lowercase names); Node.js reads them in
``fetch`` and ``http``/``https`` with ``NODE_USE_ENV_PROXY=1`` (Node 24.5+ and 22.21+). ``NO_PROXY`` is
emptied: every destination, loopback names included, goes through the proxy's allowlist.

**Transparent mode**, for every client that resolves names and connects itself (an older Node's built-in
``fetch`` and ``https``, Go programs with their own resolver, a raw ``socket.create_connection(("api.example",
443))``, anything using glibc's ``getaddrinfo``): the name servers of ``/etc/resolv.conf`` are local addresses
in the namespace whose UDP port 53 is hostd's fake-address DNS (``hostd/net/dns.py``): a name the allowlist
covers gets an address of ``198.18.0.0/15``, any other name ``NXDOMAIN`` (a parent that can be asked at connect
time: every name gets one); a connection to such an address on port 80, 443 or a port the allowlist names
(:func:`transparent_ports`) lands on hostd's listener there, which maps it back to the name
(``hostd/net/transparent.py``). A refused raw connection is reset (no HTTP status is possible), with the same
refusal line to the parent. The proxy's bounds hold for both ways in together (64 connections, 8 MiB/s); DNS
queries are answered at up to 512 a second per plugin. Where the namespace refuses transparent mode's setup (an
address or a bind), the plugin starts with the proxy alone and hostd tells the parent why (``plugins/log``).

What still does not work for a proxy-unaware client: an IP-literal destination (``ENETUNREACH``: no route; a
loopback literal on a listened port is reset, it is no address hostd's DNS gave); a port outside the listened set
(``ECONNREFUSED``), among them ports of grants added while the plugin runs (the listeners are opened at start);
UDP other than DNS (QUIC/HTTP 3 falls back to TCP); IPv6 (``AAAA`` gets no answer, clients use IPv4); DNS over TCP
(answers are small, never truncated, so UDP suffices); a ``resolv.conf`` naming IPv6 name servers only (glibc asks
them, and finds no route). A client that sends its own DNS elsewhere (DNS over HTTPS) is a proxied HTTPS client
like any other. The listened ports are hostd's inside the namespace: a plugin that serves on one of them itself
(on any of its addresses) gets ``EADDRINUSE``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_TRANSPARENT_PORTS", "PROXY_PORT", "proxy_environment", "transparent_ports"]

#: The proxy's port on the loopback of the plugin's network namespace (any port would do: the namespace is the
#: plugin's own; 3128 is the conventional proxy port).
PROXY_PORT = 3128
#: The most transparent listeners one plugin gets: 80, 443 and the first ports its allowlist names, in order.
MAX_TRANSPARENT_PORTS = 16


def proxy_environment(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that point a plugin's clients at the proxy on ``127.0.0.1:port`` (module text)."""
    url = f"http://127.0.0.1:{port}"
    return {
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "",
        "no_proxy": "",
        "NODE_USE_ENV_PROXY": "1",
    }


def transparent_ports(hosts: Iterable[str]) -> list[int]:
    """The ports transparent mode listens on for an allowlist of canonical entries (``Launch.network``'s hosts,
    ``host``, ``host:PORT``, ``[v6]:PORT``): 80, 443, then each port an entry names in ascending order, at most
    :data:`MAX_TRANSPARENT_PORTS`, never :data:`PROXY_PORT` (the proxy's own) nor 53 (the DNS)."""
    named: set[int] = set()
    for entry in hosts:
        _, colon, tail = entry.rpartition(":")
        if colon and tail.isdigit() and not entry.endswith("]"):
            named.add(int(tail))
    ports = [80, 443, *sorted(named - {80, 443, PROXY_PORT, 53})]
    return ports[:MAX_TRANSPARENT_PORTS]
