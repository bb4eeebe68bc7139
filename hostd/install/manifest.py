"""The plugin manifest (v1): its pydantic model, loading from a folder, and its JSON Schema.

Theory of operation
-------------------
A plugin is a folder holding exactly one of ``plugin.yaml``, ``plugin.yml`` or
``plugin.json`` (README.md "Writing a plugin"; the schema is manifests/plugin.schema.json). :func:`load_manifest` reads
that file (bounded, never blocking on a FIFO, never through a symlink or a hard
link: the file must be a regular file of the folder's own, so no error can quote
another file's bytes), parses it, validates it against
:class:`Manifest` and returns the model together with a digest of the exact bytes
read, so the trust gate can show and approve precisely what was installed.

Every way a manifest can be wrong ends in one exception, :class:`ManifestError`
(a :class:`~hostd.wire.errors.HostError` of kind ``MANIFEST_INVALID``), whose
``data`` is ``{"path": str, "errors": [{"field": "backend.command", "message": ...}]}``.
``field`` is the dotted path of the offending value with list indices as numbers
(``"contributes.tools.0"``, ``"permissions.1"``); it is ``""`` for problems with
the file as a whole (missing, unreadable, syntax error, not a mapping), and then
the entry may carry 1-based ``line`` and ``column`` too. All field errors are
reported at once, not just the first.

The model is the single source of truth: ``manifests/plugin.schema.json`` is
generated from it (``python -m hostd.install.manifest``) and a test fails when the file
is stale. Rules the JSON Schema cannot express (every ``contributes.tools`` entry
starts with ``"<id>."``; no duplicates) are enforced by validators on the model.

The module does no I/O at import and imports PyYAML only when a YAML manifest is
read; it is safe on the ``initialize`` path.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import stat
import sys
import threading
from collections.abc import Collection, Iterator
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from hostd.wire.errors import ErrorKind, HostError

if TYPE_CHECKING:
    import yaml

__all__ = [
    "BUNDLE_SUFFIXES",
    "MANIFEST_FILES",
    "MANIFEST_MAX_BYTES",
    "SCHEMA_ID",
    "Backend",
    "ClientFeature",
    "ConditionalTool",
    "Contributes",
    "Manifest",
    "ManifestError",
    "Origin",
    "UserConfigOption",
    "load_manifest",
    "manifest_json_schema",
    "manifest_schema_text",
]

MANIFEST_FILES: Final = ("plugin.yaml", "plugin.yml", "plugin.json")
"""The file names a plugin folder may hold its manifest under; exactly one must exist."""

BUNDLE_SUFFIXES: Final = (".mcpb", ".dxt")
"""File suffixes of an MCPB bundle ``plugins/install`` extracts (hostd/install/bundle.py), not a plugin folder.
Here, not in hostd/install/bundle.py: an install from a folder asks without loading the bundle reader."""

MANIFEST_MAX_BYTES: Final = 256 * 1024
#: How deeply a manifest's values may nest (the top-level mapping is depth 1); deeper is refused
#: before anything recursive (validation, error rendering) touches the value.
MANIFEST_MAX_DEPTH: Final = 32
"""Upper bound on a manifest file's size in bytes (256 KiB); a larger file is rejected unread."""

SCHEMA_ID: Final = "urn:hostd:schema:plugin-manifest:v1"
"""The ``$id`` of the generated JSON Schema (a URN: hostd owns no web address to host it at)."""

SCHEMA_PATH: Final = Path(__file__).resolve().parents[2] / "manifests" / "plugin.schema.json"
"""Where ``python -m hostd.install.manifest`` writes the schema in a source checkout."""

ID_PATTERN: Final = r"^[a-z0-9][a-z0-9-]{0,62}$"
PERMISSION_PATTERN: Final = r"^[a-z0-9][a-z0-9._-]*$"
ENV_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: An HTTP header name (RFC 9110 token characters).
HEADER_NAME_PATTERN: Final = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
#: The transports that reach a server over the network (hostd/remote/endpoint.py); ``stdio`` spawns it.
REMOTE_TRANSPORTS: Final = ("streamable-http", "sse")


def _no_nul(value: str) -> str:
    # execve(2) takes NUL-terminated strings: a NUL would silently cut the value short.
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


_ExecString = Annotated[str, AfterValidator(_no_nul)]
_EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
_Permission = Annotated[str, Field(pattern=PERMISSION_PATTERN)]


def _model_config(schema_description: str) -> ConfigDict:
    # ``strict``: a YAML ``30`` stays a number and ``"30"`` stays a string; nothing is coerced,
    # so ``version: 1.0`` or ``env: {DEBUG: 1}`` is an error that says "quote it", not a guess.
    # The schema description replaces the class docstring, which is written for developers.
    # ``defer_build``: the validator is built at the first manifest loaded (:func:`load_manifest`, in a
    # worker thread), not when hostd imports this module before its first host answer (~10 ms).
    return ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        defer_build=True,
        json_schema_extra={"description": schema_description},
    )


def _seconds(description: str, *, most: float, default: float | None = 30) -> Any:
    """A timeout field of the manifest: finite seconds, over 0 and at most ``most`` (``default`` when absent)."""
    return Field(default=default, gt=0, le=most, allow_inf_nan=False, description=description)


