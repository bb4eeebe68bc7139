"""``hostd mcp --http PORT``: the gateway over Streamable HTTP (MCP 2025-11-25 "Transports") on loopback.

One MCP session per process, as on stdio: the same :class:`hostd.gateway.server.Gateway` reads the client's
messages and writes its own as lines; this module is the HTTP side of those lines (h11 on trio, no framework):

- ``POST /mcp`` carries one JSON-RPC message. A request is answered with an SSE stream (``text/event-stream``)
  that carries the messages about it (its progress, by ``progressToken``; the requests the gateway makes of the
  client meanwhile, e.g. sampling) and ends with its answer. A notification or an answer is ``202 Accepted``.
  ``initialize`` opens the session: its answer names it in ``Mcp-Session-Id``, which every later request must
  carry (missing: 400; another: 404).
- ``GET /mcp`` opens the stream of what relates to no request (``list_changed``, log lines); one at a time.
- ``DELETE /mcp`` ends the session, and with it this ``hostd mcp``.

Both eras are served, as on stdio (:mod:`hostd.gateway.session` settles which). The 2026-07-28 era (MCP 2026-07-28
"Transports") has no session: a request that is modern (its ``MCP-Protocol-Version`` header or its ``params._meta``
names a 2026 version, or it is ``server/discover``) needs no ``initialize`` and no ``Mcp-Session-Id``; a list change
goes on the stream of the ``subscriptions/listen`` request its ``_meta`` subscription id names; and a client that
closes a modern request's stream cancels that request (the era has no client notifications over HTTP: the close is
the signal; in the 2025-11-25 era a disconnect is not a cancel, and ``notifications/cancelled`` is). A stream
holds at most :data:`STREAM_EVENTS` progress or notification events its client has not read (more are dropped);
answers are never dropped. At most :data:`MAX_CONNECTIONS` connections at once.

Who may connect (MCP "Security Warning" of the transport: DNS rebinding): the listener binds 127.0.0.1 only; the
``Host`` header must name 127.0.0.1 or localhost at the listening port (a rebinding page's requests carry its own
host name): 403 otherwise; an ``Origin`` header, when sent, must be that same loopback origin: 403 otherwise; and
every request must carry ``Authorization: Bearer <token>``: 401 otherwise. The token is made once per state folder
(``secrets.token_urlsafe(32)``) and kept in ``<state>/mcp-http.json`` (mode 0600) with the URL: a client's config
names both. A message body is at most ``max_frame_bytes`` (413).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import math
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h11
import orjson
import trio

from hostd.mcp.session import MODERN_VERSIONS, PROTOCOL_VERSION_META_KEY, SUBSCRIPTION_ID_META_KEY

log = logging.getLogger("hostd.gateway.http")

#: The endpoint's path.
PATH = "/mcp"
#: The file in the state folder that holds the URL and the bearer token (mode 0600).
CREDENTIALS_FILE = "mcp-http.json"
_READ_BYTES = 65536
#: Connections served at once (a further one waits in the listen queue).
MAX_CONNECTIONS = 32
#: Events a stream holds for a client slow to read it before what may be dropped is (progress, notifications);
#: an answer is never dropped.
STREAM_EVENTS = 64


def credentials(state_dir: Path, url: str) -> str:
    """The bearer token of ``state_dir``'s HTTP endpoint: the one kept in :data:`CREDENTIALS_FILE`, else a new one;
    the file is (re)written with ``{url, token}``, mode 0600."""
    path = state_dir / CREDENTIALS_FILE
    token = None
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(path.read_text(encoding="utf-8"))
        token = kept.get("token") if isinstance(kept, dict) and isinstance(kept.get("token"), str) else None
    token = token or secrets.token_urlsafe(32)
    partial = path.with_name(f".{CREDENTIALS_FILE}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"url": url, "token": token}, out)
    os.replace(partial, path)  # whole or not at all: a client may read it the moment it appears
    return token


class Inbound(trio.abc.ReceiveStream):
    """The client's messages, as the lines the gateway reads; ``b""`` once the session ended."""

    def __init__(self) -> None:
        self.send, self._receive = trio.open_memory_channel[bytes](64)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """The next message's line, or ``b""`` at the end."""
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            return b""

    async def aclose(self) -> None:
        """End the session."""
        self.send.close()
        await self._receive.aclose()


class Outbound(trio.abc.SendStream):
    """The gateway's lines, each routed (:meth:`route`) to the HTTP stream it belongs on."""

    def __init__(self, route: Callable[[dict[str, Any], bytes], None]) -> None:
        self._route = route
        self._partial = b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Split ``data`` into lines and route each message."""
        lines = (self._partial + bytes(data)).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            if line:
                self._route(orjson.loads(line), line)
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        """Never blocks: the streams it routes to are queues."""
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Nothing to release."""
        await trio.lowlevel.checkpoint()


