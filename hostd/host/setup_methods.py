"""What the user sets up between install and enable, as control methods: ``plugins/grant`` (permissions,
folders, TCP ports, limits), ``plugins/prepare`` (the launch's packages into the plugin's own environment),
``plugins/configure`` (settings and secrets) and ``plugins/approve`` (the exact launch).

Written against :class:`SetupHost`, the small lookup interface they need of the host, so this module does
not import the host.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import trio

from hostd.control import models as p
from hostd.control.core import Notify, RequestContext
from hostd.host import installs, network_grants, plugin_info
from hostd.host.records import HostSettings, InstalledPlugin, write_failed
from hostd.install.packages import PrepareError, parse_package_launch
from hostd.install.prepare import prepare as prepare_packages
from hostd.net.allowlist import EntryError, canonical_entries, parse_entry
from hostd.plugins.supervisor import State
from hostd.storage import secrets as secrets_
from hostd.storage.state import StateStore
from hostd.wire.errors import ErrorKind, HostError
from sandbox.launch import Launch, LaunchError


class SetupHost(Protocol):
    """What the setup methods need of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def store(self) -> StateStore | None: ...

    @property
    def secret_store(self) -> secrets_.SecretStore | None: ...

    @property
    def settings(self) -> HostSettings: ...

    @property
    def prepare_locks(self) -> dict[str, trio.Lock]:
        """One preparation at a time per plugin (two would share its environment folder)."""
        ...

    def change(self) -> AbstractAsyncContextManager[None]:
        """Apply the body's changes to memory and the state document together, or to neither."""
        ...

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        """The installed plugin ``plugin_id``; raises :class:`HostError` ``PLUGIN_NOT_FOUND``."""
        ...

    async def resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch; raises :class:`sandbox.launch.LaunchError`."""
        ...

    async def command_path(self) -> str:
        """hostd's ``PATH`` followed by the login shell's entries it lacks."""
        ...

    def info(self, plugin: InstalledPlugin) -> dict[str, Any]:
        """:class:`hostd.control.models.PluginInfo` as sent on the wire."""
        ...

    @property
    def notify(self) -> Notify:
        """Send a notification to the parent (a ``plugins/log`` about a plugin is kept in its log too)."""
        ...

    def report_from_thread(self, plugin_id: str | None, message: str) -> None:
        """Tell the parent about a damaged file; callable from any thread."""
        ...


async def grant(host: SetupHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/grant {id, permissions}``: replace the granted set."""
    args = p.parse_params(p.GrantParams, params)
    plugin = host._plugin(args.id)
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
    hosts = _granted_hosts(args.id, args.network_hosts) if args.network_hosts is not None else None
    call_hosts = _granted_hosts(args.id, args.network_call_hosts) if args.network_call_hosts is not None else None
    async with host.change():
        plugin.granted = set(args.permissions)
        if folders is not None:
            plugin.folders = folders
        if args.network_ports is not None:
            plugin.network_ports = ports
        if hosts is not None:
            plugin.network_hosts = hosts
        if call_hosts is not None:
            plugin.network_call_hosts = call_hosts
        if args.secret_arguments is not None:
            plugin.secret_arguments = args.secret_arguments
        if args.limits is not None:
            plugin.limits = {
                k: v
                for k, v in (
                    ("max_rss_bytes", _mib(args.limits.max_rss_mb)),
                    ("max_cpu_percent", args.limits.max_cpu_percent),
                    ("max_disk_bytes", _mib(args.limits.max_disk_mb)),
                    ("max_tools", args.limits.max_tools),
                    ("max_listing_bytes", _mib(args.limits.max_listing_mb)),
                )
                if v is not None
            }
        try:
            await host.resolve(plugin)  # ports, limits and folders are part of the launch
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
    if hosts is not None or call_hosts is not None:
        # At once, without a restart (issue 26); after the change is written: a grant undone reaches no proxy.
        network_grants.apply_live(plugin)
    return host.info(plugin)


def _granted_hosts(plugin_id: str, entries: list[str]) -> list[str]:
    """``plugins/grant``'s ``networkHosts`` as canonical entries; every entry must parse (hostd/net/allowlist.py),
    or ``INVALID_PARAMS`` names each one that does not (``data.networkHosts``: ``[{entry, reason}]``)."""
    bad = []
    for entry in entries:
        try:
            parse_entry(entry)
        except EntryError as exc:
            bad.append({"entry": entry, "reason": str(exc)})
    if bad:
        raise HostError(
            ErrorKind.INVALID_PARAMS,
            f"plugin {plugin_id}: network hosts not granted: " + "; ".join(b["reason"] for b in bad),
            plugin=plugin_id,
            networkHosts=bad,
        )
    return canonical_entries(entries)


