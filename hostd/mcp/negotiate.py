"""The start's era choice and handshake: the base of the link (:class:`hostd.mcp.link.PluginLink`).

Start (:meth:`PluginLink.run`) chooses the era (manifest ``backend.protocol``,
MCP "Versioning", dual-era guidance): ``auto`` probes ``server/discover``; a
discover result naming a modern version, or a -32022 naming one, means
modern; any other error or a timeout means legacy and ``initialize`` follows
(never keyed to one error code). ``legacy`` skips the probe; an exact pin
fails the start naming the versions the server offered. :class:`EraNegotiation`
holds those steps (:meth:`EraNegotiation._negotiate`); the link derives from it and
provides the session, ``_send`` (its transport's outbound hook) and ``_start_error``.
The era learned per launch digest is kept in :data:`ERA_CACHE`. Here too: the waiter
of one request in flight (:class:`_Waiter`), the ``result`` of a response
(:func:`_result_of`), and the checks of ``initialize`` / ``server/discover`` results
against :mod:`hostd.mcp.handshake` (loaded off the start path).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from hostd.mcp.session import (
    INTERNAL_ERROR,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    ClientSession,
    LinkClosed,
    PluginRequestError,
)
from hostd.wire.errors import HostError
from hostd.wire.jsonlimits import check_json

#: Seconds the ``server/discover`` probe may take before ``auto`` decides "legacy" (the SDK's is 10 s;
#: a stdio server that has not answered within this while it answers ``initialize`` is not modern).
DISCOVER_TIMEOUT = 10.0


ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


#: Manifest ``backend.protocol``: ``"legacy"``, ``"auto"`` or one exact revision.
ProtocolChoice = str


#: Era per launch digest, learned by ``auto`` (in memory, per hostd process): a restart of the same
#: launch skips the probe that already said "legacy"; a changed launch is probed again.
ERA_CACHE: dict[str, Literal["legacy", "modern"]] = {}


@dataclass(eq=False, slots=True)
class _Waiter:
    """The link's side of one request in flight (hung on the session's entry as its context)."""

    on_progress: ProgressSink | None = None
    #: An answer over the frame bound fails this request alone (else it ends the link).
    bounded: bool = True
    done: trio.Event = field(default_factory=trio.Event)
    reply: dict[str, Any] | None = None
    size: int = 0
    raw: bytes = b""
    #: Set instead of ``reply`` when the answer was over the frame bound: ``(size, limit)``.
    too_large: tuple[int, int] | None = None


def _result_of(reply: dict[str, Any] | None) -> dict[str, Any]:
    """The ``result`` object of a response; raises :class:`PluginRequestError` for an error or a non-object."""
    assert reply is not None
    if "error" in reply:
        error = reply["error"]
        if not isinstance(error, dict):
            raise PluginRequestError(INTERNAL_ERROR, f"the plugin sent an error that is {type(error).__name__}")
        code, message = error.get("code"), error.get("message")
        raise PluginRequestError(
            code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
            message if isinstance(message, str) else "(no message)",
            error.get("data"),
        )
    result = reply.get("result")
    if not isinstance(result, dict):
        raise PluginRequestError(INTERNAL_ERROR, f"the result is {type(result).__name__}, not an object")
    return result


def _supported(data: Any) -> list[str]:
    """``data.supported`` of a -32022 error: the versions the server speaks (strings only)."""
    supported = data.get("supported") if isinstance(data, dict) else None
    return [v for v in supported if isinstance(v, str)] if isinstance(supported, list) else []


def _validate_discover(result: Any) -> tuple[list[str], dict[str, Any], dict[str, Any]] | None:
    """A ``server/discover`` result checked with ``hostd.mcp.handshake.DiscoverResult`` (off the hot path, loaded
    here): ``(supportedVersions, capabilities, serverInfo)`` as sent, or None when it does not validate."""
    from pydantic import ValidationError  # noqa: PLC0415

    from hostd.mcp import handshake  # noqa: PLC0415 (loaded by _discover in a worker thread)

    if check_json(result) is not None:
        return None
    try:
        model = handshake.DiscoverResult.model_validate(result)
    except (ValidationError, ValueError):
        return None
    meta = result.get("_meta") if isinstance(result, dict) else None
    info = meta.get(handshake.SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        info = result.get("serverInfo") if isinstance(result.get("serverInfo"), dict) else {}
    caps = result.get("capabilities")
    return list(model.supported_versions), caps if isinstance(caps, dict) else {}, info


def _validate_initialize(
    result: dict[str, Any], start_error: Callable[..., HostError]
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """An ``initialize`` result checked with ``hostd.mcp.handshake.McpInitializeResult``: ``(protocolVersion,
    capabilities, serverInfo)`` as sent; raises ``PLUGIN_START_FAILED`` naming the invalid fields."""
    from pydantic import ValidationError  # noqa: PLC0415

    from hostd.mcp import handshake  # noqa: PLC0415

    exceeded = check_json(result)  # before the model: pydantic would recurse as deep as the server nests
    if exceeded is not None:
        raise start_error(
            f"invalid answer from the server: the initialize result is nested deeper than {exceeded.limit} levels"
        )
    try:
        handshake.McpInitializeResult.model_validate(result)
    except ValidationError as exc:
        raise start_error(f"invalid answer from the server: {_pydantic_summary(exc)}") from None
    except ValueError as exc:  # pydantic's "Maximum serialization depth exceeded" (issue 10)
        raise start_error(f"invalid answer from the server: {exc}") from None
    return result["protocolVersion"], result["capabilities"], result["serverInfo"]


def _pydantic_summary(exc: Any) -> str:
    """The first five problems of a pydantic ``ValidationError``, one line."""
    parts = []
    for item in exc.errors()[:5]:
        where = ".".join(str(p) for p in item["loc"])
        parts.append(f"{where}: {item['msg']}")
    more = len(exc.errors()) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class EraNegotiation:
    """The era choice and handshake of a link's start; the base of :class:`hostd.mcp.link.PluginLink`.

    The attributes below and :meth:`_send` / :meth:`_start_error` are the link's (its ``__init__``
    sets them; its transport sends).
    """

    session: ClientSession
    failure: str | None
    done: trio.Event
    _protocol: ProtocolChoice
    _launch_digest: str | None

    async def _send(self, message: dict[str, Any]) -> bool:
        """The transport's outbound hook (:meth:`hostd.mcp.link.PluginLink._send`)."""
        raise NotImplementedError

    def _start_error(self, reason: str, **data: Any) -> HostError:
        """``PLUGIN_START_FAILED`` with the stderr excerpt (:meth:`hostd.mcp.link.PluginLink._start_error`)."""
        raise NotImplementedError

    _stage = "initialize"

    async def _negotiate(self, startup_timeout: float) -> None:
        """Settle the era (manifest ``backend.protocol``) and adopt it in the session.

        The ``server/discover`` probe waits at most 10 s (and half the start
        timeout); a modern server that was too slow for it still answers the
        ``initialize`` that follows with -32022 naming its versions, and is
        probed once more (the SDK's ``negotiate_auto`` does the same).
        """
        choice = self._protocol
        if choice not in ("auto", "legacy", *LEGACY_VERSIONS, *MODERN_VERSIONS):
            raise self._start_error(
                f"backend.protocol {choice!r} is not a revision hostd speaks "
                f"({', '.join((*LEGACY_VERSIONS, *MODERN_VERSIONS))})"
            )
        probe_timeout = min(DISCOVER_TIMEOUT, startup_timeout / 2)
        if choice == "legacy" or choice in LEGACY_VERSIONS:
            pin = choice if choice in LEGACY_VERSIONS else None
            offered = await self._initialize(pin)
            if offered is not None:
                wanted = f"pins {pin}" if pin is not None else "is 'legacy'"
                raise self._start_error(
                    f"backend.protocol {wanted} but the server offers {', '.join(offered)}", offered=offered
                )
            return
        if choice == "auto" and self._cached() == "legacy":
            if await self._initialize(None) is None:
                return
            ERA_CACHE.pop(self._launch_digest or "", None)  # the same launch refuses the handshake now: probe
        pin = choice if choice in MODERN_VERSIONS else None
        offered = await self._probe(pin or MODERN_VERSIONS[-1], probe_timeout)
        if self._modern():
            self._remember("modern")
            return
        if pin is not None:
            if offered is None:  # not modern at all: ask the legacy handshake which version it speaks
                offered = await self._legacy_offer()
            raise self._start_error(
                f"backend.protocol pins {pin} but the server offers {', '.join(offered) or 'no version'}",
                offered=offered,
            )
        offered = await self._initialize(None)
        if offered is None:
            self._remember("legacy")
            return
        mutual = [v for v in MODERN_VERSIONS if v in offered]
        if mutual:
            await self._probe(mutual[-1], startup_timeout)
            if self._modern():
                self._remember("modern")
                return
        raise self._start_error(
            f"backend.protocol is 'auto' but the server offers {', '.join(offered)}", offered=offered
        )

    def _modern(self) -> bool:
        """Whether the session adopted the modern era (a call, so checks after awaits are not narrowed away)."""
        return self.session.era == "modern"

    def _cached(self) -> str | None:
        return ERA_CACHE.get(self._launch_digest) if self._launch_digest else None

    def _remember(self, era: Literal["legacy", "modern"]) -> None:
        if self._launch_digest and self._protocol == "auto":
            ERA_CACHE[self._launch_digest] = era

    async def _probe(self, version: str, timeout: float) -> list[str] | None:
        """``server/discover`` at ``version``; adopt the modern era on positive evidence.

        Returns the versions the server named when it is modern-capable but
        shares no modern version (or ``None`` when it gave no modern evidence:
        then the caller falls back to ``initialize``).
        """
        self._stage = "server/discover"
        for _attempt in range(2):
            waiter = _Waiter(None, bounded=False)
            rid, message = self.session.discover_request(version, context=waiter)
            if not await self._send(message):
                raise LinkClosed(self.failure or "the plugin is stopping")
            with trio.move_on_after(timeout):
                await waiter.done.wait()
            if waiter.reply is None:
                if self.done.is_set():
                    raise LinkClosed(self.failure or "the plugin stopped")
                cancel = self.session.cancel(rid, "no answer to server/discover: trying initialize")
                if cancel is not None:
                    await self._send(cancel)
                return None  # a timeout is legacy evidence
            error = waiter.reply.get("error")
            if error is not None:
                if not isinstance(error, dict) or error.get("code") != UNSUPPORTED_PROTOCOL_VERSION:
                    return None
                supported = _supported(error.get("data"))
                mutual = [v for v in MODERN_VERSIONS if v in supported]
                if mutual and _attempt == 0:
                    version = mutual[-1]
                    continue
                if supported and not any(v in LEGACY_VERSIONS for v in supported):
                    return supported  # modern-only and disjoint
                return None
            result = waiter.reply.get("result")
            adopted = _validate_discover(result)
            if adopted is None:
                return None  # an unusable result is not modern evidence
            supported, capabilities, server_info = adopted
            mutual = [v for v in MODERN_VERSIONS if v in supported]
            if not mutual:
                return None if any(v in LEGACY_VERSIONS for v in supported) else supported
            self.session.adopt_modern(mutual[-1], capabilities, server_info)
            return None
        return None

    async def _initialize(self, version: str | None) -> list[str] | None:
        """The legacy handshake offering ``version`` (default the newest); adopt what the server answers.

        Returns None once adopted, or the versions a -32022 answer named (the
        server refuses the handshake). Raises ``PLUGIN_START_FAILED`` for an
        invalid answer or a version it did not ask for, :class:`PluginRequestError`
        for any other error.
        """
        self._stage = "initialize"
        offer = version or LEGACY_VERSIONS[-1]
        try:
            result = await self._call_raw(offer)
        except PluginRequestError as exc:
            offered = _supported(exc.data) if exc.code == UNSUPPORTED_PROTOCOL_VERSION else []
            if not offered:
                raise
            return offered
        answered, capabilities, server_info = _validate_initialize(result, self._start_error)
        if answered not in LEGACY_VERSIONS:
            raise self._start_error(f"Unsupported protocol version from the server: {answered}", offered=[answered])
        if version is not None and answered != version:
            raise self._start_error(
                f"backend.protocol pins {version} but the server offers {answered}", offered=[answered]
            )
        self.session.adopt_legacy(answered, capabilities, server_info)
        await self._send(self.session.initialized_notification())
        self._stage = "tools/list"
        return None

    async def _legacy_offer(self) -> list[str]:
        """What version a server that is not modern answers ``initialize`` with (for a failed pin's message)."""
        try:
            result = await self._call_raw(LEGACY_VERSIONS[-1])
        except PluginRequestError:
            return []
        version = result.get("protocolVersion")
        return [version] if isinstance(version, str) else []

    async def _call_raw(self, version: str) -> dict[str, Any]:
        """``initialize`` offering ``version``; its raw result."""
        waiter = _Waiter(None, bounded=False)
        rid, message = self.session.initialize_request(version, context=waiter)
        try:
            if not await self._send(message):
                raise LinkClosed(self.failure or "the plugin is stopping")
            await waiter.done.wait()
        finally:
            if not waiter.done.is_set():
                self.session.forget(rid)
        if waiter.reply is None:
            raise LinkClosed(self.failure or "the plugin stopped")
        return _result_of(waiter.reply)
