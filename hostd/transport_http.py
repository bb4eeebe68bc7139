"""The link to a remote plugin: the SDK's MCP client over Streamable HTTP (or legacy HTTP+SSE).

Theory of operation
-------------------
A remote plugin (hostd/remote.py) has no process. :class:`RemoteLink` stands
where :class:`~hostd.link.PluginLink` stands for a stdio plugin (it is one, so
the supervisor drives both alike): :meth:`RemoteLink.run` connects, negotiates
the era, walks ``tools/list`` and reports a :class:`~hostd.link.Discovery`;
:meth:`RemoteLink.call_tool` answers with the server's result as JSON; any
failure of the connection records one reason and ends the link, and the
supervisor's restart policy reconnects with backoff (hostd/policy.py), exactly
as it restarts a crashed stdio plugin.

The MCP layer is the SDK's :class:`mcp.Client` over its transports
(``mcp.client.streamable_http``, ``mcp.client.sse``): ``mode`` is the manifest's
``backend.protocol`` (``auto`` probes ``server/discover`` and falls back to
``initialize``; ``legacy``; or a modern pin), so both eras, the modern standard
headers, stream re-issue after a broken SSE response, and same-origin-only
redirects are the SDK's. hostd differs from the SDK's defaults here, each for
a reason:

- **Its own HTTP client** (:func:`http_client`): proxy and CA bundle from the
  environment (``HTTPS_PROXY``, ``SSL_CERT_FILE``: ``trust_env``), a connect
  timeout from the manifest (``connect_timeout_seconds``), no read timeout
  (a tool call's timeout is the supervisor's, and the SSE stream is long-lived),
  every JSON response body bounded to the plugin's frame bound (the SDK reads
  a JSON body whole), every SSE event bounded the same way, and every request
  preceded by the address rule of :func:`hostd.remote.address_problem`.
- **Legacy SSE only when asked**: ``transport: sse`` in the manifest, or as a
  fallback only when the very first Streamable HTTP request of the link was
  answered 404 or 405 and no response had shown which protocol the server
  speaks (any other status, 500 included, fails the start: a broken modern
  server must not be silently downgraded).
- **Secrets**: header values are resolved at connection
  (:func:`hostd.remote.resolve_headers`) and join the link's redactor; no
  message hostd writes carries them.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

import httpx2
import orjson
import trio
from pydantic import ValidationError

from hostd import __version__
from hostd.errors import HostError
from hostd.link import Discovery, LinkClosed, PluginLink, ProgressSink
from hostd.redact import Redactor
from hostd.remote import RemoteLaunch, address_problem, resolve_addresses, resolve_headers
from sandbox.process import SandboxedProcess, StopReport

log = logging.getLogger("hostd.transport_http")

#: Statuses of the first Streamable HTTP request that mean "no such endpoint for POST": a legacy
#: HTTP+SSE server (MCP 2025-03-26 "Backwards Compatibility"). Nothing else triggers the fallback.
FALLBACK_STATUSES = frozenset({404, 405})


class ResponseTooLarge(httpx2.StreamError):
    """A JSON response body went over the link's bound (bytes); the request it answered fails."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response body is over the {limit}-byte bound")
        self.limit = limit