async def prepare(host: SetupHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
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
    forms, no installer run; ``host-refused``: an installer tried to reach a host
    that is not a registry in use, which hostd's proxy refused...). What the
    proxy refuses an installer is also sent as the plugin's ``plugins/log``
    (hostd/install/installer_network.py). A launch naming no package is answered as it is.
    Cancellation (``$/cancelRequest``) ends the installer and deletes the
    unfinished environment: the plugin stays not prepared.
    """
    ref = p.parse_params(p.PrepareParams, params)
    plugin = host._plugin(ref.id)
    plugin_id = plugin.manifest.id
    backend = plugin.manifest.backend
    if backend.command is None:  # a remote plugin: nothing to install
        return host.info(plugin)
    try:
        package = parse_package_launch(backend.command, backend.args)
    except PrepareError as exc:
        raise _prepare_failed(plugin_id, exc, ()) from None
    if package is None:
        return host.info(plugin)
    if host.store is None:
        raise HostError(ErrorKind.STATE_UNUSABLE, "plugins/prepare needs a state directory", plugin=plugin_id)
    notify = host.notify

    async def progress(step: int, total: int, message: str) -> None:
        note = p.ProgressParams(requestId=ctx.id, progress=step, total=total, message=message)
        await ctx.notify("$/progress", note.wire())

    async def log(message: str) -> None:
        # What hostd's proxy refused an installer: the plugin's log line, as a running plugin's refusals are.
        await notify("plugins/log", {"plugin": plugin_id, "level": "warning", "source": "host", "message": message})

    lock = host.prepare_locks.setdefault(plugin_id, trio.Lock())
    async with lock:
        try:
            await prepare_packages(
                host.store.directory,
                plugin_id,
                package,
                registries=host.settings.registries,
                path=await host.command_path(),
                progress=progress,
                # A running instance keeps its environment until it stops (the next prepare prunes it).
                prune=plugin.supervisor.state is State.STOPPED,
                allow_build=ref.allow_build,
                log=log,
            )
        except PrepareError as exc:
            raise _prepare_failed(plugin_id, exc, package.packages) from None
    async with host.change():
        with contextlib.suppress(LaunchError):
            await host.resolve(plugin)
    return host.info(plugin)


async def configure(host: SetupHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/configure {id, values}``: set (``null``: unset) settings and secrets -> ``PluginInfo``.

    A name is a ``user_config`` option of the manifest or a secret it refers to as
    ``${secret:NAME}``. Secret values (``sensitive`` options, ``${secret:}`` names) go to the
    secret store (hostd/storage/secrets.py) and are never shown; other values are kept in
    ``<stateDir>/settings/<id>.json`` and appear in the launch (so changing one asks for
    approval again). ``INVALID_PARAMS`` (``data.errors``, names only, never values) for an
    unknown name or a value of the wrong kind; nothing is stored then. Needs a state folder.
    """
    args = p.parse_params(p.ConfigureParams, params)
    plugin = host._plugin(args.id)
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
                secrets_.check_value(name, option, value) if option is not None else secrets_.check_secret(name, value)
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
    if host.store is None or host.secret_store is None:
        raise HostError(ErrorKind.STATE_UNUSABLE, "plugins/configure needs a state directory")
    directory, store = host.store.directory, host.secret_store
    owner = installs.secret_owner(args.id, plugin.install)  # the install's, not the id's (issue 25)

    def save() -> None:
        plain: dict[str, Any] = {}
        for name, value in args.values.items():
            option = options.get(name)
            if option is None or option.sensitive:
                store.set(owner, name, None if value is None else str(value))
            else:
                plain[name] = value
        secrets_.update_settings(directory, args.id, plain, host.report_from_thread)

    try:
        await trio.to_thread.run_sync(save)
    except OSError as exc:
        raise write_failed(exc, directory / "settings") from None
    with contextlib.suppress(LaunchError):
        await host.resolve(plugin)  # the values are part of the launch
    return host.info(plugin)


async def approve(host: SetupHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/approve {id, digest}``: approve the exact launch that install showed."""
    args = p.parse_params(p.ApproveParams, params)
    plugin = host._plugin(args.id)
    try:
        launch = await host.resolve(plugin)
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
    async with host.change():
        if repin:
            plugin.approved_digest = digest
            plugin.pins = plugin.supervisor.approval_pins()
    if repin:  # written: now release the withheld tools
        await plugin.supervisor.repin(plugin.pins)
    return host.info(plugin)


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
