"""The host's records of its plugins: an installed plugin (:class:`InstalledPlugin`: what the state document
keeps of it, :class:`RecordedState`, and what is derived from it, :class:`DerivedState`), a plugin whose
stored files no longer load (:class:`BrokenPlugin`), the host policy from the command line
(:class:`HostSettings`) and each plugin's log ring (:class:`LogRing`).
"""

from __future__ import annotations

import collections
import errno
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import trio

from hostd.control import models as p
from hostd.host import installs
from hostd.install.ecosystems import Prepared, Registries
from hostd.install.manifest import Manifest, load_manifest
from hostd.install.packages import PackageLaunch
from hostd.install.shims import Shim
from hostd.net.allowlist import canonical_entries
from hostd.plugins import trust
from hostd.plugins.restart import RestartMode
from hostd.plugins.supervisor import PluginSupervisor
from hostd.storage.state import SERVER_INFO_CHARS, PluginRecord, StoredRecord
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.framing import PLUGIN_FRAME_LIMIT, RESULT_LIMIT
from sandbox.launch import Launch, LaunchError
from sandbox.policy import IsolationPolicy
from sandbox.watchdog import DEFAULT_MAX_DISK_BYTES

#: The host's logger (its lines keep the name they had before the host was split into modules).
log = logging.getLogger("hostd.host.service")

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
    #: PEM files of the certificates a signed bundle's chain must lead to (``--bundle-trust-root``).
    bundle_trust_roots: tuple[str, ...] = ()
    #: Hosts a registry entry's bundle URL may name though they resolve to a private or loopback address
    #: (``--allow-private-download``: the user's own mirror; hostd/install/serverjson.py).
    download_allow_private: tuple[str, ...] = ()
    #: ``(name, address)`` pairs the plugins' network proxy resolves without asking the system resolver
    #: (``--resolve NAME=ADDRESS``, like curl's; hostd/net/proxy.py ``pinned_resolver``).
    resolve: tuple[tuple[str, str], ...] = ()
    #: Start the enabled plugins at start-up (False: ``hostd serve --no-restore``; each starts at its
    #: ``plugins/enable``, and one whose last start failed shows ``error`` with that reason).
    restore: bool = True
    #: A reader of the state folder, not its owner (hostctl's reading commands when no hostd serves the folder,
    #: issue 28): the store is a :class:`hostd.storage.state.ReadOnlyStateStore`; no orphan sweep, no check that
    #: moves a damaged secrets file aside, no log file written. Only the reading methods are asked of it.
    read_only: bool = False

    def isolation_policy(
        self,
        data_dir: Path | None,
        *,
        tcp_ports: Sequence[int] = (),
        proxy: tuple[Sequence[str], Sequence[str]] | None = None,
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
        :func:`sandbox.policy.landlock_rules`). ``proxy``: the plugin's
        network allowlist ``(hosts, private)`` (None: it has none), kept in
        the policy under every level (``basic`` enforces none of it; the
        launch says so).
        """
        rss = max_rss_bytes if max_rss_bytes is not None else self.max_rss_bytes
        cpu = max_cpu_percent if max_cpu_percent is not None else self.max_cpu_percent
        if self.sandbox == "basic":
            # The allowlist stays in the policy (so the launch shows it) though basic enforces none of it.
            return IsolationPolicy(
                landlock=False,
                seccomp=False,
                max_rss_bytes=rss,
                max_cpu_percent=cpu,
                proxy_hosts=tuple(proxy[0]) if proxy is not None else None,
                proxy_private=tuple(proxy[1]) if proxy is not None else (),
            )
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
            proxy_hosts=tuple(proxy[0]) if proxy is not None else None,
            proxy_private=tuple(proxy[1]) if proxy is not None else (),
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


@dataclass(kw_only=True)
class RecordedState:
    """What the state document keeps of an installed plugin (its :class:`PluginRecord`), as kept in memory.

    Its fields are the one list of what is recorded (:data:`RECORDED_FIELDS`): :meth:`to_record` writes
    them, :meth:`take_record` reads them back at restore, and :meth:`hostd.host.catalog.Catalog.change`
    undoes them. The restart count is the supervisor's (a statistic).
    """

    path: Path
    manifest_digest: str
    granted: set[str] = field(default_factory=set)
    approved_digest: str | None = None
    enabled: bool = False
    #: TCP ports the parent granted (each declared in backend.tcp_ports).
    network_ports: set[int] = field(default_factory=set)
    #: Network allowlist entries the parent granted (``plugins/grant networkHosts``), canonical, sorted; the
    #: allowlist in force is these and the manifest's ``network.hosts`` (:func:`hostd.host.launch.allowlist`).
    network_hosts: list[str] = field(default_factory=list)
    #: Destinations (``host:port``, canonical) the parent let through for good (``network/request`` ``always``).
    network_call_hosts: list[str] = field(default_factory=list)
    #: Per-plugin limits from the parent: max_rss_bytes, max_cpu_percent, max_disk_bytes, max_tools,
    #: max_listing_bytes.
    limits: dict[str, Any] = field(default_factory=dict)
    #: Tool pins recorded for the approval (:mod:`hostd.plugins.trust`); None: the next discovery pins.
    pins: trust.Pins | None = None
    #: MCP names of the tools the user disabled (``tools/setEnabled``): not listed, not called.
    disabled_tools: set[str] = field(default_factory=set)
    #: Folders the parent granted (``plugins/grant``'s ``folders``): ``{"read": [...], "write": [...]}``.
    folders: dict[str, list[str]] = field(default_factory=dict)
    #: Paths granted at a tool call with ``always`` (hostd/host/call_grants.py): real path -> ``read`` | ``write``.
    call_grants: dict[str, str] = field(default_factory=dict)
    #: The parent let secrets travel as arguments (``plugins/grant``'s ``secretArguments``; issue 25).
    secret_arguments: bool = False
    #: Whose install this is (hostd/host/installs.py): its data folder and secrets are this install's only.
    install: dict[str, str] = field(default_factory=dict)
    #: Why its last start failed while enabled (:attr:`hostd.storage.state.PluginRecord.start_error`).
    start_error: dict[str, str] | None = None
    #: The ``serverInfo`` of its last successful start (:attr:`hostd.storage.state.PluginRecord.server_info`).
    server_info: dict[str, str] | None = None

    def to_record(self, restarts: int) -> PluginRecord:
        """What the state store keeps of this plugin, with its restart count."""
        return PluginRecord(
            path=str(self.path),
            manifest_digest=self.manifest_digest,
            granted=sorted(self.granted),
            approved_digest=self.approved_digest,
            enabled=self.enabled,
            restarts=restarts,
            pinned_tools=self.pins,
            network_ports=sorted(self.network_ports),
            network_hosts=list(self.network_hosts),
            network_call_hosts=list(self.network_call_hosts),
            limits=dict(self.limits),
            disabled_tools=sorted(self.disabled_tools),
            folders={k: list(v) for k, v in self.folders.items()},
            call_grants=dict(self.call_grants),
            secret_arguments=self.secret_arguments,
            install=dict(self.install),
            start_error=dict(self.start_error) if self.start_error is not None else None,
            server_info=dict(self.server_info) if self.server_info is not None else None,
        )

    def take_record(self, record: PluginRecord, manifest: Manifest) -> None:
        """Take what ``record`` holds (restore), but what ``manifest`` no longer declares; the path and the
        manifest's digest are the plugin's own (the digest of the manifest as loaded now)."""
        self.granted = set(record.granted) & set(manifest.permissions)
        self.approved_digest = record.approved_digest
        self.enabled = record.enabled
        self.pins = record.pinned_tools
        self.network_ports = set(record.network_ports) & set(manifest.backend.tcp_ports)
        self.network_hosts = canonical_entries(record.network_hosts)
        self.network_call_hosts = canonical_entries(record.network_call_hosts)
        self.limits = dict(record.limits)
        self.disabled_tools = set(record.disabled_tools)
        self.folders = {k: list(v) for k, v in record.folders.items()}
        self.call_grants = dict(record.call_grants)
        self.secret_arguments = record.secret_arguments
        self.install = installs.migrate(record.install, manifest, self.path)  # a record from before: its own now
        self.start_error = dict(record.start_error) if record.start_error is not None and record.enabled else None
        self.server_info = dict(record.server_info) if record.server_info is not None else None


@dataclass(kw_only=True)
class DerivedState:
    """What hostd knows of an installed plugin beyond its record: its manifest and supervisor, and what the
    last launch resolution found (the launch, its policy, settings, secrets' names, the package)."""

    manifest: Manifest
    supervisor: PluginSupervisor
    launch: Launch | None = None
    launch_error: LaunchError | None = None
    #: The isolation policy of the last resolution (what a start hands the watchdog).
    policy: IsolationPolicy | None = None
    #: user_config values set (non-secret), secret names stored, required settings not set; read at resolution.
    settings: dict[str, Any] = field(default_factory=dict)
    secret_names: set[str] = field(default_factory=set)
    config_missing: list[str] = field(default_factory=list)
    #: The package the manifest's launch fetches (npx, uvx, uv run --with, deno npm:/jsr:), as last resolved;
    #: ``None``: none.
    package: PackageLaunch | None = None
    #: Its finished preparation, as last resolved; ``None``: not prepared (or no package).
    prepared: Prepared | None = None
    #: The version manager's shim the manifest's command is (hostd/install/shims.py), as last resolved; ``None``: none.
    shim: Shim | None = None
    #: Why the package launch cannot be prepared (an unsupported npx/uvx option); ``None``: it can, or names none.
    unpreparable: str | None = None
    #: A bundle's runtimes as found at its install by this hostd (``origin.runtimeVersions``): name -> version.
    runtime_versions: dict[str, str] = field(default_factory=dict)
    #: Why its settings or secrets could not be read at the last resolution (``STATE_FILE_UNREADABLE``); enable
    #: fails with it. ``None``: read, or not needed.
    config_problem: HostError | None = None
    #: Paths granted at a tool call with ``once``: real path -> ``read`` | ``write``; kept in memory only
    #: (until hostd exits or the grant is revoked), never written to the state document.
    once_grants: dict[str, str] = field(default_factory=dict)
    #: Held while a call-time grant is decided and applied (one restart at a time for a plugin).
    grant_lock: trio.Lock = field(default_factory=trio.Lock)


#: The recorded fields of an installed plugin (:class:`RecordedState`), in their order.
RECORDED_FIELDS = tuple(f.name for f in fields(RecordedState))


@dataclass(kw_only=True)
class InstalledPlugin(RecordedState, DerivedState):
    """One installed plugin: where it lives, what the user granted and approved (:class:`RecordedState`),
    and what is derived from it (:class:`DerivedState`)."""

    def approval_digest(self, launch: Launch) -> str:
        """The digest the user approves now (:func:`hostd.plugins.trust.approval_digest`).

        With secrets passed as arguments (the ``secretArguments`` opt-in), the launch's digest is
        marked so: opting in voids an earlier approval, and the launch approved shows it.
        """
        marked = launch.digest + ("\nsecret-arguments" if self.secret_arguments else "")
        return trust.approval_digest(marked, self.manifest_digest)

    def record(self) -> PluginRecord:
        """What the state store keeps of this plugin."""
        return self.to_record(self.supervisor.restarts)

    def path_grants(self) -> dict[str, str]:
        """Every call-time grant in force, ``once`` and ``always``: real path -> ``read`` | ``write``."""
        merged = dict(self.once_grants)
        for path, access in self.call_grants.items():
            if merged.get(path) != "write":
                merged[path] = access
        return merged


@dataclass
class BrokenPlugin:
    """An installed plugin whose stored files no longer load: listed as ``broken`` with ``error``, never started.

    The class (issue 31): a plugin's own file (its manifest) or its record in ``state.json`` that hostd
    cannot use must not take the host down nor vanish. Its record stays in the document as it was
    (``record``); ``error`` is ``PLUGIN_BROKEN`` (``data.source``: ``"manifest"`` or ``"state"``,
    ``data.reason``, ``data.errors``), the answer to every request about it but ``plugins/list``,
    ``plugins/status``, ``plugins/logs`` and ``plugins/uninstall``. Fixed, it is loaded again by SIGHUP
    or the next hostd; installed again, the new plugin replaces it.
    """

    plugin_id: str
    path: str | None
    record: StoredRecord
    error: HostError

    def info(self) -> p.PluginInfo:
        """:class:`hostd.control.models.PluginInfo` of what is known: the id, the path, what the record holds."""
        record = self.record if isinstance(self.record, PluginRecord) else None
        return p.PluginInfo(
            id=self.plugin_id,
            name=self.plugin_id,
            version="",
            path=self.path or "",
            permissions=[],
            granted=sorted(record.granted) if record is not None else [],
            enabled=record.enabled if record is not None else False,
            status="broken",
            tools=[],
            networkPorts=sorted(record.network_ports) if record is not None else [],
            limits=p.GrantedLimits(maxRssMb=None, maxCpuPercent=None, maxDiskMb=None),
            launch=None,
            error=self.error.to_error_object()["data"] | {"message": self.error.message},
        )

    def status(self) -> dict[str, Any]:
        """:class:`hostd.control.models.PluginStatus` as sent on the wire: ``broken``, ``error`` says why."""
        return p.PluginStatus(
            plugin_id=self.plugin_id,
            backend_type="mcp",
            transport="unknown",
            status="broken",
            tools_count=0,
            started_at=None,
            last_seen_at=None,
            protocol_version=None,
            server_name=None,
            server_version=None,
            error=self.error.to_error_object()["data"] | {"message": self.error.message},
            restarts=self.record.restarts if isinstance(self.record, PluginRecord) else 0,
            last_exit=None,
            next_retry_at=None,
            withheld=[],
            isolation=[],
        ).wire()


def server_info_of(status: dict[str, Any]) -> dict[str, str] | None:
    """The ``serverInfo`` a ``ready`` ``PluginStatus`` carries (``server_name``, ``server_version``), as the record
    keeps it (:attr:`hostd.storage.state.PluginRecord.server_info`, cut to ``SERVER_INFO_CHARS``); None when the
    server reported no version."""
    name, version = status.get("server_name"), status.get("server_version")
    if not isinstance(version, str) or not version:
        return None
    return {"name": str(name or "")[:SERVER_INFO_CHARS], "version": version[:SERVER_INFO_CHARS]}


def broken_error(plugin_id: str, path: str | None, source: str, reason: str, errors: list[Any]) -> HostError:
    """``PLUGIN_BROKEN`` for ``plugin_id``: ``source`` ``"manifest"`` or ``"state"``, ``reason`` one sentence,
    ``errors`` ``[{field, message, ...}]`` (the manifest's, or the record's field in state.json)."""
    fix = (
        "fix its manifest, then send hostd SIGHUP or restart it"
        if source == "manifest"
        else "stop hostd and fix its record in state.json"
    )
    return HostError(
        ErrorKind.PLUGIN_BROKEN,
        f"plugin {plugin_id} is broken: {reason}; {fix}, or uninstall the plugin",
        plugin=plugin_id,
        path=path,
        source=source,
        reason=reason,
        errors=errors,
    )


def load_stored_manifest(folder: Path) -> tuple[Manifest, str]:
    """:func:`hostd.install.manifest.load_manifest` of an installed plugin's folder, for restore and SIGHUP (blocking).

    Raises ``MANIFEST_INVALID`` for every failure, whatever raised it: hostd never ends because of a
    plugin's file (an exception of another kind is a defect of the loader, logged with its traceback).
    """
    try:
        return load_manifest(folder)
    except HostError:
        raise
    except Exception as exc:
        log.error("loading the manifest in %s failed unexpectedly", folder, exc_info=True)
        message = f"the manifest cannot be loaded ({type(exc).__name__})"
        raise HostError(
            ErrorKind.MANIFEST_INVALID,
            f"{folder}: {message}",
            path=str(folder),
            errors=[{"field": "", "message": message}],
        ) from None


#: Bounds of each plugin's log ring (``plugins/logs``): lines, and characters of their messages.
LOG_RING_LINES = 500

LOG_RING_CHARS = 256 * 1024


class LogRing:
    """A plugin's recent ``plugins/log`` lines, bounded by :data:`LOG_RING_LINES` and
    :data:`LOG_RING_CHARS`; the oldest lines leave first (counted in ``dropped``).

    Kept by the host per plugin id, so it outlives restarts and crashes of the plugin: a
    parent that opens its log view later still sees what the last instance wrote.
    """

    def __init__(self, max_lines: int = LOG_RING_LINES, max_chars: int = LOG_RING_CHARS) -> None:
        self._lines: collections.deque[p.LogLine] = collections.deque()
        self._chars = 0
        self.max_lines = max_lines
        self.max_chars = max_chars
        self.dropped = 0

    def add(self, level: str, source: Any, message: str) -> p.LogLine:
        """Keep one line (already redacted by whoever sent it), stamped now; return it."""
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        line = p.LogLine(time=stamp, level=level, source=source, message=message)
        self._lines.append(line)
        self._chars += len(message)
        while len(self._lines) > self.max_lines or self._chars > self.max_chars:
            self._chars -= len(self._lines.popleft().message)
            self.dropped += 1
        return line

    def recent(self, limit: int) -> list[p.LogLine]:
        """The last ``limit`` lines, oldest first."""
        return list(self._lines)[-limit:] if limit > 0 else []


def write_failed(exc: OSError, path: Path) -> HostError:
    """``STATE_WRITE_FAILED`` for a failed write of ``path``, with the errno name and text."""
    name = errno.errorcode.get(exc.errno or 0, "EIO")
    return HostError(
        ErrorKind.STATE_WRITE_FAILED,
        f"{path} could not be written ({name}: {exc.strerror or exc}); nothing of the request was applied",
        errno=name,
        path=str(path),
    )
