"""A parent-side client of the control protocol, for hostctl, tests and benches.

:meth:`HostdClient.spawn` starts a real ``hostd serve`` process and speaks
JSON-RPC 2.0 to it over its stdin/stdout, exactly as an application
embedding hostd would. Responses are matched by id; notifications are kept in
order in :attr:`HostdClient.notifications` and can be awaited.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from hostd.wire import pipes
from hostd.wire.framing import PARENT_FRAME_LIMIT, LineDecoder, Message, encode


class RpcError(Exception):
    """A JSON-RPC error response: ``code``, ``message``, ``data`` (with ``data.kind``)."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code: int = error.get("code", 0)
        self.message: str = error.get("message", "")
        self.data: dict[str, Any] = error.get("data") or {}

    @property
    def kind(self) -> str | None:
        """``data.kind``: hostd's stable symbolic error name."""
        kind = self.data.get("kind")
        return kind if isinstance(kind, str) else None


@dataclass(eq=False, slots=True)
class _AwaitedReply:
    """A request waiting for its response (``reply`` stays None when hostd's stdout ends first)."""

    done: trio.Event = field(default_factory=trio.Event)
    reply: dict[str, Any] | None = None


@dataclass
class Notification:
    """One notification from hostd."""

    method: str
    params: dict[str, Any]


#: Answers a request from hostd (sampling, elicitation, roots): ``(method, params) -> result``;
#: raise :class:`RpcError` to answer with that error.
RequestHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]


#: The listings hostd pages for the parent (method -> the member holding the items): :meth:`HostdClient.request`
#: follows their ``nextCursor``.
PAGED: dict[str, str] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}


