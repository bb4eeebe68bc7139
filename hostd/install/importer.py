"""Import of the MCP server configs people already have, with no I/O in it.

Accepted forms (JSON, with ``//`` and ``/* */`` comments and trailing commas
tolerated, as editors write them):

- ``{"mcpServers": {name: {command, args?, env?, cwd?}}}``: Claude Desktop,
  Cursor, Windsurf and most others; an entry with ``url`` (or ``serverUrl``)
  is a remote server.
- ``{"servers": {name: {type?, command, args?, env?, url?}}}``: VS Code's
  ``.vscode/mcp.json``; also nested as ``{"mcp": {"servers": …}}`` in its
  settings.

:func:`plan_import` turns a config into one :class:`ImportedServer` per server:
a sanitised, collision-free plugin id and a generated manifest (with
``contributes.discover: true``, since such configs declare no tools: their
tools are pinned on first use, :mod:`hostd.plugins.trust`), or the reason it cannot
be imported. An entry an earlier import installed keeps its id and is
``unchanged`` or ``updated``. A remote (``url``) entry becomes a remote
plugin (hostd/remote/endpoint.py); a credential header's value is never copied. The host writes the manifests and
installs
them all-or-nothing (``plugins/import``).

A local server's manifest gets an empty network allowlist (``network: {hosts: []}``, :data:`IMPORTED_NETWORK`;
issue 26: "imported configs start with an empty allowlist plus whatever the parent grants"): where the kernel
can enforce it, it runs in its own network namespace behind hostd's proxy, and each destination is asked of the
parent (``network/request``; ``hostctl call`` asks in the terminal) or refused; a grant (``plugins/grant
networkHosts``, ``hostctl grant ID --host HOST``) adds hosts. Where it cannot be enforced (no unprivileged
namespaces, ``--sandbox basic``) the launch says so (``launch.capabilities.network.filtering``) and the plugin
has the level's network, as before.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyjson5

from hostd.storage.secrets import split_secrets
from hostd.wire.jsonlimits import DocumentRefused, check_document

Outcome = Literal["ready-to-install", "unchanged", "updated", "invalid"]

_ID_MAX = 63

#: The permissions an imported manifest declares (requested, never granted by the import): the
#: reserved client-feature permissions (hostd.mcp.client_features.CLIENT_FEATURE_PERMISSIONS), so the user can
#: let an imported server use sampling, elicitation or roots with ``plugins/grant``. A server that
#: lists more tools once offered a feature gets them withheld until approved again (hostd.plugins.trust:
#: an imported plugin's tools are pinned on first use).
IMPORTED_PERMISSIONS = ("mcp.sampling", "mcp.elicitation", "mcp.roots")

#: The network field of an imported local server's manifest (module text): no host until one is granted or answered.
IMPORTED_NETWORK: dict[str, list[str]] = {"hosts": []}
#: The note each imported local server gets (short: it is a cell of hostctl's import table): no host yet, and
#: each one it asks for is asked of the parent (or refused with the hostctl command that grants it).
IMPORTED_NETWORK_NOTE = "network hosts: none, each asked"

MAX_IMPORT_ENTRIES = 500
"""Most servers one ``plugins/import`` accepts (each becomes a plugin folder and a supervisor)."""

MAX_IMPORT_BYTES = 1024 * 1024
"""Largest config text ``plugins/import`` accepts, in bytes of UTF-8."""
_WINDOWS_SUFFIXES = (".cmd", ".exe", ".bat", ".ps1")


class ConfigError(ValueError):
    """The config as a whole is unreadable; the message says where, ``field`` too when known (a dotted path)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class ImportedServer:
    """One server of the config: its outcome, plugin id, manifest and notes."""

    name: str
    outcome: Outcome
    plugin_id: str | None = None
    manifest: dict[str, Any] | None = None
    message: str | None = None
    notes: list[str] = field(default_factory=list)
    url: str | None = None
    #: The field of the entry ``message`` is about (``env.API_KEY``, ``args.2``, ``url``), when one is.
    at: str | None = None
    #: Secret values taken out of the entry (env variables, credential headers): ``{secret NAME: value}``.
    #: The manifest holds ``${secret:NAME}`` in their place; the host puts these in its secret store.
    #: Never on the wire, never written with the manifest.
    secret_values: dict[str, str] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The entry as reported by ``plugins/import``."""
        out: dict[str, Any] = {"name": self.name, "outcome": self.outcome, "id": self.plugin_id}
        if self.message is not None:
            out["message"] = self.message
        if self.notes:
            out["notes"] = list(self.notes)
        if self.url is not None:
            out["url"] = self.url
        if self.at is not None:
            out["field"] = self.at
        return out


def parse_jsonc(text: str) -> Any:
    """Parse a config as editors write it: JSON plus ``//`` and ``/* */`` comments and trailing commas.

    The parser is a JSON5 one (``pyjson5``, compiled): it tokenises strings
    before anything else, so commas, brackets and comment markers inside a
    string are its text (issue 11: a hand-written stripper's trailing-comma
    pass ran inside strings and turned ``"a, ]b"`` into ``"a ]b"``). JSON5
    accepts a little more than JSONC (single quotes, unquoted keys, hex);
    harmless for a config. Nesting is bounded by the parser (32 levels), and
    time is linear (~2 ms per MiB; the pure-Python ``json5`` package took 24 s
    for a 1 MiB config, which ``MAX_IMPORT_BYTES`` allows).

    Raises:
        ConfigError: not JSON5 (the message says where), an unterminated
            comment, nesting deeper than 32, a lone surrogate escape.
    """
    try:
        return pyjson5.decode(text)
    except pyjson5.Json5Exception as exc:
        raise ConfigError(f"not JSON: {exc.args[0] if exc.args else exc}") from None


def parse_config(config: str | Mapping[str, Any]) -> dict[str, Any]:
    """The ``name -> server`` table of a config (text or already-parsed object).

    Raises :class:`ConfigError` when it is not JSON, has no server table, is over
    ``MAX_IMPORT_BYTES`` (text) or has more than ``MAX_IMPORT_ENTRIES`` servers, or
    nests deeper than ``MAX_JSON_DEPTH`` or holds a lone surrogate (hostd/wire/jsonlimits.py).
    """
    if isinstance(config, str):
        size = len(config.encode("utf-8", "surrogatepass"))
        if size > MAX_IMPORT_BYTES:
            raise ConfigError(f"the config is {size} bytes; at most {MAX_IMPORT_BYTES} are accepted")
        value = parse_jsonc(config)
    else:
        value = dict(config)
    try:
        # Before anything reads it (issue 31, class 2): an object config arrives already parsed, as
        # deep as the control channel's parser allows, and str() of a deep "url" recursed.
        check_document(value)
    except DocumentRefused as exc:
        raise ConfigError(f"the config {exc.message} (at {exc.field or 'the top level'})", exc.field) from None
    if not isinstance(value, dict):
        raise ConfigError("the config must be a JSON object")
    for path in (("mcpServers",), ("servers",), ("mcp", "servers")):
        node: Any = value
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            if len(node) > MAX_IMPORT_ENTRIES:
                raise ConfigError(
                    f"the config has {len(node)} servers; at most {MAX_IMPORT_ENTRIES} are imported at once"
                )
            return node
    raise ConfigError('no server table: expected "mcpServers", "servers" or "mcp.servers"')


def sanitize_id(name: str) -> str:
    """A plugin id for ``name``: lowercase ``[a-z0-9-]``, at most 63 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    slug = slug[:_ID_MAX].strip("-")
    return slug or "server"


