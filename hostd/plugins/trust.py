"""The trust model: what the user approves, what is pinned, what is withheld.

Nothing a plugin brings runs or is offered to a model before the user agreed
to it. Three things carry that agreement, and this module is their one home
(the host and the supervisor call it; neither decides trust on its own):

**The approval** covers the *launch*: the resolved executable, arguments,
working directory, environment names, isolation layers
(:attr:`sandbox.launch.Launch.digest`) and the manifest file's exact bytes,
joined into one digest (:func:`approval_digest`). ``plugins/approve {id,
digest}`` records it; every start (enable, restart, an automatic retry)
resolves the launch again and refuses to start unless the digest is the
approved one. Any change to what runs, or to the manifest, voids it.

**Tool pins** cover the *tools*: remote tool name -> definition digest (name,
description, schemas, annotations, permission). The first discovery after an
approval pins every tool it finds and serves them at once (trust on first
use: the process that listed them is the launch the user approved). A later
discovery (a restart, ``tools/list_changed``) is screened against the pins
(:func:`screen`): a tool whose definition differs is **withheld**, neither
registered nor callable (``TOOL_DEFINITION_CHANGED``), until the user
approves again, which re-pins the definitions then running.

**Declared versus discovered tool lists.** A manifest that lists its tools
(``contributes.tools``) has them covered by the approval too: the listing
must equal them exactly, and a tool the pins do not know (added by a manifest
change the user approved) is served. A plugin without a declared tool list
(``contributes.discover``: an imported config entry) has only the pins: the
tools found at the first enable after approval are what the user trusted,
so any tool the pins do not know is withheld as well as any changed one
(:func:`discovers_tools`). Such a plugin declares no permissions, so a
``_meta["hostd/permission"]`` its tools claim cannot be granted: it is
dropped from the served tool (it still counts in the definition digest, so
changing it withholds the tool).

This module is pure: no I/O, no trio. Writing the pins to the state
document before tools are served is the host's job (the supervisor emits a
``ToolsPinned`` event and waits for it to be recorded).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hostd.install.manifest import Manifest
from hostd.mcp.tools import PERMISSION_META_KEY, RegisteredTool
from hostd.wire.errors import ErrorKind, HostError

#: Tool pins: remote tool name -> definition digest (``RegisteredTool.definition_digest``).
Pins = dict[str, str]
#: Withheld tools: host name -> ``{"approvedDigest": str | None, "currentDigest": str}``.
Withheld = dict[str, dict[str, str | None]]


def approval_digest(launch_digest: str, manifest_digest: str) -> str:
    """The digest the user approves: ``"sha256:<hex>"`` over the launch's digest and the manifest's.

    ``launch_digest``: :attr:`sandbox.launch.Launch.digest`; ``manifest_digest``:
    the manifest file's digest (:func:`hostd.install.manifest.load_manifest`). Any change
    to either gives a new digest and voids the approval.
    """
    joined = f"{launch_digest}\n{manifest_digest}".encode()
    return "sha256:" + hashlib.sha256(joined).hexdigest()


def discovers_tools(manifest: Manifest) -> bool:
    """Whether the plugin has no declared tool list (``contributes.discover``): pins alone cover its tools."""
    return manifest.contributes.discover


def expected_tools(
    manifest: Manifest, listing: Sequence[Mapping[str, Any]], offered: Collection[str] = ()
) -> list[str]:
    """The host names a listing must equal: the manifest's ``contributes.tools`` whose client
    feature ``needs`` are all in ``offered`` (:func:`hostd.mcp.client_features.offered_features` of what
    this instance was offered), or for a plugin that discovers its tools, whatever it listed
    (each still validated; a tool new since approval is withheld by the pins)."""
    if not discovers_tools(manifest):
        return manifest.contributes.expected_tools(offered)
    return [f"{manifest.id}.{t['name']}" for t in listing if isinstance(t.get("name"), str)]


def listing_permissions(manifest: Manifest, listing: Sequence[Mapping[str, Any]]) -> list[str]:
    """The permissions a listing's tools may name: the manifest's; for a plugin that discovers
    its tools, also every one its tools claim (accepted for validation, then dropped by
    :func:`served`)."""
    permissions = list(manifest.permissions)
    if discovers_tools(manifest):
        for tool in listing:
            meta = tool.get("_meta")
            claimed = meta.get(PERMISSION_META_KEY) if isinstance(meta, dict) else None
            if isinstance(claimed, str) and claimed not in permissions:
                permissions.append(claimed)
    return permissions


def served(manifest: Manifest, tools: Sequence[RegisteredTool]) -> list[RegisteredTool]:
    """The tools as offered: a discovering plugin's tools without the permission they claim
    (it cannot be granted: the manifest declares none). Digests are kept as listed."""
    if not discovers_tools(manifest):
        return list(tools)
    return [dataclasses.replace(t, permission=None) if t.permission is not None else t for t in tools]


def pins_of(tools: Sequence[RegisteredTool]) -> Pins:
    """The pins for ``tools``: remote name -> definition digest."""
    return {t.remote_name: t.definition_digest for t in tools}


@dataclass(frozen=True)
class Screened:
    """What :func:`screen` decided: the tools to register and the tools withheld."""

    allowed: list[RegisteredTool]
    withheld: Withheld


def screen(manifest: Manifest, tools: Sequence[RegisteredTool], pins: Pins) -> Screened:
    """Split a discovery into the tools served and the tools withheld, against ``pins``.

    A tool whose definition digest differs from its pin is withheld. A tool
    with no pin is served when the manifest declares the tool list (the
    approval covers it), withheld when the plugin discovers its tools (only
    the pins do). ``withheld`` maps host names to ``{approvedDigest,
    currentDigest}`` (``approvedDigest`` None for a tool never pinned).
    """
    discovering = discovers_tools(manifest)
    allowed: list[RegisteredTool] = []
    withheld: Withheld = {}
    for tool in tools:
        pinned = pins.get(tool.remote_name)
        if pinned == tool.definition_digest or (pinned is None and not discovering):
            allowed.append(tool)
        else:
            withheld[tool.name] = {"approvedDigest": pinned, "currentDigest": tool.definition_digest}
    return Screened(allowed=allowed, withheld=withheld)


def withheld_error(plugin_id: str, name: str, digests: Mapping[str, str | None]) -> HostError:
    """``TOOL_DEFINITION_CHANGED`` for the withheld tool ``name`` (host name) of ``plugin_id``.

    ``data``: ``plugin``, ``tool``, ``approvedDigest`` (None: never approved), ``currentDigest``.
    """
    why = "changed its definition since it was approved" if digests.get("approvedDigest") else "is new since approval"
    return HostError(
        ErrorKind.TOOL_DEFINITION_CHANGED,
        f"{name} {why}; approve the plugin again to use it",
        plugin=plugin_id,
        tool=name,
        **digests,
    )
