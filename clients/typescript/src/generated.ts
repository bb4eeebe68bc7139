// Generated from docs/openrpc.json by clients/typescript/scripts/generate.py. Do not edit by hand:
// run `python clients/typescript/scripts/generate.py` after `python -m docgen.docs`.

/** The protocol document this file was generated from (`info.version`). */
export const PROTOCOL_DOCUMENT_VERSION = "0.1.0";

/** `Launch.accounting`: the mechanism that bounds a plugin tree here (sandbox/cgroups.py). */
export interface Accounting {
  /** what bounds memory (`limits.maxRssMb`) and processes: `cgroup-v2` or `cgroup-v1` (the tree runs in a cgroup of its own: the kernel charges anonymous memory, shared memory, memfd and page cache, and bounds the tasks; an OOM kill or a refused fork stops the plugin with `limit` `rss` / `pids`), or `watchdog` (hostd samples the tree: RSS plus the memfd and shared-memory files it holds, each once; no process bound) */
  memory: "cgroup-v2" | "cgroup-v1" | "watchdog";
  /** why this mechanism: what was found, or what was missing */
  reason: string;
  /** how the plugin's CPU share is set: `cpu.weight` (v2), `cpu.shares` (v1), or `none: <why>`; `limits.maxCpuPercent` is the watchdog's in every case */
  cpu: string;
  /** what bounds the data folder and `TMPDIR` (`limits.maxDiskMb`) */
  disk: string;
}

/** `plugins/approve {id, digest}`: approve the exact launch `plugins/install` showed. */
export interface ApproveParams {
  id: string;
  digest: string;
}

/** `auth/callback`: the authorization server's redirect, for a parent that catches it itself. */
export interface AuthCallbackParams {
  /** the plugin whose authorization waits (`auth/authorize` named it) */
  plugin: string;
  /** the full redirect URL (`…?code=…&state=…`), as the browser was sent to it */
  url: string;
}

/** `$/cancelRequest {id}`: cancel the parent's request `id` (it is still answered, with -32800). */
export interface CancelParams {
  /** the `id` of the request to cancel */
  id: number | string;
}

/** `capabilities` of the `initialize` result. */
export interface Capabilities {
  /** `{install: true, trustGate: true}` */
  plugins: PluginCapabilities;
  /** `{listChanged: true, progress: true}` */
  tools: ToolCapabilities;
  /** `true`: `$/cancelRequest` is honoured */
  cancelRequest: boolean;
}

/** `launch.capabilities`: everything the plugin may reach, in one list, for the approval. */
export interface CapabilitySet {
  /** files and folders, with access and why */
  folders: FolderCapability[];
  /** the network it may reach */
  network: NetworkCapability;
  /** the names of its environment variables, sorted */
  env: string[];
  /** the secrets it receives, by name and channel */
  secrets: SecretCapability[];
  /** the packages its launch runs */
  packages: PackageCapability[];
}

/** `initialize`'s `clientInfo`. */
export interface ClientInfo {
  /** the parent application's name, for logs */
  name?: string;
  /** its version */
  version?: string;
}

/**
 * `completion/complete {plugin, ref, argument, context?}`: MCP's `ref`
 * (`{type: "ref/prompt", name}` or `{type: "ref/resource", uri}`), `argument` `{name, value}`.
 */
export interface CompleteParams {
  plugin: string;
  ref: { [key: string]: unknown };
  argument: { [key: string]: string };
  context?: { [key: string]: unknown } | null;
}

/** `completion/complete` result: the server's. */
export interface CompleteResult {
  /** MCP `{values, total?, hasMore?}` */
  completion: { [key: string]: unknown };
}

/**
 * One setting of a plugin (`PluginInfo.userConfig`): a bundle's `user_config` option, a registry
 * entry's variable, or a secret its manifest refers to as `${secret:NAME}`.
 */
export interface ConfigItem {
  /** the name `plugins/configure` takes */
  name: string;
  /** `string`, `number`, `boolean`, `directory` or `file` */
  type: string;
  /** display name */
  title: string;
  /** help text */
  description: string;
  /** `true`: enable fails with `CONFIG_REQUIRED` until it is set */
  required: boolean;
  /** `true`: a secret, kept in the secret store; its value is never shown */
  sensitive: boolean;
  /** `true`: the value is a list */
  multiple: boolean;
  /** a value is set (or, for a non-secret, a default applies) */
  set: boolean;
  /** the current value of a non-secret (or its default); `null` for a secret */
  value: unknown;
}

/** `plugins/configure {id, values}`: set (`null`: unset) the plugin's `user_config` values and secrets. */
export interface ConfigureParams {
  id: string;
  values: { [key: string]: string | number | boolean | string[] | null };
}

/** `initialize`'s `contentLimits`: aggregate bounds on one tool result's rich content. */
export interface ContentLimitsParams {
  /** image items per result */
  maxImages?: number | null;
  /** audio items per result */
  maxAudio?: number | null;
  /** decoded media bytes */
  maxMediaBytes?: number | null;
  /** decoded blob bytes */
  maxBlobBytes?: number | null;
}

/** `contentLimits`: aggregate bounds on one tool result's rich content (`hostd.wire.content`). */
export interface ContentLimitsWire {
  /** image items per result (default 16) */
  maxImages: number;
  /** audio items per result (default 4) */
  maxAudio: number;
  /** decoded bytes of images and audio together (default 8388608) */
  maxMediaBytes: number;
  /** decoded bytes of embedded resource blobs (default 8388608) */
  maxBlobBytes: number;
}

/** `{}`: `plugins/list`, `ping`. */
export interface Empty { [key: string]: unknown }

/** One file or folder a plugin may reach (`launch.capabilities.folders`). */
export interface FolderCapability {
  /** the real path */
  path: string;
  /** `read` (and execute), or `write` (read-write) */
  access: "read" | "write";
  /** an argument names it, an env value names it, the manifest's `sandbox` declares it, the parent granted it ([`plugins/grant`](#pluginsgrant)), the user granted it at a tool call ([Call-time grants](#call-time-grants)), or it is the plugin's private `HOME` (its own `~/.toolname`, `~/.config/...` writes land there, kept until uninstall; nothing of the user's `HOME` is in it but links to what is granted here) */
  why: "argument" | "env" | "declared" | "parent grant" | "call-time grant" | "private home";
  /** the argument as written, `$NAME`, the grant's label (`sandbox.read[0]`, `grant.write[1]`), for a call-time grant `once` / `always`, for the private home `HOME` */
  source: string;
}

/** `plugins/grant`'s `folders`: folders this plugin may read, and read and write (absolute or `~`). */
export interface FolderGrants {
  read?: string[];
  write?: string[];
}

/** `prompts/get` result: the server's, bounded by the result bound. */
export interface GetPromptResult {
  /** the MCP `description`, when given */
  description?: string | null;
  /** the MCP `messages` (`{role, content}`) */
  messages: Array<{ [key: string]: unknown }>;
  [key: string]: unknown;
}

/** The parent's answer to `grants/request`. */
export interface GrantAnswer {
  /** `no`: the call fails with `ACCESS_NOT_GRANTED`; `once`: granted until hostd exits; `always`: recorded in the state (`callGrants`), revocable with `plugins/revokePath` */
  grant: "no" | "once" | "always";
}

/**
 * `plugins/grant {id, permissions, networkPorts?, limits?, folders?}`: what the user allows (replaces).
 *
 * `networkPorts`: TCP ports, each declared in the manifest's `backend.tcp_ports`,
 * reachable under the strict sandbox. `limits`: resource limits for this plugin
 * (override the host's `--max-rss-mb` / `--max-cpu-percent` / `--max-disk-mb`).
 * `folders`: `{read: [], write: []}`, existing folders (or files) granted to this plugin
 * only, checked like every sandbox rule, shown in `launch.folders` as `grant.read[i]` /
 * `grant.write[i]` and covered by the digest (a change voids the approval). Absent: unchanged.
 * `secretArguments`: `true` lets the launch put secrets on its command line (readable by every
 * process in `/proc/<pid>/cmdline`), for a server that takes its secret only as an argument; shown in
 * `launch.secretArguments` and part of the approval digest. Absent: unchanged.
 * `networkHosts`: network allowlist entries granted on top of the manifest's `network.hosts`
 * (`api.example.com`, `*.example.com`, `127.0.0.1:8200`...; replaces the granted ones, `[]` revokes
 * them all); shown in `launch.network` and covered by the digest. Absent: unchanged.
 * `networkCallHosts`: the destinations (`host:port`) let through for good at a `network/request`
 * (`always`), replaced (`[]` forgets them all; a running plugin keeps its answers until its next start);
 * not covered by the digest. Absent: unchanged.
 */
