"""Supervision of one plugin: its states, its running instance, its tool calls.

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
events (:data:`SupervisorEvent`, through the one ``on_event`` coroutine):
``RestartCounted`` (a statistic to save), ``ToolsPinned`` (the first pins
after an approval, which must be recorded before any tool is served: a
failure fails the start) and ``RetryDue`` (the restart timer fired: the host
runs the trust gate and answers with :meth:`PluginSupervisor.retry`). It
never reads or writes host state.

An instance (one spawned process tree and its :class:`~hostd.mcp.link.PluginLink`)
runs as a task in the host's plugin nursery, not in the request that enabled
it, so it outlives that request; it always ends through the same ``finally``:
unregister the tools, close stdin, wait, terminate the tree, kill it, then
empty the plugin's ``TMPDIR`` (also before each spawn, for what a killed
hostd left behind): whatever stops an instance (disable, restart, crash,
a limit, hostd's shutdown), its temporary files do not outlive it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import stat
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
import trio

from hostd.control.models import PluginStatus
from hostd.install.manifest import Manifest
from hostd.mcp.client_features import offered_features
from hostd.mcp.convert import convert_tools
from hostd.mcp.link import LinkClosed, PluginLink, PluginRequestError, ReplyTooLarge
from hostd.mcp.tools import HostTool, structured_content_problem
from hostd.plugins import lifecycle, trust
from hostd.plugins.lifecycle import Action, Event, transition
from hostd.plugins.registry import ToolRegistry
from hostd.plugins.restart import RefreshPacer, RestartPolicy
from hostd.remote.endpoint import RemoteLaunch, SecretLookup
from hostd.remote.oauth import Authorizer
from hostd.wire import lazy
from hostd.wire.content import ContentLimits, bound_content
from hostd.wire.errors import ErrorKind, HostError, start_failed, unwrap_host_error
from hostd.wire.framing import PLUGIN_FRAME_LIMIT, RESULT_LIMIT
from hostd.wire.jsonlimits import check_json, object_members
from hostd.wire.redact import Redactor
from sandbox.launch import Launch, LaunchError
from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess, spawn
from sandbox.watchdog import watch

log = logging.getLogger("hostd.plugins.supervisor")

#: Default bound of one tool result as sent to the parent, in bytes.
#: Seconds the plugin gets after stdin EOF, and again after SIGTERM (case E7).
STOP_GRACE = 2.0


@dataclass(frozen=True)
class Liveness:
    """Ping-based health checks: every ``interval`` s, an answer within ``timeout`` s."""

    interval: float = 30.0
    timeout: float = 10.0


#: A plugin's state (:class:`hostd.plugins.lifecycle.State`), named here too for the host.
State = lifecycle.State


@dataclass(frozen=True)
class Start:
    """What the host hands a start (enable, restart, a retry): everything it decided for it.

    ``launch``: the approved launch. ``manifest``: the manifest it was approved
    with. ``pins``: the tool pins (:mod:`hostd.plugins.trust`; None: the first discovery
    pins). ``limits``: the isolation policy (the watchdog's RSS and CPU limits).
    ``disk_limit``: the bound of the data folder and TMPDIR together, in bytes
    (None: no bound).
    """

    launch: Launch
    manifest: Manifest
    pins: trust.Pins | None = None
    limits: IsolationPolicy | None = None
    disk_limit: int | None = None


@dataclass(frozen=True)
class RestartCounted:
    """The restart count went up (``restarts``): a statistic the host saves best-effort."""

    plugin_id: str
    restarts: int


@dataclass(frozen=True)
class ToolsPinned:
    """The first discovery after an approval pinned ``pins`` (remote name -> digest).

    The host records them before the tools are served; raising ``HostError``
    (``STATE_WRITE_FAILED``) from the handler fails the start with nothing pinned.
    """

    plugin_id: str
    pins: trust.Pins


@dataclass(frozen=True)
class RetryDue:
    """The restart timer fired. The host answers with :meth:`PluginSupervisor.retry`
    (a :class:`Start`, or the ``HostError`` its trust gate raised), from the handler."""

    plugin_id: str


#: Everything a supervisor tells its host, other than notifications to the parent.
SupervisorEvent = RestartCounted | ToolsPinned | RetryDue
OnEvent = Callable[[SupervisorEvent], Awaitable[None]]

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


def launch_failed(plugin_id: str, exc: LaunchError) -> HostError:
    """``PLUGIN_START_FAILED`` for a launch that does not resolve or spawn (``exc``, sandbox/launch.py):
    ``data.reason`` is its text and ``data.launchError`` its kind; no stderr, the server never ran."""
    return start_failed(plugin_id, str(exc), launchError=exc.kind)


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
        on_event: OnEvent,
        restart_policy: RestartPolicy | None = None,
        liveness: Liveness | None = None,
        result_limit: int = RESULT_LIMIT,
        frame_limit: int = PLUGIN_FRAME_LIMIT,
        restarts: int = 0,
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
        self._current_tools: list[HostTool] = []
        #: The resource limit the last instance was stopped for, if any.
        self.limit_hit: dict[str, Any] | None = None
        self._registry = registry
        self._notify = notify
        self._nursery = nursery
        self._result_limit = result_limit
        self._frame_limit = frame_limit
        self._link: PluginLink | None = None
        self._instance_done: trio.Event | None = None
        self._op_lock = trio.Lock()
        self._last_seen_fallback: float | None = None
        #: The isolation policy of the running instance (the watchdog reads its limits).
        self.limits: IsolationPolicy | None = None
        #: The disk bound of the running instance in bytes (None: no bound).
        self._disk_limit: int | None = None
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
        self.authorizing = False

    @property
    def plugin_id(self) -> str:
        """The manifest's ``id``."""
        return self.manifest.id

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
            self.limits, self._disk_limit = start.limits, start.disk_limit
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

    async def _tools_changed(self) -> None:
        await self._notify("tools/listChanged", {"revision": self._registry.revision})

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
        link = self._link
        if link is not None:
            link.process.kill_now()

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
        tmpdir = launch.plan.tmpdir if launch.plan is not None else None
        data_dir = launch.plan.data_dir if launch.plan is not None else None
        self._disk_paths = tuple(p for p in (data_dir, tmpdir) if p)
        await _empty_tmpdir(tmpdir)
        if isinstance(launch, RemoteLaunch):  # a remote server: a connection stands for the process tree
            await self._run_remote(launch, task_status)
            return
        try:
            process = await spawn(launch)
        except LaunchError as exc:
            raise launch_failed(self.plugin_id, exc) from None
        link = PluginLink(
            self.plugin_id,
            process,
            # The launch's values too: a ${secret:NAME} of the manifest is the secret itself there.
            redact=Redactor([*backend.env.values(), *(launch.env.get(k, "") for k in backend.env)]),
            on_log=self._log,
            on_notification=self._notification,
            stdout_noise=backend.stdout_noise,
            max_frame_bytes=backend.max_message_bytes or self._frame_limit,
            protocol=backend.protocol,
            launch_digest=launch.digest,
            on_request=self.features.on_request if self.features is not None else None,
            capabilities=self.features.client_capabilities() if self.features is not None else None,
        )
        await self._run_link(link, process, tmpdir, task_status)

    async def _run_remote(self, launch: RemoteLaunch, task_status: trio.TaskStatus[None]) -> None:
        """One connection to a remote server (hostd/mcp/transport_http.py), run like a process tree."""
        backend = self.manifest.backend
        # Loaded here, not with the host: httpx2 and the OAuth client are only for remote plugins (hostd/wire/lazy.py).
        failed = functools.partial(start_failed, self.plugin_id)  # no process, no stderr: stderrTail []
        http = await lazy.load_async("hostd.mcp.transport_http", "a remote server", failed)
        resolved, secrets = http.open_secrets(self.plugin_id, launch, dict(backend.headers), self.secret_lookup)
        headers, client_secret = http.split_client_secret(resolved)
        link = http.RemoteLink(
            self.plugin_id,
            http.connection(),
            launch,
            headers,
            redact=Redactor([*secrets, *resolved.values()]),
            on_log=self._log,
            on_notification=self._notification,
            # Client features reach a remote server as they reach a local one (the same grant and parent).
            on_request=self.features.on_request if self.features is not None else None,
            capabilities=self.features.client_capabilities() if self.features is not None else None,
            connect_timeout=backend.connect_timeout_seconds,
            max_frame_bytes=backend.max_message_bytes or self._frame_limit,
            protocol=backend.protocol,
            authorizer=self.authorizer,
            on_authorizing=self._authorizing,
            client_secret=client_secret,
        )
        await self._run_link(link, link.process, None, task_status)

    async def _authorizing(self, waiting: bool) -> None:
        """A remote start waits (or no longer waits) for the browser step: status ``authorizing`` / ``starting``."""
        if self.authorizing != waiting:
            self.authorizing = waiting
            await self._notify("plugins/statusChanged", self.status())

    async def _run_link(
        self, link: PluginLink, process: SandboxedProcess, tmpdir: str | None, task_status: trio.TaskStatus[None]
    ) -> None:
        """Serve ``link`` until it ends; always ends through the same ``finally`` (module header)."""
        self._stop_grace = STOP_GRACE
        self.isolation = list(process.isolation)
        done = trio.Event()
        self._link, self._instance_done = link, done
        # Before the handshake: a list_changed during the first walk must not be lost.
        self._pacer = RefreshPacer()
        self._refresh_wanted = trio.Event()
        self._instance_ready = False
        self._failure_event = None
        try:
            with unwrap_host_error():
                await self._serve_instance(link, process, done, task_status)
            if link.failure is not None:
                await self._failed(link, process, done, tmpdir)
        except HostError as error:
            if "stderrTail" not in error.data:
                error.data.update(link.stderr.excerpt())
                error.data.setdefault("plugin", self.plugin_id)
            if "landlock-fs" in process.isolation:
                lines = [*error.data.get("stderrHead", []), *error.data.get("stderrTail", [])]
                hint = sandbox_hint(lines, self.plugin_id)
                if hint is not None:
                    error.data["hint"] = hint
            raise
        finally:
            if not done.is_set():
                with trio.CancelScope(shield=True):
                    await self._unregister()
                    # A plugin that never became ready has nothing worth flushing.
                    grace = self._stop_grace if self._instance_ready else min(self._stop_grace, 0.5)
                    report = await process.stop(grace=grace)
                    self.last_exit = f"{report.step}, code {report.returncode}"
                    await _empty_tmpdir(tmpdir)  # the tree is gone: nothing writes there any more
                    self._last_seen_fallback = link.last_seen_at
                    self._link = None
                    done.set()

    async def _serve_instance(
        self, link: PluginLink, process: SandboxedProcess, done: trio.Event, task_status: trio.TaskStatus[None]
    ) -> None:
        """Discovery, registration, ``ready`` (``STARTED``); then serve until the link ends."""
        manifest = self.manifest
        backend = manifest.backend
        async with trio.open_nursery() as nursery:
            discovery = await nursery.start(link.run, backend.startup_timeout_seconds)
            tools = await self._convert(discovery.tools, discovery.protocol_version, link.session.capabilities)
            self.protocol_version = discovery.protocol_version
            self.era = discovery.era
            self.server_name = discovery.server_name
            self.server_version = discovery.server_version
            await self._publish(tools)
            self.started_at = time.time()
            self._ready_since = time.monotonic()
            self._instance_ready = True
            await self._feed(Event.STARTED)
            task_status.started()
            if self.features is not None:  # what the parent set for the plugin (log level) holds across restarts
                nursery.start_soon(self.features.on_ready, link)
            nursery.start_soon(self._refresher, link, tools)
            nursery.start_soon(self._heartbeat, link)
            limits = None if _is_remote(link) else self._watch_limits()  # no local process to watch
            if limits is not None:
                nursery.start_soon(self._watchdog, link, limits)
            await link.done.wait()
            nursery.cancel_scope.cancel()

    async def _failed(self, link: PluginLink, process: SandboxedProcess, done: trio.Event, tmpdir: str | None) -> None:
        """The running instance's link ended with a failure: feed the failure's event."""
        assert link.failure is not None
        error = HostError(
            ErrorKind.PLUGIN_HOST_UNAVAILABLE,
            f"plugin {self.plugin_id} {link.failure}",
            plugin=self.plugin_id,
            reason=link.failure,
            stderrTail=link.stderr.tail(10),
            **({"limit": self.limit_hit} if self.limit_hit is not None else {}),
        )
        self.limit_hit = None
        event = self._failure_event if self._failure_event is not None else _link_failure_event(link.failure)

        async def stop_failed() -> None:
            link.failure_handled.set()  # calls in flight answer now: the parent has been told
            await self._stop_after_failure(process, link, done, tmpdir)

        try:
            await self._feed(event, error=error, stop=stop_failed)
        finally:
            link.failure_handled.set()

    async def _publish(self, tools: list[HostTool]) -> None:
        """Register the tools the pins allow; withhold the others (:func:`hostd.plugins.trust.screen`).

        The first discovery after an approval pins every definition and
        serves it (trust on first use, :mod:`hostd.plugins.trust`); the pins are
        recorded before any tool is registered. Raises ``TOOL_CONFLICT`` from
        the registry, ``STATE_WRITE_FAILED`` when the first pins cannot be
        recorded (then nothing is pinned and the start fails).
        """
        self._current_tools = list(tools)
        if self.pinned is None:
            pins = trust.pins_of(tools)
            await self._on_event(ToolsPinned(self.plugin_id, pins))  # raises: not recorded, not pinned
            self.pinned = pins
            self.first_use = sorted(t.name for t in tools)
        screened = trust.screen(self.manifest, tools, self.pinned)
        if screened.withheld != self.withheld and screened.withheld:
            await self._log(
                "warning",
                "host",
                "tool definitions changed since approval, withheld until approved again: "
                + ", ".join(sorted(screened.withheld)),
            )
        self.withheld = screened.withheld
        self._registry.register(self.plugin_id, screened.allowed)

    @property
    def discovered(self) -> list[HostTool]:
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

    async def _convert(
        self, raw: list[dict[str, Any]], protocol_version: str | None, offered: dict[str, Any]
    ) -> list[HostTool]:
        """Validate a listing against the manifest (in a worker thread: schema checks cost).
        ``offered``: the client capabilities this instance was offered; they decide which
        conditional tools (``contributes.tools[].needs``) the listing must hold."""
        manifest = self.manifest
        features = offered_features(offered)

        def convert(listing: list[dict[str, Any]]) -> list[HostTool]:
            tools = convert_tools(
                self.plugin_id,
                listing,
                permissions=trust.listing_permissions(manifest, listing),
                contributes=trust.expected_tools(manifest, listing, features),
                protocol_version=protocol_version,
            )
            return trust.served(manifest, tools)

        return await trio.to_thread.run_sync(convert, raw)

    async def _stop_after_failure(
        self, process: SandboxedProcess, link: PluginLink, done: trio.Event, tmpdir: str | None
    ) -> None:
        """End the tree of a failed instance (and empty its TMPDIR) before the restart policy looks at it."""
        with trio.CancelScope(shield=True):
            await self._unregister()
            report = await process.stop(grace=0.5)
            self.last_exit = f"{report.step}, code {report.returncode}"
            await _empty_tmpdir(tmpdir)
            self._last_seen_fallback = link.last_seen_at
            self._link = None
            done.set()

    async def _refresher(self, link: PluginLink, current: list[HostTool]) -> None:
        """Coalesced re-discovery on ``notifications/tools/list_changed`` (MCP "List Changed")."""
        digests = [t.definition_digest for t in current]
        while True:
            await self._refresh_wanted.wait()
            self._refresh_wanted = trio.Event()
            await trio.sleep(self._pacer.next_walk_delay(time.monotonic()))
            self._pacer.begin_walk()
            try:
                with trio.fail_after(self.manifest.backend.startup_timeout_seconds):
                    raw = await link.list_tools()
                tools = await self._convert(raw, self.protocol_version, link.session.capabilities)
                new_digests = [t.definition_digest for t in tools]
                changed = new_digests != digests
                if changed:
                    await self._publish(tools)
                    digests = new_digests
                    await self._feed(Event.LIST_CHANGED)
            except HostError as error:
                self._fail(link, Event.LIST_REFUSED, f"changed its tools to a set hostd refuses: {error.message}")
                return
            except trio.TooSlowError:
                self._fail(link, Event.LIST_REFUSED, "did not finish a tools/list re-discovery in time")
                return
            except (PluginRequestError, LinkClosed, ReplyTooLarge):
                return  # the link is failing; its reason is recorded there
            if not self._pacer.end_walk(time.monotonic(), changed=changed):
                await self._log(
                    "warning",
                    "host",
                    f"tools/list_changed feedback loop: {self._pacer.walks} walks found nothing new; "
                    "automatic refresh stopped until the plugin restarts",
                )
                return
            if self._pacer.requested:
                self._refresh_wanted.set()

    def _fail(self, link: PluginLink, event: Event, reason: str) -> None:
        """End ``link`` as failed for a reason hostd found (``event``); the first reason wins, as in the link."""
        if link.failure is None and self._failure_event is None:
            self._failure_event = event
        link.fail(reason)

    def _watch_limits(self) -> IsolationPolicy | None:
        """The limits the watchdog enforces on this instance, or None when there are none."""
        limits = dataclasses.replace(
            self.limits if self.limits is not None else IsolationPolicy(), max_disk_bytes=self._disk_limit
        )
        disk = limits.max_disk_bytes is not None and bool(self._disk_paths)
        if limits.max_rss_bytes is None and limits.max_cpu_percent is None and not disk:
            return None
        return limits

    async def _watchdog(self, link: PluginLink, limits: IsolationPolicy) -> None:
        """Resource limits (host policy): a plugin over its RSS, CPU or disk limit is ended."""
        hit = await watch(link.process, limits, disk_paths=self._disk_paths)
        self.limit_hit = {"limit": hit.limit, "value": hit.value, "threshold": hit.threshold}
        self._fail(link, Event.LIMIT_EXCEEDED, f"was stopped for exceeding a limit: {hit.message}")

    async def _heartbeat(self, link: PluginLink) -> None:
        """Liveness: a plugin that stops answering ``ping`` (modern era: ``server/discover``) is ended
        (then the restart policy applies)."""
        while True:
            await trio.sleep(self.liveness.interval)
            with trio.move_on_after(self.liveness.timeout) as scope:
                try:
                    await link.ping()
                except (LinkClosed, ReplyTooLarge):
                    return
                except PluginRequestError:
                    pass  # an answer, even an error, is a sign of life
            if scope.cancelled_caught and not link.paused:  # paused: its answer waits in the pipe
                self._fail(link, Event.LIVENESS_FAILED, f"did not answer ping within {self.liveness.timeout:g} s")
                return

    async def _unregister(self) -> None:
        if self._registry.unregister(self.plugin_id):
            await self._tools_changed()

    # -- plugin -> parent -------------------------------------------------------

    async def _log(self, level: str, source: str, message: str) -> None:
        await self._notify(
            "plugins/log", {"plugin": self.plugin_id, "level": level, "source": source, "message": message}
        )

    async def _notification(self, method: str, params: dict[str, Any] | None) -> None:
        """A notification from the plugin, raw (either era: a legacy one arrives unsolicited, a modern one
        on the link's ``subscriptions/listen`` stream)."""
        if method == "notifications/tools/list_changed" and self._pacer.notify(time.monotonic()):
            self._refresh_wanted.set()
        elif self.features is not None:
            await self.features.on_notification(method, params or {})

    @property
    def link(self) -> PluginLink | None:
        """The running instance's link once ``ready`` (None otherwise)."""
        return self._link if self.state is State.READY else None

    # -- tools/call ---------------------------------------------------------------

    async def call(
        self,
        tool: HostTool,
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
                raise self._tool_error(
                    ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
                    tool,
                    f"{tool.name} answered with {over.size} bytes, over the {over.limit}-byte frame bound of "
                    f"{self.plugin_id} (manifest backend.max_message_bytes, or hostd serve "
                    "--max-plugin-message-bytes); the plugin goes on serving",
                    size=over.size,
                    limit=over.limit,
                    bound="frame",
                ) from None
            except LinkClosed:
                # Answer after the parent was told of the state change, not before.
                with trio.move_on_after(2):
                    await link.failure_handled.wait()
                raise self._unavailable(tool, f"plugin {self.plugin_id} {link.failure or 'stopped'}") from None
        if reply is None or scope.cancelled_caught:
            pending = link.pending_frame_bytes
            partial = f"; a partial frame of {pending} bytes was pending on stdout" if pending else ""
            raise self._tool_error(
                ErrorKind.TOOL_TIMEOUT,
                tool,
                f"{tool.name} did not answer within {trio.current_time() - started:.3g} s "
                f"(timeout {limit:g} s); the plugin was sent notifications/cancelled{partial}",
                timeoutSeconds=limit,
                pendingFrameBytes=pending,
            )
        return self._tool_result(tool, reply, size, raw, content_limits or ContentLimits())

    def _tool_result(
        self,
        tool: HostTool,
        reply: dict[str, Any],
        size: int,
        raw: bytes = b"",
        content_limits: ContentLimits | None = None,
    ) -> dict[str, Any]:
        """Turn the plugin's raw ``tools/call`` response into ``{content, structuredContent?}``.

        The server's JSON is passed through as it came: ``content`` and
        ``structuredContent`` are the frame's own bytes (``orjson.Fragment``), so
        big integers, key order and number forms reach the parent unchanged. The
        result bound applies to the response frame's size in bytes, whatever it
        carries (a result, ``isError`` content or a JSON-RPC error's ``data``),
        and every value is held to ``hostd.wire.jsonlimits.MAX_JSON_DEPTH``.
        """
        error = reply.get("error")
        if error is not None:
            upstream = self._bounded_upstream(error, size)
            raise self._tool_error(
                ErrorKind.MCP_UPSTREAM_ERROR,
                tool,
                f"{tool.name} failed: {str(upstream.get('message'))[:500]}",
                upstream=upstream,
            )
        result = reply.get("result")
        # Depth first, before any field is read or turned into text (issue 31, class 2: str() of a
        # resultType 1000 levels deep raised RecursionError, INTERNAL_ERROR to the parent).
        exceeded = check_json(result)
        if exceeded is not None:
            raise self._invalid_result(tool, f"the result is {exceeded.message}", pointer=exceeded.pointer)
        kind = result.get("resultType", "complete") if isinstance(result, dict) else "complete"
        if kind != "complete":  # 2026-07-28: absent means complete; input_required needs a retry round
            raise self._invalid_result(tool, f"resultType {str(kind)[:40]!r} is not served by hostd here")
        content = result.get("content") if isinstance(result, dict) else None
        if (
            not isinstance(result, dict)
            or not isinstance(content, list)
            or not all(isinstance(item, dict) and isinstance(item.get("type"), str) for item in content)
        ):
            raise self._invalid_result(tool, "the result needs a 'content' array of typed items")
        is_error = result.get("isError", False)
        if not isinstance(is_error, bool):
            raise self._invalid_result(tool, "'isError' must be a boolean")
        structured = result.get("structuredContent")
        out: dict[str, Any] = {"content": content}
        if structured is not None:
            out["structuredContent"] = structured
        if is_error:
            if size > self._result_limit:
                out = {"content": [], "truncated": True}
            text = next((c.get("text") for c in content if c.get("type") == "text"), None)
            raise self._tool_error(
                ErrorKind.MCP_TOOL_CALL_FAILED,
                tool,
                f"{tool.name} reported an error: {str(text)[:500] if text is not None else 'no text'}",
                **out,
            )
        problem = structured_content_problem(tool, structured)
        if problem is not None:
            raise self._invalid_result(tool, problem)
        if size > self._result_limit:
            raise self._tool_error(
                ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
                tool,
                f"{tool.name} returned {size} bytes, over the {self._result_limit}-byte result bound",
                size=size,
                limit=self._result_limit,
            )
        return _as_sent(out, raw, content_limits or ContentLimits())

    def _bounded_upstream(self, error: Any, size: int) -> dict[str, Any]:
        """A plugin's JSON-RPC ``error`` as forwarded in ``data.upstream``, within the result bound.

        Within the bound (frame size) and ``MAX_JSON_DEPTH``: the error object as sent.
        Otherwise ``code``, ``message`` (cut to 1000 characters with a trailing "…")
        and, in place of ``data``, the marker ``{"truncated": true, "size": <bytes of
        the plugin's response>, "limit": <result bound>}`` (or ``"reason"`` for depth).
        """
        if not isinstance(error, dict):
            # Not repr(): a value 1000 levels deep would exhaust the stack.
            error = {"message": f"the plugin sent a JSON-RPC error that is {type(error).__name__}, not an object"}
        bounded: dict[str, Any] = error
        exceeded = check_json(bounded)
        if exceeded is None and size <= self._result_limit:
            return bounded
        message = bounded.get("message")
        text = message if isinstance(message, str) else "(not a string)"
        upstream: dict[str, Any] = {
            "code": bounded.get("code") if isinstance(bounded.get("code"), int) else None,
            "message": text if len(text) <= _UPSTREAM_MESSAGE else text[: _UPSTREAM_MESSAGE - 1] + "…",
        }
        marker: dict[str, Any] = {"truncated": True, "size": size, "limit": self._result_limit}
        if exceeded is not None:
            marker["reason"] = f"the error is {exceeded.message}"
        upstream["data"] = marker
        return upstream

    def _invalid_result(self, tool: HostTool, why: str, **data: Any) -> HostError:
        return self._tool_error(
            ErrorKind.MCP_UPSTREAM_ERROR,
            tool,
            f"{tool.name} returned an invalid result: {why}",
            **data,
        )

    def _tool_error(self, kind: ErrorKind, tool: HostTool, message: str, **data: Any) -> HostError:
        """A failed ``tools/call`` of ``tool``: ``kind`` with ``data`` ``{plugin, tool, **data}``."""
        return HostError(kind, message, plugin=self.plugin_id, tool=tool.name, **data)

    def _unavailable(self, tool: HostTool, reason: str) -> HostError:
        link = self._link
        return self._tool_error(
            ErrorKind.PLUGIN_HOST_UNAVAILABLE,
            tool,
            reason,
            stderrTail=link.stderr.tail(10) if link is not None else [],
        )


_UPSTREAM_MESSAGE = 1000


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


def _link_failure_event(reason: str) -> Event:
    """The event of a failure the link found: a stdout violation, or else a crash.

    The link words its stdout violations "a message on stdout exceeded ..."
    and "wrote a line on stdout that is ..."; an exit or a closed pipe is a
    crash. Both have the same outcome (:mod:`hostd.plugins.lifecycle`); the event
    names which it was.
    """
    return Event.STDOUT_VIOLATION if " on stdout " in reason else Event.CRASH


#: A path the kernel refused, as runtimes word it: Python "[Errno 13] Permission denied: '/x'", Node
#: "EACCES: permission denied, open '/x'", git "unable to access '/x': Permission denied".
def _is_remote(link: PluginLink) -> bool:
    """Whether ``link`` is a remote server's connection (``hostd.mcp.transport_http.RemoteLink``); none
    exists before that module is loaded (:mod:`hostd.wire.lazy`), so it is not imported to ask."""
    http = sys.modules.get("hostd.mcp.transport_http")
    return http is not None and isinstance(link, http.RemoteLink)


_REFUSED = re.compile(r"(?i)(?:permission denied|eacces|operation not permitted)")
_QUOTED_PATH = re.compile(r"""['"](/[^'"]+)['"]|(/[^\s'":]+): (?:[Pp]ermission denied|[Oo]peration not permitted)""")


def sandbox_hint(lines: list[str], plugin_id: str = "<id>") -> str | None:
    """``data.hint`` for a start the sandbox likely broke: the refused path and the grants that allow it.

    ``lines``: the stderr excerpt. ``None`` when no line reads like a refused access. The hint
    names the refused paths and the ``plugins/grant`` request that would grant the first one
    to ``plugin_id`` alone.
    """
    refused = [line for line in lines if _REFUSED.search(line)]
    if not refused:
        return None
    # Quoted (Python, Node, git) or as sh and coreutils say it ("exec: /x: Permission denied").
    paths = list(dict.fromkeys(p for line in refused for pair in _QUOTED_PATH.findall(line) for p in pair if p))
    where = f" {', '.join(paths[:3])}" if paths else " a file"
    grant = orjson.dumps({"id": plugin_id, "folders": {"write": [paths[0] if paths else "<path>"]}}).decode()
    return (
        f"the sandbox refused{where}: a plugin reads only its folder, its runtime and system paths and writes "
        "only its data folder and TMPDIR. If the server needs it, grant it to this plugin (plugins/grant "
        f"{grant}, with its permissions; or folders.read), declare it in the manifest "
        "(sandbox.read / sandbox.write), name it in the approved args or env, or grant it to every plugin "
        "with hostd serve --allow-read / --allow-write"
    )


#: Bytes that can only be in a result when it holds an item a ContentLimits bound counts.
_RICH_MARKERS = (b'"image"', b'"audio"', b'"blob"')


def _as_sent(out: dict[str, Any], raw: bytes, content_limits: ContentLimits) -> dict[str, Any]:
    """``out`` with each member replaced by the plugin's own bytes for it, when they can be found.

    ``raw`` is the response frame; its ``result`` member's ``content`` and
    ``structuredContent`` become ``orjson.Fragment`` values, which serialise as
    exactly those bytes. Without ``raw`` (or if a member is missing) ``out`` is
    returned as parsed. ``content`` over ``content_limits`` is sent as bounded
    (parsed) instead; the check costs a byte search unless the frame may hold
    an image, audio or blob item.
    """
    if "content" in out and any(marker in raw for marker in _RICH_MARKERS):
        bounded = bound_content(out["content"], content_limits)
        if bounded is not None:
            return {
                **_as_sent({k: v for k, v in out.items() if k != "content"}, raw, content_limits),
                "content": bounded,
            }
    if not raw or not _may_be_rewritten(raw):
        return out  # orjson writes the parsed value back as the same JSON (order, numbers): no slicing needed
    envelope = object_members(raw)
    result = object_members(envelope["result"]) if envelope is not None and "result" in envelope else None
    if result is None or not all(key in result for key in out):
        return out
    return {key: orjson.Fragment(result[key]) for key in out}


#: A number orjson might not write back as the plugin wrote it: an exponent (1E2), 16 digits or
#: more, alone or around a dot (a 64-bit overflow, a float's lost digits), a fraction ending in 0
#: (1.50), a fraction starting with 00000 (orjson writes 0.000001 as 1e-6), or -0. Found anywhere
#: in the frame (a string holding "1e5" only costs the exact path): a C-speed search instead of
#: slicing every result (the slicing was ~8% of hostd's CPU per call).
#: tests/test_supervisor_numbers.py checks every number form it lets through against orjson itself.
#: The leading lookahead only makes positions that cannot start a match fail at once (~25% faster, same matches).
_REWRITTEN_NUMBER = re.compile(
    rb"(?=[0-9.\-])(?:[0-9][eE]|[0-9]{16}|[0-9.]{17}|\.[0-9]*0(?![0-9])|\.00000|-0(?![.0-9eE]))"
)


def _may_be_rewritten(raw: bytes) -> bool:
    """Whether ``raw`` holds a :data:`_REWRITTEN_NUMBER` outside a ``"2.0"`` string (the jsonrpc version).

    Skips the ``.0`` match of each ``"2.0"`` in place instead of searching a copy
    of the frame without them (a copy of every result frame per call).
    """
    position = 0
    while (found := _REWRITTEN_NUMBER.search(raw, position)) is not None:
        start = found.start()
        if start < 2 or raw[start - 2 : start + 3] != b'"2.0"':
            return True
        position = found.end()
    return False


#: Folders never emptied as a TMPDIR, whatever a launch says (shared temporary folders).
_SHARED_TMP = frozenset({"/", "/tmp", "/var/tmp", "/dev/shm", os.path.realpath(tempfile.gettempdir())})


def empty_folder(path: str) -> None:
    """Remove everything inside the folder ``path``; keep the folder (mode ``0700``).

    Call it only once nothing writes there any more (the plugin's tree is
    gone): it works by path. Never follows a symlink: a symlink inside is
    removed as a link, and a ``path`` that is now a symlink or a file (a
    plugin replaced its folder) is removed and a fresh ``0700`` folder made
    in its place, as for a missing one. A folder the plugin made read-only
    is made writable first (checked with ``lstat``: never through a link).
    Refuses shared temporary folders (``/tmp``...) and ``/`` (``ValueError``).
    Raises ``OSError`` for the first entry that cannot be removed (the rest
    is still removed; a tree deeper than ``PATH_MAX`` is one). Blocking.
    """
    if os.path.realpath(path) in _SHARED_TMP or os.path.normpath(path) in _SHARED_TMP:
        raise ValueError(f"{path} is a shared temporary folder; not emptied")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, 0o700)
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        os.mkdir(path, 0o700)
        return
    os.chmod(path, 0o700)
    failed: list[OSError] = []
    # Depth-first with an explicit stack (no recursion limit): (path, its entries already pushed).
    stack: list[tuple[str, bool]] = [(os.path.join(path, name), False) for name in os.listdir(path)]
    while stack:
        current, listed = stack.pop()
        try:
            if listed:
                os.rmdir(current)
                continue
            st = os.lstat(current)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(current)
                continue
            if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                os.chmod(current, stat.S_IMODE(st.st_mode) | 0o700)  # lstat: a real folder, not a link
            stack.append((current, True))
            stack.extend((os.path.join(current, name), False) for name in os.listdir(current))
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


async def _empty_tmpdir(tmpdir: str | None) -> None:
    """:func:`empty_folder` in a worker thread; a failure is logged, never raised (a stop must finish)."""
    if tmpdir is None:
        return
    with trio.CancelScope(shield=True):
        try:
            await trio.to_thread.run_sync(empty_folder, tmpdir)
        except Exception as exc:  # whatever it is, the stop goes on
            log.warning("could not empty the plugin TMPDIR %s: %s", tmpdir, exc)


def _no_secrets(plugin_id: str, name: str) -> str | None:
    """No secret store (no state folder): every ``${secret:NAME}`` reference fails the start by name."""
    del plugin_id, name
    return None
