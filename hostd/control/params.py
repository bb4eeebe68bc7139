"""Wire types of the control protocol, part 1: the params the parent sends (``docs/protocol.md``).

One pydantic model per method's params (and per notification the parent sends), on :class:`_Params`
(unknown fields refused); :func:`parse_params` turns a validation failure into ``INVALID_PARAMS`` naming each bad
field. The results and the notifications hostd sends live in :mod:`hostd.control.results`; the method tables and
the re-export of both under one name in :mod:`hostd.control.models` (``from hostd.control import models as p``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from hostd.wire.errors import ErrorKind, HostError


# ``defer_build``: pydantic builds a model's validator and serializer at its first use, not at import.
# hostd imports this module before its first host answer (``plugins/list``); most of these models
# serve one method each (or only the generated docs), so building all of them there cost ~30 ms.
class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


def _no_nul(value: str) -> str:
    # The OS takes NUL-terminated paths: os.open and friends raise ValueError on one (issue 31, class 2).
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


#: A path the parent sends: handed to the OS, so a NUL is refused where it enters.
_OsPath = Annotated[str, AfterValidator(_no_nul)]


def _no_paths() -> list[str]:
    """A new empty list: a field's default factory. Not ``list`` itself: pydantic asks the factory's signature,
    and the signature of the builtin ``list`` is parsed from its text with ``tokenize``, whose regular expressions
    are then compiled (~10 ms of every hostd's start, the first model built; issue 28)."""
    return []


class Empty(_Params):
    """``{}``: ``plugins/list``, ``ping``."""


class InstallParams(_Params):
    """``plugins/install {path} | {serverJson}``: a plugin folder holding ``plugin.yaml`` or ``plugin.json``,
    an MCPB bundle file (``.mcpb`` / ``.dxt``), or an MCP Registry ``server.json`` (object or text)."""

    path: _OsPath | None = Field(default=None, min_length=1)
    server_json: dict[str, Any] | str | None = Field(default=None, alias="serverJson")
    package: int | None = Field(default=None, ge=0, description="which of serverJson's packages (default: 0)")
    adopt_data: bool = Field(
        default=False,
        alias="adoptData",
        description="give this install the data and secrets an uninstalled install of the same id kept, when its "
        "origin (signer, registry name, bundle file or folder) is the same; otherwise it starts with an empty data "
        "folder and no secrets (secrets belong to an install, never to an id)",
    )


class ConfigureParams(_Params):
    """``plugins/configure {id, values}``: set (``null``: unset) the plugin's ``user_config`` values and secrets."""

    id: str = Field(min_length=1)
    values: dict[str, str | int | float | bool | list[str] | None]


class PluginRef(_Params):
    """``{id}``: uninstall, enable, disable, restart, status."""

    id: str = Field(min_length=1)


class PrepareParams(PluginRef):
    """``plugins/prepare {id, allowBuild?}``."""

    allow_build: bool = Field(
        default=False,
        alias="allowBuild",
        description="let a Python package with no wheel for this machine be built from source (its build backend "
        "runs, sandboxed); the approval shows it (`prepare.build`). Without it such a package fails with "
        "`PREPARE_FAILED` reason `source-build-required`",
    )


class AuthCallbackParams(_Params):
    """``auth/callback``: the authorization server's redirect, for a parent that catches it itself."""

    plugin: str = Field(description="the plugin whose authorization waits (`auth/authorize` named it)")
    url: str = Field(description="the full redirect URL (`…?code=…&state=…`), as the browser was sent to it")


class Limits(_Params):
    """Per-plugin resource limits set by the parent (``plugins/grant``'s ``limits``)."""

    max_rss_mb: float | None = Field(default=None, alias="maxRssMb", gt=0)
    max_cpu_percent: float | None = Field(default=None, alias="maxCpuPercent", gt=0)
    max_disk_mb: float | None = Field(default=None, alias="maxDiskMb", gt=0)
    max_tools: int | None = Field(default=None, alias="maxTools", ge=1, le=100_000)
    max_listing_mb: float | None = Field(default=None, alias="maxListingMb", gt=0, le=1024)


class FolderGrants(_Params):
    """``plugins/grant``'s ``folders``: folders this plugin may read, and read and write (absolute or ``~``)."""

    read: list[_OsPath] = Field(default_factory=_no_paths, max_length=64)
    write: list[_OsPath] = Field(default_factory=_no_paths, max_length=64)


class GrantParams(_Params):
    """``plugins/grant {id, permissions, networkPorts?, limits?, folders?}``: what the user allows (replaces).

    ``networkPorts``: TCP ports, each declared in the manifest's ``backend.tcp_ports``,
    reachable under the strict sandbox. ``limits``: resource limits for this plugin
    (override the host's ``--max-rss-mb`` / ``--max-cpu-percent`` / ``--max-disk-mb``).
    ``folders``: ``{read: [], write: []}``, existing folders (or files) granted to this plugin
    only, checked like every sandbox rule, shown in ``launch.folders`` as ``grant.read[i]`` /
    ``grant.write[i]`` and covered by the digest (a change voids the approval). Absent: unchanged.
    ``secretArguments``: ``true`` lets the launch put secrets on its command line (readable by every
    process in ``/proc/<pid>/cmdline``), for a server that takes its secret only as an argument; shown in
    ``launch.secretArguments`` and part of the approval digest. Absent: unchanged.
    ``networkHosts``: network allowlist entries granted on top of the manifest's ``network.hosts``
    (``api.example.com``, ``*.example.com``, ``127.0.0.1:8200``...; replaces the granted ones, ``[]`` revokes
    them all); shown in ``launch.network`` and covered by the digest. Absent: unchanged.
    ``networkCallHosts``: the destinations (``host:port``) let through for good at a ``network/request``
    (``always``), replaced (``[]`` forgets them all; a running plugin keeps its answers until its next start);
    not covered by the digest. Absent: unchanged.
    """

    id: str = Field(min_length=1)
    permissions: list[str]
    network_ports: list[int] | None = Field(default=None, alias="networkPorts")
    limits: Limits | None = None
    folders: FolderGrants | None = None
    secret_arguments: bool | None = Field(default=None, alias="secretArguments")
    network_hosts: list[Annotated[str, Field(max_length=270)]] | None = Field(
        default=None, alias="networkHosts", max_length=256
    )
    network_call_hosts: list[Annotated[str, Field(max_length=270)]] | None = Field(
        default=None, alias="networkCallHosts", max_length=256
    )


class GrantPathParams(_Params):
    """``plugins/grantPath {id, path, access?}``: grant one file or folder for good (a call-time grant).

    The same grant a parent's ``always`` answer to ``grants/request`` makes: recorded, applied at the
    plugin's next start (a tool call that names the path restarts it first), not covered by the digest.
    """

    id: str = Field(min_length=1, description="the plugin's `id`")
    path: str = Field(min_length=1, description="an existing file or folder: absolute, or `~/…`")
    access: Literal["read", "write"] = Field(default="read", description="`read` (default) or `write` (read-write)")


class RevokePathParams(_Params):
    """``plugins/revokePath {id, path}``: take back a call-time grant (``once`` or ``always``)."""

    id: str = Field(min_length=1, description="the plugin's `id`")
    path: str = Field(min_length=1, description="the path as granted (absolute, or `~/…`)")


class ApproveParams(_Params):
    """``plugins/approve {id, digest}``: approve the exact launch ``plugins/install`` showed."""

    id: str = Field(min_length=1)
    digest: str = Field(min_length=1)


class ImportParams(_Params):
    """``plugins/import {config}``: an ``mcpServers`` / ``servers`` config, as text (JSON with
    comments allowed) or as an object."""

    config: str | dict[str, Any]
    #: env names whose values are secrets although their names do not look it (kept in the secret store).
    secret_env: list[str] = Field(default=[], alias="secretEnv")


class ToolsListParams(_Params):
    """``tools/list {plugin?, includeDisabled?, cursor?}``; ``includeDisabled``: list the tools the user disabled
    too (with ``enabled: false``); ``cursor``: the ``nextCursor`` of the previous page (absent: the first page)."""

    plugin: str | None = None
    include_disabled: bool = Field(default=False, alias="includeDisabled")
    cursor: str | None = Field(default=None, max_length=4096)


class ToolSetEnabledParams(_Params):
    """``tools/setEnabled {name, enabled}``: ``name`` is the host name (``<plugin>.<tool>``) or ``function_name``."""

    name: str = Field(min_length=1)
    enabled: bool


class LogsParams(_Params):
    """``plugins/logs {id, limit?}``: the plugin's most recent log lines, at most ``limit`` (default 200)."""

    id: str = Field(min_length=1)
    limit: int = Field(default=200, ge=1, le=1000)


class ToolsCallParams(_Params):
    """``tools/call {name, arguments, timeoutMs?}``; ``name`` is the host name or ``function_name``."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_ms: int | None = Field(default=None, alias="timeoutMs", gt=0, le=24 * 3600 * 1000)


class PluginPageParams(_Params):
    """``resources/list`` and ``resources/templates/list`` ``{plugin, cursor?}``: ``cursor`` is hostd's (the
    ``nextCursor`` of the previous page)."""

    plugin: str = Field(min_length=1)
    cursor: str | None = Field(default=None, max_length=4096)


class ResourceParams(_Params):
    """``resources/read``, ``resources/subscribe``, ``resources/unsubscribe`` ``{plugin, uri}``."""

    plugin: str = Field(min_length=1)
    uri: str = Field(min_length=1)


class PromptsListParams(_Params):
    """``prompts/list {plugin?, cursor?}``: ``cursor`` is hostd's (the ``nextCursor`` of the previous page of
    the plugin's prompts, or of every plugin's without ``plugin``)."""

    plugin: str | None = None
    cursor: str | None = Field(default=None, max_length=4096)


class PromptsGetParams(_Params):
    """``prompts/get {name, arguments?}``; ``name`` is the host name ``<plugin>.<prompt>``."""

    name: str = Field(min_length=1)
    arguments: dict[str, str] | None = None


class CompleteParams(_Params):
    """``completion/complete {plugin, ref, argument, context?}``: MCP's ``ref``
    (``{type: "ref/prompt", name}`` or ``{type: "ref/resource", uri}``), ``argument`` ``{name, value}``."""

    plugin: str = Field(min_length=1)
    ref: dict[str, Any]
    argument: dict[str, str]
    context: dict[str, Any] | None = None


class SetLogLevelParams(_Params):
    """``plugins/setLogLevel {id, level}``: an MCP log level."""

    id: str = Field(min_length=1)
    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


P = TypeVar("P", bound=_Params)


class ClientInfo(_Params):
    """``initialize``'s ``clientInfo``."""

    name: str = Field(default="unknown", description="the parent application's name, for logs")
    version: str = Field(default="", description="its version")