export interface GrantParams {
  id: string;
  permissions: string[];
  networkPorts?: number[] | null;
  limits?: Limits | null;
  folders?: FolderGrants | null;
  secretArguments?: boolean | null;
  networkHosts?: string[] | null;
  networkCallHosts?: string[] | null;
}

/**
 * `plugins/grantPath {id, path, access?}`: grant one file or folder for good (a call-time grant).
 *
 * The same grant a parent's `always` answer to `grants/request` makes: recorded, applied at the
 * plugin's next start (a tool call that names the path restarts it first), not covered by the digest.
 */
export interface GrantPathParams {
  /** the plugin's `id` */
  id: string;
  /** an existing file or folder: absolute, or `~/…` */
  path: string;
  /** `read` (default) or `write` (read-write) */
  access?: "read" | "write";
}

/** hostd->parent `grants/request` params: a tool call names files the plugin may not reach. */
export interface GrantRequestParams {
  /** the plugin's `id` */
  plugin: string;
  /** the tool's host name (`<plugin>.<tool>`) */
  tool: string;
  /** what the call needs that the plugin's sandbox does not cover */
  paths: RequestedPath[];
  /** one sentence for the user: which tool, which files, why */
  reason: string;
}

/** `PluginInfo.limits`: the limits granted to this plugin; `null` members: the host's apply. */
export interface GrantedLimits {
  /** resident memory of the whole tree, MiB (`--max-rss-mb`) */
  maxRssMb: number | null;
  /** CPU of the whole tree, percent of one core over 30 s (`--max-cpu-percent`) */
  maxCpuPercent: number | null;
  /** MiB allocated beneath the data folder and `TMPDIR` (`--max-disk-mb`) */
  maxDiskMb: number | null;
  /** tools (likewise prompts, resources, resource templates) the plugin may list (`LISTING_TOO_LARGE`; default 1024) */
  maxTools?: number | null;
  /** MiB of one listing of the plugin, as compact JSON (`LISTING_TOO_LARGE`; default 16) */
  maxListingMb?: number | null;
}

/** A tool as hostd offers it. Returned by `tools/list`. */
export interface HostTool {
  /** `<plugin id>.<MCP tool name>`, exact and stable (`mcp-echo.echo`) */
  name: string;
  /** a name model providers accept: `[A-Za-z0-9_-]`, at most 64 characters. Other characters become `_`; a longer name is cut and gets `_` plus 8 hex digits of a SHA-256 of `name`; names that would collide within a plugin all get the hash suffix. Depends on `name` only, so it is stable */
  function_name: string;
  /** the MCP `description`, `""` when absent */
  description: string;
  /** the MCP `inputSchema`, as the plugin sent it (validated) */
  inputSchema: { [key: string]: unknown };
  /** the MCP `outputSchema`; omitted when absent */
  outputSchema?: { [key: string]: unknown } | null;
  /** the MCP `annotations`; omitted when absent */
  annotations?: { [key: string]: unknown } | null;
  /** the permission the tool needs (`_meta["hostd/permission"]`); omitted when none */
  permission?: string | null;
  /** the MCP `execution` (`{taskSupport: "forbidden" | "optional" | "required"}`); omitted when absent. hostd calls a `required` tool as a task (`tools/call` looks the same to the parent) */
  execution?: { [key: string]: unknown } | null;
  /** `true` when `description` holds characters a person cannot see (format and control characters other than newline and tab, tag characters U+E0000-E007F, the word joiner, private-use, unassigned and default-ignorable code points): text only a model reads. An app should warn, or show them escaped as hostctl does; omitted otherwise */
  invisibleCharacters?: true | null;
  /** the plugin's `id` */
  plugin: string;
  /** `false` when the user disabled the tool ([`tools/setEnabled`](#toolssetenabled)): only listed with `includeDisabled`, and a call is refused with `TOOL_DISABLED` */
  enabled?: boolean;
}

/** One server of a `plugins/import` config, in the config's order (also `IMPORT_INVALID`'s `data.entries`). */
export interface ImportEntry {
  /** the entry's name in the config */
  name: string;
  /** `installed` (new), `unchanged` (an earlier import installed this entry as it is now) or `updated` (an earlier import installed this entry; its manifest was rewritten and its approval voided); in an `IMPORT_INVALID` error `invalid`, `ready-to-install`, `unchanged` or `updated` */
  outcome: "installed" | "unchanged" | "updated" | "invalid" | "ready-to-install";
  /** the plugin id it gets (or got); `null` when none */
  id: string | null;
  /** why it is not installed; omitted when none */
  message?: string | null;
  /** what was changed on the way (a dropped `cwd`, a reduced command); omitted when none */
  notes?: string[] | null;
  /** a remote server's URL; omitted for a local one */
  url?: string | null;
  /** the entry's field `message` is about (`env.API_KEY`, `args.2`, `url`); omitted when none */
  field?: string | null;
  /** the plugin's [`PluginInfo`](#plugininfo) (outcomes `installed`, `unchanged`, `updated`) */
  plugin?: PluginInfo | null;
}

/**
 * `plugins/import {config}`: an `mcpServers` / `servers` config, as text (JSON with
 * comments allowed) or as an object.
 */
export interface ImportParams {
  config: string | { [key: string]: unknown };
  secretEnv?: string[];
}

/** `plugins/import` result. */
export interface ImportResult {
  /** each server's outcome, in the config's order */
  entries: ImportEntry[];
}

/**
 * `initialize {clientInfo?, protocolVersion?, knownPermissions?, stateDir?, contentLimits?, capabilities?,
 * oauth?}`: the first request; its answer is the readiness signal.
 *
 * Documentation only: `hostd.control.server` checks them by hand (pydantic is not loaded before the answer).
 */
export interface InitializeParams {
  /** `{name, version}` */
  clientInfo?: ClientInfo | null;
  /** `"0"` */
  protocolVersion?: string | null;
  /** the permissions the parent knows; others are refused */
  knownPermissions?: string[] | null;
  /** the state directory to lock */
  stateDir?: string | null;
  contentLimits?: ContentLimitsParams | null;
  /** the client features the parent answers for plugins; hostd offers a plugin only what is here and granted to it ([Requests to the parent](#requests-to-the-parent)) */
  capabilities?: ParentCapabilities | null;
  /** `{clientIdMetadataDocument?}`: the application's OAuth client identity */
  oauth?: OAuthSettings | null;
}

/**
 * `initialize` result. Built by `hostd.control.server` before pydantic is imported (readiness);
 * the live examples check that shape against this model.
 */
export interface InitializeResult {
  /** `{name: "hostd", version}` */
  serverInfo: InitializeServerInfo;
  /** `"0"`, whatever the parent sent: compare it with what you speak */
  protocolVersion: string;
  /** `{plugins: {install: true, trustGate: true}, tools: {listChanged: true, progress: true}, cancelRequest: true}` */
  capabilities: Capabilities;
  /** the aggregate bounds on each tool result's rich content now in force (the parent's `contentLimits`, defaults filled in) */
  contentLimits: ContentLimitsWire;
}

/** `serverInfo` of the `initialize` result. */
export interface InitializeServerInfo {
  /** `"hostd"` */
  name: "hostd";
  /** hostd's version (`0.1.0`) */
  version: string;
}

/**
 * `plugins/install {path} | {serverJson}`: a plugin folder holding `plugin.yaml` or `plugin.json`,
 * an MCPB bundle file (`.mcpb` / `.dxt`), or an MCP Registry `server.json` (object or text).
 */
