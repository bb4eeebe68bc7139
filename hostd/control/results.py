"""Wire types of the control protocol, part 2: what hostd sends (``docs/protocol.md``).

One model per result and per shared wire type (:class:`PluginInfo`, :class:`Launch`, :class:`PluginStatus`,
:class:`HostTool`...) and per params of a notification or request hostd sends the parent, on :class:`Wire`:
handlers build the model and send :meth:`Wire.wire`. The params the parent sends live in
:mod:`hostd.control.params`; the method tables and the re-export of both in :mod:`hostd.control.models`.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)


class Wire(BaseModel):
    """Base of every result type: unknown fields refused, ``omit_none`` fields dropped when ``None``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    #: Field names left out of the wire form when their value is ``None`` (others are sent as ``null``).
    omit_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _drop_omitted(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        data = handler(self)
        if self.omit_none and isinstance(data, dict):
            fields = type(self).model_fields
            for name in self.omit_none:
                if getattr(self, name) is None:
                    alias = fields[name].alias
                    data.pop(alias if info.by_alias and alias is not None else name, None)
        return data

    def wire(self) -> dict[str, Any]:
        """The JSON object hostd sends: aliases, JSON types, ``omit_none`` fields dropped when ``None``."""
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


class InitializeServerInfo(Wire):
    """``serverInfo`` of the ``initialize`` result."""

    name: Literal["hostd"] = Field(description='`"hostd"`')
    version: str = Field(description="hostd's version (`0.1.0`)")


class PluginCapabilities(Wire):
    install: bool = Field(description="`true`: `plugins/install` and `plugins/import` are served")
    trust_gate: bool = Field(
        alias="trustGate", description="`true`: `plugins/approve` is required ([Trust gate](#trust-gate))"
    )


class ToolCapabilities(Wire):
    list_changed: bool = Field(alias="listChanged", description="`true`: `tools/listChanged` is sent")
    progress: bool = Field(description="`true`: `$/progress` is sent")


class Capabilities(Wire):
    """``capabilities`` of the ``initialize`` result."""

    plugins: PluginCapabilities = Field(description="`{install: true, trustGate: true}`")
    tools: ToolCapabilities = Field(description="`{listChanged: true, progress: true}`")
    cancel_request: bool = Field(alias="cancelRequest", description="`true`: `$/cancelRequest` is honoured")


class ContentLimitsWire(Wire):
    """``contentLimits``: aggregate bounds on one tool result's rich content (``hostd.wire.content``)."""

    max_images: int = Field(alias="maxImages", description="image items per result (default 16)")
    max_audio: int = Field(alias="maxAudio", description="audio items per result (default 4)")
    max_media_bytes: int = Field(
        alias="maxMediaBytes", description="decoded bytes of images and audio together (default 8388608)"
    )
    max_blob_bytes: int = Field(
        alias="maxBlobBytes", description="decoded bytes of embedded resource blobs (default 8388608)"
    )


class InitializeResult(Wire):
    """``initialize`` result. Built by ``hostd.control.server`` before pydantic is imported (readiness);
    the live examples check that shape against this model."""

    server_info: InitializeServerInfo = Field(alias="serverInfo", description='`{name: "hostd", version}`')
    protocol_version: str = Field(
        alias="protocolVersion", description='`"0"`, whatever the parent sent: compare it with what you speak'
    )
    capabilities: Capabilities = Field(
        description="`{plugins: {install: true, trustGate: true}, tools: {listChanged: true, progress: true}, "
        "cancelRequest: true}`"
    )
    content_limits: ContentLimitsWire = Field(
        alias="contentLimits",
        description="the aggregate bounds on each tool result's rich content now in force (the parent's "
        "`contentLimits`, defaults filled in)",
    )


class Preparation(Wire):
    """``Launch.prepare``: the install-time preparation of a launch that names a package.

    npx, uvx, uv run --with, deno run / deno x of an npm: or jsr: module.
    """

    omit_none: ClassVar[frozenset[str]] = frozenset({"resolved", "lockfile", "root", "registry", "unpinned", "build"})

    state: Literal["needed", "prepared"] = Field(
        description="`needed`: `plugins/prepare` must run before enable; `prepared`: the launch runs from `root`"
    )
    manager: Literal["npm", "uv", "deno"] = Field(description="the package tool whose registry the packages come from")
    packages: list[str] = Field(
        description="the packages as the launch names them, the one providing the program first"
    )
    resolved: dict[str, str] | None = Field(
        default=None, description="package → the exact version installed (an unpinned request is resolved here)"
    )
    lockfile: str | None = Field(
        default=None,
        description="`sha256:…` of the environment's lock (every package installed; covered by the digest)",
    )
    root: str | None = Field(default=None, description="the prepared environment folder (read-only to the plugin)")
    registry: str | None = Field(default=None, description="the registry or index the packages came from")
    unpinned: list[str] | None = Field(
        default=None,
        description="the requested packages that named no exact version: the installer resolved them (to the "
        "versions in `resolved`), and the approval shows that it did",
    )
    build: bool | None = Field(
        default=None, description="`true`: source builds were allowed (`plugins/prepare {allowBuild}`)"
    )


class RemoteEndpoint(Wire):
    """``Launch.remote``: the endpoint of a remote plugin, everything its launch digest covers."""

    transport: Literal["streamable-http", "sse"] = Field(description="`streamable-http` or `sse` (legacy HTTP+SSE)")
    url: str = Field(description="the server's endpoint")
    headers: dict[str, str | None] = Field(
        description="the headers hostd sends: name → value, or `null` when the value is a `${secret:NAME}` "
        "reference or the name looks secret (`Authorization`, `*-Token`…); the digest covers names and literal values"
    )
    allow_private: list[str] = Field(
        alias="allowPrivate", description="hosts that may resolve to a private or link-local address"
    )
    protocol: str = Field(description="`auto`, `legacy` or a pinned modern version")
    oauth: dict[str, str] | None = Field(
        description="`backend.oauth`: `{clientId?, clientSecret?, scope?}` (the secret as its `${secret:NAME}` "
        "reference), or `null`"
    )


class FolderCapability(Wire):
    """One file or folder a plugin may reach (``launch.capabilities.folders``)."""

    path: str = Field(description="the real path")
    access: Literal["read", "write"] = Field(description="`read` (and execute), or `write` (read-write)")
    why: Literal["argument", "env", "declared", "parent grant", "call-time grant", "private home"] = Field(
        description="an argument names it, an env value names it, the manifest's `sandbox` declares it, the "
        "parent granted it ([`plugins/grant`](#pluginsgrant)), the user granted it at a tool call "
        "([Call-time grants](#call-time-grants)), or it is the plugin's private `HOME` (its own `~/.toolname`, "
        "`~/.config/...` writes land there, kept until uninstall; nothing of the user's `HOME` is in it but "
        "links to what is granted here)"
    )
    source: str = Field(
        description="the argument as written, `$NAME`, the grant's label (`sandbox.read[0]`, `grant.write[1]`), "
        "for a call-time grant `once` / `always`, for the private home `HOME`"
    )


class NetworkCapability(Wire):
    """What network a plugin may reach (``launch.capabilities.network``)."""

    access: Literal["all", "none", "ports", "hosts"] = Field(
        description="`all` (the sandbox allows the network), `none` (`--sandbox strict`, no port granted), "
        "`ports` (strict, TCP connect to `tcpPorts` only), or `hosts` (the plugin's allowlist, enforced: its own "
        "network namespace, hostd's proxy its only way out: through `HTTP(S)_PROXY`, and transparently for clients "
        "that ignore those variables, by name on ports 80, 443 and the allowlist's own; for a remote server, the "
        "hosts hostd sends its requests to)"
    )
    tcp_ports: list[int] = Field(alias="tcpPorts", description="the TCP ports it may connect to under `ports`")
    hosts: list[str] | None = Field(
        default=None,
        description="the plugin's allowlist (`launch.network.hosts`); absent for a plugin without one",
    )
    filtering: str | None = Field(
        default=None,
        description="for a plugin with an allowlist: `enforced`, or why it is not (the kernel offers no "
        "unprivileged network and pid namespaces, or `--sandbox basic`): the plugin then has the level's network "
        "(`access`), all or nothing as before",
    )

    omit_none: ClassVar[frozenset[str]] = frozenset({"hosts", "filtering"})


class SecretCapability(Wire):
    """A secret a plugin receives, by name and channel (``launch.capabilities.secrets``); never its value."""

    name: str = Field(description="the secret's name (`${secret:NAME}`, or a sensitive `user_config` option)")
    channel: Literal["env", "argv", "header", "file"] = Field(
        description="how it travels: an environment variable, a command-line argument (readable by other "
        "processes of the machine), an HTTP header to a remote server, or a file readable by the plugin only "
        "(`0600`, in its private TMPDIR, removed when it stops; `${user_config.NAME:file}` / "
        "`${secret:NAME:file}` in `args` or `env`, which hold only its path)"
    )
    set: bool = Field(description="whether a value is stored")


class PackageCapability(Wire):
    """A package the plugin's launch runs (``launch.capabilities.packages``)."""

    manager: str = Field(description="`npm`, `uv` or `deno`")
    name: str = Field(description="the package's name (prepared), or the spec still to prepare")
    version: str | None = Field(description="the exact version installed; `null` until prepared")
    registry: str | None = Field(description="where it came from; `null` for the default or until prepared")


class CapabilitySet(Wire):
    """``launch.capabilities``: everything the plugin may reach, in one list, for the approval."""

    folders: list[FolderCapability] = Field(description="files and folders, with access and why")
    network: NetworkCapability = Field(description="the network it may reach")
    env: list[str] = Field(description="the names of its environment variables, sorted")
    secrets: list[SecretCapability] = Field(description="the secrets it receives, by name and channel")
    packages: list[PackageCapability] = Field(description="the packages its launch runs")


class ShimNote(Wire):
    """``Launch.shim``: the command found on ``PATH`` is a version manager's shim (hostd/install/shims.py)."""

    omit_none: ClassVar[frozenset[str]] = frozenset({"resolved", "version", "source", "reason"})

    manager: str = Field(description="`pyenv`, `rbenv`, `nodenv`, `asdf`, `mise`, `volta` or `nvm`")
    shim: str = Field(
        description="the shim as found on `PATH`; for nvm, which has none (its `node` is on `PATH` only in a shell "
        "that loaded it), its `nvm.sh`"
    )
    resolved: str | None = Field(
        default=None,
        description="the real program the manager picks, read from its version files (hostd runs this: it is "
        "`executable`); omitted when it cannot be read safely (then the launch runs the shim, which likely fails)",
    )
    version: str | None = Field(default=None, description="the version picked")
    source: str | None = Field(default=None, description="the file or variable it was picked from")
    message: str = Field(description="what it means, for people (with the fix when `resolved` is absent)")
    reason: str | None = Field(
        default=None,
        description="when `resolved` is absent: why hostd did not follow the manager's choice (no version set, "
        "`system`, a version not installed, one that is no folder name or leads out of the manager's folder)",
    )


class Accounting(Wire):
    """``Launch.accounting``: the mechanism that bounds a plugin tree here (sandbox/cgroups.py)."""

    memory: Literal["cgroup-v2", "cgroup-v1", "watchdog"] = Field(
        description="what bounds memory (`limits.maxRssMb`) and processes: `cgroup-v2` or `cgroup-v1` (the tree "
        "runs in a cgroup of its own: the kernel charges anonymous memory, shared memory, memfd and page cache, "
        "and bounds the tasks; an OOM kill or a refused fork stops the plugin with `limit` `rss` / `pids`), or "
        "`watchdog` (hostd samples the tree: RSS plus the memfd and shared-memory files it holds, each once; "
        "no process bound)"
    )
    reason: str = Field(description="why this mechanism: what was found, or what was missing")
    cpu: str = Field(
        description="how the plugin's CPU share is set: `cpu.weight` (v2), `cpu.shares` (v1), or `none: <why>`; "
        "`limits.maxCpuPercent` is the watchdog's in every case"
    )
    disk: str = Field(description="what bounds the data folder and `TMPDIR` (`limits.maxDiskMb`)")


class NetworkAllowlist(Wire):
    """``Launch.network``: a plugin's network allowlist (manifest field ``network``; issue 26)."""

    hosts: list[str] = Field(
        description="entries in their canonical spelling, sorted: `name`, `*.suffix` (names below it), an address "
        "(`127.0.0.1`, `[::1]`), each with `:PORT` or, without one, ports 80 and 443"
    )
    private: list[str] = Field(
        description="names that may resolve to loopback, private or link-local addresses (any other name "
        "resolving there is refused)"
    )


class Launch(Wire):
    """``PluginInfo.launch``: what will run, for the approval prompt; everything the digest covers.

    Built from ``sandbox.launch.Launch.describe()`` (which stays a dict: the sandbox
    package does not import hostd) plus the approval fields.
    """

    command: str = Field(description="the command as the manifest wrote it (also `argv[0]`)")
    executable: str = Field(description="the absolute file that will be executed")
    runtime: list[str] = Field(
        description="the real paths of what runs: the executable, then each `#!` interpreter behind it "
        "(covered by the digest)"
    )
    args: list[str] = Field(description="the arguments, passed as they are (there is never a shell)")
    files: dict[str, str] = Field(
        description="real path → `sha256:…` of the content that runs: the executable when it is a script or "
        "lies in the plugin folder, and every file in the plugin folder an argument names (covered by the "
        "digest: changing one voids the approval)"
    )
    folders: dict[str, str] = Field(
        description="argument → the real path it leads to, for every argument naming a folder or a file "
        "outside the plugin folder (covered by the digest: a folder swapped for a link voids the approval); "
        "`call.read[i]` / `call.write[i]`: files and folders granted at a tool call "
        "([Call-time grants](#call-time-grants)), recorded grants the digest does not cover"
    )
    cwd: str = Field(description="the working directory: the plugin folder")
    env_keys: list[str] = Field(
        alias="envKeys", description="the names of all the environment variables the plugin gets, sorted"
    )
    env: dict[str, str | None] = Field(
        description="the manifest's `env`: name → value, or `null` for a name that looks secret (`TOKEN`, "
        "`KEY`, `PASS`...), whose value the digest still covers"
    )
    isolation: list[str] = Field(
        description="the isolation layers that will be in force, in a fixed order: `shim`, `rlimits`, "
        "`no_new_privs`, `landlock-fs`, `landlock-net`, `landlock-scope`, `netns` (or `userns`), `netproxy` (the "
        "allowlist's proxy is the only way out), `pidns`, `private-proc` (the plugin's own `/proc`), `seccomp`, "
        "`seccomp-net` ([What a plugin sees](#what-a-plugin-sees)); which ones depends on `--sandbox` and on "
        "what the kernel offers"
    )
    digest: str = Field(
        description="**the digest to approve**: `sha256:…` over the launch and the manifest's exact bytes"
    )
    launch_digest: str = Field(alias="launchDigest", description="the launch's own digest (without the manifest)")
    approved: bool = Field(description="`digest` is the approved one")
    prepare: Preparation | None = Field(
        default=None,
        description="present when the manifest's launch names a package: whether it is prepared, and what was "
        "installed; a prepared launch runs the environment's program (`command`, `args` above), not the package tool",
    )
    remote: RemoteEndpoint | None = Field(
        default=None,
        description="for a remote plugin (`backend.transport` `streamable-http` or `sse`) what the user approves "
        "instead of a program: `command` is then the transport, `executable` the URL; absent for stdio plugins",
    )
    capabilities: CapabilitySet | None = Field(
        default=None,
        description="everything the plugin may reach, in one list: files and folders (access and why), network, "
        "environment names, secrets (name and channel), packages ([`CapabilitySet`](#capabilityset))",
    )

    shim: ShimNote | None = Field(
        default=None,
        description="[`ShimNote`](#shimnote): the manifest's command is a version manager's shim (pyenv, asdf, "
        "volta...), which hostd runs without the shell's setup; omitted otherwise",
    )

    secret_arguments: list[str] | None = Field(
        default=None,
        alias="secretArguments",
        description="present when the arguments hold secrets (`${secret:NAME}`, a `sensitive` bundle option): "
        "their names, sorted; such a launch starts only after `plugins/grant` `secretArguments: true`, since every "
        "process of the machine reads a command line",
    )

    accounting: Accounting | None = Field(
        default=None,
        description="[`Accounting`](#accounting): what bounds the plugin tree's memory, processes, CPU share "
        "and disk on this machine, and why; absent for a remote plugin",
    )

    network: NetworkAllowlist | None = Field(
        default=None,
        description="[`NetworkAllowlist`](#networkallowlist): the hosts the plugin may reach through hostd's proxy "
        "(the manifest's `network` and the parent's `networkHosts` grants), covered by the digest; absent for a "
        "plugin without an allowlist",
    )

    omit_none: ClassVar[frozenset[str]] = frozenset(
        {"prepare", "remote", "capabilities", "secret_arguments", "shim", "accounting", "network"}
    )


class LaunchUnresolved(Wire):
    """``PluginInfo.launch`` when the command cannot be resolved."""

    error: str = Field(description="why, for people (names the command and the `PATH` searched)")
    kind: str = Field(
        description="`COMMAND_NOT_FOUND`, `COMMAND_OUTSIDE_PLUGIN`, `ENV_POLICY`, `ISOLATION_UNAVAILABLE`, "
        "`PATH_REFUSED` or `EXEC_FAILED` (below)"
    )
    shim: ShimNote | None = Field(
        default=None,
        description="[`ShimNote`](#shimnote): the command is on no `PATH` hostd has, but nvm is installed and its "
        "`default` alias could not be followed (the note says why and gives the fix); omitted otherwise",
    )

    omit_none: ClassVar[frozenset[str]] = frozenset({"shim"})


class GrantedLimits(Wire):
    """``PluginInfo.limits``: the limits granted to this plugin; ``null`` members: the host's apply."""

    max_rss_mb: float | None = Field(
        alias="maxRssMb", description="resident memory of the whole tree, MiB (`--max-rss-mb`)"
    )
    max_cpu_percent: float | None = Field(
        alias="maxCpuPercent", description="CPU of the whole tree, percent of one core over 30 s (`--max-cpu-percent`)"
    )
    max_disk_mb: float | None = Field(
        alias="maxDiskMb", description="MiB allocated beneath the data folder and `TMPDIR` (`--max-disk-mb`)"
    )
    max_tools: int | None = Field(
        default=None,
        alias="maxTools",
        description="tools (likewise prompts, resources, resource templates) the plugin may list "
        "(`LISTING_TOO_LARGE`; default 1024)",
    )
    max_listing_mb: float | None = Field(
        default=None,
        alias="maxListingMb",
        description="MiB of one listing of the plugin, as compact JSON (`LISTING_TOO_LARGE`; default 16)",
    )


class ConfigItem(Wire):
    """One setting of a plugin (`PluginInfo.userConfig`): a bundle's `user_config` option, a registry
    entry's variable, or a secret its manifest refers to as `${secret:NAME}`."""

    name: str = Field(description="the name `plugins/configure` takes")
    type: str = Field(description="`string`, `number`, `boolean`, `directory` or `file`")
    title: str = Field(description="display name")
    description: str = Field(description="help text")
    required: bool = Field(description="`true`: enable fails with `CONFIG_REQUIRED` until it is set")
    sensitive: bool = Field(description="`true`: a secret, kept in the secret store; its value is never shown")
    multiple: bool = Field(description="`true`: the value is a list")
    set: bool = Field(description="a value is set (or, for a non-secret, a default applies)")
    value: Any = Field(description="the current value of a non-secret (or its default); `null` for a secret")


class PackageVersion(Wire):
    """``PluginInfo.package``: the registry package a launch runs (npx, uvx, deno) and its version."""

    omit_none: ClassVar[frozenset[str]] = frozenset({"version"})

    manager: Literal["npm", "uv", "deno"] = Field(description="the package tool whose registry the package comes from")
    name: str = Field(description="the package that provides the program, as the registry names it")
    version: str | None = Field(
        default=None,
        description="the exact version: the one prepared (`launch.prepare.resolved`), else the one the launch pins; "
        "omitted while an unpinned launch is not yet prepared",
    )
    pinned: bool = Field(
        description="the launch names an exact version; `false`: the registry's current version at preparation "
        "was taken (the config did not pin one)"
    )


class PluginInfo(Wire):
    """What is installed and what the user decided. Returned by `plugins/install`, `plugins/grant`,
    `plugins/approve`, `plugins/configure` and `plugins/list`."""

    omit_none = frozenset(
        {
            "user_config",
            "origin",
            "error",
            "package",
            "network_hosts",
            "network_call_hosts",
            "disabled_tools",
            "imported",
            "server_info",
            "pinned_tools",
        }
    )

    id: str = Field(description="the manifest's `id`: stable identity, `^[a-z0-9][a-z0-9-]{0,62}$`")
    name: str = Field(description="human-readable name")
    version: str = Field(description="the plugin's version")
    path: str = Field(description="the plugin folder, absolute")
    permissions: list[str] = Field(description="the permissions the manifest declares, in its order")
    granted: list[str] = Field(description="the granted ones, sorted")
    enabled: bool = Field(
        description="the user wants it running: set by `enable` (once its checks pass), cleared by `disable` "
        "(and by a cancelled `enable` or `restart`); restored on the next start"
    )
    status: str = Field(
        description="the current state, as in `PluginStatus.status`; `broken` when its stored files no longer load "
        "(then `name` is the id, `version` is empty, `permissions`, `tools` and `launch` are empty or `null`, and "
        "`error` says why)"
    )
    tools: list[str] = Field(
        description="the manifest's `contributes.tools` names, conditional ones included (a tool that needs a client "
        "feature is listed only while that feature is offered)"
    )
    network_ports: list[int] = Field(
        alias="networkPorts",
        description="TCP ports the parent granted, sorted ([`plugins/grant`](#pluginsgrant)); reachable under "
        "`--sandbox strict`",
    )
    network_hosts: list[str] | None = Field(
        default=None,
        alias="networkHosts",
        description="network allowlist entries the parent granted ([`plugins/grant`](#pluginsgrant) "
        "`networkHosts`), canonical, sorted; absent when none (`launch.network` has the whole allowlist)",
    )
    network_call_hosts: list[str] | None = Field(
        default=None,
        alias="networkCallHosts",
        description="destinations (`host:port`) let through for good at a `network/request` (`always`), sorted; "
        "absent when none; forgotten with [`plugins/grant`](#pluginsgrant) `networkCallHosts`",
    )
    limits: GrantedLimits = Field(
        description="`{maxRssMb, maxCpuPercent, maxDiskMb, maxTools, maxListingMb}` granted to this "
        "plugin (`null` members: the host's limits apply)"
    )
    launch: Launch | LaunchUnresolved | None = Field(
        description="[`Launch`](#launch): what will run, for the approval prompt; "
        "[`LaunchUnresolved`](#launchunresolved) `{error, kind}` when the command cannot be resolved"
    )
    user_config: list[ConfigItem] | None = Field(
        default=None,
        alias="userConfig",
        description="the settings `plugins/configure` takes (bundle `user_config`, registry variables, secrets); "
        "omitted when none",
    )
    origin: dict[str, Any] | None = Field(
        default=None,
        description="for a plugin installed from a bundle or `server.json`: `{kind, source, sha256?, signature?, "
        "signer?, runtimes?, runtimeVersions?}` (`signature`: `unsigned`, `unverified` or `verified`; `signer`: "
        "a verified bundle's certificate subject; `runtimes`: the bundle's `compatibility.runtimes`; "
        "`runtimeVersions`: the versions its launch's runtimes reported when this hostd installed it); "
        "omitted otherwise",
    )
    package: PackageVersion | None = Field(
        default=None,
        description="[`PackageVersion`](#packageversion) `{manager, name, version?, pinned}`: the registry package "
        "its launch runs (an imported `npx`/`uvx` entry, whose manifest `version` is a placeholder); omitted when "
        "the launch names no package",
    )
    error: dict[str, Any] | None = Field(
        default=None,
        description='for a `broken` plugin: `{kind: "PLUGIN_BROKEN", message, plugin, path, source, reason, errors}` '
        "(`source`: `manifest` or `state`, which stored file no longer loads; `errors`: `[{field, message}]`); "
        "omitted otherwise",
    )
    disabled_tools: list[str] | None = Field(
        default=None,
        alias="disabledTools",
        description="the host names of the tools the user disabled ([`tools/setEnabled`](#toolssetenabled)), "
        "sorted: kept in the state whether or not the plugin runs; omitted when none",
    )
    imported: Literal[True] | None = Field(
        default=None,
        description="`true` for a plugin [`plugins/import`](#pluginsimport) installed from a client config: its "
        "manifest `version` is a placeholder (`0.0.0`), not the server's; the version that runs is `package.version` "
        "when its launch runs a registry package, else unknown until the server reports its own "
        "(`PluginStatus.server_version`, then `serverInfo`); omitted otherwise",
    )
    server_info: dict[str, str] | None = Field(
        default=None,
        alias="serverInfo",
        description="the MCP `serverInfo` `{name, version}` the server reported at its last successful start, kept "
        "in the state (each at most 200 characters): known while it is stopped, and by a later hostd; omitted "
        "before its first start and when it reported no version",
    )
    pinned_tools: list[str] | None = Field(
        default=None,
        alias="pinnedTools",
        description="the host names of the tools the first discovery after the approval pinned "
        "([Trust gate](#trust-gate)), sorted: known while it is stopped (`hostctl tools` shows them for a server "
        "whose manifest declares none, an imported one); omitted before that discovery",
    )


class PluginStatus(Wire):
    """What is running. Returned by `plugins/enable`, `plugins/disable`, `plugins/restart`,
    `plugins/status`, and sent as `plugins/statusChanged`. Times are ISO-8601 UTC with milliseconds
    (`2026-11-30T19:19:06.453Z`)."""

    omit_none = frozenset({"pinned"})

    plugin_id: str = Field(description="the plugin's `id`")
    backend_type: str = Field(description='`"mcp"`')
    transport: str = Field(description='`"stdio"`, `"streamable-http"` or `"sse"`; `"unknown"` for a `broken` plugin')
    status: Literal["stopped", "starting", "authorizing", "ready", "unhealthy", "error", "broken"] = Field(
        description="`stopped`, `starting`, `ready`, `unhealthy` or `error` ([Plugin states](#plugin-states)); "
        "`authorizing` while a starting remote plugin waits for the person to authorize it in the browser "
        "([docs/remote.md](remote.md)); `broken` for an installed plugin whose stored files (its manifest, its "
        "record in the state) no longer load: never started, `error` is `PLUGIN_BROKEN` saying why"
    )
    tools_count: int = Field(description="tools registered now (0 unless `ready`; withheld tools are not counted)")
    started_at: str | None = Field(description="when the current (or last) instance became ready")
    last_seen_at: str | None = Field(description="when the plugin last sent a message")
    protocol_version: str | None = Field(description="the MCP version negotiated with the plugin")
    era: Literal["legacy", "modern"] | None = Field(
        default=None,
        description='`"legacy"` (the `initialize` handshake) or `"modern"` (2026-07-28, per-request `_meta`); '
        "`null` before the first start",
    )
    server_name: str | None = Field(description="the MCP server's `serverInfo.name`")
    server_version: str | None = Field(description="the MCP server's `serverInfo.version`")
    error: dict[str, Any] | None = Field(
        description="why it is `error` or `unhealthy`: `{kind, message, …data}`, the same fields as the error a "
        "request would get (`reason`, `stderrTail`, `problems`, `missing`, `unexpected`, …); for a plugin the "
        'resource watchdog stopped, also `limit: {limit, value, threshold}` (`limit` is `"rss"` (bytes), '
        '`"cpu"` (percent of one core) or `"disk"` (bytes allocated beneath the data folder and '
        "`TMPDIR`)); `null` once it starts again"
    )
    restarts: int = Field(description="restarts so far, by `plugins/restart` or automatic; kept in the state")
    last_exit: str | None = Field(
        description='how the last instance ended: `"<step>, code <returncode>"`, `step` one of `already-exited` '
        "(it exited by itself), `stdin-eof` (it exited when its stdin closed), `sigterm`, `sigkill`; a negative "
        "code is a signal"
    )
    next_retry_at: str | None = Field(description="when the next automatic restart is due, while one is pending")
    withheld: list[str] = Field(
        description="tools held back because their definition changed since approval ([Trust gate](#trust-gate))"
    )
    isolation: list[str] = Field(
        description="the isolation layers the running (or last) instance actually has, as its supervisor shim "
        "reported them after applying them (in the order of `launch.isolation`; a spawn that cannot apply every "
        "layer of the launch fails with `ISOLATION_FAILED`); `[]` before the first start"
    )
    pinned: list[str] | None = Field(
        default=None,
        description="in a `plugins/enable` or `plugins/restart` result only: the tools this start pinned and "
        "serves on first use (the first start after an approval; [Trust gate](#trust-gate)), sorted host "
        "names; omitted otherwise",
    )


class HostTool(Wire):
    """A tool as hostd offers it. Returned by `tools/list`."""

    omit_none = frozenset({"output_schema", "annotations", "permission", "execution", "invisible_characters"})

    name: str = Field(description="`<plugin id>.<MCP tool name>`, exact and stable (`mcp-echo.echo`)")
    function_name: str = Field(
        description="a name model providers accept: `[A-Za-z0-9_-]`, at most 64 characters. Other characters "
        "become `_`; a longer name is cut and gets `_` plus 8 hex digits of a SHA-256 of `name`; names that would "
        "collide within a plugin all get the hash suffix. Depends on `name` only, so it is stable"
    )
    description: str = Field(description='the MCP `description`, `""` when absent')
    input_schema: dict[str, Any] = Field(
        alias="inputSchema", description="the MCP `inputSchema`, as the plugin sent it (validated)"
    )
    output_schema: dict[str, Any] | None = Field(
        default=None, alias="outputSchema", description="the MCP `outputSchema`; omitted when absent"
    )
    annotations: dict[str, Any] | None = Field(default=None, description="the MCP `annotations`; omitted when absent")
    permission: str | None = Field(
        default=None,
        description='the permission the tool needs (`_meta["hostd/permission"]`); omitted when none',
    )
    execution: dict[str, Any] | None = Field(
        default=None,
        description='the MCP `execution` (`{taskSupport: "forbidden" | "optional" | "required"}`); omitted when '
        "absent. hostd calls a `required` tool as a task (`tools/call` looks the same to the parent)",
    )
    invisible_characters: Literal[True] | None = Field(
        default=None,
        alias="invisibleCharacters",
        description="`true` when `description` holds characters a person cannot see (format and control "
        "characters other than newline and tab, tag characters U+E0000-E007F, the word joiner, private-use, "
        "unassigned and default-ignorable code points): text only a model reads. An app should warn, or show "
        "them escaped as hostctl does; omitted otherwise",
    )
    plugin: str = Field(description="the plugin's `id`")
    enabled: bool = Field(
        default=True,
        description="`false` when the user disabled the tool ([`tools/setEnabled`](#toolssetenabled)): only "
        "listed with `includeDisabled`, and a call is refused with `TOOL_DISABLED`",
    )


class ToolEnabledResult(Wire):
    """``tools/setEnabled`` result."""

    name: str = Field(description="the tool's host name (`<plugin id>.<MCP tool name>`)")
    plugin: str = Field(description="the plugin's `id`")
    enabled: bool = Field(description="what is now recorded in the state (the plugin is not restarted)")
    revision: int = Field(description="the registry's revision after the change (also sent as `tools/listChanged`)")


class LogLine(Wire):
    """One line of ``plugins/logs``: what ``plugins/log`` carried for the plugin, kept in its bounded log file."""

    time: str = Field(description="when hostd received it, ISO-8601 UTC with milliseconds")
    level: str = Field(description="as in `plugins/log`")
    source: Literal["stderr", "mcp", "stdout", "host"] = Field(description="as in `plugins/log`")
    message: str = Field(description="the line, redacted, at most 4096 characters")


class LogsResult(Wire):
    """``plugins/logs`` result."""

    lines: list[LogLine] = Field(
        description="the most recent lines, oldest first, across restarts of the plugin and of hostd (at most `limit`)"
    )
    dropped: int = Field(
        description="lines that fell out of the plugin's log file in the state folder (bounded at 512 KiB per "
        "plugin), across hostd processes; without a state folder, out of this hostd's ring (500 lines, 256 KiB)"
    )


class PluginsListResult(Wire):
    """``plugins/list`` result."""

    plugins: list[PluginInfo] = Field(description="every installed plugin, sorted by `id`")


class ImportEntry(Wire):
    """One server of a ``plugins/import`` config, in the config's order (also ``IMPORT_INVALID``'s ``data.entries``)."""

    omit_none = frozenset({"message", "notes", "url", "field", "plugin"})

    name: str = Field(description="the entry's name in the config")
    outcome: Literal["installed", "unchanged", "updated", "invalid", "ready-to-install"] = Field(
        description="`installed` (new), `unchanged` (an earlier import installed this entry as it is now) or "
        "`updated` (an earlier import installed this entry; its manifest was rewritten and its approval voided); "
        "in an `IMPORT_INVALID` error `invalid`, `ready-to-install`, `unchanged` or `updated`"
    )
    id: str | None = Field(description="the plugin id it gets (or got); `null` when none")
    message: str | None = Field(default=None, description="why it is not installed; omitted when none")
    notes: list[str] | None = Field(
        default=None, description="what was changed on the way (a dropped `cwd`, a reduced command); omitted when none"
    )
    url: str | None = Field(default=None, description="a remote server's URL; omitted for a local one")
    field: str | None = Field(
        default=None,
        description="the entry's field `message` is about (`env.API_KEY`, `args.2`, `url`); omitted when none",
    )
    plugin: PluginInfo | None = Field(
        default=None,
        description="the plugin's [`PluginInfo`](#plugininfo) (outcomes `installed`, `unchanged`, `updated`)",
    )


class ImportResult(Wire):
    """``plugins/import`` result."""

    entries: list[ImportEntry] = Field(description="each server's outcome, in the config's order")


class ToolsListResult(Wire):
    """``tools/list`` result: one page of the registered tools."""

    omit_none = frozenset({"next_cursor"})

    tools: list[HostTool] = Field(
        description="the registered tools (only `plugin`'s when given), sorted by `name`: one page, whose tools "
        "total at most 1 MiB as JSON (at least one tool), so an answer always fits the 8 MiB line bound"
    )
    revision: int = Field(description="goes up on every change of the registry; the one `tools/listChanged` carries")
    next_cursor: str | None = Field(
        default=None,
        alias="nextCursor",
        description="pass it back as `cursor` (with the same `plugin` and `includeDisabled`) for the next page; "
        "omitted on the last page. hostd's Python and TypeScript clients and hostctl follow it",
    )


class ToolsCallResult(Wire):
    """``tools/call`` result. Documentation only: hostd forwards the plugin's own bytes
    (``orjson.Fragment``) and never routes a result through this model."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    content: list[dict[str, Any]] = Field(
        description="the MCP result's `content` array (text, image, audio, resource items, as MCP defines "
        "them), as the bytes the plugin wrote"
    )
    structured_content: Any = Field(
        default=None,
        alias="structuredContent",
        description="the MCP `structuredContent` when the tool returned one; omitted otherwise",
    )


class ListChangedParams(Wire):
    """``tools/listChanged`` params."""

    revision: int = Field(description="the registry's revision now; `tools/list` returns it (or a later one)")


class LogParams(Wire):
    """``plugins/log`` params."""

    plugin: str | None = Field(description="the plugin's `id`; `null` for a message about no plugin in particular")
    level: str = Field(description="`info` for stderr, the MCP level for `mcp`, `warning` or `error` otherwise")
    source: Literal["stderr", "mcp", "stdout", "host"] = Field(description="where the line comes from (below)")
    message: str = Field(description="the line, redacted, at most 4096 characters")


class ProgressParams(Wire):
    """``$/progress`` params."""

    omit_none = frozenset({"total", "message"})

    request_id: int | str = Field(alias="requestId", description="the `id` of the `tools/call`")
    # int | float: the number as the plugin sent it (3 stays 3, not 3.0).
    progress: int | float = Field(description="progress so far (a number, as the plugin sent it)")
    total: int | float | None = Field(default=None, description="the total, when the plugin gave one")
    message: str | None = Field(
        default=None, description="the plugin's message, at most 1024 bytes (cut with `…`; see Flow control)"
    )


class PagedResult(Wire):
    """One of hostd's pages of a listing (``resources/list``, ``resources/templates/list``, ``prompts/list``):
    the servers' listings walked whole and bounded (``LISTING_TOO_LARGE``), then cut into pages as
    ``tools/list`` is."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)
    omit_none = frozenset({"next_cursor", "failed"})

    next_cursor: str | None = Field(
        default=None,
        alias="nextCursor",
        description="hostd's cursor of the next page (pass it back as `cursor` with the same `plugin`); omitted on"
        " the last page. hostd's Python and TypeScript clients follow it. Besides it, the MCP listing's array in the"
        " server's order: `resources`, `resourceTemplates` or `prompts` (each prompt's `name` is the host name"
        " `<plugin>.<name>`, with `plugin`; `prompts/list` without `plugin`: every plugin's, in plugin id order),"
        " whose items total at most 1 MiB as compact JSON (at least one, each at most 128 KiB), so an answer always"
        " fits the 8 MiB line bound. An item whose `description` (a prompt's `arguments`' too) holds characters a"
        " person cannot see carries `invisibleCharacters: true`, as a tool does in `tools/list`",
    )
    failed: list[dict[str, str]] | None = Field(
        default=None,
        description="`prompts/list` without `plugin`: the plugins whose prompts are left out, each `{plugin, kind,"
        " message}` (the error that listing by `plugin` answers: `LISTING_TOO_LARGE`, `NAME_INVALID`,"
        " `MCP_UPSTREAM_ERROR`, `TOOL_TIMEOUT`...), on every page; omitted when none failed. One plugin's failure"
        " never hides another's prompts",
    )


class ReadResourceResult(Wire):
    """``resources/read`` result: the server's, bounded like a tool result."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    contents: list[dict[str, Any]] = Field(
        description="the MCP `contents` (`{uri, mimeType?, text}` or `{uri, mimeType?, blob}`); a blob over "
        "`contentLimits.maxBlobBytes` is replaced by a text item naming its size and the bound"
    )


class GetPromptResult(Wire):
    """``prompts/get`` result: the server's, bounded by the result bound."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    description: str | None = Field(default=None, description="the MCP `description`, when given")
    messages: list[dict[str, Any]] = Field(description="the MCP `messages` (`{role, content}`)")


class CompleteResult(Wire):
    """``completion/complete`` result: the server's."""

    completion: dict[str, Any] = Field(description="MCP `{values, total?, hasMore?}`")


class PluginNoteParams(Wire):
    """``resources/listChanged`` and ``prompts/listChanged`` params."""

    plugin: str = Field(description="the plugin's `id`: list again with `plugin`")


class ResourceUpdatedParams(Wire):
    """``resources/updated`` params (after ``resources/subscribe``)."""

    plugin: str = Field(description="the plugin's `id`")
    uri: str = Field(description="the resource that changed: read it again")


class SamplingRequestParams(Wire):
    """hostd->parent ``sampling/createMessage`` and ``elicitation/create`` params."""

    plugin: str = Field(description="the plugin's `id` whose server asks")
    params: dict[str, Any] = Field(
        description="the server's MCP params, as sent (elicitation: `mode` `form` with `requestedSchema`, or "
        "`url` with `url`: hostd never opens it). Answer with the MCP result; it goes back to the server as is"
    )


class RootsRequestParams(Wire):
    """hostd->parent ``roots/list`` params."""

    plugin: str = Field(
        description="the plugin's `id`; answer MCP `{roots: [{uri, name?}]}`: hostd passes on only `file://` "
        "roots inside the folders the plugin was granted"
    )


class RequestedPath(Wire):
    """One file or folder a ``grants/request`` asks for."""

    path: str = Field(description="the real path to grant (a file, a folder, or the folder of an output to create)")
    access: Literal["read", "write"] = Field(description="`read`, or `write` (read-write: the tool writes there)")
    argument: str = Field(description="where the call names it: a JSON Pointer into `arguments` (`/input/0`)")
    value: str = Field(description="the argument as the caller wrote it (`~/Documents/q3.xlsx`, `file:///…`)")


class GrantRequestParams(Wire):
    """hostd->parent ``grants/request`` params: a tool call names files the plugin may not reach."""

    plugin: str = Field(description="the plugin's `id`")
    tool: str = Field(description="the tool's host name (`<plugin>.<tool>`)")
    paths: list[RequestedPath] = Field(description="what the call needs that the plugin's sandbox does not cover")
    reason: str = Field(description="one sentence for the user: which tool, which files, why")


class GrantAnswer(Wire):
    """The parent's answer to ``grants/request``."""

    grant: Literal["no", "once", "always"] = Field(
        description="`no`: the call fails with `ACCESS_NOT_GRANTED`; `once`: granted until hostd exits; "
        "`always`: recorded in the state (`callGrants`), revocable with `plugins/revokePath`"
    )


class NetworkRequestParams(Wire):
    """hostd->parent ``network/request`` params: a plugin with an allowlist asks its proxy for a destination the
    allowlist does not name (issue 26). Asked once per destination while the plugin runs; the plugin's
    connection waits for the answer."""

    omit_none = frozenset({"address_kind"})

    plugin: str = Field(description="the plugin's `id`")
    host: str = Field(description="the destination's host, canonical (lowercase, IDNA; an address as written)")
    port: int = Field(description="the destination's TCP port")
    reason: str = Field(description="one sentence for the user: which plugin, which destination")
    address_kind: Literal["loopback", "private", "link-local", "multicast", "unspecified"] | None = Field(
        default=None,
        alias="addressKind",
        description="for an IP address that is not public: `loopback` (this machine), `private` (the local "
        "network, or a reserved or shared range), `link-local`, `multicast` or `unspecified`; a yes lets the "
        "plugin reach it. Absent for a public address and for a name (a name is resolved after the answer, and "
        "one that resolves to a non-public address is refused unless the allowlist names it in `network.private`)",
    )


class NetworkAnswer(Wire):
    """The parent's answer to ``network/request``."""

    grant: Literal["no", "once", "always"] = Field(
        description="`no`: refused (`403`, the plugin sees why); `once`: let through while the plugin runs; "
        "`always`: also recorded in the state (`networkCallHosts`), asked no more"
    )


class StateRecord(Wire):
    """One installed plugin in ``state.json``'s ``plugins`` (``hostd.storage.state.PluginRecord``, which
    stays a plain dataclass so the lock is taken before pydantic loads; a test holds the two equal)."""

    path: str = Field(description="the plugin folder, absolute")
    manifest_digest: str = Field(
        alias="manifestDigest", description="`sha256:…` of the manifest's bytes when last installed"
    )
    granted: list[str] = Field(description="the granted permissions, sorted")
    approved_digest: str | None = Field(
        alias="approvedDigest", description="the approved `launch.digest`; `null` before `plugins/approve`"
    )
    enabled: bool = Field(description="enabled again at the next start")
    restarts: int = Field(description="`PluginStatus.restarts`")
    pinned_tools: dict[str, str] | None = Field(
        alias="pinnedTools",
        description="tool name → digest of its definition, pinned by the first discovery after an approval "
        "([Trust gate](#trust-gate)); `null` before",
    )
    network_ports: list[int] = Field(alias="networkPorts", description="granted TCP ports, sorted")
    limits: dict[str, float] = Field(
        description="granted limits in the units hostd enforces: `max_rss_bytes`, `max_cpu_percent`, "
        "`max_disk_bytes`, `max_tools`, `max_listing_bytes` (a member absent: the host's limit applies)"
    )
    disabled_tools: list[str] = Field(
        alias="disabledTools",
        description="MCP names of the tools the user disabled ([`tools/setEnabled`](#toolssetenabled)), sorted",
    )
    folders: dict[str, list[str]] = Field(
        description="folders the parent granted ([`plugins/grant`](#pluginsgrant)): `read` / `write` → absolute "
        "paths (a member absent: none)"
    )
    secret_arguments: bool | None = Field(
        default=None,
        alias="secretArguments",
        description="`true` when the parent let secrets travel as arguments (`plugins/grant` `secretArguments`); "
        "absent otherwise",
    )
    install: dict[str, str] | None = Field(
        default=None,
        description="the install's identity: `id` (random hex) and `origin` (who stands behind it); its data "
        "folder and secrets are this install's only",
    )
    call_grants: dict[str, str] | None = Field(
        default=None,
        alias="callGrants",
        description="files and folders granted for good at a tool call ([Call-time grants](#call-time-grants), "
        "[`plugins/grantPath`](#pluginsgrantpath)): real path → `read` | `write`; absent when none",
    )
    start_error: dict[str, str] | None = Field(
        default=None,
        alias="startError",
        description="why its last start failed while enabled: `kind`, `message`, `time` (ISO 8601 UTC) and the "
        "error's `reason` when it had one; absent once a start succeeds or it is disabled. A hostd serving with "
        "`--no-restore` shows the plugin `error` with it instead of starting it",
    )

    network_hosts: list[str] | None = Field(
        default=None,
        alias="networkHosts",
        description="network allowlist entries the parent granted (`plugins/grant` `networkHosts`), canonical, "
        "sorted; absent when none",
    )

    network_call_hosts: list[str] | None = Field(
        default=None,
        alias="networkCallHosts",
        description="destinations (`host:port`) the parent let through for good at a `network/request` "
        "(`always`); absent when none",
    )

    server_info: dict[str, str] | None = Field(
        default=None,
        alias="serverInfo",
        description="the MCP `serverInfo` `{name, version}` the server reported at its last successful start "
        "(each at most 200 characters); absent before one",
    )

    omit_none: ClassVar[frozenset[str]] = frozenset(
        {
            "secret_arguments",
            "install",
            "call_grants",
            "start_error",
            "network_hosts",
            "network_call_hosts",
            "server_info",
        }
    )
