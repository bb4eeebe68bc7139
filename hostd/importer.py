"""Import of the MCP server configs people already have, with no I/O in it.

Accepted forms (JSON, with ``//`` and ``/* */`` comments and trailing commas
tolerated, as editors write them):

- ``{"mcpServers": {name: {command, args?, env?, cwd?}}}``: Claude Desktop,
  Cursor, Windsurf and most others; an entry with ``url`` (or ``serverUrl``)
  is a remote server.
- ``{"servers": {name: {type?, command, args?, env?, url?}}}``: VS Code's
  ``.vscode/mcp.json``; also nested as ``{"mcp": {"servers": …}}`` in its
  settings.

:func:`plan_import` turns a config into one :class:`ImportEntry` per server:
a sanitised, collision-free plugin id and a generated manifest (with
``contributes.discover: true``, since such configs declare no tools), or the
reason it cannot be imported. Remote (``url``) entries are recorded and
reported as not yet supported. The host writes the manifests and installs
them all-or-nothing (``plugins/import``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

Outcome = Literal["ready-to-install", "remote-not-supported", "invalid"]

_ID_MAX = 63
_WINDOWS_SUFFIXES = (".cmd", ".exe", ".bat", ".ps1")


class ConfigError(ValueError):
    """The config as a whole is unreadable; the message says where."""


@dataclass
class ImportEntry:
    """One server of the config: its outcome, plugin id, manifest and notes."""

    name: str
    outcome: Outcome
    plugin_id: str | None = None
    manifest: dict[str, Any] | None = None
    message: str | None = None
    notes: list[str] = field(default_factory=list)
    url: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """The entry as reported by ``plugins/import``."""
        out: dict[str, Any] = {"name": self.name, "outcome": self.outcome, "id": self.plugin_id}
        if self.message is not None:
            out["message"] = self.message
        if self.notes:
            out["notes"] = list(self.notes)
        if self.url is not None:
            out["url"] = self.url
        return out


def strip_jsonc(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments and trailing commas outside strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == '"':
                in_string = False
            i += 1
            continue
        if ch == '"':
            in_string = True
            out.append(ch)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigError("unterminated /* comment")
            i = end + 2
        else:
            out.append(ch)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def parse_config(config: str | Mapping[str, Any]) -> dict[str, Any]:
    """The ``name -> server`` table of a config (text or already-parsed object).

    Raises :class:`ConfigError` when it is not JSON or has no server table.
    """
    if isinstance(config, str):
        try:
            value = orjson.loads(strip_jsonc(config))
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"not JSON: {exc}") from None
    else:
        value = dict(config)
    if not isinstance(value, dict):
        raise ConfigError("the config must be a JSON object")
    for path in (("mcpServers",), ("servers",), ("mcp", "servers")):
        node: Any = value
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            return node
    raise ConfigError('no server table: expected "mcpServers", "servers" or "mcp.servers"')


def sanitize_id(name: str) -> str:
    """A plugin id for ``name``: lowercase ``[a-z0-9-]``, at most 63 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    slug = slug[:_ID_MAX].strip("-")
    return slug or "server"


def _unique(base: str, taken: set[str]) -> str:
    candidate, counter = base, 2
    while candidate in taken:
        suffix = f"-{counter}"
        candidate = base[: _ID_MAX - len(suffix)].rstrip("-") + suffix
        counter += 1
    taken.add(candidate)
    return candidate


def _command(raw: str, notes: list[str]) -> str:
    """A bare command name for a config's command (Windows suffixes and absolute paths reduced)."""
    command = raw.strip()
    base = re.split(r"[\\/]", command)[-1]
    if base != command:
        notes.append(f"command {raw!r} reduced to {base!r}: plugins run a bare name found on PATH")
        command = base
    lowered = command.lower()
    for suffix in _WINDOWS_SUFFIXES:
        if lowered.endswith(suffix):
            notes.append(f"Windows launcher {command!r} run as {command[: -len(suffix)]!r}")
            command = command[: -len(suffix)]
            break
    return command


def plan_import(config: str | Mapping[str, Any], *, taken: Collection[str] = ()) -> list[ImportEntry]:
    """One :class:`ImportEntry` per server in ``config``, in the config's order.

    ``taken`` holds plugin ids already installed; generated ids never collide
    with them or with each other. Raises :class:`ConfigError` for an
    unreadable config.
    """
    servers = parse_config(config)
    used = set(taken)
    entries: list[ImportEntry] = []
    for name, server in servers.items():
        entry = ImportEntry(name=str(name), outcome="invalid")
        entries.append(entry)
        if not isinstance(server, dict):
            entry.message = "the entry must be an object"
            continue
        url = server.get("url") or server.get("serverUrl")
        kind = server.get("type")
        if url is not None or kind in ("http", "sse", "streamable-http"):
            entry.outcome = "remote-not-supported"
            entry.url = str(url) if url is not None else None
            entry.message = "remote servers (Streamable HTTP) are not supported yet; recorded, not installed"
            continue
        command = server.get("command")
        if not isinstance(command, str) or not command.strip():
            entry.message = '"command" must be a non-empty string'
            continue
        args = server.get("args", [])
        env = server.get("env", {})
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            entry.message = '"args" must be an array of strings'
            continue
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            entry.message = '"env" must map names to strings'
            continue
        if "cwd" in server:
            entry.notes.append(f"cwd {server['cwd']!r} ignored: a plugin runs in its own folder")
        plugin_id = _unique(sanitize_id(entry.name), used)
        entry.plugin_id = plugin_id
        entry.outcome = "ready-to-install"
        entry.manifest = {
            "id": plugin_id,
            "name": entry.name,
            "version": "0.0.0",
            "description": f"Imported from an mcpServers config entry {entry.name!r}.",
            "permissions": [],
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
        }
    return entries