def _unique_list(description: str) -> Any:
    """A list field of the manifest: absent means empty, and no item may stand twice (``uniqueItems``)."""
    return Field(default=[], json_schema_extra={"uniqueItems": True}, description=description)


def _keyed(description: str) -> Any:
    """A mapping field of the manifest: absent means empty; its key type's pattern is the only property
    the schema allows (``additionalProperties: false``)."""
    return Field(default={}, json_schema_extra={"additionalProperties": False}, description=description)


def _secret_reference(value: str) -> str:
    from hostd.remote.endpoint import SECRET_REFERENCE  # noqa: PLC0415 - remote imports this module

    if SECRET_REFERENCE.fullmatch(value) is None:
        raise ValueError("must be a secret reference, '${secret:NAME}': a client secret is never written in a manifest")
    return value


class OAuthClient(BaseModel):
    """How hostd authorizes at a remote server (manifest field ``backend.oauth``; hostd/remote/oauth.py)."""

    model_config = _model_config("OAuth settings of a remote server: a pre-registered client, the scope.")

    client_id: str | None = Field(
        default=None, min_length=1, max_length=512, description="A client id the authorization server issued for hostd."
    )
    client_secret: Annotated[str, AfterValidator(_secret_reference)] | None = Field(
        default=None, description="The pre-registered client's secret, as '${secret:NAME}' (never the value)."
    )
    scope: str | None = Field(
        default=None, min_length=1, max_length=1024, description="The scope to ask for (space-separated)."
    )


class Backend(BaseModel):
    """How hostd starts and talks to the plugin's MCP server (manifest field ``backend``).

    ``transport: stdio`` spawns ``command`` in the sandbox; ``streamable-http`` and
    ``sse`` reach a remote server at ``url`` (hostd/remote/endpoint.py: https only except a
    loopback address, no private or link-local address unless ``allow_private``
    names it; header values may be ``${secret:NAME}`` references). ``command`` is one
    program, never a shell line: a bare name is looked up on the sandbox's PATH and
    a path must resolve inside the plugin folder (checked at enable, not here).
    Timeouts are in seconds. ``stdout_noise`` is the policy for non-JSON-RPC lines
    on the server's stdout (cases A1/A2): ``strict`` fails the start, ``drop`` drops
    them with a rate-limited warning.
    """

    model_config = _model_config("How hostd starts the plugin's MCP server and talks to it.")

    type: Literal["mcp"] = Field(description="The backend kind; only 'mcp' in manifest v1.")
    transport: Literal["stdio", "streamable-http", "sse"] = Field(
        description=(
            "How hostd reaches the server: 'stdio' spawns 'command'; 'streamable-http' (MCP Streamable HTTP) "
            "or 'sse' (the legacy HTTP+SSE transport) reach a remote server at 'url'."
        )
    )
    command: Annotated[str, Field(min_length=1), AfterValidator(_no_nul)] | None = Field(
        default=None,
        description=(
            "The program to run, without a shell: a bare name found on PATH, or a path that "
            "resolves inside the plugin folder. Arguments go in 'args'. Required for 'stdio', refused otherwise."
        ),
    )
    url: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description=(
            "The remote server's endpoint (transport 'streamable-http' or 'sse'): https, or http to a loopback "
            "address only; no user name or password in it. Covered by the approval digest."
        ),
    )
    headers: dict[Annotated[str, Field(pattern=HEADER_NAME_PATTERN)], _ExecString] = _keyed(
        "HTTP headers sent with every request to 'url'. A value may reference a secret as "
        "'${secret:NAME}' (resolved at connect, never stored in the manifest); values are redacted "
        "everywhere. The approval digest covers the header names."
    )
    allow_private: list[Annotated[str, Field(min_length=1, max_length=253)]] = _unique_list(
        "Host names or addresses of 'url' that may resolve to a private or link-local address (a server "
        "on the local network). Without it hostd refuses such addresses. Covered by the approval digest."
    )
    oauth: OAuthClient | None = Field(
        default=None,
        description=(
            "OAuth settings of a remote server that asks for authorization: a pre-registered client "
            "('client_id', 'client_secret' as a ${secret:NAME} reference) and the 'scope' to ask for. "
            "Without it hostd registers itself dynamically. Covered by the approval digest."
        ),
    )
    connect_timeout_seconds: float = _seconds(
        "Seconds allowed to open a connection to a remote server ('url').", most=600
    )
    args: list[_ExecString] = Field(default=[], description="Arguments passed to the command, verbatim.")
    env: dict[_EnvName, _ExecString] = _keyed(
        "Environment variables set for the server, applied after hostd's allowlist. A value "
        "'${secret:NAME}' is the plugin's secret NAME (plugins/configure), injected only at spawn."
    )
    startup_timeout_seconds: float = _seconds(
        "Seconds allowed from spawn to a completed MCP handshake and tool listing.", most=600
    )
    tool_timeout_seconds: float = _seconds("Default seconds a tools/call may take before TOOL_TIMEOUT.", most=3600)
    tool_timeout_reset_on_progress: bool = Field(
        default=False,
        description="Restart a call's timeout whenever the tool reports progress (up to tool_timeout_max_seconds).",
    )
    tool_timeout_max_seconds: float | None = _seconds(
        "Absolute bound of one tools/call when its timeout resets on progress (default: 10x the timeout).",
        most=24 * 3600,
        default=None,
    )
    stdout_noise: Literal["strict", "drop"] = Field(
        default="strict",
        description=(
            "What to do with non-JSON-RPC lines on the server's stdout: 'strict' fails the start, "
            "'drop' drops them with a rate-limited warning."
        ),
    )
    max_message_bytes: int | None = Field(
        default=None,
        ge=1024,
        le=64 * 1024 * 1024,
        description=(
            "Bound of one message from the server, in bytes (1024 to 67108864); default: the host's "
            "(16 MiB). An answer over it fails only the call it answers."
        ),
    )
    protocol: Literal["auto", "legacy", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"] = Field(
        default="auto",
        description=(
            "The MCP protocol era: 'auto' probes server/discover and falls back to initialize "
            "(the outcome is remembered per launch), 'legacy' always uses initialize, an exact "
            "revision fails the start when the server does not speak it."
        ),
    )
    tcp_ports: list[Annotated[int, Field(ge=1, le=65535)]] = _unique_list(
        "TCP ports the server needs to connect to. Under hostd's strict sandbox, only the ports "
        "declared here AND granted by the parent (plugins/grant networkPorts) are reachable."
    )

    @field_validator("command")
    @classmethod
    def _command_is_one_program(cls, command: str | None) -> str | None:
        if command is None:
            return None
        if command.strip() != command or not command.strip():
            raise ValueError("must not be blank or start or end with whitespace")
        if "/" not in command and "\\" not in command and any(ch.isspace() for ch in command):
            raise ValueError(
                f"{command!r} looks like a shell line; hostd never uses a shell: put the program "
                "name in 'command' and each argument in 'args'"
            )
        return command

    @field_validator("url")
    @classmethod
    def _url_is_allowed(cls, url: str | None) -> str | None:
        if url is None:
            return None
        from hostd.remote.endpoint import url_problem  # noqa: PLC0415 - remote imports this module

        problem = url_problem(url)
        if problem is not None:
            raise ValueError(problem)
        return url

    @model_validator(mode="wrap")
    @classmethod
    def _fields_fit_transport(cls, data: Any, handler: ModelWrapValidatorHandler[Backend]) -> Backend:
        # The class: a field that only one kind of backend reads, set on the other kind, would be
        # silently ignored (a reviewer would believe a header is sent to a stdio server, or that a
        # remote server is confined by 'env'). Each such field is refused, by name, together with
        # every other error of the manifest (a wrap validator: it runs even when a field failed).
        extra = _transport_errors(data) if isinstance(data, dict) else []
        try:
            backend = handler(data)
        except ValidationError as exc:
            if not extra:
                raise
            raise ValidationError.from_exception_data(cls.__name__, [*extra, *_details(exc)]) from None
        if extra:
            raise ValidationError.from_exception_data(cls.__name__, extra)
        return backend


