"""The models that check a server's handshake results: ``initialize`` and ``server/discover``.

Source: the MCP schema, revisions 2025-11-25 (``InitializeResult``,
``ServerCapabilities``, ``Implementation``, ``Icon``) and 2026-07-28
(``DiscoverResult``); the same fields, types and optionality as
``mcp_types``' models of those names, camelCase on the wire, unknown members
allowed (the spec's objects are open). hostd checks only these two results
with models (:mod:`hostd.mcp.session` handles every other message as JSON), so it
keeps its own copies instead of loading ``mcp_types``: importing that package
builds every model of both revisions (~100 ms and ~4 MiB of resident memory,
``docs/performance.md``) for the two used here. ``tests/test_handshake.py``
checks that both accept and refuse the same results.

Loaded in a worker thread at the first plugin start (``PluginLink._discover``),
never on hostd's start path.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

#: Reserved result ``_meta`` key of a 2026-07-28 result: the server's ``Implementation``.
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"


class _Model(BaseModel):
    # By alias only: a snake_case member ("protocol_version") is an unknown member, not the field.
    model_config = ConfigDict(alias_generator=to_camel, validate_by_alias=True, validate_by_name=False, extra="ignore")


class _Capability(_Model):
    """An object capability without fields of its own (``logging``, ``completions``, ``tasks.list``...)."""


class _ListChanged(_Model):
    """``prompts`` / ``tools``: ``{listChanged?: boolean}``."""

    list_changed: bool | None = None


class _Resources(_Model):
    """``resources``: ``{subscribe?: boolean, listChanged?: boolean}``."""

    subscribe: bool | None = None
    list_changed: bool | None = None


class _TasksTools(_Model):
    call: _Capability | None = None


class _TasksRequests(_Model):
    tools: _TasksTools | None = None


class _Tasks(_Model):
    """``tasks`` (2025-11-25 only): ``{list?, cancel?, requests?: {tools?: {call?}}}``."""

    list: _Capability | None = None
    cancel: _Capability | None = None
    requests: _TasksRequests | None = None


class ServerCapabilities(_Model):
    """``ServerCapabilities``: what the server offers; not a closed set."""

    experimental: dict[str, dict[str, Any]] | None = None
    logging: _Capability | None = None
    prompts: _ListChanged | None = None
    resources: _Resources | None = None
    tools: _ListChanged | None = None
    completions: _Capability | None = None
    extensions: dict[str, dict[str, Any]] | None = None
    tasks: _Tasks | None = None


class Icon(_Model):
    """``Icon``: ``{src, mimeType?, sizes?, theme?}``."""

    src: str
    mime_type: str | None = None
    sizes: list[str] | None = None
    theme: Literal["light", "dark"] | None = None


class Implementation(_Model):
    """``Implementation`` (``serverInfo``): ``{name, version, title?, description?, websiteUrl?, icons?}``."""

    name: str
    title: str | None = None
    version: str
    description: str | None = None
    website_url: str | None = None
    icons: list[Icon] | None = None


class _Result(_Model):
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class McpInitializeResult(_Result):
    """The ``initialize`` result (2025-11-25): ``{protocolVersion, capabilities, serverInfo, instructions?}``.

    The MCP schema's ``InitializeResult``; named apart from :class:`hostd.control.models.InitializeResult` (hostd's
    own ``initialize`` answer to its parent): one name, one class in hostd (tests/test_names.py).
    """

    protocol_version: str
    capabilities: ServerCapabilities
    server_info: Implementation
    instructions: str | None = None


class DiscoverResult(_Result):
    """The ``server/discover`` result (2026-07-28): ``{supportedVersions, capabilities, instructions?,
    ttlMs?, cacheScope?, resultType?}``."""

    supported_versions: list[str]
    capabilities: ServerCapabilities
    instructions: str | None = None
    ttl_ms: int = Field(default=0, ge=0)
    cache_scope: Literal["public", "private"] = "private"
    result_type: Literal["complete", "input_required"] | str = "complete"  # open: extensions add tags
