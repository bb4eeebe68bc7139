"""The MCP client core of one plugin link: JSON-RPC ids, routing and the protocol era, with no I/O in it.

Theory of operation
-------------------

:class:`ClientSession` is the whole client side of MCP for one server, in
the style of h11: it never reads, writes, sleeps or imports trio. A
transport (``hostd.mcp.link``'s stdio pumps; an HTTP transport fed by the SDK's
client) does two things with it:

- **Outbound**: :meth:`ClientSession.start_request` returns the request id
  and the message (a JSON-ready dict) to send; :meth:`~ClientSession.cancel`
  returns the ``notifications/cancelled`` to send; :meth:`~ClientSession.reply`
  and :meth:`~ClientSession.reply_error` answer a server's request. The
  session stamps every request of the modern era with the ``_meta`` envelope.
- **Inbound**: :meth:`~ClientSession.receive` takes one parsed message (and
  its frame size and bytes) and returns one event: :class:`Reply`,
  :class:`Progress`, :class:`ServerRequest`, :class:`ServerCancelled`,
  :class:`ServerNotification`, :class:`Orphan` or :class:`Invalid`.

Two rules hold whatever the transport:

1. **One id space, one routing table.** Every request hostd sends (the
   handshake, listings, ``tools/call``, liveness, ``subscriptions/listen``)
   gets an integer id from one counter and one entry in ``_pending``; a
   progress token is the request's own id, so progress, the answer and
   ``notifications/cancelled`` all route through the same entry. The caller
   may hang any object on an entry (``context``); events hand it back, so the
   transport keeps no second table.
2. **Strict envelopes.** A message is a JSON-RPC 2.0 object with no unknown
   top-level keys and exactly one of ``method`` / ``result`` / ``error``; a
   structured log line that happens to carry an ``id`` can never resolve a
   request (:class:`Invalid`). An answer whose id is not in flight (unknown,
   duplicated, late after a cancel) is an :class:`Orphan`, counted in
   ``orphans``.

Eras (MCP "Versioning")
-----------------------

``era`` is ``"legacy"`` (the ``initialize`` handshake, revisions up to
2025-11-25) or ``"modern"`` (2026-07-28: no handshake; each request carries
``_meta`` with ``io.modelcontextprotocol/protocolVersion``,
``.../clientCapabilities`` and ``.../clientInfo``; notifications arrive on
``subscriptions/listen`` streams, tagged ``.../subscriptionId``). The driver
chooses the era (``server/discover`` probe) and calls :meth:`adopt_legacy` or
:meth:`adopt_modern`; until then requests go out without the envelope.

Where hostd differs from the SDK's ``ClientSession``, and why
-------------------------------------------------------------

- No I/O and no task group: the SDK's session owns streams and tasks; here
  the transport owns them, so stdio and HTTP feed the same core and every
  routing rule is tested with plain calls.
- No models on the hot path: results are handed back as the server's JSON
  (plus the frame's bytes, so an unchanged result can be forwarded byte for
  byte). ``hostd.mcp.handshake``'s models check only the handshake and discovery
  results, off the hot path (``hostd.mcp.link``); neither ``mcp`` (the SDK) nor
  ``mcp_types`` is imported.
- Stricter envelopes than the SDK's parser (rule 2), and late answers are
  counted, not raised.
- Progress tokens are the request ids (the SDK mints its own), so one
  lookup routes a progress notification.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

#: Keys a JSON-RPC 2.0 message may carry at its top level.
ENVELOPE_KEYS = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})

PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"
SUBSCRIPTION_ID_META_KEY = "io.modelcontextprotocol/subscriptionId"
LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel"

#: Revisions reached with the ``initialize`` handshake, oldest first (the SDK's ``HANDSHAKE_PROTOCOL_VERSIONS``).
LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: Revisions that use the per-request envelope (the SDK's ``MODERN_PROTOCOL_VERSIONS``).
MODERN_VERSIONS = ("2026-07-28",)
#: JSON-RPC error codes hostd uses or reads.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNSUPPORTED_PROTOCOL_VERSION = -32022

RequestId = int | str
Era = Literal["legacy", "modern"]


class PluginRequestError(Exception):
    """The server answered a request with a JSON-RPC error: ``code`` (int), ``message`` (str), ``data`` (any JSON).

    Raised by ``PluginLink.request``; raised by an ``on_request`` handler, it
    becomes the JSON-RPC error the server gets back.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

    def wire(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object: ``{code, message, data?}``."""
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out


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


# -- events -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a request in flight: ``message`` is the whole JSON-RPC response
    (``result`` or ``error``), ``size`` / ``raw`` its frame. The request is no longer pending."""

    request_id: RequestId
    method: str
    context: Any
    message: dict[str, Any]
    size: int
    raw: bytes


@dataclass(frozen=True, slots=True)
class Progress:
    """``notifications/progress`` for a request in flight (numbers checked, message cut to 4096 characters)."""

    request_id: RequestId
    context: Any
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """A request from the server (``ping``, ``sampling/createMessage``, ``roots/list``...); answer it
    with :meth:`ClientSession.reply` or :meth:`ClientSession.reply_error`."""

    request_id: RequestId
    method: str
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ServerCancelled:
    """The server withdrew its own request ``request_id`` (``notifications/cancelled`` from the server)."""

    request_id: RequestId


@dataclass(frozen=True, slots=True)
class ServerNotification:
    """Any other notification, as the raw ``method`` and ``params``. ``subscription`` is the
    ``subscriptions/listen`` request it arrived on (its ``context`` in ``listener``), or None."""

    method: str
    params: dict[str, Any] | None
    subscription: RequestId | None = None
    listener: Any = None
    #: Tagged for a ``subscriptions/listen`` stream that is not open (a previous one, or made up): drop it.
    stale: bool = False


@dataclass(frozen=True, slots=True)
class Orphan:
    """A response to no request in flight (unknown id, duplicate, late after a cancel); dropped and counted."""

    request_id: Any
    is_error: bool


@dataclass(frozen=True, slots=True)
class Invalid:
    """A JSON value that is not a well-formed JSON-RPC 2.0 message (noise): ``why`` in words."""

    why: str


Event = Reply | Progress | ServerRequest | ServerCancelled | ServerNotification | Orphan | Invalid


@dataclass(slots=True)
class _Pending:
    method: str
    context: Any
    #: True for a ``subscriptions/listen`` stream: its tagged notifications route here.
    listen: bool = False


def _is_id(value: Any) -> TypeGuard[RequestId]:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ClientSession:
    """Sans-IO MCP client state for one server (see the module's theory of operation).

    ``client_info`` (``{name, version}``) and ``capabilities`` (the client's
    MCP capabilities object) go into ``initialize`` or the modern envelope.
    """

    __slots__ = (
        "_envelope",
        "_ids",
        "_pending",
        "capabilities",
        "client_info",
        "era",
        "log_level",
        "orphans",
        "protocol_version",
        "server_capabilities",
        "server_info",
    )

    def __init__(self, client_info: dict[str, Any], capabilities: dict[str, Any] | None = None) -> None:
        self.client_info = client_info
        self.capabilities: dict[str, Any] = capabilities or {}
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Pending] = {}
        #: Responses that answered no request in flight.
        self.orphans = 0
        #: ``None`` until the era is known.
        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self._envelope: dict[str, Any] | None = None
        #: The MCP log level the modern envelope asks for (``plugins/setLogLevel``); None: the server's default.
        self.log_level: str | None = None

    def set_log_level(self, level: str | None) -> None:
        """Carry ``io.modelcontextprotocol/logLevel`` = ``level`` in every modern request from now on."""
        self.log_level = level
        if self._envelope is not None:
            self._envelope = self.envelope(self._envelope[PROTOCOL_VERSION_META_KEY])

    # -- era ------------------------------------------------------------------------

    def envelope(self, version: str) -> dict[str, Any]:
        """The modern ``_meta`` envelope at ``version``: protocol version, client capabilities, client info."""
        envelope = {
            PROTOCOL_VERSION_META_KEY: version,
            CLIENT_CAPABILITIES_META_KEY: self.capabilities,
            CLIENT_INFO_META_KEY: self.client_info,
        }
        if self.log_level is not None:
            envelope[LOG_LEVEL_META_KEY] = self.log_level
        return envelope

    def adopt_legacy(self, version: str, capabilities: dict[str, Any], server_info: dict[str, Any]) -> None:
        """The ``initialize`` handshake succeeded at ``version``: no envelope from now on."""
        self.era, self.protocol_version = "legacy", version
        self.server_capabilities, self.server_info = capabilities, server_info
        self._envelope = None

    def adopt_modern(self, version: str, capabilities: dict[str, Any], server_info: dict[str, Any]) -> None:
        """``server/discover`` answered and ``version`` is mutual: every request carries the envelope."""
        self.era, self.protocol_version = "modern", version
        self.server_capabilities, self.server_info = capabilities, server_info
        self._envelope = self.envelope(version)

    def initialize_request(self, version: str, *, context: Any = None) -> tuple[RequestId, dict[str, Any]]:
        """The legacy handshake's ``initialize`` request offering ``version``."""
        return self.start_request(
            "initialize",
            {"protocolVersion": version, "capabilities": self.capabilities, "clientInfo": self.client_info},
            context=context,
        )

    def discover_request(self, version: str, *, context: Any = None) -> tuple[RequestId, dict[str, Any]]:
        """The era probe: ``server/discover`` stamped with the envelope at ``version``."""
        return self.start_request("server/discover", {"_meta": self.envelope(version)}, context=context)

    @staticmethod
    def initialized_notification() -> dict[str, Any]:
        """``notifications/initialized``, sent once after a legacy handshake."""
        return {"jsonrpc": "2.0", "method": "notifications/initialized"}

    # -- outbound -------------------------------------------------------------------

    def start_request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        context: Any = None,
        progress: bool = False,
        listen: bool = False,
    ) -> tuple[RequestId, dict[str, Any]]:
        """Register a request; return its id and the message to send.

        ``progress``: ask for ``notifications/progress`` (the token is the id).
        ``listen``: the request is a ``subscriptions/listen`` stream; notifications
        tagged with its id come back with ``listener=context``. In the modern
        era ``params._meta`` gains the envelope (keys the caller set win). The
        caller's ``params`` is not modified.
        """
        rid = next(self._ids)
        out: dict[str, Any] = dict(params) if params else {}
        envelope = self._envelope
        if progress or envelope is not None:
            meta = dict(out.get("_meta") or {})
            if envelope is not None:
                for key, value in envelope.items():
                    meta.setdefault(key, value)
            if progress:
                meta["progressToken"] = rid
            out["_meta"] = meta
        self._pending[rid] = _Pending(method, context, listen)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if out:
            message["params"] = out
        return rid, message

    def cancel(self, request_id: RequestId, reason: str = "cancelled by the host") -> dict[str, Any] | None:
        """Abandon a request: forget it (a late answer is an :class:`Orphan`) and return the
        ``notifications/cancelled`` to send, or None if it was not in flight."""
        if self._pending.pop(request_id, None) is None:
            return None
        return {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }

    def forget(self, request_id: RequestId) -> None:
        """Drop a request without telling the server (the transport ended, or it was answered another way)."""
        self._pending.pop(request_id, None)

    def pending(self) -> list[tuple[RequestId, Any]]:
        """The requests in flight as ``(id, context)``, oldest first."""
        return [(rid, p.context) for rid, p in self._pending.items()]

    def is_pending(self, request_id: RequestId) -> bool:
        """Whether ``request_id`` is still in flight."""
        return request_id in self._pending

    @staticmethod
    def reply(request_id: RequestId, result: dict[str, Any]) -> dict[str, Any]:
        """The response to a server's request."""
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    @staticmethod
    def reply_error(request_id: RequestId, code: int, message: str, data: Any = None) -> dict[str, Any]:
        """The JSON-RPC error answering a server's request."""
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return {"jsonrpc": "2.0", "id": request_id, "error": error}

    # -- inbound --------------------------------------------------------------------

    def take(self, request_id: RequestId) -> _Pending | None:
        """Remove and return a pending request (an answer attributed by other means, e.g. a discarded frame)."""
        return self._pending.pop(request_id, None)

    def receive(self, value: Any, size: int = 0, raw: bytes = b"") -> Event:
        """Interpret one parsed inbound message; return what it is (see the event types)."""
        if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
            return Invalid("not a JSON-RPC 2.0 message")
        if not ENVELOPE_KEYS.issuperset(value):
            return Invalid("a JSON-RPC message with unknown top-level keys")
        has_method, has_result, has_error = "method" in value, "result" in value, "error" in value
        if has_method + has_result + has_error != 1:
            return Invalid("not exactly one of method, result and error")
        if has_method:
            return self._inbound_call(value)
        rid = value.get("id")
        if has_result and not _is_id(rid):
            return Invalid("a response without a valid id")
        if has_error and rid is not None and not _is_id(rid):
            # The error object's shape is the caller's to judge (a tools/call forwards it, bounded).
            return Invalid("an error response with an invalid id")
        pending = self._pending.pop(rid, None) if _is_id(rid) else None
        if pending is None or not _is_id(rid):
            self.orphans += 1
            return Orphan(rid, has_error)
        return Reply(rid, pending.method, pending.context, value, size, raw)

    def _inbound_call(self, value: dict[str, Any]) -> Event:
        method = value["method"]
        params = value.get("params")
        if not isinstance(method, str) or (params is not None and not isinstance(params, dict)):
            return Invalid("a request or notification with a malformed method or params")
        if "id" in value:
            rid = value["id"]
            if not _is_id(rid):
                return Invalid("a request with an invalid id")
            return ServerRequest(rid, method, params)
        if method == "notifications/progress" and params is not None:
            token = params.get("progressToken")
            pending = self._pending.get(token) if _is_id(token) else None
            progress = params.get("progress")
            if pending is not None and _is_id(token) and _is_number(progress):
                total, message = params.get("total"), params.get("message")
                return Progress(
                    token,
                    pending.context,
                    progress,
                    total if _is_number(total) else None,
                    message[:4096] if isinstance(message, str) else None,
                )
            return ServerNotification(method, params)
        if method == "notifications/cancelled" and params is not None and _is_id(params.get("requestId")):
            return ServerCancelled(params["requestId"])
        meta = params.get("_meta") if params is not None else None
        if isinstance(meta, dict) and SUBSCRIPTION_ID_META_KEY in meta:
            sid = meta[SUBSCRIPTION_ID_META_KEY]
            stream = self._pending.get(sid) if _is_id(sid) else None
            if stream is None or not stream.listen:
                # Tagged for a stream that is not open (a previous listen, or made up): the
                # transport drops it (``listener`` None), it is not noise.
                return ServerNotification(method, params, sid if _is_id(sid) else None, None, stale=True)
            return ServerNotification(method, params, sid, stream.context)
        return ServerNotification(method, params)
