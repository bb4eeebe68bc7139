"""Bounded newline-delimited JSON framing, with no I/O in it.

Both of hostd's channels use the same wire: UTF-8 JSON, one message per line,
``\\n`` terminated, a trailing ``\\r`` tolerated (the MCP stdio transport, and
hostd's control protocol; ``docs/protocol.md`` "Framing").

Theory of operation
-------------------

:class:`LineDecoder` is fed whatever bytes a read returned and hands back
events: :class:`Message` (one parsed JSON value), :class:`FrameTooLarge` or
:class:`InvalidJSON`. Two rules hold whatever the chunking:

1. **Bounded.** The decoder never holds more than ``max_frame_bytes`` of an
   unfinished line. The moment an unfinished line passes the bound it reports
   :class:`FrameTooLarge`, drops what it held and discards everything up to
   the next newline, then resumes. Memory stays at the bound plus one read.
2. **Linear.** Only the newly fed bytes are searched for a newline; the
   buffer is never rescanned. A line that arrives one byte at a time costs
   O(n), not O(n²): a slow writer cannot turn the reader into a CPU sink.

The verdict for a line depends only on its bytes: a line is over-long when
the bytes before its ``\\n`` (a ``\\r`` counted) exceed the bound, whether the
decoder noticed before or after the newline arrived. Lines are split on the
byte ``\\n`` only and decoded only when complete, so a multi-byte UTF-8
character split across reads arrives intact (``str.splitlines`` would also
split on U+2028, which JSON encoders write unescaped inside strings).
Blank lines are skipped; a leading UTF-8 byte-order mark is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

#: Default bound of one plugin message (docs/protocol.md "Framing"), in bytes.
PLUGIN_FRAME_LIMIT = 16 * 1024 * 1024
#: The default bound of one tool result forwarded to the parent (``hostd serve --max-result-bytes``).
RESULT_LIMIT = 4 * 1024 * 1024
#: Default bound of one parent message (docs/protocol.md "Framing"), in bytes.
PARENT_FRAME_LIMIT = 8 * 1024 * 1024

_BOM = b"\xef\xbb\xbf"
#: Bytes ``bytes.strip`` removes: a line starting with none of them is not blank.
_BLANK = frozenset(b" \t\n\r\x0b\x0c")
_HEAD_BYTES = 80


@dataclass(frozen=True, slots=True)
class Message:
    """One complete line that parsed as JSON; ``value`` is the decoded value, ``raw`` the
    line's bytes (for passing the peer's own JSON on unchanged, ``hostd.wire.jsonlimits``)."""

    value: Any
    size: int
    raw: bytes = field(default=b"", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class FrameTooLarge:
    """An unfinished line passed ``limit`` bytes; it is being discarded.

    ``head`` holds the line's first bytes (at most 80) for the diagnostic.
    Reported once per over-long line, as soon as the bound is passed.
    """

    limit: int
    head: bytes


@dataclass(frozen=True, slots=True)
class FrameDiscarded:
    """The end of a line reported by :class:`FrameTooLarge`: it was ``size`` bytes and is gone.

    ``head`` / ``tail``: its first and last bytes (at most 80 each), enough
    for a peer to find which request the line answered (``"id"`` comes first
    or last in every JSON-RPC encoder seen). Never reported for a line that
    has not ended.
    """

    limit: int
    head: bytes
    tail: bytes
    size: int


@dataclass(frozen=True, slots=True)
class InvalidJSON:
    """A complete line that is not UTF-8 JSON.

    ``head`` is its first bytes (at most 80), ``reason`` the parser's words.
    """

    head: bytes
    reason: str
    size: int


Event = Message | FrameTooLarge | FrameDiscarded | InvalidJSON


class LineDecoder:
    """Sans-IO NDJSON decoder with a per-line byte bound.

    ``feed(data)`` returns the events completed by ``data``; ``pending_bytes``
    is the size of the unfinished line held (for "partial frame of N bytes"
    diagnostics). ``parse`` turns one line's bytes into a value and raises
    ``ValueError`` (``orjson.JSONDecodeError`` is one) when it cannot.
    """

    __slots__ = ("_buffer", "_discarded", "_discarding", "_head", "_parse", "_tail", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int, parse: Callable[[bytes], Any] = orjson.loads) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._parse = parse
        self._buffer = bytearray()
        self._discarding = False
        self._head = b""
        self._tail = b""
        self._discarded = 0

    @property
    def pending_bytes(self) -> int:
        """Bytes of the unfinished line currently held (0 while discarding)."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray) -> list[Event]:
        """Consume one read's bytes; return the events they complete, in order."""
        events: list[Event] = []
        limit = self.max_frame_bytes
        buffer = self._buffer
        start = 0
        end = len(data)
        while start < end:
            newline = data.find(b"\n", start)
            if newline < 0:
                rest = end - start
                if self._discarding:
                    self._skip(data, start, end)
                    return events
                if len(buffer) + rest > limit:
                    events.append(self._begin_discard(data, start))
                    self._skip(data, start, end)
                else:
                    buffer += data[start:]
                return events
            if self._discarding:
                self._skip(data, start, newline)
                events.append(self._end_discard())
            elif len(buffer) + (newline - start) > limit:
                events.append(self._begin_discard(data, start))
                self._skip(data, start, newline)
                events.append(self._end_discard())
            elif buffer:
                buffer += data[start:newline]
                line = bytes(buffer)
                buffer.clear()
                self._emit(line, events)
            else:
                self._emit(bytes(data[start:newline]), events)
            start = newline + 1
        return events

    def _begin_discard(self, data: bytes | bytearray, start: int) -> FrameTooLarge:
        head = bytes(self._buffer[:_HEAD_BYTES])
        if len(head) < _HEAD_BYTES:
            head += bytes(data[start : start + _HEAD_BYTES - len(head)])
        self._head = head.split(b"\n", 1)[0]
        self._discarded = len(self._buffer)
        self._tail = bytes(self._buffer[-_HEAD_BYTES:])
        self._buffer.clear()
        self._discarding = True
        return FrameTooLarge(limit=self.max_frame_bytes, head=self._head)

    def _skip(self, data: bytes | bytearray, start: int, stop: int) -> None:
        """Count ``data[start:stop]`` as discarded, keeping its last bytes as the line's tail."""
        self._discarded += stop - start
        keep = _HEAD_BYTES + 1  # one more: a trailing "\r" is not part of the line
        self._tail = (self._tail + bytes(data[max(start, stop - keep) : stop]))[-keep:]

    def _end_discard(self) -> FrameDiscarded:
        self._discarding = False
        tail = (self._tail[:-1] if self._tail.endswith(b"\r") else self._tail)[-_HEAD_BYTES:]
        event = FrameDiscarded(limit=self.max_frame_bytes, head=self._head, tail=tail, size=self._discarded)
        self._head = self._tail = b""
        self._discarded = 0
        return event

    def _emit(self, line: bytes, events: list[Event]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if line.startswith(_BOM):
            line = line[len(_BOM) :]
        if not line or (line[0] in _BLANK and not line.strip()):  # strip() copies: only for a line that may be blank
            return
        try:
            value = self._parse(line)
        except ValueError as exc:
            events.append(InvalidJSON(head=line[:_HEAD_BYTES], reason=str(exc), size=len(line)))
            return
        events.append(Message(value=value, size=len(line), raw=line))


def encode(value: Any) -> bytes:
    """Serialise one message as a frame: compact UTF-8 JSON plus ``\\n``.

    Raises ``TypeError`` (``orjson.JSONEncodeError``) for values JSON cannot hold.
    The result is an exact-size copy: orjson hands back its working buffer,
    whose allocation can be far larger than the frame (4 KiB for a 40-byte
    ``ping`` answer), and queues that count frames by ``len`` must not be
    off by a factor of a hundred.
    """
    return bytes(memoryview(orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)))


def describe_head(head: bytes) -> str:
    """A printable, bounded rendering of a frame's first bytes for errors and logs."""
    text = head.decode("utf-8", errors="backslashreplace")
    return text if len(head) < _HEAD_BYTES else text + "..."
