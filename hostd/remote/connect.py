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

Destinations are judged against the *approved endpoint*, not per request
--------------------------------------------------------------------------
The class: *a URL the server names gets the exemptions the user approved for
the endpoint*. A remote server's 401 names where OAuth discovery goes, its
metadata names the registration and token endpoints, a redirect names its
target; when the approved endpoint is ``http://127.0.0.1:A/mcp``, the loopback
exemption of :func:`hostd.remote.endpoint.address_problem` (a host written as a
loopback literal may be loopback) would let each of them reach any other
service on this machine (``127.0.0.1:B``, ``localhost:22``). Every connection
of a remote link therefore gets at most the approved endpoint's policy
(:func:`destination_problem`): a loopback destination only at the approved
endpoint's own host and port, a private one only for a host the manifest
lists in ``backend.allow_private``; public destinations as before. The check
runs where the connection is made (resolve once, check, dial), so every
request the link makes is covered, whoever named its URL.

Every byte read from a remote is bounded at the transport
----------------------------------------------------------
The class: *a response body read whole because of its status, content type or
the flow that asked for it* (a redirect's body drained by the SDK, a legacy
SSE POST's answer, OAuth discovery, metadata, registration and token answers
read by httpx for the auth flow, an SSE event that never ends). Each response
a remote link receives passes through :class:`BoundedTransport`, under every
client feature: past its bound (:func:`body_bound`) the connection is closed
and the read fails with :class:`ResponseTooLarge`, which names the bound.
"""

from __future__ import annotations

import ipaddress
import math
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Final
from urllib.parse import urlsplit

import httpcore2
import httpx2
import trio
from httpx2._utils import get_environment_proxies  # httpx's own reading of the proxy variables

from hostd.remote.endpoint import LOOPBACK_NAMES, address_problem

__all__ = [
    "REDIRECT_BODY_BYTES",
    "BoundedTransport",
    "CheckedBackend",
    "Origin",
    "ProxiedTransport",
    "ResponseTooLarge",
    "body_bound",
    "check_host",
    "checked_client_transports",
    "destination_problem",
    "origin_of",
    "resolve_addresses",
]

#: Bytes of a redirect's (3xx) body hostd reads: nothing in it is used, the SDK only drains it.
REDIRECT_BODY_BYTES: Final = 64 * 1024

#: ``(host, port)`` of an approved endpoint: the host lower-case without a trailing dot, the port explicit.
Origin = tuple[str, int]

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


def origin_of(url: str) -> Origin:
    """The :data:`Origin` of ``url`` (port 443 for https, 80 for http when the URL names none)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    return host, parts.port or (443 if parts.scheme.lower() == "https" else 80)


def _is_loopback_name(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def destination_problem(host: str, port: int, allow_private: Iterable[str], endpoint: Origin | None) -> str | None:
    """Why a connection to ``host:port`` exceeds the approved endpoint's policy, or None (module header).

    ``endpoint`` is the approved endpoint's :data:`Origin` (None: no endpoint to hold to, the
    rule of :func:`address_problem` alone). A host written as a loopback literal gets the
    loopback exemption only when it is the endpoint's own host and port or is listed in
    ``allow_private``. Pure; the addresses are judged by :func:`address_problem` after it.
    """
    name = host.lower().rstrip(".")
    if endpoint is None or not _is_loopback_name(name):
        return None
    if name in {h.lower().rstrip(".") for h in allow_private} or (name, port) == endpoint:
        return None
    return (
        f"{host}:{port} is on this machine and is not the approved endpoint {endpoint[0]}:{endpoint[1]}; "
        f"hostd reaches loopback only at the endpoint the user approved (or a host in backend.allow_private)"
    )


async def check_host(
    host: str, port: int, allow_private: Iterable[str], endpoint: Origin | None = None
) -> tuple[list[str], str | None]:
    """``(the addresses host resolves to, why hostd may not connect to them or None)``.

    ``endpoint``: see :func:`destination_problem` (refused before any lookup). One resolution
    (:func:`resolve_addresses`, cancellable); a name that does not resolve gives ``([], reason)``.
    """
    allowed = list(allow_private)
    problem = destination_problem(host, port, allowed, endpoint)
    if problem is not None:
        return [], problem
    try:
        addresses = await resolve_addresses(host, port)
    except OSError as exc:
        return [], f"{host} does not resolve: {exc}"
    return addresses, address_problem(host, addresses, allowed)


class CheckedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network backend for direct connections: resolve once, check, dial a checked address.

    ``allow_private`` is the manifest's ``backend.allow_private`` (approved with
    the launch); ``endpoint`` the approved endpoint's origin (:func:`destination_problem`;
    None for a download, which has none); ``on_refused`` is told the reason of every refusal. Each
    :meth:`connect_tcp` raises ``httpcore2.ConnectError`` (httpx's
    ``ConnectError``) with the reason when the rule refuses, without opening a
    socket; httpcore's trio backend dials the checked address.
    """

    def __init__(self, allow_private: Iterable[str], on_refused: RefusalSink, endpoint: Origin | None = None) -> None:
        self._allow_private = tuple(allow_private)
        self._on_refused = on_refused
        self._endpoint = endpoint
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
            addresses, problem = await check_host(host, port, self._allow_private, self._endpoint)
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
        self,
        proxy: str,
        allow_private: Iterable[str],
        on_refused: RefusalSink,
        limits: httpx2.Limits,
        endpoint: Origin | None = None,
    ) -> None:
        self._inner = httpx2.AsyncHTTPTransport(proxy=proxy, trust_env=True, limits=limits)
        self._allow_private = tuple(allow_private)
        self._on_refused = on_refused
        self._endpoint = endpoint
        self._verdicts: dict[tuple[str, int], str | None] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Check ``request``'s host (cached), then send it through the proxy."""
        url = request.url
        key = (url.host, url.port or (443 if url.scheme == "https" else 80))
        if key not in self._verdicts:
            problem = destination_problem(*key, self._allow_private, self._endpoint)
            if problem is None:
                addresses, problem = await check_host(*key, self._allow_private)
                problem = problem if addresses else None  # no answer here: the proxy resolves it
            self._verdicts[key] = problem
        problem = self._verdicts[key]
        if problem is not None:
            self._on_refused(problem)
            raise httpx2.ConnectError(problem, request=request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the proxy's connection pool."""
        await self._inner.aclose()


def checked_client_transports(
    allow_private: Iterable[str],
    on_refused: RefusalSink,
    limits: httpx2.Limits = LIMITS,
    *,
    endpoint: Origin | None = None,
) -> tuple[httpx2.AsyncBaseTransport, dict[str, httpx2.AsyncBaseTransport | None]]:
    """``(transport, mounts)`` for ``httpx2.AsyncClient``: direct connections through
    :class:`CheckedBackend`, and a :class:`ProxiedTransport` per proxy the
    environment names (``None`` for a ``NO_PROXY`` pattern: the direct transport).
    ``endpoint``: the approved endpoint's origin every connection is held to
    (:func:`destination_problem`), None for none.

    httpx reads the proxy variables only when it builds its own transport, so
    they are read here the way httpx reads them.
    """
    allow = tuple(allow_private)
    direct = _DirectTransport(CheckedBackend(allow, on_refused, endpoint), limits)
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else ProxiedTransport(proxy, allow, on_refused, limits, endpoint)
        for pattern, proxy in get_environment_proxies().items()
    }
    return direct, mounts


