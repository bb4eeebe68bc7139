"""The control channel: JSON-RPC 2.0 between the parent application and hostd.

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
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import trio

from hostd import __version__
from hostd.storage.state import StateError, StateStore, default_state_dir
from hostd.wire import pipes
from hostd.wire.content import ContentLimits
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.framing import (
    PARENT_FRAME_LIMIT,
    FrameTooLarge,
    InvalidJSON,
    LineDecoder,
    Message,
    describe_head,
    encode,
)
from hostd.wire.jsonlimits import MAX_JSON_DEPTH, check_json

log = logging.getLogger("hostd.control.server")

#: The control protocol version hostd speaks (``docs/protocol.md``).
PROTOCOL_VERSION = "0"
#: Exit codes (sysexits, ``docs/protocol.md`` "Process contract").
EXIT_OK, EXIT_NO_SHUTDOWN, EXIT_USAGE, EXIT_SOFTWARE, EXIT_TEMPFAIL, EXIT_CONFIG = 0, 1, 2, 70, 75, 78

_READ_BYTES = 65536
_WRITE_BATCH_BYTES = 256 * 1024

RequestId = int | str
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
#: ``(method, params, timeout seconds) -> result``; see :meth:`ControlServer.request_parent`.
ParentRequest = Callable[[str, dict[str, Any], float], Awaitable[Any]]

# -- the outgoing side: one writer, a byte budget ------------------------------------
#
# The class of bug this guards against: *anything that reaches the parent is
# produced faster than the parent reads it*. A plugin's progress, its logs, its
# answers, hostd's own replies to a parent that writes without reading: each is
# a producer, the parent's reading is the one consumer. Every producer gets a
# bounded policy (docs/protocol.md "Flow control"), and no producer's policy may
# make the stdin reader wait, so $/cancelRequest, exit and shutdown always get
# through:
#
# - responses from request tasks, and state notifications: always admitted,
#   never dropped. Their number is bounded by the in-flight limit (responses)
#   and by coalescing (a state notification waiting in the queue while the
#   queue is over budget is replaced by a newer one with the same key). When
#   the queue is over budget the *sources* wait: every plugin link stops
#   reading its plugin's stdout (:meth:`Outbox.wait_room`), so the plugin
#   blocks on its own full pipe instead of hostd's memory growing;
# - $/progress: one slot per request, latest value wins, at most
#   ``PROGRESS_RATE`` a second per request (bursts of ``PROGRESS_BURST``), the
#   message cut to ``PROGRESS_MESSAGE_BYTES``; what the slot holds when the
#   response is admitted is written just before the response;
# - plugins/log: admitted while the log share (``budget // 16``) has room, else
#   dropped and counted per plugin; the count is reported as one plugins/log
#   warning once there is room again;
# - replies the stdin reader makes itself (ping, protocol errors,
#   HOST_OVERLOADED): admitted, but while more than ``budget // 16`` bytes of
#   them are unread the reader stops reading stdin. Only a parent that keeps
#   writing requests without reading a byte of their answers gets there; it
#   then blocks on its own full pipe (ordinary stdio flow control) and resumes
#   when it reads. The alternative, dropping answers, would break the one
#   promise a request has (exactly one response).

#: Default byte budget of everything waiting to be written to the parent.
OUTBOX_BYTES = 16 * 1024 * 1024
#: $/progress notifications written per request and second (token bucket), and the burst.
PROGRESS_RATE = 10.0
PROGRESS_BURST = 10.0
#: Bound of a $/progress ``message``, in UTF-8 bytes (longer ones are cut and end with "…").
PROGRESS_MESSAGE_BYTES = 1024
#: Requests (other than ping, initialize, shutdown) in flight at once, and their frames' total bytes.
MAX_INFLIGHT_REQUESTS = 256
MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
#: hostd->parent requests (sampling, elicitation, roots) waiting for an answer at once.
MAX_PARENT_REQUESTS = 64
#: Bound of one answer from the parent to a hostd->parent request (its frame), in bytes.
PARENT_ANSWER_BYTES = 8 * 1024 * 1024

_REPLY, _READER, _STATE, _PROGRESS, _LOG = range(5)
#: Request workers left parked for the next requests; a worker that finds this many parked ends.
_IDLE_WORKERS = 16


@dataclass(eq=False, slots=True)
class _Entry:
    data: bytes
    kind: int
    key: Any = None


@dataclass(eq=False, slots=True)
class _Slot:
    tokens: float
    stamp: float
    queued: _Entry | None = None  # in the queue, not taken yet: a newer value replaces its data
    held: bytes | None = None  # over the rate: waits for a token


class Outbox:
    """What waits to be written to the parent, bounded in bytes (one writer takes from it).

    ``budget`` bounds the bytes waiting (queued, being written, held); logs
    may use ``budget // 16`` of it, the reader's own replies ``budget // 16``
    before the reader pauses. Nothing here awaits except :meth:`wait_room`,
    :meth:`wait_reader_room` and :meth:`wait_work`; every ``put_*`` returns at
    once. Times are ``trio.current_time()`` seconds.

    ``write_now(data) -> bytes written`` (:func:`hostd.wire.pipes.write_now` on the
    parent's stdout) enables the inline path: a message put while the queue
    is empty and the writer holds no batch is written at once by the task
    that puts it; what the pipe does not take waits in the queue, first.
    """

    def __init__(
        self,
        budget: int = OUTBOX_BYTES,
        *,
        progress_rate: float = PROGRESS_RATE,
        progress_burst: float = PROGRESS_BURST,
        write_now: Callable[[bytes], int | None] | None = None,
    ) -> None:
        if budget < 1024:
            raise ValueError("the outbox budget must be at least 1024 bytes")
        self.budget = budget
        self.log_budget = budget // 16
        self.reader_budget = budget // 16
        self._rate, self._burst = progress_rate, progress_burst
        self._queue: collections.deque[_Entry] = collections.deque()
        #: Bytes waiting: queued, taken by the writer and not yet written, held progress.
        self.bytes = 0
        self.log_bytes = 0
        self.reader_bytes = 0
        #: plugins/log notifications dropped since the last report, by plugin id (None: hostd's own).
        self.dropped_logs: dict[str | None, int] = {}
        self.dropped_logs_total = 0
        self._slots: dict[RequestId, _Slot] = {}
        self._held: dict[RequestId, _Slot] = {}
        self._state_keys: dict[Any, _Entry] = {}
        self._work = trio.Event()
        self._room = trio.Event()
        self._room.set()
        self._reader_room = trio.Event()
        self._reader_room.set()
        self.closed = False
        #: The inline path (:func:`hostd.wire.pipes.write_now` on stdout), None without one.
        self._write_now = write_now
        #: True from the writer's take() to its written(): its batch is not out yet.
        self._writing = False

    def close(self) -> None:
        """The parent is gone: drop what waits and everything put from now on; release every waiter."""
        self.closed = True
        self._queue.clear()
        self._slots.clear()
        self._held.clear()
        self._state_keys.clear()
        self.bytes = self.log_bytes = self.reader_bytes = 0
        self._changed()
        self._room.set()
        self._work.set()

    # -- producers ------------------------------------------------------------------

    @property
    def over_budget(self) -> bool:
        """True while more than ``budget`` bytes wait: sources should stop producing."""
        return self.bytes > self.budget

    def put_reply(self, data: bytes, *, from_reader: bool = False) -> None:
        """Admit a response (never dropped). ``from_reader``: the stdin reader made it itself."""
        self._append(_Entry(data, _READER if from_reader else _REPLY))

    def put_state(self, key: Any, data: bytes) -> None:
        """Admit a state notification; over budget, a queued one with the same ``key`` is replaced."""
        if self.closed:
            return
        entry = self._state_keys.get(key)
        if entry is not None and self.over_budget:
            self._resize(entry, data)
            return
        entry = _Entry(data, _STATE, key)
        if self._append(entry):
            self._state_keys[key] = entry

    def put_log(self, plugin: str | None, data: bytes, *, force: bool = False) -> bool:
        """Admit a plugins/log notification if the log share has room; else count it dropped.

        ``force`` admits it anyway (the report of a drop count). Returns whether it was admitted.
        """
        if not force and (self.log_bytes + len(data) > self.log_budget or self.bytes + len(data) > self.budget):
            self.dropped_logs[plugin] = self.dropped_logs.get(plugin, 0) + 1
            self.dropped_logs_total += 1
            return False
        self._append(_Entry(data, _LOG, plugin))
        return True

    def put_progress(self, rid: RequestId, data: bytes, now: float) -> None:
        """Set request ``rid``'s progress (latest value wins; written at most at the rate)."""
        if self.closed:
            return
        slot = self._slots.get(rid)
        if slot is None:
            slot = self._slots[rid] = _Slot(tokens=self._burst, stamp=now)
        if slot.queued is not None:
            self._resize(slot.queued, data)
            return
        self._refill(slot, now)
        if slot.tokens >= 1 and slot.held is None:
            slot.tokens -= 1
            entry = _Entry(data, _PROGRESS, rid)
            if self._append(entry):
                slot.queued = entry
            return
        self.bytes += len(data) - (len(slot.held) if slot.held is not None else 0)
        slot.held = data
        self._held[rid] = slot
        self._changed()
        self._work.set()  # the writer re-arms its timer

    def end_progress(self, rid: RequestId) -> None:
        """Request ``rid`` is about to be answered: queue its held progress now, forget the slot."""
        slot = self._slots.pop(rid, None)
        if slot is None:
            return
        self._held.pop(rid, None)
        if slot.held is not None:
            data, slot.held = slot.held, None
            self.bytes -= len(data)
            self._append(_Entry(data, _PROGRESS, None))

    def take_drop_counts(self) -> dict[str | None, int]:
        """The plugins/log drop counts to report now (once the log share is half free), reset."""
        if not self.dropped_logs or self.log_bytes > self.log_budget // 2:
            return {}
        counts, self.dropped_logs = self.dropped_logs, {}
        return counts

    # -- the writer -----------------------------------------------------------------

    def wake(self) -> None:
        """Wake the writer (to notice that it should stop)."""
        self._work.set()

    def take(self, max_bytes: int, now: float) -> list[_Entry]:
        """Remove and return the next entries (at least one if any, about ``max_bytes``)."""
        self._release_due(now)
        taken: list[_Entry] = []
        size = 0
        queue = self._queue
        self._writing = True  # until written(): no inline write may pass the writer's batch
        while queue and (not taken or size + len(queue[0].data) <= max_bytes):
            entry = queue.popleft()
            if entry.kind == _PROGRESS:
                slot = self._slots.get(entry.key)
                if slot is not None and slot.queued is entry:
                    slot.queued = None
            elif entry.kind == _STATE and self._state_keys.get(entry.key) is entry:
                del self._state_keys[entry.key]
            taken.append(entry)
            size += len(entry.data)
        if not taken:
            self._writing = False
            self._work = trio.Event()
        return taken

    def written(self, entries: list[_Entry]) -> None:
        """The writer wrote (or gave up on) ``entries``: their bytes no longer count."""
        self._writing = False
        if self.closed:
            return
        for entry in entries:
            size = len(entry.data)
            self.bytes -= size
            if entry.kind == _LOG:
                self.log_bytes -= size
            elif entry.kind == _READER:
                self.reader_bytes -= size
        self._changed()

    def next_due(self) -> float | None:
        """When the first held progress gets a token (``None``: nothing held)."""
        if not self._held:
            return None
        return min(slot.stamp + (1 - slot.tokens) / self._rate for slot in self._held.values())

    async def wait_work(self, deadline: float) -> None:
        """Wait until something is put (or ``deadline``, for held progress)."""
        with trio.move_on_at(deadline):
            await self._work.wait()

    # -- back-pressure ----------------------------------------------------------------

    async def wait_room(self) -> None:
        """Wait while the outbox is over budget (plugin links call this before reading stdout).

        Once over budget, it waits until the bytes are down to three quarters
        of it, so that a parent reading slowly pauses a plugin in episodes,
        not at every read.
        """
        while self.bytes > self.budget or not self._room.is_set():
            await self._room.wait()

    async def wait_reader_room(self) -> None:
        """Wait while more than ``budget // 16`` bytes of the reader's own replies are unread."""
        while self.reader_bytes > self.reader_budget:
            await self._reader_room.wait()

    # -- internals ----------------------------------------------------------------------

    def _append(self, entry: _Entry) -> bool:
        """Admit ``entry``: written at once if the writer is idle and nothing waits, else queued.

        Returns True when ``entry`` itself waits in the queue (a caller may then
        coalesce into it); False when it was written whole, or only its rest
        waits (a new entry that is never coalesced: its first bytes are out).
        """
        if self.closed:
            return False
        if self._write_now is not None and not self._queue and not self._writing:
            sent = self._write_inline(entry.data)
            if sent == len(entry.data):
                return False
            if sent:
                self._enqueue(_Entry(entry.data[sent:], entry.kind))
                return False
        self._enqueue(entry)
        return True

    def _write_inline(self, data: bytes) -> int:
        """The inline path's write: what the pipe took (0 when full, or when it failed: the
        writer then meets the same failure and ends the channel)."""
        assert self._write_now is not None
        try:
            return self._write_now(data) or 0
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._write_now = None  # from now on everything goes through the writer, which sees the error
            return 0

    def _enqueue(self, entry: _Entry) -> None:
        size = len(entry.data)
        self.bytes += size
        if entry.kind == _LOG:
            self.log_bytes += size
        elif entry.kind == _READER:
            self.reader_bytes += size
        self._queue.append(entry)
        self._changed()
        self._work.set()

    def _resize(self, entry: _Entry, data: bytes) -> None:
        self.bytes += len(data) - len(entry.data)
        entry.data = data
        self._changed()

    def _refill(self, slot: _Slot, now: float) -> None:
        slot.tokens = min(self._burst, slot.tokens + (now - slot.stamp) * self._rate)
        slot.stamp = now

    def _release_due(self, now: float) -> None:
        for rid, slot in list(self._held.items()):
            self._refill(slot, now)
            if slot.tokens >= 1 and slot.held is not None:
                slot.tokens -= 1
                data, slot.held = slot.held, None
                self.bytes -= len(data)
                del self._held[rid]
                entry = _Entry(data, _PROGRESS, rid)
                if self._append(entry):
                    slot.queued = entry

    def _changed(self) -> None:
        if self.bytes > self.budget:
            if self._room.is_set():
                self._room = trio.Event()
        elif not self._room.is_set() and self.bytes <= self.budget - self.budget // 4:
            self._room.set()
        if self.reader_bytes > self.reader_budget:
            if self._reader_room.is_set():
                self._reader_room = trio.Event()
        elif not self._reader_room.is_set():
            self._reader_room.set()


_current_outbox: ContextVar[Outbox | None] = ContextVar("hostd_outbox", default=None)


def current_outbox() -> Outbox | None:
    """The outbox of the control channel this task runs under (``None`` outside one).

    Plugin links use it to stop reading a plugin's stdout while the parent is
    behind (:meth:`Outbox.wait_room`).
    """
    return _current_outbox.get()


def cut_utf8(text: str, limit: int) -> str:
    """``text`` if its UTF-8 form fits ``limit`` bytes, else its longest prefix that fits with "…" added."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", errors="ignore") + "…"


@dataclass
class InitializeOptions:
    """What the parent said in ``initialize`` (``docs/protocol.md``)."""

    client_name: str
    client_version: str
    protocol_version: str
    known_permissions: list[str] | None
    state_dir: str | None
    #: The locked state store for ``state_dir`` (set by the control channel).
    state_store: StateStore | None = None
    #: ``contentLimits``: aggregate bounds on each tool result's images, audio and blobs.
    content_limits: ContentLimits = field(default_factory=ContentLimits)
    #: ``capabilities``: the client features the parent answers (:func:`parse_client_capabilities`).
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    #: Sends a hostd->parent request (set by the control channel; see :meth:`ControlServer.request_parent`).
    request_parent: ParentRequest | None = None


@dataclass
class RequestContext:
    """One parent request in flight: its id and a way to notify the parent."""

    id: RequestId
    method: str
    notify: Notify


class HostApi(Protocol):
    """What the control channel needs from the host behind it."""

    async def handle(self, method: str, params: Any, ctx: RequestContext) -> Any:
        """Serve one request; raise :class:`HostError` to answer with an error.

        Raises ``KeyError`` when ``method`` is not one the host serves.
        """
        ...

    async def shutdown(self, *, fast: bool) -> None:
        """Stop every plugin (whole trees) and persist state; ``fast`` skips graces."""
        ...


HostFactory = Callable[[InitializeOptions, Notify, trio.Nursery], Awaitable[HostApi]]


@dataclass
class _ParentCall:
    done: trio.Event = field(default_factory=trio.Event)
    reply: dict[str, Any] | None = None


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


def _valid_id(value: Any) -> TypeGuard[RequestId]:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


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
        self._host_ready = trio.Event()
        self._host_error: HostError | None = None
        self._stop = trio.Event()
        self._fast_stop = False
        self._stopping_host: HostApi | None = None
        #: Requests handed to a parked worker and not yet taken (see _run_soon), and the parked workers.
        self._jobs: collections.deque[_Job] = collections.deque()
        self._idle = trio.lowlevel.ParkingLot()
        #: hostd->parent requests waiting for their answer, by hostd's own id ("hostd-<n>").
        self._parent_pending: dict[str, _ParentCall] = {}
        self._parent_ids = itertools.count(1)

    # -- public -----------------------------------------------------------------

    async def serve(self) -> int:
        """Run until stdin EOF, ``exit``, a signal or a broken stdout; return the exit code."""
        _current_outbox.set(self._outbox)  # inherited by every task started below (plugin links)
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
            if not _valid_id(rid) or rid not in self._state.inflight:
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
            # One key per method and plugin (statusChanged carries plugin_id, others plugin), and per
            # resource for resources/updated: coalescing must never merge two things that changed.
            outbox.put_state((method, params.get("plugin_id", params.get("plugin")), params.get("uri")), data)

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
        exceeded = check_json(message, max_depth=MAX_JSON_DEPTH + 2)  # the envelope and "result" add two
        if size > PARENT_ANSWER_BYTES:
            message = {"error": {"code": -32600, "message": f"the answer of {size} bytes is over the bound"}}
        elif exceeded is not None:
            message = {"error": {"code": -32600, "message": f"the answer is {exceeded.message}"}}
        call.reply = message
        call.done.set()

    # -- tasks ------------------------------------------------------------------

    async def _reader(self) -> None:
        # Every step below returns at once: the only waits are for stdin and for
        # the parent to read the reader's own replies (Outbox, "reader replies").
        outbox = self._outbox
        while True:
            if outbox.reader_bytes > outbox.reader_budget:
                log.info("stdin paused: %d bytes of replies wait for the parent to read them", outbox.reader_bytes)
                await outbox.wait_reader_room()
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
                    self._reply_error(
                        None,
                        HostError(
                            ErrorKind.FRAME_TOO_LARGE,
                            f"message exceeds the {event.limit}-byte bound; discarded up to the next newline",
                            limit=event.limit,
                            head=describe_head(event.head),
                        ),
                    )
                elif isinstance(event, InvalidJSON):
                    self._reply_error(
                        None,
                        HostError(
                            ErrorKind.PARSE_ERROR,
                            f"not UTF-8 JSON: {event.reason}",
                            head=describe_head(event.head),
                        ),
                    )
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
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            rid = message.get("id") if isinstance(message, dict) else None
            self._reply_error(
                rid if _valid_id(rid) else None,
                HostError(
                    ErrorKind.INVALID_REQUEST, 'not a JSON-RPC 2.0 message (expected an object with "jsonrpc": "2.0")'
                ),
            )
            return
        method = message.get("method")
        has_id = "id" in message
        rid = message.get("id")
        if not isinstance(method, str):
            if has_id and "method" not in message and ("result" in message or "error" in message):
                self._parent_answer(message, size)
                return
            self._reply_error(
                rid if _valid_id(rid) else None, HostError(ErrorKind.INVALID_REQUEST, '"method" must be a string')
            )
            return
        params = message.get("params", {})
        if params is None:
            params = {}
        if not has_id:
            self._notification(method, params)
            return
        if not _valid_id(rid):
            self._reply_error(None, HostError(ErrorKind.INVALID_REQUEST, '"id" must be an integer or a string'))
            return
        if not isinstance(params, dict | list):
            self._reply_error(rid, HostError(ErrorKind.INVALID_REQUEST, '"params" must be an object or an array'))
            return
        # The control request's boundary (issue 31, class 2): the frame parser accepts 1024 levels; every
        # handler, pydantic and error rendering may recurse, so params are held to the one depth bound first.
        # tools/call's arguments are the tool's document: held to the same bound by the call path, with
        # its own error (INVALID_ARGUMENTS and the pointer into the arguments), before anything reads them.
        checked = params
        if method == "tools/call" and isinstance(params, dict):
            checked = {key: value for key, value in params.items() if key != "arguments"}
        exceeded = check_json(checked)
        if exceeded is not None:
            field = ".".join(part.replace("~1", "/").replace("~0", "~") for part in exceeded.pointer.split("/")[1:])
            self._reply_error(
                rid,
                HostError(
                    ErrorKind.INVALID_PARAMS,
                    f"invalid params: {exceeded.message}",
                    pointer=exceeded.pointer,
                    errors=[{"field": field or "params", "message": exceeded.message}],
                ),
            )
            return
        self._request(rid, method, params, size)

    def _notification(self, method: str, params: Any) -> None:
        if method == "exit":
            self._state.exit_code = EXIT_OK if self._state.shutdown_requested else EXIT_NO_SHUTDOWN
            self._stop.set()
        elif method == "$/cancelRequest":
            rid = params.get("id") if isinstance(params, dict) else None
            entry = self._state.inflight.get(rid) if _valid_id(rid) else None
            if entry is not None:
                entry.cancelled_by_parent = True
                entry.scope.cancel()
            else:
                log.debug("$/cancelRequest for %r: no such request in flight", rid)
        elif method != "initialized":
            log.debug("ignoring notification %s", method)

    def _request(self, rid: RequestId, method: str, params: Any, size: int) -> None:
        state = self._state
        if method == "initialize":
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
        if method == "ping":
            self._reply({"jsonrpc": "2.0", "id": rid, "result": {}})
            return
        if method == "shutdown":
            state.shutdown_requested = True
            self._requests.start_soon(self._shutdown_request, rid)
            return
        if state.inflight and (
            len(state.inflight) >= self._max_inflight or state.inflight_bytes + size > self._max_inflight_bytes
        ):
            self._reply_error(
                rid,
                HostError(
                    ErrorKind.HOST_OVERLOADED,
                    f"{len(state.inflight)} requests ({state.inflight_bytes} bytes) are in flight; "
                    f"the bound is {self._max_inflight} requests and {self._max_inflight_bytes} bytes: "
                    "retry once some are answered",
                    inFlight=len(state.inflight),
                    inFlightBytes=state.inflight_bytes,
                    maxInFlight=self._max_inflight,
                    maxInFlightBytes=self._max_inflight_bytes,
                ),
            )
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
            options = _parse_initialize(params, self._default_state_dir)
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
                "result": {
                    "serverInfo": {"name": "hostd", "version": __version__},
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {
                        "plugins": {"install": True, "trustGate": True},
                        "tools": {"listChanged": True, "progress": True},
                        "cancelRequest": True,
                    },
                    "contentLimits": options.content_limits.to_wire(),
                },
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
            self._host = await self._host_factory(options, self.notify, self._plugins_nursery)
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
                    if method == "rpc.discover":
                        result: Any = openrpc.discover()
                    else:
                        ctx = RequestContext(id=rid, method=method, notify=self.notify)
                        result = await self._host.handle(method, params, ctx)
                response = {"jsonrpc": "2.0", "id": rid, "result": result}
        except HostError as error:
            response = _error_response(rid, error)
        except KeyError as exc:
            if exc.args != (method,):
                log.error("request %r (%s) failed:\n%s", rid, method, traceback.format_exc())
                response = _error_response(rid, HostError(ErrorKind.INTERNAL_ERROR, f"internal error: {exc!r}"))
            else:
                response = _error_response(rid, HostError(ErrorKind.METHOD_NOT_FOUND, f"no method {method!r}"))
        except Exception as exc:
            log.error("request %r (%s) failed:\n%s", rid, method, traceback.format_exc())
            response = _error_response(rid, HostError(ErrorKind.INTERNAL_ERROR, f"internal error: {exc!r}"))
        finally:
            if self._state.inflight.pop(rid, None) is not None:
                self._state.inflight_bytes -= entry.size
            if response is None:
                ended = (
                    HostError(ErrorKind.REQUEST_CANCELLED, "cancelled by $/cancelRequest")
                    if entry.cancelled_by_parent
                    else HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down")
                )
                response = _error_response(rid, ended)
            self._outbox.end_progress(rid)
            self._respond(response)

    async def _shutdown_request(self, rid: RequestId) -> None:
        await self._shutdown_host()
        self._respond({"jsonrpc": "2.0", "id": rid, "result": None})

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
            return encode(message)
        except TypeError as exc:
            log.error("unserialisable result replaced by an error: %r", exc)
            error = HostError(ErrorKind.INTERNAL_ERROR, f"unserialisable result: {exc}")
            return encode(_error_response(message.get("id"), error))

    def _encode_notification(self, method: str, params: dict[str, Any]) -> bytes | None:
        try:
            return encode({"jsonrpc": "2.0", "method": method, "params": params})
        except TypeError as exc:
            log.error("unserialisable %s notification dropped: %r", method, exc)
            return None

    def _respond(self, message: dict[str, Any]) -> None:
        """Queue the response of a request task (never dropped, never waits)."""
        self._outbox.put_reply(self._encode_response(message))

    def _reply(self, message: dict[str, Any]) -> None:
        """Queue a reply the stdin reader makes itself (counted against the reader's share)."""
        self._outbox.put_reply(self._encode_response(message), from_reader=True)

    def _reply_error(self, rid: RequestId | None, error: HostError) -> None:
        self._reply(_error_response(rid, error))

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


def _error_response(rid: RequestId | None, error: HostError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": error.to_error_object()}


def _parse_initialize(params: Any, default_state_dir: str | None) -> InitializeOptions:
    """Check ``initialize`` params by hand (pydantic is not loaded yet)."""

    def bad(message: str, field_name: str) -> HostError:
        return HostError(ErrorKind.INVALID_PARAMS, message, field=field_name)

    if not isinstance(params, dict):
        raise bad("initialize params must be an object", "params")
    client = params.get("clientInfo", {})
    if not isinstance(client, dict):
        raise bad("clientInfo must be an object", "clientInfo")
    name = client.get("name", "unknown")
    version = client.get("version", "")
    if not isinstance(name, str) or not isinstance(version, str):
        raise bad("clientInfo.name and clientInfo.version must be strings", "clientInfo")
    protocol = params.get("protocolVersion", PROTOCOL_VERSION)
    if not isinstance(protocol, str):
        raise bad("protocolVersion must be a string", "protocolVersion")
    known = params.get("knownPermissions")
    if known is not None and (not isinstance(known, list) or not all(isinstance(p, str) for p in known)):
        raise bad("knownPermissions must be an array of strings", "knownPermissions")
    state_dir = params.get("stateDir", default_state_dir)
    if state_dir is not None:
        if not isinstance(state_dir, str) or not state_dir:
            raise bad("stateDir must be a non-empty string", "stateDir")
        if os.path.exists(state_dir) and not os.path.isdir(state_dir):
            raise bad(f"stateDir {state_dir!r} exists and is not a folder", "stateDir")
    try:
        content_limits = ContentLimits.from_wire(params.get("contentLimits"))
    except (ValueError, TypeError, AttributeError) as exc:
        raise bad(f"contentLimits: {exc}", "contentLimits") from None
    try:
        client_capabilities = parse_client_capabilities(params.get("capabilities"))
    except ValueError as exc:
        raise bad(f"capabilities: {exc}", "capabilities") from None
    return InitializeOptions(
        client_name=name,
        client_version=version,
        protocol_version=protocol,
        known_permissions=known,
        state_dir=state_dir,
        content_limits=content_limits,
        client_capabilities=client_capabilities,
    )


#: The client features a parent may serve, and the members each may have (``initialize.params.capabilities``).
CLIENT_FEATURES: dict[str, tuple[str, ...]] = {"sampling": ("tools",), "elicitation": ("form", "url"), "roots": ()}


def parse_client_capabilities(value: Any) -> dict[str, Any]:
    """The parent's ``capabilities`` cut to what hostd knows: ``{sampling?: {tools?: {}}, elicitation?: {form?:
    {}, url?: {}}, roots?: {}}``; unknown keys are ignored. ``elicitation: {}`` means form only (MCP's rule).
    Raises ``ValueError`` when a known member is not an object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("must be an object")
    out: dict[str, Any] = {}
    for feature, members in CLIENT_FEATURES.items():
        given = value.get(feature)
        if given is None:
            continue
        if not isinstance(given, dict):
            raise ValueError(f"{feature} must be an object")
        kept: dict[str, Any] = {}
        for member in members:
            if given.get(member) is not None:
                if not isinstance(given[member], dict):
                    raise ValueError(f"{feature}.{member} must be an object")
                kept[member] = {}
        if feature == "elicitation" and not kept:
            kept = {"form": {}}
        out[feature] = kept
    return out


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


__all__ = [
    "EXIT_CONFIG",
    "EXIT_NO_SHUTDOWN",
    "EXIT_OK",
    "EXIT_SOFTWARE",
    "EXIT_TEMPFAIL",
    "EXIT_USAGE",
    "MAX_INFLIGHT_BYTES",
    "MAX_INFLIGHT_REQUESTS",
    "OUTBOX_BYTES",
    "PROGRESS_BURST",
    "PROGRESS_MESSAGE_BYTES",
    "PROGRESS_RATE",
    "PROTOCOL_VERSION",
    "ControlServer",
    "HostApi",
    "InitializeOptions",
    "Outbox",
    "RequestContext",
    "current_outbox",
    "cut_utf8",
    "serve_stdio",
]
