"""Where hostd's HTTP connections to a remote plugin go: to an address that was checked, and only there.

Theory of operation
-------------------
The class of fault this module closes: *the address the rule checks is not the
address the connection reaches*. The rule is :func:`hostd.remote.endpoint.address_problem`
(a name whose addresses are not all public is refused unless the manifest names
it in ``backend.allow_private``); its members:

- **DNS rebinding**: the name is resolved for the check, then resolved again by
  the HTTP client to connect; the second answer (``127.0.0.1``, ``10.0.0.5``,
  ``169.254.169.254``) is not the first.
- **Spellings read differently by a string rule and by the resolver**: decimal,
  octal, hex and short IPv4 literals (``2130706433``, ``017700000001``,
  ``0x7f.1``, ``127.1`` are all ``127.0.0.1`` to ``getaddrinfo``), addresses
  embedding an IPv4 address (IPv4-mapped ``::ffff:127.0.0.1``, NAT64
  ``64:ff9b::a9fe:a9fe``, 6to4 ``2002:7f00:1::``), the unspecified ``0.0.0.0``
  and ``::`` (a connection to them reaches this machine), a trailing dot.
- **A later request of the same client**: a redirect target, the OAuth flow's
  metadata, registration and token requests, a reconnection: each new
  connection is another chance for the name to answer differently.

The fix is by construction, in the one place every connection is made: the
client's network backend (:class:`CheckedBackend`, the httpcore seam
``AsyncNetworkBackend.connect_tcp``). It resolves the name once
(:func:`resolve_addresses`), checks the numeric answers (so the
spelling in the URL no longer matters: the rule sees what ``getaddrinfo``
made of it; an IPv6 address that leads to an IPv4 address is judged by that
one, hostd/remote/endpoint.py) and dials one of those numeric addresses; nothing
resolves the name again. TLS is unchanged: httpcore sends SNI and verifies the certificate
for the URL's host, not for the address dialled.

Through a proxy (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, minus
``NO_PROXY``, read as httpx reads them) hostd connects to the proxy, and the
proxy's address is not checked: it is the user's own configuration, like the
CA bundle, and is often on the local network. The proxy resolves the target
itself, so hostd cannot pin it; :class:`ProxiedTransport` checks what hostd's
resolver answers for the target before the request goes to the proxy (a
literal address exactly, a name that resolves here to a private address is
refused; a name that does not resolve here is the proxy's to resolve). What the
proxy then reaches is the proxy's policy.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Callable, Iterable

import httpcore2
import httpx2
import trio
from httpx2._utils import get_environment_proxies  # httpx's own reading of the proxy variables

from hostd.remote.endpoint import address_problem

__all__ = ["CheckedBackend", "ProxiedTransport", "check_host", "checked_client_transports", "resolve_addresses"]

#: httpx's default connection limits (``httpx2.AsyncClient`` uses them for the transports it builds itself).
LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20)

#: What a refusal is reported to (the link's :class:`~hostd.mcp.transport.http.HttpWatch` keeps the reason).
RefusalSink = Callable[[str], None]


async def resolve_addresses(host: str, port: int) -> list[str]:
    """The addresses ``getaddrinfo`` gives for ``host``, in its order of preference, each once.

    One lookup (``trio.socket.getaddrinfo``: a worker thread, abandoned on
    cancellation). Raises ``OSError`` (``socket.gaierror``) when the name does
    not resolve.
    """
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def check_host(host: str, port: int, allow_private: Iterable[str]) -> tuple[list[str], str | None]:
    """``(the addresses host resolves to, why hostd may not connect to them or None)``.

    One resolution (:func:`resolve_addresses`, cancellable); a
    name that does not resolve gives ``([], reason)``.
    """
    try:
        addresses = await resolve_addresses(host, port)
    except OSError as exc:
        return [], f"{host} does not resolve: {exc}"
    return addresses, address_problem(host, addresses, list(allow_private))


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend for direct connections: resolve once, check, dial a checked address.

    ``allow_private`` is the manifest's ``backend.allow_private`` (approved with
    the launch); ``on_refused`` is told the reason of every refusal. Each
    :meth:`connect_tcp` raises ``httpcore2.ConnectError`` (httpx's
    ``ConnectError``) with the reason when the rule refuses, without opening a
    socket; httpcore's trio backend dials the checked address.
    """

    def __init__(self, allow_private: Iterable[str], on_refused: RefusalSink) -> None:
        self._allow_private = tuple(allow_private)
        self._on_refused = on_refused
        self._inner = httpcore2.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """A TCP stream to one of ``host``'s checked addresses, tried in the resolver's order.

        ``timeout`` (seconds, None for none) bounds the resolution and every
        attempt together: past it, ``httpcore2.ConnectTimeout``. Cancellation
        abandons the resolution and any attempt in progress.
        """
        with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
            addresses, problem = await check_host(host, port, self._allow_private)
            if problem is not None:
                self._on_refused(problem)
                raise httpcore2.ConnectError(problem)
            failure: Exception | None = None
            for address in addresses:
                try:
                    return await self._inner.connect_tcp(
                        address, port, timeout=None, local_address=local_address, socket_options=socket_options
                    )
                except httpcore2.ConnectError as exc:
                    failure = exc
            assert failure is not None  # addresses is never empty here: address_problem refuses an empty list
            raise failure
        assert scope.cancelled_caught
        raise httpcore2.ConnectTimeout(f"connecting to {host}:{port} took over {timeout:g} s")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Never: a remote plugin is reached over TCP (raises ``httpcore2.ConnectError``)."""
        del timeout, socket_options
        raise httpcore2.ConnectError(f"hostd does not connect remote plugins to a Unix socket ({path})")

    async def sleep(self, seconds: float) -> None:
        """httpcore's retry delay (seconds)."""
        await trio.sleep(seconds)