class ResponseTooLarge(httpx2.StreamError):
    """A response went over its bound (:func:`body_bound`); hostd closed the connection.

    ``limit`` is the bound in bytes, ``what`` what it bounds (``"response body"``,
    ``"redirect body"``, ``"SSE event"``), ``status`` the response's HTTP status.
    """

    def __init__(self, limit: int, what: str = "response body", status: int = 0) -> None:
        shown = f" (HTTP {status})" if status else ""
        super().__init__(f"the server's {what}{shown} is over the {limit}-byte bound; hostd closed the connection")
        self.limit = limit
        self.what = what
        self.status = status


def body_bound(status: int, content_type: str, limit: int) -> tuple[str, int]:
    """``(what is bounded, its bound in bytes)`` for a response of ``status`` and ``content_type``.

    A redirect's body: :data:`REDIRECT_BODY_BYTES` (at most ``limit``); a 2xx
    ``text/event-stream``: each SSE event (bytes since the last blank line) at most
    ``limit``; anything else, whatever its status or type: the whole body at most ``limit``.
    """
    if 300 <= status < 400:
        return "redirect body", min(REDIRECT_BODY_BYTES, limit)
    if 200 <= status < 300 and content_type.lower().lstrip().startswith("text/event-stream"):
        return "SSE event", limit
    return "response body", limit


#: What a cut is reported to (the link's :class:`~hostd.mcp.transport.http.HttpWatch`).
CutSink = Callable[[str], None]

#: Where an SSE event ends (a blank line, with any of the three line ends), longest first.
_EVENT_ENDS: Final = (b"\r\n\r\n", b"\n\n", b"\r\r")


class _CountedStream(httpx2.AsyncByteStream):
    """A response body that closes its connection and raises :class:`ResponseTooLarge` past its bound.

    For an SSE stream the count restarts after each blank line (one event at a time); otherwise it
    is the whole body. Never holds more than one chunk.
    """

    def __init__(
        self, inner: httpx2.AsyncByteStream, what: str, limit: int, status: int, on_cut: CutSink | None
    ) -> None:
        self._inner = inner
        self._what = what
        self._limit = limit
        self._status = status
        self._on_cut = on_cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        tail = b""  # the last bytes of the previous chunk: an event end may straddle two chunks
        events = self._what == "SSE event"
        async for chunk in self._inner:
            if events:
                window = tail + chunk
                end = max((window.rfind(mark) + len(mark) for mark in _EVENT_ENDS if mark in window), default=-1)
                seen = len(window) - end if end >= 0 else seen + len(chunk)
                tail = window[-3:]
            else:
                seen += len(chunk)
            if seen > self._limit:
                await self._inner.aclose()  # unread bytes left: httpcore drops the connection, never reuses it
                error = ResponseTooLarge(self._limit, self._what, self._status)
                if self._on_cut is not None:
                    self._on_cut(str(error))
                raise error
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An httpx transport whose every response body is counted (:func:`body_bound`, module header).

    ``inner`` sends the request; ``limit`` is the link's bound in bytes (its frame
    bound); ``on_cut`` is told the reason of each cut (the link ends a start on it).
    The count is on the bytes received, so each request asks for
    ``Accept-Encoding: identity`` and a response with another ``Content-Encoding``
    (a compressed body would be inflated above the count) fails with
    ``httpx2.DecodingError`` before a byte of its body is read.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int, on_cut: CutSink | None = None) -> None:
        self._inner = inner
        self._limit = limit
        self._on_cut = on_cut

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` through the inner transport; its response body is bounded."""
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        coding = response.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("", "identity"):
            await response.aclose()
            raise httpx2.DecodingError(
                f"the server answered with Content-Encoding {coding!r} although hostd asked for identity "
                "(a compressed body would escape the byte bound)",
                request=request,
            )
        what, limit = body_bound(response.status_code, response.headers.get("content-type", ""), self._limit)
        counted = _CountedStream(response.stream, what, limit, response.status_code, self._on_cut)  # type: ignore[arg-type]
        response.stream = counted
        return response

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()