def _unique(base: str, taken: set[str], counters: dict[str, int]) -> str:
    """``base``, or ``base-2``, ``base-3``... : the first not in ``taken`` (which it joins).

    ``counters`` remembers, per base, where the search stopped, so n names that
    sanitise alike cost O(n) in all, not O(n²) (issue 10: 12,000 took 175 s).
    """
    candidate, counter = base, counters.get(base, 2)
    if counter > 2:
        candidate = _suffixed(base, counter - 1)  # base itself is taken already
    while candidate in taken:
        candidate = _suffixed(base, counter)
        counter += 1
    counters[base] = counter
    taken.add(candidate)
    return candidate


def _suffixed(base: str, counter: int) -> str:
    suffix = f"-{counter}"
    return base[: _ID_MAX - len(suffix)].rstrip("-") + suffix


def _command(raw: str, notes: list[str]) -> str:
    """The command a plugin runs for a config's command.

    An absolute POSIX path stays as written (a virtual environment's
    ``python``: shortening it to ``python`` would run hostd's own interpreter
    without the server's packages). A Windows path (``C:\\...\\npx.cmd``) is
    reduced to its bare name and its launcher suffix dropped.
    """
    command = raw.strip()
    if command.startswith("/"):
        return command
    base = re.split(r"[\\/]", command)[-1]
    if base != command:
        notes.append(f"command {raw!r} reduced to {base!r}: a Windows path; the bare name is found on PATH")
        command = base
    lowered = command.lower()
    for suffix in _WINDOWS_SUFFIXES:
        if lowered.endswith(suffix):
            notes.append(f"Windows launcher {command!r} run as {command[: -len(suffix)]!r}")
            command = command[: -len(suffix)]
            break
    return command


