"""The control channel: JSON-RPC 2.0 between the parent application and hostd; this module is its stdio driver.

The driver owns the streams, the tasks and the cancel scopes. What a message is and what a request may do is
decided by the sans-IO core (:mod:`hostd.control.core`); which method is served by whom, by the explicit
method table (:mod:`hostd.control.router`); what waits to be written, by the :class:`Outbox`
(:mod:`hostd.control.outbox`). Their public names are re-exported here.

Theory of operation
-------------------

The parent holds hostd's stdin and stdout. :class:`ControlServer` reads
stdin in one task (bounded framing, :mod:`hostd.wire.framing`) and writes stdout
in another, so a parent that is slow to read never stalls the reader (a
write-then-read loop deadlocks once both pipe buffers fill). Between them sits
the :class:`Outbox`, bounded in bytes with a policy per kind of message
(responses never dropped, progress coalesced, logs dropped with a count,
plugins paused when it is full; ``docs/protocol.md`` "Flow control"). The
reader hands every message on without awaiting anything, and requests beyond
the in-flight bound are answered ``HOST_OVERLOADED`` at once. Every request
runs concurrently with the reader, on a worker task of the request nursery
(a parked one is woken, else one is started; :meth:`ControlServer._run_soon`),
in a cancel scope of its own, so a slow ``tools/call`` never delays a ``ping``; ``$/cancelRequest {id}`` cancels that
scope and the request is still answered, with -32800 (the LSP rule; see
``docs/protocol.md``).

The reader never waits behind replies. The class: *something the reader must
act on at once (``$/cancelRequest``, ``exit``, the parent's answers) queued
behind replies nobody reads*. Requests answered on the spot (``ping``,
refusals, ``HOST_OVERLOADED``) still cost reply bytes, bounded to
``budget // 16`` unread; past that share, requests and refusals are *parked*
in order (:class:`hostd.control.outbox.Parking`) and run as the parent reads,
while notifications and answers keep
being read and acted on, so a cancel reaches the plugin and ``exit`` ends
hostd with stdout unread; a parked request cancelled before its turn is
answered -32800 then. Only when the parked requests' frames exceed the whole
outbox budget does the reader stop reading stdin (flow control: the parent
then blocks on its own full pipe).

The fast path (``tools/call`` and every other reply). Each hop between trio
tasks is a scheduler round, and rounds, not hostd's functions, were most of a
call's cost; so the path takes as few as it can without giving up the rules
above. The reader reads stdin when it is readable (:func:`hostd.wire.pipes.receive_ready`:
no checkpoint before the read, no failed read). A response is written by the
task that made it (:meth:`Outbox._append`) when two things hold: nothing waits
in the queue and the writer holds no batch it has not written. Then no byte
can overtake another, so order is as if the writer had written it; what the
pipe does not take at once waits in the queue, first, and counts against the
budget like any queued message (a partly written message is never coalesced
or replaced: its first bytes are out). A full pipe, a broken one and a parent
that does not read all end up in the writer's hands as before, and flow
control, progress rate limits and drop counts see only what waits.

Only ``initialize`` is served here; it is answered at once, before the heavy
modules (pydantic models, the mcp SDK, jsonschema) are imported: the answer
is the parent's readiness signal. Those modules load in a worker thread right
after, and requests that arrive meanwhile wait for them. Everything else is
delegated to a :class:`HostApi` (``hostd.host.service.Host``).

stdin EOF, SIGTERM, SIGINT and a failed write to stdout (the parent is gone)
all end in the same orderly shutdown: stop taking work, stop every plugin
tree, exit. This module imports only trio and orjson.
"""

from __future__ import annotations

