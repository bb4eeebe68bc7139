"""The host: installed plugins, grants, approvals, the tool registry, and the
control-protocol methods that act on them (``docs/protocol.md``).

The control channel (:mod:`hostd.control`) hands every request after
``initialize`` to :meth:`Host.handle`; the method table :data:`Host.METHODS`
maps each method name to one coroutine here. Params are validated by the
models in :mod:`hostd.protocol`.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import functools
import hashlib
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import orjson
import trio

from hostd import protocol as p
from hostd.control import InitializeOptions, Notify, RequestContext
from hostd.errors import ErrorKind, HostError
from hostd.framing import PLUGIN_FRAME_LIMIT, RESULT_LIMIT
from hostd.importer import ConfigError, plan_import
from hostd.manifest import Manifest, load_manifest
from hostd.policy import RestartMode, RestartPolicy
from hostd.prepare import PackageLaunch, Prepared, PrepareError, Registries, find_prepared, parse_package_launch
from hostd.prepare import prepare as prepare_packages
from hostd.registry import ToolRegistry
from hostd.state import MANIFEST_TEMPORARY, PluginRecord, StateError, StateStore
from hostd.supervisor import Liveness, PluginSupervisor, State
from hostd.tools import validate_arguments
from sandbox.environment import EnvPolicy, login_shell_path, merge_paths
from sandbox.launch import Launch, LaunchError, resolve_launch
from sandbox.policy import IsolationPolicy
from sandbox.process import sweep_orphans
from sandbox.watchdog import DEFAULT_MAX_DISK_BYTES

log = logging.getLogger("hostd.host")

Handler = Callable[["Host", Any, RequestContext], Awaitable[Any]]


SandboxLevel = Literal["basic", "standard", "strict"]


@dataclass(frozen=True)
class HostSettings:
    """Host policy from the command line (``hostd serve --help``).

    ``trust_development``: the trust gate only logs. ``pass_proxy``: proxy and
    CA variables reach plugins. ``restart``: the restart policy after a crash.
    ``ping_interval`` / ``ping_timeout``: liveness checks, in seconds.
    ``max_result_bytes``: the bound of one tool result sent to the parent.
    ``max_plugin_frame_bytes``: the bound of one message from a plugin (a
    manifest's ``backend.max_message_bytes`` overrides it).
    """

    trust_development: bool = False
    pass_proxy: bool = False
    restart: RestartMode = "on-failure"
    ping_interval: float = 30.0
    ping_timeout: float = 10.0
    max_result_bytes: int = RESULT_LIMIT
    max_plugin_frame_bytes: int = PLUGIN_FRAME_LIMIT
    sandbox: SandboxLevel = "standard"
    max_rss_bytes: int | None = None
    max_cpu_percent: float | None = None
    allow_write: tuple[str, ...] = ()
    allow_read: tuple[str, ...] = ()
    login_path: bool = True
    #: Bound of each plugin's data folder and TMPDIR together, in bytes (``--max-disk-mb``; None: no bound).
    max_disk_bytes: int | None = DEFAULT_MAX_DISK_BYTES
    #: Package registry mirrors for every ``plugins/prepare`` (``--npm-registry``, ``--python-index``).
    registries: Registries = field(default_factory=Registries)

    def isolation_policy(
        self,
        data_dir: Path | None,
        *,
        tcp_ports: Sequence[int] = (),
        max_rss_bytes: int | None = None,
        max_cpu_percent: float | None = None,
        protected: Sequence[str] = (),
        writable: Sequence[str] = (),
        code: Sequence[str] = (),
    ) -> IsolationPolicy:
        """The per-plugin :class:`IsolationPolicy` for this host policy.

        ``basic``: the shim, rlimits and no-new-privileges only. ``standard``
        (default): plus Landlock (read the plugin folder, its runtime and
        system paths; write its data folder, its TMPDIR and ``allow_write``),
        signal scoping and seccomp, where the kernel offers them; network
        allowed. ``strict``: as standard, and no network. No level lets a
        plugin write a folder another plugin or the user runs code from: the
        npm, uv and pip caches a plugin's runtime needs are its own, inside
        its data folder (:func:`plugin_cache_env`).

        Paths in the approved ``args`` and the manifest's ``env`` values
        (absolute or ``~``) are part of what the user approved and become
        grants (:func:`sandbox.launch.named_grants`). ``tcp_ports`` (declared by the
        manifest and granted by the parent) stay reachable under ``strict``;
        the per-plugin limits override the host's. ``protected``,
        ``writable``, ``code``: what no rule may cover, the folders other
        plugins may write, every plugin's folder (see
        :func:`sandbox.policy.landlock_rules`).
        """
        rss = max_rss_bytes if max_rss_bytes is not None else self.max_rss_bytes
        cpu = max_cpu_percent if max_cpu_percent is not None else self.max_cpu_percent
        if self.sandbox == "basic":
            return IsolationPolicy(landlock=False, seccomp=False, max_rss_bytes=rss, max_cpu_percent=cpu)
        return IsolationPolicy(
            landlock=True,
            network="deny" if self.sandbox == "strict" else "allow",
            allowed_tcp_ports=tuple(tcp_ports) if self.sandbox == "strict" else (),
            seccomp=True,
            max_rss_bytes=rss,
            max_cpu_percent=cpu,
            data_dir=str(data_dir) if data_dir is not None else None,
            extra_read_paths=tuple(self.allow_read),
            extra_write_paths=tuple(self.allow_write),
            grant_named_paths=True,
            protected_paths=tuple(protected),
            writable_paths=tuple(writable),
            code_paths=tuple(code),
        )


def plugin_cache_env(data_dir: Path) -> dict[str, str]:
    """Where a plugin's package tools keep their caches: inside its own data folder.

    A cache shared between plugins (``~/.npm``, ``~/.cache/uv``,
    ``~/.local/share/uv``) is a place where one plugin can plant code that
    another plugin, or the user, later runs; so each plugin's ``npx``,
    ``uvx``, ``pip`` and XDG-aware tools get caches of their own (created on
    first use). The user's own caches stay readable where a runtime needs
    them (a uv-managed Python), never writable.
    """
    cache = data_dir / "cache"
    return {
        "npm_config_cache": str(cache / "npm"),
        "UV_CACHE_DIR": str(cache / "uv"),
        "UV_TOOL_DIR": str(data_dir / "uv-tools"),
        "UV_TOOL_BIN_DIR": str(data_dir / "uv-tools" / "bin"),
        "PIP_CACHE_DIR": str(cache / "pip"),
        "XDG_CACHE_HOME": str(cache),
    }


@dataclass
class InstalledPlugin:
    """One installed plugin: where it lives, what the user granted and approved."""

    path: Path
    manifest: Manifest
    manifest_digest: str
    supervisor: PluginSupervisor
    granted: set[str] = field(default_factory=set)
    approved_digest: str | None = None
    enabled: bool = False
    launch: Launch | None = None
    launch_error: LaunchError | None = None
    #: TCP ports the parent granted (each declared in backend.tcp_ports).
    network_ports: set[int] = field(default_factory=set)
    #: Per-plugin limits from the parent: max_rss_bytes, max_cpu_percent, max_disk_bytes.
    limits: dict[str, Any] = field(default_factory=dict)
    #: Folders the parent granted (``plugins/grant``'s ``folders``): ``{"read": [...], "write": [...]}``.
    folders: dict[str, list[str]] = field(default_factory=dict)
    #: The package the manifest's launch fetches (npx, uvx, uv run --with), as last resolved; ``None``: none.
    package: PackageLaunch | None = None
    #: Its finished preparation, as last resolved; ``None``: not prepared (or no package).
    prepared: Prepared | None = None
    #: Why the package launch cannot be prepared (an unsupported npx/uvx option); ``None``: it can, or names none.
    unpreparable: str | None = None

    def approval_digest(self, launch: Launch) -> str:
        """The digest the user approves: the resolved launch and the manifest's bytes.

        Any change to either (arguments, environment keys, the executable, a
        tool added to the manifest...) gives a new digest and voids the approval.
        """
        joined = f"{launch.digest}\n{self.manifest_digest}".encode()
        return "sha256:" + hashlib.sha256(joined).hexdigest()

    def record(self) -> PluginRecord:
        """What the state store keeps of this plugin."""
        return PluginRecord(
            path=str(self.path),
            manifest_digest=self.manifest_digest,
            granted=sorted(self.granted),
            approved_digest=self.approved_digest,
            enabled=self.enabled,
            restarts=self.supervisor.restarts,
            pinned_tools=self.supervisor.pinned,
            network_ports=sorted(self.network_ports),
            limits=dict(self.limits),
            folders={k: list(v) for k, v in self.folders.items()},
        )


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
        self.notify = notify
        self.nursery = nursery
        self.registry = ToolRegistry()
        self.plugins: dict[str, InstalledPlugin] = {}
        self.settings = settings
        self.env_policy = EnvPolicy(pass_proxy=settings.pass_proxy)
        self.known_permissions = set(options.known_permissions) if options.known_permissions is not None else None
        self._shutting_down = False
        self.store: StateStore | None = options.state_store
        self._records: dict[str, PluginRecord] = {}
        self._save_lock = trio.Lock()
        #: Held by every request that changes what the state document records (see :meth:`_change`).
        self._change_lock = trio.Lock()
        #: The PATH of the user's login shell, appended to hostd's own for command lookup.
        self.login_path: str | None = None
        #: One preparation at a time per plugin (two would share its environment folder).
        self._prepare_locks: dict[str, trio.Lock] = {}

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
            host.login_path = await trio.to_thread.run_sync(login_shell_path)
        swept = await trio.to_thread.run_sync(sweep_orphans)
        if swept:
            log.warning("ended %d plugin processes left behind by a previous hostd", swept)
        if host.store is not None:
            store = host.store
            try:
                opened = await trio.to_thread.run_sync(store.open)
            except StateError as exc:
                raise HostError(ErrorKind.STATE_UNUSABLE, str(exc), stateDir=str(store.directory)) from None
            for warning in opened.warnings:
                log.warning("%s", warning)
            host._records = dict(opened.plugins)
            to_enable = await host._restore(opened.warnings)
            nursery.start_soon(host._restore_enabled, to_enable)
        return host

    async def _restore(self, warnings: list[str]) -> list[tuple[InstalledPlugin, PluginRecord]]:
        """Install every stored plugin again (before any request is served), so that
        ``plugins/list`` right after ``initialize`` already shows them. Returns the
        plugins to enable again, which :meth:`_restore_enabled` does in the background."""
        for warning in warnings:
            await self.notify("plugins/log", {"plugin": None, "level": "warning", "source": "host", "message": warning})
        to_enable: list[tuple[InstalledPlugin, PluginRecord]] = []
        for plugin_id, record in sorted(self._records.items()):
            try:
                manifest, digest = await trio.to_thread.run_sync(load_manifest, Path(record.path))
            except HostError as error:
                log.warning("stored plugin %s cannot be loaded: %s", plugin_id, error.message)
                await self.notify(
                    "plugins/log",
                    {"plugin": plugin_id, "level": "error", "source": "host", "message": error.message},
                )
                continue  # the record stays in the document: nothing the user set up is lost
            if manifest.id != plugin_id:
                log.warning("stored plugin %s now has id %s: not restored", plugin_id, manifest.id)
                continue
            plugin = self._add_plugin(Path(record.path), manifest, digest)
            plugin.granted = set(record.granted) & set(manifest.permissions)
            plugin.approved_digest = record.approved_digest
            plugin.enabled = record.enabled
            plugin.supervisor.restarts = record.restarts
            plugin.supervisor.pinned = record.pinned_tools
            plugin.network_ports = set(record.network_ports) & set(manifest.backend.tcp_ports)
            plugin.limits = dict(record.limits)
            plugin.folders = {k: list(v) for k, v in record.folders.items()}
            with contextlib.suppress(LaunchError):
                await self._resolve(plugin)
            if record.enabled:
                to_enable.append((plugin, record))
        return to_enable

    async def _restore_enabled(self, plugins: list[tuple[InstalledPlugin, PluginRecord]]) -> None:
        """Enable again what was enabled (4 at a time), unless it changed since approval."""
        limiter = trio.CapacityLimiter(4)
        async with trio.open_nursery() as nursery:
            for plugin, record in plugins:
                nursery.start_soon(self._restore_one, plugin, record, limiter)

    async def _restore_one(self, plugin: InstalledPlugin, record: PluginRecord, limiter: trio.CapacityLimiter) -> None:
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
                launch = await self._gate(plugin)
                await plugin.supervisor.enable(launch)
            except HostError as error:
                if plugin.supervisor.state is State.STOPPED:
                    await plugin.supervisor.refuse(error)
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
            async with self._change():
                await self._reload_manifests()
        except HostError as error:
            log.error("re-reading manifests: %s", error.message)

    async def _reload_manifests(self) -> None:
        for plugin_id, plugin in sorted(self.plugins.items()):
            try:
                manifest, digest = await trio.to_thread.run_sync(load_manifest, plugin.path)
            except HostError as error:
                await self.notify(
                    "plugins/log", {"plugin": plugin_id, "level": "error", "source": "host", "message": error.message}
                )
                continue
            if digest == plugin.manifest_digest or manifest.id != plugin_id:
                continue
            if plugin.supervisor.state is State.STOPPED:
                plugin.supervisor.manifest = manifest
            plugin.manifest, plugin.manifest_digest = manifest, digest
            with contextlib.suppress(LaunchError):
                await self._resolve(plugin)
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
                raise _write_failed(exc, store.path) from None
            self._records = records

    # State changes. The class: a request (install, import, uninstall, grant, approve,
    # enable, disable, a SIGHUP reload, the tools a first enable of an imported plugin
    # records) changes what the state document records, in memory, and then writes
    # the document. If the write fails (ENOSPC, EFBIG, EIO...), memory must not keep
    # what disk does not have (lost at the next restart, or half there): each such
    # change runs in ``async with self._change():``, which undoes the change in
    # memory when the write (or the change itself) fails, and the request answers
    # STATE_WRITE_FAILED. Side effects that cannot be undone (stopping a plugin,
    # releasing withheld tools) come after the write succeeded. What the supervisor
    # records on its own: pinned tool digests are undone with a failed start; the
    # restart counter is a statistic, written best-effort (``_persist_quietly``).

    @contextlib.asynccontextmanager
    async def _change(self) -> AsyncIterator[None]:
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
            for name in _SUPERVISOR_FIELDS:
                fields[(id(plugin.supervisor), name)] = (plugin.supervisor, _copied(getattr(plugin.supervisor, name)))
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
        grace = 0.0 if fast else 2.0
        async with trio.open_nursery() as nursery:
            for plugin in self.plugins.values():
                nursery.start_soon(_disable_quietly, plugin.supervisor, grace)
        try:
            await self.persist()
        except HostError as error:
            log.error("saving the state failed: %s", error.message)
        if self.store is not None:
            self.store.close()

    # -- helpers ----------------------------------------------------------------

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        plugin = self.plugins.get(plugin_id)
        if plugin is None:
            raise HostError(ErrorKind.PLUGIN_NOT_FOUND, f"no installed plugin {plugin_id!r}", plugin=plugin_id)
        return plugin

    async def _resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch (:func:`sandbox.launch.resolve_launch`) in a worker thread.

        The policy is computed here, on the event loop (it reads every plugin);
        the resolution itself is blocking work (the first ``probe()`` runs a
        process, ~50-300 ms; the approval hashes files; every rule path is
        walked with ``lstat``) and runs off the loop, so ``ping`` and other
        plugins' calls go on meanwhile. Records the result (or the
        :class:`LaunchError`, re-raised) on ``plugin``. Cancellation waits for
        the thread (it is short and has no side effect but folders created).
        """
        backend = plugin.manifest.backend
        command, args = backend.command, list(backend.args)
        plugin.unpreparable = None
        try:
            package = parse_package_launch(command, args)
        except PrepareError as exc:
            # npx/uvx with an option that would change what is installed: shown as written, never started.
            package, plugin.unpreparable = None, str(exc)
        prepared: Prepared | None = None
        if package is not None and self.store is not None:
            prepared = await trio.to_thread.run_sync(find_prepared, self.store.directory, plugin.manifest.id, package)
        if prepared is not None and package is not None:
            # Run the prepared environment's program: no package tool, no registry, no shared cache.
            command, args = prepared.entry[0], [*prepared.entry[1:], *package.args]
        try:
            data_dir = tmpdir = None
            host_vars: dict[str, str] = {}
            if self.store is not None:
                # Each plugin's writable folders are siblings under the state folder, never nested in one
                # another: a plugin cannot swap its TMPDIR for a link through its data folder.
                data_dir = self.store.directory / "data" / plugin.manifest.id
                tmpdir = str(self.store.directory / "tmp" / plugin.manifest.id)
                host_vars = plugin_cache_env(data_dir)
            resolve = functools.partial(
                resolve_launch,
                command,
                args,
                plugin.path,
                backend.env,
                self.env_policy,
                host_env={**os.environ, "PATH": merge_paths(os.environ.get("PATH", ""), self.login_path)},
                tmpdir=tmpdir,
                isolation_policy=self._policy(plugin, data_dir),
                host_vars=host_vars,
                needs=(plugin.manifest.sandbox.read, plugin.manifest.sandbox.write),
                grants=(plugin.folders.get("read", []), plugin.folders.get("write", [])),
                prepared=prepared.record() if prepared is not None else None,
            )
            launch = await trio.to_thread.run_sync(resolve)
        except LaunchError as exc:
            plugin.launch, plugin.launch_error = None, exc
            plugin.package, plugin.prepared = package, prepared
            raise
        plugin.launch, plugin.launch_error = launch, None
        plugin.package, plugin.prepared = package, prepared
        return launch

    def _policy(self, plugin: InstalledPlugin, data_dir: Path | None) -> IsolationPolicy:
        """The plugin's isolation policy: host policy plus what the parent granted it.

        What no rule may reach comes from the host's own layout: the state
        folder and the user's home are never covered, other plugins'
        writable folders hold no link a rule may follow, and no plugin
        writes any plugin's folder.
        """
        others = [p for p in self.plugins.values() if p is not plugin]
        protected = [os.path.realpath(Path.home()), *(os.path.realpath(p.path) for p in others)]
        writable: list[str] = [*self.settings.allow_write]
        if self.store is not None:
            state = os.path.realpath(self.store.directory)
            protected.append(state)
            writable += [os.path.join(state, "data"), os.path.join(state, "tmp")]
        for other in others:  # what each other plugin may write: its grants, as last resolved
            if other.launch is not None and other.launch.plan is not None:
                writable += other.launch.plan.extra_write
            else:
                writable += [a for a in other.manifest.backend.args if os.path.isabs(a) and os.path.isdir(a)]
        policy = self.settings.isolation_policy(
            data_dir,
            tcp_ports=sorted(plugin.network_ports),
            max_rss_bytes=plugin.limits.get("max_rss_bytes"),
            max_cpu_percent=plugin.limits.get("max_cpu_percent"),
            protected=protected,
            writable=[os.path.realpath(w) for w in writable],
            code=[os.path.realpath(p.path) for p in self.plugins.values()],
        )
        plugin.supervisor.limits = policy
        return policy

    @staticmethod
    def _launch_model(plugin: InstalledPlugin, launch: Launch) -> p.Launch:
        """``PluginInfo.launch``: what the user approves (``Launch.describe()``), with the approval digest."""
        info = dict(launch.describe())
        info.pop("prepared", None)  # shown as launch.prepare, with the state
        digest = plugin.approval_digest(launch)
        info.update(digest=digest, launchDigest=info["digest"], approved=plugin.approved_digest == digest)
        info["prepare"] = _preparation(plugin)
        return p.Launch.model_validate(info)

    @classmethod
    def _launch_info(cls, plugin: InstalledPlugin, launch: Launch) -> dict[str, Any]:
        """:meth:`_launch_model` as sent on the wire (``data.launch`` of errors too)."""
        return cls._launch_model(plugin, launch).wire()

    def info(self, plugin: InstalledPlugin) -> dict[str, Any]:
        """:class:`hostd.protocol.PluginInfo` as sent on the wire."""
        return self._info_model(plugin).wire()

    def _info_model(self, plugin: InstalledPlugin) -> p.PluginInfo:
        manifest = plugin.manifest
        launch: p.Launch | p.LaunchUnresolved | None = None
        if plugin.launch is not None:
            launch = self._launch_model(plugin, plugin.launch)
        elif plugin.launch_error is not None:
            launch = p.LaunchUnresolved(error=str(plugin.launch_error), kind=plugin.launch_error.kind)
        limits = plugin.limits
        return p.PluginInfo(
            id=manifest.id,
            name=manifest.name,
            version=manifest.version,
            path=str(plugin.path),
            permissions=list(manifest.permissions),
            granted=sorted(plugin.granted),
            enabled=plugin.enabled,
            status=plugin.supervisor.state.value,
            tools=list(manifest.contributes.tools),
            networkPorts=sorted(plugin.network_ports),
            limits=p.GrantedLimits(
                maxRssMb=limits["max_rss_bytes"] / (1024 * 1024) if "max_rss_bytes" in limits else None,
                maxCpuPercent=limits.get("max_cpu_percent"),
                maxDiskMb=limits["max_disk_bytes"] / (1024 * 1024) if "max_disk_bytes" in limits else None,
            ),
            launch=launch,
        )

    # -- plugins/* --------------------------------------------------------------

    async def install(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/install {path}``: read and validate the manifest; start nothing."""
        args = p.parse_params(p.InstallParams, params)
        async with self._change():
            plugin = await self._install(Path(os.path.abspath(os.path.expanduser(args.path))))
        return self.info(plugin)

    async def _install(self, folder: Path) -> InstalledPlugin:
        """Read and validate ``folder``'s manifest and add the plugin (stopped)."""
        manifest, digest = await trio.to_thread.run_sync(load_manifest, folder)
        if self.known_permissions is not None:
            unknown = sorted(set(manifest.permissions) - self.known_permissions)
            if unknown:
                raise HostError(
                    ErrorKind.PERMISSION_UNKNOWN,
                    f"permissions not among the parent's knownPermissions: {', '.join(unknown)}",
                    path=str(folder),
                    plugin=manifest.id,
                    permissions=unknown,
                )
        existing = self.plugins.get(manifest.id)
        if existing is not None:
            if existing.path != folder:
                raise HostError(
                    ErrorKind.PLUGIN_ALREADY_INSTALLED,
                    f"plugin {manifest.id!r} is already installed from {existing.path}",
                    plugin=manifest.id,
                    path=str(existing.path),
                )
            if existing.supervisor.state is not State.STOPPED:
                raise HostError(
                    ErrorKind.PLUGIN_STATE_CONFLICT,
                    f"plugin {manifest.id!r} is {existing.supervisor.state.value}; disable it before reinstalling",
                    plugin=manifest.id,
                )
        plugin = self._add_plugin(folder, manifest, digest)
        if existing is not None:
            plugin.granted = existing.granted & set(manifest.permissions)
            plugin.approved_digest = existing.approved_digest
            plugin.supervisor.pinned = existing.supervisor.pinned
        with contextlib.suppress(LaunchError):
            await self._resolve(plugin)  # a failure is shown in launch.error; enable fails with it
        return plugin

    async def import_config(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/import {config}``: install every server of an ``mcpServers`` config.

        All-or-nothing: any invalid entry fails the whole import
        (``IMPORT_INVALID``, each entry's outcome in ``data.entries``) and
        nothing is written; a failure or cancellation while installing removes
        what was written. Remote (``url``) entries are reported, not installed.
        At most ``MAX_IMPORT_ENTRIES`` servers and ``MAX_IMPORT_BYTES`` of text
        (``IMPORT_INVALID`` otherwise). Generated manifests live in
        ``<stateDir>/imported/<id>/plugin.json``; uninstall removes that folder.
        """
        args = p.parse_params(p.ImportParams, params)
        try:
            # Off the event loop: parsing and planning are CPU work on parent-sized input.
            taken = set(self.plugins)
            entries = await trio.to_thread.run_sync(lambda: plan_import(args.config, taken=taken))
        except ConfigError as exc:
            raise HostError(ErrorKind.IMPORT_INVALID, f"cannot import: {exc}", entries=[]) from None
        invalid = [e for e in entries if e.outcome == "invalid"]
        if invalid:
            raise HostError(
                ErrorKind.IMPORT_INVALID,
                f"nothing imported: {len(invalid)} invalid entr{'y' if len(invalid) == 1 else 'ies'} "
                f"({', '.join(repr(e.name) for e in invalid)})",
                entries=[e.to_wire() for e in entries],
            )
        if self.store is None:
            raise HostError(ErrorKind.STATE_UNUSABLE, "plugins/import needs a state directory")
        root = self.store.directory / "imported"
        written: list[Path] = []
        results: list[dict[str, Any]] = []
        try:
            async with self._change():  # a failure undoes every install of this import
                for entry in entries:
                    wire = entry.to_wire()
                    results.append(wire)
                    if entry.manifest is None or entry.plugin_id is None:
                        continue
                    folder = root / entry.plugin_id
                    for made in (  # install creates them (data folder, TMPDIR)
                        self.store.directory / "data" / entry.plugin_id,
                        self.store.directory / "tmp" / entry.plugin_id,
                    ):
                        if not made.exists():
                            written.append(made)
                    written.append(folder)
                    try:
                        await trio.to_thread.run_sync(_write_manifest, folder, entry.manifest)
                    except OSError as exc:
                        raise _write_failed(exc, folder / "plugin.json") from None
                    plugin = await self._install(folder)
                    wire["outcome"] = "installed"
                    wire["plugin"] = self.info(plugin)
        except BaseException:
            # Any failure, cancellation included, leaves nothing: no plugin (undone above), no folder.
            with trio.CancelScope(shield=True):
                for folder in written:
                    await trio.to_thread.run_sync(shutil.rmtree, folder, True)
            raise
        return p.ImportResult.model_validate({"entries": results}).wire()

    async def _record_discovered_tools(self, plugin: InstalledPlugin) -> None:
        """First enable of a ``contributes.discover`` plugin: write the tools it reported
        into its manifest, stop it, and ask for approval of the result."""
        plugin_id = plugin.manifest.id
        tools = plugin.supervisor.discovered  # never registered: not approved yet
        names = sorted(t.name for t in tools)
        permissions = sorted(set(plugin.manifest.permissions) | {t.permission for t in tools if t.permission})
        await plugin.supervisor.disable()
        document = plugin.manifest.model_dump(mode="json", exclude_none=True)
        document["contributes"] = {"tools": names}
        document["permissions"] = permissions
        try:
            await trio.to_thread.run_sync(_write_manifest, plugin.path, document)
        except OSError as exc:
            raise _write_failed(exc, plugin.path / "plugin.json") from None
        manifest, digest = await trio.to_thread.run_sync(load_manifest, plugin.path)
        async with self._change():
            plugin.enabled = False
            fresh = self._add_plugin(plugin.path, manifest, digest)
            fresh.granted = plugin.granted & set(manifest.permissions)
            fresh.approved_digest = plugin.approved_digest
            launch = await self._resolve(fresh)
        raise HostError(
            ErrorKind.MCP_TRUST_APPROVAL_REQUIRED,
            f"plugin {plugin_id} reported {len(names)} tools, now recorded in its manifest; "
            "approve the plugin with its tools, then enable it",
            plugin=plugin_id,
            launch=self._launch_info(fresh, launch),
            discoveredTools=names,
            permissions=permissions,
        )

    def _add_plugin(self, folder: Path, manifest: Manifest, digest: str) -> InstalledPlugin:
        plugin_id = manifest.id
        supervisor = PluginSupervisor(
            manifest,
            self.registry,
            self.notify,
            self.nursery,
            relaunch=lambda: self._gate(self._plugin(plugin_id)),
            restart_policy=RestartPolicy(mode=self.settings.restart),
            liveness=Liveness(self.settings.ping_interval, self.settings.ping_timeout),
            on_change=self.persist,
            result_limit=self.settings.max_result_bytes,
            frame_limit=self.settings.max_plugin_frame_bytes,
            limits=self.settings.isolation_policy(None),
            disk_limit=lambda: self._disk_limit(plugin_id),
        )
        plugin = InstalledPlugin(path=folder, manifest=manifest, manifest_digest=digest, supervisor=supervisor)
        self.plugins[plugin_id] = plugin
        return plugin

    def _disk_limit(self, plugin_id: str) -> int | None:
        """The disk bound of ``plugin_id``'s next start: its own (``plugins/grant``) or the host's, in bytes."""
        plugin = self.plugins.get(plugin_id)
        own = plugin.limits.get("max_disk_bytes") if plugin is not None else None
        return int(own) if own is not None else self.settings.max_disk_bytes

    async def uninstall(self, params: Any, ctx: RequestContext) -> None:
        """``plugins/uninstall {id}``: forget the plugin (written first), then disable it and
        delete what hostd generated for it (see :func:`_remove_generated`).

        ``STATE_WRITE_FAILED``: still installed, still running.
        """
        plugin = self._plugin(p.parse_params(p.PluginRef, params).id)
        async with self._change():
            self.plugins.pop(plugin.manifest.id, None)
            self._records.pop(plugin.manifest.id, None)
        await plugin.supervisor.disable()
        if self.store is not None:
            await trio.to_thread.run_sync(_remove_generated, self.store.directory, plugin.path, plugin.manifest.id)

    async def list(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/list {}`` -> ``{plugins: [PluginInfo]}`` sorted by id."""
        p.parse_params(p.Empty, params)
        plugins = [self._info_model(self.plugins[k]) for k in sorted(self.plugins)]
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
        async with self._change():
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
                await self._resolve(plugin)  # ports, limits and folders are part of the launch
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

        See :mod:`hostd.prepare`. Sends ``$/progress`` (``requestId`` = this
        request's id) per step; the result is the plugin's info, whose
        ``launch`` now runs the prepared program (a new digest: approve it).
        A prepared plugin is answered at once. ``PREPARE_FAILED`` with
        ``data.reason`` (``unreachable``: the registry cannot be reached,
        with its address and the installer's own words; ``not-found``;
        ``unsupported``...). A launch naming no package is answered as it is.
        Cancellation (``$/cancelRequest``) ends the installer and deletes the
        unfinished environment: the plugin stays not prepared.
        """
        plugin = self._plugin(p.parse_params(p.PluginRef, params).id)
        plugin_id = plugin.manifest.id
        backend = plugin.manifest.backend
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
                    path=merge_paths(os.environ.get("PATH", ""), self.login_path),
                    progress=progress,
                    # A running instance keeps its environment until it stops (the next prepare prunes it).
                    prune=plugin.supervisor.state is State.STOPPED,
                )
            except PrepareError as exc:
                raise _prepare_failed(plugin_id, exc, package.packages) from None
        async with self._change():
            with contextlib.suppress(LaunchError):
                await self._resolve(plugin)
        return self.info(plugin)

    async def approve(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/approve {id, digest}``: approve the exact launch that install showed."""
        args = p.parse_params(p.ApproveParams, params)
        plugin = self._plugin(args.id)
        try:
            launch = await self._resolve(plugin)
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
                launch=self._launch_info(plugin, launch),
            )
        repin = plugin.approved_digest != digest or bool(plugin.supervisor.withheld)
        async with self._change():
            if repin:
                plugin.approved_digest = digest
                plugin.supervisor.pinned = plugin.supervisor.approval_pins()
        if repin:  # written: now release the withheld tools
            await plugin.supervisor.repin()
        return self.info(plugin)

    async def enable(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/enable {id}`` -> ``PluginStatus`` once ready (docs/protocol.md "plugins/enable")."""
        plugin = self._plugin(p.parse_params(p.PluginRef, params).id)
        launch = await self._gate(plugin)
        async with self._change():
            plugin.enabled = True
        try:
            status = await plugin.supervisor.enable(launch)
        except trio.Cancelled:
            await self._abandoned(plugin)
            raise
        if plugin.manifest.contributes.discover:
            await self._record_discovered_tools(plugin)
        return status

    async def _gate(self, plugin: InstalledPlugin) -> Launch:
        """Steps 1 and 2 of enable: every permission granted, the launch approved."""
        plugin_id = plugin.manifest.id
        missing = sorted(set(plugin.manifest.permissions) - plugin.granted)
        if missing:
            raise HostError(
                ErrorKind.PERMISSION_NOT_GRANTED,
                f"plugin {plugin_id} needs permissions not granted: {', '.join(missing)}",
                plugin=plugin_id,
                permissions=missing,
            )
        try:
            launch = await self._resolve(plugin)
        except LaunchError as exc:
            raise HostError(
                ErrorKind.PLUGIN_START_FAILED,
                f"plugin {plugin_id} failed to start: {exc}",
                plugin=plugin_id,
                reason=str(exc),
                launchError=exc.kind,
                stderrTail=[],
            ) from None
        if plugin.unpreparable is not None and self.store is not None:
            raise HostError(
                ErrorKind.PLUGIN_NOT_PREPARED,
                f"plugin {plugin_id} fetches a package at start in a way hostd cannot prepare "
                f"({plugin.unpreparable}); write the launch as npx -y pkg@version or uvx --from pkg==version cmd "
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
                    launch=self._launch_info(plugin, launch),
                    approvedDigest=plugin.approved_digest,
                )
        return launch

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
            async with self._change():
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
        launch = await self._gate(plugin)
        try:
            return await plugin.supervisor.restart(launch)
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

    async def status(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``plugins/status {id}`` -> ``PluginStatus``."""
        return self._plugin(p.parse_params(p.PluginRef, params).id).supervisor.status()

    # -- tools/* ----------------------------------------------------------------

    async def tools_list(self, params: Any, ctx: RequestContext) -> dict[str, Any]:
        """``tools/list {plugin?}`` -> ``{tools: [HostTool], revision}``."""
        args = p.parse_params(p.ToolsListParams, params)
        if args.plugin is not None:
            self._plugin(args.plugin)
        tools = [tool.to_model() for tool in self.registry.tools(args.plugin)]
        return p.ToolsListResult(tools=tools, revision=self.registry.revision).wire()

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


def _preparation(plugin: InstalledPlugin) -> p.Preparation | None:
    """``launch.prepare``: ``None`` when the launch names no package."""
    package, prepared = plugin.package, plugin.prepared
    if package is None:
        return None
    if prepared is None:
        return p.Preparation(state="needed", manager=package.manager, packages=list(package.packages))
    return p.Preparation(
        state="prepared",
        manager=prepared.manager,
        packages=list(prepared.packages),
        resolved=dict(prepared.resolved),
        lockfile=prepared.lockfile,
        root=prepared.root,
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


def _write_manifest(folder: Path, document: dict[str, Any]) -> None:
    """Write ``plugin.json`` into ``folder`` (created 0700) atomically.

    Raises ``OSError``; the temporary file is then removed and any previous
    ``plugin.json`` left as it was.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = folder / "plugin.json"
    temporary = folder / MANIFEST_TEMPORARY
    try:
        temporary.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        os.chmod(temporary, 0o600)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _write_failed(exc: OSError, path: Path) -> HostError:
    """``STATE_WRITE_FAILED`` for a failed write of ``path``, with the errno name and text."""
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return HostError(
        ErrorKind.STATE_WRITE_FAILED,
        f"{path} could not be written ({name}: {exc.strerror or exc}); nothing of the request was applied",
        errno=name,
        path=str(path),
    )


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
    """What :meth:`Host._change` can undo: the plugin and record tables and each plugin's recorded fields."""

    plugins: dict[str, InstalledPlugin]
    records: dict[str, PluginRecord]
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
    "folders",
    "package",
    "prepared",
    "unpreparable",
)
_SUPERVISOR_FIELDS = ("pinned", "limits", "manifest")


def _remove_generated(state_dir: Path, folder: Path, plugin_id: str) -> None:
    """Delete what hostd generated for an uninstalled plugin: its folder when
    ``plugins/import`` wrote it (``<state>/imported/<id>``), its scratch ``TMPDIR``
    (``<state>/tmp/<id>``), its package caches (:func:`plugin_cache_env`), and its
    data folder if that is then empty (the plugin's own data is kept)."""
    if folder.parent == state_dir / "imported":
        shutil.rmtree(folder, ignore_errors=True)
    data_dir = state_dir / "data" / plugin_id
    generated_dirs = (state_dir / "tmp" / plugin_id, state_dir / "prepared" / plugin_id, data_dir / "cache")
    for generated in (*generated_dirs, data_dir / "uv-tools"):
        shutil.rmtree(generated, ignore_errors=True)
    with contextlib.suppress(OSError):
        data_dir.rmdir()  # only when empty


async def _disable_quietly(supervisor: PluginSupervisor, grace: float) -> None:
    try:
        await supervisor.disable(grace=grace)
    except Exception:
        log.exception("stopping plugin %s failed", supervisor.plugin_id)


Host.METHODS = {
    "plugins/install": Host.install,
    "plugins/import": Host.import_config,
    "plugins/uninstall": Host.uninstall,
    "plugins/list": Host.list,
    "plugins/grant": Host.grant,
    "plugins/prepare": Host.prepare,
    "plugins/approve": Host.approve,
    "plugins/enable": Host.enable,
    "plugins/disable": Host.disable,
    "plugins/restart": Host.restart,
    "plugins/status": Host.status,
    "tools/list": Host.tools_list,
    "tools/call": Host.tools_call,
}
