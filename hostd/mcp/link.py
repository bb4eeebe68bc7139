"""The plugin link: one MCP client to one running plugin, over any transport (the link's driver).

Theory of operation
-------------------

All MCP state lives in one sans-IO :class:`hostd.mcp.session.ClientSession`:
request ids, the routing of every response, progress notification and
cancellation, server-to-client requests, the protocol era and its ``_meta``
envelope. :class:`PluginLink` is the small driver that turns the session's
events into woken callers; the transports around it live in
:mod:`hostd.mcp.transport` (``stdio``: a sandboxed process's pipes,
:class:`~hostd.mcp.transport.stdio.StdioLink`; ``http``: Streamable HTTP / SSE,
``RemoteLink``). Requests from the server are answered here: ``ping`` with
``{}``, others by ``on_request`` (legacy era) or with -32601; log messages
become ``plugins/log`` at a bounded rate.

The transport and the driver meet at two points: inbound, each parsed
message goes to :meth:`PluginLink.deliver`; outbound, every message leaves
through ``_send`` (a dict; stdio encodes it as one line). Each transport
provides those two and reuses the rest: routing, ``request``, ``call_tool``,
``listen``, the era.

Start (:meth:`PluginLink.run`) chooses the era (manifest ``backend.protocol``,
MCP "Versioning", dual-era guidance): ``auto`` probes ``server/discover``; a
discover result naming a modern version, or a -32022 naming one, means
modern; any other error or a timeout means legacy and ``initialize`` follows
(never keyed to one error code). ``legacy`` skips the probe; an exact pin
fails the start naming the versions the server offered (:mod:`hostd.mcp.negotiate`). The modern era opens
``subscriptions/listen`` for list changes and uses ``server/discover`` for
liveness (it has no ``ping``).

Any failure records one reason (``failure``) and wakes every request in
flight with :class:`LinkClosed`; the supervisor turns that into
``PLUGIN_HOST_UNAVAILABLE`` with the reason.

hostd does not use the SDK's client here (``mcp`` is never imported): its
session owns streams, tasks and models on every message; hostd needs bounded
frames, a strict envelope, results forwarded as the server's own bytes, and a
start that does not load the SDK (see :mod:`hostd.mcp.session`).
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Required, TypedDict

import trio

from hostd import __version__
from hostd.mcp.listing import ListingBounds, ListingCount
from hostd.mcp.negotiate import EraNegotiation, ProgressSink, ProtocolChoice, _result_of, _Waiter
from hostd.mcp.session import (
    METHOD_NOT_FOUND,
    ClientSession,
    Invalid,
    LinkClosed,
    Orphan,
    PluginRequestError,
    Progress,
    Reply,
    ReplyTooLarge,
    RequestId,
    ServerCancelled,
    ServerNotification,
    ServerRequest,
)
from hostd.wire import lazy
from hostd.wire.errors import HostError, start_failed
from hostd.wire.framing import describe_head, encode
from hostd.wire.jsonlimits import check_json
from hostd.wire.redact import Redactor

log = logging.getLogger("hostd.mcp.link")

__all__ = [
    "Discovery",
    "LinkClosed",
    "LinkOptions",
    "NotificationSink",
    "PluginLink",
    "PluginRequestError",
    "ProgressSink",
    "ReplyTooLarge",
    "RequestHandler",
    "StderrTail",
]

#: Upper bound of ``tools/list`` pages in one walk (cases C5, D3).
MAX_LIST_PAGES = 100
_STDERR_LINES = 200
_STDERR_HEAD_LINES = 5
_STDERR_BYTES = 64 * 1024
_STDERR_LINE_BYTES = 4096
_LOG_RATE_PER_SECOND = 20.0
_LOG_BURST = 50.0

LogSink = Callable[[str, str, str], Awaitable[None]]  # (level, source, message)
#: A notification from the server, raw: ``(method, params)``.
NotificationSink = Callable[[str, dict[str, Any] | None], Awaitable[None]]
#: A server-to-client request, raw: ``(method, params) -> result``; raise PluginRequestError or HostError to refuse.
RequestHandler = Callable[[str, dict[str, Any] | None], Awaitable[dict[str, Any]]]


class LinkOptions(TypedDict, total=False):
    """The keyword arguments of :class:`PluginLink` that a transport's link (``StdioLink`` in
    hostd/mcp/transport/stdio.py, ``RemoteLink`` in hostd/mcp/transport/http.py) takes and hands on
    unchanged; see PluginLink."""

    redact: Required[Redactor]
    on_log: Required[LogSink]
    on_notification: Required[NotificationSink]
    on_request: RequestHandler | None
    protocol: ProtocolChoice


@dataclass(eq=False, slots=True)
class _Listener:
    """A ``subscriptions/listen`` stream: where its notifications go."""

    sink: NotificationSink
    done: trio.Event = field(default_factory=trio.Event)


class StderrTail:
    """A bounded ring of a plugin's recent stderr lines (lines and bytes bounded).

    ``feed(bytes)`` returns the lines it completed; a line longer than 4096
    bytes is cut there. Holds at most 200 lines and 64 KiB.
    """

    def __init__(self, redact: Redactor) -> None:
        self._redact = redact
        self._lines: collections.deque[str] = collections.deque()
        self._bytes = 0
        self._partial = bytearray()
        #: The first lines ever written: the cause of a failure often scrolls out of the tail.
        self._head: list[str] = []
        self._count = 0

    def feed(self, data: bytes | bytearray) -> list[str]:
        """Consume a chunk of stderr; return the complete lines (redacted)."""
        done: list[str] = []
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            room = _STDERR_LINE_BYTES - len(self._partial)
            self._partial += data[start : start + min(room, end - start)]
            if newline < 0:
                if len(self._partial) >= _STDERR_LINE_BYTES:
                    done.append(self._finish())
                break
            done.append(self._finish())
            start = newline + 1
        return done

    def flush(self) -> list[str]:
        """Finish a trailing partial line (at EOF)."""
        return [self._finish()] if self._partial else []

    def _finish(self) -> str:
        line = self._redact(bytes(self._partial).rstrip(b"\r").decode("utf-8", errors="replace"))
        self._partial.clear()
        if len(self._head) < _STDERR_HEAD_LINES:
            self._head.append(line)
        self._count += 1
        self._lines.append(line)
        self._bytes += len(line)
        while len(self._lines) > _STDERR_LINES or self._bytes > _STDERR_BYTES:
            self._bytes -= len(self._lines.popleft())
        return line

    def excerpt(self, count: int = 10) -> dict[str, list[str]]:
        """``{"stderrTail": last count lines}``, plus ``"stderrHead"`` (the first 5 lines) when some
        lines between the two were left out: both ends of what a failing start wrote."""
        tail = self.tail(count)
        if self._count <= len(tail):
            return {"stderrTail": tail}
        head = self._head[: max(0, min(_STDERR_HEAD_LINES, self._count - len(tail)))]
        return {"stderrHead": head, "stderrTail": tail}

    def tail(self, count: int = 10) -> list[str]:
        """The last ``count`` lines, oldest first."""
        return list(self._lines)[-count:]


class _RateLimit:
    """A token bucket: ``allow()`` is True at most ``rate`` times a second (burst ``burst``)."""

    def __init__(self, rate: float, burst: float) -> None:
        self._rate, self._burst = rate, burst
        self._tokens = burst
        self._stamp = time.monotonic()
        self.dropped = 0

    def allow(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        self.dropped += 1
        return False


@dataclass(frozen=True)
class Discovery:
    """What the start found.

    ``tools`` are the raw tool objects (JSON) in listing order; ``era`` and
    ``protocol_version`` the negotiated protocol; ``capabilities`` the
    server's capabilities object as sent.
    """

    protocol_version: str
    server_name: str
    server_version: str
    tools: list[dict[str, Any]]
    era: Literal["legacy", "modern"] = "legacy"
    capabilities: dict[str, Any] = field(default_factory=dict)


class PluginLink(EraNegotiation):
    """The MCP client of one plugin instance, over the transport of a subclass.

    A transport (hostd/mcp/transport/) provides :meth:`_start_transport` (its
    receive tasks, which call :meth:`deliver`) and :meth:`_send`, or its own
    :meth:`run` around :meth:`_start_serving`.

    Use :meth:`run` with ``nursery.start``: it returns the :class:`Discovery`
    once the era is chosen, the handshake (or discovery) and the ``tools/list``
    walk succeeded, or raises :class:`HostError` (``PLUGIN_START_FAILED``) with
    the reason and the stderr tail. After that it serves until :meth:`close`
    or a failure; ``done`` is set then, and ``failure`` holds the reason of an
    unexpected end (``None`` after :meth:`close`).

    ``on_notification(method, params)`` gets every notification that is not
    progress, a cancellation or a log message (``notifications/message`` goes
    to ``on_log``): list changes, ``notifications/resources/updated``...
    ``on_request(method, params)`` answers the server's requests other than
    ``ping`` (legacy era); it returns the result or raises
    :class:`PluginRequestError` / :class:`HostError`, which the server gets as
    a JSON-RPC error; without it the server gets -32601. ``protocol`` is the
    manifest's ``backend.protocol``; ``launch_digest`` keys the era cache.
    """

    def __init__(
        self,
        plugin_id: str,
        *,
        redact: Redactor,
        on_log: LogSink,
        on_notification: NotificationSink,
        on_request: RequestHandler | None = None,
        stdout_noise: str = "strict",
        protocol: ProtocolChoice = "auto",
        launch_digest: str | None = None,
        capabilities: dict[str, Any] | None = None,
    ) -> None:
        self.plugin_id = plugin_id
        self.failure: str | None = None
        self.done = trio.Event()
        #: Set by the supervisor once it has reacted to ``failure`` (state, tools).
        self.failure_handled = trio.Event()
        self.last_seen_at: float | None = None
        self.noise_dropped = 0
        self.stderr = StderrTail(redact)
        #: The MCP client state (ids, routing, era); see :mod:`hostd.mcp.session`.
        self.session = ClientSession({"name": "hostd", "version": __version__}, capabilities)
        self._redact = redact
        self._on_log = on_log
        self._on_notification = on_notification
        self._on_request = on_request
        self._protocol = protocol
        self._launch_digest = launch_digest
        self._stdout_noise = stdout_noise
        self._log_limit = _RateLimit(_LOG_RATE_PER_SECOND, _LOG_BURST)
        self._dropped_reported = 0
        self._orphan_limit = _RateLimit(5.0, 10.0)
        self._noise_limit = _RateLimit(1.0, 3.0)
        self._closing = False
        self._nursery: trio.Nursery | None = None
        #: Server-to-client requests being answered: id -> the handler's cancel scope.
        self._serving: dict[RequestId, trio.CancelScope] = {}
        #: Of those, the ones hostd cancelled because the only tools/call in flight ended (answered -32800).
        self._abandoned: set[RequestId] = set()
        self._tool_calls = 0
        #: True while stdout is not read because the parent is behind (docs/protocol.md "Flow control").
        self.paused = False
        #: The aggregate bounds of this plugin's listings (hostd/mcp/listing.py); the supervisor sets the
        #: plugin's own (plugins/grant limits) before :meth:`run`.
        self.listing_bounds = ListingBounds()

    # -- the public surface ---------------------------------------------------------

    @property
    def orphans(self) -> int:
        """Responses that answered no request in flight (unknown id, duplicate, late after a cancel)."""
        return self.session.orphans

    @property
    def era(self) -> Literal["legacy", "modern"]:
        """``"legacy"`` (initialize handshake) or ``"modern"`` (2026-07-28); ``"legacy"`` until known."""
        return self.session.era or "legacy"

    @property
    def protocol_version(self) -> str:
        """The negotiated MCP revision (``""`` before the start finished)."""
        return self.session.protocol_version or ""

    @property
    def server_capabilities(self) -> dict[str, Any]:
        """The server's capabilities object as sent (``initialize`` or ``server/discover``)."""
        return self.session.server_capabilities

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: ProgressSink | None = None
    ) -> dict[str, Any]:
        """Send one MCP request; return the raw JSON ``result`` object.

        With ``on_progress`` the request carries a progress token (the session
        assigns it) and each ``notifications/progress`` for it is awaited as
        ``on_progress(progress, total, message)``. In the modern era the
        ``_meta`` envelope is added. Raises :class:`PluginRequestError` for a
        JSON-RPC error (or a result that is not an object, code -32603),
        :class:`LinkClosed` when the link ends first, :class:`ReplyTooLarge`
        when the answer was over the frame bound (the link goes on). Cancelling
        the caller sends ``notifications/cancelled`` and a late answer is
        dropped as an orphan.
        """
        waiter = await self._roundtrip(method, params, on_progress)
        return _result_of(waiter.reply)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: ProgressSink, extra: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], int, bytes]:
        """Send ``tools/call``; return the plugin's JSON-RPC response (``result`` or ``error``), its
        frame size (bytes) and the frame itself (so an unchanged result can be forwarded byte for byte).

        The fast path of :meth:`request` on the same session: no result check,
        no model. Progress, cancellation and errors as there, except that a
        JSON-RPC error is returned, not raised.
        """
        self._tool_calls += 1
        answered = False
        try:
            params = {"name": name, "arguments": arguments, **(extra or {})}  # extra: inputResponses, requestState
            waiter = await self._roundtrip("tools/call", params, on_progress)
            answered = True
        finally:
            self._tool_calls -= 1
            if not answered and not self._tool_calls:
                # The server's requests in flight (sampling...) can only have served the abandoned call.
                self._abandoned.update(self._serving)
                for scope in self._serving.values():
                    scope.cancel()
        assert waiter.reply is not None
        return waiter.reply, waiter.size, waiter.raw

    async def ping(self) -> None:
        """One liveness round trip: ``ping`` (legacy), ``server/discover`` (modern: it has no ``ping``).

        Raises :class:`LinkClosed` or :class:`PluginRequestError` like :meth:`request`.
        """
        await self.request("ping" if self.era == "legacy" else "server/discover")

    async def listen(self, notifications: dict[str, Any], sink: NotificationSink) -> None:
        """Hold a ``subscriptions/listen`` stream open (modern era) until cancelled or the server ends it.

        ``notifications`` is the filter (``{toolsListChanged: true, resourceSubscriptions: [uri]...}``);
        every notification tagged with this stream's subscription id goes to ``sink(method, params)``
        (``notifications/subscriptions/acknowledged`` first). Returns when the server ends the
        stream; raises :class:`PluginRequestError` if it refuses it, :class:`LinkClosed` when the
        link ends. Cancelling sends ``notifications/cancelled`` for the stream.
        """
        await self._roundtrip("subscriptions/listen", {"notifications": notifications}, None, listen=sink)

    async def _roundtrip(
        self,
        method: str,
        params: dict[str, Any] | None,
        on_progress: ProgressSink | None,
        *,
        bounded: bool = True,
        listen: NotificationSink | None = None,
    ) -> _Waiter:
        """Send one request and wait for its reply, inside the request's span (hostd.wire.tracing).

        The span's trace context is added to ``params._meta``. Raises :class:`LinkClosed` when the link
        ends first, :class:`ReplyTooLarge` for an oversized answer; cancelling sends the server
        ``notifications/cancelled`` for the request.
        """
        from hostd.wire import tracing  # noqa: PLC0415 (opentelemetry: at the first request; hostctl's reads send none)

        target = params.get("name") if params is not None and isinstance(params.get("name"), str) else None
        with tracing.plugin_span(self.plugin_id, method, target) as trace_meta:
            if trace_meta:
                params = {**(params or {}), "_meta": {**((params or {}).get("_meta") or {}), **trace_meta}}
            waiter = _Waiter(on_progress, bounded and listen is None)
            context: Any = waiter if listen is None else _ListenWaiter(waiter, listen)
            rid, message = self.session.start_request(
                method, params, context=context, progress=on_progress is not None, listen=listen is not None
            )
            try:
                if self.done.is_set() or not await self._send(message):
                    raise LinkClosed(self.failure or "the plugin is stopping")
                await waiter.done.wait()
            finally:
                if not waiter.done.is_set():
                    cancel = self.session.cancel(rid)
                    if cancel is not None and not self.done.is_set():
                        with trio.CancelScope(shield=True), trio.move_on_after(1):
                            await self._send(cancel)
            if waiter.too_large is not None:
                raise ReplyTooLarge(*waiter.too_large)
            if waiter.reply is None:
                raise LinkClosed(self.failure or "the plugin stopped")
            if listen is not None:
                _result_of(waiter.reply)
            return waiter

    # -- lifecycle --------------------------------------------------------------

    async def run(self, startup_timeout: float, *, task_status: trio.TaskStatus[Discovery]) -> None:
        """Choose the era, handshake or discover, list tools, report them with ``task_status.started``, then serve.

        Raises :class:`HostError` (``PLUGIN_START_FAILED``) before ``started``;
        never raises after it (the failure goes to ``failure`` and ``done``).
        Cancelling it ends the link (the caller stops the process).
        """
        # Errors are carried out of the nursery as a value: raised inside, trio would wrap them in groups.
        error: HostError | None = None
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._start_transport(nursery)
            try:
                await self._start_serving(nursery, startup_timeout, task_status)
            except HostError as exc:
                error = exc
                self._fail(str(exc.data.get("reason", exc.message)))
            else:
                await self.done.wait()
            finally:
                self.done.set()
                nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    def _start_transport(self, nursery: trio.Nursery) -> None:
        """Start the transport's tasks in the link's nursery (the transport's: stdio's pumps)."""
        raise NotImplementedError

    async def _send(self, message: dict[str, Any]) -> bool:
        """The transport's outbound hook: one JSON-RPC message; False when the link is gone."""
        raise NotImplementedError

    @property
    def pending_frame_bytes(self) -> int:
        """Bytes of an unfinished inbound message held right now (0 for a transport without frames)."""
        return 0

    async def _start_serving(
        self, nursery: trio.Nursery, startup_timeout: float, task_status: trio.TaskStatus[Discovery]
    ) -> None:
        """Discover (:meth:`_discover`), report it with ``task_status.started``, then (modern era) keep a
        ``subscriptions/listen`` stream for list changes open in ``nursery``; every transport's ``run``.

        Raises :class:`HostError` from discovery only, so before ``started``; cancellation likewise.
        """
        discovery = await self._discover(startup_timeout)
        task_status.started(discovery)
        if discovery.era == "modern":
            nursery.start_soon(self._listen_for_changes)

    async def _discover(self, startup_timeout: float) -> Discovery:
        started = time.monotonic()
        try:
            with trio.fail_after(startup_timeout):
                # The models that check initialize/discover results load once, off the event loop
                # (pydantic builds them: milliseconds that would stall every other plugin and the parent).
                await lazy.load_async("hostd.mcp.handshake", "checking the server's handshake", self._start_error)
                await self._negotiate(startup_timeout)
                if not isinstance(self.server_capabilities.get("tools"), dict):
                    raise self._start_error("the server does not declare the tools capability")
                tools = await self.list_tools()
        except trio.TooSlowError:
            # Let a process that is exiting right now say so instead.
            with trio.move_on_after(0.2):
                await self.done.wait()
            reason = self._during_start(self.failure) or f"startup timed out after {startup_timeout:g} s"
            raise self._start_error(reason, seconds=round(time.monotonic() - started, 3)) from None
        except (LinkClosed, ReplyTooLarge):
            raise self._start_error(self._during_start(self.failure) or "start failed") from None
        except PluginRequestError as exc:
            if self.failure is not None:
                raise self._start_error(self._during_start(self.failure) or "start failed") from None
            raise self._start_error(f"{self._stage} failed: {exc.message}", upstream=exc.wire()) from None
        info = self.session.server_info
        return Discovery(
            protocol_version=self.protocol_version,
            server_name=str(info.get("name", "")),
            server_version=str(info.get("version", "")),
            tools=tools,
            era=self.era,
            capabilities=self.server_capabilities,
        )

    async def _listen_for_changes(self) -> None:
        """Modern era: one ``subscriptions/listen`` for the list changes the server declares, for the
        link's life (a new link, after a restart, opens its own)."""
        caps = self.server_capabilities
        wanted: dict[str, Any] = {}
        for kind, key in (
            ("tools", "toolsListChanged"),
            ("prompts", "promptsListChanged"),
            ("resources", "resourcesListChanged"),
        ):
            cap = caps.get(kind)
            if isinstance(cap, dict) and cap.get("listChanged"):
                wanted[key] = True
        if not wanted:
            return
        try:
            await self.listen(wanted, self._on_notification)
        except (PluginRequestError, LinkClosed, ReplyTooLarge) as exc:
            log.info("plugin %s: subscriptions/listen ended: %s", self.plugin_id, exc)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Walk every ``tools/list`` page (MCP "Pagination"); return the raw tools.

        Only an absent or null ``nextCursor`` ends the walk. A repeated cursor or
        more than 100 pages raises ``PLUGIN_START_FAILED`` naming the server; a walk over
        :attr:`listing_bounds` (tools, or their bytes as compact JSON) raises ``LISTING_TOO_LARGE``
        at the page that crossed it (hostd/mcp/listing.py).
        Raises :class:`PluginRequestError` / :class:`LinkClosed` like :meth:`request`.
        """
        self._stage = "tools/list"
        counted = ListingCount(self.plugin_id, "tools", self.listing_bounds)
        tools: list[dict[str, Any]] = []
        seen: set[str] = set()
        names: set[str] = set()
        cursor: str | None = None
        for page in range(1, MAX_LIST_PAGES + 1):
            waiter = await self._roundtrip(
                "tools/list", {"cursor": cursor} if cursor is not None else None, None, bounded=False
            )
            raw = _result_of(waiter.reply)
            if not isinstance(raw.get("tools"), list):
                raise self._start_error(f"tools/list page {page} has no 'tools' array")
            page_tools = raw["tools"]
            if not all(isinstance(t, dict) for t in page_tools):
                raise self._start_error(f"tools/list page {page}: every tool must be an object")
            next_cursor = raw.get("nextCursor")
            if next_cursor is not None and not isinstance(next_cursor, str):
                raise self._start_error(f"tools/list page {page}: nextCursor must be a string or absent")
            if next_cursor is not None and next_cursor in seen:
                raise self._start_error(f"tools/list repeated the cursor {next_cursor[:80]!r}: the listing never ends")
            page_names = {t["name"] for t in page_tools if isinstance(t.get("name"), str)}
            repeated = sorted(page_names & names)
            if repeated:
                raise self._start_error(
                    f"tools/list page {page} repeats {repeated[0]!r} from an earlier page (a duplicate): "
                    "the listing never ends"
                )
            names |= page_names
            counted.add(page_tools, **self.stderr.excerpt())
            tools.extend(page_tools)
            if next_cursor is None:
                return tools
            seen.add(next_cursor)
            cursor = next_cursor
        raise self._start_error(f"tools/list did not end within {MAX_LIST_PAGES} pages")

    def _during_start(self, failure: str | None) -> str | None:
        if failure is not None and (failure.startswith(("exited with", "was killed"))):
            return f"{failure} during start"
        return failure

    def _start_error(self, reason: str, **data: Any) -> HostError:
        return start_failed(self.plugin_id, reason, **self.stderr.excerpt(), **data)

    def close(self) -> None:
        """End the link on purpose (disable, restart); not a failure."""
        self._closing = True
        self.done.set()
        self._wake_all()

    def fail(self, reason: str) -> None:
        """End the link as failed with ``reason`` (the first reason wins)."""
        self._fail(reason)

    def _fail(self, reason: str) -> None:
        if self.failure is None and not self._closing:
            self.failure = reason
            log.warning("plugin %s: %s", self.plugin_id, reason)
        self.done.set()
        self._wake_all()

    def _wake_all(self) -> None:
        """Every request in flight ends without an answer: its caller raises LinkClosed."""
        for rid, context in self.session.pending():
            self.session.forget(rid)
            _waiter_of(context).done.set()

    async def deliver(self, value: Any, size: int = 0, raw: bytes = b"") -> bool:
        """Hand one parsed inbound message to the session and act on its event.

        The transport-independent half of the inbound path: the stdout pump
        calls it for each complete line; another transport (HTTP) calls it for
        each message it receives. ``size`` / ``raw`` are the message's frame
        (bytes), used for result bounds and byte-exact forwarding. Returns
        False when the message ended the link (noise under ``stdout_noise:
        strict``).
        """
        event = self.session.receive(value, size, raw)
        if isinstance(event, Reply):
            self.last_seen_at = time.time()
            waiter = _waiter_of(event.context)
            waiter.reply, waiter.size, waiter.raw = event.message, event.size, event.raw
            waiter.done.set()
        elif isinstance(event, Progress):
            self.last_seen_at = time.time()
            sink = _waiter_of(event.context).on_progress
            if sink is not None:
                await sink(event.progress, event.total, event.message)
        elif isinstance(event, Invalid):
            return await self._noise(encode(value)[:80], event.why)
        else:
            self.last_seen_at = time.time()
            return await self._dispatch(event)
        return True

    async def _dispatch(self, event: ServerRequest | ServerCancelled | ServerNotification | Orphan) -> bool:
        """Handle what is neither a reply nor progress; False when the link ended."""
        if isinstance(event, Orphan):
            await self._orphan(event)
        elif isinstance(event, ServerRequest):
            return await self._server_request(event)
        elif isinstance(event, ServerCancelled):
            scope = self._serving.get(event.request_id)
            if scope is not None:
                scope.cancel()
        elif event.stale:
            log.debug("plugin %s: dropped %s for a closed subscription", self.plugin_id, event.method)
        elif event.method == "notifications/message":
            await self._mcp_log(event.params or {})
        elif event.listener is not None:
            await event.listener.sink(event.method, event.params)
        else:
            await self._on_notification(event.method, event.params)
        return True

    async def _server_request(self, event: ServerRequest) -> bool:
        if event.method == "ping":
            return await self._send(self.session.reply(event.request_id, {}))
        if self._on_request is None or self.session.era == "modern" or self._nursery is None:
            # Modern servers send no requests (they return input_required instead).
            # Through _send, the transport's hook (a remote link has no stdin).
            return await self._send(
                self.session.reply_error(event.request_id, METHOD_NOT_FOUND, f"hostd does not serve {event.method}")
            )
        self._nursery.start_soon(self._answer, event)
        return True

    async def _answer(self, event: ServerRequest) -> None:
        """Answer one server request through ``on_request``; its cancellation by the server cancels it."""
        assert self._on_request is not None
        reply: dict[str, Any] | None = None
        with trio.CancelScope() as scope:
            self._serving[event.request_id] = scope
            try:
                result = await self._on_request(event.method, event.params)
                reply = self.session.reply(event.request_id, result)
            except PluginRequestError as exc:
                reply = self.session.reply_error(event.request_id, exc.code, exc.message, exc.data)
            except HostError as exc:
                error = exc.to_error_object()
                reply = self.session.reply_error(event.request_id, error["code"], error["message"], error["data"])
            finally:
                self._serving.pop(event.request_id, None)
        if reply is None and event.request_id in self._abandoned:
            self._abandoned.discard(event.request_id)
            reply = self.session.reply_error(event.request_id, -32800, "cancelled: the tools/call it served ended")
        if reply is not None:  # withdrawn by the server: never answered (MCP "Cancellation")
            await self._send(reply)

    async def _orphan(self, event: Orphan) -> None:
        """A response to no request in flight (unknown id, a duplicate, a late answer): dropped."""
        if self._orphan_limit.allow():
            kind = "an error" if event.is_error else "a response"
            await self._on_log(
                "warning", "stdout", f"dropped {kind} for id {event.request_id!r}: no request in flight has that id"
            )

    async def _noise(self, head: bytes, why: str) -> bool:
        """Handle a non-JSON-RPC line; return False when it ended the link."""
        shown = self._redact(describe_head(head))
        if self._stdout_noise != "drop":
            self._fail(f"wrote a line on stdout that is {why}: {shown!r}")
            return False
        self.noise_dropped += 1
        if self._noise_limit.allow():
            await self._on_log(
                "warning", "stdout", f"dropped a stdout line that is {why} ({self.noise_dropped} so far): {shown!r}"
            )
        return True

    # -- log messages -----------------------------------------------------------

    async def _mcp_log(self, params: dict[str, Any]) -> None:
        """``notifications/message`` -> ``plugins/log`` (source ``mcp``), bounded like stderr lines."""
        raw = params.get("data")
        exceeded = check_json(raw)  # orjson cannot encode data over 255 levels deep
        if exceeded is not None:
            data = f"(log data not shown: {exceeded.message})"
        else:
            data = raw if isinstance(raw, str) else encode(raw).decode().rstrip("\n")
        level = params.get("level")
        await self._relay(level if isinstance(level, str) else "info", "mcp", self._redact(data[:_STDERR_LINE_BYTES]))

    async def _relay(self, level: str, source: str, message: str) -> None:
        """Forward one log line as ``plugins/log`` within the rate limit (20/s, bursts of 50);
        after a gap, say how many lines the limit dropped."""
        limit = self._log_limit
        if not limit.allow():
            return
        if limit.dropped > self._dropped_reported:
            missed = limit.dropped - self._dropped_reported
            self._dropped_reported = limit.dropped
            await self._on_log("warning", "host", f"{missed} log lines dropped by the rate limit")
        await self._on_log(level, source, message)


@dataclass(eq=False, slots=True)
class _ListenWaiter:
    """The context of a ``subscriptions/listen`` request: its waiter and where its notifications go."""

    waiter: _Waiter
    sink: NotificationSink


def _waiter_of(context: Any) -> _Waiter:
    return context.waiter if isinstance(context, _ListenWaiter) else context