import collections
import functools
import itertools
import logging
import math
import os
import signal
import socket
import sys
import traceback
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from hostd.control.core import (
    EXIT_CONFIG,
    EXIT_NO_SHUTDOWN,
    EXIT_OK,
    EXIT_TEMPFAIL,
    MAX_INFLIGHT_BYTES,
    MAX_INFLIGHT_REQUESTS,
    MAX_PARENT_REQUESTS,
    IncomingNotification,
    InitializeOptions,
    Notify,
    ParentAnswer,
    Refusal,
    RequestContext,
    RequestId,
    bound_parent_answer,
    classify,
    cut_utf8,
    error_response,
    initialize_result,
    overload,
    parse_initialize,
    state_key,
    valid_id,
    within_line_bound,
)
from hostd.control.outbox import (
    OUTBOX_BYTES,
    PROGRESS_MESSAGE_BYTES,
    Outbox,
    Parking,
    set_current_outbox,
)
from hostd.control.router import CONTROL_ROUTES, MethodRouter, Route
from hostd.storage.state import StateError, StateStore, default_state_dir
from hostd.wire import pipes
from hostd.wire.errors import ErrorKind, HostError, exhausted
from hostd.wire.framing import (
    PARENT_FRAME_LIMIT,
    FrameTooLarge,
    InvalidJSON,
    LineDecoder,
    Message,
    describe_head,
    encode,
)

log = logging.getLogger("hostd.control.server")

_READ_BYTES = 65536
_WRITE_BATCH_BYTES = 256 * 1024
#: Request workers left parked for the next requests; a worker that finds this many parked ends.
_IDLE_WORKERS = 16


class HostApi(Protocol):
    """What the control channel needs from the host behind it."""

    @property
    def METHODS(self) -> Mapping[str, object]:
        """The methods the host serves, by name (:class:`hostd.control.router.MethodRouter` routes them)."""
        ...

    async def handle(self, method: str, params: Any, ctx: RequestContext) -> Any:
        """Serve one request of a method in :attr:`METHODS`; raise :class:`HostError` to answer with an error."""
        ...

    async def shutdown(self, *, fast: bool) -> None:
        """Stop every plugin (whole trees) and persist state; ``fast`` skips graces."""
        ...


HostFactory = Callable[[InitializeOptions, Notify, trio.Nursery], Awaitable[HostApi]]


@dataclass
class _ParentCall:
    done: trio.Event = field(default_factory=trio.Event)
    reply: dict[str, Any] | None = None


#: Seconds a ``shutdown`` request waits for the requests received before it (then cancels them).
SHUTDOWN_DRAIN_SECONDS = 5.0


@dataclass
class _Inflight:
    scope: trio.CancelScope
    size: int = 0
    cancelled_by_parent: bool = False


@dataclass
class _State:
    initialized: bool = False
    shutdown_requested: bool = False
    stopping: bool = False
    exit_code: int | None = None
    inflight: dict[RequestId, _Inflight] = field(default_factory=dict)
    inflight_bytes: int = 0


#: One request for a worker: ``(id, method, params, its in-flight entry)``.
_Job = tuple[RequestId, str, Any, _Inflight]


