"""The MCP server side of the gateway for one client, with no I/O in it: the era, the handshake, the envelope.

In the style of :mod:`hostd.mcp.session` (its mirror image): :class:`ServerSession` never reads, writes or
sleeps. The driver (:mod:`hostd.gateway.server`) hands it each request's method and params and asks:

- :meth:`ServerSession.initialize`: the legacy handshake (MCP 2025-11-25 "Lifecycle"): the client offers a
  version; the answer is that version when hostd speaks it, else hostd's newest legacy one.
- :meth:`ServerSession.discover`: the modern probe (2026-07-28 ``server/discover``): every version hostd
  speaks, the capabilities, and ``serverInfo`` in the result's ``_meta``.
- :meth:`ServerSession.admit`: a request's envelope. In the modern era each request names its version, the
  client's capabilities and info in ``params._meta`` (``io.modelcontextprotocol/...``); a version hostd does not
  speak is refused with -32022 and ``data.supported`` (the rule the client side reads,
  :meth:`hostd.mcp.negotiate.EraNegotiation._probe`). A legacy request needs ``initialize`` first.
- :meth:`ServerSession.result`: a result as the era writes it (2026-07-28 results carry ``resultType``; a
  list's carries ``ttlMs`` and ``cacheScope``).

The versions are hostd's client side's (:data:`hostd.mcp.session.LEGACY_VERSIONS`,
:data:`~hostd.mcp.session.MODERN_VERSIONS`): hostd serves exactly the revisions it speaks as a client. The
handshake results are built with the mcp SDK's own models (``mcp_types``), so what the client reads is the
schema's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types

from hostd import __version__
from hostd.mcp.handshake import SERVER_INFO_META_KEY
from hostd.mcp.session import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LEGACY_VERSIONS,
    LOG_LEVEL_META_KEY,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_META_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from hostd.wire.errors import ErrorKind, HostError

#: What hostd calls itself to an MCP client (``serverInfo``).
SERVER_NAME = "hostd"
#: The methods a client may send before the era is settled.
OPENING_METHODS = frozenset({"initialize", "server/discover", "ping"})
#: MCP log levels, least severe first (MCP "Logging": RFC 5424's, as the schema's ``LoggingLevel``).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
#: The list methods whose 2026-07-28 result is cacheable (``ttlMs``, ``cacheScope``).
CACHEABLE = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list"})

INSTRUCTIONS = (
    "hostd serves the tools of the plugins enabled in its state folder, each in its own sandbox. A tool's name "
    "is <plugin id>.<tool name>. A call that needs a permission or a file the user has not granted fails with "
    "the hostctl command that grants it."
)


class UnsupportedVersion(HostError):
    """A modern request names a version hostd does not speak: JSON-RPC -32022 with ``data.supported``."""

    def __init__(self, version: Any) -> None:
        super().__init__(ErrorKind.INVALID_PARAMS, f"unsupported protocol version {str(version)[:40]!r}")

    def to_error_object(self) -> dict[str, Any]:
        """``{code: -32022, message, data: {supported, requested}}`` (MCP 2026-07-28 "Versioning")."""
        return {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": self.message,
            "data": {"supported": [*LEGACY_VERSIONS, *MODERN_VERSIONS]},
        }


@dataclass
class ServerSession:
    """One MCP client's side of the gateway: its era, version, capabilities and info, and its log level.

    ``capabilities``: what the gateway serves (``ServerCapabilities`` as JSON), fixed for the session.
    """

    capabilities: dict[str, Any]
    era: Literal["legacy", "modern"] | None = None
    protocol_version: str | None = None
    #: The client's ``capabilities`` (legacy: from ``initialize``; modern: from the latest request's envelope).
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] = field(default_factory=dict)
    #: ``logging/setLevel`` (legacy) or the envelope's ``logLevel`` (modern): the least severe level relayed.
    log_level: str = "info"

    def server_info(self) -> dict[str, Any]:
        """``Implementation``: ``{name: "hostd", version}``."""
        info = mcp_types.Implementation(name=SERVER_NAME, version=__version__)
        return info.model_dump(by_alias=True, exclude_none=True, mode="json")

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer ``initialize {protocolVersion, capabilities, clientInfo}`` (MCP 2025-11-25 "Lifecycle").

        Adopts the legacy era at the offered version when hostd speaks it, else at the newest legacy one (the
        client then decides whether to go on). ``INVALID_PARAMS`` when ``protocolVersion`` is not a string or
        ``capabilities`` / ``clientInfo`` not objects. A second ``initialize`` is refused likewise.
        """
        if self.era is not None:
            raise HostError(ErrorKind.INVALID_REQUEST, "initialize was already answered")
        offered = params.get("protocolVersion")
        capabilities = params.get("capabilities", {})
        info = params.get("clientInfo", {})
        if not isinstance(offered, str) or not isinstance(capabilities, dict) or not isinstance(info, dict):
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                "initialize needs protocolVersion (a string), capabilities and clientInfo (objects)",
            )
        version = offered if offered in LEGACY_VERSIONS else LEGACY_VERSIONS[-1]
        self.era, self.protocol_version = "legacy", version
        self.client_capabilities, self.client_info = capabilities, info
        result = mcp_types.InitializeResult(
            protocol_version=version,
            capabilities=mcp_types.ServerCapabilities.model_validate(self.capabilities),
            server_info=mcp_types.Implementation(name=SERVER_NAME, version=__version__),
            instructions=INSTRUCTIONS,
        )
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    def discover(self, params: dict[str, Any]) -> dict[str, Any]:
        """Answer ``server/discover`` (MCP 2026-07-28): ``{supportedVersions, capabilities, instructions,
        ttlMs: 0, cacheScope: "private", resultType: "complete", _meta: {serverInfo}}``.

        The probe itself carries an envelope; a version in it that hostd does not speak is refused with -32022
        (:class:`UnsupportedVersion`), as :meth:`admit` does. It does not settle the era: the first request
        with an envelope does.
        """
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if version is not None and version not in MODERN_VERSIONS:
            raise UnsupportedVersion(version)
        result = mcp_types.DiscoverResult(
            supported_versions=[*LEGACY_VERSIONS, *MODERN_VERSIONS],
            capabilities=mcp_types.ServerCapabilities.model_validate(self.capabilities),
            instructions=INSTRUCTIONS,
            _meta={SERVER_INFO_META_KEY: self.server_info()},
        )
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")

    def admit(self, method: str, params: dict[str, Any]) -> None:
        """Check a request's era before it is served; raises what the client is answered.

        - A request whose ``params._meta`` names ``io.modelcontextprotocol/protocolVersion`` is modern: the
          version must be one hostd speaks (else -32022), and the envelope's client capabilities, info and log
          level are taken (the latest request's win). A legacy session's requests carry no envelope.
        - Without an envelope, a request other than :data:`OPENING_METHODS` needs ``initialize`` first
          (``INVALID_REQUEST``, MCP "Lifecycle": nothing but pings before initialization).
        """
        meta = params.get("_meta")
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if version is not None and self.era != "legacy":
            assert isinstance(meta, dict)
            if version not in MODERN_VERSIONS:
                raise UnsupportedVersion(version)
            self.era, self.protocol_version = "modern", version
            capabilities, info = meta.get(CLIENT_CAPABILITIES_META_KEY), meta.get(CLIENT_INFO_META_KEY)
            if isinstance(capabilities, dict):
                self.client_capabilities = capabilities
            if isinstance(info, dict):
                self.client_info = info
            level = meta.get(LOG_LEVEL_META_KEY)
            if level in LOG_LEVELS:
                self.log_level = level
            return
        if self.era is None and method not in OPENING_METHODS:
            raise HostError(
                ErrorKind.INVALID_REQUEST,
                f"{method} before initialize: send initialize (or, in 2026-07-28, the _meta envelope) first",
            )

    def set_log_level(self, params: dict[str, Any]) -> None:
        """``logging/setLevel {level}``: relay plugin log lines of ``level`` and more severe from now on."""
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise HostError(ErrorKind.INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}")
        self.log_level = level

    def relays(self, level: str) -> bool:
        """Whether a log line at ``level`` reaches the client (an unknown level counts as ``info``)."""
        rank = LOG_LEVELS.index(level) if level in LOG_LEVELS else 1
        return rank >= LOG_LEVELS.index(self.log_level)

    def result(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        """``result`` as this era writes it: 2026-07-28 adds ``resultType: "complete"`` (and to a list's,
        ``ttlMs: 0`` and ``cacheScope: "private"``: never cached by a shared cache); legacy: unchanged."""
        if self.era != "modern":
            return result
        out = {**result, "resultType": result.get("resultType", "complete")}
        if method in CACHEABLE:
            out.setdefault("ttlMs", 0)
            out.setdefault("cacheScope", "private")
        return out


__all__ = ["LOG_LEVELS", "SERVER_NAME", "ServerSession", "UnsupportedVersion"]