class HttpFront:
    """The HTTP side of one gateway session (see the module's notes). ``port``: the listening port; ``token``:
    the bearer token; ``max_body``: the bound of one message, in bytes."""

    def __init__(self, inbound: Inbound, port: int, token: str, max_body: int) -> None:
        self.inbound = inbound
        self.port = port
        self._token = token.encode()
        self._max_body = max_body
        self.session_id: str | None = None
        #: Open SSE streams of POSTed requests: request id -> its stream; progress token -> request id.
        self._posts: dict[Any, trio.MemorySendChannel[bytes | None]] = {}
        self._tokens: dict[Any, Any] = {}
        self._get: trio.MemorySendChannel[bytes | None] | None = None
        self.ended = trio.Event()

    # -- the gateway's lines -------------------------------------------------------------------

    def route(self, message: dict[str, Any], line: bytes) -> None:
        """Put one of the gateway's messages on its stream: an answer (and the end) on its request's; progress on
        the request's its token names; anything else on the GET stream, else on the latest request's stream,
        else it is dropped (logged)."""
        event = b"event: message\ndata: " + line + b"\n\n"
        if "method" not in message and message.get("id") in self._posts:
            stream = self._posts.pop(message["id"])
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                stream.send_nowait(event)  # the stream's buffer is unbounded: an answer is never dropped
                stream.send_nowait(None)
            return
        target = None
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        raw_meta = params.get("_meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if message.get("method") == "notifications/progress":
            target = self._posts.get(self._tokens.get(params.get("progressToken")))
        elif SUBSCRIPTION_ID_META_KEY in meta:  # 2026-07-28: on the subscriptions/listen stream it names, only
            target = self._posts.get(meta[SUBSCRIPTION_ID_META_KEY])
            if target is None:
                log.debug("no open subscriptions/listen stream %r: dropped", meta[SUBSCRIPTION_ID_META_KEY])
                return
        if target is None:
            target = self._get or (next(reversed(self._posts.values())) if self._posts else None)
        if target is None or target.statistics().current_buffer_used >= STREAM_EVENTS:
            log.debug("no open stream with room for %s: dropped", message.get("method"))
            return
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            target.send_nowait(event)

    # -- HTTP --------------------------------------------------------------------------------------

    async def serve(self, listener: trio.SocketListener) -> None:
        """Serve connections until cancelled."""
        slots = trio.Semaphore(MAX_CONNECTIONS)
        async with trio.open_nursery() as nursery:
            while True:
                await slots.acquire()
                stream = await listener.accept()
                nursery.start_soon(self._connection, stream, slots)

    async def _connection(self, stream: trio.SocketStream, slots: trio.Semaphore) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16384)
        try:
            while True:
                request, body = await self._read_request(conn, stream)
                if request is None:
                    return
                await self._answer(conn, stream, request, body)
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (h11.RemoteProtocolError, h11.LocalProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        finally:
            slots.release()
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()

    async def _read_request(self, conn: h11.Connection, stream: trio.SocketStream) -> tuple[h11.Request | None, bytes]:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(_READ_BYTES)
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max_body:
                    return request, b"\0" * (self._max_body + 1)
            elif isinstance(event, h11.EndOfMessage):
                return request, bytes(body)
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None, b""

    def _refusal(self, request: h11.Request) -> tuple[int, str] | None:
        """Why ``request`` is refused before it is read (status, reason), or None."""
        headers = {name.lower(): value for name, value in request.headers}
        loopback = {f"127.0.0.1:{self.port}".encode(), f"localhost:{self.port}".encode()}
        if headers.get(b"host") not in loopback:
            return 403, "the Host header must name this loopback endpoint"
        origin = headers.get(b"origin")
        if origin is not None and origin not in {b"http://" + host for host in loopback}:
            return 403, "requests from another origin are refused"
        if request.target.split(b"?")[0] != PATH.encode():
            return 404, f"the MCP endpoint is {PATH}"
        given = headers.get(b"authorization", b"")
        if not hmac.compare_digest(given, b"Bearer " + self._token):
            return 401, f"a bearer token is needed (the token in {CREDENTIALS_FILE} of the state folder)"
        if request.method not in (b"POST", b"GET", b"DELETE"):
            return 405, "POST, GET or DELETE"
        session = headers.get(b"mcp-session-id")
        if self.session_id is not None and session is not None and session.decode() != self.session_id:
            return 404, "no such session"
        return None

    async def _answer(self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, body: bytes) -> None:
        refused = self._refusal(request)
        if refused is None and len(body) > self._max_body:
            refused = (413, f"a message is at most {self._max_body} bytes")
        if refused is not None:
            await self._plain(conn, stream, *refused)
            return
        headers = {name.lower(): value for name, value in request.headers}
        if request.method == b"DELETE":
            await self._plain(conn, stream, 200, "session ended")
            self.ended.set()
            await self.inbound.aclose()
            return
        if request.method == b"GET":
            await self._get_stream(conn, stream)
            return
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            await self._plain(conn, stream, 400, "the body is not JSON")
            return
        if not isinstance(message, dict):
            await self._plain(conn, stream, 400, "one JSON-RPC message (an object) per POST")
            return
        opening = message.get("method") == "initialize"
        modern = not opening and _modern(message, headers)
        if not opening and not modern and self.session_id is None:
            await self._plain(conn, stream, 400, "initialize first (or, in 2026-07-28, name the version)")
            return
        if not opening and not modern and headers.get(b"mcp-session-id") is None:
            await self._plain(conn, stream, 400, "Mcp-Session-Id is missing")
            return
        if "method" not in message or "id" not in message:
            note = message.get("params")
            if message.get("method") == "notifications/cancelled" and isinstance(note, dict):
                cancelled = self._posts.pop(note.get("requestId"), None)
                if cancelled is not None:  # the request is not answered (MCP "Cancellation"): its stream ends
                    cancelled.send_nowait(None)
            await self.inbound.send.send(body + b"\n")
            await self._plain(conn, stream, 202, "")
            return
        extra: list[tuple[bytes, bytes]] = []
        if opening:
            self.session_id = self.session_id or secrets.token_urlsafe(16)
            extra.append((b"mcp-session-id", self.session_id.encode()))
        send, receive = trio.open_memory_channel[bytes | None](math.inf)
        self._posts[message["id"]] = send
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        raw_meta = params.get("_meta")
        meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
        if meta.get("progressToken") is not None:
            self._tokens[meta["progressToken"]] = message["id"]
        await self.inbound.send.send(body + b"\n")
        closed = await self._events(conn, stream, receive, extra, watch=modern)
        if closed and modern and self._posts.pop(message["id"], None) is not None:  # 2026-07-28: the close cancels
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": message["id"]}}
            await self.inbound.send.send(orjson.dumps(cancel) + b"\n")
        self._posts.pop(message["id"], None)
        self._tokens.pop(meta.get("progressToken"), None)

    async def _get_stream(self, conn: h11.Connection, stream: trio.SocketStream) -> None:
        if self.session_id is None or self._get is not None:
            await self._plain(conn, stream, 409, "no session, or its GET stream is already open")
            return
        send, receive = trio.open_memory_channel[bytes | None](math.inf)
        self._get = send
        try:
            await self._events(conn, stream, receive, [])
        finally:
            self._get = None

    async def _events(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        receive: trio.MemoryReceiveChannel[bytes | None],
        extra: list[tuple[bytes, bytes]],
        *,
        watch: bool = False,
    ) -> bool:
        """Send ``receive``'s events as an SSE response until its ``None``; True when the client closed the
        connection first (noticed while writing, or, with ``watch``, by reading: a 2026-07-28 request's cancel)."""
        headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store"), *extra]
        closed = False

        async def watch_for_close(cancel: trio.CancelScope) -> None:
            nonlocal closed
            while True:  # the client sends nothing more on this connection until the answer ends, but its close
                data = await stream.receive_some(_READ_BYTES)
                if not data:
                    closed = True
                    cancel.cancel()
                    return
                conn.receive_data(data)  # a next request, kept for h11's next cycle

        try:
            await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
            async with trio.open_nursery() as nursery:
                if watch:
                    nursery.start_soon(watch_for_close, nursery.cancel_scope)
                async for event in receive:
                    if event is None:
                        break
                    await stream.send_all(conn.send(h11.Data(data=event)) or b"")
                nursery.cancel_scope.cancel()
        except* (trio.BrokenResourceError, trio.ClosedResourceError):  # from the nursery: a group
            closed = True
        if closed:
            return True  # no end to send: the connection is closed (h11 refuses its next cycle)
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        return False

    async def _plain(self, conn: h11.Connection, stream: trio.SocketStream, status: int, text: str) -> None:
        body = text.encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)) or b"")
        if body:
            await stream.send_all(conn.send(h11.Data(data=body)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")


def _modern(message: dict[str, Any], headers: dict[bytes, bytes]) -> bool:
    """Whether a POSTed message belongs to the 2026-07-28 era: ``server/discover``, or a request whose
    ``MCP-Protocol-Version`` header or ``params._meta`` envelope names a modern version (the version itself is
    checked by the session: -32022 for one hostd does not speak)."""
    if message.get("method") == "server/discover":
        return True
    if headers.get(b"mcp-protocol-version", b"").decode("ascii", "replace") in MODERN_VERSIONS:
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


__all__ = ["CREDENTIALS_FILE", "PATH", "HttpFront", "Inbound", "Outbound", "credentials"]
