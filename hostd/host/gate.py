"""The trust gate: whether an installed plugin may start now, decided by a pure function.

:func:`decide` reads only its :class:`GateInputs` (no I/O, no host): every permission the manifest
declares granted, its settings and secrets readable and set, its package prepared (with a state folder),
and the launch it would run approved. :func:`gate_inputs` takes them from a plugin and its resolved
launch. The host (``Host._gate``) resolves the launch first and fills in the secrets after an allowed
decision; those are the gate's I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hostd.host import plugin_info
from hostd.host.records import InstalledPlugin
from hostd.install.packages import PackageLaunch
from hostd.mcp.permissions import RESERVED_PERMISSIONS
from hostd.wire.errors import ErrorKind, HostError
from sandbox.launch import Launch


@dataclass(frozen=True)
class GateInputs:
    """What the gate decides from: the plugin's declarations, grants, settings, preparation and approval."""

    plugin_id: str
    #: The permissions the manifest declares, and those granted.
    permissions: tuple[str, ...]
    granted: frozenset[str]
    #: Why its settings or secrets could not be read at the resolution (``None``: read, or not needed).
    config_problem: HostError | None
    #: Settings and secrets the launch needs that are not set.
    config_missing: tuple[str, ...]
    #: Why its package launch cannot be prepared (``None``: it can, or names no package).
    unpreparable: str | None
    #: The package the launch fetches (``None``: none), and whether it is prepared.
    package: PackageLaunch | None
    prepared: bool
    #: Whether the host has a state folder (without one nothing is prepared, so nothing needs to be).
    has_state: bool
    #: The digest the user approved, and that of the launch now (:meth:`InstalledPlugin.approval_digest`).
    approved_digest: str | None
    digest: str
    #: The launch as the user approves it (``PluginInfo.launch``), sent with a refusal to approve.
    launch: Mapping[str, Any]
    #: ``--trust development``: an unapproved launch starts anyway.
    trust_development: bool


@dataclass(frozen=True)
class Allowed:
    """The gate lets the plugin start; ``approved`` is false when only ``--trust development`` let it."""

    approved: bool


def decide(inputs: GateInputs) -> Allowed | HostError:
    """Steps 1 and 2 of enable: every permission granted, the launch approved.

    Returns :class:`Allowed`, or the refusal, checked in this order: the settings' file
    unreadable (``config_problem`` itself), ``PERMISSION_NOT_GRANTED``, ``CONFIG_REQUIRED``,
    ``PLUGIN_NOT_PREPARED`` (a launch that cannot be prepared, then one not prepared yet; with a
    state folder only), ``MCP_TRUST_APPROVAL_REQUIRED``.
    """
    plugin_id = inputs.plugin_id
    if inputs.config_problem is not None:  # its settings or secrets cannot be read: say which file
        return inputs.config_problem
    # A launch that cannot run is reported before anything the user could grant: granting
    # first would only lead to this error (a manifest's "pyhton3" is fixed in the manifest).
    missing = sorted(set(inputs.permissions) - inputs.granted - RESERVED_PERMISSIONS)
    if missing:
        return HostError(
            ErrorKind.PERMISSION_NOT_GRANTED,
            f"plugin {plugin_id} needs permissions not granted: {', '.join(missing)}",
            plugin=plugin_id,
            permissions=missing,
        )
    if inputs.config_missing:
        return HostError(
            ErrorKind.CONFIG_REQUIRED,
            f"plugin {plugin_id} needs settings that are not set: {', '.join(inputs.config_missing)}; "
            "set them with plugins/configure",
            plugin=plugin_id,
            missing=list(inputs.config_missing),
        )
    if inputs.unpreparable is not None and inputs.has_state:
        return HostError(
            ErrorKind.PLUGIN_NOT_PREPARED,
            f"plugin {plugin_id} fetches a package at start in a way hostd cannot prepare "
            f"({inputs.unpreparable}); write the launch as npx -y pkg@version, uvx --from pkg==version cmd or "
            "deno run -A npm:pkg@version "
            "(a registry mirror is hostd's --npm-registry / --python-index)",
            plugin=plugin_id,
            packages=[],
        )
    if inputs.package is not None and not inputs.prepared and inputs.has_state:
        return HostError(
            ErrorKind.PLUGIN_NOT_PREPARED,
            f"plugin {plugin_id} runs {' '.join(inputs.package.packages)} ({inputs.package.manager}): "
            "prepare it first (plugins/prepare), then approve its launch; hostd never fetches packages "
            "when a plugin starts",
            plugin=plugin_id,
            packages=list(inputs.package.packages),
        )
    if inputs.approved_digest != inputs.digest:
        if inputs.trust_development:
            return Allowed(approved=False)
        return HostError(
            ErrorKind.MCP_TRUST_APPROVAL_REQUIRED,
            f"plugin {plugin_id}: approve this exact launch first (plugins/approve with its digest)",
            plugin=plugin_id,
            launch=dict(inputs.launch),
            approvedDigest=inputs.approved_digest,
        )
    return Allowed(approved=True)


def gate_inputs(plugin: InstalledPlugin, launch: Launch, *, has_state: bool, trust_development: bool) -> GateInputs:
    """The gate's inputs for ``plugin`` about to run ``launch`` (its launch as just resolved)."""
    return GateInputs(
        plugin_id=plugin.manifest.id,
        permissions=tuple(plugin.manifest.permissions),
        granted=frozenset(plugin.granted),
        config_problem=plugin.config_problem,
        config_missing=tuple(plugin.config_missing),
        unpreparable=plugin.unpreparable,
        package=plugin.package,
        prepared=plugin.prepared is not None,
        has_state=has_state,
        approved_digest=plugin.approved_digest,
        digest=plugin.approval_digest(launch),
        launch=plugin_info.launch_info(plugin, launch),
        trust_development=trust_development,
    )
