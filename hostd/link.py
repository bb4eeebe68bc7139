"""The plugin link: one MCP client session to one running plugin process.

Theory of operation
-------------------

The mcp SDK's :class:`mcp.ClientSession` owns the MCP layer (the
``initialize`` handshake and version negotiation, request ids, progress
routing, ``notifications/cancelled`` when a call is abandoned). Underneath it
hostd puts its own stdio transport instead of the SDK's ``stdio_client``,
because that one buffers unbounded lines and applies its own environment
policy. The transport is four small tasks:

- **stdout**: bytes -> :class:`~hostd.framing.LineDecoder` (bounded, 2 MiB by
  default) -> a strict JSON-RPC envelope check -> the session. A line that is
  not JSON, not a JSON-RPC 2.0 envelope, or over the bound is a protocol
  violation that ends the link (``stdout_noise: drop`` in the manifest drops
  non-JSON-RPC lines instead, with a rate-limited warning and a running
  count). Requests from the server are answered here, not by the session:
  ``ping`` with ``{}``; everything else (``sampling/createMessage``,
  ``roots/list``, ``elicitation/create``...) with -32601, since hostd
  advertises no client capability.
- **stdin**: the session's messages -> one compact JSON line each.
- **stderr**: read in bounded chunks so a flood can never block the plugin on
  a full pipe; kept as a bounded ring of redacted lines; relayed as
  ``plugins/log`` at a bounded rate.
- **exit**: waits on the plugin's main process, separately from stdout EOF,
  since a grandchild can keep the pipe open after the server died.

Any failure records one reason (``failure``) and closes the session's read
stream, so every pending request wakes at once with the SDK's
``CONNECTION_CLOSED``; the supervisor turns that into
``PLUGIN_HOST_UNAVAILABLE`` with the reason.
"""

from __future__ import annotations

import collections
import itertools
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import orjson
import trio
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from hostd import __version__, tracing
from hostd.control import current_outbox
from hostd.errors import ErrorKind, HostError
from hostd.framing import (
    PLUGIN_FRAME_LIMIT,
    FrameDiscarded,
    FrameTooLarge,
    InvalidJSON,
    LineDecoder,
    describe_head,
    encode,
)
from hostd.jsonlimits import check_json
from hostd.redact import Redactor
from sandbox.process import SandboxedProcess

log = logging.getLogger("hostd.link")

#: Upper bound of ``tools/list`` pages in one walk (cases C5, D3).
MAX_LIST_PAGES = 100
_STDERR_LINES = 200
_STDERR_HEAD_LINES = 5
_STDERR_BYTES = 64 * 1024
_STDERR_LINE_BYTES = 4096
_LOG_RATE_PER_SECOND = 20.0
_LOG_BURST = 50.0
_READ_BYTES = 65536
_ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})

LogSink = Callable[[str, str, str], Awaitable[None]]  # (level, source, message)
NotificationSink = Callable[[types.ServerNotification], Awaitable[None]]


class LinkClosed(Exception):
    """The link ended (crash, violation, stop) before the plugin answered."""