@dataclass(frozen=True)
class Imported:
    """A plugin an earlier import installed: its id and the manifest document it was given."""

    plugin_id: str
    manifest: Mapping[str, Any]


def plan_import(
    config: str | Mapping[str, Any],
    *,
    taken: Collection[str] = (),
    imported: Mapping[str, Imported] | None = None,
    secret_env: Collection[str] = (),
) -> list[ImportedServer]:
    """One :class:`ImportedServer` per server in ``config``, in the config's order.

    ``taken`` holds plugin ids already installed; generated ids never collide
    with them or with each other. ``imported`` maps the config entry name an
    installed plugin was imported from (its manifest's ``name``) to that plugin:
    importing the same entry again is idempotent (issue 14), never a numbered
    duplicate. The entry keeps its plugin id and is ``unchanged`` when the
    manifest it would get equals the installed one, ``updated`` otherwise
    (ready to be written over it). Only distinct names get distinct ids
    (``My Server`` and ``my-server`` become ``my-server`` and ``my-server-2``).
    Secret-looking ``env`` values (and those named in ``secret_env``) and
    credential headers become ``${secret:NAME}`` references here, before the
    comparison, so an entry with an API key imports ``unchanged`` the second
    time; their values go to ``ImportedServer.secret_values``.
    Time is linear in the number of servers (plus ``taken``). Raises
    :class:`ConfigError` for an unreadable config or one over
    ``MAX_IMPORT_BYTES`` / ``MAX_IMPORT_ENTRIES``.
    """
    imported = imported or {}
    servers = parse_config(config)
    used = set(taken)
    counters: dict[str, int] = {}
    entries: list[ImportedServer] = []
    for name, server in servers.items():
        entry = ImportedServer(name=str(name), outcome="invalid")
        entries.append(entry)
        if not isinstance(server, dict):
            entry.message = "the entry must be an object"
            continue
        url = server.get("url") or server.get("serverUrl")
        kind = server.get("type")
        earlier = imported.get(entry.name)
        earlier_id = earlier.plugin_id if earlier is not None else None
        if url is not None or kind in ("http", "sse", "streamable-http"):
            _plan_remote(entry, server, used, counters, earlier_id)
        elif not _plan_stdio(entry, server, used, counters, earlier_id, secret_env=secret_env):
            continue
        _check_generated(entry, server)
        if earlier is not None and entry.manifest is not None:
            _compare(entry, earlier)
    return entries


def _plan_stdio(
    entry: ImportedServer,
    server: dict[str, Any],
    used: set[str],
    counters: dict[str, int],
    plugin_id: str | None,
    *,
    secret_env: Collection[str],
) -> bool:
    """Fill ``entry`` for a local server (``command``, ``args``, ``env``); False when it is invalid (``message``).

    ``plugin_id``: the id this entry was imported as before (kept), else a new unique one (``used``,
    ``counters``). Secret-looking ``env`` values go to ``entry.secret_values`` (:func:`split_secrets`);
    well-known data variables and read needs are added, each with a note.
    """
    command = server.get("command")
    if not isinstance(command, str) or not command.strip():
        entry.message = '"command" must be a non-empty string'
        return False
    args = server.get("args", [])
    env = server.get("env", {})
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        entry.message = '"args" must be an array of strings'
        return False
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        entry.message = '"env" must map names to strings'
        return False
    if "cwd" in server:
        entry.notes.append(f"cwd {server['cwd']!r} ignored: a plugin runs in its own folder")
    plugin_id = plugin_id if plugin_id is not None else _unique(sanitize_id(entry.name), used, counters)
    entry.plugin_id = plugin_id
    entry.outcome = "ready-to-install"
    env, entry.secret_values = split_secrets(env, secret_env)
    entry.manifest = {
        "id": plugin_id,
        "name": entry.name,
        "version": "0.0.0",
        "description": f"Imported from an mcpServers config entry {entry.name!r}.",
        "permissions": list(IMPORTED_PERMISSIONS),
        "contributes": {"tools": [], "discover": True},
        "backend": {
            "type": "mcp",
            "transport": "stdio",
            "command": _command(command, entry.notes),
            "args": list(args),
            "env": dict(env),
            "startup_timeout_seconds": 120,
            "tool_timeout_seconds": 60,
            "stdout_noise": "drop",
        },
        "network": {key: list(value) for key, value in IMPORTED_NETWORK.items()},
    }
    if entry.secret_values:
        entry.notes.append(f"kept {', '.join(sorted(entry.secret_values))} in the secret store")
    defaults = known_data_env([command, *args], entry.manifest["backend"]["env"])
    if defaults:
        entry.manifest["backend"]["env"].update(defaults)
        entry.notes.append(f"set {', '.join(f'{k}={v}' for k, v in defaults.items())}: its data in its own folder")
    needs = known_needs([command, *args])
    if needs:
        entry.manifest["sandbox"] = needs
        entry.notes.append(f"declared the well-known needs of {needs['for']}: read {', '.join(needs['read'])}")
        del needs["for"]
    writes = known_data_writes([command, *args], env)
    if writes:
        entry.manifest.setdefault("sandbox", {})["write"] = writes
        entry.notes.append(f"declared writable, where it keeps its data: {', '.join(writes)}")
    entry.notes.append(IMPORTED_NETWORK_NOTE)
    return True


