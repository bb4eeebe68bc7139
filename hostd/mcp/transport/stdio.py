"""The stdio transport: a link over one sandboxed process's pipes (:class:`StdioLink`).

The link's driver (:class:`hostd.mcp.link.PluginLink`) holds the MCP session;
this transport is four small tasks around it:

- **stdout**: bytes -> :class:`~hostd.wire.framing.LineDecoder` (bounded, 16 MiB by
  default) -> :meth:`PluginLink.deliver` (the session's strict envelope check) ->
  an event. A line that is not JSON, not a JSON-RPC 2.0 envelope, or over the
  bound is a protocol violation that ends the link (``stdout_noise: drop`` in
  the manifest drops non-JSON-RPC lines instead, with a rate-limited warning
  and a running count). An over-long line that answered a request
  (:func:`answered_id`) fails only that request (:class:`~hostd.mcp.session.ReplyTooLarge`).
- **stdin**: every message is one compact JSON line. The task that sends it
  writes it (no writer task in between): at once while no other write is
  under way (:func:`hostd.wire.pipes.write_now`, what the pipe takes), the rest
  under one lock, so lines never interleave.

The stdout task reads when the pipe is readable (:func:`hostd.wire.pipes.receive_ready`)
and wakes the caller waiting for a response directly (its event): a
``tools/call`` costs the link two scheduler rounds, the read and the caller's
wake-up.
- **stderr**: read in bounded chunks so a flood can never block the plugin on
  a full pipe; kept as a bounded ring of redacted lines; relayed as
  ``plugins/log`` at a bounded rate.
- **exit**: waits on the plugin's main process, separately from stdout EOF,
  since a grandchild can keep the pipe open after the server died.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any, Unpack

import orjson
import trio

from hostd.control.outbox import current_outbox
from hostd.mcp.link import LinkOptions, PluginLink, _ListenWaiter, _waiter_of
from hostd.wire import pipes
from hostd.wire.framing import (
    PLUGIN_FRAME_LIMIT,
    FrameDiscarded,
    FrameTooLarge,
    InvalidJSON,
    LineDecoder,
    describe_head,
    encode,
)
from sandbox.process import SandboxedProcess

log = logging.getLogger("hostd.mcp.link")

__all__ = ["StdioLink", "answered_id"]

_READ_BYTES = 65536
#: How long a link whose pipe ended waits for the process's exit status before reporting the pipe, in seconds.
EXIT_WAIT = 1.0

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


class StdioLink(PluginLink):
    """The link of one plugin process over its stdio (see the module header).

    ``process`` is the sandboxed process tree whose pipes it speaks on;
    ``max_frame_bytes`` bounds each stdout line; ``stdout_noise``, ``launch_digest``,
    ``capabilities`` and ``options`` (:class:`~hostd.mcp.link.LinkOptions`) go to
    :class:`~hostd.mcp.link.PluginLink` as they are.
    """

    def __init__(
        self,
        plugin_id: str,
        process: SandboxedProcess,
        *,
        max_frame_bytes: int = PLUGIN_FRAME_LIMIT,
        stdout_noise: str = "strict",
        launch_digest: str | None = None,
        capabilities: dict[str, Any] | None = None,
        **options: Unpack[LinkOptions],
    ) -> None:
        super().__init__(
            plugin_id,
            stdout_noise=stdout_noise,
            launch_digest=launch_digest,
            capabilities=capabilities,
            **options,
        )
        self.process = process
        self._decoder = LineDecoder(max_frame_bytes)
        self._write_lock = trio.Lock()

    def _start_transport(self, nursery: trio.Nursery) -> None:
        """Start the transport's tasks in the link's nursery: stdout, stderr, the exit watch."""
        nursery.start_soon(self._pump_stdout)
        nursery.start_soon(self._pump_stderr)
        nursery.start_soon(self._watch_exit)

    def _discarded_reply(self, event: FrameDiscarded) -> bool:
        """Fail only the request an over-long line answered; False when it answered none we can name.

        The line's id is read from its first or last bytes (:func:`answered_id`);
        if it names no request, and exactly one request that may absorb an
        over-long answer (``tools/call``, :meth:`request`) and no other request
        is in flight, it can only be that one's answer. Anything else (an
        over-long listing, a notification) is a violation that ends the link.
        """
        rid = answered_id(event.head, event.tail)
        if rid is None:
            bounded = [r for r, c in self.session.pending() if _waiter_of(c).bounded]
            others = [
                r for r, c in self.session.pending() if not _waiter_of(c).bounded and not isinstance(c, _ListenWaiter)
            ]
            if len(bounded) == 1 and not others:
                rid = bounded[0]
        if not isinstance(rid, int | str) or not self.session.is_pending(rid):
            return False
        entry = self.session.take(rid)
        assert entry is not None
        waiter = _waiter_of(entry.context)
        if not waiter.bounded:
            return False
        waiter.too_large = (event.size, event.limit)
        self.last_seen_at = time.time()
        waiter.done.set()
        return True

    def _absorbs_large(self) -> bool:
        return any(_waiter_of(c).bounded for _r, c in self.session.pending())

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
            for frame in self._decoder.feed(data):
                if isinstance(frame, FrameTooLarge):
                    if self._absorbs_large():
                        continue  # being discarded; its end (FrameDiscarded) tells which request it answered
                    self._fail(  # no request in flight it could answer: a violation, known at once
                        f"a message on stdout exceeded the {frame.limit}-byte frame bound "
                        f"(starts {self._redact(describe_head(frame.head))!r})"
                    )
                    return
                if isinstance(frame, FrameDiscarded):
                    if not self._discarded_reply(frame):
                        self._fail(
                            f"a message on stdout exceeded the {frame.limit}-byte frame bound and answered no "
                            f"call in flight (starts {self._redact(describe_head(frame.head))!r})"
                        )
                        return
                    continue
                if isinstance(frame, InvalidJSON):
                    if not await self._noise(frame.head, f"not JSON ({frame.reason})"):
                        return
                    continue
                if not await self.deliver(frame.value, frame.size, frame.raw):
                    return

    async def _stdout_closed(self) -> None:
        await self._pipe_gone("closed its stdout")

    async def _pipe_gone(self, what: str) -> None:
        """A pipe to the plugin ended (``what``: which): fail the link with the process's exit when it exited,
        waited for at most :data:`EXIT_WAIT` seconds, else with ``what``.

        The class (issue 28): *a pipe's end reported in place of the exit that caused it*. A server that exits
        has its pipes closed by the kernel; which of its ends hostd sees first (stdout's EOF, the EPIPE of
        writing ``initialize`` or a call to it, the exit itself) is a race, and the one failure was reported as
        "exited with code 1 during start" or as "closed its stdin" by turns. The exit status says why; a
        process that closed a pipe and still runs is reported by the pipe.
        """
        if self._closing:
            return
        with trio.move_on_after(EXIT_WAIT):
            await self.process.wait()
        code = self.process.returncode
        self._fail(what if code is None else _exit_reason(code))

    @property
    def pending_frame_bytes(self) -> int:
        """Bytes of an unfinished stdout line held right now (a half-written message)."""
        return self._decoder.pending_bytes

    async def _send(self, message: dict[str, Any]) -> bool:
        """The transport's outbound hook: one JSON-RPC message; False when the link is gone.

        stdio: one compact JSON line on the plugin's stdin.
        """
        return await self._write(encode(message))

    async def _write(self, data: bytes) -> bool:
        """One framed message to the plugin's stdin; False when the pipe is gone (the link failed).

        The inline path: while no writer holds the lock, the calling task writes
        what the pipe takes at once (:func:`hostd.wire.pipes.write_now`) without
        yielding, so nothing can come between; only a rest that did not fit is
        written under the lock (taken before any yield, so it stays next).
        """
        try:
            if not self._write_lock.locked():
                sent = pipes.write_now(self.process.stdin, data)
                if sent == len(data):
                    return True
                if sent:
                    data = data[sent:]
            async with self._write_lock:
                await self.process.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await self._pipe_gone("closed its stdin")  # EPIPE: most often a process that already exited
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


async def _receive(stream: trio.abc.ReceiveStream) -> bytes | bytearray:
    """One read of at most 64 KiB (not copied); ``b""`` at EOF or when the pipe is gone."""
    try:
        return await pipes.receive_ready(stream, _READ_BYTES)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return b""


def _exit_reason(code: int) -> str:
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"