def _transport_errors(data: dict[str, Any]) -> list[InitErrorDetails]:
    """What ``backend.transport`` forbids or requires in the raw ``data`` (see Backend._fields_fit_transport)."""
    # A field counts as used when it holds more than its default (a manifest hostd writes back,
    # model_dump, carries every default: ``headers: {}`` on a stdio plugin is not a mistake).
    transport = data.get("transport")
    unset: tuple[object, ...] = (None, [], {}, "strict")
    if transport == "stdio":
        if data.get("command") is None and "command" not in data:
            return [InitErrorDetails(type="missing", loc=("command",), input=data)]
        used: list[str] = [name for name in ("url", "headers", "allow_private", "oauth") if data.get(name) not in unset]
        need = None
    elif transport in REMOTE_TRANSPORTS:
        used = [name for name in ("command", "args", "env", "tcp_ports", "stdout_noise") if data.get(name) not in unset]
        need = None if data.get("url") is not None else "url"
    else:
        return []  # an unknown transport is the field's own error
    errors = [
        InitErrorDetails(
            type=PydanticCustomError("transport_field", "transport '{transport}' does not use '{name}'", ctx),
            loc=(name,),
            input=data[name],
        )
        for name in used
        for ctx in [{"transport": transport, "name": name}]
    ]
    if need is not None:
        errors.append(
            InitErrorDetails(
                type=PydanticCustomError(
                    "transport_field", "transport '{transport}' needs 'url'", {"transport": transport}
                ),
                loc=("url",),
                input=data,
            )
        )
    return errors


def _details(exc: ValidationError) -> list[InitErrorDetails]:
    """``exc``'s errors, re-raisable with their types, locations and messages as they were."""
    out: list[InitErrorDetails] = []
    for err in exc.errors():
        if err["type"] == "value_error":  # _field_error reads the message from ctx["error"]
            out.append(InitErrorDetails(type="value_error", loc=err["loc"], input=err["input"], ctx=err.get("ctx", {})))
        else:
            out.append(
                InitErrorDetails(type=PydanticCustomError(err["type"], err["msg"]), loc=err["loc"], input=err["input"])
            )
    return out


def _declared_path(value: str) -> str:
    # Where a declared need may point: an absolute path or one under the home (``~``, ``${HOME}``)
    # or the plugin's data folder (``${data}``); nothing relative (to what?), no NUL.
    _no_nul(value)
    if not value.startswith(("/", "~/", "${HOME}/", "${data}")) and value not in ("~", "${HOME}"):
        raise ValueError(f"{value!r} must be absolute or start with '~/', '${{HOME}}/' or '${{data}}'")
    return value