export interface InstallParams {
  path?: string | null;
  serverJson?: { [key: string]: unknown } | string | null;
  /** which of serverJson's packages (default: 0) */
  package?: number | null;
  /** give this install the data and secrets an uninstalled install of the same id kept, when its origin (signer, registry name, bundle file or folder) is the same; otherwise it starts with an empty data folder and no secrets (secrets belong to an install, never to an id) */
  adoptData?: boolean;
}

/**
 * `PluginInfo.launch`: what will run, for the approval prompt; everything the digest covers.
 *
 * Built from `sandbox.launch.Launch.describe()` (which stays a dict: the sandbox
 * package does not import hostd) plus the approval fields.
 */
export interface Launch {
  /** the command as the manifest wrote it (also `argv[0]`) */
  command: string;
  /** the absolute file that will be executed */
  executable: string;
  /** the real paths of what runs: the executable, then each `#!` interpreter behind it (covered by the digest) */
  runtime: string[];
  /** the arguments, passed as they are (there is never a shell) */
  args: string[];
  /** real path → `sha256:…` of the content that runs: the executable when it is a script or lies in the plugin folder, and every file in the plugin folder an argument names (covered by the digest: changing one voids the approval) */
  files: { [key: string]: string };
  /** argument → the real path it leads to, for every argument naming a folder or a file outside the plugin folder (covered by the digest: a folder swapped for a link voids the approval); `call.read[i]` / `call.write[i]`: files and folders granted at a tool call ([Call-time grants](#call-time-grants)), recorded grants the digest does not cover */
  folders: { [key: string]: string };
  /** the working directory: the plugin folder */
  cwd: string;
  /** the names of all the environment variables the plugin gets, sorted */
  envKeys: string[];
  /** the manifest's `env`: name → value, or `null` for a name that looks secret (`TOKEN`, `KEY`, `PASS`...), whose value the digest still covers */
  env: { [key: string]: string | null };
  /** the isolation layers that will be in force, in a fixed order: `shim`, `rlimits`, `no_new_privs`, `landlock-fs`, `landlock-net`, `landlock-scope`, `netns` (or `userns`), `netproxy` (the allowlist's proxy is the only way out), `pidns`, `private-proc` (the plugin's own `/proc`), `seccomp`, `seccomp-net` ([What a plugin sees](#what-a-plugin-sees)); which ones depends on `--sandbox` and on what the kernel offers */
  isolation: string[];
  /** **the digest to approve**: `sha256:…` over the launch and the manifest's exact bytes */
  digest: string;
  /** the launch's own digest (without the manifest) */
  launchDigest: string;
  /** `digest` is the approved one */
  approved: boolean;
  /** present when the manifest's launch names a package: whether it is prepared, and what was installed; a prepared launch runs the environment's program (`command`, `args` above), not the package tool */
  prepare?: Preparation | null;
  /** for a remote plugin (`backend.transport` `streamable-http` or `sse`) what the user approves instead of a program: `command` is then the transport, `executable` the URL; absent for stdio plugins */
  remote?: RemoteEndpoint | null;
  /** everything the plugin may reach, in one list: files and folders (access and why), network, environment names, secrets (name and channel), packages ([`CapabilitySet`](#capabilityset)) */
  capabilities?: CapabilitySet | null;
  /** [`ShimNote`](#shimnote): the manifest's command is a version manager's shim (pyenv, asdf, volta...), which hostd runs without the shell's setup; omitted otherwise */
  shim?: ShimNote | null;
  /** present when the arguments hold secrets (`${secret:NAME}`, a `sensitive` bundle option): their names, sorted; such a launch starts only after `plugins/grant` `secretArguments: true`, since every process of the machine reads a command line */
  secretArguments?: string[] | null;
  /** [`Accounting`](#accounting): what bounds the plugin tree's memory, processes, CPU share and disk on this machine, and why; absent for a remote plugin */
  accounting?: Accounting | null;
  /** [`NetworkAllowlist`](#networkallowlist): the hosts the plugin may reach through hostd's proxy (the manifest's `network` and the parent's `networkHosts` grants), covered by the digest; absent for a plugin without an allowlist */
  network?: NetworkAllowlist | null;
}

/** `PluginInfo.launch` when the command cannot be resolved. */
export interface LaunchUnresolved {
  /** why, for people (names the command and the `PATH` searched) */
  error: string;
  /** `COMMAND_NOT_FOUND`, `COMMAND_OUTSIDE_PLUGIN`, `ENV_POLICY`, `ISOLATION_UNAVAILABLE`, `PATH_REFUSED` or `EXEC_FAILED` (below) */
  kind: string;
  /** [`ShimNote`](#shimnote): the command is on no `PATH` hostd has, but nvm is installed and its `default` alias could not be followed (the note says why and gives the fix); omitted otherwise */
  shim?: ShimNote | null;
}

/** Per-plugin resource limits set by the parent (`plugins/grant`'s `limits`). */
export interface Limits {
  maxRssMb?: number | null;
  maxCpuPercent?: number | null;
  maxDiskMb?: number | null;
  maxTools?: number | null;
  maxListingMb?: number | null;
}

/** `tools/listChanged` params. */
export interface ListChangedParams {
  /** the registry's revision now; `tools/list` returns it (or a later one) */
  revision: number;
}

/** One line of `plugins/logs`: what `plugins/log` carried for the plugin, kept in its bounded log file. */
export interface LogLine {
  /** when hostd received it, ISO-8601 UTC with milliseconds */
  time: string;
  /** as in `plugins/log` */
  level: string;
  /** as in `plugins/log` */
  source: "stderr" | "mcp" | "stdout" | "host";
  /** the line, redacted, at most 4096 characters */
  message: string;
}

/** `plugins/log` params. */
export interface LogParams {
  /** the plugin's `id`; `null` for a message about no plugin in particular */
  plugin: string | null;
  /** `info` for stderr, the MCP level for `mcp`, `warning` or `error` otherwise */
  level: string;
  /** where the line comes from (below) */
  source: "stderr" | "mcp" | "stdout" | "host";
  /** the line, redacted, at most 4096 characters */
  message: string;
}

/** `plugins/logs {id, limit?}`: the plugin's most recent log lines, at most `limit` (default 200). */
export interface LogsParams {
  id: string;
  limit?: number;
}

/** `plugins/logs` result. */
export interface LogsResult {
  /** the most recent lines, oldest first, across restarts of the plugin and of hostd (at most `limit`) */
  lines: LogLine[];
  /** lines that fell out of the plugin's log file in the state folder (bounded at 512 KiB per plugin), across hostd processes; without a state folder, out of this hostd's ring (500 lines, 256 KiB) */
  dropped: number;
}

/** `Launch.network`: a plugin's network allowlist (manifest field `network`; issue 26). */
export interface NetworkAllowlist {
  /** entries in their canonical spelling, sorted: `name`, `*.suffix` (names below it), an address (`127.0.0.1`, `[::1]`), each with `:PORT` or, without one, ports 80 and 443 */
  hosts: string[];
  /** names that may resolve to loopback, private or link-local addresses (any other name resolving there is refused) */
  private: string[];
}

/** The parent's answer to `network/request`. */
export interface NetworkAnswer {
  /** `no`: refused (`403`, the plugin sees why); `once`: let through while the plugin runs; `always`: also recorded in the state (`networkCallHosts`), asked no more */
  grant: "no" | "once" | "always";
}

/** What network a plugin may reach (`launch.capabilities.network`). */
export interface NetworkCapability {
  /** `all` (the sandbox allows the network), `none` (`--sandbox strict`, no port granted), `ports` (strict, TCP connect to `tcpPorts` only), or `hosts` (the plugin's allowlist, enforced: its own network namespace, hostd's proxy its only way out: through `HTTP(S)_PROXY`, and transparently for clients that ignore those variables, by name on ports 80, 443 and the allowlist's own; for a remote server, the hosts hostd sends its requests to) */
  access: "all" | "none" | "ports" | "hosts";
  /** the TCP ports it may connect to under `ports` */
  tcpPorts: number[];
  /** the plugin's allowlist (`launch.network.hosts`); absent for a plugin without one */
  hosts?: string[] | null;
  /** for a plugin with an allowlist: `enforced`, or why it is not (the kernel offers no unprivileged network and pid namespaces, or `--sandbox basic`): the plugin then has the level's network (`access`), all or nothing as before */
  filtering?: string | null;
}