class _BoundedStream(httpx2.AsyncByteStream):
    """A response body that raises :class:`ResponseTooLarge` past ``limit`` bytes (never holds more)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class HttpWatch:
    """What hostd's HTTP client saw: the first response's status, whether any response spoke MCP.

    ``first_status`` is the HTTP status of the link's first response (None before it);
    ``spoke_mcp`` is True once a response carried JSON or an event stream with a 2xx status.
    ``refused`` holds the reason of an address refusal (the request was never sent).
    """

    def __init__(self) -> None:
        self.first_status: int | None = None
        self.spoke_mcp = False
        self.refused: str | None = None


def http_client(
    launch: RemoteLaunch,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    max_response_bytes: int,
    watch: HttpWatch,
) -> httpx2.AsyncClient:
    """hostd's HTTP client for one remote link (see the module header for each setting).

    ``headers`` are the resolved headers (secrets included: never log them).
    Each request first resolves its host (in a worker thread) and is refused
    with ``httpx2.ConnectError`` when :func:`hostd.remote.address_problem`
    objects; the verdict is kept per host for the client's life.
    """
    allow_private = list(launch.endpoint.allow_private)
    verdicts: dict[tuple[str, int], str | None] = {}

    async def check_address(request: httpx2.Request) -> None:
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        key = (host, port)
        if key not in verdicts:
            try:
                addresses = await trio.to_thread.run_sync(resolve_addresses, host, port)
            except OSError as exc:
                verdicts[key] = f"{host} does not resolve: {exc}"
            else:
                verdicts[key] = address_problem(host, addresses, allow_private)
        problem = verdicts[key]
        if problem is not None:
            watch.refused = problem
            raise httpx2.ConnectError(problem, request=request)

    async def observe(response: httpx2.Response) -> None:
        if watch.first_status is None:
            watch.first_status = response.status_code
        kind = response.headers.get("content-type", "").lower()
        if 200 <= response.status_code < 300 and kind.startswith(("application/json", "text/event-stream")):
            watch.spoke_mcp = True
        if kind.startswith("application/json"):
            response.stream = _BoundedStream(response.stream, max_response_bytes)  # type: ignore[arg-type]

    return httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(connect=connect_timeout, read=None, write=connect_timeout, pool=connect_timeout),
        trust_env=True,
        follow_redirects=False,  # the SDK's transports follow same-origin redirects themselves
        event_hooks={"request": [check_address], "response": [observe]},
    )


class _Connection(SandboxedProcess):
    """Stands where a stdio plugin's process tree stands: nothing to stop but the connection."""

    def __init__(self) -> None:  # no process: SandboxedProcess.__init__ is not called on purpose
        self.pid = 0
        self.token = ""
        self.shim_pid = None
        self.isolation = ()
        self._closed = trio.Event()

    @property
    def returncode(self) -> int | None:
        return 0 if self._closed.is_set() else None

    async def wait(self) -> int:
        await self._closed.wait()
        return 0

    async def stop(self, grace: float = 2.0) -> StopReport:
        """Mark the connection closed (the link closes the HTTP client itself); ``step`` is ``disconnected``."""
        del grace
        self._closed.set()
        return StopReport("disconnected", 0, 0.0)

    def kill_now(self) -> None:
        self._closed.set()


def connection() -> SandboxedProcess:
    """The stand-in process of a remote instance (:meth:`SandboxedProcess.stop` reports ``disconnected``)."""
    return _Connection()