class ControlServer:
    """Serves the control protocol on a pair of byte streams until shutdown.

    ``host_factory`` builds the host after ``initialize`` has been answered;
    it receives the parent's options, a ``notify`` coroutine and a nursery
    that outlives every request (for plugin tasks). :meth:`serve` returns the
    process exit code (0 clean, 1 ``exit`` without ``shutdown``).

    ``max_outbox_bytes`` is the :class:`Outbox` budget; beyond
    ``max_inflight`` requests (or ``max_inflight_bytes`` of their frames) in
    flight, a new request is answered ``HOST_OVERLOADED`` at once.
    """

    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        host_factory: HostFactory,
        *,
        max_frame_bytes: int = PARENT_FRAME_LIMIT,
        state_dir: str | None = None,
        state_store: StateStore | None = None,
        handle_signals: bool = True,
        max_outbox_bytes: int = OUTBOX_BYTES,
        max_inflight: int = MAX_INFLIGHT_REQUESTS,
        max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
    ) -> None:
        self._receive = receive
        self._send = send
        self._host_factory = host_factory
        self._decoder = LineDecoder(max_frame_bytes)
        self._default_state_dir = state_dir
        self._state_store = state_store
        self._handle_signals = handle_signals
        self._state = _State()
        inline = functools.partial(pipes.write_now, send) if isinstance(send, trio.lowlevel.FdStream) else None
        self._outbox = Outbox(max_outbox_bytes, write_now=inline)
        self._max_inflight = max_inflight
        self._max_inflight_bytes = max_inflight_bytes
        self._draining = False
        self._writer_done = trio.Event()
        self._host: HostApi | None = None
        #: The method table: the channel's own methods until the host is built, then the host's too.
        self._router = MethodRouter()
        self._host_ready = trio.Event()
        self._host_error: HostError | None = None
        self._stop = trio.Event()
        self._fast_stop = False
        self._stopping_host: HostApi | None = None
        #: Set when the last request in flight ends (a shutdown waits on it: _drain_before_shutdown).
        self._drained = trio.Event()
        #: Requests handed to a parked worker and not yet taken (see _run_soon), and the parked workers.
        self._jobs: collections.deque[_Job] = collections.deque()
        self._idle = trio.lowlevel.ParkingLot()
        #: hostd->parent requests waiting for their answer, by hostd's own id ("hostd-<n>").
        self._parent_pending: dict[str, _ParentCall] = {}
        self._parent_ids = itertools.count(1)
        #: What the reader read while its own replies were over their share (module header).
        self._parked = Parking(
            self._outbox,
            lambda rid: self._reply_error(rid, HostError(ErrorKind.REQUEST_CANCELLED, "cancelled by $/cancelRequest")),
        )

    # -- public -----------------------------------------------------------------

    async def serve(self) -> int:
        """Run until stdin EOF, ``exit``, a signal or a broken stdout; return the exit code."""
        set_current_outbox(self._outbox)  # inherited by every task started below (plugin links)
        async with trio.open_nursery() as outer:
            outer.start_soon(self._writer)
            if self._handle_signals:
                outer.start_soon(self._signals)
                outer.start_soon(self._watch_parent, os.getppid())
            _notify_systemd(b"READY=1")
            async with trio.open_nursery() as plugins:
                self._plugins_nursery = plugins
                async with trio.open_nursery() as requests:
                    self._requests = requests
                    requests.start_soon(self._reader)
                    requests.start_soon(self._parked.release)
                    await self._stop.wait()
                    self._state.stopping = True
                    await self._shutdown_host()
                    requests.cancel_scope.cancel()
                plugins.cancel_scope.cancel()
            await self._flush_outbox()
            outer.cancel_scope.cancel()
        return self._state.exit_code if self._state.exit_code is not None else EXIT_OK

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to the parent; returns at once, whatever the parent does.

        The :class:`Outbox` policy applies by ``method``: ``$/progress``
        (``params.requestId`` must be a request in flight, else it is dropped)
        is coalesced and rate-limited, its ``message`` cut to 1024 bytes;
        ``plugins/log`` is dropped and counted when the log share is full;
        anything else (``plugins/statusChanged``, ``tools/listChanged``) is
        always queued, replacing a queued one for the same plugin while the
        outbox is over budget. An unserialisable ``params`` is logged and dropped.
        """
        outbox = self._outbox
        if method == "$/progress":
            rid = params.get("requestId")
            if not valid_id(rid) or rid not in self._state.inflight:
                return
            message = params.get("message")
            if isinstance(message, str):
                params = {**params, "message": cut_utf8(message, PROGRESS_MESSAGE_BYTES)}
            data = self._encode_notification(method, params)
            if data is not None:
                outbox.put_progress(rid, data, trio.current_time())
            return
        data = self._encode_notification(method, params)
        if data is None:
            return
        if method == "plugins/log":
            plugin = params.get("plugin")
            outbox.put_log(plugin if isinstance(plugin, str) else None, data)
        else:
            outbox.put_state(state_key(method, params), data)

    async def request_parent(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """Send the parent a JSON-RPC request of hostd's own and return its ``result`` (any JSON value).

        hostd's ids are strings ``"hostd-<n>"``, a namespace apart from the
        parent's (the two directions never share ids). At most
        ``MAX_PARENT_REQUESTS`` wait at once; beyond that ``HOST_OVERLOADED``
        is raised without sending. ``timeout`` is in seconds. Raises
        ``PARENT_REQUEST_FAILED`` when the parent answers with an error
        (``data.upstream`` holds it), when it does not answer within ``timeout``
        or when hostd is stopping. On a timeout or when the caller is cancelled,
        hostd sends the parent ``$/cancelRequest {id}`` (the same notification
        the parent uses for hostd) and drops a late answer.
        """
        if self._outbox.closed or self._state.stopping:
            raise HostError(ErrorKind.PARENT_REQUEST_FAILED, f"{method}: hostd is stopping", method=method)
        if len(self._parent_pending) >= MAX_PARENT_REQUESTS:
            raise HostError(
                ErrorKind.HOST_OVERLOADED,
                f"{method}: {len(self._parent_pending)} requests to the parent already wait for an answer",
                maxInFlight=MAX_PARENT_REQUESTS,
            )
        rid = f"hostd-{next(self._parent_ids)}"
        call = _ParentCall()
        self._parent_pending[rid] = call
        answered = False
        try:
            self._outbox.put_reply(encode({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
            with trio.move_on_after(timeout):
                await call.done.wait()
            answered = call.reply is not None
        finally:
            self._parent_pending.pop(rid, None)
            if not answered and not self._outbox.closed:
                data = self._encode_notification("$/cancelRequest", {"id": rid})
                if data is not None:
                    self._outbox.put_reply(data)
        reply = call.reply
        if reply is None:
            raise HostError(
                ErrorKind.PARENT_REQUEST_FAILED,
                f"the parent did not answer {method} within {timeout:g} s (sent $/cancelRequest)",
                method=method,
                timeoutSeconds=timeout,
            )
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {"message": str(reply["error"])}
            raise HostError(
                ErrorKind.PARENT_REQUEST_FAILED,
                f"the parent answered {method} with an error: {str(error.get('message'))[:500]}",
                method=method,
                upstream=error,
            )
        return reply.get("result")

    def _parent_answer(self, message: dict[str, Any], size: int) -> None:
        """Route a response from the parent to the hostd->parent request it answers (else log and drop)."""
        rid = message.get("id")
        call = self._parent_pending.get(rid) if isinstance(rid, str) else None
        if call is None:
            log.warning("dropping a response from the parent to id %r: no request of hostd waits for it", rid)
            return
        call.reply = bound_parent_answer(message, size)
        call.done.set()

    # -- tasks ------------------------------------------------------------------

    async def _reader(self) -> None:
        # Every step below returns at once: the only waits are for stdin and, as a last resort, for
        # room among the parked requests (module header, "The reader never waits behind replies").
        while True:
            if self._parked.full:
                log.info("stdin paused: %d bytes of requests wait for the parent to read", self._parked.bytes)
                await self._parked.wait_room()
                log.info("stdin resumed")
            try:
                data = await pipes.receive_ready(self._receive, _READ_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                log.info("stdin closed: shutting down")
                self._stop.set()
                return
            for event in self._decoder.feed(data):
                if isinstance(event, FrameTooLarge):
                    error = HostError(
                        ErrorKind.FRAME_TOO_LARGE,
                        f"message exceeds the {event.limit}-byte bound; discarded up to the next newline",
                        limit=event.limit,
                        head=describe_head(event.head),
                    )
                    self._parked.run_or_park(len(event.head), None, functools.partial(self._reply_error, None, error))
                elif isinstance(event, InvalidJSON):
                    error = HostError(
                        ErrorKind.PARSE_ERROR, f"not UTF-8 JSON: {event.reason}", head=describe_head(event.head)
                    )
                    self._parked.run_or_park(len(event.head), None, functools.partial(self._reply_error, None, error))
                elif isinstance(event, Message):
                    self._dispatch(event.value, event.size)
                # FrameDiscarded: the end of a line already answered as FRAME_TOO_LARGE.

    async def _writer(self) -> None:
        outbox = self._outbox
        try:
            while True:
                entries = outbox.take(_WRITE_BATCH_BYTES, trio.current_time())
                if not entries:
                    if self._draining:
                        return
                    due = outbox.next_due()
                    await outbox.wait_work(due if due is not None else math.inf)
                    continue
                try:
                    await self._send.send_all(b"".join([entry.data for entry in entries]))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    log.warning("stdout is broken: the parent is gone; shutting down")
                    outbox.close()
                    self._fast_stop = True
                    self._stop.set()
                    return
                finally:
                    outbox.written(entries)
                self._report_dropped_logs()
        finally:
            self._writer_done.set()

    def _report_dropped_logs(self) -> None:
        for plugin, count in self._outbox.take_drop_counts().items():
            message = (
                f"{count} plugins/log notifications dropped: the parent did not read them in time "
                f"(the log queue holds {self._outbox.log_budget} bytes)"
            )
            params = {"plugin": plugin, "level": "warning", "source": "host", "message": message, "dropped": count}
            data = self._encode_notification("plugins/log", params)
            if data is not None:
                self._outbox.put_log(plugin, data, force=True)

    async def _watch_parent(self, parent: int, interval: float = 2.0) -> None:
        """Poll for the death of the parent (re-parenting), a backup for stdin EOF."""
        while True:
            await trio.sleep(interval)
            if os.getppid() != parent:
                log.warning("the parent process %d is gone: shutting down", parent)
                self._stop.set()
                return

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    reload = getattr(self._host, "reload_manifests", None)
                    if reload is not None:
                        log.info("SIGHUP: re-reading manifests")
                        self._plugins_nursery.start_soon(reload)
                    continue
                if self._stop.is_set():
                    log.warning("second %s: skipping the graces", signal.Signals(signum).name)
                    self._fast_stop = True
                    expedite = getattr(self._stopping_host, "expedite", None)
                    if expedite is not None:
                        expedite()
                else:
                    log.info("%s: shutting down", signal.Signals(signum).name)
                    self._stop.set()

    # -- dispatch ---------------------------------------------------------------

    def _dispatch(self, message: Any, size: int) -> None:
        # Notifications ($/cancelRequest, exit) and the parent's answers make no reply: acted on at once,
        # even while requests are parked; a request or a refusal makes one and may be parked (Parking).
        incoming = classify(message, size)
        if isinstance(incoming, ParentAnswer):
            self._parent_answer(incoming.message, incoming.size)
        elif isinstance(incoming, IncomingNotification):
            self._notification(incoming.method, incoming.params)
        elif self._parked.idle:  # the fast path
            if isinstance(incoming, Refusal):
                self._reply_error(incoming.rid, incoming.error)
            else:
                self._request(incoming.rid, incoming.method, incoming.params, incoming.size)
        elif isinstance(incoming, Refusal):
            self._parked.run_or_park(size, None, functools.partial(self._reply_error, incoming.rid, incoming.error))
        else:
            request = functools.partial(self._request, incoming.rid, incoming.method, incoming.params, incoming.size)
            self._parked.run_or_park(size, incoming.rid, request)

    def _notification(self, method: str, params: Any) -> None:
        if method == "exit":
            self._state.exit_code = EXIT_OK if self._state.shutdown_requested else EXIT_NO_SHUTDOWN
            self._stop.set()
        elif method == "$/cancelRequest":
            rid = params.get("id") if isinstance(params, dict) else None
            entry = self._state.inflight.get(rid) if valid_id(rid) else None
            if entry is not None:
                entry.cancelled_by_parent = True
                entry.scope.cancel()
            elif valid_id(rid) and self._parked.cancel(rid):
                pass  # not started yet: answered REQUEST_CANCELLED when its turn comes
            else:
                log.debug("$/cancelRequest for %r: no such request in flight", rid)
        elif method != "initialized":
            log.debug("ignoring notification %s", method)

    def _request(self, rid: RequestId, method: str, params: Any, size: int) -> None:
        state = self._state
        route = CONTROL_ROUTES.get(method)
        if route is Route.INITIALIZE:
            self._initialize(rid, params)
            return
        if not state.initialized:
            self._reply_error(rid, HostError(ErrorKind.SERVER_NOT_INITIALIZED, f"{method} before initialize"))
            return
        if state.stopping or state.shutdown_requested:
            self._reply_error(rid, HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down"))
            return
        if rid in state.inflight:
            self._reply_error(rid, HostError(ErrorKind.INVALID_REQUEST, f"id {rid!r} is already in flight"))
            return
        if route is Route.PING:
            self._reply({"jsonrpc": "2.0", "id": rid, "result": {}})
            return
        if route is Route.SHUTDOWN:
            state.shutdown_requested = True
            self._requests.start_soon(self._shutdown_request, rid)
            return
        refused = overload(
            len(state.inflight), state.inflight_bytes, size, self._max_inflight, self._max_inflight_bytes
        )
        if refused is not None:
            self._reply_error(rid, refused)
            return
        entry = _Inflight(scope=trio.CancelScope(), size=size)
        state.inflight[rid] = entry
        state.inflight_bytes += size
        self._run_soon((rid, method, params, entry))

    def _run_soon(self, job: _Job) -> None:
        """Run one request concurrently with the reader: on a parked worker if one waits, else a new one.

        Waking a parked worker is one reschedule; a new task costs a coroutine,
        a task, a context copy and the nursery's bookkeeping, and was the
        largest single cost left per call. Invariant: every job put in
        ``_jobs`` is paired with one unparked worker that looks at ``_jobs``
        when it runs, so a job never waits for a worker that is not coming (a
        worker that finishes first may take it; the woken one then parks again).
        """
        if self._idle:
            self._jobs.append(job)
            self._idle.unpark()
        else:
            self._requests.start_soon(self._worker, job)

    async def _worker(self, job: _Job) -> None:
        """Serve ``job``, then the next ones queued; park between them; end when enough others are parked.

        Each request still runs in its own cancel scope (``$/cancelRequest``
        cancels that one only); cancelling the request nursery ends every
        worker, parked or serving (a serving one answers first, ``_run_request``).
        """
        while True:
            await self._run_request(*job)
            while not self._jobs:
                if len(self._idle) >= _IDLE_WORKERS:
                    return
                await self._idle.park()
            job = self._jobs.popleft()

    def _initialize(self, rid: RequestId, params: Any) -> None:
        if self._state.initialized:
            self._reply_error(rid, HostError(ErrorKind.INVALID_REQUEST, "initialize was already answered"))
            return
        try:
            options = parse_initialize(params, self._default_state_dir)
            options.state_store = self._lock_state(options)
        except HostError as error:
            self._reply_error(rid, error)
            if error.kind in (ErrorKind.STATE_LOCKED, ErrorKind.STATE_UNUSABLE):
                self._state.exit_code = EXIT_TEMPFAIL if error.kind is ErrorKind.STATE_LOCKED else EXIT_CONFIG
                self._stop.set()
            return
        self._state.initialized = True
        options.request_parent = self.request_parent
        self._reply(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": initialize_result(options),
            }
        )
        self._plugins_nursery.start_soon(self._build_host, options)

    def _lock_state(self, options: InitializeOptions) -> StateStore:
        """Lock the state directory ``initialize`` chose (cheap: mkdir and flock)."""
        directory = Path(options.state_dir) if options.state_dir is not None else default_state_dir()
        store = self._state_store
        if store is not None and store.directory.resolve() == directory.resolve():
            return store
        candidate = StateStore(directory)
        try:
            candidate.lock()
        except StateError as exc:
            kind = ErrorKind.STATE_LOCKED if exc.exit_code == EXIT_TEMPFAIL else ErrorKind.STATE_UNUSABLE
            raise HostError(kind, str(exc), stateDir=str(directory)) from None
        if store is not None:
            store.close()
        self._state_store = candidate
        return candidate

    async def _build_host(self, options: InitializeOptions) -> None:
        try:
            host = await self._host_factory(options, self.notify, self._plugins_nursery)
            self._router = MethodRouter(host.METHODS)
            self._host = host
        except HostError as error:
            self._host_error = error
            if error.kind is ErrorKind.STATE_UNUSABLE:
                log.error("%s", error.message)
                self._state.exit_code = EXIT_CONFIG  # a supervisor must not restart into the same refusal
                self._stop.set()
        except Exception as exc:  # a bug: keep answering, with the reason
            log.exception("building the host failed")
            self._host_error = HostError(ErrorKind.INTERNAL_ERROR, f"hostd could not start: {exc!r}")
        finally:
            self._host_ready.set()

    async def _run_request(self, rid: RequestId, method: str, params: Any, entry: _Inflight) -> None:
        response: dict[str, Any] | None = None
        try:
            with entry.scope:
                if not self._host_ready.is_set():  # (a set Event's wait() would still cost a scheduler round)
                    await self._host_ready.wait()
                if self._host is None:
                    assert self._host_error is not None
                    raise self._host_error
                from hostd.control import openrpc  # noqa: PLC0415 (loaded with the host, after initialize)
                from hostd.wire import tracing  # noqa: PLC0415

                # params._meta (trace context) belongs to the channel, not to the method's params model.
                meta = params.pop("_meta", None) if isinstance(params, dict) and "_meta" in params else None
                with tracing.request_span(method, rid, meta):
                    route = self._router.route(method)
                    if route is Route.DISCOVER:
                        result: Any = openrpc.discover()
                    elif route is Route.HOST:
                        ctx = RequestContext(id=rid, method=method, notify=self.notify)
                        result = await self._host.handle(method, params, ctx)
                    else:
                        raise HostError(ErrorKind.METHOD_NOT_FOUND, f"no method {method!r}")
                response = {"jsonrpc": "2.0", "id": rid, "result": result}
        except HostError as error:
            response = error_response(rid, error)
        except Exception as exc:
            # A resource that ran out is the machine's state, not a defect: named and transient (issue 31).
            failure = exhausted(exc, f"answering {method}")
            if failure is None:
                log.error("request %r (%s) failed:\n%s", rid, method, traceback.format_exc())
                failure = HostError(ErrorKind.INTERNAL_ERROR, f"internal error: {exc!r}")
            else:
                log.warning("request %r (%s): %s", rid, method, failure.message)
            response = error_response(rid, failure)
        finally:
            if self._state.inflight.pop(rid, None) is not None:
                self._state.inflight_bytes -= entry.size
            if not self._state.inflight:
                self._drained.set()
            if response is None:
                ended = (
                    HostError(ErrorKind.REQUEST_CANCELLED, "cancelled by $/cancelRequest")
                    if entry.cancelled_by_parent
                    else HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down")
                )
                response = error_response(rid, ended)
            self._outbox.end_progress(rid)
            self._respond(response)

    async def _shutdown_request(self, rid: RequestId) -> None:
        await self._drain_before_shutdown()
        await self._shutdown_host()
        self._respond({"jsonrpc": "2.0", "id": rid, "result": None})

    async def _drain_before_shutdown(self) -> None:
        """Let the requests received before ``shutdown`` finish (docs/protocol.md, ``shutdown``: *after* it
        every request gets ``SHUTTING_DOWN``), for at most :data:`SHUTDOWN_DRAIN_SECONDS`; those still running
        then are cancelled and answered ``SHUTTING_DOWN``. None arrives meanwhile (``shutdown_requested``).

        The class: work the parent asked for before ``shutdown`` (pipelined in the same write, or waiting for
        the host to load) dropped by the shutdown instead of answered (issue 28).
        """
        inflight = self._state.inflight
        with trio.move_on_after(SHUTDOWN_DRAIN_SECONDS):
            while inflight:
                self._drained = trio.Event()
                await self._drained.wait()
        for entry in list(inflight.values()):
            entry.scope.cancel()

    async def _shutdown_host(self) -> None:
        with trio.CancelScope(shield=True):
            if self._state.initialized and not self._host_ready.is_set():
                with trio.move_on_after(30):
                    await self._host_ready.wait()
            if self._host is not None:
                host, self._host = self._host, None
                self._stopping_host = host
                self._host_error = HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down")
                await host.shutdown(fast=self._fast_stop)

    # -- output -----------------------------------------------------------------

    def _encode_response(self, message: dict[str, Any]) -> bytes:
        try:
            return within_line_bound(encode(message), message.get("id"))
        except TypeError as exc:
            log.error("unserialisable result replaced by an error: %r", exc)
            error = HostError(ErrorKind.INTERNAL_ERROR, f"unserialisable result: {exc}")
            return encode(error_response(message.get("id"), error))

    def _encode_notification(self, method: str, params: dict[str, Any]) -> bytes | None:
        try:
            data = encode({"jsonrpc": "2.0", "method": method, "params": params})
        except TypeError as exc:
            log.error("unserialisable %s notification dropped: %r", method, exc)
            return None
        if len(data) > PARENT_FRAME_LIMIT:  # the line bound, as within_line_bound holds answers to it
            log.error("a %d-byte %s notification is over the parent's line bound: dropped", len(data), method)
            return None
        return data

    def _respond(self, message: dict[str, Any]) -> None:
        """Queue the response of a request task (never dropped, never waits)."""
        self._outbox.put_reply(self._encode_response(message))

    def _reply(self, message: dict[str, Any]) -> None:
        """Queue a reply the stdin reader makes itself (counted against the reader's share)."""
        self._outbox.put_reply(self._encode_response(message), from_reader=True)

    def _reply_error(self, rid: RequestId | None, error: HostError) -> None:
        self._reply(error_response(rid, error))

    async def _flush_outbox(self) -> None:
        """Let the writer write what is queued (at most 5 s), then stop it."""
        self._draining = True
        self._outbox.wake()
        with trio.move_on_after(5, shield=True):
            await self._writer_done.wait()


def _notify_systemd(message: bytes) -> None:
    """Send ``message`` (``READY=1``) to ``$NOTIFY_SOCKET`` when a service manager set it."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    target = "\0" + address[1:] if address.startswith("@") else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message, target)
    except OSError as exc:
        log.warning("could not notify %s: %s", address, exc)


async def serve_stdio(
    host_factory: HostFactory,
    *,
    state_dir: str | None = None,
    state_store: StateStore | None = None,
    max_frame_bytes: int = PARENT_FRAME_LIMIT,
    max_outbox_bytes: int = OUTBOX_BYTES,
) -> int:
    """Serve the control protocol on this process's fds 0 and 1; return the exit code.

    ``max_outbox_bytes``: the :class:`Outbox` budget (at least 1024; ``ValueError`` otherwise).

    Protocol bytes go to fd 1 directly (frozen builds ignore
    ``PYTHONUNBUFFERED``); ``sys.stdout`` is pointed at stderr so that a stray
    ``print`` can never corrupt the channel.
    """
    stdin_fd = os.dup(0)
    stdout_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    receive = trio.lowlevel.FdStream(stdin_fd)
    send = trio.lowlevel.FdStream(stdout_fd)
    server = ControlServer(
        receive,
        send,
        host_factory,
        state_dir=state_dir,
        state_store=state_store,
        max_frame_bytes=max_frame_bytes,
        max_outbox_bytes=max_outbox_bytes,
    )
    code = await server.serve()
    return code


__all__ = ["ControlServer", "HostApi", "HostFactory", "serve_stdio"]