_DeclaredPath = Annotated[str, AfterValidator(_declared_path)]


class SandboxNeeds(BaseModel):
    """What the server needs from the filesystem beyond its own folders (manifest field ``sandbox``).

    Paths are absolute or start with ``~/``, ``${HOME}/`` (the user's home) or
    ``${data}`` (the plugin's data folder). They are shown in ``launch.folders``
    (as ``sandbox.read[i]`` / ``sandbox.write[i]``), covered by the approval
    digest and granted only once approved; a path that does not exist is
    skipped; the usual checks refuse what would cover the home or state
    folder or lead through a link a plugin can write.
    """

    model_config = _model_config("Filesystem needs of the server, granted once the user approves the launch.")

    read: list[_DeclaredPath] = Field(
        default=[],
        description="Paths the server reads (e.g. '~/.gitconfig' for git). '~', '${HOME}' and '${data}' are expanded.",
    )
    write: list[_DeclaredPath] = Field(
        default=[],
        description="Paths the server reads and writes (e.g. '${data}/memory'). '~', '${HOME}', '${data}' expanded.",
    )


#: The client features a declared tool may need (``contributes.tools[].needs``): a feature the
#: parent serves and the user granted (``sampling``, ``elicitation``, ``roots``), or one of its
#: sub-features (``sampling.tools``; ``elicitation.form``, ``elicitation.url``).
ClientFeature = Literal["sampling", "sampling.tools", "elicitation", "elicitation.form", "elicitation.url", "roots"]


class ConditionalTool(BaseModel):
    """A declared tool the server lists only when offered client features (manifest entry
    ``contributes.tools[i]`` as an object): ``{name: "<id>.<tool>", needs: ["sampling"]}``.

    Servers such as server-everything register a tool only for a client advertising the
    feature it uses; the tool is expected at enable exactly when every feature in ``needs``
    was offered to the plugin (served by the parent and granted), and must be absent otherwise.
    """

    model_config = _model_config("A declared tool listed only when the plugin is offered these client features.")

    name: str = Field(description="Host tool name '<id>.<MCP tool name>'.")
    needs: list[ClientFeature] = Field(
        min_length=1,
        json_schema_extra={"uniqueItems": True},
        description=(
            "Client features the server lists this tool for; it is expected exactly when all were "
            "offered to the plugin (served by the parent and granted with mcp.sampling / "
            "mcp.elicitation / mcp.roots)."
        ),
    )


#: Union tags of a ``contributes.tools`` entry: they pick the one member an entry is checked
#: against (a string, or an object), so a mistake in an object is reported once, at its own
#: field; :func:`_field_error` leaves them out of field paths.
_TOOL_ENTRY_TAGS: Final = ("tool-name", "tool-object")
_ToolEntry = Annotated[
    Annotated[str, Tag("tool-name")] | Annotated[ConditionalTool, Tag("tool-object")],
    Discriminator(lambda v: "tool-name" if isinstance(v, str) else "tool-object"),
]


class Contributes(BaseModel):
    """What the plugin adds to the host (manifest field ``contributes``).

    ``tools`` lists host tool names, each ``"<plugin id>.<MCP tool name>"``, or
    :class:`ConditionalTool` objects for tools the server lists only when offered client
    features; at enable the server's discovered tool set must equal
    :meth:`expected_tools` exactly (docs/protocol.md, ``plugins/enable`` step 10).
    """

    model_config = _model_config("What the plugin adds to the host.")

    tools: list[_ToolEntry] = _unique_list(
        "Host tool names '<id>.<MCP tool name>', or {name, needs} for a tool the server lists only "
        "when offered the client features in 'needs'; the server's tools must equal the names "
        "whose needs were all offered, exactly."
    )

    @property
    def tool_names(self) -> list[str]:
        """Every declared host tool name, conditional or not, in manifest order."""
        return [t if isinstance(t, str) else t.name for t in self.tools]

    def expected_tools(self, offered: Collection[str]) -> list[str]:
        """The host names the server must list when offered the client features ``offered``
        (names as in :data:`ClientFeature`, see :func:`hostd.mcp.client_features.offered_features`):
        the unconditional tools plus each conditional one whose ``needs`` are all in
        ``offered``, in manifest order."""
        have = set(offered)
        return [t if isinstance(t, str) else t.name for t in self.tools if isinstance(t, str) or have >= set(t.needs)]

    discover: bool = Field(
        default=False,
        description=(
            "Record the tools the server reports at the first enable into this manifest, then ask for "
            "approval again (plugins imported from mcpServers configs, which declare no tools). "
            "Requires an empty 'tools'."
        ),
    )