class RemoteLink(PluginLink):
    """The MCP client of one remote plugin instance (see the module header).

    ``launch`` is the approved :class:`~hostd.remote.RemoteLaunch`;
    ``connect_timeout`` (seconds) bounds each connection;
    ``max_frame_bytes`` bounds each JSON response and SSE event.
    :meth:`run`, :meth:`call_tool` and :meth:`list_tools` keep
    :class:`~hostd.link.PluginLink`'s contracts.
    """

    def __init__(
        self,
        plugin_id: str,
        process: SandboxedProcess,
        launch: RemoteLaunch,
        headers: dict[str, str],
        *,
        redact: Redactor,
        on_log: Callable[[str, str, str], Awaitable[None]],
        on_notification: Callable[[Any], Awaitable[None]],
        connect_timeout: float,
        max_frame_bytes: int,
    ) -> None:
        super().__init__(
            plugin_id,
            process,
            redact=redact,
            on_log=on_log,
            on_notification=on_notification,
            max_frame_bytes=max_frame_bytes,
        )
        self.launch = launch
        self._headers = headers
        self._connect_timeout = connect_timeout
        self._max_bytes = max_frame_bytes
        self.client: Any = None
        #: ``"legacy"`` or ``"modern"`` once connected; the transport actually used.
        self.era: str | None = None
        self.transport: str = launch.endpoint.transport
        self._calls = 0

    async def run(self, startup_timeout: float, *, task_status: trio.TaskStatus[Discovery]) -> None:
        """Connect (with the one allowed fallback), list tools, report them, then hold the connection.

        Raises :class:`HostError` (``PLUGIN_START_FAILED``) before ``started``; never after.
        """
        # One cancel scope encloses the whole connection (the SDK's task groups must close in the
        # scope they opened in): its deadline is the startup timeout until the tools are listed.
        error: HostError | None = None
        started = time.monotonic()
        ready = False
        with trio.CancelScope(deadline=trio.current_time() + startup_timeout) as scope:
            try:
                async with AsyncExitStack() as stack:
                    connected, discovery = await self._open(self.launch.endpoint.transport)
                    await stack.enter_async_context(connected)
                    scope.deadline = math.inf
                    ready = True
                    task_status.started(discovery)
                    await self.done.wait()
            except HostError as exc:
                error = exc
            except (trio.Cancelled, KeyboardInterrupt):
                raise
            except BaseException as exc:  # the SDK's task group ends with the connection: its error is the reason
                if ready:
                    self._fail(self._redact(f"lost the connection: {_describe(exc)}"))
                else:
                    error = self._start_error(self._redact(f"{self.transport}: {_describe(exc)}"))
            finally:
                self.done.set()
        if scope.cancelled_caught and not ready:
            error = self._start_error(f"connecting timed out after {startup_timeout:g} s")
            error.data["seconds"] = round(time.monotonic() - started, 3)
        if error is not None:
            self._fail(str(error.data.get("reason", error.message)))
            raise error

    async def _open(self, transport: str) -> tuple[AsyncExitStack, Discovery]:
        """Connect over ``transport``; on a 404/405 first answer, once over legacy SSE."""
        watch = HttpWatch()
        try:
            return await self._connect(transport, watch)
        except HostError:
            fallback = (
                transport == "streamable-http" and watch.first_status in FALLBACK_STATUSES and not watch.spoke_mcp
            )
            if not fallback:
                raise
        log.info("plugin %s: Streamable HTTP answered %s; trying the legacy SSE transport", self.plugin_id, 404)
        await self._on_log(
            "info",
            "host",
            f"the server answered the first Streamable HTTP request with {watch.first_status}; "
            "using the legacy HTTP+SSE transport",
        )
        return await self._connect("sse", HttpWatch())

    async def _connect(self, transport: str, watch: HttpWatch) -> tuple[AsyncExitStack, Discovery]:
        from mcp import Client  # noqa: PLC0415 - the SDK client is loaded only when a remote plugin starts
        from mcp.client.sse import sse_client  # noqa: PLC0415
        from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415
        from mcp_types import Implementation  # noqa: PLC0415

        endpoint = self.launch.endpoint
        stack = AsyncExitStack()
        try:

            def hostd_client() -> httpx2.AsyncClient:
                return http_client(
                    self.launch,
                    self._headers,
                    connect_timeout=self._connect_timeout,
                    max_response_bytes=self._max_bytes,
                    watch=watch,
                )

            if transport == "sse":

                def factory(
                    headers: dict[str, str] | None = None,
                    timeout: httpx2.Timeout | None = None,
                    auth: httpx2.Auth | None = None,
                ) -> httpx2.AsyncClient:
                    del headers, timeout, auth  # hostd's client carries its own (module header)
                    return hostd_client()

                streams: Any = sse_client(endpoint.url, httpx_client_factory=factory)
            else:
                http = await stack.enter_async_context(hostd_client())
                streams = streamable_http_client(endpoint.url, http_client=http, max_sse_event_size=self._max_bytes)
            client = Client(
                streams,
                mode="legacy" if transport == "sse" else endpoint.protocol,
                client_info=Implementation(name="hostd", version=__version__),
                message_handler=self._message_from_server,
                cache=None,
            )
            await stack.enter_async_context(client)
            self.client = client
            self.session = client.session
            self.transport = transport
            self.era = "modern" if client.protocol_version >= "2026" else "legacy"
            capabilities = client.server_capabilities
            if capabilities.tools is None:
                raise self._start_error("the server does not declare the tools capability")
            tools = await self._walk_tools(client)
            info = client.server_info
            return stack, Discovery(
                protocol_version=client.protocol_version,
                server_name=info.name if info is not None else "",
                server_version=info.version if info is not None else "",
                tools=tools,
            )
        except HostError:
            await _close_quietly(stack)
            raise
        except (trio.Cancelled, KeyboardInterrupt):
            await _close_quietly(stack)
            raise
        except BaseException as exc:
            await _close_quietly(stack)
            leaf = _leaf(exc)
            if isinstance(leaf, MCPError):
                reason = f"{transport}: the server answered {leaf.error.code} {leaf.error.message!r}"
            elif isinstance(leaf, ValidationError | ValueError) and not isinstance(leaf, httpx2.HTTPError):
                reason = f"{transport}: invalid answer from the server: {str(leaf).splitlines()[0]}"
            else:
                reason = f"{transport}: {_describe(leaf)}"
            if watch.refused is not None:
                reason = watch.refused
            elif watch.first_status is not None and not watch.spoke_mcp:
                reason += f" (HTTP {watch.first_status})"
            raise self._start_error(self._redact(reason), status=watch.first_status) from None

    async def _walk_tools(self, client: Any) -> list[dict[str, Any]]:
        """Every ``tools/list`` page as JSON; the same page rules as :meth:`PluginLink.list_tools`."""
        tools: list[dict[str, Any]] = []
        seen: set[str] = set()
        cursor: str | None = None
        for page in range(1, 101):
            result = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in result.tools)
            cursor = result.next_cursor
            if cursor is None:
                return tools
            if cursor in seen:
                raise self._start_error(f"tools/list repeated the cursor {cursor[:80]!r}: the listing never ends")
            seen.add(cursor)
            del page
        raise self._start_error("tools/list did not end within 100 pages")

    async def list_tools(self, session: Any) -> list[dict[str, Any]]:
        """Re-discovery (``list_changed``): every page again."""
        del session
        return await self._walk_tools(self.client)

    async def _message_from_server(self, message: Any) -> None:
        from mcp_types import ServerNotification  # noqa: PLC0415

        self.last_seen_at = time.time()
        if isinstance(message, ServerNotification):
            await self._on_notification(message.root if hasattr(message, "root") else message)
        elif not isinstance(message, Exception):
            await self._on_notification(message)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: ProgressSink
    ) -> tuple[dict[str, Any], int, bytes]:
        """``tools/call`` through the SDK client; the JSON-RPC response as a dict, its size in bytes, ``b""``.

        A JSON-RPC error comes back as ``{"error": ...}``; a lost connection
        ends the link and raises :class:`~hostd.link.LinkClosed`; cancelling
        the caller cancels the request (the SDK sends ``notifications/cancelled``
        in the legacy era, aborts the POST in the modern one).
        """
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415

        if self.done.is_set() or self.client is None:
            raise LinkClosed(self.failure or "the plugin is stopping")
        self._calls += 1
        rid = f"hostd-{self._calls}"

        async def progress(value: float, total: float | None, message: str | None) -> None:
            # The SDK's model makes every number a float; an integral one goes on as an int, as a stdio
            # plugin's 1 stays 1 (its JSON is not kept: the frame behind the model is gone).
            self.last_seen_at = time.time()
            await on_progress(_integral(value), None if total is None else _integral(total), message)

        try:
            result = await self.client.call_tool(name, arguments, progress_callback=progress)
        except MCPError as exc:
            if exc.error.code == -32000 and self.done.is_set():
                raise LinkClosed(self.failure or "the connection closed") from None
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "error": exc.error.model_dump(exclude_none=True)}
        except (httpx2.HTTPError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._fail(f"lost the connection: {_describe(exc)}")
            raise LinkClosed(self.failure or "the connection closed") from None
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": rid,
                "result": result.model_dump(by_alias=True, mode="json", exclude_none=True),
            }
        self.last_seen_at = time.time()
        frame = orjson.dumps(reply)
        return reply, len(frame), b""

    @property
    def pending_frame_bytes(self) -> int:
        """Always 0: HTTP bodies are not framed lines."""
        return 0