/**
 * hostd->parent `network/request` params: a plugin with an allowlist asks its proxy for a destination the
 * allowlist does not name (issue 26). Asked once per destination while the plugin runs; the plugin's
 * connection waits for the answer.
 */
export interface NetworkRequestParams {
  /** the plugin's `id` */
  plugin: string;
  /** the destination's host, canonical (lowercase, IDNA; an address as written) */
  host: string;
  /** the destination's TCP port */
  port: number;
  /** one sentence for the user: which plugin, which destination */
  reason: string;
  /** for an IP address that is not public: `loopback` (this machine), `private` (the local network, or a reserved or shared range), `link-local`, `multicast` or `unspecified`; a yes lets the plugin reach it. Absent for a public address and for a name (a name is resolved after the answer, and one that resolves to a non-public address is refused unless the allowlist names it in `network.private`) */
  addressKind?: "loopback" | "private" | "link-local" | "multicast" | "unspecified" | null;
}

/** `initialize`'s `oauth`: the application's OAuth client identity, for remote plugins' authorization. */
export interface OAuthSettings {
  /** the https URL where the application publishes its OAuth client ID metadata document (draft-ietf-oauth-client-id-metadata-document; MCP authorization, 2025-11-25). Where an authorization server advertises `client_id_metadata_document_supported`, hostd uses this URL as `client_id` instead of registering; elsewhere it registers dynamically. The document must list hostd's redirect URI `http://127.0.0.1/callback` (any port, RFC 8252 section 7.3). An https URL with a path other than `/`, no `.`/`..` segment, fragment, user name or password, at most 2048 characters */
  clientIdMetadataDocument?: string | null;
}

/** A package the plugin's launch runs (`launch.capabilities.packages`). */
export interface PackageCapability {
  /** `npm`, `uv` or `deno` */
  manager: string;
  /** the package's name (prepared), or the spec still to prepare */
  name: string;
  /** the exact version installed; `null` until prepared */
  version: string | null;
  /** where it came from; `null` for the default or until prepared */
  registry: string | null;
}

/** `PluginInfo.package`: the registry package a launch runs (npx, uvx, deno) and its version. */
export interface PackageVersion {
  /** the package tool whose registry the package comes from */
  manager: "npm" | "uv" | "deno";
  /** the package that provides the program, as the registry names it */
  name: string;
  /** the exact version: the one prepared (`launch.prepare.resolved`), else the one the launch pins; omitted while an unpinned launch is not yet prepared */
  version?: string | null;
  /** the launch names an exact version; `false`: the registry's current version at preparation was taken (the config did not pin one) */
  pinned: boolean;
}

/**
 * One of hostd's pages of a listing (`resources/list`, `resources/templates/list`, `prompts/list`):
 * the servers' listings walked whole and bounded (`LISTING_TOO_LARGE`), then cut into pages as
 * `tools/list` is.
 */
export interface PagedResult {
  /** hostd's cursor of the next page (pass it back as `cursor` with the same `plugin`); omitted on the last page. hostd's Python and TypeScript clients follow it. Besides it, the MCP listing's array in the server's order: `resources`, `resourceTemplates` or `prompts` (each prompt's `name` is the host name `<plugin>.<name>`, with `plugin`; `prompts/list` without `plugin`: every plugin's, in plugin id order), whose items total at most 1 MiB as compact JSON (at least one, each at most 128 KiB), so an answer always fits the 8 MiB line bound. An item whose `description` (a prompt's `arguments`' too) holds characters a person cannot see carries `invisibleCharacters: true`, as a tool does in `tools/list` */
  nextCursor?: string | null;
  /** `prompts/list` without `plugin`: the plugins whose prompts are left out, each `{plugin, kind, message}` (the error that listing by `plugin` answers: `LISTING_TOO_LARGE`, `NAME_INVALID`, `MCP_UPSTREAM_ERROR`, `TOOL_TIMEOUT`...), on every page; omitted when none failed. One plugin's failure never hides another's prompts */
  failed?: Array<{ [key: string]: string }> | null;
  [key: string]: unknown;
}

/**
 * `initialize.params.capabilities`: `{sampling?: {tools?: {}}, elicitation?: {form?: {}, url?: {}},
 * roots?: {}, grants?: {}}` (MCP client capabilities and hostd's consent requests, answered by the parent).
 */
export interface ParentCapabilities {
  /** `{tools?: {}}`: answers `sampling/createMessage` */
  sampling?: ParentFeature | null;
  /** `{form?: {}, url?: {}}`: answers `elicitation/create` */
  elicitation?: ParentFeature | null;
  /** `{}`: answers `roots/list` */
  roots?: ParentFeature | null;
  /** `{}`: answers `grants/request`, the user's consent to a file or folder a tool call names ([Call-time grants](#call-time-grants)) */
  grants?: ParentFeature | null;
  /** `{}`: answers `network/request`, the user's consent to a host a plugin's allowlist does not name (issue 26) */
  network?: ParentFeature | null;
}

/** One client feature the parent serves: an object whose members name the sub-features (`{}`: none). */
export interface ParentFeature { [key: string]: unknown }

export interface PluginCapabilities {
  /** `true`: `plugins/install` and `plugins/import` are served */
  install: boolean;
  /** `true`: `plugins/approve` is required ([Trust gate](#trust-gate)) */
  trustGate: boolean;
}

/**
 * What is installed and what the user decided. Returned by `plugins/install`, `plugins/grant`,
 * `plugins/approve`, `plugins/configure` and `plugins/list`.
 */
export interface PluginInfo {
  /** the manifest's `id`: stable identity, `^[a-z0-9][a-z0-9-]{0,62}$` */
  id: string;
  /** human-readable name */
  name: string;
  /** the plugin's version */
  version: string;
  /** the plugin folder, absolute */
  path: string;
  /** the permissions the manifest declares, in its order */
  permissions: string[];
  /** the granted ones, sorted */
  granted: string[];
  /** the user wants it running: set by `enable` (once its checks pass), cleared by `disable` (and by a cancelled `enable` or `restart`); restored on the next start */
  enabled: boolean;
  /** the current state, as in `PluginStatus.status`; `broken` when its stored files no longer load (then `name` is the id, `version` is empty, `permissions`, `tools` and `launch` are empty or `null`, and `error` says why) */
  status: string;
  /** the manifest's `contributes.tools` names, conditional ones included (a tool that needs a client feature is listed only while that feature is offered) */
  tools: string[];
  /** TCP ports the parent granted, sorted ([`plugins/grant`](#pluginsgrant)); reachable under `--sandbox strict` */
  networkPorts: number[];
  /** network allowlist entries the parent granted ([`plugins/grant`](#pluginsgrant) `networkHosts`), canonical, sorted; absent when none (`launch.network` has the whole allowlist) */
  networkHosts?: string[] | null;
  /** destinations (`host:port`) let through for good at a `network/request` (`always`), sorted; absent when none; forgotten with [`plugins/grant`](#pluginsgrant) `networkCallHosts` */
  networkCallHosts?: string[] | null;
  /** `{maxRssMb, maxCpuPercent, maxDiskMb, maxTools, maxListingMb}` granted to this plugin (`null` members: the host's limits apply) */
  limits: GrantedLimits;
  /** [`Launch`](#launch): what will run, for the approval prompt; [`LaunchUnresolved`](#launchunresolved) `{error, kind}` when the command cannot be resolved */
  launch: Launch | LaunchUnresolved | null;
  /** the settings `plugins/configure` takes (bundle `user_config`, registry variables, secrets); omitted when none */
  userConfig?: ConfigItem[] | null;
  /** for a plugin installed from a bundle or `server.json`: `{kind, source, sha256?, signature?, signer?, runtimes?, runtimeVersions?}` (`signature`: `unsigned`, `unverified` or `verified`; `signer`: a verified bundle's certificate subject; `runtimes`: the bundle's `compatibility.runtimes`; `runtimeVersions`: the versions its launch's runtimes reported when this hostd installed it); omitted otherwise */
  origin?: { [key: string]: unknown } | null;
  /** [`PackageVersion`](#packageversion) `{manager, name, version?, pinned}`: the registry package its launch runs (an imported `npx`/`uvx` entry, whose manifest `version` is a placeholder); omitted when the launch names no package */
  package?: PackageVersion | null;
  /** for a `broken` plugin: `{kind: "PLUGIN_BROKEN", message, plugin, path, source, reason, errors}` (`source`: `manifest` or `state`, which stored file no longer loads; `errors`: `[{field, message}]`); omitted otherwise */
  error?: { [key: string]: unknown } | null;
  /** the host names of the tools the user disabled ([`tools/setEnabled`](#toolssetenabled)), sorted: kept in the state whether or not the plugin runs; omitted when none */
  disabledTools?: string[] | null;
  /** `true` for a plugin [`plugins/import`](#pluginsimport) installed from a client config: its manifest `version` is a placeholder (`0.0.0`), not the server's; the version that runs is `package.version` when its launch runs a registry package, else unknown until the server reports its own (`PluginStatus.server_version`, then `serverInfo`); omitted otherwise */
  imported?: true | null;
  /** the MCP `serverInfo` `{name, version}` the server reported at its last successful start, kept in the state (each at most 200 characters): known while it is stopped, and by a later hostd; omitted before its first start and when it reported no version */
  serverInfo?: { [key: string]: string } | null;
  /** the host names of the tools the first discovery after the approval pinned ([Trust gate](#trust-gate)), sorted: known while it is stopped (`hostctl tools` shows them for a server whose manifest declares none, an imported one); omitted before that discovery */
  pinnedTools?: string[] | null;
}

