"""What hostctl says about a server hostd rejected: which release it is, what its listing lacks, a release
known to work and the command that gets there (issue 28: a rejected server left the user stuck).

The class: a start that failed for what the server SENT (``PLUGIN_START_FAILED`` with ``data.problems``: a
tool listing hostd refused) is fixed by another release of the server, never by a grant or a restart; so
the remedy names the release (the prepared package's exact version from ``launch.prepare``, else the
server's own ``serverInfo`` from ``data.server``), summarises the problems (schemas without
``"type": "object"`` at the root counted as one finding), looks the package up in hostd's catalog
(``manifests/*/plugin.yaml``, each pinned to a reviewed release) and ends with a command to run.
Everything here reads values a server or a manifest controls: it is printed through
:func:`hostd.cli.render.terminal_safe` by the caller, and the catalog is read from hostd's own files only.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: hostd's catalog of reviewed servers (manifests/README.md): present in a clone, absent from a wheel.
CATALOG = Path(__file__).resolve().parents[2] / "manifests"


@dataclass(frozen=True)
class Release:
    """A server release: the package (``manager`` ``npm`` / ``uv`` / ``deno``; ``""`` for a server known
    only by its ``serverInfo``), its name and exact version."""

    manager: str
    name: str
    version: str

    def shown(self) -> str:
        """``npm package @scope/x 1.2.3``, or ``server x 1.2.3 (as it names itself)``."""
        if not self.manager:
            return f"server {self.name} {self.version}".rstrip() + " (as it names itself)"
        registry = {"npm": "npm", "uv": "PyPI", "deno": "npm (deno)"}.get(self.manager, self.manager)
        return f"{registry} package {self.name} {self.version}".rstrip()


def _name_of(manager: str, spec: str) -> str:
    """The package name of a requested spec (``@scope/x@1.2.3`` -> ``@scope/x``, ``x[e]==1.2`` -> ``x``)."""
    spec = spec.removeprefix("npm:")
    if manager in ("npm", "deno"):
        at = spec.find("@", 1)
        return spec if at < 0 else spec[:at]
    return spec.split("==", 1)[0].split("[", 1)[0].split("@", 1)[0]


def _version_of(manager: str, spec: str) -> str:
    spec = spec.removeprefix("npm:")
    if manager in ("npm", "deno"):
        at = spec.find("@", 1)
        return "" if at < 0 else spec[at + 1 :]
    return spec.split("==", 1)[1] if "==" in spec else ""


def running_release(info: Mapping[str, Any], error: Mapping[str, Any]) -> Release | None:
    """The release that was rejected: the prepared package (``launch.prepare``: the program's package, its
    resolved version) when the launch names one, else the ``serverInfo`` in ``error["server"]``."""
    launch = info.get("launch")
    prepare = launch.get("prepare") if isinstance(launch, Mapping) else None
    if isinstance(prepare, Mapping) and prepare.get("packages"):
        manager = str(prepare.get("manager") or "")
        spec = str(prepare["packages"][0])
        name = _name_of(manager, spec)
        resolved = prepare.get("resolved")
        version = str(resolved.get(name, "")) if isinstance(resolved, Mapping) else ""
        return Release(manager, name, version or _version_of(manager, spec))
    server = error.get("server")
    if isinstance(server, Mapping) and server.get("name"):
        return Release("", str(server["name"]), str(server.get("version") or ""))
    return None


def catalog_release(release: Release, catalog: Path = CATALOG) -> tuple[Release, Path] | None:
    """The release of the same package hostd's catalog pins (and the catalog folder), or ``None`` when the
    catalog has no such package, pins the same version, or is not there (an installed wheel)."""
    # A rejected server's remedy only: not paid by every command that imports this module (issue 28).
    import yaml  # noqa: PLC0415

    from hostd.install.packages import PackageLaunch, PrepareError, parse_package_launch  # noqa: PLC0415

    if not release.manager:
        return None
    for manifest in sorted(catalog.glob("*/plugin.yaml")):
        try:
            backend = (yaml.safe_load(manifest.read_text(encoding="utf-8")) or {}).get("backend") or {}
            launch: PackageLaunch | None = parse_package_launch(
                str(backend.get("command", "")), [str(a) for a in backend.get("args") or []]
            )
        except (OSError, yaml.YAMLError, PrepareError, AttributeError):
            continue
        if launch is None or launch.manager != release.manager or not launch.packages:
            continue
        spec = launch.packages[0]
        if _name_of(launch.manager, spec) == release.name:
            pinned = _version_of(launch.manager, spec)
            if pinned and pinned != release.version:
                return Release(launch.manager, release.name, pinned), manifest.parent
    return None


def _lacks(problems: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the listing lacks, one line per finding: the schemas without ``"type": "object"`` at the root
    as one line naming the tools, then each other problem (at most 5)."""
    untyped = [
        str(p.get("tool"))
        for p in problems
        if p.get("field") in ("inputSchema", "outputSchema") and p.get("pointer") == "/type"
    ]
    lines = []
    if untyped:
        shown = ", ".join(untyped[:8]) + (f" and {len(untyped) - 8} more" if len(untyped) > 8 else "")
        lines.append(
            f"what it lacks: {len(untyped)} of its tools ({shown}) {'sends' if len(untyped) == 1 else 'send'} "
            'a schema without "type": "object" at the root, which the MCP spec requires (hostd does not guess '
            "what such a schema means)"
        )
    others = [p for p in problems if str(p.get("tool")) not in untyped or p.get("pointer") != "/type"]
    for problem in others[:5]:
        lines.append(f"tool {problem.get('tool')!r}, {problem.get('field') or 'tool'}: {problem.get('message')}")
    if len(others) > 5:
        lines.append(f"(and {len(others) - 5} more problems: hostctl logs shows them all)")
    return lines


def rejection_remedy(info: Mapping[str, Any], error: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """``(detail lines, next command)`` for a plugin whose tool listing hostd rejected (``error``: the error's
    data or ``PluginStatus.error``, with ``problems``), or ``([], None)`` for any other failure.

    The lines: the rejected release, what its listing lacks, a release known to work when the catalog pins
    another version of the same package. The command: with such a release, uninstalling the plugin and
    installing the catalog's folder; else disabling it (no retry can help) -- the lines say a fixed release
    imported or installed again replaces it.
    """
    problems = [p for p in error.get("problems") or [] if isinstance(p, Mapping)]
    if not problems:
        return [], None
    plugin_id = shlex.quote(str(info.get("id") or error.get("plugin")))
    release = running_release(info, error)
    lines = [f"rejected: {release.shown()}" if release else "rejected: the server's tool listing", *_lacks(problems)]
    known = catalog_release(release) if release else None
    if known is not None:
        good, folder = known
        lines.append(f"known to work: {good.name} {good.version} (hostd's catalog: {folder})")
        return lines, f"hostctl uninstall {plugin_id}, then hostctl install {shlex.quote(str(folder))}"
    lines.append(
        "a release of the server that sends valid schemas is needed: import or install it again (it replaces "
        f"{plugin_id}); until then no restart can help"
    )
    return lines, f"hostctl disable {plugin_id}"
