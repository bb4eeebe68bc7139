"""What the parent sees of an installed plugin: its :class:`hostd.control.models.PluginInfo`, the launch it
approves (with the approval digest and the preparation state) and its ``userConfig`` items.

Pure functions of an :class:`~hostd.host.records.InstalledPlugin` (memory only, no I/O but ``~`` and the
cgroup detection of :func:`sandbox.cgroups.detect`, made once per process and cached).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hostd.control import models as p
from hostd.host.capability_set import capability_set
from hostd.host.records import InstalledPlugin
from hostd.install.packages import requested_package
from hostd.install.shims import Shim
from hostd.storage import secrets as secrets_
from sandbox import cgroups
from sandbox.launch import Launch


def launch_model(plugin: InstalledPlugin, launch: Launch) -> p.Launch:
    """``PluginInfo.launch``: what the user approves (``Launch.describe()``), with the approval digest."""
    info = dict(launch.describe())
    info.pop("prepared", None)  # shown as launch.prepare, with the state
    digest = plugin.approval_digest(launch)
    info.update(digest=digest, launchDigest=info["digest"], approved=plugin.approved_digest == digest)
    info["prepare"] = preparation(plugin)
    # Call-time grants (hostd/host/call_grants.py): rules of the plan, not of the launch the digest covers.
    grants = sorted(plugin.path_grants().items())
    folders = dict(launch.folders)
    for access in ("read", "write"):
        for index, path in enumerate(path for path, kind in grants if kind == access):
            folders[f"call.{access}[{index}]"] = path
    info["folders"] = folders
    info["capabilities"] = capability_set(plugin, launch)
    info["secretArguments"] = sorted(secrets_.references(launch.args, channel="value")) or None
    if info.get("remote") is None:  # what bounds the tree on this machine (detected once, then cached)
        info["accounting"] = p.Accounting.model_validate(cgroups.describe(cgroups.detect()))
    if plugin.shim is not None:
        info["shim"] = shim_note(plugin.shim)
    return p.Launch.model_validate(info)


def shim_note(shim: Shim) -> p.ShimNote:
    """``Launch.shim`` / ``LaunchUnresolved.shim``: the version manager behind the command (hostd/install/shims.py)."""
    return p.ShimNote(
        manager=shim.manager,
        shim=shim.path,
        resolved=shim.real,
        version=shim.version,
        source=shim.source,
        message=shim.message,
        reason=shim.reason,
    )


def launch_info(plugin: InstalledPlugin, launch: Launch) -> dict[str, Any]:
    """:meth:`launch_model` as sent on the wire (``data.launch`` of errors too)."""
    return launch_model(plugin, launch).wire()


def info_model(plugin: InstalledPlugin, imported: bool = False) -> p.PluginInfo:
    """``plugin`` as :class:`hostd.control.models.PluginInfo`; ``imported``: ``plugins/import`` generated its
    manifest (it lives in ``<stateDir>/imported/``), whose ``version`` is a placeholder (``PluginInfo.imported``)."""
    manifest = plugin.manifest
    launch: p.Launch | p.LaunchUnresolved | None = None
    if plugin.launch is not None:
        launch = launch_model(plugin, plugin.launch)
    elif plugin.launch_error is not None:
        launch = p.LaunchUnresolved(
            error=str(plugin.launch_error),
            kind=plugin.launch_error.kind,
            shim=shim_note(plugin.shim) if plugin.shim is not None else None,
        )
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
        tools=manifest.contributes.tool_names,
        networkPorts=sorted(plugin.network_ports),
        networkHosts=list(plugin.network_hosts) or None,
        networkCallHosts=list(plugin.network_call_hosts) or None,
        limits=p.GrantedLimits(
            maxRssMb=limits["max_rss_bytes"] / (1024 * 1024) if "max_rss_bytes" in limits else None,
            maxCpuPercent=limits.get("max_cpu_percent"),
            maxDiskMb=limits["max_disk_bytes"] / (1024 * 1024) if "max_disk_bytes" in limits else None,
            maxTools=limits.get("max_tools"),
            maxListingMb=limits["max_listing_bytes"] / (1024 * 1024) if "max_listing_bytes" in limits else None,
        ),
        launch=launch,
        package=package_version(plugin),
        disabledTools=[f"{manifest.id}.{name}" for name in sorted(plugin.disabled_tools)] or None,
        imported=True if imported else None,
        serverInfo=dict(plugin.server_info) if plugin.server_info is not None else None,
        pinnedTools=[f"{manifest.id}.{name}" for name in sorted(plugin.pins)] if plugin.pins else None,
        userConfig=config_items(plugin) or None,
        origin=(
            {
                **manifest.origin.model_dump(exclude_none=True),
                **({"runtimeVersions": plugin.runtime_versions} if plugin.runtime_versions else {}),
            }
            if manifest.origin is not None
            else None
        ),
    )


def config_items(plugin: InstalledPlugin) -> list[p.ConfigItem]:
    """``PluginInfo.userConfig``: the declared options, then the secrets referenced but not declared."""
    manifest = plugin.manifest
    values = secrets_.effective_values(manifest.user_config, plugin.settings, str(Path.home()))
    items = [
        p.ConfigItem(
            name=name,
            type=option.type,
            title=option.title or name,
            description=option.description,
            required=option.required,
            sensitive=option.sensitive,
            multiple=option.multiple,
            set=name in plugin.secret_names if option.sensitive else values.get(name) is not None,
            value=None if option.sensitive else values.get(name),
        )
        for name, option in manifest.user_config.items()
    ]
    backend = manifest.backend
    referenced = secrets_.references([*backend.args, *backend.env.values()]) | secrets_.remote_references(
        backend.headers, backend.oauth.client_secret if backend.oauth else None
    )
    for name in sorted(referenced - set(manifest.user_config)):
        items.append(
            p.ConfigItem(
                name=name,
                type="string",
                title=name,
                description="a secret the manifest refers to as ${secret:" + name + "}",
                required=True,
                sensitive=True,
                multiple=False,
                set=name in plugin.secret_names,
                value=None,
            )
        )
    return items


def preparation(plugin: InstalledPlugin) -> p.Preparation | None:
    """``launch.prepare``: ``None`` when the launch names no package."""
    package, prepared = plugin.package, plugin.prepared
    if package is None:
        return None
    if prepared is None:
        unpinned = list(package.unpinned)
        return p.Preparation(
            state="needed", manager=package.manager, packages=list(package.packages), unpinned=unpinned or None
        )
    return p.Preparation(
        state="prepared",
        manager=prepared.manager,
        packages=list(prepared.packages),
        resolved=dict(prepared.resolved),
        lockfile=prepared.lockfile,
        root=prepared.root,
        registry=prepared.registry,
        unpinned=list(prepared.unpinned),
        build=prepared.build,
    )


def package_version(plugin: InstalledPlugin) -> p.PackageVersion | None:
    """``PluginInfo.package``: the package that provides the launch's program and its version.

    The version is the prepared one when the plugin is prepared (what runs), else the one the launch
    pins, else ``None`` (unpinned, not yet prepared). ``None`` when the launch names no package.
    """
    package, prepared = plugin.package, plugin.prepared
    if package is None:
        return None
    name, pinned = requested_package(package)
    version = pinned
    if prepared is not None and prepared.resolved:
        name, version = next(iter(prepared.resolved.items()))  # the providing package comes first
    return p.PackageVersion(manager=package.manager, name=name, version=version, pinned=pinned is not None)
