"""Supervision of one plugin: the driver of its lifecycle table, and its tool calls.

States and their rules are :mod:`hostd.plugins.lifecycle`: a pure (state, event) ->
(state, actions) table. This class is its driver: it turns what happens (a
request, the end of a start, the end of the link, the watchdog, a missed
ping, a re-discovery, the restart timer) into an :class:`~hostd.plugins.lifecycle.Event`,
feeds it to :meth:`PluginSupervisor._feed`, which stores the next state and
performs the actions in order. Nothing else assigns ``self.state``, and the
supervisor tells the host about a state change only by notifications
(``plugins/statusChanged``, ``tools/listChanged``).

The supervisor and the host talk in one direction each. The host calls the
public coroutines (``enable``, ``restart``, ``disable``, ``retry``,
``repin``...) and hands every start its inputs in a :class:`Start` (the
approved launch, the manifest, the pins, the limits); it never writes a
supervisor field. The supervisor tells the host what happened by typed
events (:data:`SupervisorEvent` in :mod:`hostd.plugins.events`, through the one ``on_event`` coroutine):
``RestartCounted`` (a statistic to save), ``ToolsPinned`` (the first pins
after an approval, which must be recorded before any tool is served: a
failure fails the start) and ``RetryDue`` (the restart timer fired: the host
runs the trust gate and answers with :meth:`PluginSupervisor.retry`). It
never reads or writes host state.

Where the rest lives: the running instance (spawn, discovery, the instance's tasks, its one
``finally``) is :class:`hostd.plugins.instance.InstanceRunner`, the supervisor's base class; the
shaping of a ``tools/call`` response into the parent's result or error is :mod:`hostd.plugins.results`.

An instance (a :class:`~hostd.plugins.backends.Instance`: a spawned process tree or a remote connection,
and its :class:`~hostd.mcp.link.PluginLink`) runs as a task in the host's plugin nursery, not in the
request that enabled it, so it outlives that request; it always ends through the same ``finally``:
unregister the tools, close stdin, wait, terminate the tree, kill it, then empty the plugin's ``TMPDIR``
(also before each spawn, for what a killed hostd left behind): whatever stops an instance (disable,
restart, crash, a limit, hostd's shutdown), its temporary files do not outlive it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import trio

from hostd.control.models import PluginStatus
from hostd.install.manifest import Manifest
from hostd.mcp.link import LinkClosed, PluginLink, ReplyTooLarge
from hostd.mcp.listing import ListingBounds
from hostd.mcp.tools import RegisteredTool
from hostd.plugins import lifecycle, trust
from hostd.plugins.backends import Instance
from hostd.plugins.events import (
    NetworkRequested,
    Notify,
    OnEvent,
    ProgressSink,
    RestartCounted,
    RetryDue,
    SupervisorEvent,
    ToolsPinned,
)
from hostd.plugins.instance import STOP_GRACE, InstanceRunner, Liveness, Opener, empty_folder, launch_failed
from hostd.plugins.lifecycle import Action, Event, transition
from hostd.plugins.registry import ToolRegistry
from hostd.plugins.restart import RefreshPacer, RestartPolicy
from hostd.plugins.results import tool_error, tool_result
from hostd.wire.content import ContentLimits
from hostd.wire.errors import ErrorKind, HostError, unwrap_host_error
from hostd.wire.framing import PLUGIN_FRAME_LIMIT, RESULT_LIMIT
from sandbox.launch import Launch
from sandbox.policy import IsolationPolicy

if TYPE_CHECKING:
    from hostd.net.allowlist import Allowlist
    from hostd.net.proxy import PluginProxy
    from hostd.remote.endpoint import SecretLookup
    from hostd.remote.oauth import Authorizer

__all__ = [
    "STOP_GRACE",
    "Liveness",
    "NetworkRequested",
    "Notify",
    "OnEvent",
    "PluginSupervisor",
    "ProgressSink",
    "RestartCounted",
    "RetryDue",
    "Start",
    "State",
    "SupervisorEvent",
    "ToolsPinned",
    "empty_folder",
    "launch_failed",
]

log = logging.getLogger("hostd.plugins.supervisor")

#: A plugin's state (:class:`hostd.plugins.lifecycle.State`), named here too for the host.
State = lifecycle.State


def _never(name: str) -> bool:
    return False


@dataclass(frozen=True)
class Start:
    """What the host hands a start (enable, restart, a retry): everything it decided for it.

    ``launch``: the approved launch. ``manifest``: the manifest it was approved
    with. ``pins``: the tool pins (:mod:`hostd.plugins.trust`; None: the first discovery
    pins). ``limits``: the isolation policy (the watchdog's RSS and CPU limits).
    ``disk_limit``: the bound of the data folder and TMPDIR together, in bytes
    (None: no bound). ``listing``: the aggregate bounds of the plugin's listings
    (hostd/mcp/listing.py; the parent's ``plugins/grant`` limits, else the defaults).
    """

    launch: Launch
    manifest: Manifest
    pins: trust.Pins | None = None
    limits: IsolationPolicy | None = None
    disk_limit: int | None = None
    listing: ListingBounds = field(default_factory=ListingBounds)


def _iso(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class PluginSupervisor(InstanceRunner):
    """Runs and watches one installed plugin.

    ``launch`` is resolved by the host (sandbox policy); ``registry`` is the
    host's; ``notify`` sends control-protocol notifications to the parent;
    ``open_instance`` opens an instance in place of the spawn or connection
    (unit tests: tests/test_supervisor_driver.py).
    Each public coroutine raises :class:`HostError` with the reason.
    """

    def __init__(
        self,
        manifest: Manifest,
        registry: ToolRegistry,
        notify: Notify,
        nursery: trio.Nursery,
        *,
        on_event: OnEvent,
        restart_policy: RestartPolicy | None = None,
        liveness: Liveness | None = None,
        result_limit: int = RESULT_LIMIT,
        frame_limit: int = PLUGIN_FRAME_LIMIT,
        restarts: int = 0,
        open_instance: Opener | None = None,
    ) -> None:
        self.manifest = manifest
        self.policy = restart_policy if restart_policy is not None else RestartPolicy()
        self.liveness = liveness if liveness is not None else Liveness()
        self.next_retry_at: float | None = None
        self.state = State.STOPPED
        self.restarts = restarts
        self.started_at: float | None = None
        self.error: dict[str, Any] | None = None
        self.protocol_version: str | None = None
        #: The MCP era of the running (or last) instance: "legacy" or "modern"; None before a start.
        self.era: Literal["legacy", "modern"] | None = None
        self.server_name: str | None = None
        self.server_version: str | None = None
        self.last_exit: str | None = None
        #: The pins the running instance is screened against (from its :class:`Start`, or
        #: :meth:`repin`); None until the first discovery after an approval pins them.
        self.pinned: trust.Pins | None = None
        #: Tools withheld because their definition changed since approval: name -> digests.
        self.withheld: trust.Withheld = {}
        #: The host names the current start pinned on first use (:mod:`hostd.plugins.trust`), else None.
        self.first_use: list[str] | None = None
        self._current_tools: list[RegisteredTool] = []
        #: The resource limit the last instance was stopped for, if any.
        self.limit_hit: dict[str, Any] | None = None
        self._registry = registry
        self._notify = notify
        self._nursery = nursery
        self._result_limit = result_limit
        self._frame_limit = frame_limit
        self._link: PluginLink | None = None
        #: The running instance (a process tree or a connection), from its start to its stop.
        self._instance: Instance | None = None
        #: The running instance's network proxy (issue 26) and the allowlist change made since its launch was
        #: taken (:meth:`InstanceRunner.apply_network`).
        self._net_proxy: PluginProxy | None = None
        self._net_rules: tuple[Allowlist, list[str]] | None = None
        #: The launch of the instance started last (its Landlock rules are fixed at exec): what a running
        #: plugin may reach (hostd/host/call_grants.py); ``None`` before the first start.
        self.running_launch: Launch | None = None
        #: How an instance is opened (None: spawn the process tree or connect, :meth:`InstanceRunner._open`).
        self._opener = open_instance
        self._instance_done: trio.Event | None = None
        self._op_lock = trio.Lock()
        self._last_seen_fallback: float | None = None
        #: The isolation policy of the running instance (the watchdog reads its limits).
        self.limits: IsolationPolicy | None = None
        #: The disk bound of the running instance in bytes (None: no bound).
        self._disk_limit: int | None = None
        #: The aggregate bounds of the running instance's listings (hostd/mcp/listing.py).
        self._listing_bounds = ListingBounds()
        #: The folders the disk bound covers for the running instance (data folder, TMPDIR).
        self._disk_paths: tuple[str, ...] = ()
        #: The isolation layers the shim reported in force for the running instance.
        self.isolation: list[str] = []
        self._on_event = on_event
        self._retry_scope: trio.CancelScope | None = None
        self._start_scope: trio.CancelScope | None = None
        self._ready_since: float | None = None
        self._pacer = RefreshPacer()
        self._refresh_wanted = trio.Event()
        #: Whether the running instance got as far as ``ready`` (a full stop grace then).
        self._instance_ready = False
        #: The event of a failure hostd itself caused (ping, limit, re-discovery), else None.
        self._failure_event: Event | None = None
        #: MCP features beyond tools (hostd.mcp.client_features.PluginFeatures), set by the host.
        self.features: Any = None
        #: OAuth for a remote plugin (hostd.remote.oauth.Authorizer), set by the host; True while a start waits on it.
        self.authorizer: Authorizer | None = None
        #: Where ``${secret:NAME}`` header values come from (the host's secret store), set by the host.
        self.secret_lookup: SecretLookup = _no_secrets
        #: Names the proxy resolves to a fixed address (``hostd serve --resolve``), set by the host.
        self.resolve_pins: dict[str, str] = {}
        #: Whether the parent could let a name through on some port (transparent DNS gives it an address then).
        self.network_askable: Callable[[str], bool] = _never
        self.authorizing = False

    # -- status -----------------------------------------------------------------

    def status(self, *, pinned: list[str] | None = None) -> dict[str, Any]:
        """:class:`hostd.control.models.PluginStatus` as sent on the wire (``docs/protocol.md``).

        ``pinned``: the host names an enable or restart pinned on first use (its result only).
        """
        link = self._link
        last_seen = link.last_seen_at if link is not None else self._last_seen_fallback
        return PluginStatus(
            plugin_id=self.plugin_id,
            backend_type=self.manifest.backend.type,
            transport=self.manifest.backend.transport,
            status="authorizing" if self.authorizing and self.state is State.STARTING else self.state.value,
            tools_count=self._registry.count(self.plugin_id),
            started_at=_iso(self.started_at),
            last_seen_at=_iso(last_seen),
            protocol_version=self.protocol_version,
            era=self.era,
            server_name=self.server_name,
            server_version=self.server_version,
            error=self.error,
            restarts=self.restarts,
            last_exit=self.last_exit,
            next_retry_at=_iso(self.next_retry_at),
            withheld=sorted(self.withheld),
            isolation=self.isolation,
            pinned=pinned,
        ).wire()

    # -- the lifecycle driver ------------------------------------------------------

    async def _feed(
        self,
        event: Event,
        *,
        error: HostError | None = None,
        launch: Launch | None = None,
        grace: float = STOP_GRACE,
        stop: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Apply ``event`` (:func:`hostd.plugins.lifecycle.transition`): store the next state, then perform the actions.

        ``error`` is what ``record_error`` records; ``launch`` what ``spawn``
        starts; ``grace`` (seconds) the stop grace of ``stop_instance``;
        ``stop`` replaces ``stop_instance`` when the instance itself reports
        its failure (it cannot wait for its own end). Raises what ``spawn``
        raises (the start's error, ``Cancelled``); cancellation stops the
        remaining actions (a start's caller then feeds ``CANCEL``).
        """
        state, actions = transition(self.state, event)
        log.debug("plugin %s: %s in %s -> %s", self.plugin_id, event.name, self.state.value, state.value)
        self.state = state
        for action in actions:
            await self._perform(action, event, error=error, launch=launch, grace=grace, stop=stop)

    async def _perform(
        self,
        action: Action,
        event: Event,
        *,
        error: HostError | None,
        launch: Launch | None,
        grace: float,
        stop: Callable[[], Awaitable[None]] | None,
    ) -> None:
        if action is Action.CANCEL_RETRY:
            self._cancel_retry()
        elif action is Action.RESET_POLICY:
            self.policy.reset()
        elif action is Action.STOP_INSTANCE:
            await (stop() if stop is not None else self._stop_instance(grace=grace))
        elif action is Action.COUNT_RESTART:
            self.restarts += 1
        elif action is Action.SAVE:
            try:
                await self._on_event(RestartCounted(self.plugin_id, self.restarts))
            except HostError as failed:  # a statistic: the restart goes ahead; the next write records it
                log.warning("plugin %s: %s", self.plugin_id, failed.message)
        elif action is Action.CLEAR_ERROR:
            self.error = None
        elif action is Action.RECORD_ERROR:
            assert error is not None, f"{event.name} carries no error"
            self.error = {"kind": error.kind.name, "message": error.message, **error.data}
        elif action is Action.NOTIFY_STATUS:
            await self._notify("plugins/statusChanged", self.status())
        elif action is Action.SPAWN:
            assert launch is not None, f"{event.name} carries no launch"
            await self._spawn(launch, Event.RETRY_FAILED if event is Event.TIMER else Event.START_FAILED)
        elif action is Action.ANNOUNCE_TOOLS:
            await self._tools_changed()
        elif action is Action.UNREGISTER_TOOLS:
            await self._unregister()
        elif action is Action.APPLY_RESTART_POLICY:
            await self._apply_restart_policy()
        else:  # pragma: no cover - every Action is handled above
            raise AssertionError(action)

    def _spawns(self, event: Event) -> bool:
        """Whether ``event`` would start an instance now (its preconditions are then checked first)."""
        return Action.SPAWN in transition(self.state, event)[1]

    async def _start(self, event: Event, start: Start) -> None:
        """Feed a start event (ENABLE, RESTART, TIMER); a start cut short by cancellation feeds ``CANCEL``.

        When the event spawns, ``start``'s manifest, pins and limits become the
        instance's (only then: a refused event changes nothing).

        Call with the operation lock held. Raises the start's ``HostError``
        (state ``error``), ``PLUGIN_STATE_CONFLICT`` (a disable abandoned it;
        state ``stopped``) or ``Cancelled`` (state ``stopped``: however far the
        start got, whatever it spawned is ended first).
        """
        if self._spawns(event):
            self.manifest, self.pinned = start.manifest, start.pins
            self.running_launch = start.launch
            self.limits, self._disk_limit = start.limits, start.disk_limit
            self._listing_bounds = start.listing
        try:
            await self._feed(event, launch=start.launch)
        except HostError:
            raise
        except BaseException as exc:
            # Cancelled from outside: the parent's $/cancelRequest of enable or restart, or shutdown,
            # wherever the start was (even before the spawn, in a blocked notification, or while it
            # announced ready). The state must not stay "starting" (issue 11), nor "ready" with the
            # start's instance gone.
            with trio.CancelScope(shield=True):
                await self._feed(Event.CANCEL)
            cancelled = _only_cancelled(exc)
            if cancelled is not None and cancelled is not exc:
                raise cancelled from None  # the caller sees trio.Cancelled, not the instance's nursery group
            raise

    async def _spawn(self, launch: Launch, failed: Event) -> None:
        """Action ``spawn``: run an instance until ready, then feed how the start ended.

        ``failed`` is the event of a failed start (``START_FAILED`` or
        ``RETRY_FAILED``). A disable abandons the start through
        ``self._start_scope``: ``CANCEL``, then ``PLUGIN_STATE_CONFLICT``.
        """
        scope = trio.CancelScope()
        self._start_scope = scope
        try:
            with scope, unwrap_host_error():
                await self._nursery.start(self._run_instance, launch)
        except HostError as error:
            await self._feed(failed, error=error)
            raise
        finally:
            self._start_scope = None
        if scope.cancelled_caught:  # disable (or uninstall, or shutdown) came first
            await self._feed(Event.CANCEL)
            raise HostError(
                ErrorKind.PLUGIN_STATE_CONFLICT,
                f"plugin {self.plugin_id} was disabled while starting",
                plugin=self.plugin_id,
                status=State.STOPPED.value,
            )

    async def refuse(self, error: HostError) -> None:
        """Record why a stopped plugin was not started (restore found a change): state ``error``."""
        async with self._op_lock:
            await self._feed(Event.REFUSE, error=error)

    # -- enable / disable / restart ---------------------------------------------

    async def enable(self, start: Start) -> dict[str, Any]:
        """Start the plugin and return its status once ``ready``.

        Raises ``PLUGIN_START_FAILED`` (state ``error``, nothing left running),
        ``TOOL_CONFLICT`` (at registration) or ``PLUGIN_STATE_CONFLICT`` (a
        disable abandoned the start). Returns at once when already ``ready``.
        Cancelled: the start is abandoned, its tree ended, state ``stopped``.
        """
        async with self._op_lock:
            self.first_use = None
            await self._start(Event.ENABLE, start)
            return self.status(pinned=self.first_use)

    async def restart(self, start: Start) -> dict[str, Any]:
        """Stop the running instance (if any) and start a new one: the whole discovery again.

        Raises and, when cancelled, ends as :meth:`enable` does.
        """
        async with self._op_lock:
            self.first_use = None
            await self._start(Event.RESTART, start)
            return self.status(pinned=self.first_use)

    async def disable(self, *, grace: float = STOP_GRACE) -> dict[str, Any]:
        """Unregister the tools, end the whole process tree, and return the ``stopped`` status.

        A start in progress is abandoned at once (its tree is ended; the
        enable answers ``PLUGIN_STATE_CONFLICT``) rather than waited for.
        ``grace`` (seconds) is the stop grace after stdin EOF and after SIGTERM.
        """
        self._cancel_retry()
        if self._start_scope is not None:
            self._start_scope.cancel()
        async with self._op_lock:
            await self._feed(Event.DISABLE, grace=grace)
            return self.status()

    def expedite(self) -> None:
        """Make a stop in progress skip its remaining grace (a second SIGTERM)."""
        self._stop_grace = 0.0
        instance = self._instance
        if instance is not None:
            instance.kill_now()

    def _cancel_retry(self) -> None:
        if self._retry_scope is not None:
            self._retry_scope.cancel()
            self._retry_scope = None
        self.next_retry_at = None

    async def _apply_restart_policy(self) -> None:
        """Action ``apply_restart_policy``: arm the restart timer, feed ``GIVE_UP``, or (mode never) nothing."""
        if self.state not in (State.UNHEALTHY, State.ERROR):
            return  # a request moved the plugin on while the failed instance was being stopped
        now = time.monotonic()
        if self._ready_since is not None:
            self.policy.record_healthy(self._ready_since, now)
            self._ready_since = None
        delay = self.policy.record_failure(now)
        if delay is None:
            if self.policy.mode == "on-failure":
                reason = (
                    f"gave up after {self.policy.max_restarts} restarts within {self.policy.window:g} s; "
                    "use plugins/restart"
                )
                error = HostError(ErrorKind.PLUGIN_START_FAILED, f"plugin {self.plugin_id} {reason}", reason=reason)
                await self._feed(Event.GIVE_UP, error=error)
            return
        self.next_retry_at = time.time() + delay
        await self._notify("plugins/statusChanged", self.status())
        scope = trio.CancelScope()
        self._retry_scope = scope
        self._nursery.start_soon(self._retry_later, delay, scope)

    async def _retry_later(self, delay: float, scope: trio.CancelScope) -> None:
        """The restart timer: after ``delay`` seconds, emit ``RetryDue``; the host answers with :meth:`retry`.

        The host's handler runs inside ``scope``: a disable (which cancels the
        timer) also cancels a retry in progress, as it would a start.
        """
        with scope:
            await trio.sleep(delay)
            await self._on_event(RetryDue(self.plugin_id))

    async def retry(self, start: Start | HostError) -> None:
        """The host's answer to ``RetryDue``: feed ``TIMER`` with ``start``, or ``RETRY_REFUSED``.

        ``start`` is what the trust gate allowed, or the ``HostError`` it raised
        (approval voided, command gone: no retry storm). Call it only from the
        ``RetryDue`` handler. Does nothing when the timer was cancelled meanwhile;
        feeds ``TIMER`` without a start when a request moved the plugin on (the
        table ignores it). A failed start is not raised (``RETRY_FAILED`` has
        applied the restart policy).
        """
        async with self._op_lock:
            scope = self._retry_scope
            if scope is None or scope.cancel_called:
                return
            self._retry_scope = None
            self.next_retry_at = None
            if not self._spawns(Event.TIMER):
                await self._feed(Event.TIMER)
                return
            if isinstance(start, HostError):
                await self._feed(Event.RETRY_REFUSED, error=start)
                return
            with contextlib.suppress(HostError):
                await self._start(Event.TIMER, start)

    @property
    def discovered(self) -> list[RegisteredTool]:
        """The tools the running instance listed (registered or not)."""
        return list(self._current_tools)

    def approval_pins(self) -> trust.Pins | None:
        """The pins an approval records now: the running instance's tool definitions
        (remote name -> digest), or None when nothing runs (the next discovery pins)."""
        if self.state is State.READY and self._current_tools:
            return trust.pins_of(self._current_tools)
        return None

    async def repin(self, pins: trust.Pins | None) -> None:
        """The user approved again: screen against ``pins`` and release what they allow.

        ``pins``: what the host recorded (:meth:`approval_pins` when it asked,
        None when nothing ran: the next discovery pins).
        """
        self.pinned = pins
        if pins is not None:
            await self._publish(self._current_tools)
            await self._feed(Event.LIST_CHANGED)

    def withheld_error(self, name: str) -> HostError | None:
        """``TOOL_DEFINITION_CHANGED`` for a withheld tool ``name`` (host name), else None."""
        digests = self.withheld.get(name)
        return trust.withheld_error(self.plugin_id, name, digests) if digests is not None else None

    @property
    def link(self) -> PluginLink | None:
        """The running instance's link once ``ready`` (None otherwise)."""
        return self._link if self.state is State.READY else None

    # -- tools/call ---------------------------------------------------------------

    async def call(
        self,
        tool: RegisteredTool,
        arguments: dict[str, Any],
        *,
        timeout: float | None,
        report_progress: ProgressSink,
        content_limits: ContentLimits | None = None,
    ) -> dict[str, Any]:
        """Call ``tool`` on the plugin; return ``{content, structuredContent?}``.

        ``content_limits`` (the parent's ``contentLimits``, default
        :class:`~hostd.wire.content.ContentLimits`): images, audio or blobs over them
        are replaced by markers (:func:`hostd.wire.content.bound_content`).

        ``timeout`` (seconds) defaults to the manifest's ``tool_timeout_seconds``.
        Raises ``TOOL_TIMEOUT`` (the plugin gets ``notifications/cancelled``),
        ``MCP_TOOL_CALL_FAILED`` (``isError: true``), ``MCP_UPSTREAM_ERROR``
        (a JSON-RPC error in ``data.upstream``; its ``data`` replaced by a marker
        over the result bound), ``PLUGIN_HOST_UNAVAILABLE`` and
        ``MCP_TOOL_RESULT_TOO_LARGE``. Cancelling the caller abandons the request,
        which sends ``notifications/cancelled`` to the plugin.
        """
        link = self._link
        if self.state is not State.READY or link is None:
            raise self._unavailable(tool, f"plugin {self.plugin_id} is {self.state.value}")
        backend = self.manifest.backend
        limit = timeout if timeout is not None else backend.tool_timeout_seconds
        started = trio.current_time()
        ceiling = started + (backend.tool_timeout_max_seconds or 10 * limit)
        scope = trio.CancelScope(deadline=started + limit)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if backend.tool_timeout_reset_on_progress:  # manifest: tool_timeout_reset_on_progress
                scope.deadline = min(trio.current_time() + limit, ceiling)
            await report_progress(progress, total, message)

        reply: dict[str, Any] | None = None
        size = 0
        raw = b""
        with scope:
            try:
                if tool.task_support == "required" and self.features is not None:
                    reply, size, raw = await self.features.call_as_task(link, tool, arguments, on_progress)
                else:
                    reply, size, raw = await link.call_tool(tool.remote_name, arguments, on_progress)
                if self.features is not None:  # a modern server's input_required rounds (hostd.mcp.client_features)
                    reply, size, raw = await self.features.complete_call(
                        link, tool, arguments, on_progress, (reply, size, raw)
                    )
            except ReplyTooLarge as over:
                raise self._too_large(tool, over) from None
            except LinkClosed:
                # Answer after the parent was told of the state change, not before.
                with trio.move_on_after(2):
                    await link.failure_handled.wait()
                raise self._unavailable(tool, f"plugin {self.plugin_id} {link.failure or 'stopped'}") from None
        if reply is None or scope.cancelled_caught:
            raise self._timed_out(tool, link, trio.current_time() - started, limit)
        return tool_result(
            self.plugin_id,
            tool,
            reply,
            size,
            raw=raw,
            content_limits=content_limits or ContentLimits(),
            result_limit=self._result_limit,
        )

    def _too_large(self, tool: RegisteredTool, over: ReplyTooLarge) -> HostError:
        """``MCP_TOOL_RESULT_TOO_LARGE``: ``tool`` answered over the frame bound (the plugin goes on)."""
        return tool_error(
            self.plugin_id,
            ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
            tool,
            f"{tool.name} answered with {over.size} bytes, over the {over.limit}-byte frame bound of "
            f"{self.plugin_id} (manifest backend.max_message_bytes, or hostd serve "
            "--max-plugin-message-bytes); the plugin goes on serving",
            size=over.size,
            limit=over.limit,
            bound="frame",
        )

    def _timed_out(self, tool: RegisteredTool, link: PluginLink, waited: float, limit: float) -> HostError:
        """``TOOL_TIMEOUT``: ``tool`` did not answer within ``limit`` s (``waited`` s passed)."""
        pending = link.pending_frame_bytes
        partial = f"; a partial frame of {pending} bytes was pending on stdout" if pending else ""
        return tool_error(
            self.plugin_id,
            ErrorKind.TOOL_TIMEOUT,
            tool,
            f"{tool.name} did not answer within {waited:.3g} s "
            f"(timeout {limit:g} s); the plugin was sent notifications/cancelled{partial}",
            timeoutSeconds=limit,
            pendingFrameBytes=pending,
        )

    def _unavailable(self, tool: RegisteredTool, reason: str) -> HostError:
        link = self._link
        return tool_error(
            self.plugin_id,
            ErrorKind.PLUGIN_HOST_UNAVAILABLE,
            tool,
            reason,
            stderrTail=link.stderr.tail(10) if link is not None else [],
        )


def _only_cancelled(exc: BaseException) -> trio.Cancelled | None:
    """``exc`` if it is ``trio.Cancelled``; a group's first leaf if every leaf is one; else None.

    A start cancelled while its instance's nursery runs (after the handshake) ends in a group of
    ``Cancelled``; the request's caller catches ``trio.Cancelled`` (``Host.enable``'s abandon).
    """
    if isinstance(exc, trio.Cancelled):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        matched, rest = exc.split(trio.Cancelled)
        if matched is not None and rest is None:
            leaf: BaseException = matched
            while isinstance(leaf, BaseExceptionGroup):
                leaf = leaf.exceptions[0]
            assert isinstance(leaf, trio.Cancelled)
            return leaf
    return None


def _no_secrets(plugin_id: str, name: str) -> str | None:
    """No secret store (no state folder): every ``${secret:NAME}`` reference fails the start by name."""
    del plugin_id, name
    return None