/** `resources/listChanged` and `prompts/listChanged` params. */
export interface PluginNoteParams {
  /** the plugin's `id`: list again with `plugin` */
  plugin: string;
}

/**
 * `resources/list` and `resources/templates/list` `{plugin, cursor?}`: `cursor` is hostd's (the
 * `nextCursor` of the previous page).
 */
export interface PluginPageParams {
  plugin: string;
  cursor?: string | null;
}

/** `{id}`: uninstall, enable, disable, restart, status. */
export interface PluginRef {
  id: string;
}

/**
 * What is running. Returned by `plugins/enable`, `plugins/disable`, `plugins/restart`,
 * `plugins/status`, and sent as `plugins/statusChanged`. Times are ISO-8601 UTC with milliseconds
 * (`2026-11-30T19:19:06.453Z`).
 */
export interface PluginStatus {
  /** the plugin's `id` */
  plugin_id: string;
  /** `"mcp"` */
  backend_type: string;
  /** `"stdio"`, `"streamable-http"` or `"sse"`; `"unknown"` for a `broken` plugin */
  transport: string;
  /** `stopped`, `starting`, `ready`, `unhealthy` or `error` ([Plugin states](#plugin-states)); `authorizing` while a starting remote plugin waits for the person to authorize it in the browser ([docs/remote.md](remote.md)); `broken` for an installed plugin whose stored files (its manifest, its record in the state) no longer load: never started, `error` is `PLUGIN_BROKEN` saying why */
  status: "stopped" | "starting" | "authorizing" | "ready" | "unhealthy" | "error" | "broken";
  /** tools registered now (0 unless `ready`; withheld tools are not counted) */
  tools_count: number;
  /** when the current (or last) instance became ready */
  started_at: string | null;
  /** when the plugin last sent a message */
  last_seen_at: string | null;
  /** the MCP version negotiated with the plugin */
  protocol_version: string | null;
  /** `"legacy"` (the `initialize` handshake) or `"modern"` (2026-07-28, per-request `_meta`); `null` before the first start */
  era?: "legacy" | "modern" | null;
  /** the MCP server's `serverInfo.name` */
  server_name: string | null;
  /** the MCP server's `serverInfo.version` */
  server_version: string | null;
  /** why it is `error` or `unhealthy`: `{kind, message, …data}`, the same fields as the error a request would get (`reason`, `stderrTail`, `problems`, `missing`, `unexpected`, …); for a plugin the resource watchdog stopped, also `limit: {limit, value, threshold}` (`limit` is `"rss"` (bytes), `"cpu"` (percent of one core) or `"disk"` (bytes allocated beneath the data folder and `TMPDIR`)); `null` once it starts again */
  error: { [key: string]: unknown } | null;
  /** restarts so far, by `plugins/restart` or automatic; kept in the state */
  restarts: number;
  /** how the last instance ended: `"<step>, code <returncode>"`, `step` one of `already-exited` (it exited by itself), `stdin-eof` (it exited when its stdin closed), `sigterm`, `sigkill`; a negative code is a signal */
  last_exit: string | null;
  /** when the next automatic restart is due, while one is pending */
  next_retry_at: string | null;
  /** tools held back because their definition changed since approval ([Trust gate](#trust-gate)) */
  withheld: string[];
  /** the isolation layers the running (or last) instance actually has, as its supervisor shim reported them after applying them (in the order of `launch.isolation`; a spawn that cannot apply every layer of the launch fails with `ISOLATION_FAILED`); `[]` before the first start */
  isolation: string[];
  /** in a `plugins/enable` or `plugins/restart` result only: the tools this start pinned and serves on first use (the first start after an approval; [Trust gate](#trust-gate)), sorted host names; omitted otherwise */
  pinned?: string[] | null;
}

/** `plugins/list` result. */
export interface PluginsListResult {
  /** every installed plugin, sorted by `id` */
  plugins: PluginInfo[];
}

/**
 * `Launch.prepare`: the install-time preparation of a launch that names a package.
 *
 * npx, uvx, uv run --with, deno run / deno x of an npm: or jsr: module.
 */
export interface Preparation {
  /** `needed`: `plugins/prepare` must run before enable; `prepared`: the launch runs from `root` */
  state: "needed" | "prepared";
  /** the package tool whose registry the packages come from */
  manager: "npm" | "uv" | "deno";
  /** the packages as the launch names them, the one providing the program first */
  packages: string[];
  /** package → the exact version installed (an unpinned request is resolved here) */
  resolved?: { [key: string]: string } | null;
  /** `sha256:…` of the environment's lock (every package installed; covered by the digest) */
  lockfile?: string | null;
  /** the prepared environment folder (read-only to the plugin) */
  root?: string | null;
  /** the registry or index the packages came from */
  registry?: string | null;
  /** the requested packages that named no exact version: the installer resolved them (to the versions in `resolved`), and the approval shows that it did */
  unpinned?: string[] | null;
  /** `true`: source builds were allowed (`plugins/prepare {allowBuild}`) */
  build?: boolean | null;
}

/** `plugins/prepare {id, allowBuild?}`. */
export interface PrepareParams {
  id: string;
  /** let a Python package with no wheel for this machine be built from source (its build backend runs, sandboxed); the approval shows it (`prepare.build`). Without it such a package fails with `PREPARE_FAILED` reason `source-build-required` */
  allowBuild?: boolean;
}

/** `$/progress` params. */
export interface ProgressParams {
  /** the `id` of the `tools/call` */
  requestId: number | string;
  /** progress so far (a number, as the plugin sent it) */
  progress: number;
  /** the total, when the plugin gave one */
  total?: number | null;
  /** the plugin's message, at most 1024 bytes (cut with `…`; see Flow control) */
  message?: string | null;
}

/** `prompts/get {name, arguments?}`; `name` is the host name `<plugin>.<prompt>`. */
export interface PromptsGetParams {
  name: string;
  arguments?: { [key: string]: string } | null;
}

