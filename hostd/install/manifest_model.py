"""The plugin manifest's model (v1): the pydantic classes and the JSON Schema generated from them.

What lives here: :class:`Manifest` and its parts (:class:`Backend`, :class:`OAuthClient`,
:class:`SandboxNeeds`, :class:`Contributes`, :class:`ConditionalTool`, :class:`UserConfigOption`,
:class:`Origin`), their validators, and :func:`manifest_json_schema` / :func:`manifest_schema_text`
(``manifests/plugin.schema.json``). The shared field helpers are in :mod:`hostd.install.manifest_fields`;
reading a plugin folder's manifest and rendering its errors in :mod:`hostd.install.manifest`, which
re-exports these names (and :mod:`hostd.manifest` re-exports them for a plugin author).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
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

from hostd.install.manifest_fields import (
    HEADER_NAME_PATTERN,
    ID_PATTERN,
    _DeclaredPath,
    _details,
    _duplicates,
    _EnvName,
    _ExecString,
    _keyed,
    _model_config,
    _no_nul,
    _Permission,
    _seconds,
    _secret_reference,
    _transport_errors,
    _unique_list,
)
from hostd.net.allowlist import MAX_ENTRIES, EntryError, parse_entry

__all__ = [
    "SCHEMA_ID",
    "Backend",
    "ClientFeature",
    "ConditionalTool",
    "Contributes",
    "Manifest",
    "NetworkNeeds",
    "OAuthClient",
    "Origin",
    "SandboxNeeds",
    "UserConfigOption",
    "manifest_json_schema",
    "manifest_schema_text",
]

SCHEMA_ID: Final = "urn:hostd:schema:plugin-manifest:v1"
"""The ``$id`` of the generated JSON Schema (a URN: hostd owns no web address to host it at)."""


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
    args: list[_ExecString] = Field(
        default=[],
        description="Arguments passed to the command, verbatim. A secret never belongs here as a value (every "
        "process of the machine reads a command line; SECRET_IN_ARGUMENTS): '${secret:NAME:file}' or "
        "'${user_config.NAME:file}' (a sensitive option) is replaced by the path of a file holding the value, "
        "readable by the plugin only (0600, in its private TMPDIR, written before every start, removed when it "
        "stops), e.g. ['--token-file', '${user_config.api_key:file}'].",
    )
    env: dict[_EnvName, _ExecString] = _keyed(
        "Environment variables set for the server, applied after hostd's allowlist. A value "
        "'${secret:NAME}' is the plugin's secret NAME (plugins/configure), injected only at spawn; "
        "'${secret:NAME:file}' (or '${user_config.NAME:file}') is the path of a 0600 file holding it, as in args."
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


def _host_entry(value: str) -> str:
    # Every entry is attacker input: the allowlist's own grammar checks it (hostd/net/allowlist.py), so the
    # manifest cannot hold an entry the proxy would read another way. The entry is kept as written (the
    # approval digest covers the manifest's bytes; the launch shows the canonical spelling).
    try:
        parse_entry(value)
    except EntryError as exc:
        raise ValueError(str(exc)) from None
    return value


_HostEntry = Annotated[str, Field(min_length=1, max_length=270), AfterValidator(_host_entry)]


class NetworkNeeds(BaseModel):
    """The hosts the server may reach (manifest field ``network``; issue 26, hostd/net/allowlist.py).

    ``hosts``: entries ``name``, ``*.suffix`` (names below the suffix), an IPv4 address or an IPv6 address in
    brackets, each with an optional ``:PORT`` (without one: ports 80 and 443). ``private``: names of ``hosts``
    that may resolve to a loopback, private or link-local address (without it such an answer is refused: DNS
    rebinding). Shown in ``launch.network``, covered by the approval digest; the parent may grant more
    (``plugins/grant networkHosts``). A plugin with a ``network`` field runs without any network but hostd's
    proxy where the kernel allows it (``launch.isolation`` lists ``netproxy``).
    """

    model_config = _model_config("The hosts the server may reach through hostd's proxy, and nothing else.")

    hosts: list[_HostEntry] = Field(
        default=[],
        max_length=MAX_ENTRIES,
        json_schema_extra={"uniqueItems": True},
        description=(
            "Hosts the server may connect to: 'api.example.com', '*.example.com' (names below it), '127.0.0.1', "
            "'[::1]', each with an optional ':PORT' (default: 80 and 443). Names are matched case-insensitively, "
            "without the trailing dot, in their IDNA form."
        ),
    )
    private: list[_HostEntry] = Field(
        default=[],
        max_length=MAX_ENTRIES,
        json_schema_extra={"uniqueItems": True},
        description=(
            "Names (exact or '*.suffix') that may resolve to a loopback, private or link-local address; "
            "any other name resolving there is refused (DNS rebinding)."
        ),
    )

    @field_validator("hosts", "private")
    @classmethod
    def _entries_unique(cls, entries: list[str]) -> list[str]:
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "duplicate_item", "duplicate entry '{value}' (first at index {first})", {"value": v, "first": f}
                ),
                loc=(index,),
                input=v,
            )
            for index, v, f in _duplicates(entries)
        ]
        if errors:
            raise ValidationError.from_exception_data("NetworkNeeds", errors)
        return entries


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
    network: NetworkNeeds | None = Field(
        default=None,
        description=(
            "The hosts the server may reach ({hosts, private}); with it the server has no network but hostd's "
            "proxy, which lets through only these hosts (and those the parent grants). Covered by the approval."
        ),
    )

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
