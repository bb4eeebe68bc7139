"""The running instance of a plugin: one process tree (or remote connection) and its link, from spawn to reap.

:class:`InstanceRunner` is the half of :class:`~hostd.plugins.supervisor.PluginSupervisor` that runs an instance;
the supervisor (the lifecycle table's driver) derives from it and performs the table's ``spawn`` action with
:meth:`InstanceRunner._run_instance` (in the host's plugin nursery) and ``stop_instance`` with
:meth:`InstanceRunner._stop_instance`. Here: the spawn (or the connection, for a remote server; either is driven
through :class:`hostd.plugins.backends.Instance`), discovery and the tool screening of each discovery
(:mod:`hostd.plugins.trust`), the instance's tasks (re-discovery on ``list_changed``, the liveness ``ping``, the
resource watchdog), the plugin's log lines and notifications, and the one ``finally`` every instance ends through:
unregister the tools, close stdin, wait, terminate the tree, kill it, then empty the plugin's ``TMPDIR`` (also
before each spawn). An instance tells the driver how it went only by feeding the table (``STARTED``, a failure's
event) through :meth:`InstanceRunner._feed`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson
import trio

from hostd.install.manifest import Manifest
from hostd.install.shims import find_shim, resolve_shim
from hostd.mcp.client_features import offered_features
from hostd.mcp.convert import convert_tools
from hostd.mcp.link import LinkClosed, PluginLink, PluginRequestError, ReplyTooLarge
from hostd.mcp.listing import ListingBounds
from hostd.mcp.tools import RegisteredTool
from hostd.net.allowlist import Allowlist
from hostd.plugins import lifecycle, trust
from hostd.plugins.backends import Instance, ProcessInstance, RemoteInstance
from hostd.plugins.events import NetworkRequested, Notify, OnEvent, ToolsPinned
from hostd.plugins.lifecycle import Event
from hostd.plugins.registry import ToolRegistry
from hostd.plugins.restart import RefreshPacer
from hostd.wire import lazy
from hostd.wire.errors import ErrorKind, HostError, start_failed, unwrap_host_error
from hostd.wire.redact import Redactor
from sandbox.launch import Launch, LaunchError
from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess
from sandbox.watchdog import LimitHit

if TYPE_CHECKING:
    from hostd.net.proxy import PluginProxy
    from hostd.remote.endpoint import RemoteLaunch, SecretLookup
    from hostd.remote.oauth import Authorizer

log = logging.getLogger("hostd.plugins.supervisor")

#: Seconds the plugin gets after stdin EOF, and again after SIGTERM (case E7).
STOP_GRACE = 2.0


@dataclass(frozen=True)
class Liveness:
    """Ping-based health checks: every ``interval`` s, an answer within ``timeout`` s."""

    interval: float = 30.0
    timeout: float = 10.0


def launch_failed(plugin_id: str, exc: LaunchError) -> HostError:
    """``PLUGIN_START_FAILED`` for a launch that does not resolve or spawn (``exc``, sandbox/launch.py):
    ``data.reason`` is its text and ``data.launchError`` its kind; no stderr, the server never ran."""
    return start_failed(plugin_id, str(exc), launchError=exc.kind)


#: Opens the running instance of a launch: the supervisor's own (:meth:`InstanceRunner._open`) spawns
#: the process tree or connects; a unit test hands the supervisor one of its own (``open_instance``).
Opener = Callable[[Launch], Awaitable[Instance]]


class InstanceRunner:
    """The running instance of one plugin; the base of :class:`~hostd.plugins.supervisor.PluginSupervisor`.

    The attributes below are the supervisor's (set in its ``__init__``); :meth:`_feed` and
    :meth:`status` are the driver's (the supervisor defines them).
    """

    manifest: Manifest
    liveness: Liveness
    state: lifecycle.State
    started_at: float | None
    protocol_version: str | None
    era: Literal["legacy", "modern"] | None
    server_name: str | None
    server_version: str | None
    last_exit: str | None
    pinned: trust.Pins | None
    withheld: trust.Withheld
    first_use: list[str] | None
    limit_hit: dict[str, Any] | None
    limits: IsolationPolicy | None
    isolation: list[str]
    features: Any
    authorizer: Authorizer | None
    secret_lookup: SecretLookup
    resolve_pins: dict[str, str]
    network_askable: Callable[[str], bool]
    authorizing: bool
    _current_tools: list[RegisteredTool]
    _registry: ToolRegistry
    _notify: Notify
    _frame_limit: int
    _link: PluginLink | None
    _instance: Instance | None
    _opener: Opener | None
    _instance_done: trio.Event | None
    _last_seen_fallback: float | None
    _disk_limit: int | None
    _listing_bounds: ListingBounds
    _disk_paths: tuple[str, ...]
    _on_event: OnEvent
    _ready_since: float | None
    _pacer: RefreshPacer
    _refresh_wanted: trio.Event
    _instance_ready: bool
    _failure_event: Event | None
    _stop_grace: float
    _net_proxy: PluginProxy | None
    _net_rules: tuple[Allowlist, list[str]] | None

    async def _feed(
        self,
        event: Event,
        *,
        error: HostError | None = None,
        launch: Launch | None = None,
        grace: float = STOP_GRACE,
        stop: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Apply ``event`` to the lifecycle table (the driver: :meth:`PluginSupervisor._feed`)."""
        raise NotImplementedError

    def status(self, *, pinned: list[str] | None = None) -> dict[str, Any]:
        """The plugin's status as sent on the wire (the driver: :meth:`PluginSupervisor.status`)."""
        raise NotImplementedError

    @property
    def plugin_id(self) -> str:
        """The manifest's ``id``."""
        return self.manifest.id

    async def _tools_changed(self) -> None:
        await self._notify("tools/listChanged", {"revision": self._registry.revision})

    def apply_network(self, allowlist: Allowlist, always: list[str]) -> None:
        """Apply a changed network allowlist to the running instance's proxy at once, without a restart (issue
        26; :meth:`hostd.net.proxy.PluginProxy.replace_allowlist`: new connections follow it, open ones it no
        longer allows are closed). ``always``: the ``networkCallHosts``. Kept for a proxy about to start; a next
        launch is resolved with the change already (hostd/host/launch.py)."""
        self._net_rules = (allowlist, list(always))
        if self._net_proxy is not None:
            self._net_proxy.replace_allowlist(allowlist, always)

    def _proxy_started(self, proxy: PluginProxy) -> None:
        """``run_proxy``'s ``on_proxy``: the running proxy, given a change made since its launch was taken."""
        self._net_proxy = proxy
        if self._net_rules is not None:
            proxy.replace_allowlist(*self._net_rules)

    async def _stop_instance(self, *, grace: float = STOP_GRACE) -> None:
        link, done = self._link, self._instance_done
        if link is None or done is None:
            return
        link.close()
        self._stop_grace = grace
        with trio.CancelScope(shield=True):
            await done.wait()

    async def _run_instance(self, launch: Launch, *, task_status: trio.TaskStatus[None]) -> None:
        """One instance (a process tree, or a connection) from its start to its reap; reports ``started`` once ready."""
        tmpdir = launch.plan.tmpdir if launch.plan is not None else None
        data_dir = launch.plan.data_dir if launch.plan is not None else None
        self._disk_paths = tuple(p for p in (data_dir, tmpdir) if p)
        await _empty_tmpdir(tmpdir)
        opener = self._opener if self._opener is not None else self._open
        try:
            await self._run_link(await opener(launch), tmpdir, task_status)
        except HostError as error:
            shim_hint(error, launch)
            raise

    async def _open(self, launch: Launch) -> Instance:
        """The default :data:`Opener`: spawn the process tree and its stdio link, or connect to a remote server."""
        from hostd.remote.endpoint import RemoteLaunch  # noqa: PLC0415 (a start's: a reader never opens one)

        if isinstance(launch, RemoteLaunch):  # a remote server: a connection stands for the process tree
            return await self._connect(launch)
        # A stdio plugin's link on its pipes: loaded by its start, never by a reader of the state folder.
        from hostd.mcp.transport.stdio import StdioLink  # noqa: PLC0415

        backend = self.manifest.backend
        process, proxy = await self._spawn_proxied(launch)
        link = StdioLink(
            self.plugin_id,
            process,
            # The launch's values too: a ${secret:NAME} of the manifest is the secret itself there, and a
            # ${secret:NAME:file}'s value is in secret_files (a plugin that logs what it read is masked too).
            redact=Redactor(
                [
                    *backend.env.values(),
                    *(launch.env.get(k, "") for k in backend.env),
                    *(value for _, value in launch.secret_files),
                ]
            ),
            on_log=self._log,
            on_notification=self._notification,
            stdout_noise=backend.stdout_noise,
            max_frame_bytes=backend.max_message_bytes or self._frame_limit,
            protocol=backend.protocol,
            launch_digest=launch.digest,
            on_request=self.features.on_request if self.features is not None else None,
            capabilities=self.features.client_capabilities() if self.features is not None else None,
        )
        return ProcessInstance(process, link, proxy)

    async def _spawn_proxied(self, launch: Launch) -> tuple[SandboxedProcess, Callable[[], Awaitable[None]] | None]:
        """Spawn ``launch``; with ``netproxy`` also take its namespace's listener (hostd/net/handoff.py) and return
        the proxy to run on it (hostd/net/proxy.py), whose refusals reach the parent as ``plugins/log``."""
        from hostd.net.handoff import HandoffError, spawn_handing_off  # noqa: PLC0415 (a start's, as in _open)

        self._net_proxy, self._net_rules = None, None  # this launch's allowlist holds every change until now
        try:
            # Every tree gets a cgroup where one is usable (sandbox/cgroups.py): its memory bound is the policy's.
            limits = self.limits if self.limits is not None else IsolationPolicy()
            process, received = await spawn_handing_off(launch, limits)
        except LaunchError as exc:
            raise launch_failed(self.plugin_id, exc) from None
        except HandoffError as exc:
            error = LaunchError("ISOLATION_FAILED", launch.command, f"netproxy: {exc}")
            raise launch_failed(self.plugin_id, error) from None
        if received is None:
            return process, None
        hosts, private = launch.network or ((), ())
        allowlist = Allowlist.parse(hosts, private)
        if received.transparent_off is not None:
            await self._log(
                "warning",
                "host",
                f"network: transparent mode is off for this start ({received.transparent_off}): only clients that "
                "use HTTP_PROXY/HTTPS_PROXY reach the allowlist's hosts",
            )

        async def log(message: str) -> None:
            await self._log("warning", "host", message)

        async def ask(host: str, port: int) -> str:
            reply: list[str] = []
            await self._on_event(NetworkRequested(self.plugin_id, host, port, reply))
            return reply[0] if reply else "unanswered"

        # A plugin with network only; not on a reader's path.
        from hostd.net.proxy import pinned_resolver, run_proxy  # noqa: PLC0415

        return process, functools.partial(
            run_proxy,
            self.plugin_id,
            received.listener,
            allowlist,
            log,
            ask=ask,
            resolver=pinned_resolver(self.resolve_pins),
            dns=received.dns,
            transparent=received.transparent,
            askable=self.network_askable,
            on_proxy=self._proxy_started,
        )

    async def _connect(self, launch: RemoteLaunch) -> RemoteInstance:
        """One connection to a remote server (hostd/mcp/transport/http.py), run like a process tree."""
        backend = self.manifest.backend
        # Loaded here, not with the host: httpx2 and the OAuth client are only for remote plugins (hostd/wire/lazy.py).
        failed = functools.partial(start_failed, self.plugin_id)  # no process, no stderr: stderrTail []
        http = await lazy.load_async("hostd.mcp.transport.http", "a remote server", failed)
        resolved, secrets = http.open_secrets(self.plugin_id, launch, dict(backend.headers), self.secret_lookup)
        headers, client_secret = http.split_client_secret(resolved)
        link = http.RemoteLink(
            self.plugin_id,
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
        return RemoteInstance(link)

    async def _authorizing(self, waiting: bool) -> None:
        """A remote start waits (or no longer waits) for the browser step: status ``authorizing`` / ``starting``."""
        if self.authorizing != waiting:
            self.authorizing = waiting
            await self._notify("plugins/statusChanged", self.status())

    async def _run_link(self, instance: Instance, tmpdir: str | None, task_status: trio.TaskStatus[None]) -> None:
        """Serve ``instance`` until its link ends; always ends through the same ``finally`` (module header)."""
        link = instance.link
        link.listing_bounds = self._listing_bounds
        self._stop_grace = STOP_GRACE
        self.isolation = list(instance.isolation)
        done = trio.Event()
        self._link, self._instance, self._instance_done = link, instance, done
        # Before the handshake: a list_changed during the first walk must not be lost.
        self._pacer = RefreshPacer()
        self._refresh_wanted = trio.Event()
        self._instance_ready = False
        self._failure_event = None
        try:
            with unwrap_host_error():
                await self._serve_instance(instance, task_status)
            if link.failure is not None:
                await self._failed(instance, done, tmpdir)
        except HostError as error:
            hit = instance.kernel_hit() if "limit" not in error.data else None
            if hit is not None:  # the kernel ended the tree for a bound during its start: say so, by name
                error.data["limit"] = {"limit": hit.limit, "value": hit.value, "threshold": hit.threshold}
                error.message = f"{error.message} (the kernel stopped it for exceeding a limit: {hit.message})"
                error.args = (error.message,)
            if "stderrTail" not in error.data:
                error.data.update(link.stderr.excerpt())
                error.data.setdefault("plugin", self.plugin_id)
            if "landlock-fs" in instance.isolation:
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
                    report = await instance.stop(grace=grace)
                    self.last_exit = f"{report.step}, code {report.returncode}"
                    await _empty_tmpdir(tmpdir)  # the tree is gone: nothing writes there any more
                    self._last_seen_fallback = link.last_seen_at
                    self._link = self._instance = self._net_proxy = None
                    done.set()

    async def _serve_instance(self, instance: Instance, task_status: trio.TaskStatus[None]) -> None:
        """Discovery, registration, ``ready`` (``STARTED``); then serve until the link ends."""
        link = instance.link
        manifest = self.manifest
        backend = manifest.backend
        async with trio.open_nursery() as nursery:
            if isinstance(instance, ProcessInstance) and instance.proxy is not None:
                nursery.start_soon(instance.proxy)  # the plugin's one way out, before it is asked anything
            discovery = await nursery.start(link.run, backend.startup_timeout_seconds)
            # Known before the listing is checked: a rejected listing's status and error name the release.
            self.server_name = discovery.server_name
            self.server_version = discovery.server_version
            tools = await self._convert(
                discovery.tools,
                discovery.protocol_version,
                link.session.capabilities,
                (discovery.server_name, discovery.server_version),
            )
            self.protocol_version = discovery.protocol_version
            self.era = discovery.era
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
            limits = self._watch_limits()
            if limits is None and instance.accounting is not None and instance.accounting.usable:
                limits = IsolationPolicy()  # no limit of the policy's, still the kernel's process bound
            if limits is not None:
                nursery.start_soon(self._watchdog, instance, limits)
            await link.done.wait()
            nursery.cancel_scope.cancel()

    async def _failed(self, instance: Instance, done: trio.Event, tmpdir: str | None) -> None:
        """The running instance's link ended with a failure: feed the failure's event."""
        link = instance.link
        assert link.failure is not None
        reason = link.failure
        if self.limit_hit is None and self._failure_event is None:
            hit = instance.kernel_hit()  # the kernel may have ended the tree for a bound before the watchdog saw it
            if hit is not None:
                self._record_hit(hit)
                self._failure_event = Event.LIMIT_EXCEEDED
                reason = f"was stopped for exceeding a limit: {hit.message} ({link.failure})"
        error = HostError(
            ErrorKind.PLUGIN_HOST_UNAVAILABLE,
            f"plugin {self.plugin_id} {reason}",
            plugin=self.plugin_id,
            reason=reason,
            stderrTail=link.stderr.tail(10),
            **({"limit": self.limit_hit} if self.limit_hit is not None else {}),
        )
        self.limit_hit = None
        event = self._failure_event if self._failure_event is not None else _link_failure_event(link.failure)

        async def stop_failed() -> None:
            link.failure_handled.set()  # calls in flight answer now: the parent has been told
            await self._stop_after_failure(instance, done, tmpdir)

        try:
            await self._feed(event, error=error, stop=stop_failed)
        finally:
            link.failure_handled.set()

    async def _publish(self, tools: list[RegisteredTool]) -> None:
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

    async def _convert(
        self,
        raw: list[dict[str, Any]],
        protocol_version: str | None,
        offered: dict[str, Any],
        server: tuple[str, str] | None = None,
    ) -> list[RegisteredTool]:
        """Validate a listing against the manifest (in a worker thread: schema checks cost).
        ``offered``: the client capabilities this instance was offered; they decide which
        conditional tools (``contributes.tools[].needs``) the listing must hold. ``server``: the
        ``serverInfo`` (name, version) a rejection names."""
        manifest = self.manifest
        features = offered_features(offered)

        def convert(listing: list[dict[str, Any]]) -> list[RegisteredTool]:
            tools = convert_tools(
                self.plugin_id,
                listing,
                permissions=trust.listing_permissions(manifest, listing),
                contributes=trust.expected_tools(manifest, listing, features),
                protocol_version=protocol_version,
                server=server if server is not None else (self.server_name or "", self.server_version or ""),
            )
            return trust.served(manifest, tools)

        return await trio.to_thread.run_sync(convert, raw)

    async def _stop_after_failure(self, instance: Instance, done: trio.Event, tmpdir: str | None) -> None:
        """End the tree of a failed instance (and empty its TMPDIR) before the restart policy looks at it."""
        with trio.CancelScope(shield=True):
            await self._unregister()
            report = await instance.stop(grace=0.5)
            self.last_exit = f"{report.step}, code {report.returncode}"
            await _empty_tmpdir(tmpdir)
            self._last_seen_fallback = instance.link.last_seen_at
            self._link = self._instance = self._net_proxy = None
            done.set()

    async def _refresher(self, link: PluginLink, current: list[RegisteredTool]) -> None:
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

    def _record_hit(self, hit: LimitHit) -> None:
        """Keep ``hit`` for the failure's error data (``limit``: ``{limit, value, threshold}``)."""
        self.limit_hit = {"limit": hit.limit, "value": hit.value, "threshold": hit.threshold}

    async def _watchdog(self, instance: Instance, limits: IsolationPolicy) -> None:
        """Resource limits (host policy): a plugin over its RSS, CPU or disk limit is ended (a remote
        instance has no local process: its watch never returns)."""
        hit = await instance.watch(limits, self._disk_paths)
        self._record_hit(hit)
        self._fail(instance.link, Event.LIMIT_EXCEEDED, f"was stopped for exceeding a limit: {hit.message}")

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


def shim_hint(error: HostError, launch: Launch) -> None:
    """Set ``error.data.hint`` to the PATH fix when ``launch`` ran a version manager's shim (hostd/install/shims.py).

    Such a start fails for want of the shell's setup, often with a "permission denied" on the manager's
    own files, whose sandbox hint (:func:`sandbox_hint`) would offer write access to them: this hint
    says it is a shim, why hostd did not follow it (``Launch.shim.reason``: the same reading of the
    manager's files) and which real program to name instead, over any other. A launch hostd resolved
    through the shim runs the real program, so it gets none. Reads the executable's first 4 KiB and
    the manager's version files (blocking, once per failed start).
    """
    from hostd.remote.endpoint import RemoteLaunch  # noqa: PLC0415 (a failed start's, as in InstanceRunner._open)

    if isinstance(launch, RemoteLaunch) or error.kind != ErrorKind.PLUGIN_START_FAILED:
        return
    shim = find_shim(launch.command, launch.executable)
    if shim is not None:
        read = resolve_shim(shim, launch.cwd, os.environ)
        # Followed now (a version installed since the approval): this start still ran the shim.
        error.data["hint"] = read.message if read.real is None else shim.message


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
