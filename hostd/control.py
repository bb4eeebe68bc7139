"""The control channel: JSON-RPC 2.0 between the parent application and hostd.

Theory of operation
-------------------

The parent holds hostd's stdin and stdout. :class:`ControlServer` reads
stdin in one task (bounded framing, :mod:`hostd.framing`) and writes stdout
in another, so a parent that is slow to read never stalls the reader (a
write-then-read loop deadlocks once both pipe buffers fill). Every request
runs as its own task in a request nursery with its own cancel scope, so a slow
``tools/call`` never delays a ``ping``; ``$/cancelRequest {id}`` cancels that
scope and the request is still answered, with -32800 (the LSP rule; see
``docs/protocol.md``).

Only ``initialize`` is served here; it is answered at once, before the heavy
modules (pydantic models, the mcp SDK, jsonschema) are imported: the answer
is the parent's readiness signal. Those modules load in a worker thread right
after, and requests that arrive meanwhile wait for them. Everything else is
delegated to a :class:`HostApi` (``hostd.host.Host``).

stdin EOF, SIGTERM, SIGINT and a failed write to stdout (the parent is gone)
all end in the same orderly shutdown: stop taking work, stop every plugin
tree, exit. This module imports only trio and orjson.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import trio

from hostd import __version__
from hostd.content import ContentLimits
from hostd.errors import ErrorKind, HostError
from hostd.framing import PARENT_FRAME_LIMIT, FrameTooLarge, InvalidJSON, LineDecoder, describe_head, encode
from hostd.state import StateError, StateStore, default_state_dir

log = logging.getLogger("hostd.control")

#: The control protocol version hostd speaks (``docs/protocol.md``).
PROTOCOL_VERSION = "0"
#: Exit codes (sysexits, ``docs/protocol.md`` "Process contract").
EXIT_OK, EXIT_NO_SHUTDOWN, EXIT_USAGE, EXIT_SOFTWARE, EXIT_TEMPFAIL, EXIT_CONFIG = 0, 1, 2, 70, 75, 78

_READ_BYTES = 65536
_WRITE_BATCH_BYTES = 1 << 20
_OUTBOX_MESSAGES = 4096

RequestId = int | str
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


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
class _Inflight:
    scope: trio.CancelScope
    cancelled_by_parent: bool = False


@dataclass
class _State:
    initialized: bool = False
    shutdown_requested: bool = False
    stopping: bool = False
    exit_code: int | None = None
    inflight: dict[RequestId, _Inflight] = field(default_factory=dict)


def _valid_id(value: Any) -> TypeGuard[RequestId]:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


class ControlServer:
    """Serves the control protocol on a pair of byte streams until shutdown.

    ``host_factory`` builds the host after ``initialize`` has been answered;
    it receives the parent's options, a ``notify`` coroutine and a nursery
    that outlives every request (for plugin tasks). :meth:`serve` returns the
    process exit code (0 clean, 1 ``exit`` without ``shutdown``).
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
    ) -> None:
        self._receive = receive
        self._send = send
        self._host_factory = host_factory
        self._decoder = LineDecoder(max_frame_bytes)
        self._default_state_dir = state_dir
        self._state_store = state_store
        self._handle_signals = handle_signals
        self._state = _State()
        self._outbox_send, self._outbox_receive = trio.open_memory_channel[bytes](_OUTBOX_MESSAGES)
        self._host: HostApi | None = None
        self._host_ready = trio.Event()
        self._host_error: HostError | None = None
        self._stop = trio.Event()
        self._fast_stop = False
        self._stopping_host: HostApi | None = None

    # -- public -----------------------------------------------------------------

    async def serve(self) -> int:
        """Run until stdin EOF, ``exit``, a signal or a broken stdout; return the exit code."""
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
        """Send a notification to the parent (queued; waits when 4096 are queued)."""
        await self._queue({"jsonrpc": "2.0", "method": method, "params": params})

    # -- tasks ------------------------------------------------------------------

    async def _reader(self) -> None:
        while True:
            try:
                data = await self._receive.receive_some(_READ_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                log.info("stdin closed: shutting down")
                self._stop.set()
                return
            for event in self._decoder.feed(data):
                if isinstance(event, FrameTooLarge):
                    await self._queue_error(
                        None,
                        HostError(
                            ErrorKind.FRAME_TOO_LARGE,
                            f"message exceeds the {event.limit}-byte bound; discarded up to the next newline",
                            limit=event.limit,
                            head=describe_head(event.head),
                        ),
                    )
                elif isinstance(event, InvalidJSON):
                    await self._queue_error(
                        None,
                        HostError(
                            ErrorKind.PARSE_ERROR,
                            f"not UTF-8 JSON: {event.reason}",
                            head=describe_head(event.head),
                        ),
                    )
                else:
                    await self._dispatch(event.value)

    async def _writer(self) -> None:
        async for first in self._outbox_receive:
            chunks = [first]
            size = len(first)
            while size < _WRITE_BATCH_BYTES:
                try:
                    more = self._outbox_receive.receive_nowait()
                except trio.WouldBlock:
                    break
                chunks.append(more)
                size += len(more)
            try:
                await self._send.send_all(b"".join(chunks))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                log.warning("stdout is broken: the parent is gone; shutting down")
                self._fast_stop = True
                self._stop.set()
                return

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

    async def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            rid = message.get("id") if isinstance(message, dict) else None
            await self._queue_error(
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
                log.warning("dropping a response from the parent: hostd sends no requests (id %r)", rid)
                return
            await self._queue_error(
                rid if _valid_id(rid) else None, HostError(ErrorKind.INVALID_REQUEST, '"method" must be a string')
            )
            return
        params = message.get("params", {})
        if params is None:
            params = {}
        if not has_id:
            await self._notification(method, params)
            return
        if not _valid_id(rid):
            await self._queue_error(None, HostError(ErrorKind.INVALID_REQUEST, '"id" must be an integer or a string'))
            return
        if not isinstance(params, dict | list):
            await self._queue_error(rid, HostError(ErrorKind.INVALID_REQUEST, '"params" must be an object or an array'))
            return
        await self._request(rid, method, params)

    async def _notification(self, method: str, params: Any) -> None:
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

    async def _request(self, rid: RequestId, method: str, params: Any) -> None:
        state = self._state
        if method == "initialize":
            await self._initialize(rid, params)
            return
        if not state.initialized:
            await self._queue_error(rid, HostError(ErrorKind.SERVER_NOT_INITIALIZED, f"{method} before initialize"))
            return
        if state.stopping or state.shutdown_requested:
            await self._queue_error(rid, HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down"))
            return
        if rid in state.inflight:
            await self._queue_error(rid, HostError(ErrorKind.INVALID_REQUEST, f"id {rid!r} is already in flight"))
            return
        if method == "ping":
            await self._queue({"jsonrpc": "2.0", "id": rid, "result": {}})
            return
        if method == "shutdown":
            state.shutdown_requested = True
            self._requests.start_soon(self._shutdown_request, rid)
            return
        entry = _Inflight(scope=trio.CancelScope())
        state.inflight[rid] = entry
        self._requests.start_soon(self._run_request, rid, method, params, entry)

    async def _initialize(self, rid: RequestId, params: Any) -> None:
        if self._state.initialized:
            await self._queue_error(rid, HostError(ErrorKind.INVALID_REQUEST, "initialize was already answered"))
            return
        try:
            options = _parse_initialize(params, self._default_state_dir)
            options.state_store = self._lock_state(options)
        except HostError as error:
            await self._queue_error(rid, error)
            if error.kind in (ErrorKind.STATE_LOCKED, ErrorKind.STATE_UNUSABLE):
                self._state.exit_code = EXIT_TEMPFAIL if error.kind is ErrorKind.STATE_LOCKED else EXIT_CONFIG
                self._stop.set()
            return
        self._state.initialized = True
        await self._queue(
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
                await self._host_ready.wait()
                if self._host is None:
                    assert self._host_error is not None
                    raise self._host_error
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
            self._state.inflight.pop(rid, None)
            if response is None:
                ended = (
                    HostError(ErrorKind.REQUEST_CANCELLED, "cancelled by $/cancelRequest")
                    if entry.cancelled_by_parent
                    else HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down")
                )
                response = _error_response(rid, ended)
            with trio.CancelScope(shield=True):
                await self._queue(response)

    async def _shutdown_request(self, rid: RequestId) -> None:
        await self._shutdown_host()
        await self._queue({"jsonrpc": "2.0", "id": rid, "result": None})

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

    async def _queue(self, message: dict[str, Any]) -> None:
        try:
            data = encode(message)
        except TypeError as exc:
            log.error("unserialisable message dropped: %r", exc)
            rid = message.get("id")
            if rid is None:
                return
            data = encode(_error_response(rid, HostError(ErrorKind.INTERNAL_ERROR, f"unserialisable result: {exc}")))
        try:
            await self._outbox_send.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _queue_error(self, rid: RequestId | None, error: HostError) -> None:
        await self._queue(_error_response(rid, error))

    async def _flush_outbox(self) -> None:
        with trio.move_on_after(5, shield=True):
            self._outbox_send.close()
            async for data in self._outbox_receive:
                try:
                    await self._send.send_all(data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return


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
    return InitializeOptions(
        client_name=name,
        client_version=version,
        protocol_version=protocol,
        known_permissions=known,
        state_dir=state_dir,
        content_limits=content_limits,
    )


async def serve_stdio(
    host_factory: HostFactory,
    *,
    state_dir: str | None = None,
    state_store: StateStore | None = None,
    max_frame_bytes: int = PARENT_FRAME_LIMIT,
) -> int:
    """Serve the control protocol on this process's fds 0 and 1; return the exit code.

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
        receive, send, host_factory, state_dir=state_dir, state_store=state_store, max_frame_bytes=max_frame_bytes
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
    "PROTOCOL_VERSION",
    "ControlServer",
    "HostApi",
    "InitializeOptions",
    "RequestContext",
    "serve_stdio",
]