class HostdClient:
    """Drives one hostd process. Use :meth:`spawn` (an async context manager).

    Requests hostd sends (the client features: ``sampling/createMessage``...) are
    kept in :attr:`requests` as ``(id, method, params)`` and answered by
    :attr:`on_request` in a task of their own; without one, with -32601.
    """

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.on_request: RequestHandler | None = None
        self.requests: list[tuple[Any, str, dict[str, Any]]] = []
        self._nursery: trio.Nursery | None = None
        self.notifications: list[Notification] = []
        self.stray: list[Any] = []
        self._ids = itertools.count(1)
        self._waiting: dict[int | str, _AwaitedReply] = {}
        self._changed = trio.Event()
        self._write_lock = trio.Lock()
        self.closed = trio.Event()
        #: When a list: every line written (``("→", bytes)``) and read (``("←", bytes)``), in order (docs examples).
        self.transcript: list[tuple[str, bytes]] | None = None
        self._raw = bytearray()

    @classmethod
    @asynccontextmanager
    async def spawn(
        cls,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        initialize: Mapping[str, Any] | None = None,
        stderr: int | None = None,
        handshake: bool = True,
    ) -> AsyncIterator[HostdClient]:
        """Start ``python -m hostd serve *args`` and send ``initialize`` with
        ``initialize`` as params (default: a generic client); ``handshake=False``
        skips it (protocol tests).

        On exit: ``shutdown``, ``exit``, and a bounded wait; a hostd that does
        not exit within 15 s is killed.
        """
        command = [sys.executable, "-m", "hostd", "serve", *args]
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env) if env is not None else None,
        )
        client = cls(process)
        try:
            async with trio.open_nursery() as nursery:
                client._nursery = nursery
                nursery.start_soon(client._reader)
                params = (
                    dict(initialize) if initialize is not None else {"clientInfo": {"name": "hostctl", "version": "0"}}
                )
                if handshake:
                    await client.request("initialize", params)
                try:
                    yield client
                finally:
                    with trio.CancelScope(shield=True):
                        await client.close()
                    nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                await process.wait()

    async def close(self, timeout: float = 15.0) -> int | None:
        """Cancel what this client still waits for (``$/cancelRequest`` each), then ``shutdown`` and ``exit``;
        wait for the process; return its exit code.

        A closing client abandons its pending requests: said first, ``shutdown`` need not wait for them
        (it lets the requests received before it finish, up to 5 s: docs/protocol.md, ``shutdown``).
        """
        if self.process.returncode is None:
            with trio.move_on_after(timeout):
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    for rid in list(self._waiting):
                        await self.notify("$/cancelRequest", {"id": rid})
                with contextlib.suppress(RpcError, trio.BrokenResourceError, trio.ClosedResourceError, EOFError):
                    await self.request("shutdown", None)
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await self.notify("exit", None)
                await self.process.wait()
        return self.process.returncode

    async def _reader(self) -> None:
        assert self.process.stdout is not None
        decoder = LineDecoder(PARENT_FRAME_LIMIT)
        try:
            while True:
                data = await pipes.receive_ready(self.process.stdout, 65536)
                if not data:
                    return
                if self.transcript is not None:
                    self._raw += data
                    *lines, rest = bytes(self._raw).split(b"\n")
                    self._raw = bytearray(rest)
                    self.transcript.extend(("←", line) for line in lines)
                for event in decoder.feed(data):
                    if not isinstance(event, Message) or not isinstance(event.value, dict):
                        self.stray.append(event)
                        self._wake()
                        continue
                    self._route(event.value)
        finally:
            self._finish()

    def _finish(self) -> None:
        """hostd's stdout ended: mark the client closed and wake every request still waiting."""
        self.closed.set()
        for pending in self._waiting.values():
            pending.done.set()  # without a reply: the caller raises EOFError
        self._waiting.clear()
        self._wake()

    def _route(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message and self._nursery is not None:
            self.requests.append((message["id"], message["method"], message.get("params") or {}))
            self._nursery.start_soon(self._answer, message["id"], message["method"], message.get("params") or {})
            self._wake()
            return
        if "method" in message and "id" not in message:
            self.notifications.append(Notification(message["method"], message.get("params") or {}))
            self._wake()
            return
        pending = self._waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
        if pending is None:
            self.stray.append(message)
            self._wake()
            return
        pending.reply = message
        pending.done.set()

    async def _answer(self, rid: Any, method: str, params: dict[str, Any]) -> None:
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if self.on_request is None:
            reply["error"] = {"code": -32601, "message": f"this parent does not serve {method}"}
        else:
            try:
                reply["result"] = await self.on_request(method, params)
            except RpcError as error:
                reply["error"] = {
                    "code": error.code,
                    "message": error.message,
                    **({"data": error.data} if error.data else {}),
                }
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send_raw(encode(reply))

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def send_raw(self, data: bytes) -> None:
        """Write raw bytes to hostd's stdin (for protocol tests).

        While no other write is under way, what the pipe takes is written at once
        (:func:`hostd.wire.pipes.write_now`, no scheduler round); the rest under the lock.
        """
        stdin = self.process.stdin
        assert stdin is not None
        if not self._write_lock.locked():
            self._record(data)
            sent = pipes.write_now(stdin, data)
            if sent == len(data):
                return
            async with self._write_lock:
                await stdin.send_all(data[sent or 0 :])
            return
        async with self._write_lock:
            self._record(data)
            await stdin.send_all(data)

    def _record(self, data: bytes) -> None:
        if self.transcript is not None:
            self.transcript.extend(("→", line) for line in data.split(b"\n") if line)

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send_raw(encode(message))

    async def start(self, method: str, params: Any = None, *, id: int | str | None = None) -> Callable[[], Any]:
        """Send a request now; return a coroutine function that awaits its response.

        The awaited value is the result, or :class:`RpcError` is raised.
        """
        rid = id if id is not None else next(self._ids)
        pending = self._waiting[rid] = _AwaitedReply()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send_raw(encode(message))

        async def response() -> Any:
            await pending.done.wait()
            reply = pending.reply
            if reply is None:
                raise EOFError(f"hostd exited before answering {method}")
            if "error" in reply:
                raise RpcError(reply["error"])
            return reply.get("result")

        response.request_id = rid  # type: ignore[attr-defined]
        return response

    async def request(self, method: str, params: Any = None, *, timeout: float = 60.0) -> Any:
        """Send a request and wait (at most ``timeout`` seconds) for its result.

        A paged listing (``tools/list``, ``prompts/list``, ``resources/list``, ``resources/templates/list``:
        :data:`PAGED`) requested without a ``cursor`` is
        followed to its last page: the result holds every page's items and the last page's other members
        (``revision``), without ``nextCursor``; ``timeout`` applies to each page. Send ``cursor`` (``None``
        for the first page) to get one page as hostd sent it.

        Raises :class:`RpcError` for an error response, ``trio.TooSlowError`` on timeout.
        """
        response = await self.start(method, params)
        with trio.fail_after(timeout):
            result = await response()
        items = PAGED.get(method)
        if items is None or (isinstance(params, Mapping) and "cursor" in params) or not isinstance(result, dict):
            return result
        collected = list(result.get(items) or [])
        while isinstance(result.get("nextCursor"), str):
            response = await self.start(method, {**(params or {}), "cursor": result["nextCursor"]})
            with trio.fail_after(timeout):
                result = await response()
            collected += result.get(items) or []
        result = {k: v for k, v in result.items() if k != "nextCursor"}
        result[items] = collected
        return result

    async def wait_for(
        self, method: str, predicate: Callable[[dict[str, Any]], bool] = lambda _: True, *, timeout: float = 30.0
    ) -> dict[str, Any]:
        """The first notification ``method`` (seen or future) whose params satisfy ``predicate``."""
        with trio.fail_after(timeout):
            while True:
                for note in self.notifications:
                    if note.method == method and predicate(note.params):
                        return note.params
                if self.closed.is_set():
                    raise EOFError(f"hostd exited before a {method} notification")
                await self._changed.wait()

    async def wait_until(self, condition: Callable[[], bool], *, timeout: float = 30.0) -> None:
        """Return once ``condition()`` holds, checked now and after each message hostd sends.

        For conditions on what hostd sent (``stray``, ``notifications``). Raises
        ``trio.TooSlowError`` after ``timeout`` seconds, ``EOFError`` when hostd's
        stdout ends first.
        """
        with trio.fail_after(timeout):
            while not condition():
                if self.closed.is_set():
                    raise EOFError("hostd's stdout ended before the condition held")
                await self._changed.wait()

    def seen(self, method: str) -> list[dict[str, Any]]:
        """Params of every notification ``method`` received so far."""
        return [n.params for n in self.notifications if n.method == method]


def plugin_environment(extra_path: Sequence[str] = ()) -> dict[str, str]:
    """hostd's environment for tests and hostctl: this interpreter's bin folder first on ``PATH``.

    So that a manifest's bare ``python3`` finds the interpreter hostd runs
    with, in a virtual environment too.
    """
    env = dict(os.environ)
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([*extra_path, bin_dir, env.get("PATH", "")])
    return env