class ReplyTooLarge(Exception):
    """The plugin's answer to a call was one line of ``size`` bytes, over the ``limit``-byte frame bound.

    The line was discarded as it arrived (never held whole); the link goes on
    serving the other calls.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"a {size}-byte answer, over the {limit}-byte frame bound")
        self.size = size
        self.limit = limit


#: Where a JSON-RPC response names its id: first (after "jsonrpc"), or last. Every encoder
#: seen puts it at one end (Python SDK: first; TypeScript SDK: last), never inside "result".
_ID_TOKEN = rb'("(?:[^"\\]|\\.){0,64}"|-?[0-9]{1,19})'
_ID_AT_HEAD = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID_TOKEN + rb"\s*,")
_ID_AT_TAIL = re.compile(rb',\s*"id"\s*:\s*' + _ID_TOKEN + rb'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$')


def answered_id(head: bytes, tail: bytes) -> Any:
    """The id a discarded response line answered, read from its first or last bytes; ``None`` if unsure."""
    for pattern, part in ((_ID_AT_HEAD, head), (_ID_AT_TAIL, tail)):
        found = pattern.search(part)
        if found is not None:
            try:
                return orjson.loads(found.group(1))
            except orjson.JSONDecodeError:
                return None
    return None


ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class _DirectCall:
    on_progress: ProgressSink
    done: trio.Event = field(default_factory=trio.Event)
    reply: dict[str, Any] | None = None
    size: int = 0
    raw: bytes = b""
    #: Set instead of ``reply`` when the answer was over the frame bound: ``(size, limit)``.
    too_large: tuple[int, int] | None = None


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
    """What the handshake and the tools/list walk found.

    ``tools`` are the raw tool objects (JSON) in listing order.
    """

    protocol_version: str
    server_name: str
    server_version: str
    tools: list[dict[str, Any]]


class PluginLink:
    """The transport and MCP session of one plugin instance.

    Use :meth:`run` with ``nursery.start``: it returns the :class:`Discovery`
    once the handshake and the ``tools/list`` walk succeeded, or raises
    :class:`HostError` (``PLUGIN_START_FAILED``) with the reason and the
    stderr tail. After that it keeps the session open until :meth:`close`
    or a failure; ``done`` is set then, and ``failure`` holds the reason of an
    unexpected end (``None`` after :meth:`close`).
    """

    def __init__(
        self,
        plugin_id: str,
        process: SandboxedProcess,
        *,
        redact: Redactor,
        on_log: LogSink,
        on_notification: NotificationSink,
        max_frame_bytes: int = PLUGIN_FRAME_LIMIT,
        stdout_noise: str = "strict",
    ) -> None:
        self.plugin_id = plugin_id
        self.process = process
        self.failure: str | None = None
        self.done = trio.Event()
        #: Set by the supervisor once it has reacted to ``failure`` (state, tools).
        self.failure_handled = trio.Event()
        self.last_seen_at: float | None = None
        self.noise_dropped = 0
        self.stderr = StderrTail(redact)
        self.session: ClientSession | None = None
        self._redact = redact
        self._on_log = on_log
        self._on_notification = on_notification
        self._decoder = LineDecoder(max_frame_bytes)
        self._stdout_noise = stdout_noise
        self._log_limit = _RateLimit(_LOG_RATE_PER_SECOND, _LOG_BURST)
        self._dropped_reported = 0
        self._orphan_limit = _RateLimit(5.0, 10.0)
        self.orphans = 0
        self._outstanding: dict[types.RequestId, str] = {}
        self._last_tools_page: dict[str, Any] | None = None
        self._direct: dict[str, _DirectCall] = {}
        self._direct_ids = itertools.count(1)
        self._noise_limit = _RateLimit(1.0, 3.0)
        self._write_lock = trio.Lock()
        self._closing = False
        #: True while stdout is not read because the parent is behind (docs/protocol.md "Flow control").
        self.paused = False
        self._read_send, self._read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](64)
        self._write_send, self._write_receive = anyio.create_memory_object_stream[SessionMessage](64)

    # -- lifecycle --------------------------------------------------------------

    async def run(self, startup_timeout: float, *, task_status: trio.TaskStatus[Discovery]) -> None:
        """Handshake, list tools, report them with ``task_status.started``, then serve.

        Raises :class:`HostError` (``PLUGIN_START_FAILED``) before ``started``;
        never raises after it (the failure goes to ``failure`` and ``done``).
        """
        # Errors are carried out of the nurseries as a value: raised inside,
        # trio (and anyio's task group in the SDK) would wrap them in groups.
        error: HostError | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump_stdout)
            nursery.start_soon(self._pump_stdin)
            nursery.start_soon(self._pump_stderr)
            nursery.start_soon(self._watch_exit)
            try:
                async with ClientSession(
                    self._read_receive,
                    self._write_send,
                    client_info=types.Implementation(name="hostd", version=__version__),
                    logging_callback=self._mcp_log,
                    message_handler=self._message,
                ) as session:
                    self.session = session
                    try:
                        discovery = await self._discover(session, startup_timeout)
                    except HostError as exc:
                        error = exc
                        self._fail(str(exc.data.get("reason", exc.message)))
                    else:
                        task_status.started(discovery)
                        await self.done.wait()
            finally:
                self.done.set()
                nursery.cancel_scope.cancel()
        if error is not None:
            raise error

    async def _discover(self, session: ClientSession, startup_timeout: float) -> Discovery:
        started = time.monotonic()
        try:
            with trio.fail_after(startup_timeout):
                init = await session.initialize()
                if init.capabilities.tools is None:
                    raise self._start_error("the server does not declare the tools capability")
                tools = await self.list_tools(session)
        except trio.TooSlowError:
            # Let a process that is exiting right now say so instead.
            with trio.move_on_after(0.2):
                await self.done.wait()
            reason = self._during_start(self.failure) or f"startup timed out after {startup_timeout:g} s"
            raise self._start_error(reason, seconds=round(time.monotonic() - started, 3)) from None
        except MCPError as exc:
            if self.failure is not None:
                raise self._start_error(self._during_start(self.failure) or "start failed") from None
            raise self._start_error(f"initialize failed: {exc.error.message}", upstream=_error_dict(exc)) from None
        except ValidationError as exc:
            raise self._start_error(f"invalid answer from the server: {_pydantic_summary(exc)}") from None
        except ValueError as exc:  # pydantic's "Maximum serialization depth exceeded" (issue 10)
            raise self._start_error(f"invalid answer from the server: {exc}") from None
        except RuntimeError as exc:  # the SDK's "Unsupported protocol version"
            raise self._start_error(str(exc)) from None
        info = init.server_info
        return Discovery(
            protocol_version=init.protocol_version,
            server_name=info.name,
            server_version=info.version,
            tools=tools,
        )

    async def list_tools(self, session: ClientSession) -> list[dict[str, Any]]:
        """Walk every ``tools/list`` page (MCP "Pagination"); return the raw tools.

        Only an absent or null ``nextCursor`` ends the walk. A repeated cursor or
        more than 100 pages raises ``PLUGIN_START_FAILED`` naming the server.
        """
        tools: list[dict[str, Any]] = []
        seen: set[str] = set()
        names: set[str] = set()
        cursor: str | None = None
        for page in range(1, MAX_LIST_PAGES + 1):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            self._last_tools_page = None
            try:
                await session.list_tools(params=params)
            except ValueError:  # pydantic's ValidationError, or its "Maximum serialization depth exceeded"
                # The SDK's model refused the page; hostd.tools reports each tool's problem
                # precisely, from the server's own JSON (kept by the transport).
                if self._last_tools_page is None:
                    raise
            raw = self._last_tools_page
            if raw is None or not isinstance(raw.get("tools"), list):
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
        return HostError(
            ErrorKind.PLUGIN_START_FAILED,
            f"plugin {self.plugin_id} failed to start: {reason}",
            plugin=self.plugin_id,
            reason=reason,
            **self.stderr.excerpt(),
            **data,
        )

    def close(self) -> None:
        """End the session on purpose (disable, restart); not a failure."""
        self._closing = True
        self.done.set()
        self._read_send.close()

    def fail(self, reason: str) -> None:
        """End the link as failed with ``reason`` (the first reason wins)."""
        self._fail(reason)

    def _fail(self, reason: str) -> None:
        if self.failure is None and not self._closing:
            self.failure = reason
            log.warning("plugin %s: %s", self.plugin_id, reason)
        self.done.set()
        self._read_send.close()
        for call in self._direct.values():
            call.done.set()  # no reply: the caller raises LinkClosed

    # -- tools/call, the hot path -------------------------------------------------

    async def call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: ProgressSink
    ) -> tuple[dict[str, Any], int, bytes]:
        """:meth:`_call_tool` inside the call's span, whose trace context goes to the plugin in ``_meta``."""
        with tracing.plugin_span(self.plugin_id, "tools/call", name) as trace_meta:
            return await self._call_tool(name, arguments, on_progress, trace_meta)

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], on_progress: ProgressSink, trace_meta: dict[str, str]
    ) -> tuple[dict[str, Any], int, bytes]:
        """Send ``tools/call``; return the plugin's JSON-RPC response, its frame size (bytes)
        and the frame itself (so an unchanged result can be forwarded byte for byte).

        The hot path bypasses the SDK session: the request is encoded once and
        the response handed back as the server's JSON, with no model built
        (the session still owns the handshake, listings and pings). The
        request carries a progress token; ``notifications/progress`` for it
        go to ``on_progress``. Cancelling the caller sends
        ``notifications/cancelled`` (MCP "Cancellation") and a late answer is
        dropped as an orphan. Raises :class:`LinkClosed` when the link ends first.
        """
        rid = f"hostd-{next(self._direct_ids)}"
        call = _DirectCall(on_progress=on_progress)
        self._direct[rid] = call
        params = {"name": name, "arguments": arguments, "_meta": {"progressToken": rid, **trace_meta}}
        try:
            if self.done.is_set() or not await self._write(
                encode({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
            ):
                raise LinkClosed(self.failure or "the plugin is stopping")
            await call.done.wait()
        finally:
            self._direct.pop(rid, None)
            if not call.done.is_set() and not self.done.is_set():
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await self._write(
                        encode(
                            {
                                "jsonrpc": "2.0",
                                "method": "notifications/cancelled",
                                "params": {"requestId": rid, "reason": "cancelled by the host"},
                            }
                        )
                    )
        if call.too_large is not None:
            raise ReplyTooLarge(*call.too_large)
        if call.reply is None:
            raise LinkClosed(self.failure or "the plugin stopped")
        return call.reply, call.size, call.raw

    async def _direct_message(self, value: Any, size: int, raw: bytes = b"") -> bool:
        """Deliver a response or progress of a hot-path call; False if ``value`` is not one."""
        if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
            return False
        rid = value.get("id")
        if isinstance(rid, str) and rid in self._direct:
            if "method" in value or ("result" in value) == ("error" in value) or not _ENVELOPE_KEYS.issuperset(value):
                return False
            call = self._direct.pop(rid)
            call.reply, call.size, call.raw = value, size, raw
            self.last_seen_at = time.time()
            call.done.set()
            return True
        if value.get("method") == "notifications/progress" and "id" not in value:
            params = value.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            pending = self._direct.get(token) if isinstance(token, str) else None
            if pending is None or not isinstance(params, dict):
                return False
            progress, total, message = params.get("progress"), params.get("total"), params.get("message")
            if not isinstance(progress, int | float) or isinstance(progress, bool):
                return False
            self.last_seen_at = time.time()
            await pending.on_progress(
                progress,
                total if isinstance(total, int | float) and not isinstance(total, bool) else None,
                message[:_STDERR_LINE_BYTES] if isinstance(message, str) else None,
            )
            return True
        return False

    def _discarded_reply(self, event: FrameDiscarded) -> bool:
        """Fail only the call an over-long line answered; False when it answered none we can name.

        The line's id is read from its first or last bytes (:func:`answered_id`);
        if it names no call, and exactly one hot-path call and no other request
        is in flight, it can only be that call's answer. Anything else (an
        over-long listing, a notification) is a violation that ends the link.
        """
        rid = answered_id(event.head, event.tail)
        if rid is None and len(self._direct) == 1 and not self._outstanding:
            rid = next(iter(self._direct))
        call = self._direct.pop(rid, None) if isinstance(rid, str) else None
        if call is None:
            return False
        call.too_large = (event.size, event.limit)
        self.last_seen_at = time.time()
        call.done.set()
        return True

    # -- transport tasks --------------------------------------------------------

    async def _pump_stdout(self) -> None:
        outbox = current_outbox()
        while True:
            if outbox is not None and outbox.over_budget:
                # The parent is behind: the plugin waits on its own full pipe, not hostd's memory.
                self.paused = True
                log.info("plugin %s: stdout paused: %d bytes wait for the parent", self.plugin_id, outbox.bytes)
                await outbox.wait_room()
                log.info("plugin %s: stdout resumed", self.plugin_id)
                self.paused = False
            data = await _receive(self.process.stdout)
            if not data:
                await self._stdout_closed()
                return
            for event in self._decoder.feed(data):
                if isinstance(event, FrameTooLarge):
                    if self._direct:
                        continue  # being discarded; its end (FrameDiscarded) tells which call it answered
                    self._fail(  # no call in flight it could answer: a violation, known at once
                        f"a message on stdout exceeded the {event.limit}-byte frame bound "
                        f"(starts {self._redact(describe_head(event.head))!r})"
                    )
                    return
                if isinstance(event, FrameDiscarded):
                    if not self._discarded_reply(event):
                        self._fail(
                            f"a message on stdout exceeded the {event.limit}-byte frame bound and answered no "
                            f"call in flight (starts {self._redact(describe_head(event.head))!r})"
                        )
                        return
                    continue
                if isinstance(event, InvalidJSON):
                    if not await self._noise(event.head, f"not JSON ({event.reason})"):
                        return
                    continue
                if self._direct and await self._direct_message(event.value, event.size, event.raw):
                    continue
                message = _envelope(event.value)
                if message is None:
                    if not await self._noise(encode(event.value)[:80], "not a JSON-RPC 2.0 message"):
                        return
                    continue
                self.last_seen_at = time.time()
                if isinstance(message, types.JSONRPCRequest):
                    await self._answer_server_request(message)
                    continue
                if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                    method = self._outstanding.pop(message.id, None) if message.id is not None else None
                    if method is None:
                        await self._orphan(message)
                        continue
                    if method == "tools/list" and isinstance(message, types.JSONRPCResponse):
                        self._last_tools_page = event.value.get("result")
                try:
                    await self._read_send.send(SessionMessage(message))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def _stdout_closed(self) -> None:
        if self._closing:
            return
        with trio.move_on_after(1.0):
            await self.process.wait()
        code = self.process.returncode
        if code is None:
            self._fail("closed its stdout")
        else:
            self._fail(_exit_reason(code))

    async def _orphan(self, message: types.JSONRPCResponse | types.JSONRPCError) -> None:
        """A response to no request in flight (unknown id, a duplicate, a late answer): dropped."""
        self.orphans += 1
        if self._orphan_limit.allow():
            kind = "an error" if isinstance(message, types.JSONRPCError) else "a response"
            await self._on_log(
                "warning", "stdout", f"dropped {kind} for id {message.id!r}: no request in flight has that id"
            )

    @property
    def pending_frame_bytes(self) -> int:
        """Bytes of an unfinished stdout line held right now (a half-written message)."""
        return self._decoder.pending_bytes

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

    async def _answer_server_request(self, request: types.JSONRPCRequest) -> None:
        if request.method == "ping":
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id, "result": {}}
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": request.id,
                "error": {"code": types.METHOD_NOT_FOUND, "message": f"hostd does not serve {request.method}"},
            }
        await self._write(encode(reply))

    async def _pump_stdin(self) -> None:
        async for item in self._write_receive:
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                self._outstanding[message.id] = message.method
            elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                # A late answer to a cancelled request is an orphan from now on.
                self._outstanding.pop((message.params or {}).get("requestId"), None)  # type: ignore[arg-type]
            data = encode(message.model_dump(mode="json", by_alias=True, exclude_unset=True))
            if not await self._write(data):
                return

    async def _write(self, data: bytes) -> bool:
        async with self._write_lock:
            try:
                await self.process.stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                if not self._closing:
                    self._fail("closed its stdin")
                return False
        return True

    async def _pump_stderr(self) -> None:
        while True:
            data = await _receive(self.process.stderr)
            lines = self.stderr.feed(data) if data else self.stderr.flush()
            for line in lines:
                await self._relay("info", "stderr", line)
            if not data:
                return

    async def _watch_exit(self) -> None:
        code = await self.process.wait()
        if not self._closing:
            # Give stdout a moment to deliver what the process wrote last.
            await trio.sleep(0.05)
            self._fail(_exit_reason(code))

    # -- session callbacks ------------------------------------------------------

    async def _mcp_log(self, params: types.LoggingMessageNotificationParams) -> None:
        exceeded = check_json(params.data)  # orjson cannot encode data over 255 levels deep
        if exceeded is not None:
            data = f"(log data not shown: {exceeded.message})"
        else:
            data = params.data if isinstance(params.data, str) else encode(params.data).decode()
        await self._relay(str(params.level), "mcp", self._redact(data[:_STDERR_LINE_BYTES]))

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

    async def _message(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, Exception):
            log.debug("plugin %s: transport exception %r", self.plugin_id, message)
            return
        await self._on_notification(message)


