"""Supervision of one plugin: its states, its running instance, its tool calls.

States (``docs/protocol.md`` "PluginStatus")::

    stopped --enable--> starting --handshake, tools ok--> ready
    starting --any failure--> error            (nothing left: no process, no tool)
    ready --crash, framing violation--> unhealthy   (tools unregistered at once)
    ready | unhealthy | error --disable--> stopped
    ready | unhealthy | error --restart--> starting

:data:`TRANSITIONS` is the whole rule set; :meth:`PluginSupervisor._set_state`
refuses anything else, so a state the table does not allow is a bug that
shows up at once.

An instance (one spawned process tree and its :class:`~hostd.link.PluginLink`)
runs as a task in the host's plugin nursery, not in the request that enabled
it, so it outlives that request; it always ends through the same ``finally``:
unregister the tools, close stdin, wait, terminate the tree, kill it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import mcp_types as types
import orjson
import trio
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from hostd.errors import ErrorKind, HostError
from hostd.link import PluginLink, upstream_error
from hostd.manifest import Manifest
from hostd.redact import Redactor
from hostd.registry import ToolRegistry
from hostd.tools import HostTool, convert_tools
from sandbox.launch import Launch, LaunchError
from sandbox.process import spawn

log = logging.getLogger("hostd.supervisor")

#: Default bound of one tool result as sent to the parent, in bytes.
RESULT_LIMIT = 256 * 1024
#: Seconds the plugin gets after stdin EOF, and again after SIGTERM (case E7).
STOP_GRACE = 2.0


class State(Enum):
    """A plugin's lifecycle state (``PluginStatus.status``)."""

    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    UNHEALTHY = "unhealthy"
    ERROR = "error"


TRANSITIONS: dict[State, frozenset[State]] = {
    State.STOPPED: frozenset({State.STARTING}),
    State.STARTING: frozenset({State.READY, State.ERROR, State.STOPPED}),
    State.READY: frozenset({State.UNHEALTHY, State.STOPPED, State.STARTING}),
    State.UNHEALTHY: frozenset({State.STOPPED, State.STARTING}),
    State.ERROR: frozenset({State.STOPPED, State.STARTING}),
}

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