class UserConfigOption(BaseModel):
    """One setting the user gives at install (manifest field ``user_config.<name>``; from an MCPB
    bundle's ``user_config`` or a registry entry's variables).

    ``${user_config.<name>}`` in ``backend.args`` / ``backend.env`` is replaced by the value
    (set with ``plugins/configure``, else ``default``) when the launch is resolved; a list value
    (``multiple``) given as a whole argument expands into one argument per item. A ``sensitive``
    value is kept in the secret store (hostd/storage/secrets.py) and injected only at spawn, never shown;
    a ``directory`` / ``file`` value is granted (read-write / read-only) like a declared need.
    A ``required`` option without a value blocks enable with ``CONFIG_REQUIRED``.
    """

    model_config = _model_config("A setting the user gives, substituted as ${user_config.<name>}.")

    type: Literal["string", "number", "boolean", "directory", "file"] = Field(description="The value's kind.")
    title: str = Field(default="", description="Display name.")
    description: str = Field(default="", description="Help text.")
    required: bool = Field(default=False, description="Enable is refused until a value is set.")
    default: str | int | float | bool | list[str] | None = Field(
        default=None, description="Used when no value is set; '${HOME}' is expanded."
    )
    multiple: bool = Field(default=False, description="A list of values (directory/file/string).")
    sensitive: bool = Field(default=False, description="A secret: kept in the secret store, never shown.")
    min: float | None = Field(default=None, description="Lower bound of a number.")
    max: float | None = Field(default=None, description="Upper bound of a number.")


class Origin(BaseModel):
    """Where a generated manifest came from (manifest field ``origin``; written by hostd)."""

    model_config = _model_config("Where hostd generated this manifest from (an MCPB bundle, a registry entry).")

    kind: Literal["mcpb", "registry"] = Field(description="'mcpb': a .mcpb/.dxt bundle; 'registry': a server.json.")
    source: str = Field(description="The bundle file or the registry server name.")
    sha256: str | None = Field(default=None, description="SHA-256 (hex) of the bundle file as read.")
    signature: Literal["unsigned", "unverified", "verified"] | None = Field(
        default=None,
        description="The bundle's signature: absent; matching the archive, no trust root configured; its "
        "signer's chain leads to the trust root.",
    )
    signer: str | None = Field(
        default=None, description="A verified bundle's signer: the signing certificate's subject (RFC 4514)."
    )
    runtimes: dict[str, str] | None = Field(
        default=None,
        description="The bundle's compatibility.runtimes (python, node: the version range), checked at install "
        "against the runtime the launch runs.",
    )
    remote: dict[str, Any] | None = Field(
        default=None, description="A registry remote: {type, url, headers} (recorded; served by remote transports)."
    )


class Manifest(BaseModel):
    """A plugin manifest, v1 (README.md "Writing a plugin"; manifests/plugin.schema.json).

    ``id`` is the plugin's stable identity (``^[a-z0-9][a-z0-9-]{0,62}$``; no dot, so
    ``"<id>.<tool>"`` splits unambiguously). ``permissions`` are the capability names
    the plugin asks for; each must be among the parent's ``knownPermissions`` and be
    granted before enable. Cross-field rules (every ``contributes.tools`` entry starts
    with ``"<id>."``; no duplicate permissions or tools) are validated here, with the
    offending list index in the error location.

    Raises:
        pydantic.ValidationError: from ``Manifest.model_validate``; :func:`load_manifest`
            turns it into :class:`ManifestError`.
    """

    model_config = _model_config(
        "plugin.yaml / plugin.json in a hostd plugin folder. Every contributes.tools entry must "
        "start with '<id>.'; the server's discovered tools must equal contributes.tools exactly."
    )

    id: str = Field(pattern=ID_PATTERN, description="Stable plugin identity: lowercase a-z, 0-9 and '-'.")
    name: str = Field(min_length=1, description="Human-readable plugin name.")
    version: str = Field(min_length=1, description="The plugin's version, as a string (quote it in YAML).")
    description: str | None = Field(default=None, description="One paragraph about the plugin.")
    permissions: list[_Permission] = _unique_list(
        "Permissions the plugin needs; each must be known to and granted by the parent."
    )
    contributes: Contributes = Field(description="What the plugin adds to the host.")
    backend: Backend = Field(description="How to start the plugin's MCP server.")
    sandbox: SandboxNeeds = Field(
        default=SandboxNeeds(),
        description="Filesystem needs of the server (read and write), granted once the user approves the launch.",
    )
    user_config: dict[_EnvName, UserConfigOption] = Field(
        default={},
        description="Settings the user gives (plugins/configure), substituted as ${user_config.<name>} in backend.",
    )
    origin: Origin | None = Field(default=None, description="Set by hostd on manifests it generated.")

    @field_validator("permissions")
    @classmethod
    def _permissions_unique(cls, permissions: list[str]) -> list[str]:
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "duplicate_item",
                    "duplicate permission '{value}' (first at index {first})",
                    {"value": value, "first": first},
                ),
                loc=(index,),
                input=value,
            )
            for index, value, first in _duplicates(permissions)
        ]
        if errors:
            raise ValidationError.from_exception_data("Manifest", errors)
        return permissions

    @field_validator("contributes")
    @classmethod
    def _tools_belong_to_plugin(cls, contributes: Contributes, info: ValidationInfo) -> Contributes:
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "duplicate_item",
                    "duplicate tool '{value}' (first at index {first})",
                    {"value": value, "first": first},
                ),
                loc=("tools", index),
                input=value,
            )
            for index, value, first in _duplicates(contributes.tool_names)
        ]
        plugin_id = info.data.get("id")  # absent when ``id`` itself failed validation
        if isinstance(plugin_id, str):
            prefix = f"{plugin_id}."
            for index, tool in enumerate(contributes.tool_names):
                if not tool.startswith(prefix) or tool == prefix:
                    errors.append(
                        InitErrorDetails(
                            type=PydanticCustomError(
                                "tool_prefix",
                                "must be '{prefix}<tool name>' (the plugin id, a dot, the name)",
                                {"prefix": prefix},
                            ),
                            loc=("tools", index),
                            input=tool,
                        )
                    )
        if errors:
            errors.sort(key=lambda e: e["loc"])
            raise ValidationError.from_exception_data("Contributes", errors)
        return contributes


