"""The link to a remote plugin: hostd's MCP session over the SDK's Streamable HTTP (or legacy HTTP+SSE) transport.

Theory of operation
-------------------
A remote plugin (hostd/remote/endpoint.py) has no process. :class:`RemoteLink` stands
where :class:`~hostd.mcp.transport.stdio.StdioLink` stands for a stdio plugin (both are
:class:`~hostd.mcp.link.PluginLink`, so the supervisor drives both alike; its connection
stands where a process tree stands). Everything MCP is the link driver's, on the same sans-IO
:class:`hostd.mcp.session.ClientSession`: one id space, progress, cancellation,
the era choice (``backend.protocol``: ``auto`` probes ``server/discover`` and
falls back to ``initialize``), ``subscriptions/listen``, liveness, results
handed on as the server's JSON. Only the transport differs: the SDK's
client transports (``mcp.client.streamable_http``, ``mcp.client.sse``) carry
the session's messages. :meth:`RemoteLink._write` hands each message to the
transport with MCP's per-request headers (``MCP-Protocol-Version``, and in
the modern era ``Mcp-Method`` / ``Mcp-Name``); :meth:`RemoteLink._pump_http`
feeds what comes back into the session. The SDK transport owns HTTP itself:
sessions (``Mcp-Session-Id``), SSE responses, a broken stream re-issued or
resumed as the spec says, a modern cancellation as an aborted POST, and
same-origin-only redirects. Any failure of the connection records one reason
and ends the link; the supervisor's restart policy reconnects with backoff
(hostd/plugins/restart.py), exactly as it restarts a crashed stdio plugin.

Where hostd differs from the SDK's defaults, each for a reason:

- **Its own HTTP client** (:func:`http_client`): proxy and CA bundle from the
  environment (``HTTPS_PROXY``, ``SSL_CERT_FILE``: ``trust_env``), a connect
  timeout from the manifest (``connect_timeout_seconds``), no read timeout
  (a tool call's timeout is the supervisor's, and the SSE stream is long-lived),
  every JSON response body bounded to the plugin's frame bound (the SDK reads
  a JSON body whole), every SSE event bounded the same way, every request's
  URL held to :func:`hostd.remote.endpoint.url_problem`, and every connection made to
  an address :func:`hostd.remote.endpoint.address_problem` passed (hostd/remote/connect.py).
- **Legacy SSE only when asked**: ``transport: sse`` in the manifest, or as a
  fallback only when the very first Streamable HTTP request of the link was
  answered 404 or 405 and no response had shown which protocol the server
  speaks (any other status, 500 included, fails the start: a broken modern
  server must not be silently downgraded). Over SSE the era is legacy: the
  2026-07-28 revision is defined over Streamable HTTP only.
- **Secrets**: header values are resolved at connection
  (:func:`hostd.remote.endpoint.resolve_headers`) and join the link's redactor; no
  message hostd writes carries them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Unpack
from urllib.parse import urlsplit

import anyio
import httpx2
import orjson
import trio

from hostd import __version__
from hostd.mcp.link import Discovery, LinkOptions, PluginLink
from hostd.mcp.session import LEGACY_VERSIONS, PROTOCOL_VERSION_META_KEY, ClientSession
from hostd.net.allowlist import Allowlist, EntryError, host_port
from hostd.remote.endpoint import RemoteLaunch, SecretLookup, resolve_headers, url_problem
from hostd.remote.oauth import AUTHORIZE_SECONDS, Authorizer, provider
from hostd.wire.errors import ErrorKind, HostError, start_failed

log = logging.getLogger("hostd.mcp.transport.http")

#: Statuses of the first Streamable HTTP request that mean "no such endpoint for POST": a legacy
#: HTTP+SSE server (MCP 2025-03-26 "Backwards Compatibility"). Nothing else triggers the fallback.
FALLBACK_STATUSES = frozenset({404, 405})


class HttpWatch:
    """What hostd's HTTP client saw: the first response's status, whether any response spoke MCP.

    ``first_status`` is the HTTP status of the link's first response (None before it);
    ``spoke_mcp`` is True once a response carried JSON or an event stream with a 2xx status.
    ``refused`` holds the reason of an address refusal (the request was never sent).
    ``too_large`` the reason of the first response cut at its bound
    (:class:`hostd.remote.connect.ResponseTooLarge`), and ``overflowed`` is set then;
    ``ready`` is True once the link served.
    """

    def __init__(self) -> None:
        self.first_status: int | None = None
        self.spoke_mcp = False
        self.refused: str | None = None
        self.too_large: str | None = None
        self.overflowed = trio.Event()
        self.ready = False

    def cut(self, reason: str) -> None:
        """A response was cut at its bound (``reason`` says which and the bound): the first one is kept."""
        if self.too_large is None:
            self.too_large = reason
        self.overflowed.set()


def http_client(
    launch: RemoteLaunch,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    max_response_bytes: int,
    watch: HttpWatch,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """hostd's HTTP client for one remote link (see the module header for each setting).

    ``headers`` are the resolved headers (secrets included: never log them).
    Every connection goes to an address checked by
    :func:`hostd.remote.endpoint.address_problem` (hostd/remote/connect.py: one lookup, the
    address checked is the address dialled); a refused one fails its request
    with ``httpx2.ConnectError`` naming the reason, kept in ``watch.refused``.
    """

    def refused(problem: str) -> None:
        watch.refused = problem

    # Issue 26: a remote with an allowlist (launch.network, its own endpoint always in it) is reached only at its
    # hosts, whoever names the URL (the server's OAuth metadata, a redirect): hostd makes every request for it.
    hosts = Allowlist.parse(*launch.network) if launch.network is not None else None

    def outside(url: httpx2.URL) -> str | None:
        if hosts is None:
            return None
        port = url.port or (443 if url.scheme == "https" else 80)
        shown = host_port(url.host, port)
        try:
            if hosts.match(url.host, port) is not None:
                return None
        except EntryError as exc:
            return f"{shown} is refused: {exc}"
        return f"{shown} is not in the remote server's network allowlist (network.hosts)"

    async def check_url(request: httpx2.Request) -> None:
        # Every request, not only the endpoint's: the OAuth flow's metadata, registration and token
        # requests go to URLs the server names (protected resource metadata), and a redirect is a new request.
        problem = url_problem(str(request.url.copy_with(query=None, fragment=None)))
        if problem is not None:
            reason = f"{request.url.copy_with(query=None)} {problem}"
            refused(reason)
            raise httpx2.ConnectError(reason, request=request)
        elsewhere = outside(request.url)
        if elsewhere is not None:
            refused(elsewhere)
            raise httpx2.ConnectError(elsewhere, request=request)

    async def observe(response: httpx2.Response) -> None:
        if watch.first_status is None:
            watch.first_status = response.status_code
        kind = response.headers.get("content-type", "").lower()
        if 200 <= response.status_code < 300 and kind.startswith(("application/json", "text/event-stream")):
            watch.spoke_mcp = True

    # httpcore loads when a remote connects
    from hostd.remote.connect import BoundedTransport, checked_client_transports, origin_of  # noqa: PLC0415

    direct, proxied = checked_client_transports(
        launch.endpoint.allow_private, refused, endpoint=origin_of(launch.endpoint.url)
    )
    # Every response, whatever its status, type or the flow that asked (hostd/remote/connect.py), is counted.
    transport = BoundedTransport(direct, max_response_bytes, watch.cut)
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if inner is None else BoundedTransport(inner, max_response_bytes, watch.cut)
        for pattern, inner in proxied.items()
    }
    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(connect=connect_timeout, read=None, write=connect_timeout, pool=connect_timeout),
        trust_env=True,
        auth=auth,
        follow_redirects=False,  # the SDK's transports follow same-origin redirects themselves
        event_hooks={"request": [check_url], "response": [observe]},
        transport=transport,
        mounts=mounts,  # the environment's proxies: httpx reads them only for a client without a transport
    )


class RemoteLink(PluginLink):
    """The MCP client of one remote plugin instance (see the module header).

    ``launch`` is the approved :class:`~hostd.remote.endpoint.RemoteLaunch`; ``headers``
    the resolved headers (secrets included); ``connect_timeout`` (seconds)
    bounds each connection; ``max_frame_bytes`` bounds each JSON response and
    SSE event; ``options`` (:class:`~hostd.mcp.link.LinkOptions`: the sinks, the
    redactor, ``protocol``) go to :class:`~hostd.mcp.link.PluginLink` as they are.
    Everything above the transport (:meth:`request`, :meth:`call_tool`,
    :meth:`list_tools`, :meth:`ping`, the era choice, ``subscriptions/listen``)
    is :class:`~hostd.mcp.link.PluginLink`'s, on the same sans-IO session.
    """

    def __init__(
        self,
        plugin_id: str,
        launch: RemoteLaunch,
        headers: dict[str, str],
        *,
        connect_timeout: float,
        max_frame_bytes: int,
        capabilities: dict[str, Any] | None = None,
        authorizer: Authorizer | None = None,
        on_authorizing: Callable[[bool], Awaitable[None]] | None = None,
        client_secret: str | None = None,
        **options: Unpack[LinkOptions],
    ) -> None:
        super().__init__(
            plugin_id,
            launch_digest=launch.digest,
            capabilities=capabilities,
            **options,
        )
        self.launch = launch
        self._headers = headers
        self._connect_timeout = connect_timeout
        self._max_bytes = max_frame_bytes
        self._capabilities = capabilities
        self._stream: Any = None
        #: The transport in use: the manifest's, or ``sse`` after the 404/405 fallback.
        self.transport: str = launch.endpoint.transport
        self._authorizer = authorizer
        self._client_secret = client_secret
        self._on_authorizing = on_authorizing
        self._start_scope: trio.CancelScope | None = None
        self._startup_timeout = 30.0
        #: Per tool name, the ``x-mcp-header`` map of its last listing: property path -> header token.
        self._param_headers: dict[str, dict[tuple[str, ...], str]] = {}

    async def run(self, startup_timeout: float, *, task_status: trio.TaskStatus[Discovery]) -> None:
        """Connect (with the one allowed fallback), choose the era, list tools, report them, then serve.

        Raises :class:`HostError` (``PLUGIN_START_FAILED``) before ``started``;
        never raises after it (the failure goes to ``failure`` and ``done``).
        """
        transport = self.launch.endpoint.transport
        while True:
            watch = HttpWatch()
            error, ready = await self._serve(transport, watch, startup_timeout, task_status)
            if ready or error is None:
                return
            fallback = (
                transport == "streamable-http" and watch.first_status in FALLBACK_STATUSES and not watch.spoke_mcp
            )
            if not fallback:
                self._fail(str(error.data.get("reason", error.message)))
                raise error
            await self._on_log(
                "info",
                "host",
                f"the server answered the first Streamable HTTP request with {watch.first_status}; "
                "using the legacy HTTP+SSE transport",
            )
            # A fresh session and state: nothing of the failed attempt carries over (ids, era, failure).
            transport = "sse"
            self.session = ClientSession({"name": "hostd", "version": __version__}, self._capabilities)
            self.failure = None
            self.done = trio.Event()

    async def _serve(
        self, transport: str, watch: HttpWatch, startup_timeout: float, task_status: trio.TaskStatus[Discovery]
    ) -> tuple[HostError | None, bool]:
        """One connection over ``transport``: ``(the start's error or None, whether it became ready)``.

        A response cut at its bound (``watch.overflowed``) ends the start at once with that reason, and,
        over legacy SSE, the running link too: the SDK's SSE transport leaves a request whose POST failed
        (and a stream that broke before its ``endpoint`` event) waiting forever. Over Streamable HTTP a
        running link only fails the request the response answered (the SDK reports it to its caller).
        """
        outcome: tuple[HostError | None, bool] | None = None
        async with trio.open_nursery() as guard:

            async def cut_off() -> None:
                await watch.overflowed.wait()
                if transport == "sse" or not watch.ready:
                    guard.cancel_scope.cancel()

            guard.start_soon(cut_off)
            outcome = await self._connection(transport, watch, startup_timeout, task_status)
            guard.cancel_scope.cancel()
        if outcome is not None:
            return outcome
        if watch.ready:
            return None, True
        reason = self._redact(f"{transport}: {watch.too_large}")
        return self._start_error(reason, status=watch.first_status), False

    async def _connection(
        self, transport: str, watch: HttpWatch, startup_timeout: float, task_status: trio.TaskStatus[Discovery]
    ) -> tuple[HostError | None, bool]:
        """:meth:`_serve` without the bound's guard."""
        error: HostError | None = None
        ready = False
        self.transport = transport
        if transport == "sse" and self._protocol not in LEGACY_VERSIONS:
            self._protocol = "legacy"  # HTTP+SSE is the 2024-11-05 transport: the modern era is HTTP-only
        try:
            async with self._streams(transport, watch) as (read, write), trio.open_nursery() as nursery:
                self._stream = write
                self._nursery = nursery  # server requests are answered in it (PluginLink._server_request)
                nursery.start_soon(self._pump_http, read)
                try:
                    await self._start_serving(nursery, startup_timeout, task_status)
                except HostError as exc:
                    error = exc
                else:
                    ready = watch.ready = True
                    await self.done.wait()
                finally:
                    nursery.cancel_scope.cancel()
        except BaseException as exc:  # the SDK transport's task group ends with the connection: its error is why
            if _is_cancellation(exc):
                if ready and watch.too_large is not None:  # cut off by :meth:`_serve`'s guard
                    self._fail(f"lost the connection: {self._redact(f'{transport}: {watch.too_large}')}")
                raise  # a disable, a cancelled enable, shutdown: never turned into a failure
            reason = self._redact(f"{transport}: {_describe(exc)}")
            leaf = _leaf(exc)
            if ready:
                self._fail(f"lost the connection: {reason}")
            elif isinstance(leaf, HostError):  # the authorization's own error (hostd/remote/oauth.py) says it best
                error = leaf
            elif error is None:
                error = self._start_error(reason)
        finally:
            self._stream = None
            if ready:
                self.done.set()
        if error is not None and error.kind is ErrorKind.PLUGIN_START_FAILED and "authoriz" not in error.message:
            reason = str(error.data.get("reason", ""))
            if watch.refused is not None:
                reason = watch.refused
            elif watch.first_status is not None and not watch.spoke_mcp:
                reason += f" (HTTP {watch.first_status})"
            error = self._start_error(reason, status=watch.first_status)
        return error, ready

    @contextlib.asynccontextmanager
    async def _streams(self, transport: str, watch: HttpWatch) -> AsyncIterator[tuple[Any, Any]]:
        """The SDK transport's ``(read, write)`` streams over hostd's HTTP client (the SDK is loaded here)."""
        from mcp.client.sse import sse_client  # noqa: PLC0415 - the SDK is loaded only when a remote plugin starts
        from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

        url = self.launch.endpoint.url

        def hostd_client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = None,
        ) -> httpx2.AsyncClient:
            del headers, timeout, auth  # hostd's client carries its own (module header)
            return http_client(
                self.launch,
                self._headers,
                connect_timeout=self._connect_timeout,
                max_response_bytes=self._max_bytes,
                watch=watch,
                auth=oauth,
            )

        async with contextlib.AsyncExitStack() as stack:
            oauth = await self._oauth(stack, url)
            if transport == "sse":
                streams = sse_client(url, httpx_client_factory=hostd_client, sse_read_timeout=24 * 3600)
            else:
                http = await stack.enter_async_context(hostd_client())
                streams = streamable_http_client(url, http_client=http, max_sse_event_size=self._max_bytes)
            read, write = await stack.enter_async_context(streams)
            yield read, write

    async def _oauth(self, stack: contextlib.AsyncExitStack, url: str) -> httpx2.Auth | None:
        """The SDK's OAuth provider for this connection, its loopback redirect listener running in ``stack``."""
        if self._authorizer is None:
            return None
        authorizer = self._authorizer
        nursery = await stack.enter_async_context(trio.open_nursery())
        authorization = authorizer.begin(self.plugin_id, self._waiting)
        await nursery.start(authorization.listen)
        stack.callback(nursery.cancel_scope.cancel)  # runs before the nursery's exit (the stack unwinds LIFO)
        stack.callback(authorizer.end, self.plugin_id, authorization)
        oauth = dict(self.launch.endpoint.oauth)
        auth: httpx2.Auth = provider(
            url,
            authorization,
            authorizer.store(self.plugin_id, url),
            client_id=oauth.get("clientId"),
            client_secret=self._client_secret,
            scope=oauth.get("scope"),
        )
        return auth

    async def _waiting(self, waiting: bool) -> None:
        """Waiting on a person (the browser step): the start timeout pauses, bounded by AUTHORIZE_SECONDS."""
        scope = self._start_scope
        if scope is not None:
            scope.deadline = trio.current_time() + (AUTHORIZE_SECONDS if waiting else self._startup_timeout)
        if self._on_authorizing is not None:
            await self._on_authorizing(waiting)

    async def _discover(self, startup_timeout: float) -> Discovery:
        """:meth:`PluginLink._discover` under a deadline the browser step can pause (:meth:`_waiting`)."""
        self._startup_timeout = startup_timeout
        started = time.monotonic()
        with trio.CancelScope(deadline=trio.current_time() + startup_timeout) as scope:
            self._start_scope = scope
            try:
                return await super()._discover(math.inf)
            finally:
                self._start_scope = None
        raise self._start_error(
            f"startup timed out after {startup_timeout:g} s", seconds=round(time.monotonic() - started, 3)
        )

    async def list_tools(self) -> list[dict[str, Any]]:
        """:meth:`PluginLink.list_tools`, then, in the modern era, the ``x-mcp-header`` rule: a tool whose
        annotations are invalid is left out, with a warning naming it and why; the others' maps are kept
        for :meth:`_headers_for` (MCP 2026-07-28 "Streamable HTTP", custom headers from tool parameters).

        The class of fault is a tool definition whose headers could not be sent as the server asks: an
        annotation that is empty or not an RFC 9110 token (a space, a colon, non-ASCII, a control
        character), on a type other than string / integer / boolean (object, array, null, number),
        duplicated case-insensitively, or off the plain ``properties`` chain (under ``items``, ``anyOf``,
        ``$defs``...). The spec makes the client exclude just that tool, so one bad definition neither
        fails the listing (the atomic rule of :func:`hostd.mcp.convert.convert_tools` is for the rest) nor
        hides the valid tools. The legacy era has no such headers: its tools pass through untouched.
        Raises like :meth:`PluginLink.list_tools`.
        """
        from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map  # noqa: PLC0415

        tools = await super().list_tools()
        if self.session.era != "modern":
            return tools
        kept: list[dict[str, Any]] = []
        maps: dict[str, dict[tuple[str, ...], str]] = {}
        for tool in tools:
            name = tool.get("name")
            reason = find_invalid_x_mcp_header(tool.get("inputSchema"))
            if reason is not None:
                shown = name if isinstance(name, str) else "?"
                await self._on_log("warning", "host", f"left out tool {shown!r}: invalid x-mcp-header ({reason})")
                continue
            if isinstance(name, str):
                maps[name] = x_mcp_header_map(tool.get("inputSchema"))
            kept.append(tool)
        self._param_headers = maps
        return kept

    async def _pump_http(self, read: Any) -> None:
        """The SDK transport's messages -> the session -> woken callers (the stdio pump's dispatch)."""
        async for item in read:
            if isinstance(item, Exception):
                await self._on_log("warning", "host", self._redact(f"{self.transport}: {_describe(item)}"))
                continue
            value = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            raw = orjson.dumps(value)
            if not await self.deliver(value, len(raw), raw):
                return
        if not self._closing:
            self._fail(f"{self.transport}: the connection closed")

    async def _send(self, value: dict[str, Any]) -> bool:
        """Send one message (the session's JSON) through the SDK transport, with the era's HTTP headers."""
        from mcp.shared.message import ClientMessageMetadata, SessionMessage  # noqa: PLC0415
        from mcp_types import jsonrpc_message_adapter  # noqa: PLC0415

        send = self._stream
        if send is None:
            return False
        headers = self._headers_for(value)
        message = SessionMessage(
            jsonrpc_message_adapter.validate_python(value, by_name=False),
            metadata=ClientMessageMetadata(headers=headers) if headers else None,
        )
        try:
            await send.send(message)
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
        ):
            if not self._closing:
                self._fail(f"{self.transport}: the connection closed")
            return False
        return True

    def _headers_for(self, message: dict[str, Any]) -> dict[str, str]:
        """MCP's per-request HTTP headers: ``MCP-Protocol-Version`` after the era is known, and in the
        modern era ``Mcp-Method`` and ``Mcp-Name`` (MCP "Streamable HTTP", standard headers) and, on
        ``tools/call``, one ``Mcp-Param-{token}`` per ``x-mcp-header`` argument present and not null
        (custom headers from tool parameters; the map from :meth:`list_tools`)."""
        method = message.get("method")
        if not isinstance(method, str) or method == "initialize":
            return {}
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):  # a modern-era request (or the discover probe): the envelope names it
            headers = {"mcp-protocol-version": version, "mcp-method": method}
            name_key = _NAME_BEARING.get(method)
            name = params.get(name_key) if name_key is not None and isinstance(params, dict) else None
            if isinstance(name, str):
                headers["mcp-name"] = _header_value(name)
            header_map = self._param_headers.get(name) if method == "tools/call" and isinstance(name, str) else None
            if header_map and isinstance(params, dict):
                headers |= _param_headers(header_map, params.get("arguments"))
            return headers
        if self.session.era == "legacy" and self.session.protocol_version:
            return {"mcp-protocol-version": self.session.protocol_version}
        return {}

    @property
    def pending_frame_bytes(self) -> int:
        """Always 0: HTTP bodies are not framed lines."""
        return 0