def _iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PluginSupervisor:
    """Runs and watches one installed plugin.

    ``launch`` is resolved by the host (sandbox policy); ``registry`` is the
    host's; ``notify`` sends control-protocol notifications to the parent.
    Each public coroutine raises :class:`HostError` with the reason.
    """

    def __init__(
        self,
        manifest: Manifest,
        registry: ToolRegistry,
        notify: Notify,
        nursery: trio.Nursery,
        *,
        result_limit: int = RESULT_LIMIT,
    ) -> None:
        self.manifest = manifest
        self.state = State.STOPPED
        self.restarts = 0
        self.started_at: float | None = None
        self.error: dict[str, Any] | None = None
        self.protocol_version: str | None = None
        self.server_name: str | None = None
        self.server_version: str | None = None
        self.last_exit: str | None = None
        self._registry = registry
        self._notify = notify
        self._nursery = nursery
        self._result_limit = result_limit
        self._link: PluginLink | None = None
        self._instance_done: trio.Event | None = None
        self._op_lock = trio.Lock()
        self._last_seen_fallback: float | None = None

    @property
    def plugin_id(self) -> str:
        """The manifest's ``id``."""
        return self.manifest.id

    # -- status -----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``PluginStatus`` as sent on the wire (``docs/protocol.md``)."""
        link = self._link
        last_seen = link.last_seen_at if link is not None else self._last_seen_fallback
        return {
            "plugin_id": self.plugin_id,
            "backend_type": self.manifest.backend.type,
            "transport": self.manifest.backend.transport,
            "status": self.state.value,
            "tools_count": self._registry.count(self.plugin_id),
            "started_at": _iso(self.started_at),
            "last_seen_at": _iso(last_seen),
            "protocol_version": self.protocol_version,
            "server_name": self.server_name,
            "server_version": self.server_version,
            "error": self.error,
            "restarts": self.restarts,
            "last_exit": self.last_exit,
        }

    async def _set_state(self, state: State, error: HostError | None = None) -> None:
        if state is not self.state and state not in TRANSITIONS[self.state]:
            raise AssertionError(f"illegal transition {self.state.value} -> {state.value} for {self.plugin_id}")
        self.state = state
        if error is not None:
            self.error = {"kind": error.kind.name, "message": error.message, **error.data}
        elif state in (State.STARTING, State.READY, State.STOPPED):
            self.error = None
        await self._notify("plugins/statusChanged", self.status())

    async def _tools_changed(self) -> None:
        await self._notify("tools/listChanged", {"revision": self._registry.revision})

    # -- enable / disable / restart ---------------------------------------------

    async def enable(self, launch: Launch) -> dict[str, Any]:
        """Start the plugin and return its status once ``ready``.

        Raises ``PLUGIN_START_FAILED`` (state ``error``, nothing left running)
        or ``TOOL_CONFLICT``. Returns at once when already ``ready``.
        """
        async with self._op_lock:
            if self.state is State.READY:
                return self.status()
            await self._stop_instance()
            return await self._start(launch)

    async def restart(self, launch: Launch) -> dict[str, Any]:
        """Stop the running instance (if any) and start a new one: the whole discovery again."""
        async with self._op_lock:
            await self._stop_instance()
            self.restarts += 1
            return await self._start(launch)

    async def disable(self, *, grace: float = STOP_GRACE) -> dict[str, Any]:
        """Unregister the tools, end the whole process tree, and return the ``stopped`` status."""
        async with self._op_lock:
            await self._stop_instance(grace=grace)
            if self.state is not State.STOPPED:
                await self._set_state(State.STOPPED)
            return self.status()

    async def _start(self, launch: Launch) -> dict[str, Any]:
        await self._set_state(State.STARTING)
        try:
            await self._nursery.start(self._run_instance, launch)
        except HostError as error:
            await self._set_state(State.ERROR, error)
            raise
        return self.status()

    async def _stop_instance(self, *, grace: float = STOP_GRACE) -> None:
        link, done = self._link, self._instance_done
        if link is None or done is None:
            return
        link.close()
        self._stop_grace = grace
        with trio.CancelScope(shield=True):
            await done.wait()

    async def _run_instance(self, launch: Launch, *, task_status: trio.TaskStatus[None]) -> None:
        """One process tree from spawn to reap; reports ``started`` once ready."""
        manifest = self.manifest
        backend = manifest.backend
        try:
            process = await spawn(launch)
        except LaunchError as exc:
            raise HostError(
                ErrorKind.PLUGIN_START_FAILED,
                f"plugin {self.plugin_id} failed to start: {exc}",
                plugin=self.plugin_id,
                reason=str(exc),
                launchError=exc.kind,
                stderrTail=[],
            ) from None
        self._stop_grace = STOP_GRACE
        done = trio.Event()
        link = PluginLink(
            self.plugin_id,
            process,
            redact=Redactor(backend.env.values()),
            on_log=self._log,
            on_notification=self._notification,
            stdout_noise=backend.stdout_noise,
        )
        self._link, self._instance_done = link, done
        ready = False
        try:
            async with trio.open_nursery() as nursery:
                discovery = await nursery.start(link.run, backend.startup_timeout_seconds)
                tools = convert_tools(
                    self.plugin_id,
                    discovery.tools,
                    permissions=manifest.permissions,
                    contributes=manifest.contributes.tools,
                )
                self.protocol_version = discovery.protocol_version
                self.server_name = discovery.server_name
                self.server_version = discovery.server_version
                self._registry.register(self.plugin_id, tools)
                self.started_at = time.time()
                ready = True
                await self._set_state(State.READY)
                await self._tools_changed()
                task_status.started()
                await link.done.wait()
                if link.failure is not None:
                    await self._unregister()
                    error = HostError(
                        ErrorKind.PLUGIN_HOST_UNAVAILABLE,
                        f"plugin {self.plugin_id} {link.failure}",
                        plugin=self.plugin_id,
                        reason=link.failure,
                        stderrTail=link.stderr.tail(10),
                    )
                    await self._set_state(State.UNHEALTHY, error)
                nursery.cancel_scope.cancel()
        except HostError as error:
            if not ready and "stderrTail" not in error.data:
                error.data["stderrTail"] = link.stderr.tail(10)
                error.data.setdefault("plugin", self.plugin_id)
            raise
        finally:
            with trio.CancelScope(shield=True):
                await self._unregister()
                report = await process.stop(grace=self._stop_grace)
                self.last_exit = f"{report.step}, code {report.returncode}"
                self._last_seen_fallback = link.last_seen_at
                self._link = None
                done.set()

    async def _unregister(self) -> None:
        if self._registry.unregister(self.plugin_id):
            await self._tools_changed()

    # -- plugin -> parent -------------------------------------------------------

    async def _log(self, level: str, source: str, message: str) -> None:
        await self._notify(
            "plugins/log", {"plugin": self.plugin_id, "level": level, "source": source, "message": message}
        )

    async def _notification(self, message: types.ServerNotification) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            log.info("plugin %s: tools/list_changed (re-discovery is not automatic yet)", self.plugin_id)

    # -- tools/call ---------------------------------------------------------------

    async def call(
        self, tool: HostTool, arguments: dict[str, Any], *, timeout: float | None, report_progress: ProgressSink
    ) -> dict[str, Any]:
        """Call ``tool`` on the plugin; return ``{content, structuredContent?}``.

        ``timeout`` (seconds) defaults to the manifest's ``tool_timeout_seconds``.
        Raises ``TOOL_TIMEOUT`` (the plugin gets ``notifications/cancelled``),
        ``MCP_TOOL_CALL_FAILED`` (``isError: true``), ``MCP_UPSTREAM_ERROR``
        (a JSON-RPC error, whole in ``data.upstream``), ``PLUGIN_HOST_UNAVAILABLE``
        and ``MCP_TOOL_RESULT_TOO_LARGE``. Cancelling the caller abandons the
        request, which sends ``notifications/cancelled`` to the plugin.
        """
        link = self._link
        if self.state is not State.READY or link is None or link.session is None:
            raise self._unavailable(tool, f"plugin {self.plugin_id} is {self.state.value}")
        limit = timeout if timeout is not None else self.manifest.backend.tool_timeout_seconds

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await report_progress(progress, total, message)

        result: types.CallToolResult | None = None
        with trio.move_on_after(limit) as scope:
            try:
                raw = await link.session.call_tool(tool.remote_name, arguments, progress_callback=on_progress)
            except MCPError as exc:
                if link.done.is_set():
                    raise self._unavailable(tool, f"plugin {self.plugin_id} {link.failure or 'stopped'}") from None
                raise HostError(
                    ErrorKind.MCP_UPSTREAM_ERROR,
                    f"{tool.name} failed: {exc.error.message}",
                    plugin=self.plugin_id,
                    tool=tool.name,
                    upstream=upstream_error(exc),
                ) from None
            except (RuntimeError, ValidationError) as exc:
                raise HostError(
                    ErrorKind.MCP_UPSTREAM_ERROR,
                    f"{tool.name} returned an invalid result: {exc}",
                    plugin=self.plugin_id,
                    tool=tool.name,
                ) from None
            assert isinstance(raw, types.CallToolResult)
            result = raw
        if result is None or scope.cancelled_caught:
            raise HostError(
                ErrorKind.TOOL_TIMEOUT,
                f"{tool.name} did not answer within {limit:g} s; the plugin was sent notifications/cancelled",
                plugin=self.plugin_id,
                tool=tool.name,
                timeoutSeconds=limit,
            )
        out: dict[str, Any] = {
            "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content]
        }
        if result.structured_content is not None:
            out["structuredContent"] = result.structured_content
        size = len(orjson.dumps(out))
        if result.is_error:
            if size > self._result_limit:
                out = {"content": [], "truncated": True}
            raise HostError(
                ErrorKind.MCP_TOOL_CALL_FAILED,
                f"{tool.name} reported an error: {_first_text(result) or 'no text'}",
                plugin=self.plugin_id,
                tool=tool.name,
                **out,
            )
        if size > self._result_limit:
            raise HostError(
                ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
                f"{tool.name} returned {size} bytes, over the {self._result_limit}-byte result bound",
                plugin=self.plugin_id,
                tool=tool.name,
                size=size,
                limit=self._result_limit,
            )
        return out

    def _unavailable(self, tool: HostTool, reason: str) -> HostError:
        link = self._link
        return HostError(
            ErrorKind.PLUGIN_HOST_UNAVAILABLE,
            reason,
            plugin=self.plugin_id,
            tool=tool.name,
            stderrTail=link.stderr.tail(10) if link is not None else [],
        )


def _first_text(result: types.CallToolResult) -> str | None:
    for item in result.content:
        if isinstance(item, types.TextContent):
            return item.text[:500]
    return None