def _duplicates(values: list[str]) -> Iterator[tuple[int, str, int]]:
    """Yield ``(index, value, first_index)`` for every repeat of an earlier value."""
    first: dict[str, int] = {}
    for index, value in enumerate(values):
        if value in first:
            yield index, value, first[value]
        else:
            first[value] = index


class ManifestError(HostError):
    """A missing or invalid manifest: ``HostError`` of kind ``MANIFEST_INVALID``.

    ``data`` is ``{"path": str, "errors": [{"field": str, "message": str, "line"?: int,
    "column"?: int}]}``; ``path`` is the plugin folder for folder-level problems and
    the manifest file otherwise; ``field`` is ``""`` for problems with the whole file.
    """

    def __init__(self, message: str, *, path: Path | str, errors: list[dict[str, Any]]) -> None:
        super().__init__(ErrorKind.MANIFEST_INVALID, message, path=str(path), errors=errors)
        self.errors = errors


def _whole_file_error(path: Path, message: str, **position: int) -> ManifestError:
    return ManifestError(f"{path}: {message}", path=path, errors=[{"field": "", "message": message, **position}])


_BUILD_LOCK = threading.Lock()


def load_manifest(folder: Path) -> tuple[Manifest, str]:
    """Read, parse and validate the manifest in a plugin folder (``plugins/install``).

    Args:
        folder: the plugin folder; it must hold exactly one of :data:`MANIFEST_FILES`.

    Returns:
        ``(manifest, digest)`` where ``digest`` is ``"sha256:<64 hex>"`` over the raw
        bytes of the manifest file exactly as read.

    Raises:
        ManifestError: (``MANIFEST_INVALID``) the folder is missing or not a directory;
            no manifest file, or more than one; the file is a symbolic link (even to a
            file inside the folder), is not a regular file, has more than one hard
            link, is unreadable, larger than :data:`MANIFEST_MAX_BYTES`, not UTF-8, has a YAML or
            JSON syntax error (with 1-based ``line``/``column``) or a duplicate key; the
            top level is not a mapping; or any field is invalid (each field's dotted
            path and reason in ``data.errors``).

    Blocking: reads one small file; call it from a worker thread in async code if the
    folder may be on slow storage.
    """
    folder = Path(folder)
    # Class (issue 9, class 7): every byte an error may quote must come from a file that
    # is inside the plugin folder and belongs to it alone. A manifest that is a symlink
    # (to ~/.aws/credentials, say) would make a YAML/JSON error echo another file's lines
    # to the parent. So: the folder is resolved once (realpath) and opened as a directory;
    # the manifest is looked up and opened relative to that descriptor with O_NOFOLLOW, so
    # neither a symlinked manifest nor a parent swapped after the check can redirect the
    # read; it must be a regular file (no FIFO, device, socket, directory) with exactly
    # one link (a hard link shares its bytes with a name that may be outside the folder)
    # and at most MANIFEST_MAX_BYTES. Symlinks are refused even when they point inside
    # the folder: simpler and stricter than resolving and re-checking.
    root = os.path.realpath(folder)
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _whole_file_error(folder, "plugin folder does not exist") from None
    except NotADirectoryError:
        raise _whole_file_error(folder, "not a directory (give the plugin's folder, not a file)") from None
    except OSError as exc:
        raise _whole_file_error(folder, f"cannot open the plugin folder: {exc.strerror or exc}") from None
    try:
        present = [name for name in MANIFEST_FILES if _lexists(name, dir_fd)]
        if not present:
            raise _whole_file_error(folder, f"no manifest: expected one of {', '.join(MANIFEST_FILES)}")
        if len(present) > 1:
            raise _whole_file_error(folder, f"more than one manifest ({', '.join(present)}); keep exactly one of them")
        path = folder / present[0]
        raw = _read_bounded(path, present[0], dir_fd)
    finally:
        os.close(dir_fd)
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _whole_file_error(path, f"not valid UTF-8 (byte offset {exc.start})") from None
    data = _parse_json(path, text) if path.suffix == ".json" else _parse_yaml(path, text)
    if data is None:
        raise _whole_file_error(path, "the manifest is empty")
    if not isinstance(data, dict):
        raise _whole_file_error(path, f"the top level must be a mapping, not {_kind_of(data)}")
    _check_values(path, data)
    if not Manifest.__pydantic_complete__:
        with _BUILD_LOCK:  # restores load manifests in several worker threads: one builds the validator
            if not Manifest.__pydantic_complete__:
                Manifest.model_rebuild()
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        try:
            errors = [_field_error(err, yaml_source=path.suffix != ".json") for err in exc.errors()]
        except Exception as failure:  # rendering the errors failed: still this manifest's error, never another
            reason = f"its errors cannot be shown: {type(failure).__name__}"
            raise _whole_file_error(path, f"invalid manifest ({reason})") from None
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ManifestError(
            f"{path}: invalid manifest: {first['field'] or '(top level)'}: {first['message']}{more}",
            path=path,
            errors=errors,
        ) from None
    except Exception as failure:  # the class: no document makes load_manifest raise anything but MANIFEST_INVALID
        raise _whole_file_error(path, f"invalid manifest (it cannot be validated: {type(failure).__name__})") from None
    return manifest, digest


