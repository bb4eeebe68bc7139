"""The outbox: everything waiting to be written to the parent, bounded in bytes, with a policy per kind of message.

The control server's writer task (:class:`hostd.control.server.ControlServer`) is its one consumer; request
tasks, plugin links and the stdin reader put into it and never wait (``docs/protocol.md`` "Flow control").
:func:`current_outbox` lets a plugin link stop reading its plugin while the parent is behind. The rules are
below, at the top of the code.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import trio

from hostd.control.core import RequestId

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
#   them are unread the reader parks the requests it reads (in order, run as
#   the parent reads) and keeps reading: notifications ($/cancelRequest, exit)
#   are acted on at once. Only past ``budget`` bytes of parked requests does
#   it stop reading stdin: a parent that keeps writing requests without
#   reading a byte of their answers then blocks on its own full pipe
#   (ordinary stdio flow control) and resumes when it reads. The
#   alternative, dropping answers, would break the one promise a request has
#   (exactly one response).

#: Default byte budget of everything waiting to be written to the parent.
OUTBOX_BYTES = 16 * 1024 * 1024
#: $/progress notifications written per request and second (token bucket), and the burst.
PROGRESS_RATE = 10.0
PROGRESS_BURST = 10.0
#: Bound of a $/progress ``message``, in UTF-8 bytes (longer ones are cut and end with "…").
PROGRESS_MESSAGE_BYTES = 1024

_REPLY, _READER, _STATE, _PROGRESS, _LOG = range(5)


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


class Parking:
    """What the stdin reader read while its own replies were over their share, run in order as the parent reads.

    The reader never waits behind replies (hostd/control/server.py, module header): past
    ``outbox.reader_budget`` bytes of unread reader replies, each request or refusal it reads is
    parked here (``size``: its frame's bytes) and :meth:`release` runs it once the replies are
    within their share again; notifications are not parked. :attr:`full` (more than the outbox
    budget of frames parked) is the one case where the reader stops reading stdin (:meth:`wait_room`).
    """

    def __init__(self, outbox: Outbox, cancelled: Callable[[RequestId], None]) -> None:
        self._outbox = outbox
        self._cancelled = cancelled
        self._queue: collections.deque[tuple[int, RequestId | None, Callable[[], None]]] = collections.deque()
        self.bytes = 0
        self._cancels: set[RequestId] = set()
        self._work = trio.Event()
        self._room = trio.Event()
        self._room.set()

    @property
    def idle(self) -> bool:
        """Nothing parked and the reader's replies within their share: act at once (the fast path)."""
        return not self._queue and self._outbox.reader_bytes <= self._outbox.reader_budget

    @property
    def full(self) -> bool:
        """More than the outbox budget of frames parked: the reader stops reading stdin."""
        return self.bytes > self._outbox.budget

    def run_or_park(self, size: int, rid: RequestId | None, action: Callable[[], None]) -> None:
        """Run ``action`` now when :attr:`idle`, else park it after what is parked (order kept)."""
        if self.idle:
            action()
            return
        self._queue.append((size, rid, action))
        self.bytes += size
        if self.full and self._room.is_set():
            self._room = trio.Event()
        self._work.set()

    def cancel(self, rid: RequestId) -> bool:
        """``$/cancelRequest`` for a parked request: it is answered through ``cancelled`` at its turn, never run.

        False when no parked request has that id."""
        if any(parked == rid for _size, parked, _action in self._queue):
            self._cancels.add(rid)
            return True
        return False

    async def wait_room(self) -> None:
        """Wait while :attr:`full`."""
        while self.full:
            await self._room.wait()

    async def release(self) -> None:
        """Run the parked actions in order, each once the reader's replies are within their share (forever)."""
        while True:
            await self._work.wait()
            self._work = trio.Event()
            while self._queue:
                await self._outbox.wait_reader_room()
                size, rid, action = self._queue.popleft()
                self.bytes -= size
                if rid is not None and rid in self._cancels:
                    self._cancels.discard(rid)
                    self._cancelled(rid)
                else:
                    action()
                if not self.full:
                    self._room.set()


_current_outbox: ContextVar[Outbox | None] = ContextVar("hostd_outbox", default=None)


def current_outbox() -> Outbox | None:
    """The outbox of the control channel this task runs under (``None`` outside one).

    Plugin links use it to stop reading a plugin's stdout while the parent is
    behind (:meth:`Outbox.wait_room`).
    """
    return _current_outbox.get()


def set_current_outbox(outbox: Outbox) -> None:
    """Make ``outbox`` the one :func:`current_outbox` returns in this task and every task it starts after."""
    _current_outbox.set(outbox)


__all__ = [
    "OUTBOX_BYTES",
    "PROGRESS_BURST",
    "PROGRESS_MESSAGE_BYTES",
    "PROGRESS_RATE",
    "Outbox",
    "Parking",
    "current_outbox",
    "set_current_outbox",
]