/**
 * `prompts/list {plugin?, cursor?}`: `cursor` is hostd's (the `nextCursor` of the previous page of
 * the plugin's prompts, or of every plugin's without `plugin`).
 */
export interface PromptsListParams {
  plugin?: string | null;
  cursor?: string | null;
}

/** `resources/read` result: the server's, bounded like a tool result. */
export interface ReadResourceResult {
  /** the MCP `contents` (`{uri, mimeType?, text}` or `{uri, mimeType?, blob}`); a blob over `contentLimits.maxBlobBytes` is replaced by a text item naming its size and the bound */
  contents: Array<{ [key: string]: unknown }>;
  [key: string]: unknown;
}

/** `Launch.remote`: the endpoint of a remote plugin, everything its launch digest covers. */
export interface RemoteEndpoint {
  /** `streamable-http` or `sse` (legacy HTTP+SSE) */
  transport: "streamable-http" | "sse";
  /** the server's endpoint */
  url: string;
  /** the headers hostd sends: name → value, or `null` when the value is a `${secret:NAME}` reference or the name looks secret (`Authorization`, `*-Token`…); the digest covers names and literal values */
  headers: { [key: string]: string | null };
  /** hosts that may resolve to a private or link-local address */
  allowPrivate: string[];
  /** `auto`, `legacy` or a pinned modern version */
  protocol: string;
  /** `backend.oauth`: `{clientId?, clientSecret?, scope?}` (the secret as its `${secret:NAME}` reference), or `null` */
  oauth: { [key: string]: string } | null;
}

/** One file or folder a `grants/request` asks for. */
export interface RequestedPath {
  /** the real path to grant (a file, a folder, or the folder of an output to create) */
  path: string;
  /** `read`, or `write` (read-write: the tool writes there) */
  access: "read" | "write";
  /** where the call names it: a JSON Pointer into `arguments` (`/input/0`) */
  argument: string;
  /** the argument as the caller wrote it (`~/Documents/q3.xlsx`, `file:///…`) */
  value: string;
}

/** `resources/read`, `resources/subscribe`, `resources/unsubscribe` `{plugin, uri}`. */
export interface ResourceParams {
  plugin: string;
  uri: string;
}

/** `resources/updated` params (after `resources/subscribe`). */
export interface ResourceUpdatedParams {
  /** the plugin's `id` */
  plugin: string;
  /** the resource that changed: read it again */
  uri: string;
}

/** `plugins/revokePath {id, path}`: take back a call-time grant (`once` or `always`). */
export interface RevokePathParams {
  /** the plugin's `id` */
  id: string;
  /** the path as granted (absolute, or `~/…`) */
  path: string;
}

/** hostd->parent `roots/list` params. */
export interface RootsRequestParams {
  /** the plugin's `id`; answer MCP `{roots: [{uri, name?}]}`: hostd passes on only `file://` roots inside the folders the plugin was granted */
  plugin: string;
}

/** hostd->parent `sampling/createMessage` and `elicitation/create` params. */
export interface SamplingRequestParams {
  /** the plugin's `id` whose server asks */
  plugin: string;
  /** the server's MCP params, as sent (elicitation: `mode` `form` with `requestedSchema`, or `url` with `url`: hostd never opens it). Answer with the MCP result; it goes back to the server as is */
  params: { [key: string]: unknown };
}

/** A secret a plugin receives, by name and channel (`launch.capabilities.secrets`); never its value. */
export interface SecretCapability {
  /** the secret's name (`${secret:NAME}`, or a sensitive `user_config` option) */
  name: string;
  /** how it travels: an environment variable, a command-line argument (readable by other processes of the machine), an HTTP header to a remote server, or a file readable by the plugin only (`0600`, in its private TMPDIR, removed when it stops; `${user_config.NAME:file}` / `${secret:NAME:file}` in `args` or `env`, which hold only its path) */
  channel: "env" | "argv" | "header" | "file";
  /** whether a value is stored */
  set: boolean;
}

/** `plugins/setLogLevel {id, level}`: an MCP log level. */
export interface SetLogLevelParams {
  id: string;
  level: "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency";
}

/** `Launch.shim`: the command found on `PATH` is a version manager's shim (hostd/install/shims.py). */
export interface ShimNote {
  /** `pyenv`, `rbenv`, `nodenv`, `asdf`, `mise`, `volta` or `nvm` */
  manager: string;
  /** the shim as found on `PATH`; for nvm, which has none (its `node` is on `PATH` only in a shell that loaded it), its `nvm.sh` */
  shim: string;
  /** the real program the manager picks, read from its version files (hostd runs this: it is `executable`); omitted when it cannot be read safely (then the launch runs the shim, which likely fails) */
  resolved?: string | null;
  /** the version picked */
  version?: string | null;
  /** the file or variable it was picked from */
  source?: string | null;
  /** what it means, for people (with the fix when `resolved` is absent) */
  message: string;
  /** when `resolved` is absent: why hostd did not follow the manager's choice (no version set, `system`, a version not installed, one that is no folder name or leads out of the manager's folder) */
  reason?: string | null;
}

export interface ToolCapabilities {
  /** `true`: `tools/listChanged` is sent */
  listChanged: boolean;
  /** `true`: `$/progress` is sent */
  progress: boolean;
}

/** `tools/setEnabled` result. */
export interface ToolEnabledResult {
  /** the tool's host name (`<plugin id>.<MCP tool name>`) */
  name: string;
  /** the plugin's `id` */
  plugin: string;
  /** what is now recorded in the state (the plugin is not restarted) */
  enabled: boolean;
  /** the registry's revision after the change (also sent as `tools/listChanged`) */
  revision: number;
}

/** `tools/setEnabled {name, enabled}`: `name` is the host name (`<plugin>.<tool>`) or `function_name`. */
export interface ToolSetEnabledParams {
  name: string;
  enabled: boolean;
}

/** `tools/call {name, arguments, timeoutMs?}`; `name` is the host name or `function_name`. */
export interface ToolsCallParams {
  name: string;
  arguments?: { [key: string]: unknown };
  timeoutMs?: number | null;
}

/**
 * `tools/call` result. Documentation only: hostd forwards the plugin's own bytes
 * (`orjson.Fragment`) and never routes a result through this model.
 */
export interface ToolsCallResult {
  /** the MCP result's `content` array (text, image, audio, resource items, as MCP defines them), as the bytes the plugin wrote */
  content: Array<{ [key: string]: unknown }>;
  /** the MCP `structuredContent` when the tool returned one; omitted otherwise */
  structuredContent?: unknown;
  [key: string]: unknown;
}

/**
 * `tools/list {plugin?, includeDisabled?, cursor?}`; `includeDisabled`: list the tools the user disabled
 * too (with `enabled: false`); `cursor`: the `nextCursor` of the previous page (absent: the first page).
 */
export interface ToolsListParams {
  plugin?: string | null;
  includeDisabled?: boolean;
  cursor?: string | null;
}

/** `tools/list` result: one page of the registered tools. */
export interface ToolsListResult {
  /** the registered tools (only `plugin`'s when given), sorted by `name`: one page, whose tools total at most 1 MiB as JSON (at least one tool), so an answer always fits the 8 MiB line bound */
  tools: HostTool[];
  /** goes up on every change of the registry; the one `tools/listChanged` carries */
  revision: number;
  /** pass it back as `cursor` (with the same `plugin` and `includeDisabled`) for the next page; omitted on the last page. hostd's Python and TypeScript clients and hostctl follow it */
  nextCursor?: string | null;
}