def _check_generated(entry: ImportedServer, server: Mapping[str, Any]) -> None:
    """Make ``entry`` invalid when the manifest planned for it is one hostd would refuse to load.

    The class (issue 31, class 3; hostd/install/generated.py): the manifest is checked
    as ``load_manifest`` would check the file, and its first error is reported
    against the config field it came from (``field``), not a file in hostd's
    state folder. Nothing of an invalid entry is written or stored.
    """
    from hostd.install.generated import manifest_errors, source_field  # noqa: PLC0415 - pulls in the manifest model

    if entry.manifest is None:
        return
    errors = manifest_errors(entry.manifest)
    if not errors:
        return
    table: dict[str, str] = {"backend.command": "command", "backend.transport": "type", "sandbox": "command"}
    table.update({f"backend.args.{i}": f"args.{i}" for i in range(len(server.get("args") or []))})
    backend = entry.manifest["backend"]
    table.update({f"backend.env.{name}": f"env.{name}" for name in backend.get("env", {})})
    table.update({f"backend.headers.{name}": f"headers.{name}" for name in backend.get("headers", {})})
    table["backend.url"] = "url" if "url" in server else "serverUrl"
    first = errors[0]
    where = source_field(first["field"], table, "")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    entry.message = (f'"{where}" ' if where else "") + first["message"] + more
    entry.at = where or None
    entry.outcome = "invalid"
    entry.manifest = None
    entry.secret_values = {}


def _compare(entry: ImportedServer, earlier: Imported) -> None:
    """``unchanged`` or ``updated`` for an entry an earlier import installed as ``earlier``.

    Its secrets were stored then: the notes about keeping them are dropped (the host notes a value
    that changed, ``Host._store_secrets``).
    """
    entry.outcome = "unchanged" if entry.manifest == earlier.manifest else "updated"
    entry.notes = [note for note in entry.notes if "in the secret store" not in note]


def _plan_remote(
    entry: ImportedServer, server: dict[str, Any], used: set[str], counters: dict[str, int], plugin_id: str | None
) -> None:
    """Fill ``entry`` for a remote server (``url``, ``type: http | sse | streamable-http``, ``headers``).

    ``type: sse`` keeps the legacy transport; anything else is Streamable HTTP (hostd falls back to SSE
    only on a 404/405 first answer). A header whose name or value looks secret is not written into
    the manifest: it becomes a ``${secret:NAME}`` reference and its value goes to
    ``entry.secret_values`` (the host's secret store), never into a manifest. ``plugin_id``: the id an
    earlier import of this entry got (kept), or None for a new one.
    """
    from hostd.remote.endpoint import url_problem  # noqa: PLC0415 - remote imports the manifest model

    url, kind = server.get("url") or server.get("serverUrl"), server.get("type")
    entry.url = url if isinstance(url, str) else None
    if not isinstance(url, str):
        entry.message = '"url" must be a string'
        return
    problem = url_problem(url)
    if problem is not None:
        entry.message = f'"url" {problem}'
        return
    headers = server.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        entry.message = '"headers" must map names to strings'
        return
    if plugin_id is None:
        plugin_id = _unique(sanitize_id(entry.name), used, counters)
    kept: dict[str, str] = {}
    for name, value in headers.items():
        if _secret_header(name, value):
            secret = re.sub(r"[^A-Za-z0-9_]", "_", f"{plugin_id}_{name}").upper()
            kept[name] = f"${{secret:{secret}}}"
            entry.secret_values[secret] = value
            entry.notes.append(f"header {name}: its value looks secret: kept in the secret store as {secret}")
        else:
            kept[name] = value
    entry.plugin_id = plugin_id
    entry.outcome = "ready-to-install"
    backend: dict[str, Any] = {
        "type": "mcp",
        "transport": "sse" if kind == "sse" else "streamable-http",
        "url": url,
        "startup_timeout_seconds": 120,
        "tool_timeout_seconds": 60,
    }
    if kept:
        backend["headers"] = kept
    entry.manifest = {
        "id": plugin_id,
        "name": entry.name,
        "version": "0.0.0",
        "description": f"Imported from an mcpServers config entry {entry.name!r} (a remote server).",
        "permissions": list(IMPORTED_PERMISSIONS),
        "contributes": {"tools": [], "discover": True},
        "backend": backend,
    }