class ContentLimitsParams(_Params):
    """``initialize``'s ``contentLimits``: aggregate bounds on one tool result's rich content."""

    max_images: int | None = Field(default=None, alias="maxImages", description="image items per result")
    max_audio: int | None = Field(default=None, alias="maxAudio", description="audio items per result")
    max_media_bytes: int | None = Field(default=None, alias="maxMediaBytes", description="decoded media bytes")
    max_blob_bytes: int | None = Field(default=None, alias="maxBlobBytes", description="decoded blob bytes")


class OAuthSettings(_Params):
    """``initialize``'s ``oauth``: the application's OAuth client identity, for remote plugins' authorization."""

    client_id_metadata_document: str | None = Field(
        default=None,
        alias="clientIdMetadataDocument",
        description="the https URL where the application publishes its OAuth client ID metadata document "
        "(draft-ietf-oauth-client-id-metadata-document; MCP authorization, 2025-11-25). Where an authorization "
        "server advertises `client_id_metadata_document_supported`, hostd uses this URL as `client_id` instead of "
        "registering; elsewhere it registers dynamically. The document must list hostd's redirect URI "
        "`http://127.0.0.1/callback` (any port, RFC 8252 section 7.3). An https URL with a path other than `/`, "
        "no `.`/`..` segment, fragment, user name or password, at most 2048 characters",
    )