/** Requests the parent sends; hostd answers with `result`. */
export interface Requests {
  /** `initialize {clientInfo?, protocolVersion?, knownPermissions?, stateDir?, contentLimits?, capabilities?, oauth?}`: the first request; its answer is the readiness signal. */
  initialize: {
    params: InitializeParams;
    result: InitializeResult;
  };
  ping: {
    params: Record<string, never>;
    result: Empty;
  };
  shutdown: {
    params: Record<string, never>;
    result: null;
  };
  /** `plugins/install {path} | {serverJson}`: a plugin folder holding `plugin.yaml` or `plugin.json`, an MCPB bundle file (`.mcpb` / `.dxt`), or an MCP Registry `server.json` (object or text). */
  "plugins/install": {
    params: InstallParams;
    result: PluginInfo;
  };
  /** `plugins/import {config}`: an `mcpServers` / `servers` config, as text (JSON with comments allowed) or as an object. */
  "plugins/import": {
    params: ImportParams;
    result: ImportResult;
  };
  /** `{id}`: uninstall, enable, disable, restart, status. */
  "plugins/uninstall": {
    params: PluginRef;
    result: null;
  };
  /** `plugins/list` result. */
  "plugins/list": {
    params: Record<string, never>;
    result: PluginsListResult;
  };
  /** `plugins/grant {id, permissions, networkPorts?, limits?, folders?}`: what the user allows (replaces). */
  "plugins/grant": {
    params: GrantParams;
    result: PluginInfo;
  };
  /** `plugins/grantPath {id, path, access?}`: grant one file or folder for good (a call-time grant). */
  "plugins/grantPath": {
    params: GrantPathParams;
    result: PluginInfo;
  };
  /** `plugins/revokePath {id, path}`: take back a call-time grant (`once` or `always`). */
  "plugins/revokePath": {
    params: RevokePathParams;
    result: PluginInfo;
  };
  /** `plugins/approve {id, digest}`: approve the exact launch `plugins/install` showed. */
  "plugins/approve": {
    params: ApproveParams;
    result: PluginInfo;
  };
  /** `{id}`: uninstall, enable, disable, restart, status. */
  "plugins/enable": {
    params: PluginRef;
    result: PluginStatus;
  };
  /** `{id}`: uninstall, enable, disable, restart, status. */
  "plugins/disable": {
    params: PluginRef;
    result: PluginStatus;
  };
  /** `{id}`: uninstall, enable, disable, restart, status. */
  "plugins/restart": {
    params: PluginRef;
    result: PluginStatus;
  };
  /** `{id}`: uninstall, enable, disable, restart, status. */
  "plugins/status": {
    params: PluginRef;
    result: PluginStatus;
  };
  /** `tools/list {plugin?, includeDisabled?, cursor?}`; `includeDisabled`: list the tools the user disabled too (with `enabled: false`); `cursor`: the `nextCursor` of the previous page (absent: the first page). */
  "tools/list": {
    params: ToolsListParams;
    result: ToolsListResult;
  };
  /** `tools/call {name, arguments, timeoutMs?}`; `name` is the host name or `function_name`. */
  "tools/call": {
    params: ToolsCallParams;
    result: ToolsCallResult;
  };
  /** `tools/setEnabled {name, enabled}`: `name` is the host name (`<plugin>.<tool>`) or `function_name`. */
  "tools/setEnabled": {
    params: ToolSetEnabledParams;
    result: ToolEnabledResult;
  };
  /** `plugins/configure {id, values}`: set (`null`: unset) the plugin's `user_config` values and secrets. */
  "plugins/configure": {
    params: ConfigureParams;
    result: PluginInfo;
  };
  /** `plugins/prepare {id, allowBuild?}`. */
  "plugins/prepare": {
    params: PrepareParams;
    result: PluginInfo;
  };
  /** `{id}`: uninstall, enable, disable, restart, status. */
  "plugins/logout": {
    params: PluginRef;
    result: PluginStatus;
  };
  /** `auth/callback`: the authorization server's redirect, for a parent that catches it itself. */
  "auth/callback": {
    params: AuthCallbackParams;
    result: Empty;
  };
  /** `plugins/logs {id, limit?}`: the plugin's most recent log lines, at most `limit` (default 200). */
  "plugins/logs": {
    params: LogsParams;
    result: LogsResult;
  };
  /** `plugins/setLogLevel {id, level}`: an MCP log level. */
  "plugins/setLogLevel": {
    params: SetLogLevelParams;
    result: Empty;
  };
  /** `resources/list` and `resources/templates/list` `{plugin, cursor?}`: `cursor` is hostd's (the `nextCursor` of the previous page). */
  "resources/list": {
    params: PluginPageParams;
    result: PagedResult;
  };
  /** `resources/list` and `resources/templates/list` `{plugin, cursor?}`: `cursor` is hostd's (the `nextCursor` of the previous page). */
  "resources/templates/list": {
    params: PluginPageParams;
    result: PagedResult;
  };
  /** `resources/read`, `resources/subscribe`, `resources/unsubscribe` `{plugin, uri}`. */
  "resources/read": {
    params: ResourceParams;
    result: ReadResourceResult;
  };
  /** `resources/read`, `resources/subscribe`, `resources/unsubscribe` `{plugin, uri}`. */
  "resources/subscribe": {
    params: ResourceParams;
    result: Empty;
  };
  /** `resources/read`, `resources/subscribe`, `resources/unsubscribe` `{plugin, uri}`. */
  "resources/unsubscribe": {
    params: ResourceParams;
    result: Empty;
  };
  /** `prompts/list {plugin?, cursor?}`: `cursor` is hostd's (the `nextCursor` of the previous page of the plugin's prompts, or of every plugin's without `plugin`). */
  "prompts/list": {
    params: PromptsListParams;
    result: PagedResult;
  };
  /** `prompts/get {name, arguments?}`; `name` is the host name `<plugin>.<prompt>`. */
  "prompts/get": {
    params: PromptsGetParams;
    result: GetPromptResult;
  };
  /** `completion/complete {plugin, ref, argument, context?}`: MCP's `ref` (`{type: "ref/prompt", name}` or `{type: "ref/resource", uri}`), `argument` `{name, value}`. */
  "completion/complete": {
    params: CompleteParams;
    result: CompleteResult;
  };
}

/** Notifications hostd sends the parent (their params). */
export interface Notifications {
  /** What is running. Returned by `plugins/enable`, `plugins/disable`, `plugins/restart`, `plugins/status`, and sent as `plugins/statusChanged`. Times are ISO-8601 UTC with milliseconds (`2026-11-30T19:19:06.453Z`). */
  "plugins/statusChanged": PluginStatus;
  /** `tools/listChanged` params. */
  "tools/listChanged": ListChangedParams;
  /** `plugins/log` params. */
  "plugins/log": LogParams;
  /** `$/progress` params. */
  "$/progress": ProgressParams;
  /** `resources/updated` params (after `resources/subscribe`). */
  "resources/updated": ResourceUpdatedParams;
  /** `resources/listChanged` and `prompts/listChanged` params. */
  "resources/listChanged": PluginNoteParams;
  /** `resources/listChanged` and `prompts/listChanged` params. */
  "prompts/listChanged": PluginNoteParams;
}

/** Requests hostd sends the parent; the parent answers with `result`. */
export interface ParentRequests {
  /** hostd->parent `sampling/createMessage` and `elicitation/create` params. */
  "sampling/createMessage": {
    params: SamplingRequestParams;
    result: unknown;
  };
  /** hostd->parent `sampling/createMessage` and `elicitation/create` params. */
  "elicitation/create": {
    params: SamplingRequestParams;
    result: unknown;
  };
  /** hostd->parent `roots/list` params. */
  "roots/list": {
    params: RootsRequestParams;
    result: unknown;
  };
  /** hostd->parent `grants/request` params: a tool call names files the plugin may not reach. */
  "grants/request": {
    params: GrantRequestParams;
    result: GrantAnswer;
  };
  /** hostd->parent `network/request` params: a plugin with an allowlist asks its proxy for a destination the allowlist does not name (issue 26). Asked once per destination while the plugin runs; the plugin's connection waits for the answer. */
  "network/request": {
    params: NetworkRequestParams;
    result: NetworkAnswer;
  };
}

/** Notifications the parent sends hostd (their params). */
export interface ParentNotifications {
  initialized: Record<string, never>;
  /** `$/cancelRequest {id}`: cancel the parent's request `id` (it is still answered, with -32800). */
  "$/cancelRequest": CancelParams;
  exit: Record<string, never>;
}