class _DirectTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport over a connection pool that dials through :class:`CheckedBackend`.

    httpx's transport takes no network backend, so this one builds its pool
    itself (``_pool`` is the attribute every method of the base class uses);
    everything else (request and response mapping, errors) is httpx's.
    """

    def __init__(self, backend: CheckedBackend, limits: httpx2.Limits) -> None:  # no super(): it builds a pool
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(trust_env=True),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )


class ProxiedTransport(httpx2.AsyncBaseTransport):
    """httpx's transport through a proxy, each target checked by hostd's resolver first (module header).

    ``proxy`` is the proxy URL from the environment. A refused target raises
    ``httpx2.ConnectError`` with the reason (also told to ``on_refused``) and
    nothing reaches the proxy. Verdicts are kept per ``(host, port)`` for the
    transport's life.
    """

    def __init__(
        self, proxy: str, allow_private: Iterable[str], on_refused: RefusalSink, limits: httpx2.Limits
    ) -> None:
        self._inner = httpx2.AsyncHTTPTransport(proxy=proxy, trust_env=True, limits=limits)
        self._allow_private = tuple(allow_private)
        self._on_refused = on_refused
        self._verdicts: dict[tuple[str, int], str | None] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Check ``request``'s host (cached), then send it through the proxy."""
        url = request.url
        key = (url.host, url.port or (443 if url.scheme == "https" else 80))
        if key not in self._verdicts:
            addresses, problem = await check_host(*key, self._allow_private)
            self._verdicts[key] = problem if addresses else None  # no answer here: the proxy resolves it
        problem = self._verdicts[key]
        if problem is not None:
            self._on_refused(problem)
            raise httpx2.ConnectError(problem, request=request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the proxy's connection pool."""
        await self._inner.aclose()


def checked_client_transports(
    allow_private: Iterable[str], on_refused: RefusalSink, limits: httpx2.Limits = LIMITS
) -> tuple[httpx2.AsyncBaseTransport, dict[str, httpx2.AsyncBaseTransport | None]]:
    """``(transport, mounts)`` for ``httpx2.AsyncClient``: direct connections through
    :class:`CheckedBackend`, and a :class:`ProxiedTransport` per proxy the
    environment names (``None`` for a ``NO_PROXY`` pattern: the direct transport).

    httpx reads the proxy variables only when it builds its own transport, so
    they are read here the way httpx reads them.
    """
    allow = tuple(allow_private)
    direct = _DirectTransport(CheckedBackend(allow, on_refused), limits)
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else ProxiedTransport(proxy, allow, on_refused, limits)
        for pattern, proxy in get_environment_proxies().items()
    }
    return direct, mounts