class InitializeParams(_Params):
    """``initialize {clientInfo?, protocolVersion?, knownPermissions?, stateDir?, contentLimits?, capabilities?,
    oauth?}``: the first request; its answer is the readiness signal.

    Documentation only: ``hostd.control.server`` checks them by hand (pydantic is not loaded before the answer).
    """

    client_info: ClientInfo | None = Field(default=None, alias="clientInfo", description="`{name, version}`")
    protocol_version: str | None = Field(default=None, alias="protocolVersion", description='`"0"`')
    known_permissions: list[str] | None = Field(
        default=None, alias="knownPermissions", description="the permissions the parent knows; others are refused"
    )
    state_dir: str | None = Field(default=None, alias="stateDir", description="the state directory to lock")
    content_limits: ContentLimitsParams | None = Field(default=None, alias="contentLimits")
    capabilities: ParentCapabilities | None = Field(
        default=None,
        description="the client features the parent answers for plugins; hostd offers a plugin only what is "
        "here and granted to it ([Requests to the parent](#requests-to-the-parent))",
    )
    oauth: OAuthSettings | None = Field(
        default=None, description="`{clientIdMetadataDocument?}`: the application's OAuth client identity"
    )


class ParentFeature(_Params):
    """One client feature the parent serves: an object whose members name the sub-features (``{}``: none)."""

    model_config = ConfigDict(extra="allow", defer_build=True)


class ParentCapabilities(_Params):
    """``initialize.params.capabilities``: ``{sampling?: {tools?: {}}, elicitation?: {form?: {}, url?: {}},
    roots?: {}, grants?: {}}`` (MCP client capabilities and hostd's consent requests, answered by the parent)."""

    sampling: ParentFeature | None = Field(default=None, description="`{tools?: {}}`: answers `sampling/createMessage`")
    elicitation: ParentFeature | None = Field(
        default=None, description="`{form?: {}, url?: {}}`: answers `elicitation/create`"
    )
    roots: ParentFeature | None = Field(default=None, description="`{}`: answers `roots/list`")
    grants: ParentFeature | None = Field(
        default=None,
        description="`{}`: answers `grants/request`, the user's consent to a file or folder a tool call names "
        "([Call-time grants](#call-time-grants))",
    )
    network: ParentFeature | None = Field(
        default=None,
        description="`{}`: answers `network/request`, the user's consent to a host a plugin's allowlist does not "
        "name (issue 26)",
    )


class CancelParams(_Params):
    """``$/cancelRequest {id}``: cancel the parent's request ``id`` (it is still answered, with -32800)."""

    id: int | str = Field(description="the `id` of the request to cancel")


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