/** `error.data.kind` -> `error.code`, for every error hostd answers with. */
export const ErrorCodes = {
  /** A frame from the parent exceeded the control channel's bound. */
  FRAME_TOO_LARGE: -32001,
  /** A request other than initialize arrived before initialize. */
  SERVER_NOT_INITIALIZED: -32002,
  /** No installed plugin has that id. */
  PLUGIN_NOT_FOUND: -32010,
  /** The plugin's manifest is missing or invalid; data.errors lists each field. */
  MANIFEST_INVALID: -32011,
  /** A plugin with that id is installed from another folder. */
  PLUGIN_ALREADY_INSTALLED: -32012,
  /** A permission the plugin declares has not been granted. */
  PERMISSION_NOT_GRANTED: -32013,
  /** A permission is not among the parent's knownPermissions. */
  PERMISSION_UNKNOWN: -32014,
  /** The plugin's exact launch has not been approved. */
  MCP_TRUST_APPROVAL_REQUIRED: -32015,
  /** The request does not fit the plugin's current state. */
  PLUGIN_STATE_CONFLICT: -32016,
  /** The plugin could not be started; data.stderrTail has its last lines, data.stderrHead its first when lines were left out between, data.hint what the sandbox refused. */
  PLUGIN_START_FAILED: -32017,
  /** The plugin crashed, broke framing or was stopped during the call. */
  PLUGIN_HOST_UNAVAILABLE: -32018,
  /** A tool name is already registered by another plugin. */
  TOOL_CONFLICT: -32019,
  /** No registered tool has that name. */
  TOOL_NOT_FOUND: -32020,
  /** The arguments do not match the tool's inputSchema; data.pointer says where. */
  INVALID_ARGUMENTS: -32021,
  /** The tool did not answer in time; the plugin was sent notifications/cancelled. */
  TOOL_TIMEOUT: -32022,
  /** The tool answered with isError: true; data.content carries its content. */
  MCP_TOOL_CALL_FAILED: -32023,
  /** The tool's result exceeded the result bound. */
  MCP_TOOL_RESULT_TOO_LARGE: -32024,
  /** The plugin answered with a JSON-RPC error (in data.upstream) or an invalid result. */
  MCP_UPSTREAM_ERROR: -32025,
  /** hostd is shutting down and takes no new work. */
  SHUTTING_DOWN: -32026,
  /** Another hostd uses the state directory; this one exits with code 75. */
  STATE_LOCKED: -32027,
  /** The state directory or document cannot be used; this hostd exits with code 78. */
  STATE_UNUSABLE: -32028,
  /** The manifest changed on disk since it was approved; approve it again. */
  MANIFEST_CHANGED: -32029,
  /** The tool's definition changed since approval; it is withheld until approved again. */
  TOOL_DEFINITION_CHANGED: -32030,
  /** The config cannot be imported; data.entries gives each entry's outcome. */
  IMPORT_INVALID: -32031,
  /** The state document could not be written (data.errno: ENOSPC...); nothing of the request was applied. */
  STATE_WRITE_FAILED: -32032,
  /** Too many requests are in flight (data.maxInFlight, data.maxInFlightBytes); nothing was done: retry later. */
  HOST_OVERLOADED: -32033,
  /** The server (or the parent) did not declare the capability the method needs; data.capability names it. */
  CAPABILITY_NOT_SUPPORTED: -32034,
  /** hostd asked the parent (sampling, elicitation, roots) and got an error, no answer in time, or a cancel. */
  PARENT_REQUEST_FAILED: -32035,
  /** The user disabled the tool (tools/setEnabled); it is not listed and not called until enabled again. */
  TOOL_DISABLED: -32037,
  /** A file of the state folder the request needs (the secrets file, a plugin's settings) cannot be read; data.path and data.errno say which and why: make it a readable file or move it away, then retry. */
  STATE_FILE_UNREADABLE: -32038,
  /** The plugin's stored files (its manifest, its record in state.json) no longer load; data.source, data.reason and data.errors say which and why: fix them and send SIGHUP or restart hostd, or uninstall it. */
  PLUGIN_BROKEN: -32039,
  /** A required setting (user_config value or secret) is not set; data.missing names each: plugins/configure. */
  CONFIG_REQUIRED: -32040,
  /** The .mcpb bundle or server.json cannot be installed; data.errors says where and why. */
  PACKAGE_INVALID: -32041,
  /** The plugin's packages could not be prepared (data.reason: unreachable, not-found, failed, unsupported, spec-unsupported, tool-missing, no-entry, host-refused: an installer tried to reach a host that is not a registry in use; data.registry, data.output); nothing of it is used. */
  PREPARE_FAILED: -32042,
  /** The plugin's launch names a package that is not prepared yet: call plugins/prepare first. */
  PLUGIN_NOT_PREPARED: -32043,
  /** The machine or hostd ran out of a resource (data.resource: descriptors, processes, memory, disk; data.errno); transient (data.transient: true): the request may work once some is freed, retry it then. */
  RESOURCE_EXHAUSTED: -32044,
  /** The tool's plugin is installed but not ready (data.state: stopped, starting, unhealthy, error; data.nextRetryAt while a restart is due); data.transient says whether retrying later may work. */
  PLUGIN_NOT_READY: -32045,
  /** The launch would put a secret (data.secrets: its names) on the command line, where every process of the machine reads it in /proc/<pid>/cmdline: pass it through env, or as a 0600 file whose path the argument names (${user_config.NAME:file} or ${secret:NAME:file} in the manifest; data.remedy), or opt in with plugins/grant secretArguments: true (shown in launch.secretArguments, a new digest to approve). */
  SECRET_IN_ARGUMENTS: -32049,
  /** A plugin listed more tools (prompts, resources, resource templates) than its bound: data.listing, what it sent (data.count, data.bytes: compact JSON) and the bounds (data.maxCount, default 1024; data.maxBytes, default 16 MiB); plugins/grant limits.maxTools / limits.maxListingMb set them per plugin. Or one prompt, resource or resource template over 128 KiB (data.index, data.itemBytes, data.maxItemBytes), which no page of hostd's could hold. */
  LISTING_TOO_LARGE: -32050,
  /** A tools/call names a local file or folder the plugin may not reach, and the parent did not grant it (data.reason: declined, no-capability, refused); data.grants holds the plugins/grantPath params that would, data.commands the hostctl commands. The server never saw the call. */
  ACCESS_NOT_GRANTED: -32052,
  /** A plugin's server listed a tool or prompt whose name breaks MCP's rule (data.rule: 1 to 128 characters of A-Z, a-z, 0-9, '_', '-', '.'): data.what (tool, prompt), data.index (its place in the listing), data.name (escaped), data.character (U+XXXX) and data.position, or data.length; a tool listing's other problems are in data.problems. Names are an allowlist: names that differ only by invisible characters would look alike everywhere they are shown. */
  NAME_INVALID: -32059,
  /** hostd's answer would exceed the parent's line bound (8 MiB, the bound hostd's Python and TypeScript clients read): data.bytes, data.limit. It is sent in the answer's place (a --max-result-bytes over the line bound lets a tool result grow so); a notification over the bound is dropped and logged. */
  ANSWER_TOO_LARGE: -32060,
  /** The launch takes a secret as a 0600 file (${secret:NAME:file}; data.secrets: the names), but the plugin has no private TMPDIR to hold it (hostd runs without a state folder): run hostd with a state folder. */
  SECRET_FILE_UNAVAILABLE: -32062,
  /** The JSON value is not a valid JSON-RPC 2.0 request. */
  INVALID_REQUEST: -32600,
  /** No such method. */
  METHOD_NOT_FOUND: -32601,
  /** The params do not match the method's schema. */
  INVALID_PARAMS: -32602,
  /** A bug in hostd; the message says where. */
  INTERNAL_ERROR: -32603,
  /** The frame is not valid JSON (or not UTF-8). */
  PARSE_ERROR: -32700,
  /** The parent cancelled the request with $/cancelRequest. */
  REQUEST_CANCELLED: -32800,
} as const;

/** hostd's stable symbolic error names (`error.data.kind`). */
export type ErrorKind = keyof typeof ErrorCodes;
