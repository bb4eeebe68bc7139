"""The control channel's core, with no I/O in it: what a message from the parent is, what a request may do.

In the style of :mod:`hostd.mcp.session` (and h11): nothing here reads, writes, sleeps or imports trio. The
stdio driver (:class:`hostd.control.server.ControlServer`) owns the streams and the tasks and asks this module:

- :func:`classify`: one parsed message from stdin (and its frame size) becomes one event:
  :class:`Refusal` (answer the error at once), :class:`ParentAnswer` (a response to a hostd->parent request),
  :class:`IncomingNotification` or :class:`IncomingRequest` (params already held to the JSON depth bound);
- :func:`overload`: whether one more request fits the in-flight bounds (else its ``HOST_OVERLOADED`` error);
- :func:`parse_initialize` and :func:`initialize_result`: ``initialize`` checked by hand (pydantic is not
  loaded before the answer) and its answer;
- :func:`bound_parent_answer`, :func:`progress_params`, :func:`state_key`: the rules on what the parent
  answers and on what hostd tells it.

Which method a request names is decided by :mod:`hostd.control.router` (an explicit table). The protocol these
rules implement is ``docs/protocol.md``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from hostd import __version__
from hostd.storage.state import StateStore
from hostd.wire.content import ContentLimits
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.framing import PARENT_FRAME_LIMIT, encode
from hostd.wire.jsonlimits import MAX_JSON_DEPTH, check_json

log = logging.getLogger("hostd.control.core")

#: The control protocol version hostd speaks (``docs/protocol.md``).
PROTOCOL_VERSION = "0"
#: Exit codes (sysexits, ``docs/protocol.md`` "Process contract").
EXIT_OK, EXIT_NO_SHUTDOWN, EXIT_USAGE, EXIT_SOFTWARE, EXIT_TEMPFAIL, EXIT_CONFIG = 0, 1, 2, 70, 75, 78

RequestId = int | str
Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
#: ``(method, params, timeout seconds) -> result``; see :meth:`ControlServer.request_parent`.
ParentRequest = Callable[[str, dict[str, Any], float], Awaitable[Any]]

#: Requests (other than ping, initialize, shutdown) in flight at once, and their frames' total bytes.
MAX_INFLIGHT_REQUESTS = 256
MAX_INFLIGHT_BYTES = 64 * 1024 * 1024
#: hostd->parent requests (sampling, elicitation, roots) waiting for an answer at once.
MAX_PARENT_REQUESTS = 64
#: Bound of one answer from the parent to a hostd->parent request (its frame), in bytes.
PARENT_ANSWER_BYTES = 8 * 1024 * 1024


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
    #: ``oauth.clientIdMetadataDocument``: the https URL where the application publishes its OAuth client
    #: metadata, used as ``client_id`` where the authorization server supports it (hostd/remote/oauth.py).
    client_id_metadata_document: str | None = None


@dataclass
class RequestContext:
    """One parent request in flight: its id and a way to notify the parent."""

    id: RequestId
    method: str
    notify: Notify


# -- what a message from the parent is ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    """A message answered at once with ``error`` (``rid`` ``None`` when it had no usable id)."""

    rid: RequestId | None
    error: HostError


@dataclass(frozen=True, slots=True)
class ParentAnswer:
    """A response of the parent to one of hostd's own requests (``message`` holds ``result`` or ``error``)."""

    message: dict[str, Any]
    size: int


@dataclass(frozen=True, slots=True)
class IncomingNotification:
    """A notification of the parent (``exit``, ``$/cancelRequest``, ``initialized``, anything else ignored)."""

    method: str
    params: Any


@dataclass(frozen=True, slots=True)
class IncomingRequest:
    """A well-formed request: ``params`` an object or an array within the JSON depth bound; ``size`` its frame."""

    rid: RequestId
    method: str
    params: dict[str, Any] | list[Any]
    size: int


Incoming = Refusal | ParentAnswer | IncomingNotification | IncomingRequest


