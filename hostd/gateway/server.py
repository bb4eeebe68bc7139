"""``hostd mcp``: hostd as an MCP server, on stdin/stdout, in front of the host of one state folder.

Theory of operation
-------------------

A client that speaks only MCP (Claude Desktop, Cursor, VS Code, an SDK's client) starts ``hostd mcp --state-dir
DIR`` as it would start any stdio server. :class:`Gateway` drives a :class:`hostd.host.service.Host` in-process,
as ``hostd serve`` does for its parent: the same state folder (locked by the caller: two hostds never serve one
folder), the same plugins started from it, the same trust gate (the gateway approves and grants nothing: plugins
are installed, granted and approved with hostctl or an app, which reach this hostd through its control socket),
the same sandbox and bounds. What it serves is the host's own methods, reached by name through
:meth:`Host.handle`:

- ``tools/list`` -> the host's ``tools/list`` (one page per page, disabled tools left out), each ``HostTool`` as an
  MCP ``Tool`` under the same name (:func:`hostd.gateway.tools.mcp_tool`); ``tools/call`` -> the host's
  ``tools/call``: its result as it came, its failures as :func:`hostd.gateway.tools.call_failure` says.
- ``notifications/cancelled {requestId}`` cancels the request's scope: the host's cancel path (the plugin gets
  ``notifications/cancelled``), and the request is not answered (MCP "Cancellation").
- A call's progress (the host's ``$/progress``) -> ``notifications/progress`` with the client's
  ``progressToken``, when it gave one.
- Resources, templates and prompts of every ready plugin (:mod:`hostd.gateway.features`).
- A plugin's ``sampling/createMessage``, ``elicitation/create`` and ``roots/list`` go to the client
  (:meth:`Gateway.request_client`) when it declared the feature and the user granted the plugin the permission
  (``mcp.sampling``...): the client's capabilities are the host's parent's, so the host is built once the client
  opened the session.
- Consent that needs a person: hostd's ``grants/request`` (a file a call names) and ``network/request`` (a
  destination a plugin's allowlist does not name) are not MCP; each is asked as a form ``elicitation/create``
  (``no`` / ``once`` / ``always``) when the client declared form elicitation, else refused without asking: the
  call with ``ACCESS_NOT_GRANTED``, the destination with a ``403`` naming ``hostctl grant ID --host HOST:PORT``.
- The host's notifications: ``tools/listChanged`` -> ``notifications/tools/list_changed`` (and the resources' and
  prompts' likewise); ``plugins/log`` ->
  ``notifications/message`` at the client's log level (legacy era; a 2026-07-28 session has no channel for a
  log line outside a request).

Over Streamable HTTP (``hostd mcp --http PORT``, :func:`serve_gateway_http`) the same gateway reads and writes the
same lines through :mod:`hostd.gateway.http`, which carries them on HTTP requests and SSE streams.

The MCP era is :mod:`hostd.gateway.session`'s (both eras hostd speaks as a client); the wire is hostd's own
framing (:class:`hostd.wire.framing.LineDecoder`, :func:`~hostd.wire.framing.encode`, bounded lines of JSON); what
a message is, :func:`hostd.control.core.classify` (the control channel's rules on ids and envelopes). In the
2026-07-28 era list changes go to the client's ``subscriptions/listen`` streams, tagged with the stream's id.

Bounds, per client (one gateway serves one client: stdio, or one HTTP session): at most ``max_inflight``
requests (:data:`~hostd.control.core.MAX_INFLIGHT_REQUESTS`, 256) and ``max_inflight_bytes`` of their messages
(:data:`~hostd.control.core.MAX_INFLIGHT_BYTES`, 64 MiB) in flight; one more is answered at once with
``HOST_OVERLOADED`` (-32033, ``data.inFlight``, ``inFlightBytes``, ``maxInFlight``, ``maxInFlightBytes``: the
control channel's own, :func:`hostd.control.core.overload`) and nothing else changes; ``ping`` is never refused.
One message from the client at most ``max_frame_bytes``. Every request runs in a task of its own, so a slow tool
never holds up another. What goes to the client waits in the control channel's :class:`~hostd.control.outbox.Outbox`
(``docs/protocol.md`` "Flow control"), written by one writer task: nothing that produces a message waits for the
client to read it; responses are never dropped, list changes coalesce, a request's progress is written at most 10
times a second (the latest value wins, the last one just before its answer), log lines past their share are dropped
and counted; over budget, the plugins' links stop reading their plugins. A client that reads nothing therefore
stalls no plugin and no other call. stdin EOF, SIGTERM or SIGINT stop every plugin and end the process (exit 0).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from hostd.control.attach import Fanout, serve_control_socket
from hostd.control.core import (
    MAX_INFLIGHT_BYTES,
    MAX_INFLIGHT_REQUESTS,
    IncomingNotification,
    IncomingRequest,
    InitializeOptions,
    ParentAnswer,
    Refusal,
    RequestContext,
    RequestId,
    classify,
    error_response,
    overload,
    parse_client_capabilities,
)
from hostd.control.outbox import OUTBOX_BYTES, Outbox, set_current_outbox
from hostd.gateway import features, http, search
from hostd.gateway.session import ServerSession
from hostd.gateway.tools import call_failure, hostctl_program, mcp_tool
from hostd.host.service import Host, HostSettings
from hostd.mcp.session import SUBSCRIPTION_ID_META_KEY
from hostd.storage.state import StateStore
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.framing import PARENT_FRAME_LIMIT, FrameTooLarge, InvalidJSON, LineDecoder, Message, encode

log = logging.getLogger("hostd.gateway")

_READ_BYTES = 65536
_WRITE_BATCH_BYTES = 256 * 1024
#: Seconds the first ``tools/list`` or ``tools/call`` waits for the enabled plugins' restore (each start is
#: bounded by its own ``startup_timeout_seconds``; this bounds a preparation that takes longer).
RESTORE_WAIT = 60.0

#: The capabilities the gateway serves (``ServerCapabilities``).
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "resources": {"listChanged": True},
    "prompts": {"listChanged": True},
    "logging": {},
}

#: The host's notifications that are list changes, and the 2026-07-28 ``SubscriptionFilter`` member of each.
LIST_CHANGES = {
    "tools/listChanged": ("notifications/tools/list_changed", "toolsListChanged"),
    "resources/listChanged": ("notifications/resources/list_changed", "resourcesListChanged"),
    "prompts/listChanged": ("notifications/prompts/list_changed", "promptsListChanged"),
}

Handler = Callable[["Gateway", RequestId, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(eq=False, slots=True)
class _Asked:
    """One request of the gateway to the client, waiting for its answer."""

    done: trio.Event = field(default_factory=trio.Event)
    answer: dict[str, Any] | None = None


#: The requests a plugin's server may make of the client, forwarded when the client declared the feature.
CLIENT_METHODS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
#: The answers to a call-time file grant (hostd.control.models.GrantAnswer's ``grant``).
GRANTS = ("no", "once", "always")


class Gateway:
    """One MCP client on ``receive`` / ``send`` (stdin, stdout) in front of the host of ``store``.

    ``store``: the state folder, already locked by the caller. ``settings``: the host's policy (``hostd mcp``'s
    options). ``control_socket``: also listen on ``<state>/control.sock`` (hostctl reaches the same host there).
    ``max_inflight`` / ``max_inflight_bytes``: the client's requests (and bytes of their messages) in flight at
    once; one more is answered ``HOST_OVERLOADED`` (see the module text).
    """

    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        store: StateStore,
        settings: HostSettings,
        *,
        control_socket: bool = True,
        max_frame_bytes: int = PARENT_FRAME_LIMIT,
        tool_search: bool = False,
        max_outbox_bytes: int = OUTBOX_BYTES,
        max_inflight: int = MAX_INFLIGHT_REQUESTS,
        max_inflight_bytes: int = MAX_INFLIGHT_BYTES,
    ) -> None:
        self._max_inflight = max_inflight
        self._max_inflight_bytes = max_inflight_bytes
        #: Bytes of the messages of the requests in flight, and each one's (to give them back when answered).
        self._inflight_bytes = 0
        self._inflight_sizes: dict[RequestId, int] = {}
        self._receive = receive
        #: ``--tool-search``: list ``search_tools`` and ``call_tool`` only (hostd/gateway/search.py).
        self.tool_search = tool_search
        self._index: search.ToolIndex | None = None
        self._send_stream = send
        self._store = store
        self._settings = settings
        self._control_socket = control_socket
        self._max_frame_bytes = max_frame_bytes
        #: What waits to be written to the client, bounded in bytes with a policy per kind (the control channel's
        #: own, hostd/control/outbox.py): responses never dropped, list changes coalesced, progress at most 10 a
        #: second per request (the latest value wins), log lines dropped past their share; over budget, the
        #: plugins' links stop reading their plugins. Nothing that puts into it waits.
        self._outbox = Outbox(max_outbox_bytes)
        self._writer_done = trio.Event()
        self.session = ServerSession(capabilities=CAPABILITIES)
        #: Requests in flight: id -> the cancel scope ``notifications/cancelled`` cancels.
        self._inflight: dict[RequestId, trio.CancelScope] = {}
        #: 2026-07-28 ``subscriptions/listen`` streams: id -> the notifications the client asked for.
        self._listeners: dict[RequestId, dict[str, Any]] = {}
        self._host: Host | None = None
        #: Why the host could not be built (the state folder is unusable), answered to every request needing it.
        self._host_error: HostError | None = None
        self._host_ready = trio.Event()
        #: Set once the client opened the session: the host is built then (:meth:`_build_host`).
        self._opened = trio.Event()
        self._closed = False
        #: The gateway's own requests to the client (sampling, elicitation, roots): id -> the answer's slot.
        self._asked: dict[str, _Asked] = {}
        self._ask_ids = itertools.count(1)
        #: Which plugin serves a resource URI (hostd/gateway/features.py).
        self.routes = features.ResourceRoutes()

    # -- running ------------------------------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """The state folder this gateway serves (``--state-dir``, or the user's)."""
        return self._store.directory

    async def serve(self) -> int:
        """Serve until stdin ends, the client stops reading, or a signal; stop every plugin; return the exit
        code (0). The host is built once the client opened the session (``initialize``, or the first request of
        the 2026-07-28 era), so the plugins it starts are offered the client features that client serves."""
        set_current_outbox(self._outbox)  # the plugin links started from here pause while the client is behind
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._signals, nursery.cancel_scope)
            nursery.start_soon(self._writer)
            nursery.start_soon(self._build_host, nursery)
            try:
                async with trio.open_nursery() as requests:
                    await self._read(requests)
                    requests.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    if self._host is not None:
                        await self._host.shutdown(fast=False)
                    self._closed = True
                    self._outbox.wake()
                    with trio.move_on_after(5):  # what waits is written, for a client still reading
                        await self._writer_done.wait()
                nursery.cancel_scope.cancel()
        return 0

    async def _writer(self) -> None:
        """The one task that writes to the client: what the outbox holds, in batches, until the gateway ends; a
        client that stopped reading (a broken pipe) ends the reading of stdin too."""
        outbox = self._outbox
        try:
            while True:
                entries = outbox.take(_WRITE_BATCH_BYTES, trio.current_time())
                if not entries:
                    if self._closed:
                        return
                    due = outbox.next_due()
                    await outbox.wait_work(due if due is not None else math.inf)
                    continue
                try:
                    await self._send_stream.send_all(b"".join([entry.data for entry in entries]))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    log.warning("stdout is broken: the MCP client is gone")
                    outbox.close()
                    self._closed = True
                    await self._receive.aclose()
                    return
                finally:
                    outbox.written(entries)
                for plugin, count in outbox.take_drop_counts().items():
                    note = {
                        "level": "warning",
                        "logger": plugin or "hostd",
                        "data": f"{count} log lines dropped: the client did not read them in time",
                    }
                    outbox.put_log(plugin, _encode_notification("notifications/message", note), force=True)
        finally:
            self._writer_done.set()

    async def _build_host(self, nursery: trio.Nursery) -> None:
        """Once the client opened the session: the host, with the client's capabilities as the parent's
        (sampling, elicitation, roots: hostd.control.core.parse_client_capabilities) and :meth:`request_client`
        as its way to ask them; then the control socket."""
        await self._opened.wait()
        try:
            served = parse_client_capabilities(self.session.client_capabilities)
        except ValueError:
            served = {}
        # hostd's grants/request and network/request are not MCP: asked as a form elicitation, else refused
        # with the hostctl command that grants what was asked.
        served.pop("grants", None)
        served.pop("network", None)
        if "form" in served.get("elicitation", {}):
            served["grants"] = {}
            served["network"] = {}
        info = self.session.client_info
        options = InitializeOptions(
            client_name=str(info.get("name") or "mcp-client"),
            client_version=str(info.get("version") or ""),
            protocol_version="0",
            known_permissions=None,
            state_dir=str(self._store.directory),
            state_store=self._store,
            client_capabilities=served,
            request_parent=self.request_client,
        )
        fanout = Fanout(self._host_notification)
        try:
            host = await Host.create(options, fanout.notify, nursery, self._settings)
        except HostError as error:  # STATE_UNUSABLE: every request that needs the host is answered with it
            log.error("%s", error.message)
            self._host_error = error
            self._host_ready.set()
            return
        self._host = host
        if self._control_socket:
            await nursery.start(serve_control_socket, host, self._store, fanout, self._outbox)
        self._host_ready.set()

    async def _signals(self, scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("%s: stopping", signal.Signals(signum).name)
                scope.cancel()
                return

    async def _read(self, requests: trio.Nursery) -> None:
        """Read stdin until EOF; hand each message on without waiting for its answer."""
        decoder = LineDecoder(self._max_frame_bytes)
        while True:
            # A client that writes without reading the answers the reader made itself: stop reading it until it
            # reads (its own pipe then blocks it); its requests' answers never stop the reader.
            await self._outbox.wait_reader_room()
            try:
                data = await self._receive.receive_some(_READ_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not data:
                return
            for event in decoder.feed(data):
                if isinstance(event, Message):
                    await self._incoming(event.value, event.size, requests)
                elif isinstance(event, FrameTooLarge):
                    error = HostError(
                        ErrorKind.FRAME_TOO_LARGE, f"a message over the {event.limit}-byte bound", limit=event.limit
                    )
                    await self._write(error_response(None, error), from_reader=True)
                elif isinstance(event, InvalidJSON):
                    error = HostError(ErrorKind.PARSE_ERROR, "not JSON")
                    await self._write(error_response(None, error), from_reader=True)

    async def _incoming(self, message: Any, size: int, requests: trio.Nursery) -> None:
        event = classify(message, size)
        if isinstance(event, Refusal):
            await self._write(error_response(event.rid, event.error), from_reader=True)
        elif isinstance(event, ParentAnswer):
            asked = self._asked.pop(str(event.message.get("id")), None)
            if asked is None:
                log.debug("an answer to no request of the gateway: dropped")
            else:
                asked.answer = event.message
                asked.done.set()
        elif isinstance(event, IncomingNotification):
            self._notification(event.method, event.params)
        elif isinstance(event, IncomingRequest):
            if event.rid in self._inflight:
                error = HostError(ErrorKind.INVALID_REQUEST, f"request id {event.rid!r} is already in flight")
                await self._write(error_response(event.rid, error), from_reader=True)
            elif event.method != "ping" and (refused := self._overload(size)) is not None:
                await self._write(error_response(event.rid, refused), from_reader=True)
            else:
                params = event.params if isinstance(event.params, dict) else {}
                scope = trio.CancelScope()
                self._inflight[event.rid] = scope
                self._inflight_sizes[event.rid] = size
                self._inflight_bytes += size
                requests.start_soon(self._request, event.rid, event.method, params, scope)

    def _overload(self, size: int) -> HostError | None:
        """``HOST_OVERLOADED`` when one more request of ``size`` bytes is over this client's in-flight bounds."""
        return overload(len(self._inflight), self._inflight_bytes, size, self._max_inflight, self._max_inflight_bytes)

    def _notification(self, method: str, params: Any) -> None:
        """``notifications/cancelled {requestId}``: cancel that request (it is not answered). Others: none
        needs an action (``notifications/initialized``, ``notifications/roots/list_changed``...)."""
        if method == "notifications/cancelled" and isinstance(params, dict):
            scope = self._inflight.get(params.get("requestId"))  # type: ignore[arg-type]
            if scope is not None:
                scope.cancel()

    async def _request(self, rid: RequestId, method: str, params: dict[str, Any], scope: trio.CancelScope) -> None:
        """Serve one request in ``scope``; answer it unless the client cancelled it."""
        message: dict[str, Any] | None = None
        try:
            with scope:
                try:
                    self.session.admit(method, params)
                    handler = HANDLERS.get(method)
                    if handler is None:
                        raise HostError(ErrorKind.METHOD_NOT_FOUND, f"hostd's gateway does not serve {method}")
                    result = await handler(self, rid, params)
                    if self.session.era is not None:
                        self._opened.set()
                    message = {"jsonrpc": "2.0", "id": rid, "result": self.session.result(method, result)}
                except HostError as error:
                    message = error_response(rid, error)
                except Exception as exc:  # a bug: answered, logged, the gateway goes on
                    log.exception("%s failed", method)
                    message = error_response(rid, HostError(ErrorKind.INTERNAL_ERROR, f"{method}: {exc!r}"))
        finally:
            self._inflight.pop(rid, None)
            self._inflight_bytes -= self._inflight_sizes.pop(rid, 0)
            self._listeners.pop(rid, None)
            self._outbox.end_progress(rid)  # its last progress, before its answer
        if message is not None and not scope.cancelled_caught:
            await self._write(message)

    # -- the gateway's requests to the client ----------------------------------------------------

    async def request_client(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """The host's request to its parent, made of the MCP client (the host's ``request_parent``).

        ``sampling/createMessage`` and ``elicitation/create`` ``{plugin, params}`` -> the same method with the
        plugin's ``params``; ``roots/list {plugin}`` -> ``roots/list``. The host asks only for what the client
        declared (``client_capabilities``). Returns the client's result; raises ``PARENT_REQUEST_FAILED`` for its
        error or for no answer within ``timeout`` seconds (the client is sent ``notifications/cancelled``), and
        ``METHOD_NOT_FOUND`` for any other method (hostd's ``auth/authorize`` is not MCP). hostd's own
        ``grants/request`` and ``network/request`` become form elicitations (:meth:`_consent`,
        :meth:`_network_consent`). A cancel of the caller withdraws the request likewise.
        """
        if method == "grants/request":
            return await self._consent(params, timeout)
        if method == "network/request":
            return await self._network_consent(params, timeout)
        if method not in CLIENT_METHODS:
            raise HostError(ErrorKind.METHOD_NOT_FOUND, f"an MCP client is not asked {method}")
        inner = params.get("params")
        return await self._ask_client(method, inner if isinstance(inner, dict) else None, timeout)

    async def _consent(self, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """hostd's ``grants/request`` (a call names files the plugin's sandbox does not cover), asked of a person
        through the client as a form ``elicitation/create`` (MCP 2025-11-25 "Elicitation"): one field ``grant``,
        ``no`` / ``once`` / ``always``. Only a client that declared form elicitation is asked (else the host
        answers the call ``ACCESS_NOT_GRANTED`` with the hostctl command). ``accept`` with a valid ``grant`` is
        that answer; ``decline``, ``cancel`` or anything else is ``no``."""
        given = params.get("paths")
        paths: list[Any] = given if isinstance(given, list) else []
        listed = "\n".join(
            f"- {item.get('path')} ({'read-write' if item.get('access') == 'write' else 'read'})"
            for item in paths
            if isinstance(item, dict)
        )
        message = f"{params.get('reason')}.\n{listed}\nAllow plugin {params.get('plugin')} to reach it?"
        return await self._ask_grant(message, "until hostd stops", timeout)

    async def _network_consent(self, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """hostd's ``network/request`` (a plugin's proxy met a destination its allowlist does not name; the
        plugin's connection waits), asked as :meth:`_consent` asks a file: a form ``elicitation/create`` with one
        field ``grant`` (``no`` / ``once`` while the plugin runs / ``always``, recorded). Only a client that
        declared form elicitation is asked; without one the proxy refuses the destination (``403``) with the
        ``hostctl grant ID --host HOST:PORT`` command that lets it through."""
        message = f"{params.get('reason')}.\nAllow plugin {params.get('plugin')} to connect there?"
        return await self._ask_grant(message, "while the plugin runs", timeout)

    async def _ask_grant(self, message: str, once: str, timeout: float) -> dict[str, Any]:
        """A form elicitation with ``message`` and one field ``grant`` (:data:`GRANTS`; ``once``: how long a
        ``once`` lasts, for the person); ``{grant}``: the client's ``accept`` with a valid ``grant``, else ``no``
        (``decline``, ``cancel``, anything else). Raises what :meth:`_ask_client` raises."""
        request = {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "grant": {
                        "type": "string",
                        "title": "Allow",
                        "description": f"no; once ({once}); always (until revoked with hostctl)",
                        "enum": list(GRANTS),
                        "default": "no",
                    }
                },
                "required": ["grant"],
            },
        }
        answer = await self._ask_client("elicitation/create", request, timeout)
        content = answer.get("content") if isinstance(answer, dict) else None
        grant = content.get("grant") if isinstance(content, dict) else None
        accepted = isinstance(answer, dict) and answer.get("action") == "accept"
        return {"grant": grant if accepted and grant in GRANTS else "no"}

    async def _ask_client(self, method: str, inner: dict[str, Any] | None, timeout: float) -> Any:
        """Send ``method`` with ``inner`` as params to the client; its result (see :meth:`request_client`)."""
        rid = f"hostd-{next(self._ask_ids)}"
        asked = _Asked()
        self._asked[rid] = asked
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if inner is not None:
            message["params"] = inner
        try:
            await self._write(message)
            with trio.move_on_after(timeout):
                await asked.done.wait()
        finally:
            if not asked.done.is_set():
                self._asked.pop(rid, None)
                with trio.CancelScope(shield=True):
                    await self._notify_client("notifications/cancelled", {"requestId": rid, "reason": "withdrawn"})
        answer = asked.answer
        if answer is None:
            raise HostError(
                ErrorKind.PARENT_REQUEST_FAILED, f"the MCP client did not answer {method} within {timeout:g} s"
            )
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise HostError(
                ErrorKind.PARENT_REQUEST_FAILED,
                f"the MCP client refused {method}: {str(error.get('message'))[:500]}",
                upstream=error,
            )
        return answer.get("result")

    # -- output -------------------------------------------------------------------------------

    async def _write(self, message: dict[str, Any], *, from_reader: bool = False) -> None:
        """Queue a response, or a message that must not be dropped, for the writer (never waits).
        ``from_reader``: the stdin reader made it itself (counted against the reader's share)."""
        try:
            data = encode(message)
        except TypeError as exc:
            log.error("unserialisable message replaced by an error: %r", exc)
            data = encode(error_response(message.get("id"), HostError(ErrorKind.INTERNAL_ERROR, repr(exc))))
        self._outbox.put_reply(data, from_reader=from_reader)

    async def _notify_client(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification that must not be dropped (an acknowledgment, a withdrawn request)."""
        self._outbox.put_reply(_encode_notification(method, params))

    async def _host_notification(self, method: str, params: dict[str, Any]) -> None:
        """The host's notifications, as MCP's (see the module's notes); the others are the control protocol's."""
        change = LIST_CHANGES.get(method)
        if change is not None:
            await self._list_changed(*change)
        elif method == "plugins/log" and self.session.era == "legacy":
            level = params.get("level")
            level = level if isinstance(level, str) else "info"
            if self.session.relays(level):
                note = {"level": level, "logger": params.get("plugin") or "hostd", "data": params.get("message")}
                self._outbox.put_log(params.get("plugin"), _encode_notification("notifications/message", note))

    async def _list_changed(self, notification: str, member: str) -> None:
        if self.session.era == "legacy":
            self._outbox.put_state((notification,), _encode_notification(notification, {}))
            return
        for rid, wanted in list(self._listeners.items()):
            if wanted.get(member):
                params = {"_meta": {SUBSCRIPTION_ID_META_KEY: rid}}
                self._outbox.put_state((notification, rid), _encode_notification(notification, params))

    # -- the methods ----------------------------------------------------------------------------

    async def host(self) -> Host:
        """The host, once built and done restoring the enabled plugins (at most :data:`RESTORE_WAIT` seconds: a
        client lists tools once after ``initialize``, and a plugin still starting would be missing from it;
        one that starts later is announced with ``list_changed``)."""
        await self._host_ready.wait()
        if self._host is None:
            raise self._host_error or HostError(ErrorKind.SHUTTING_DOWN, "hostd is shutting down")
        with trio.move_on_after(RESTORE_WAIT):
            await self._host.restored.wait()
        return self._host

    async def index(self, rid: RequestId) -> search.ToolIndex:
        """The search index of every enabled tool (the host's ``tools/list``, every page), rebuilt when the
        registry's revision changed since it was built."""
        host = await self.host()
        revision = host.registry.revision
        if self._index is None or self._index.revision != revision:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            while True:
                request = {"cursor": cursor} if cursor is not None else {}
                page = await host.handle("tools/list", request, self.context(rid, "tools/list", {}))
                tools.extend(mcp_tool(tool) for tool in page["tools"])
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            self._index = search.ToolIndex(tools, revision)
        return self._index

    def context(self, rid: RequestId, method: str, params: dict[str, Any]) -> RequestContext:
        """The host's view of one client request: its ``$/progress`` becomes ``notifications/progress`` with the
        client's ``progressToken`` (none given: dropped)."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None

        async def notify(note: str, values: dict[str, Any]) -> None:
            if note == "$/progress" and token is not None:
                progress = {"progressToken": token, "progress": values.get("progress")}
                for key in ("total", "message"):
                    if values.get(key) is not None:
                        progress[key] = values[key]
                data = _encode_notification("notifications/progress", progress)
                self._outbox.put_progress(rid, data, trio.current_time())

        return RequestContext(rid, method, notify)


async def _initialize(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    return gateway.session.initialize(params)


async def _discover(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    return gateway.session.discover(params)


async def _ping(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    return {}


async def _set_level(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    gateway.session.set_log_level(params)
    return {}


async def _listen(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    """``subscriptions/listen {notifications}`` (2026-07-28): acknowledge what is honoured (the list changes the
    gateway serves), then keep the stream open; it ends with the session (or a cancel)."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise HostError(ErrorKind.INVALID_PARAMS, "subscriptions/listen needs notifications (an object)")
    honoured = {member: True for _, member in LIST_CHANGES.values() if wanted.get(member) is True}
    gateway._listeners[rid] = honoured
    await gateway._notify_client(
        "notifications/subscriptions/acknowledged",
        {"notifications": honoured, "_meta": {SUBSCRIPTION_ID_META_KEY: rid}},
    )
    await trio.sleep_forever()
    raise AssertionError("unreachable")


async def _tools_list(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    """The host's ``tools/list`` page at the client's ``cursor``, as MCP tools; under ``--tool-search``,
    ``search_tools`` and ``call_tool`` only."""
    if gateway.tool_search:
        return {"tools": [search.SEARCH_TOOL, search.CALL_TOOL]}
    host = await gateway.host()
    request: dict[str, Any] = {}
    if isinstance(params.get("cursor"), str):
        request["cursor"] = params["cursor"]
    page = await host.handle("tools/list", request, gateway.context(rid, "tools/list", params))
    result: dict[str, Any] = {"tools": [mcp_tool(tool) for tool in page["tools"]]}
    if page.get("nextCursor") is not None:
        result["nextCursor"] = page["nextCursor"]
    return result


async def _tools_call(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    """The host's ``tools/call {name, arguments}``: ``{content, structuredContent?}``, or the failure as a tool
    result (:func:`hostd.gateway.tools.call_failure`)."""
    name, arguments = params.get("name"), params.get("arguments") or {}
    if gateway.tool_search and name == search.SEARCH_TOOL_NAME:
        return await _search_tools(gateway, rid, arguments)
    if gateway.tool_search and name == search.CALL_TOOL_NAME and isinstance(arguments, dict):
        name, arguments = arguments.get("name"), arguments.get("arguments") or {}
    host = await gateway.host()
    request = {"name": name, "arguments": arguments}
    try:
        result: dict[str, Any] = await host.handle("tools/call", request, gateway.context(rid, "tools/call", params))
    except HostError as error:
        failure = call_failure(error, hostctl_program(str(gateway.state_dir)))
        if failure is None:
            raise
        return failure
    return result


async def _resources_list(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    host = await gateway.host()
    return await features.resources_list(host, gateway.routes, params, gateway.context(rid, "resources/list", params))


async def _templates_list(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    host = await gateway.host()
    ctx = gateway.context(rid, "resources/templates/list", params)
    return await features.resource_templates_list(host, gateway.routes, params, ctx)


async def _resources_read(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    host = await gateway.host()
    ctx = gateway.context(rid, "resources/read", params)
    return await features.resources_read(host, gateway.routes, params, ctx)


async def _prompts_list(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    host = await gateway.host()
    return await features.prompts_list(host, params, gateway.context(rid, "prompts/list", params))


async def _prompts_get(gateway: Gateway, rid: RequestId, params: dict[str, Any]) -> dict[str, Any]:
    host = await gateway.host()
    return await features.prompts_get(host, params, gateway.context(rid, "prompts/get", params))


async def _search_tools(gateway: Gateway, rid: RequestId, arguments: Any) -> dict[str, Any]:
    """``search_tools {query, limit?}`` -> ``{content: [JSON text], structuredContent: {tools}}``: the best tools,
    each ``{name, description, inputSchema}`` (hostd/gateway/search.py); a query that is not a string, or a limit
    that is not an integer, is a tool error."""
    query = arguments.get("query") if isinstance(arguments, dict) else None
    limit = arguments.get("limit", search.DEFAULT_LIMIT) if isinstance(arguments, dict) else None
    if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool):
        text = "search_tools needs query (a string) and, optionally, limit (an integer)"
        return {"content": [{"type": "text", "text": text}], "isError": True}
    index = await gateway.index(rid)
    found = [
        {key: match.tool[key] for key in ("name", "description", "inputSchema") if key in match.tool}
        for match in index.search(query, limit)
    ]
    structured = {"tools": found}
    return {
        "content": [{"type": "text", "text": encode(structured).decode().rstrip()}],
        "structuredContent": structured,
    }


def _encode_notification(method: str, params: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "method": method, "params": params})


HANDLERS: dict[str, Handler] = {
    "resources/list": _resources_list,
    "resources/templates/list": _templates_list,
    "resources/read": _resources_read,
    "prompts/list": _prompts_list,
    "prompts/get": _prompts_get,
    "initialize": _initialize,
    "server/discover": _discover,
    "ping": _ping,
    "logging/setLevel": _set_level,
    "subscriptions/listen": _listen,
    "tools/list": _tools_list,
    "tools/call": _tools_call,
}


async def serve_gateway(
    store: StateStore,
    settings: HostSettings,
    *,
    control_socket: bool = True,
    max_frame_bytes: int = PARENT_FRAME_LIMIT,
    tool_search: bool = False,
) -> int:
    """``hostd mcp``'s main: a :class:`Gateway` on this process's stdin and stdout; returns the exit code."""
    receive = trio.lowlevel.FdStream(os.dup(0))
    send = trio.lowlevel.FdStream(os.dup(1))
    gateway = Gateway(
        receive,
        send,
        store,
        settings,
        control_socket=control_socket,
        max_frame_bytes=max_frame_bytes,
        tool_search=tool_search,
    )
    return await gateway.serve()


async def serve_gateway_http(
    store: StateStore,
    settings: HostSettings,
    *,
    port: int,
    control_socket: bool = True,
    max_frame_bytes: int = PARENT_FRAME_LIMIT,
    tool_search: bool = False,
) -> int:
    """``hostd mcp --http PORT``'s main: a :class:`Gateway` behind Streamable HTTP on 127.0.0.1:``port`` (0: a free
    port), the URL and bearer token written to ``<state>/mcp-http.json`` (hostd/gateway/http.py); returns the exit
    code once the session ended (``DELETE``) or a signal came."""
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    listener = listeners[0]
    bound = listener.socket.getsockname()[1]
    url = f"http://127.0.0.1:{bound}{http.PATH}"
    token = await trio.to_thread.run_sync(http.credentials, store.directory, url)
    inbound = http.Inbound()
    front = http.HttpFront(inbound, bound, token, max_frame_bytes)
    gateway = Gateway(
        inbound,
        http.Outbound(front.route),
        store,
        settings,
        control_socket=control_socket,
        max_frame_bytes=max_frame_bytes,
        tool_search=tool_search,
    )
    log.info("serving MCP at %s (the bearer token is in %s)", url, store.directory / http.CREDENTIALS_FILE)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(front.serve, listener)
        code = await gateway.serve()
        nursery.cancel_scope.cancel()
    return code


__all__ = ["CAPABILITIES", "Gateway", "serve_gateway", "serve_gateway_http"]