def _integral(value: float) -> float:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _leaf(exc: BaseException) -> BaseException:
    """The first non-group exception inside ``exc`` (anyio and trio wrap task errors in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    leaf = _leaf(exc)
    text = str(leaf).splitlines()[0] if str(leaf) else ""
    return f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__


async def _close_quietly(stack: AsyncExitStack) -> None:
    with trio.CancelScope(shield=True), contextlib.suppress(BaseException):
        await stack.aclose()


def host_of(url: str) -> str:
    """The host part of ``url`` (for messages)."""
    return urlsplit(url).hostname or url


def open_headers(plugin_id: str, launch: RemoteLaunch, declared: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """The headers to send (secrets resolved) and the secret values (for the redactor).

    Raises ``HostError`` (``PLUGIN_START_FAILED``) naming the header and the
    secret when a ``${secret:NAME}`` reference does not resolve.
    """
    from hostd.errors import ErrorKind  # noqa: PLC0415

    try:
        return resolve_headers(plugin_id, declared)
    except LookupError as exc:
        raise HostError(
            ErrorKind.PLUGIN_START_FAILED,
            f"cannot connect to {host_of(launch.endpoint.url)}: {exc}",
            plugin=plugin_id,
            reason=str(exc),
            stderrTail=[],
        ) from None