async def _receive(stream: trio.abc.ReceiveStream) -> bytes:
    """One read of at most 64 KiB; ``b""`` at EOF or when the pipe is gone."""
    try:
        return bytes(await stream.receive_some(_READ_BYTES))
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


def _envelope(value: Any) -> types.JSONRPCMessage | None:
    """The JSON-RPC 2.0 message ``value`` is, or None (then it is noise).

    Stricter than the SDK's parser: no unknown top-level keys, exactly one of
    ``method`` / ``result`` / ``error``, so a structured log line that happens
    to carry an ``id`` can never resolve a pending request.
    """
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0" or not _ENVELOPE_KEYS.issuperset(value):
        return None
    kinds = ("method" in value) + ("result" in value) + ("error" in value)
    if kinds != 1:
        return None
    try:
        if "method" in value:
            if "id" in value:
                return types.JSONRPCRequest.model_validate(value)
            return types.JSONRPCNotification.model_validate(value)
        if "result" in value:
            return types.JSONRPCResponse.model_validate(value)
        return types.JSONRPCError.model_validate(value)
    except ValidationError:
        return None


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _error_dict(exc: MCPError) -> dict[str, Any]:
    error = exc.error
    out: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        out["data"] = error.data
    return out


def _pydantic_summary(exc: ValidationError) -> str:
    parts = []
    for item in exc.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