def _check_values(path: Path, data: dict[str, Any]) -> None:
    """Refuse what no field may hold, before validation or error rendering touches any value.

    The class (issue 31): text that is not text. A lone surrogate (``"\\ud800"`` in JSON or YAML)
    cannot be encoded, so pydantic failed while *rendering* an error about it (a
    ``UnicodeEncodeError`` out of :func:`load_manifest`, and out of hostd's start and SIGHUP);
    a NUL cannot reach a command, an argument, the environment or a path; nesting deeper than
    :data:`MANIFEST_MAX_DEPTH` is more than any field needs and costs recursion. Each is
    ``MANIFEST_INVALID`` with the field's dotted path (keys and values, checked iteratively);
    the value itself is never quoted.
    """
    stack: list[tuple[Any, tuple[str, ...], int]] = [(data, (), 1)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            _check_text(path, value, where, "")
        elif isinstance(value, dict | list):
            if depth > MANIFEST_MAX_DEPTH:
                field = ".".join(where)
                message = f"nested more than {MANIFEST_MAX_DEPTH} levels deep"
                raise ManifestError(
                    f"{path}: invalid manifest: {field}: {message}",
                    path=path,
                    errors=[{"field": field, "message": message}],
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            children = []
            for key, item in items:
                name = key if isinstance(key, str) else str(key) if isinstance(key, int) else type(key).__name__
                if isinstance(key, str):
                    _check_text(path, key, where, "invalid key: ")
                children.append((item, (*where, name), depth + 1))
            stack += reversed(children)  # the first problem in document order is the one reported


def _check_text(path: Path, text: str, where: tuple[str, ...], what: str) -> None:
    """Raise ``MANIFEST_INVALID`` at ``where`` when ``text`` holds a lone surrogate or a NUL (``what``: a prefix)."""
    problem = None
    if "\x00" in text:
        problem = "must not contain a NUL character"
    else:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            problem = f"must not contain a lone surrogate (U+{ord(text[exc.start]):04X}): it is not text"
    if problem is None:
        return
    field = ".".join(where)
    message = what + problem
    raise ManifestError(
        f"{path}: invalid manifest: {field or '(top level)'}: {message}",
        path=path,
        errors=[{"field": field, "message": message}],
    )


def _lexists(name: str, dir_fd: int) -> bool:
    """``name`` exists in the folder open as ``dir_fd`` (a dangling symlink counts)."""
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # exists but cannot be examined: opening it reports why
    return True


def _read_bounded(path: Path, name: str, dir_fd: int) -> bytes:
    """The bytes of ``name`` in the folder ``dir_fd``, at most ``MANIFEST_MAX_BYTES + 1`` read.

    ``path`` is only for messages. Refuses a symlink, anything but a regular file, a file
    with more than one hard link, and (after reading) one larger than the bound.
    """
    symlink = (
        f"is a symbolic link; the manifest must be a regular file inside the plugin folder "
        f"(symlinks are refused, even to a file inside it): replace {name} with the file itself"
    )
    try:
        if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
            raise _whole_file_error(path, symlink)
    except OSError as exc:
        raise _whole_file_error(path, f"cannot read: {exc.strerror or exc}") from None
    # O_NOFOLLOW: a symlink swapped in after the lstat fails with ELOOP instead of being
    # followed. O_NONBLOCK: opening a FIFO planted under the manifest's name must not hang
    # install; the regular-file check then rejects it (and directories, devices, sockets).
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _whole_file_error(path, symlink) from None
        raise _whole_file_error(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _whole_file_error(path, "not a regular file")
        if info.st_nlink > 1:
            raise _whole_file_error(
                path,
                f"has {info.st_nlink} hard links; the manifest must be a file of its own inside the "
                f"plugin folder (its other names may be outside it): replace {name} with a copy",
            )
        if info.st_size > MANIFEST_MAX_BYTES:
            raise _whole_file_error(path, f"larger than {MANIFEST_MAX_BYTES} bytes (256 KiB)")
        chunks: list[bytes] = []
        size = 0
        while size <= MANIFEST_MAX_BYTES:
            chunk = os.read(fd, MANIFEST_MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _whole_file_error(path, f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > MANIFEST_MAX_BYTES:
        raise _whole_file_error(path, f"larger than {MANIFEST_MAX_BYTES} bytes (256 KiB)")
    return b"".join(chunks)


def _parse_json(path: Path, text: str) -> Any:
    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise _whole_file_error(path, f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise _whole_file_error(
            path,
            f"JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except RecursionError:
        raise _whole_file_error(path, "nested too deeply") from None


def _parse_yaml(path: Path, text: str) -> Any:
    import yaml  # noqa: PLC0415 - lazy: only YAML manifests pay for PyYAML

    try:
        return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context:
            # e.g. "did not find expected ',' or '}' (while parsing a flow mapping at line 4, column 14)"
            where = exc.context_mark
            started = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
            reason = f"{exc.problem} ({exc.context}{started})"
        if mark is None:
            raise _whole_file_error(path, f"YAML syntax error: {reason}") from None
        line, column = mark.line + 1, mark.column + 1
        raise _whole_file_error(
            path, f"YAML syntax error at line {line}, column {column}: {reason}", line=line, column=column
        ) from None
    except yaml.YAMLError as exc:
        raise _whole_file_error(path, f"YAML error: {exc}") from None
    except RecursionError:
        raise _whole_file_error(path, "nested too deeply") from None


_YAML_LOADER: type[yaml.SafeLoader] | None = None


def _yaml_loader() -> type[yaml.SafeLoader]:
    """A SafeLoader (libyaml-backed when available) that rejects duplicate mapping keys.

    Plain PyYAML keeps the last of two equal keys silently; in a manifest that would
    let a second ``command:`` hide below the first one a reviewer reads.
    """
    global _YAML_LOADER  # noqa: PLW0603 - a lazily built, immutable class
    if _YAML_LOADER is not None:
        return _YAML_LOADER
    import yaml  # noqa: PLC0415

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = cast("type[yaml.SafeLoader]", type("_ManifestLoader", (base,), {}))

    def construct_map(self: yaml.SafeLoader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key; SafeConstructor reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
        yield from self.construct_yaml_map(node)

    loader.add_constructor("tag:yaml.org,2002:map", construct_map)
    _YAML_LOADER = loader
    return loader


def _kind_of(value: Any) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    if isinstance(value, date):
        return "a date"
    return names.get(type(value), f"a {type(value).__name__}")


_RULES: Final = {
    "id": f"must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit ({ID_PATTERN})",
    "permissions": f"must be lowercase a-z, 0-9, '.', '_' and '-', starting with a letter or digit "
    f"({PERMISSION_PATTERN})",
    "backend.env": f"must be an environment variable name ({ENV_NAME_PATTERN})",
    "backend.headers": f"must be an HTTP header name ({HEADER_NAME_PATTERN})",
}

_MODELS_AT: Final[dict[tuple[str, ...], type[BaseModel]]] = {
    (): Manifest,
    ("backend",): Backend,
    ("backend", "oauth"): OAuthClient,
    ("contributes",): Contributes,
}


def _field_error(err: Any, *, yaml_source: bool) -> dict[str, Any]:
    """Turn one pydantic error into ``{"field": "a.b.0", "message": ...}``."""
    loc: tuple[int | str, ...] = err["loc"]
    is_key = "[key]" in loc
    parts = [str(part) for part in loc if part != "[key]" and part not in _TOOL_ENTRY_TAGS]
    field = ".".join(parts)
    kind: str = err["type"]
    message: str = err["msg"]
    if kind == "extra_forbidden":
        name = parts[-1] if parts else ""
        message = f"unknown field {name!r}"
        model = _MODELS_AT.get(tuple(parts[:-1]))
        if model is not None:
            close = difflib.get_close_matches(name, list(model.model_fields), n=1)
            message += f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(model.model_fields)}"
    elif kind == "missing":
        message = "required field is missing"
    elif kind == "value_error":
        message = str(err.get("ctx", {}).get("error", message))
    elif kind == "string_pattern_mismatch":
        rule_key = "permissions" if parts[:1] == ["permissions"] else ".".join(parts[:2]) if is_key else field
        message = _RULES.get(rule_key, message)
    elif kind == "string_type" and yaml_source and isinstance(err.get("input"), bool | int | float | date):
        # YAML's implicit typing: ``version: 1.0``, ``name: yes``, ``version: 2024-01-01``.
        value = err["input"]
        shown = value.isoformat() if isinstance(value, date) else json.dumps(value)
        message += f" (YAML read {shown} as {_kind_of(value)}; quote it)"
    if is_key:
        message = f"invalid key: {message}"
    return {"field": field, "message": message}


def manifest_json_schema() -> dict[str, Any]:
    """The manifest's JSON Schema (draft 2020-12), generated from :class:`Manifest`.

    Returns ``Manifest.model_json_schema()`` with ``$schema``, ``$id`` (:data:`SCHEMA_ID`)
    and ``title`` added. Rules only the model enforces (tool prefixes) are described
    in the field descriptions.
    """
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "hostd plugin manifest (v1)"
    return schema


def manifest_schema_text() -> str:
    """The exact text of ``manifests/plugin.schema.json``: sorted keys, indent 2, trailing newline."""
    return json.dumps(manifest_json_schema(), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _main(argv: list[str]) -> int:
    """``python -m hostd.install.manifest [--check] [PATH]``: write (or check) the generated schema file."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="python -m hostd.install.manifest", description="Generate manifests/plugin.schema.json from the model."
    )
    parser.add_argument("path", nargs="?", type=Path, default=SCHEMA_PATH, help="output file")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is missing or stale")
    args = parser.parse_args(argv)
    text = manifest_schema_text()
    target: Path = args.path
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            print(f"{target} is stale; regenerate it with: python -m hostd.install.manifest", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