#: Methods whose ``Mcp-Name`` header repeats a parameter (MCP 2026-07-28 "Standard headers").
_NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def _header_value(value: str) -> str:
    """A header-safe form of ``value``: printable ASCII without edge spaces as is, anything else (non-ASCII,
    control characters, leading or trailing whitespace, the sentinel itself) as ``=?base64?<UTF-8>?=``
    (MCP 2026-07-28 "Streamable HTTP", value encoding; the SDK's codec)."""
    from mcp.shared.inbound import encode_header_value  # noqa: PLC0415

    return encode_header_value(value)


def _param_headers(header_map: dict[tuple[str, ...], str], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of one ``tools/call``: ``{"Mcp-Param-<token>": encoded value}`` for each
    path of ``header_map`` that ``arguments`` has a non-null value at (strings as is, integers in decimal,
    booleans ``true`` / ``false``, each through :func:`_header_value`); none when ``arguments`` is not an object.
    """
    from mcp.shared.inbound import mcp_param_headers  # noqa: PLC0415

    return mcp_param_headers(header_map, arguments) if isinstance(arguments, dict) else {}


def _is_cancellation(exc: BaseException) -> bool:
    """``exc`` is trio's ``Cancelled`` or ``KeyboardInterrupt``, alone or as every leaf of a group."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cancellation(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled | KeyboardInterrupt)


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (anyio and trio wrap task errors in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    """``"<Type>: <text>"`` for ``exc``'s first leaf. The text of an exception the SDK raised (``mcp.*``: its
    OAuth errors quote the server's answer, its transport errors the server's redirect) is quoted and
    attributed, cut to 300 characters: it holds what the network sent."""
    leaf = _leaf(exc)
    text = str(leaf).splitlines()[0] if str(leaf) else ""
    if text and type(leaf).__module__.split(".", 1)[0] == "mcp":
        text = "the SDK reported (what the server sent is part of it): " + json.dumps(text[:300], ensure_ascii=True)
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


#: Where :func:`open_secrets` puts the resolved OAuth client secret (not an HTTP header: taken out before use).
_CLIENT_SECRET = "backend.oauth.client_secret"


def split_client_secret(headers: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """``(the headers without the OAuth client secret, the secret or None)`` from :func:`open_secrets`."""
    rest = dict(headers)
    return rest, rest.pop(_CLIENT_SECRET, None)


def host_of(url: str) -> str:
    """The host part of ``url`` (for messages)."""
    return urlsplit(url).hostname or url


def open_secrets(
    plugin_id: str, launch: RemoteLaunch, declared: dict[str, str], lookup: SecretLookup
) -> tuple[dict[str, str], list[str]]:
    """The headers to send (secrets resolved; the OAuth client secret, if any, under :data:`_CLIENT_SECRET`)
    and the secret values (for the redactor).

    Raises ``HostError`` (``PLUGIN_START_FAILED``) naming the header and the
    secret when a ``${secret:NAME}`` reference does not resolve.
    """
    secret = dict(launch.endpoint.oauth).get("clientSecret")
    if secret is not None:
        declared = {**declared, _CLIENT_SECRET: secret}  # resolved like a header value, then taken out
    try:
        return resolve_headers(plugin_id, declared, lookup)
    except LookupError as exc:
        raise start_failed(plugin_id, str(exc), f"cannot connect to {host_of(launch.endpoint.url)}: {exc}") from None