def valid_id(value: Any) -> TypeGuard[RequestId]:
    """A JSON-RPC id hostd accepts: an integer (not a boolean) or a string."""
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def classify(message: Any, size: int) -> Incoming:
    """What one parsed message from stdin (``size``: its frame's bytes) is; see the module docstring."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        rid = message.get("id") if isinstance(message, dict) else None
        return Refusal(
            rid if valid_id(rid) else None,
            HostError(
                ErrorKind.INVALID_REQUEST, 'not a JSON-RPC 2.0 message (expected an object with "jsonrpc": "2.0")'
            ),
        )
    method = message.get("method")
    has_id = "id" in message
    rid = message.get("id")
    if not isinstance(method, str):
        if has_id and "method" not in message and ("result" in message or "error" in message):
            return ParentAnswer(message, size)
        return Refusal(
            rid if valid_id(rid) else None, HostError(ErrorKind.INVALID_REQUEST, '"method" must be a string')
        )
    params = message.get("params", {})
    if params is None:
        params = {}
    if not has_id:
        return IncomingNotification(method, params)
    if not valid_id(rid):
        return Refusal(None, HostError(ErrorKind.INVALID_REQUEST, '"id" must be an integer or a string'))
    if not isinstance(params, dict | list):
        return Refusal(rid, HostError(ErrorKind.INVALID_REQUEST, '"params" must be an object or an array'))
    # The control request's boundary (issue 31, class 2): the frame parser accepts 1024 levels; every
    # handler, pydantic and error rendering may recurse, so params are held to the one depth bound first.
    # tools/call's arguments are the tool's document: held to the same bound by the call path, with
    # its own error (INVALID_ARGUMENTS and the pointer into the arguments), before anything reads them.
    checked: Any = params
    if method == "tools/call" and isinstance(params, dict):
        checked = {key: value for key, value in params.items() if key != "arguments"}
    exceeded = check_json(checked)
    if exceeded is not None:
        field = ".".join(part.replace("~1", "/").replace("~0", "~") for part in exceeded.pointer.split("/")[1:])
        return Refusal(
            rid,
            HostError(
                ErrorKind.INVALID_PARAMS,
                f"invalid params: {exceeded.message}",
                pointer=exceeded.pointer,
                errors=[{"field": field or "params", "message": exceeded.message}],
            ),
        )
    return IncomingRequest(rid, method, params, size)


def overload(
    inflight: int, inflight_bytes: int, size: int, max_inflight: int, max_inflight_bytes: int
) -> HostError | None:
    """The ``HOST_OVERLOADED`` error when one more request of ``size`` bytes is over the in-flight bounds, else
    ``None`` (with nothing in flight, any request is taken)."""
    if not inflight or (inflight < max_inflight and inflight_bytes + size <= max_inflight_bytes):
        return None
    return HostError(
        ErrorKind.HOST_OVERLOADED,
        f"{inflight} requests ({inflight_bytes} bytes) are in flight; "
        f"the bound is {max_inflight} requests and {max_inflight_bytes} bytes: "
        "retry once some are answered",
        inFlight=inflight,
        inFlightBytes=inflight_bytes,
        maxInFlight=max_inflight,
        maxInFlightBytes=max_inflight_bytes,
    )


def bound_parent_answer(message: dict[str, Any], size: int) -> dict[str, Any]:
    """The parent's answer as hostd's request sees it: over ``PARENT_ANSWER_BYTES`` or the JSON depth bound,
    an ``error`` that says so in its place."""
    exceeded = check_json(message, max_depth=MAX_JSON_DEPTH + 2)  # the envelope and "result" add two
    if size > PARENT_ANSWER_BYTES:
        return {"error": {"code": -32600, "message": f"the answer of {size} bytes is over the bound"}}
    if exceeded is not None:
        return {"error": {"code": -32600, "message": f"the answer is {exceeded.message}"}}
    return message


# -- what hostd tells the parent -----------------------------------------------------


def within_line_bound(data: bytes, rid: RequestId | None) -> bytes:
    """``data`` (one encoded answer to request ``rid``), or ``ANSWER_TOO_LARGE`` in its place when it is over
    the parent's line bound (``PARENT_FRAME_LIMIT``: what hostd's Python and TypeScript clients read).

    The class (issue 29): each answer is bounded by its method's rule (a tool result by
    ``--max-result-bytes``, a listing by hostd's pages), but the line the parent reads has a bound of its
    own; every answer hostd writes passes here (the control server's encoder), so none is ever written over
    it. ``data.bytes``: the answer's size, ``data.limit``: the bound.
    """
    if len(data) <= PARENT_FRAME_LIMIT:
        return data
    log.error("a %d-byte answer is over the parent's line bound: ANSWER_TOO_LARGE in its place", len(data))
    error = HostError(
        ErrorKind.ANSWER_TOO_LARGE,
        f"hostd's answer is {len(data)} bytes, over the parent's {PARENT_FRAME_LIMIT}-byte line bound; "
        "this error was sent in its place",
        bytes=len(data),
        limit=PARENT_FRAME_LIMIT,
    )
    return encode(error_response(rid, error))


def error_response(rid: RequestId | None, error: HostError) -> dict[str, Any]:
    """The JSON-RPC error response to ``rid`` carrying ``error``."""
    return {"jsonrpc": "2.0", "id": rid, "error": error.to_error_object()}


def cut_utf8(text: str, limit: int) -> str:
    """``text`` if its UTF-8 form fits ``limit`` bytes, else its longest prefix that fits with "…" added."""
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode("utf-8", errors="ignore") + "…"


def state_key(method: str, params: dict[str, Any]) -> tuple[str, Any, Any]:
    """The coalescing key of a state notification: one per method and plugin (statusChanged carries
    ``plugin_id``, others ``plugin``), and per resource for ``resources/updated``: coalescing must never merge
    two things that changed."""
    return (method, params.get("plugin_id", params.get("plugin")), params.get("uri"))


def initialize_result(options: InitializeOptions) -> dict[str, Any]:
    """The ``result`` of ``initialize`` (``docs/protocol.md``)."""
    return {
        "serverInfo": {"name": "hostd", "version": __version__},
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {
            "plugins": {"install": True, "trustGate": True},
            "tools": {"listChanged": True, "progress": True},
            "cancelRequest": True,
        },
        "contentLimits": options.content_limits.to_wire(),
    }


def parse_initialize(params: Any, default_state_dir: str | None) -> InitializeOptions:
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
    document = _client_id_metadata_document(params.get("oauth"), bad)
    return InitializeOptions(
        client_name=name,
        client_version=version,
        protocol_version=protocol,
        known_permissions=known,
        state_dir=state_dir,
        content_limits=content_limits,
        client_capabilities=client_capabilities,
        client_id_metadata_document=document,
    )


#: Longest ``oauth.clientIdMetadataDocument`` hostd takes, in characters (it travels in every authorization URL).
MAX_CLIENT_ID_URL = 2048


def client_id_metadata_document_problem(url: str) -> str | None:
    """Why ``url`` cannot be a client ID metadata document's URL (a ``client_id``), or None when it can.

    The rules of draft-ietf-oauth-client-id-metadata-document-00 section 3, as MCP's authorization spec
    (2025-11-25, "Client ID Metadata Documents") requires them of clients: an ``https`` URL with a host and a
    path other than ``/``, no ``.`` or ``..`` path segment, no fragment, no user name or password; hostd also
    refuses spaces and control characters and more than :data:`MAX_CLIENT_ID_URL` characters. Pure.
    """
    if len(url) > MAX_CLIENT_ID_URL:
        return f"must be at most {MAX_CLIENT_ID_URL} characters"
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on an invalid port
    except ValueError as exc:
        return f"is not a valid URL: {exc}"
    if parts.scheme.lower() != "https" or not parts.hostname:
        return "must be an absolute https URL"
    if parts.path in ("", "/"):
        return "must have a path (the client ID is the document's URL, e.g. https://app.example/oauth/client.json)"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "must not contain a '.' or '..' path segment"
    if parts.fragment or url.endswith("#"):
        return "must not have a fragment ('#...')"
    if parts.username is not None or parts.password is not None:
        return "must not hold a user name or password"
    return None


def _client_id_metadata_document(value: Any, bad: Callable[[str, str], HostError]) -> str | None:
    """``initialize``'s ``oauth.clientIdMetadataDocument`` checked (:func:`client_id_metadata_document_problem`)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad("oauth must be an object", "oauth")
    unknown = sorted(set(value) - {"clientIdMetadataDocument"})
    if unknown:
        raise bad(f"oauth: unknown field {unknown[0]!r}", f"oauth.{unknown[0]}")
    url = value.get("clientIdMetadataDocument")
    if url is None:
        return None
    if not isinstance(url, str):
        raise bad("oauth.clientIdMetadataDocument must be a string", "oauth.clientIdMetadataDocument")
    problem = client_id_metadata_document_problem(url)
    if problem is not None:
        raise bad(f"oauth.clientIdMetadataDocument {problem}", "oauth.clientIdMetadataDocument")
    return url


#: The client features a parent may serve, and the members each may have (``initialize.params.capabilities``).
CLIENT_FEATURES: dict[str, tuple[str, ...]] = {
    "sampling": ("tools",),
    "elicitation": ("form", "url"),
    "roots": (),
    "grants": (),
    "network": (),
}


def parse_client_capabilities(value: Any) -> dict[str, Any]:
    """The parent's ``capabilities`` cut to what hostd knows: ``{sampling?: {tools?: {}}, elicitation?: {form?:
    {}, url?: {}}, roots?: {}, grants?: {}, network?: {}}`` (``grants``: hostd's ``grants/request``,
    hostd/host/call_grants.py; ``network``: hostd's ``network/request``, hostd/host/network_grants.py);
    unknown keys are ignored. ``elicitation: {}`` means form only (MCP's rule).
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
