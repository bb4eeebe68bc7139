"""The host: installed plugins, grants, approvals, the tool registry, and the
control-protocol methods that act on them (``docs/protocol.md``).

The control channel (:mod:`hostd.control.server`) hands every request after
``initialize`` to :meth:`Host.handle`; the method table :data:`Host.METHODS`
maps each method name to one coroutine here. Params are validated by the
models in :mod:`hostd.control.models`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from hostd.control import models as p
from hostd.control.server import InitializeOptions, Notify, RequestContext
from hostd.host import feature_methods, install_methods, plugin_info
from hostd.host import launch as resolver
from hostd.host.records import (
    BrokenPlugin,
    HostSettings,
    InstalledPlugin,
    LogRing,
    broken_error,
    load_stored_manifest,
    write_failed,
)
from hostd.install.ecosystems import Registries
from hostd.install.manifest import Manifest
from hostd.install.packages import PrepareError, parse_package_launch
from hostd.install.prepare import prepare as prepare_packages
from hostd.mcp import client_features as features
from hostd.mcp.tools import validate_arguments
from hostd.plugins.registry import ToolRegistry
from hostd.plugins.restart import RestartPolicy
from hostd.plugins.supervisor import (
    Liveness,
    PluginSupervisor,
    RestartCounted,
    Start,
    State,
    SupervisorEvent,
    ToolsPinned,
    launch_failed,
)
from hostd.remote.oauth import Authorizer
from hostd.storage import secrets as secrets_
from hostd.storage.logstore import LogFiles
from hostd.storage.state import (
    PLUGIN_ID,
    PluginRecord,
    StateError,
    StateStore,
    StoredRecord,
    UnreadableRecord,
)
from hostd.wire.errors import ErrorKind, HostError
from sandbox.environment import EnvPolicy, login_shell_path, merge_paths
from sandbox.launch import Launch, LaunchError
from sandbox.process import sweep_orphans

if TYPE_CHECKING:
    pass

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
        #: The same lines on disk, across hostd processes (hostd/storage/logstore.py); None without a state folder.
        self.log_files: LogFiles | None = None
        self.nursery = nursery
        self.registry = ToolRegistry()
        self.plugins: dict[str, InstalledPlugin] = {}
        self.settings = settings
        self.env_policy = EnvPolicy(pass_proxy=settings.pass_proxy)
        self.known_permissions = set(options.known_permissions) if options.known_permissions is not None else None
        self._shutting_down = False
        #: Around the restore of enabled plugins; :meth:`shutdown` cancels it.
        self._restore_scope = trio.CancelScope()
        self.store: StateStore | None = options.state_store
        #: What the state document holds per plugin id, readable or not (an unreadable record is written back as is).
        self._records: dict[str, StoredRecord] = {}
        #: Installed plugins whose stored files no longer load (:class:`BrokenPlugin`); an id in
        #: :attr:`plugins` shadows its entry here.
        self.broken: dict[str, BrokenPlugin] = {}
        #: To send notifications from worker threads (a damaged file found while reading it).
        self._trio_token = trio.lowlevel.current_trio_token()
        self._save_lock = trio.Lock()
        #: Held by every request that changes what the state document records (see :meth:`change`).
        self._change_lock = trio.Lock()
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
        self._prepare_locks: dict[str, trio.Lock] = {}
        #: OAuth of remote plugins: credentials under <state>/credentials, the browser step in the parent.
        credentials = self.store.directory / "credentials" if self.store is not None else None
        self.authorizer = Authorizer(credentials, lambda: self.options.request_parent)

    @classmethod
    async def create(
        cls,
        options: InitializeOptions,
        notify: Notify,
        nursery: trio.Nursery,
        settings: HostSettings | None = None,
    ) -> Host:
        """Build the host for one control session (called after ``initialize``).

        Reads the state document and starts restoring in the background:
        every plugin that was enabled is enabled again (at most 4 at a time),
        unless its manifest or launch changed since it was approved.
        Raises ``STATE_UNUSABLE`` when the document cannot be used.
        """
        host = cls(options, notify, nursery, settings if settings is not None else HostSettings())
        if host.settings.login_path:
            # Off the start path: the login shell takes ~0.25 s (a profile may take seconds), and no
            # request needs it before the first launch resolution, which waits for it (command_path).
            host._login_path_known = known = trio.Event()
            nursery.start_soon(host._find_login_path, known)
        swept = await trio.to_thread.run_sync(sweep_orphans)
        if swept:
            log.warning("ended %d plugin processes left behind by a previous hostd", swept)
        if host.store is not None:
            store = host.store
            try:
                opened = await trio.to_thread.run_sync(store.open)
            except StateError as exc:
                raise HostError(ErrorKind.STATE_UNUSABLE, str(exc), stateDir=str(store.directory)) from None
            if host.secret_store is not None and host.secret_store.backend == "file":
                # A damaged secrets file is moved aside and reported now; an unreadable one fails only the
                # plugins that need it (STATE_FILE_UNREADABLE at their enable), and is reported now.
                problem = await trio.to_thread.run_sync(host.secret_store.check)
                if problem is not None:
                    opened.warnings.append(problem)
            for warning in opened.warnings:
                log.warning("%s", warning)
            host._records = dict(opened.plugins)
            host.log_files = LogFiles(store.directory / "logs")
            nursery.start_soon(host.log_files.run)
            to_enable = await host._restore(opened.warnings)
            nursery.start_soon(host._restore_enabled, to_enable)
        return host

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
        """Send a notification to the parent; a ``plugins/log`` about a plugin is kept in its ring too."""
        if method == "plugins/log" and isinstance(params.get("plugin"), str):
            ring = self.logs.setdefault(params["plugin"], LogRing())
            line = ring.add(str(params.get("level")), params.get("source"), str(params.get("message")))
            if self.log_files is not None:
                self.log_files.add(params["plugin"], line.wire())
        await self._send(method, params)

    async def _restore(self, warnings: list[str]) -> list[tuple[InstalledPlugin, PluginRecord]]:
        """Install every stored plugin again (before any request is served), so that
        ``plugins/list`` right after ``initialize`` already shows them. Returns the
        plugins to enable again, which :meth:`_restore_enabled` does in the background."""
        for warning in warnings:
            await self.notify("plugins/log", {"plugin": None, "level": "warning", "source": "host", "message": warning})
        to_enable: list[tuple[InstalledPlugin, PluginRecord]] = []
        for plugin_id, record in sorted(self._records.items()):
            plugin = await self._restore_record(plugin_id, record)
            if plugin is not None and isinstance(record, PluginRecord) and record.enabled:
                to_enable.append((plugin, record))
        return to_enable

    async def _restore_record(self, plugin_id: str, record: StoredRecord) -> InstalledPlugin | None:
        """Install one stored plugin again, or list it ``broken`` (:class:`BrokenPlugin`) with the reason.

        Nothing of the record is lost either way: it stays in the document as it is. The parent is
        told of a broken plugin (``plugins/log`` and ``plugins/statusChanged``).
        """
        if isinstance(record, UnreadableRecord):
            field = f"plugins.{plugin_id}" + (f".{record.field}" if record.field else "")
            error = broken_error(
                plugin_id,
                record.path,
                "state",
                f"its record in state.json cannot be read ({record.reason})",
                [{"field": field, "message": record.reason}],
            )
            await self._mark_broken(plugin_id, record, error)
            return None
        try:
            manifest, digest = await trio.to_thread.run_sync(load_stored_manifest, Path(record.path))
        except HostError as failure:
            errors = failure.data.get("errors")
            reason = f"its manifest cannot be loaded ({failure.message})"
            error = broken_error(plugin_id, record.path, "manifest", reason, errors if isinstance(errors, list) else [])
            await self._mark_broken(plugin_id, record, error)
            return None
        if manifest.id != plugin_id:
            reason = f"its manifest now has the id {manifest.id!r}"
            error = broken_error(plugin_id, record.path, "manifest", reason, [{"field": "id", "message": reason}])
            await self._mark_broken(plugin_id, record, error)
            return None
        self.broken.pop(plugin_id, None)
        plugin = self.add_plugin(Path(record.path), manifest, digest, restarts=record.restarts)
        plugin.granted = set(record.granted) & set(manifest.permissions)
        plugin.approved_digest = record.approved_digest
        plugin.enabled = record.enabled
        plugin.pins = record.pinned_tools
        plugin.network_ports = set(record.network_ports) & set(manifest.backend.tcp_ports)
        plugin.limits = dict(record.limits)
        plugin.disabled_tools = set(record.disabled_tools)
        plugin.folders = {k: list(v) for k, v in record.folders.items()}
        with contextlib.suppress(LaunchError):
            await self.resolve(plugin)
        return plugin

    async def _mark_broken(self, plugin_id: str, record: StoredRecord, error: HostError) -> None:
        broken = BrokenPlugin(plugin_id, error.data.get("path"), record, error)
        self.broken[plugin_id] = broken
        log.warning("%s", error.message)
        await self.notify(
            "plugins/log", {"plugin": plugin_id, "level": "error", "source": "host", "message": error.message}
        )
        await self.notify("plugins/statusChanged", broken.status())

    async def _restore_enabled(self, plugins: list[tuple[InstalledPlugin, PluginRecord]]) -> None:
        """Enable again what was enabled (4 at a time), unless it changed since approval.

        Runs under :attr:`_restore_scope`, which :meth:`shutdown` cancels first:
        a plugin still queued is not started, one mid-start ends ``stopped``.
        """
        limiter = trio.CapacityLimiter(4)
        with self._restore_scope:
            async with trio.open_nursery() as nursery:
                for plugin, record in plugins:
                    nursery.start_soon(self._restore_one, plugin, record, limiter)

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
            if plugin.manifest_digest != record.manifest_digest:
                await plugin.supervisor.refuse(
                    HostError(
                        ErrorKind.MANIFEST_CHANGED,
                        f"plugin {plugin_id}: its manifest changed on disk since it was approved; "
                        "approve it again, then enable",
                        plugin=plugin_id,
                        path=str(plugin.path),
                    )
                )
                return
            try:
                start = await self._gate(plugin)
            except HostError as error:
                await plugin.supervisor.refuse(error)
                log.warning("restoring plugin %s refused: %s", plugin_id, error.message)
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
                await self._reload_manifests()
        except HostError as error:
            log.error("re-reading manifests: %s", error.message)

    async def _reload_manifests(self) -> None:
        for plugin_id, broken in sorted(self.broken.items()):
            # A plugin whose manifest was fixed on disk is loaded again (a bad record stays broken: SIGHUP
            # does not re-read state.json).
            if plugin_id not in self.plugins and isinstance(broken.record, PluginRecord):
                restored = await self._restore_record(plugin_id, broken.record)
                if restored is not None:  # stopped now; enabling it goes through the usual checks
                    message = "its manifest loads again: installed, stopped (plugins/enable starts it)"
                    await self.notify(
                        "plugins/log", {"plugin": plugin_id, "level": "warning", "source": "host", "message": message}
                    )
                    await self.notify("plugins/statusChanged", restored.supervisor.status())
        for plugin_id, plugin in sorted(self.plugins.items()):
            try:
                manifest, digest = await trio.to_thread.run_sync(load_stored_manifest, plugin.path)
            except HostError as error:
                # The last good manifest is kept (the plugin runs and starts with it until one loads).
                await self.notify(
                    "plugins/log", {"plugin": plugin_id, "level": "error", "source": "host", "message": error.message}
                )
                continue
            if digest == plugin.manifest_digest or manifest.id != plugin_id:
                continue
            plugin.manifest, plugin.manifest_digest = manifest, digest  # a running plugin keeps its own
            with contextlib.suppress(LaunchError):
                await self.resolve(plugin)
            await self.notify(
                "plugins/log",
                {
                    "plugin": plugin_id,
                    "level": "warning",
                    "source": "host",
                    "message": "manifest changed on disk; approve the new launch before the next start",
                },
            )

    async def persist(self) -> None:
        """Write every installed plugin's record to the state document (atomically).

        Raises ``STATE_WRITE_FAILED`` (``data.errno``, e.g. ``"ENOSPC"``;
        ``data.path``) when the document cannot be written: the document
        on disk is then the previous one. Writes are serialised; each records
        memory as it is when its turn comes.
        """
        if self.store is None:
            return
        store = self.store
        async with self._save_lock:
            records = dict(self._records)
            for plugin_id, plugin in self.plugins.items():
                records[plugin_id] = plugin.record()
            try:
                await trio.to_thread.run_sync(store.save, records)
            except OSError as exc:
                raise write_failed(exc, store.path) from None
            self._records = records

    # State changes. The class: a request (install, import, uninstall, grant, approve,
    # enable, disable, a SIGHUP reload) or a supervisor event (ToolsPinned: the first
    # pins after an approval) changes what the state document records, in memory, and
    # then writes the document. If the write fails (ENOSPC, EFBIG, EIO...), memory must
    # not keep what disk does not have (lost at the next restart, or half there): each
    # such change runs in ``async with self.change():``, which undoes the change in
    # memory when the write (or the change itself) fails, and the request answers
    # STATE_WRITE_FAILED (ToolsPinned: the start fails, nothing pinned). Side effects
    # that cannot be undone (stopping a plugin, releasing withheld tools) come after the
    # write succeeded. The restart counter (RestartCounted) is a statistic, written
    # best-effort (``_persist_quietly``). Every recorded field lives on InstalledPlugin;
    # none on the supervisor.

    @contextlib.asynccontextmanager
    async def change(self) -> AsyncIterator[None]:
        """Apply the body's changes to memory and the state document together, or to neither.

        Runs the body under :attr:`_change_lock`, then :meth:`persist`. If
        either raises, every recorded field the body changed (and nobody
        changed since) is put back, and the exception propagates
        (``STATE_WRITE_FAILED`` from the write). Cancellation undoes the same way.
        """
        async with self._change_lock:
            before = self._snapshot()
            after: _Snapshot | None = None
            try:
                yield
                after = self._snapshot()
                await self.persist()
            except BaseException:
                self._undo(before, after if after is not None else self._snapshot())
                raise

    def _snapshot(self) -> _Snapshot:
        fields: dict[tuple[int, str], tuple[Any, Any]] = {}
        for plugin in self.plugins.values():
            for name in _PLUGIN_FIELDS:
                fields[(id(plugin), name)] = (plugin, _copied(getattr(plugin, name)))
        return _Snapshot(plugins=dict(self.plugins), records=dict(self._records), fields=fields)

    def _undo(self, before: _Snapshot, after: _Snapshot) -> None:
        """Put back what changed from ``before`` to ``after``, where it is still as ``after`` left it."""
        now = self._snapshot()
        _undo_table(self.plugins, before.plugins, after.plugins)
        _undo_table(self._records, before.records, after.records)
        for field_key, (owner, was) in before.fields.items():
            if field_key not in after.fields:
                continue
            became = after.fields[field_key][1]
            current = now.fields.get(field_key, (owner, became))[1]
            if was != became and current == became:
                setattr(owner, field_key[1], was)

    async def _persist_quietly(self) -> None:
        """:meth:`persist` for counters (restarts): a failed write is logged, not raised."""
        try:
            await self.persist()
        except HostError as error:
            log.warning("%s", error.message)

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
            await self.persist()
        except HostError as error:
            log.error("saving the state failed: %s", error.message)
        if self.store is not None:
            self.store.close()

    # -- helpers ----------------------------------------------------------------

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        """The installed plugin ``plugin_id``; ``PLUGIN_BROKEN`` (its error) or ``PLUGIN_NOT_FOUND`` otherwise."""
        plugin = self.plugins.get(plugin_id)
        if plugin is None:
            broken = self.broken.get(plugin_id)
            if broken is not None:
                raise broken.error
            raise HostError(ErrorKind.PLUGIN_NOT_FOUND, f"no installed plugin {plugin_id!r}", plugin=plugin_id)
        return plugin

    def _broken(self, plugin_id: str) -> BrokenPlugin | None:
        """The broken plugin ``plugin_id`` when no installed plugin has that id."""
        return self.broken.get(plugin_id) if plugin_id not in self.plugins else None

    async def resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch and record it on ``plugin`` (:func:`hostd.host.launch.resolve`).

        Raises :class:`sandbox.launch.LaunchError`; cancellation waits for the worker thread.
        """
        return await resolver.resolve(self, plugin)

    def info(self, plugin: InstalledPlugin) -> dict[str, Any]:
        """:class:`hostd.control.models.PluginInfo` as sent on the wire."""
        return plugin_info.info_model(plugin).wire()

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
        if self.secret_store is not None:
            supervisor.secret_lookup = self.secret_store.get
        plugin = InstalledPlugin(path=folder, manifest=manifest, manifest_digest=digest, supervisor=supervisor)
        bound.append(plugin)
        self.plugins[manifest.id] = plugin
        return plugin

    async def _supervisor_event(self, plugin: InstalledPlugin, event: SupervisorEvent) -> None:
        """What a supervisor tells the host (:data:`hostd.plugins.supervisor.SupervisorEvent`).

        ``RestartCounted``: save the count best-effort. ``ToolsPinned``: record the
        first pins with the state document, or raise ``STATE_WRITE_FAILED`` (the
        start fails, nothing pinned). ``RetryDue``: run the trust gate again and
        answer with a start or the gate's refusal (approval voided, command gone).
        """
        if isinstance(event, RestartCounted):
            await self._persist_quietly()
        elif isinstance(event, ToolsPinned):
            async with self.change():
                plugin.pins = dict(event.pins)
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
                self._records.pop(plugin_id, None)
            self.broken.pop(plugin_id, None)
            folder = Path(broken.path) if broken.path and os.path.isabs(broken.path) else None
            await self._forget(plugin_id, folder if PLUGIN_ID.fullmatch(plugin_id) else None)
            return
        plugin = self._plugin(plugin_id)
        async with self.change():
            self.plugins.pop(plugin.manifest.id, None)
            self._records.pop(plugin.manifest.id, None)
        self.broken.pop(plugin_id, None)
        await plugin.supervisor.disable()
        await self._forget(plugin.manifest.id, plugin.path)

    async def _forget(self, plugin_id: str, folder: Path | None) -> None:
        """After an uninstall: drop ``plugin_id``'s logs, generated files (``folder``: None, none) and secrets."""
        self.logs.pop(plugin_id, None)
        if self.log_files is not None:
            await self.log_files.drop(plugin_id)
        if self.store is None:
            return
        if folder is not None:
            await trio.to_thread.run_sync(_remove_generated, self.store.directory, folder, plugin_id)
        if self.secret_store is not None:
            try:
                await trio.to_thread.run_sync(self.secret_store.drop, plugin_id)
            except HostError as error:  # an unreadable secrets file: the uninstall is done, its secrets stay
                log.warning("uninstalling %s: its secrets were not removed: %s", plugin_id, error.message)
                await self.notify(
                    "plugins/log",
                    {"plugin": None, "level": "warning", "source": "host", "message": error.message},
                )

    async def list(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/list {}`` -> ``{plugins: [PluginInfo]}`` sorted by id."""
        p.parse_params(p.Empty, params)
        broken = {k: b for k, b in self.broken.items() if k not in self.plugins}
        plugins = [
            plugin_info.info_model(self.plugins[k]) if k in self.plugins else broken[k].info()
            for k in sorted({*self.plugins, *broken})
        ]
        return p.PluginsListResult(plugins=plugins).wire()

    async def grant(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/grant {id, permissions}``: replace the granted set."""
        args = p.parse_params(p.GrantParams, params)
        plugin = self._plugin(args.id)
        undeclared = sorted(set(args.permissions) - set(plugin.manifest.permissions))
        if undeclared:
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                f"plugin {args.id} does not declare: {', '.join(undeclared)}",
                plugin=args.id,
                permissions=undeclared,
            )
        ports = set(args.network_ports or [])
        undeclared_ports = sorted(ports - set(plugin.manifest.backend.tcp_ports))
        if undeclared_ports:
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                f"plugin {args.id} does not declare the TCP ports: {', '.join(map(str, undeclared_ports))}",
                plugin=args.id,
                networkPorts=undeclared_ports,
            )
        folders = _granted_folders(args.id, args.folders) if args.folders is not None else None
        async with self.change():
            plugin.granted = set(args.permissions)
            if folders is not None:
                plugin.folders = folders
            if args.network_ports is not None:
                plugin.network_ports = ports
            if args.limits is not None:
                plugin.limits = {
                    k: v
                    for k, v in (
                        ("max_rss_bytes", _mib(args.limits.max_rss_mb)),
                        ("max_cpu_percent", args.limits.max_cpu_percent),
                        ("max_disk_bytes", _mib(args.limits.max_disk_mb)),
                    )
                    if v is not None
                }
            try:
                await self.resolve(plugin)  # ports, limits and folders are part of the launch
            except LaunchError as exc:
                # A granted folder the sandbox refuses (covers the home or the state folder, reached through
                # a link a plugin can write...) is refused here, and the grant undone; other launch errors
                # are shown in launch.error as at install.
                granted = [path for paths in (folders or {}).values() for path in paths]
                if exc.kind == "PATH_REFUSED" and any(
                    path in str(exc) or os.path.realpath(path) in str(exc) for path in granted
                ):
                    raise HostError(
                        ErrorKind.INVALID_PARAMS, f"plugin {args.id}: folder not granted: {exc}", plugin=args.id
                    ) from None
        return self.info(plugin)

    async def prepare(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/prepare {id}``: install the packages the launch names into the plugin's own environment.

        See :mod:`hostd.install.prepare`. Sends ``$/progress`` (``requestId`` = this
        request's id) per step; the result is the plugin's info, whose
        ``launch`` now runs the prepared program (a new digest: approve it).
        A prepared plugin is answered at once. ``PREPARE_FAILED`` with
        ``data.reason`` (``unreachable``: the registry cannot be reached,
        with its address and the installer's own words; ``not-found``;
        ``unsupported``; ``spec-unsupported``: a package, program or
        ``--python`` word outside :func:`hostd.install.packages.npm_spec` /
        :func:`~hostd.install.packages.python_spec`'s grammar, named with the supported
        forms, no installer run...). A launch naming no package is answered as it is.
        Cancellation (``$/cancelRequest``) ends the installer and deletes the
        unfinished environment: the plugin stays not prepared.
        """
        ref = p.parse_params(p.PrepareParams, params)
        plugin = self._plugin(ref.id)
        plugin_id = plugin.manifest.id
        backend = plugin.manifest.backend
        if backend.command is None:  # a remote plugin: nothing to install
            return self.info(plugin)
        try:
            package = parse_package_launch(backend.command, backend.args)
        except PrepareError as exc:
            raise _prepare_failed(plugin_id, exc, ()) from None
        if package is None:
            return self.info(plugin)
        if self.store is None:
            raise HostError(ErrorKind.STATE_UNUSABLE, "plugins/prepare needs a state directory", plugin=plugin_id)

        async def progress(step: int, total: int, message: str) -> None:
            note = p.ProgressParams(requestId=ctx.id, progress=step, total=total, message=message)
            await ctx.notify("$/progress", note.wire())

        lock = self._prepare_locks.setdefault(plugin_id, trio.Lock())
        async with lock:
            try:
                await prepare_packages(
                    self.store.directory,
                    plugin_id,
                    package,
                    registries=self.settings.registries,
                    path=await self.command_path(),
                    progress=progress,
                    # A running instance keeps its environment until it stops (the next prepare prunes it).
                    prune=plugin.supervisor.state is State.STOPPED,
                    allow_build=ref.allow_build,
                )
            except PrepareError as exc:
                raise _prepare_failed(plugin_id, exc, package.packages) from None
        async with self.change():
            with contextlib.suppress(LaunchError):
                await self.resolve(plugin)
        return self.info(plugin)

    async def configure(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/configure {id, values}``: set (``null``: unset) settings and secrets -> ``PluginInfo``.

        A name is a ``user_config`` option of the manifest or a secret it refers to as
        ``${secret:NAME}``. Secret values (``sensitive`` options, ``${secret:}`` names) go to the
        secret store (hostd/storage/secrets.py) and are never shown; other values are kept in
        ``<stateDir>/settings/<id>.json`` and appear in the launch (so changing one asks for
        approval again). ``INVALID_PARAMS`` (``data.errors``, names only, never values) for an
        unknown name or a value of the wrong kind; nothing is stored then. Needs a state folder.
        """
        args = p.parse_params(p.ConfigureParams, params)
        plugin = self._plugin(args.id)
        options = plugin.manifest.user_config
        backend = plugin.manifest.backend
        referenced = secrets_.references([*backend.args, *backend.env.values()]) | secrets_.remote_references(
            backend.headers, backend.oauth.client_secret if backend.oauth else None
        )
        errors: list[dict[str, str]] = []
        for name, value in args.values.items():
            option = options.get(name)
            if option is None and name not in referenced:
                known = sorted({*options, *referenced})
                errors.append({"field": name, "message": f"not a setting of {args.id} (known: {', '.join(known)})"})
            elif value is not None:
                problem = (
                    secrets_.check_value(name, option, value)
                    if option is not None
                    else None
                    if isinstance(value, str)
                    else f"{name}: a secret is a string"
                )
                if problem is not None:
                    errors.append({"field": name, "message": problem})
        if errors:
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                f"plugins/configure {args.id}: " + "; ".join(e["message"] for e in errors),
                plugin=args.id,
                errors=errors,
            )
        if self.store is None or self.secret_store is None:
            raise HostError(ErrorKind.STATE_UNUSABLE, "plugins/configure needs a state directory")
        directory, store = self.store.directory, self.secret_store

        def save() -> None:
            plain: dict[str, Any] = {}
            for name, value in args.values.items():
                option = options.get(name)
                if option is None or option.sensitive:
                    store.set(args.id, name, None if value is None else str(value))
                else:
                    plain[name] = value
            secrets_.update_settings(directory, args.id, plain, self.report_from_thread)

        try:
            await trio.to_thread.run_sync(save)
        except OSError as exc:
            raise write_failed(exc, directory / "settings") from None
        with contextlib.suppress(LaunchError):
            await self.resolve(plugin)  # the values are part of the launch
        return self.info(plugin)

    async def approve(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/approve {id, digest}``: approve the exact launch that install showed."""
        args = p.parse_params(p.ApproveParams, params)
        plugin = self._plugin(args.id)
        try:
            launch = await self.resolve(plugin)
        except LaunchError as exc:
            raise HostError(
                ErrorKind.PLUGIN_START_FAILED, f"plugin {args.id}: {exc}", plugin=args.id, launchError=exc.kind
            ) from None
        digest = plugin.approval_digest(launch)
        if args.digest != digest:
            raise HostError(
                ErrorKind.MCP_TRUST_APPROVAL_REQUIRED,
                f"digest {args.digest} does not match the current launch of {args.id}",
                plugin=args.id,
                launch=plugin_info.launch_info(plugin, launch),
            )
        repin = plugin.approved_digest != digest or bool(plugin.supervisor.withheld)
        async with self.change():
            if repin:
                plugin.approved_digest = digest
                plugin.pins = plugin.supervisor.approval_pins()
        if repin:  # written: now release the withheld tools
            await plugin.supervisor.repin(plugin.pins)
        return self.info(plugin)

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
        """Steps 1 and 2 of enable: every permission granted, the launch approved.

        Returns the :class:`~hostd.plugins.supervisor.Start` for the supervisor: the
        approved launch with the manifest, pins and limits it runs with. Raises, in
        this order, ``PLUGIN_START_FAILED`` (the launch does not resolve),
        ``PERMISSION_NOT_GRANTED`` or ``MCP_TRUST_APPROVAL_REQUIRED``.
        """
        plugin_id = plugin.manifest.id
        try:
            launch = await self.resolve(plugin)
        except LaunchError as exc:
            raise launch_failed(plugin_id, exc) from None
        if plugin.config_problem is not None:  # its settings or secrets cannot be read: say which file
            raise plugin.config_problem
        # A launch that cannot run is reported before anything the user could grant: granting
        # first would only lead to this error (a manifest's "pyhton3" is fixed in the manifest).
        missing = sorted(set(plugin.manifest.permissions) - plugin.granted - features.RESERVED_PERMISSIONS)
        if missing:
            raise HostError(
                ErrorKind.PERMISSION_NOT_GRANTED,
                f"plugin {plugin_id} needs permissions not granted: {', '.join(missing)}",
                plugin=plugin_id,
                permissions=missing,
            )
        if plugin.config_missing:
            raise HostError(
                ErrorKind.CONFIG_REQUIRED,
                f"plugin {plugin_id} needs settings that are not set: {', '.join(plugin.config_missing)}; "
                "set them with plugins/configure",
                plugin=plugin_id,
                missing=list(plugin.config_missing),
            )
        if plugin.unpreparable is not None and self.store is not None:
            raise HostError(
                ErrorKind.PLUGIN_NOT_PREPARED,
                f"plugin {plugin_id} fetches a package at start in a way hostd cannot prepare "
                f"({plugin.unpreparable}); write the launch as npx -y pkg@version, uvx --from pkg==version cmd or "
                "deno run -A npm:pkg@version "
                "(a registry mirror is hostd's --npm-registry / --python-index)",
                plugin=plugin_id,
                packages=[],
            )
        if plugin.package is not None and plugin.prepared is None and self.store is not None:
            raise HostError(
                ErrorKind.PLUGIN_NOT_PREPARED,
                f"plugin {plugin_id} runs {' '.join(plugin.package.packages)} ({plugin.package.manager}): "
                "prepare it first (plugins/prepare), then approve its launch; hostd never fetches packages "
                "when a plugin starts",
                plugin=plugin_id,
                packages=list(plugin.package.packages),
            )
        if plugin.approved_digest != plugin.approval_digest(launch):
            if self.settings.trust_development:
                log.warning("plugin %s: launch not approved (--trust development): starting anyway", plugin_id)
            else:
                raise HostError(
                    ErrorKind.MCP_TRUST_APPROVAL_REQUIRED,
                    f"plugin {plugin_id}: approve this exact launch first (plugins/approve with its digest)",
                    plugin=plugin_id,
                    launch=plugin_info.launch_info(plugin, launch),
                    approvedDigest=plugin.approved_digest,
                )
        return Start(
            launch=await trio.to_thread.run_sync(resolver.with_secrets, self, plugin, launch),
            manifest=plugin.manifest,
            pins=plugin.pins,
            limits=plugin.policy,
            disk_limit=self._disk_limit(plugin),
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
                await self._persist_quietly()

    async def _abandoned(self, plugin: InstalledPlugin) -> None:
        """A start the parent cancelled (``$/cancelRequest`` of enable or restart): the plugin stays off.

        The supervisor has already stopped the instance and said ``stopped``;
        ``enabled`` becomes false and is saved (shielded; a failed write is
        logged), so a restart of hostd does not start what the parent gave up on.
        """
        plugin.enabled = False
        with trio.CancelScope(shield=True):
            await self._persist_quietly()

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

    # -- tools/* ----------------------------------------------------------------

    async def tools_list(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``tools/list {plugin?}`` -> ``{tools: [HostTool], revision}``."""
        args = p.parse_params(p.ToolsListParams, params)
        if args.plugin is not None:
            self._plugin(args.plugin)
        tools = []
        for tool in self.registry.tools(args.plugin):
            enabled = not self._tool_disabled(tool.plugin, tool.remote_name)
            if enabled or args.include_disabled:
                tools.append(tool.to_model(enabled=enabled))
        return p.ToolsListResult(tools=tools, revision=self.registry.revision).wire()

    def _tool_disabled(self, plugin_id: str, remote_name: str) -> bool:
        plugin = self.plugins.get(plugin_id)
        return plugin is not None and remote_name in plugin.disabled_tools

    async def tools_set_enabled(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``tools/setEnabled {name, enabled}`` -> ``ToolEnabledResult``: hide a tool (or show it again).

        ``name``: a registered tool's host name or ``function_name``, or ``<plugin>.<tool>``
        for a tool of a stopped plugin that its manifest declares or its pins record. The
        choice is written to the state (``STATE_WRITE_FAILED``: nothing changed) and the plugin
        keeps running; a disabled tool is left out of ``tools/list`` and a call to it gets
        ``TOOL_DISABLED``. A change bumps the registry revision and sends ``tools/listChanged``.
        ``TOOL_NOT_FOUND`` when no plugin has such a tool.
        """
        args = p.parse_params(p.ToolSetEnabledParams, params)
        plugin, remote = self._tool_owner(args.name)
        host_name = f"{plugin.manifest.id}.{remote}"
        changed = (remote in plugin.disabled_tools) == args.enabled
        if changed:
            async with self.change():
                if args.enabled:
                    plugin.disabled_tools = plugin.disabled_tools - {remote}
                else:
                    plugin.disabled_tools = plugin.disabled_tools | {remote}
            self.registry.revision += 1
            await self.notify("tools/listChanged", {"revision": self.registry.revision})
        return p.ToolEnabledResult(
            name=host_name, plugin=plugin.manifest.id, enabled=args.enabled, revision=self.registry.revision
        ).wire()

    def _tool_owner(self, name: str) -> tuple[InstalledPlugin, str]:
        """The plugin and MCP name of the tool ``name`` (registered, or known to a stopped plugin)."""
        with contextlib.suppress(HostError):
            tool = self.registry.lookup(name)
            return self._plugin(tool.plugin), tool.remote_name
        plugin_id, dot, remote = name.partition(".")
        plugin = self.plugins.get(plugin_id)
        if dot and plugin is not None:
            declared = {t.removeprefix(f"{plugin_id}.") for t in plugin.manifest.contributes.tool_names}
            known = declared | set(plugin.supervisor.pinned or {}) | plugin.disabled_tools
            if remote in known:
                return plugin, remote
        raise HostError(ErrorKind.TOOL_NOT_FOUND, f"no tool named {name!r}", tool=name)

    async def tools_call(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``tools/call {name, arguments, timeoutMs?}`` -> ``{content, structuredContent?}``."""
        args = p.parse_params(p.ToolsCallParams, params)
        try:
            tool = self.registry.lookup(args.name)
        except HostError as missing:
            for candidate in self.plugins.values():
                withheld = candidate.supervisor.withheld_error(args.name)
                if withheld is not None:
                    raise withheld from None
            raise missing from None
        plugin = self._plugin(tool.plugin)
        if tool.remote_name in plugin.disabled_tools:
            raise HostError(
                ErrorKind.TOOL_DISABLED,
                f"{tool.name} is disabled; enable it with tools/setEnabled",
                plugin=tool.plugin,
                tool=tool.name,
            )
        if tool.permission is not None and tool.permission not in plugin.granted:
            raise HostError(
                ErrorKind.PERMISSION_NOT_GRANTED,
                f"{tool.name} needs the permission {tool.permission!r}, which is not granted",
                plugin=tool.plugin,
                tool=tool.name,
                permissions=[tool.permission],
            )
        validate_arguments(tool, args.arguments)

        async def progress(value: float, total: float | None, message: str | None) -> None:
            note = p.ProgressParams(requestId=ctx.id, progress=value, total=total, message=message)
            await ctx.notify("$/progress", note.wire())

        timeout = args.timeout_ms / 1000 if args.timeout_ms is not None else None
        return await plugin.supervisor.call(
            tool,
            args.arguments,
            timeout=timeout,
            report_progress=progress,
            content_limits=self.options.content_limits,
        )


def _prepare_failed(plugin_id: str, exc: PrepareError, packages: Sequence[str]) -> HostError:
    return HostError(
        ErrorKind.PREPARE_FAILED,
        f"plugin {plugin_id}: {exc}",
        plugin=plugin_id,
        reason=exc.reason,
        packages=list(packages),
        registry=exc.registry,
        output=exc.output,
    )


def _granted_folders(plugin_id: str, grants: p.FolderGrants) -> dict[str, list[str]]:
    """``plugins/grant``'s ``folders``, ``~`` expanded; ``INVALID_PARAMS`` for a relative or missing path.

    Whether a folder may be granted at all (not the home, not the state folder, no link a plugin
    can write on the way) is decided by the sandbox's rule check when the launch is resolved.
    """
    result: dict[str, list[str]] = {}
    for kind, paths in (("read", grants.read), ("write", grants.write)):
        expanded: list[str] = []
        for raw in paths:
            path = os.path.expanduser(raw) if raw.startswith("~") else raw
            if not os.path.isabs(path) or "\0" in path:
                raise HostError(
                    ErrorKind.INVALID_PARAMS,
                    f"plugin {plugin_id}: folders.{kind}: {raw!r} is not an absolute or ~ path",
                    plugin=plugin_id,
                )
            if not os.path.exists(path):
                raise HostError(
                    ErrorKind.INVALID_PARAMS,
                    f"plugin {plugin_id}: folders.{kind}: {raw} does not exist",
                    plugin=plugin_id,
                )
            expanded.append(os.path.normpath(path))
        if expanded:
            result[kind] = list(dict.fromkeys(expanded))
    return result


def _mib(value: float | None) -> int | None:
    """MiB from the wire to bytes (None stays None)."""
    return int(value * 1024 * 1024) if value else None


def _copied(value: Any) -> Any:
    """A shallow copy of a mutable container (set, dict, list); anything else as it is."""
    return copy.copy(value) if isinstance(value, set | dict | list) else value


def _undo_table(table: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
    """Put back ``old``'s entries (by identity) where ``new`` changed them and ``table`` still has ``new``'s."""
    for key in set(old) | set(new):
        was, became = old.get(key), new.get(key)
        if was is became or table.get(key) is not became:
            continue
        if was is None:
            table.pop(key, None)
        else:
            table[key] = was


@dataclass
class _Snapshot:
    """What :meth:`Host.change` can undo: the plugin and record tables and each plugin's recorded fields."""

    plugins: dict[str, InstalledPlugin]
    records: dict[str, StoredRecord]
    #: (id of the owner, field name) -> (owner, a shallow copy of the value)
    fields: dict[tuple[int, str], tuple[Any, Any]]


#: What a request may change on an InstalledPlugin / its supervisor that the state document records or derives from.
_PLUGIN_FIELDS = (
    "path",
    "manifest",
    "manifest_digest",
    "granted",
    "approved_digest",
    "enabled",
    "launch",
    "launch_error",
    "network_ports",
    "limits",
    "pins",
    "policy",
    "disabled_tools",
    "folders",
    "package",
    "prepared",
    "unpreparable",
)


def _remove_generated(state_dir: Path, folder: Path, plugin_id: str) -> None:
    """Delete what hostd generated for an uninstalled plugin: its folder when
    ``plugins/import`` wrote it (``<state>/imported/<id>``), its scratch ``TMPDIR``
    (``<state>/tmp/<id>``), its package caches (:func:`plugin_cache_env`), and its
    data folder if that is then empty (the plugin's own data is kept)."""
    if folder.parent in (state_dir / "imported", state_dir / "bundles", state_dir / "registry"):
        shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (state_dir / "settings" / f"{plugin_id}.json").unlink()
    data_dir = state_dir / "data" / plugin_id
    generated_dirs = (state_dir / "tmp" / plugin_id, state_dir / "prepared" / plugin_id, data_dir / "cache")
    for generated in (*generated_dirs, data_dir / "uv-tools"):
        shutil.rmtree(generated, ignore_errors=True)
    with contextlib.suppress(OSError):
        data_dir.rmdir()  # only when empty


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
    "plugins/configure": Host.configure,
    "plugins/import": install_methods.import_config,
    "plugins/uninstall": Host.uninstall,
    "plugins/list": Host.list,
    "plugins/grant": Host.grant,
    "plugins/prepare": Host.prepare,
    "plugins/approve": Host.approve,
    "plugins/enable": Host.enable,
    "plugins/disable": Host.disable,
    "plugins/restart": Host.restart,
    "plugins/status": Host.status,
    "plugins/logs": Host.plugin_logs,
    "plugins/logout": Host.logout,
    "auth/callback": Host.auth_callback,
    "tools/list": Host.tools_list,
    "tools/call": Host.tools_call,
    **feature_methods.METHODS,
    "tools/setEnabled": Host.tools_set_enabled,
}