def _secret_header(name: str, value: str) -> bool:
    """A header whose value must not be written into a manifest: a credential by name or by form."""
    from hostd.remote.endpoint import SECRET_REFERENCE, looks_secret  # noqa: PLC0415

    if SECRET_REFERENCE.fullmatch(value):
        return False  # already a reference
    return looks_secret(name) or value.lower().startswith(("bearer ", "basic ", "token "))


#: Read-only needs of well-known servers, declared by name when a config runs them (an imported
#: config cannot declare needs itself). Shown in launch.folders and approved like any other grant;
#: never given to a server that is not named here.
KNOWN_NEEDS: dict[str, tuple[str, ...]] = {
    # git treats an unreadable global config as fatal (every call fails with exit code 128).
    "mcp-server-git": ("~/.gitconfig", "~/.config/git"),
}


#: Where well-known servers keep their data when the config says nothing: by default they write next to
#: their own code, which under hostd is the prepared package folder (read-only to the plugin, and thrown
#: away with a version bump), so every write fails (server-memory: ``EACCES ... dist/memory.jsonl``). The
#: class: a default data path inside the installed package. The defaults point into the plugin's own data
#: folder (``${data}``, writable, kept across upgrades), as the catalog manifests do; a value the config
#: sets is kept as it is.
KNOWN_DATA_ENV: dict[str, dict[str, str]] = {
    "server-memory": {"MEMORY_FILE_PATH": "${data}/memory.jsonl"},
}


def _known(words: list[str], table: Collection[str]) -> str | None:
    """The name in ``table`` that ``words`` (command and args) run: a word that is the package name,
    optionally with a version (``mcp-server-git==2026.10.19``, ``@scope/x@1.2``) or a path ending in it."""
    for word in words:
        base = word.rsplit("/", 1)[-1]
        for name in table:
            if base == name or base.startswith((name + "=", name + "@", name + ">", name + "<")):
                return name
    return None


def known_data_env(words: list[str], env: Mapping[str, str]) -> dict[str, str]:
    """The :data:`KNOWN_DATA_ENV` defaults for the server ``words`` run, less the names ``env`` sets."""
    name = _known(words, KNOWN_DATA_ENV)
    return {k: v for k, v in KNOWN_DATA_ENV[name].items() if k not in env} if name is not None else {}


def known_data_writes(words: list[str], env: Mapping[str, str]) -> list[str]:
    """The folders of the :data:`KNOWN_DATA_ENV` files the config ``env`` sets itself, declared writable.

    The class (issue 25): a file an env value names is granted read-only unless declared writable
    (:func:`sandbox.launch.named_grants`); one that does not exist yet makes its folder writable, so the
    server creates it - and found it read-only at its next start. A server of :data:`KNOWN_DATA_ENV`
    writes that file by design: its folder is declared (``sandbox.write``), shown and approved, the
    same at every start. Values in the plugin's data folder (``${data}``) and words that name no path
    are left out. ``MEMORY_FILE_PATH=~/memory/graph.jsonl`` gives ``["~/memory"]``.
    """
    name = _known(words, KNOWN_DATA_ENV)
    if name is None:
        return []
    found = []
    for key in KNOWN_DATA_ENV[name]:
        value = env.get(key, "")
        if value.startswith(("/", "~/", "${HOME}/", "$HOME/")):
            found.append(value.rsplit("/", 1)[0] or "/")
    return found


def known_needs(words: list[str]) -> dict[str, Any]:
    """``{"for": name, "read": [...]}`` when ``words`` (command and args) run a server of :data:`KNOWN_NEEDS`.

    A word names a server when it is the package name, optionally with a version
    (``mcp-server-git==2026.10.19``, ``@scope/x@1.2``) or a path ending in it.
    """
    name = _known(words, KNOWN_NEEDS)
    return {"for": name, "read": list(KNOWN_NEEDS[name])} if name is not None else {}
