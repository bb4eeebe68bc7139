"""The host: installed plugins, grants, approvals, the tool registry, and the
control-protocol methods that act on them (``docs/protocol.md``).

The control channel (:mod:`hostd.control.server`) hands every request after
``initialize`` to :meth:`Host.handle`; the method table :data:`Host.METHODS`
maps each method name to one coroutine here. Params are validated by the
models in :mod:`hostd.control.models`.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import shutil
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar

import trio

from hostd.control import models as p
from hostd.control.core import InitializeOptions, Notify, RequestContext
from hostd.host import (
    call_grants,
    catalog,
    feature_methods,
    gate,
    install_methods,
    installs,
    network_grants,
    plugin_info,
    setup_methods,
    tool_methods,
)
from hostd.host import launch as resolver
from hostd.host.catalog import Catalog
from hostd.host.records import (
    BrokenPlugin,
    HostSettings,
    InstalledPlugin,
    LogRing,
    server_info_of,
)
from hostd.install.ecosystems import Registries
from hostd.install.manifest import Manifest
from hostd.mcp import client_features as features
from hostd.mcp.listing import ListingBounds
from hostd.plugins.registry import ToolRegistry
from hostd.plugins.restart import RestartPolicy
from hostd.plugins.supervisor import (
    Liveness,
    NetworkRequested,
    PluginSupervisor,
    RestartCounted,
    Start,
    SupervisorEvent,
    ToolsPinned,
    launch_failed,
)
from hostd.remote.oauth import Authorizer
from hostd.storage import secrets as secrets_
from hostd.storage.logstore import LogFiles
from hostd.storage.state import (
    PLUGIN_ID,
    START_ERROR_CHARS,
    PluginRecord,
    StateError,
    StateStore,
)
from hostd.wire.errors import ErrorKind, HostError
from sandbox import cgroups
from sandbox.environment import EnvPolicy, login_shell_path, merge_paths
from sandbox.launch import Launch, LaunchError
from sandbox.sweep import sweep_orphans

# Start-up cost: hostd imports this module after ``initialize`` and answers no host request
# before it is loaded. The class of module imported lazily here: one that only a request
# other than the start and ``plugins/list`` needs (bundles, config import: pydantic models,
# zipfile, the JSON5 parser). Each is imported in the handler that needs it, ~15 ms saved.

#: What other code reads of this module: ``hostd serve`` (hostd/cli/hostd.py) builds the host from these, by name.
__all__ = ["Host", "HostSettings", "InstalledPlugin", "LogRing", "Registries"]

log = logging.getLogger("hostd.host.service")

Handler = Callable[["Host", Any, RequestContext], Awaitable[Any]]


class Host:
    """Serves the plugin and tool methods of the control protocol.

    Build it with :meth:`create`; ``settings`` is the host policy.
    """

    METHODS: ClassVar[dict[str, Handler]] = {}

    def __init__(
        self,
        options: InitializeOptions,
        notify: Notify,
        nursery: trio.Nursery,
        settings: HostSettings,
    ) -> None:
        self.options = options
        self._send = notify
        #: What every notification goes through: plugins/log lines are kept in the plugin's ring first.
        self.notify: Notify = self._notify_and_keep
        #: plugin id -> its recent log lines (plugins/logs); survives restarts, dropped at uninstall.
        self.logs: dict[str, LogRing] = {}
        #: The last failure of each plugin written to its log (:meth:`_keep_failure`): each failure once.
        self._logged_failure: dict[str, str] = {}
        #: The same lines on disk, across hostd processes (hostd/storage/logstore.py); None without a state folder.
        self.log_files: LogFiles | None = None
        self.nursery = nursery
        self.registry = ToolRegistry()
        self.settings = settings
        self.env_policy = EnvPolicy(pass_proxy=settings.pass_proxy)
        self.known_permissions = set(options.known_permissions) if options.known_permissions is not None else None
        self._shutting_down = False
        #: Around the restore of enabled plugins; :meth:`shutdown` cancels it.
        self._restore_scope = trio.CancelScope()
        #: Set once the restore of the enabled plugins is over (each started, failed or refused), or at once when
        #: there is none to do; ``hostd mcp`` answers its first ``tools/list`` after it (hostd/gateway/server.py).
        self.restored = trio.Event()
        #: Plugins being refused at restore now: their ``error`` is not a failed start (:meth:`_record_start`).
        self._refusing: set[str] = set()
        self.store: StateStore | None = options.state_store
        #: The plugins, the broken ones and the state document's records (hostd/host/catalog.py).
        self.catalog = Catalog(self.store)
        #: To send notifications from worker threads (a damaged file found while reading it).
        self._trio_token = trio.lowlevel.current_trio_token()
        #: The PATH of the user's login shell, appended to hostd's own for command lookup; read it
        #: through :meth:`command_path`, which waits for a lookup :meth:`create` started (set at its
        #: end); ``None``: no lookup pending (a host built without :meth:`create` uses none).
        self.login_path: str | None = None
        self._login_path_known: trio.Event | None = None
        #: Secret values of plugins (hostd/storage/secrets.py); none without a state folder.
        self.secret_store = (
            secrets_.SecretStore(self.store.directory, report=self.report_from_thread)
            if self.store is not None
            else None
        )
        #: One preparation at a time per plugin (two would share its environment folder).
        self.prepare_locks: dict[str, trio.Lock] = {}
        #: OAuth of remote plugins: credentials under <state>/credentials, the browser step in the parent.
        credentials = self.store.directory / "credentials" if self.store is not None else None
        self.authorizer = Authorizer(
            credentials, lambda: self.options.request_parent, options.client_id_metadata_document
        )

    @classmethod
    async def create(
        cls,
        options: InitializeOptions,
        notify: Notify,
        nursery: trio.Nursery,
        settings: HostSettings | None = None,
        *,
        login_path: tuple[str | None] | None = None,
    ) -> Host:
        """Build the host for one control session (called after ``initialize``).

        Reads the state document and starts restoring in the background:
        every plugin that was enabled is enabled again (at most 4 at a time),
        unless its manifest or launch changed since it was approved.
        Raises ``STATE_UNUSABLE`` when the document cannot be used.

        ``login_path``: the login shell's ``PATH`` (:func:`sandbox.environment.login_shell_path`), one item,
        when the caller looked it up already (hostctl's reading commands, while importing this module);
        ``None``: looked up here when ``settings.login_path``.
        """
        host = cls(options, notify, nursery, settings if settings is not None else HostSettings())
        if login_path is not None and host.settings.login_path:
            host.login_path = login_path[0]
        elif host.settings.login_path:
            # Off the start path: the login shell takes ~0.25 s (a profile may take seconds), and no
            # request needs it before the first launch resolution, which waits for it (command_path).
            host._login_path_known = known = trio.Event()
            nursery.start_soon(host._find_login_path, known)
        if not host.settings.read_only:  # a reader owns no plugin process, and may run beside a hostd that does
            swept = await trio.to_thread.run_sync(sweep_orphans)
            if swept:
                log.warning("ended %d plugin processes left behind by a previous hostd", swept)
            stale = await trio.to_thread.run_sync(cgroups.sweep_stale_detected)
            if stale:
                log.warning("removed %d cgroups left behind by a previous hostd: %s", len(stale), ", ".join(stale))
        if host.store is not None:
            store = host.store
            try:
                opened = await trio.to_thread.run_sync(store.open)
            except StateError as exc:
                raise HostError(ErrorKind.STATE_UNUSABLE, str(exc), stateDir=str(store.directory)) from None
            if host.secret_store is not None and host.secret_store.backend == "file" and not host.settings.read_only:
                # A damaged secrets file is moved aside and reported now; an unreadable one fails only the
                # plugins that need it (STATE_FILE_UNREADABLE at their enable), and is reported now.
                problem = await trio.to_thread.run_sync(host.secret_store.check)
                if problem is not None:
                    opened.warnings.append(problem)
            for warning in opened.warnings:
                log.warning("%s", warning)
            host.catalog.records = dict(opened.plugins)
            host.log_files = LogFiles(store.directory / "logs")
            if not host.settings.read_only:  # a reader's lines (none but a refusal shown again) are not kept
                nursery.start_soon(host.log_files.run)
            to_enable = await catalog.restore(host, opened.warnings)
            if not host.settings.read_only:  # a reader writes nothing: the next hostd migrates
                await install_methods.migrate_secrets(host)
            if host.settings.restore:
                nursery.start_soon(host._restore_enabled, to_enable)
            else:
                await host._show_failed_starts(to_enable)
        if not host.settings.restore or host.store is None:
            host.restored.set()
        return host

    @property
    def plugins(self) -> dict[str, InstalledPlugin]:
        """The installed plugins by id (:attr:`Catalog.plugins`)."""
        return self.catalog.plugins

    @property
    def broken(self) -> dict[str, BrokenPlugin]:
        """The broken plugins by id (:attr:`Catalog.broken`)."""
        return self.catalog.broken

    def change(self) -> AbstractAsyncContextManager[None]:
        """Apply the body's changes to memory and the state document together, or to neither
        (:meth:`Catalog.change`)."""
        return self.catalog.change()

    async def _find_login_path(self, known: trio.Event) -> None:
        """Run :func:`login_shell_path` in a worker thread and record it (``None`` on failure).

        Started by :meth:`create` in the session's nursery. Cancellation (the
        session ends) abandons the thread, which ends by itself (bounded by
        its 3 s time-out); the event is set on every exit, so no waiter hangs.
        """
        try:
            self.login_path = await trio.to_thread.run_sync(login_shell_path, abandon_on_cancel=True)
        finally:
            known.set()

    async def command_path(self) -> str:
        """hostd's ``PATH`` followed by the login shell's entries it lacks (``PATH`` syntax).

        Waits for :meth:`_find_login_path` the first time (at most its 3 s
        time-out); cancellable while it waits, with no side effect.
        """
        if self._login_path_known is not None:
            await self._login_path_known.wait()
        return merge_paths(os.environ.get("PATH", ""), self.login_path)

    def report_from_thread(self, plugin_id: str | None, message: str) -> None:
        """Tell the parent (``plugins/log``, level ``error``) about a damaged file; callable from any thread."""
        log.error("%s", message)

        def send() -> None:
            params = {"plugin": plugin_id, "level": "error", "source": "host", "message": message}
            with contextlib.suppress(RuntimeError):  # the session is ending: the log line above stays
                self.nursery.start_soon(self.notify, "plugins/log", params)

        with contextlib.suppress(trio.RunFinishedError):
            self._trio_token.run_sync_soon(send)

    async def _notify_and_keep(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification to the parent; a ``plugins/log`` about a plugin is kept in its ring too, and so
        is hostd's own reason when a ``plugins/statusChanged`` says a plugin went to ``error`` (once per failure:
        ``plugins/logs`` then says why each start failed, not only what the server wrote); a
        ``plugins/statusChanged`` to ``error`` or ``ready`` of an enabled plugin is recorded as its start
        failure (or the end of one) in the state document (:meth:`_record_start`)."""
        if method == "plugins/statusChanged":
            self._record_start(params)
        if method == "plugins/log" and isinstance(params.get("plugin"), str):
            self._keep_line(
                params["plugin"], str(params.get("level")), params.get("source"), str(params.get("message"))
            )
        elif method == "plugins/statusChanged" and isinstance(params.get("plugin_id"), str):
            self._keep_failure(params["plugin_id"], params)
        await self._send(method, params)

    def _keep_line(self, plugin_id: str, level: str, source: Any, message: str) -> None:
        """One log line of ``plugin_id`` in its ring and its log file."""
        line = self.logs.setdefault(plugin_id, LogRing()).add(level, source, message)
        if self.log_files is not None and not self.settings.read_only:
            self.log_files.add(plugin_id, line.wire())

    def _keep_failure(self, plugin_id: str, status: dict[str, Any]) -> None:
        """hostd's reason for a failed start (a ``PluginStatus`` in ``error``) as ``host`` log lines: the
        message, then each listed problem (``data.problems`` of a rejected tool listing, at most 20)."""
        error = status.get("error")
        if status.get("status") != "error" or not isinstance(error, dict):
            self._logged_failure.pop(plugin_id, None)
            return
        if "failedAt" in error or (plugin_id in self._refusing and not self.settings.restore):
            # Shown, not happening: a hostd that starts nothing (--no-restore: one per hostctl command) shows a
            # recorded failure, or what its restore would refuse, without a start. The class (issue 28): a
            # command that only reads appending to the log it reads; the failure was logged when it happened.
            return
        text = f"start failed: {error.get('kind') or 'error'}: {error.get('message')}"
        if self._logged_failure.get(plugin_id) == text:
            return
        self._logged_failure[plugin_id] = text
        self._keep_line(plugin_id, "error", "host", text)
        for problem in (error.get("problems") or [])[:20]:
            if isinstance(problem, dict):
                self._keep_line(
                    plugin_id,
                    "error",
                    "host",
                    f"  tool {problem.get('tool')!r}, {problem.get('field') or 'tool'}: {problem.get('message')}",
                )

    def _record_start(self, status: dict[str, Any]) -> None:
        """Keep why an enabled plugin's start failed (``status`` is its ``PluginStatus``: ``error`` with the
        reason) in its record, or forget it (``ready``, which records the ``serverInfo`` reported); the document
        is written in the background when it changed (a failed write is logged). Read back by
        :meth:`_show_failed_starts` in a later hostd.

        The class (issue 28): a failure only the hostd that saw it knew, so that every later hostd (one per
        hostctl command) started the plugin again to find out, printing its start-up lines each time.
        """
        plugin = self.plugins.get(str(status.get("plugin_id")))
        if plugin is None:
            return
        error = status.get("error")
        recorded = plugin.start_error
        if status.get("status") == "error" and plugin.enabled and isinstance(error, dict):
            if "failedAt" in error or plugin.manifest.id in self._refusing:  # shown again, or a refusal
                return
            kind, message = str(error.get("kind")), str(error.get("message"))
            if recorded is not None and (recorded["kind"], recorded["message"]) == (kind, message[:START_ERROR_CHARS]):
                return
            now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            plugin.start_error = {"kind": kind, "message": message[:START_ERROR_CHARS], "time": now}
            if isinstance(error.get("reason"), str):
                plugin.start_error["reason"] = error["reason"][:START_ERROR_CHARS]
        elif status.get("status") == "ready" and (recorded is not None or server_info_of(status) != plugin.server_info):
            plugin.start_error = None
            plugin.server_info = server_info_of(status)  # what runs, for a later hostd (an imported script's version)
        else:
            return
        with contextlib.suppress(RuntimeError):  # the session is ending: the next write records it
            self.nursery.start_soon(self.catalog.persist_quietly)

    async def _show_failed_starts(self, plugins: list[tuple[InstalledPlugin, PluginRecord]]) -> None:
        """``--no-restore``: nothing is started. An enabled plugin that restore would refuse (a changed
        manifest, a grant taken back: :meth:`_restore_one`'s checks, no process started) is shown ``error``
        with that refusal; else one whose last start failed (its record's ``startError``) with that
        reason. So ``plugins/list`` and ``plugins/status`` say why without starting it again
        (``plugins/enable`` tries again)."""
        for plugin, record in plugins:
            if await self._restore_check(plugin, record) is None:
                continue
            recorded = plugin.start_error
            if recorded is None:
                continue
            kind = ErrorKind.__members__.get(recorded["kind"], ErrorKind.PLUGIN_START_FAILED)
            message = f"{recorded['message']} (its last start, at {recorded['time']}, failed; not tried again here)"
            reason = {"reason": recorded["reason"]} if "reason" in recorded else {}
            await plugin.supervisor.refuse(
                HostError(kind, message, plugin=plugin.manifest.id, failedAt=recorded["time"], **reason)
            )

    async def _restore_check(self, plugin: InstalledPlugin, record: PluginRecord) -> Start | None:
        """What starts ``plugin`` at restore (:meth:`_gate`'s ``Start``), or None when restore refuses it:
        its manifest changed since approval, or a check of the gate fails; it is then in state ``error``
        with the refusal (logged), no process started. A refusal is not a failed start: it is found
        again at each restore, never recorded (:meth:`_record_start`)."""
        plugin_id = plugin.manifest.id
        if plugin.manifest_digest != record.manifest_digest:
            refusal = HostError(
                ErrorKind.MANIFEST_CHANGED,
                f"plugin {plugin_id}: its manifest changed on disk since it was approved; "
                "approve it again, then enable",
                plugin=plugin_id,
                path=str(plugin.path),
            )
        else:
            try:
                return await self._gate(plugin)
            except HostError as error:
                refusal = error
                log.warning("restoring plugin %s refused: %s", plugin_id, error.message)
        self._refusing.add(plugin_id)
        try:
            await plugin.supervisor.refuse(refusal)
        finally:
            self._refusing.discard(plugin_id)
        return None

    async def _restore_enabled(self, plugins: list[tuple[InstalledPlugin, PluginRecord]]) -> None:
        """Enable again what was enabled (4 at a time), unless it changed since approval.

        Runs under :attr:`_restore_scope`, which :meth:`shutdown` cancels first:
        a plugin still queued is not started, one mid-start ends ``stopped``.
        """
        limiter = trio.CapacityLimiter(4)
        try:
            with self._restore_scope:
                async with trio.open_nursery() as nursery:
                    for plugin, record in plugins:
                        nursery.start_soon(self._restore_one, plugin, record, limiter)
        finally:
            self.restored.set()

    async def _restore_one(self, plugin: InstalledPlugin, record: PluginRecord, limiter: trio.CapacityLimiter) -> None:
        """Restore one plugin: refused (state ``error``) only for what restore itself found.

        The class: what the gate finds (a changed manifest or launch, a permission
        withdrawn) is a refusal the user must act on. A start that something else
        ended (``shutdown`` cancels the restore, ``disable`` or ``uninstall``
        abandons the start) is not: the plugin ends ``stopped`` with no error and
        keeps ``enabled``, so the next hostd starts it again (issue 14). A failed
        start is already ``error`` with its own reason.
        """
        plugin_id = plugin.manifest.id
        async with limiter:
            start = await self._restore_check(plugin, record)
            if start is None:
                return
            try:
                await plugin.supervisor.enable(start)
            except HostError as error:
                log.warning("restoring plugin %s failed: %s", plugin_id, error.message)

    def expedite(self) -> None:
        """A second SIGTERM during shutdown: skip the remaining graces (kill the trees now)."""
        for plugin in self.plugins.values():
            plugin.supervisor.expedite()

    async def reload_manifests(self) -> None:
        """SIGHUP: re-read every installed plugin's manifest from disk.

        A changed manifest replaces the stored one for the next start; since
        the approval digest covers the manifest, the next enable or restart
        needs a new ``plugins/approve``. A running plugin keeps running. When
        the state document cannot be written, nothing is reloaded (logged).
        """
        try:
            async with self.change():
                await catalog.reload_manifests(self)
        except HostError as error:
            log.error("re-reading manifests: %s", error.message)

    async def handle(self, method: str, params: Any, ctx: RequestContext) -> Any:
        """Serve one request; ``KeyError(method)`` when no such method."""
        handler = self.METHODS[method]
        return await handler(self, params, ctx)

    async def shutdown(self, *, fast: bool) -> None:
        """Stop every plugin concurrently (whole trees); ``fast`` skips the graces."""
        self._shutting_down = True
        self._restore_scope.cancel()  # nothing queued starts now; a start in progress ends stopped
        grace = 0.0 if fast else 2.0
        async with trio.open_nursery() as nursery:
            for plugin in self.plugins.values():
                nursery.start_soon(_disable_quietly, plugin.supervisor, grace)
        if self.log_files is not None:
            try:
                await self.log_files.flush()  # the last lines of the plugins just stopped
            except OSError as exc:
                log.error("writing the plugins' log files failed: %s", exc)
        try:
            await self.catalog.persist()
        except HostError as error:
            log.error("saving the state failed: %s", error.message)
        if self.store is not None:
            self.store.close()

    # -- helpers ----------------------------------------------------------------

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        """The installed plugin ``plugin_id``; ``PLUGIN_BROKEN`` (its error) or ``PLUGIN_NOT_FOUND`` otherwise."""
        return self.catalog.plugin(plugin_id)

    def _broken(self, plugin_id: str) -> BrokenPlugin | None:
        """The broken plugin ``plugin_id`` when no installed plugin has that id."""
        return self.catalog.broken_only(plugin_id)

    async def resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch and record it on ``plugin`` (:func:`hostd.host.launch.resolve`).

        Raises :class:`sandbox.launch.LaunchError`; cancellation waits for the worker thread.
        """
        return await resolver.resolve(self, plugin)

    def info(self, plugin: InstalledPlugin) -> dict[str, Any]:
        """:class:`hostd.control.models.PluginInfo` as sent on the wire."""
        return self._info_model(plugin).wire()

    def _info_model(self, plugin: InstalledPlugin) -> p.PluginInfo:
        """:func:`hostd.host.plugin_info.info_model`, told whether ``plugins/import`` generated ``plugin``'s
        manifest (its folder is ``<stateDir>/imported/<id>``, as :func:`hostd.host.install_methods.import_config`
        writes it)."""
        imported = self.store is not None and plugin.path.parent == self.store.directory / "imported"
        return plugin_info.info_model(plugin, imported)

    # -- plugins/* --------------------------------------------------------------

    def add_plugin(self, folder: Path, manifest: Manifest, digest: str, *, restarts: int = 0) -> InstalledPlugin:
        """Add a stopped plugin (replacing one of the same id) with a supervisor of its own."""
        bound: list[InstalledPlugin] = []  # the supervisor's events go to this plugin, not to its id's successor

        async def on_event(event: SupervisorEvent) -> None:
            await self._supervisor_event(bound[0], event)

        supervisor = PluginSupervisor(
            manifest,
            self.registry,
            self.notify,
            self.nursery,
            on_event=on_event,
            restart_policy=RestartPolicy(mode=self.settings.restart),
            liveness=Liveness(self.settings.ping_interval, self.settings.ping_timeout),
            result_limit=self.settings.max_result_bytes,
            frame_limit=self.settings.max_plugin_frame_bytes,
            restarts=restarts,
        )
        supervisor.features = features.PluginFeatures(
            feature_methods.PluginFeatureParent(self, manifest.id), manifest.id
        )
        supervisor.authorizer = self.authorizer
        supervisor.resolve_pins = dict(self.settings.resolve)

        def askable(name: str) -> bool:
            """Whether network_grants.decide might let ``name`` through on some port: a parent to ask now, or a
            recorded ``always`` for it (transparent DNS then gives it an address; the port is decided later)."""
            if "network" in self.options.client_capabilities and self.options.request_parent is not None:
                return True
            return any(entry.rpartition(":")[0].strip("[]") == name for entry in bound[0].network_call_hosts)

        supervisor.network_askable = askable
        plugin = InstalledPlugin(path=folder, manifest=manifest, manifest_digest=digest, supervisor=supervisor)
        store = self.secret_store
        if store is not None:  # the install's secrets (read at lookup time: the install is set after this)
            supervisor.secret_lookup = lambda plugin_id, name: store.get(
                installs.secret_owner(plugin_id, plugin.install), name
            )
        bound.append(plugin)
        self.plugins[manifest.id] = plugin
        return plugin

    async def _supervisor_event(self, plugin: InstalledPlugin, event: SupervisorEvent) -> None:
        """What a supervisor tells the host (:data:`hostd.plugins.supervisor.SupervisorEvent`).

        ``RestartCounted``: save the count best-effort. ``ToolsPinned``: record the
        first pins with the state document, or raise ``STATE_WRITE_FAILED`` (the
        start fails, nothing pinned). ``RetryDue``: run the trust gate again and
        answer with a start or the gate's refusal (approval voided, command gone).
        ``NetworkRequested``: the parent's answer for a destination the plugin's
        allowlist does not name (:func:`hostd.host.network_grants.decide`).
        """
        if isinstance(event, RestartCounted):
            await self.catalog.persist_quietly()
        elif isinstance(event, ToolsPinned):
            async with self.change():
                plugin.pins = dict(event.pins)
        elif isinstance(event, NetworkRequested):
            event.reply.append(await network_grants.decide(self, plugin, event.host, event.port))
        else:
            try:
                start: Start | HostError = await self._gate(plugin)
            except HostError as refused:
                start = refused
            await plugin.supervisor.retry(start)

    def _disk_limit(self, plugin: InstalledPlugin) -> int | None:
        """The disk bound of ``plugin``'s next start: its own (``plugins/grant``) or the host's, in bytes."""
        own = plugin.limits.get("max_disk_bytes")
        return int(own) if own is not None else self.settings.max_disk_bytes

    async def uninstall(self, params: Any, ctx: RequestContext) -> None:
        """``plugins/uninstall {id}``: forget the plugin (written first), then disable it and
        delete what hostd generated for it (see :func:`_remove_generated`).

        ``STATE_WRITE_FAILED``: still installed, still running.
        """
        plugin_id = p.parse_params(p.PluginRef, params).id
        broken = self._broken(plugin_id)
        if broken is not None:  # its record goes; what hostd generated for it too (when its id is one)
            async with self.change():
                self.catalog.records.pop(plugin_id, None)
            self.broken.pop(plugin_id, None)
            folder = Path(broken.path) if broken.path and os.path.isabs(broken.path) else None
            record = broken.record if isinstance(broken.record, PluginRecord) else None
            install = record.install if record is not None else {}
            await self._forget(plugin_id, folder if PLUGIN_ID.fullmatch(plugin_id) else None, install)
            return
        plugin = self._plugin(plugin_id)
        async with self.change():
            self.plugins.pop(plugin.manifest.id, None)
            self.catalog.records.pop(plugin.manifest.id, None)
        self.broken.pop(plugin_id, None)
        await plugin.supervisor.disable()
        await self._forget(plugin.manifest.id, plugin.path, plugin.install)

    async def _forget(self, plugin_id: str, folder: Path | None, install: dict[str, str]) -> None:
        """After an uninstall: drop ``plugin_id``'s logs and generated files (``folder``: None, none); its data
        and secrets are kept aside for its ``install`` (:func:`hostd.host.installs.keep_aside`; the secrets stay
        under :func:`hostd.host.installs.secret_owner`, which no other install has)."""
        self.logs.pop(plugin_id, None)
        if self.log_files is not None:
            await self.log_files.drop(plugin_id)
        if self.store is None:
            return
        if folder is not None:
            await trio.to_thread.run_sync(
                _remove_generated, self.store.directory, folder, plugin_id, install, self.secret_store
            )

    async def list(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/list {}`` -> ``{plugins: [PluginInfo]}`` sorted by id."""
        p.parse_params(p.Empty, params)
        broken = {k: b for k, b in self.broken.items() if k not in self.plugins}
        plugins = [
            self._info_model(self.plugins[k]) if k in self.plugins else broken[k].info()
            for k in sorted({*self.plugins, *broken})
        ]
        return p.PluginsListResult(plugins=plugins).wire()

    async def enable(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/enable {id}`` -> ``PluginStatus`` once ready (docs/protocol.md "plugins/enable").

        ``pinned`` lists the tools this enable pinned on first use (:mod:`hostd.plugins.trust`).
        """
        plugin = self._plugin(p.parse_params(p.PluginRef, params).id)
        start = await self._gate(plugin)
        async with self.change():
            plugin.enabled = True
        try:
            return await plugin.supervisor.enable(start)
        except trio.Cancelled:
            await self._abandoned(plugin)
            raise

    async def _gate(self, plugin: InstalledPlugin) -> Start:
        """Steps 1 and 2 of enable: every permission granted, the launch approved (:func:`hostd.host.gate.decide`).

        Returns the :class:`~hostd.plugins.supervisor.Start` for the supervisor: the
        approved launch with the manifest, pins and limits it runs with. Raises, in
        this order, ``PLUGIN_START_FAILED`` (the launch does not resolve),
        ``PERMISSION_NOT_GRANTED`` or ``MCP_TRUST_APPROVAL_REQUIRED``.
        """
        plugin_id = plugin.manifest.id
        try:
            launch = await self.resolve(plugin)
        except LaunchError as exc:
            error = launch_failed(plugin_id, exc)
            if plugin.shim is not None and plugin.shim.real is None:  # nvm's node, not followed: the PATH fix
                error.data["hint"] = plugin.shim.message
            raise error from None
        decision = gate.decide(
            gate.gate_inputs(
                plugin, launch, has_state=self.store is not None, trust_development=self.settings.trust_development
            )
        )
        if isinstance(decision, HostError):
            raise decision
        if not decision.approved:
            log.warning("plugin %s: launch not approved (--trust development): starting anyway", plugin_id)
        return Start(
            launch=await trio.to_thread.run_sync(resolver.with_secrets, self, plugin, launch),
            manifest=plugin.manifest,
            pins=plugin.pins,
            limits=plugin.policy,
            disk_limit=self._disk_limit(plugin),
            listing=ListingBounds.of_limits(plugin.limits),
        )

    async def disable(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/disable {id}`` -> ``PluginStatus`` (``stopped``).

        The plugin is stopped first, whatever the disk says: disabling is how a
        user ends a plugin that fills the disk. Then ``enabled: false`` is
        written; if that write fails the answer is ``STATE_WRITE_FAILED``, the
        plugin stays stopped, and memory keeps what the disk has (``enabled:
        true``: the next start of hostd would start it again, which the
        message says).
        """
        plugin = self._plugin(p.parse_params(p.PluginRef, params).id)
        status = await plugin.supervisor.disable()
        try:
            async with self.change():
                plugin.enabled = False
        except HostError as error:
            if error.kind is ErrorKind.STATE_WRITE_FAILED:
                error.message += "; the plugin is stopped, but hostd's next start will start it again"
                error.data["status"] = status
            raise
        return status

    async def restart(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/restart {id}``: only for an enabled plugin, else ``PLUGIN_STATE_CONFLICT``."""
        plugin = self._plugin(p.parse_params(p.PluginRef, params).id)
        if not plugin.enabled:
            raise HostError(
                ErrorKind.PLUGIN_STATE_CONFLICT,
                f"plugin {plugin.manifest.id} is not enabled; enable it instead",
                plugin=plugin.manifest.id,
                status=plugin.supervisor.state.value,
            )
        start = await self._gate(plugin)
        try:
            return await plugin.supervisor.restart(start)
        except trio.Cancelled:
            await self._abandoned(plugin)
            raise
        finally:
            with trio.CancelScope(shield=True):
                await self.catalog.persist_quietly()

    async def restart_running(self, plugin: InstalledPlugin) -> None:
        """Restart the enabled ``plugin`` with its launch resolved now (a call-time grant in its rules) and
        wait until it is ready (hostd/host/call_grants.py). Raises what ``plugins/restart`` raises; calls in
        flight on the old process end with ``PLUGIN_HOST_UNAVAILABLE``."""
        start = await self._gate(plugin)
        try:
            await plugin.supervisor.restart(start)
        finally:
            with trio.CancelScope(shield=True):
                await self.catalog.persist_quietly()

    async def _abandoned(self, plugin: InstalledPlugin) -> None:
        """A start the parent cancelled (``$/cancelRequest`` of enable or restart): the plugin stays off.

        The supervisor has already stopped the instance and said ``stopped``;
        ``enabled`` becomes false and is saved (shielded; a failed write is
        logged), so a restart of hostd does not start what the parent gave up on.
        """
        plugin.enabled = False
        with trio.CancelScope(shield=True):
            await self.catalog.persist_quietly()

    async def auth_callback(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``auth/callback {plugin, url}`` -> ``{}``: the redirect of the plugin's authorization
        (hostd/remote/oauth.py)."""
        args = p.parse_params(p.AuthCallbackParams, params)
        self._plugin(args.plugin)
        self.authorizer.callback(args.plugin, args.url)
        return {}

    async def logout(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/logout {id}`` -> ``PluginStatus``: forget the plugin's OAuth credentials, then stop it."""
        plugin_id = p.parse_params(p.PluginRef, params).id
        self._plugin(plugin_id)
        await self.authorizer.logout(plugin_id)
        return await self.disable({"id": plugin_id}, ctx)

    async def status(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/status {id}`` -> ``PluginStatus`` (``broken``, with ``error``, for a :class:`BrokenPlugin`)."""
        plugin_id = p.parse_params(p.PluginRef, params).id
        broken = self._broken(plugin_id)
        if broken is not None:
            return broken.status()
        return self._plugin(plugin_id).supervisor.status()

    async def plugin_logs(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/logs {id, limit?}`` -> ``{lines: [LogLine], dropped}``: the plugin's recent log lines.

        What ``plugins/log`` carried for the plugin (stderr, MCP log messages, hostd's own
        lines about it; redacted), oldest first, across its restarts and across hostd
        processes on the same state folder, from its log file (hostd/storage/logstore.py, bounded
        by :data:`hostd.storage.logstore.LOG_FILE_BYTES`); without a state folder (or when the file
        cannot be read), from this hostd's ring, bounded by :data:`LOG_RING_LINES` lines
        and :data:`LOG_RING_CHARS` characters. A line the
        plugin-side rate limit dropped was never sent, so it is not here either (the
        "N log lines dropped" line is). ``PLUGIN_NOT_FOUND`` for an unknown id.
        """
        args = p.parse_params(p.LogsParams, params)
        if self._broken(args.id) is None:
            self._plugin(args.id)
        if self.log_files is not None:
            try:
                lines, dropped = await self.log_files.read(args.id, args.limit)
            except OSError as exc:
                log.warning("reading the log file of %s failed (answering from memory): %s", args.id, exc)
            else:
                kept = [line for raw in lines if (line := _log_line(raw)) is not None]
                return p.LogsResult(lines=kept, dropped=dropped).wire()
        ring = self.logs.get(args.id)
        if ring is None:
            return p.LogsResult(lines=[], dropped=0).wire()
        return p.LogsResult(lines=ring.recent(args.limit), dropped=ring.dropped).wire()


def _remove_generated(
    state_dir: Path, folder: Path, plugin_id: str, install: dict[str, str], store: secrets_.SecretStore | None = None
) -> None:
    """Delete what hostd generated for an uninstalled plugin: its folder when
    ``plugins/import`` wrote it (``<state>/imported/<id>``), its scratch ``TMPDIR``
    (``<state>/tmp/<id>``), its package caches (:func:`plugin_cache_env`), its private ``HOME``
    (``<state>/data/<id>/home``, :mod:`sandbox.home_view`: what it wrote under ``~``) and its data folder
    if that is then empty. The plugin's own data is kept, aside, for its ``install`` only
    (:func:`hostd.host.installs.keep_aside`; a later install gets it with ``adoptData`` and the same origin)."""
    if folder.parent in (state_dir / "imported", state_dir / "bundles", state_dir / "registry"):
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (state_dir / "settings" / f"{plugin_id}.json").unlink()
    data_dir = state_dir / "data" / plugin_id
    generated_dirs = (state_dir / "tmp" / plugin_id, state_dir / "prepared" / plugin_id, data_dir / "cache")
    # data/<id>/home: the plugin's private HOME (sandbox/home_view.py), what it wrote under ~ included.
    for generated in (*generated_dirs, data_dir / "uv-tools", data_dir / "home"):
        shutil.rmtree(generated, ignore_errors=True)
    try:
        held = store is not None and bool(store.names(installs.secret_owner(plugin_id, install)))
    except HostError:  # an unreadable secrets file: they stay where they are, under this install's key
        held = True
    try:
        installs.keep_aside(state_dir, plugin_id, install, has_secrets=held)
    except OSError as exc:  # the data stays under the id; the next install moves it aside (as "unknown")
        log.warning("uninstalling %s: its data was not moved aside: %s", plugin_id, exc)


def _log_line(raw: dict[str, Any]) -> p.LogLine | None:
    """A line of a plugin's log file as a :class:`LogLine`; ``None`` for one that is not (written by hand?)."""
    try:
        return p.LogLine.model_validate(raw)
    except ValueError:  # pydantic's ValidationError
        return None


async def _disable_quietly(supervisor: PluginSupervisor, grace: float) -> None:
    try:
        await supervisor.disable(grace=grace)
    except Exception:
        log.exception("stopping plugin %s failed", supervisor.plugin_id)


Host.METHODS = {
    "plugins/install": install_methods.install,
    "plugins/configure": setup_methods.configure,
    "plugins/import": install_methods.import_config,
    "plugins/uninstall": Host.uninstall,
    "plugins/list": Host.list,
    "plugins/grant": setup_methods.grant,
    "plugins/grantPath": call_grants.grant_path,
    "plugins/revokePath": call_grants.revoke_path,
    "plugins/prepare": setup_methods.prepare,
    "plugins/approve": setup_methods.approve,
    "plugins/enable": Host.enable,
    "plugins/disable": Host.disable,
    "plugins/restart": Host.restart,
    "plugins/status": Host.status,
    "plugins/logs": Host.plugin_logs,
    "plugins/logout": Host.logout,
    "auth/callback": Host.auth_callback,
    "tools/list": tool_methods.tools_list,
    "tools/call": tool_methods.tools_call,
    **feature_methods.METHODS,
    "tools/setEnabled": tool_methods.tools_set_enabled,
}
