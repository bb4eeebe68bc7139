"""Wire types of the control protocol (``docs/protocol.md``): request params.

One pydantic model per method's params; :func:`parse_params` turns a
validation failure into ``INVALID_PARAMS`` naming each bad field. Results are
plain JSON built by the host (``PluginInfo``, ``PluginStatus``, ``HostTool``
shapes are documented in ``docs/protocol.md``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hostd.errors import ErrorKind, HostError


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Empty(_Params):
    """``{}``: ``plugins/list``, ``ping``."""


class InstallParams(_Params):
    """``plugins/install {path}``: a plugin folder holding ``plugin.yaml`` or ``plugin.json``."""

    path: str = Field(min_length=1)


class PluginRef(_Params):
    """``{id}``: uninstall, enable, disable, restart, status."""

    id: str = Field(min_length=1)


class Limits(_Params):
    """Per-plugin resource limits set by the parent (``plugins/grant``'s ``limits``)."""

    max_rss_mb: float | None = Field(default=None, alias="maxRssMb", gt=0)
    max_cpu_percent: float | None = Field(default=None, alias="maxCpuPercent", gt=0)
    max_disk_mb: float | None = Field(default=None, alias="maxDiskMb", gt=0)


class GrantParams(_Params):
    """``plugins/grant {id, permissions, networkPorts?, limits?}``: what the user allows (replaces).

    ``networkPorts``: TCP ports, each declared in the manifest's ``backend.tcp_ports``,
    reachable under the strict sandbox. ``limits``: resource limits for this plugin
    (override the host's ``--max-rss-mb`` / ``--max-cpu-percent`` / ``--max-disk-mb``).
    """

    id: str = Field(min_length=1)
    permissions: list[str]
    network_ports: list[int] | None = Field(default=None, alias="networkPorts")
    limits: Limits | None = None


class ApproveParams(_Params):
    """``plugins/approve {id, digest}``: approve the exact launch ``plugins/install`` showed."""

    id: str = Field(min_length=1)
    digest: str = Field(min_length=1)


class ImportParams(_Params):
    """``plugins/import {config}``: an ``mcpServers`` / ``servers`` config, as text (JSON with
    comments allowed) or as an object."""

    config: str | dict[str, Any]


class ToolsListParams(_Params):
    """``tools/list {plugin?}``."""

    plugin: str | None = None


class ToolsCallParams(_Params):
    """``tools/call {name, arguments, timeoutMs?}``; ``name`` is the host name or ``function_name``."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int | None = Field(default=None, alias="timeoutMs", gt=0, le=24 * 3600 * 1000)


P = TypeVar("P", bound=_Params)


def parse_params(model: type[P], params: Any) -> P:
    """Validate ``params`` as ``model``; raise ``INVALID_PARAMS`` listing each bad field."""
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        errors = [
            {"field": ".".join(str(p) for p in item["loc"]) or "params", "message": item["msg"]}
            for item in exc.errors()
        ]
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
        raise HostError(ErrorKind.INVALID_PARAMS, f"invalid params: {summary}", errors=errors) from None
