"""``hostctl import --rewrite`` and ``--undo``: a client's config made to start ``hostd mcp`` instead of each server.

After ``plugins/import`` installed every server of the config, the config's server table (``mcpServers``,
``servers`` or ``mcp.servers``, found as :func:`hostd.install.importer.parse_config` finds it) loses each
imported entry and gains one entry, ``hostd``, at the place of the first, that starts ``hostd mcp --state-dir
DIR`` (:func:`gateway_command`: hostd as this hostctl was invoked). Every other key of the file, and every entry
not imported, is kept as it was (same values, same order). The file is read as the importer reads it (JSON with
comments and trailing commas) and written as JSON (indent 2): its comments are not kept, and the person is told
so before saying yes; the backup holds them.

The file is changed in two steps, each atomic: the backup (the original bytes, next to the config as
``NAME.hostd-backup-<UTC time>``, created exclusively, mode 0600: an mcpServers config often holds API keys),
then the new text written to a temporary file in the same folder with the original's mode, flushed to disk and
renamed over the config. :func:`undo` puts the newest backup's bytes back the same way and removes that backup.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hostd.install.importer import ConfigError, parse_jsonc

#: The tables :func:`hostd.install.importer.parse_config` reads, in its order of preference.
TABLE_PATHS: tuple[tuple[str, ...], ...] = (("mcpServers",), ("servers",), ("mcp", "servers"))
BACKUP_INFIX = ".hostd-backup-"


class RewriteError(Exception):
    """The config cannot be rewritten or restored; the message says why and what to do."""


def gateway_command(argv0: str, executable: str, main_module: str | None) -> list[str]:
    """The command a client runs to start hostd as this hostctl was invoked: absolute paths only (a client's
    working folder and PATH are not the shell's).

    A console script (``main_module`` None): the ``hostd`` script next to ``argv0`` (the venv's ``bin``) when
    there is one; otherwise, and for ``python -m hostd.cli.hostctl``: ``[executable, "-m", "hostd"]`` (the
    interpreter's path as given, not resolved: a venv's ``python`` is a symlink and only its own path runs in
    the venv).
    """
    if main_module is None:
        script = Path(os.path.abspath(argv0)).with_name("hostd")
        if script.is_file() and os.access(script, os.X_OK):
            return [str(script)]
    return [os.path.abspath(executable), "-m", "hostd"]


def server_table(document: Mapping[str, Any]) -> tuple[tuple[str, ...], dict[str, Any]]:
    """``(path, table)``: where the servers of ``document`` are, as the importer reads them.

    Raises:
        RewriteError: no server table.
    """
    for path in TABLE_PATHS:
        node: Any = document
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            return path, node
    raise RewriteError('no server table: expected "mcpServers", "servers" or "mcp.servers"')


def starts_hostd_mcp(server: Any) -> bool:
    """Whether a config entry already starts ``hostd mcp`` (a config rewritten before): importing it would
    install the gateway as one of its own plugins."""
    if not isinstance(server, dict) or not isinstance(server.get("command"), str):
        return False
    args = server.get("args")
    words = [
        os.path.basename(server["command"]),
        *(a for a in (args if isinstance(args, list) else []) if isinstance(a, str)),
    ]
    if words[0] == "hostd":
        return words[1:2] == ["mcp"]
    return words[1:4] == ["-m", "hostd", "mcp"]


def rewritten(document: dict[str, Any], imported: Sequence[str], command: Sequence[str]) -> dict[str, Any]:
    """A copy of ``document`` whose server table starts ``command`` (``[program, *args]``) as one entry named
    ``hostd`` (``hostd-2``... when an entry not imported has that name) in place of the entries named in
    ``imported``; every other key and entry is kept, in order. VS Code's tables (``servers``) get ``"type":
    "stdio"`` as its own entries have.

    Raises:
        RewriteError: no server table, or none of ``imported`` is in it.
    """
    path, table = server_table(document)
    gone = set(imported) & set(table)
    if not gone:
        raise RewriteError("none of the imported servers is in the config's server table")
    name, counter = "hostd", 2
    while name in table and name not in gone:
        name, counter = f"hostd-{counter}", counter + 1
    entry: dict[str, Any] = {"type": "stdio"} if path[-1] == "servers" else {}
    entry.update({"command": command[0], "args": list(command[1:])})
    new_table: dict[str, Any] = {}
    for key, value in table.items():
        if key not in gone:
            new_table[key] = value
        elif name not in new_table:
            new_table[name] = entry
    out: dict[str, Any] = json.loads(json.dumps(document, allow_nan=False))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new_table
    return out


def plan(config: Path, imported: Sequence[str], command: Sequence[str]) -> tuple[bytes, bytes, list[str]]:
    """``(old bytes, new bytes, notes)`` for rewriting ``config``; notes say what is lost (comments).

    Raises:
        RewriteError: unreadable, not JSON, NaN or Infinity in it (JSON5 only), or no imported entry in it.
    """
    try:
        old = config.read_bytes()
    except OSError as exc:
        raise RewriteError(f"cannot read {config}: {exc.strerror}") from None
    text = old.decode("utf-8", "surrogateescape")
    try:
        document = parse_jsonc(text)
    except ConfigError as exc:
        raise RewriteError(f"cannot read {config}: {exc}") from None
    if not isinstance(document, dict):
        raise RewriteError("the config must be a JSON object")
    notes: list[str] = []
    try:
        json.loads(text)
    except ValueError:
        notes.append(f"its comments and trailing commas are not kept (the backup keeps them): {config}")
    try:
        new = json.dumps(rewritten(document, imported, command), indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError:  # JSON5's NaN / Infinity: no JSON spells them, and a client could not read the file
        raise RewriteError(f"{config} holds NaN or Infinity, which JSON cannot hold; rewrite it by hand") from None
    new += "\n"
    return old, new.encode("utf-8"), notes


def backup_path(config: Path, now: datetime | None = None) -> Path:
    """``NAME.hostd-backup-YYYYMMDDTHHMMSS.ffffffZ`` next to ``config`` (UTC; names sort by time)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S.%fZ")
    return config.with_name(config.name + BACKUP_INFIX + stamp)


def _write_atomically(target: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file beside ``target`` (``mode``), flush it to disk, rename it over ``target``."""
    temporary = target.with_name(f".{target.name}.hostd-{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)  # the umask took bits away at creation
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def apply(config: Path, old: bytes, new: bytes) -> Path:
    """Back ``config`` up (``old``, its bytes as :func:`plan` read them; 0600) and write ``new`` over it
    atomically, with the config's own mode. Returns the backup's path.

    Raises:
        RewriteError: the config changed since it was read (nothing written), or a write failed (the config
            is untouched; a backup made is left in place).
    """
    try:
        if config.read_bytes() != old:
            raise RewriteError(f"{config} changed while hostctl was importing it; nothing was rewritten")
        mode = config.stat().st_mode & 0o7777
        backup = backup_path(config)
        fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(old)
            out.flush()
            os.fsync(out.fileno())
        _write_atomically(config, new, mode)
    except OSError as exc:
        raise RewriteError(f"cannot rewrite {config}: {exc.strerror}") from None
    return backup


def undo(config: Path) -> Path:
    """Put back the bytes of ``config``'s newest backup (atomically, the config's current mode) and remove that
    backup. Returns the backup's path.

    Raises:
        RewriteError: no backup, or the config no longer starts ``hostd mcp`` (changed since the rewrite: the
            backup is left for the person to restore by hand).
    """
    backups = sorted(config.parent.glob(config.name + BACKUP_INFIX + "*"))
    if not backups:
        raise RewriteError(f"no backup of {config} made by hostctl import --rewrite")
    backup = backups[-1]
    try:
        current = parse_jsonc(config.read_text(encoding="utf-8"))
        _, table = server_table(current)
    except (OSError, ValueError, RewriteError):
        table = {}
    if not any(starts_hostd_mcp(server) for server in table.values()):
        raise RewriteError(
            f"{config} no longer starts hostd mcp: it changed after the rewrite; "
            f"its backup is {backup} (restore it by hand: {shlex.join(['cp', str(backup), str(config)])})"
        )
    try:
        mode = config.stat().st_mode & 0o7777
        _write_atomically(config, backup.read_bytes(), mode)
        backup.unlink()
    except OSError as exc:
        raise RewriteError(f"cannot restore {config}: {exc.strerror}") from None
    return backup
