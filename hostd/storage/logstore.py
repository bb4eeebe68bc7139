"""Each plugin's log lines on disk, so that ``plugins/logs`` sees what earlier hostd processes saw.

Theory of operation
-------------------
A parent may run one hostd after another on the same state folder (hostctl
runs one per command): the lines a plugin wrote while an earlier hostd ran
it are gone with that hostd's memory. :class:`LogFiles` keeps them in
``<stateDir>/logs/<plugin id>.jsonl`` (folder ``0700``, files ``0600``,
opened with ``O_NOFOLLOW``): one JSON object per line, ``{time, level,
source, message}``, exactly the ``plugins/log`` line the parent was sent,
which the plugin link has already redacted (hostd/wire/redact.py: the manifest's
``env`` values, the secrets the launch was given, secret-looking keys and
tokens); nothing else is written, so no secret the parent was not shown
reaches the disk. A first line ``{"dropped": N}`` counts the lines that
compaction removed.

Bounds: each file is at most :data:`LOG_FILE_BYTES` after every write. A
write that takes it over compacts it to the newest lines that fit in half
of that (a fresh file replaces it atomically), so compaction costs O(1)
amortized per line. Reading returns at most the lines asked for.

Writes never block the event loop: :meth:`LogFiles.add` only queues (in
memory, at most :data:`MAX_PENDING` lines a plugin; older ones are counted
as dropped), and :meth:`LogFiles.run`, a task of the session, writes what
is queued in a worker thread. :meth:`LogFiles.flush` writes it now (at
shutdown, before a read). A line of a hostd killed before it was written is
lost; a torn last line (a crash during a write) is skipped when read.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import orjson
import trio

__all__ = ["LOG_FILE_BYTES", "MAX_PENDING", "LogFiles"]

LOG_FILE_BYTES: Final = 512 * 1024
"""Most bytes of one plugin's log file after any write (512 KiB; a line is at most ~4 KiB of message)."""
MAX_PENDING: Final = 1000
"""Most lines of one plugin queued for writing; beyond, the oldest queued are dropped (and counted)."""
_FIELDS: Final = ("time", "level", "source", "message")
log = logging.getLogger("hostd.storage.logstore")


class LogFiles:
    """The per-plugin log files under ``directory`` (``<stateDir>/logs``); see the module docstring."""

    def __init__(self, directory: Path, *, max_bytes: int = LOG_FILE_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._pending: dict[str, list[dict[str, Any]]] = {}
        self._lost: dict[str, int] = {}
        self._queued = trio.Event()
        self._lock = trio.Lock()

    def add(self, plugin_id: str, line: dict[str, Any]) -> None:
        """Queue one ``LogLine`` (wire dict, already redacted) of ``plugin_id``; never blocks, no I/O."""
        queue = self._pending.setdefault(plugin_id, [])
        queue.append({k: line.get(k) for k in _FIELDS})
        if len(queue) > MAX_PENDING:
            del queue[0]
            self._lost[plugin_id] = self._lost.get(plugin_id, 0) + 1
        self._queued.set()

    async def run(self) -> None:
        """Write what is queued, as it is queued, until cancelled (the session's end; call :meth:`flush` first)."""
        while True:
            await self._queued.wait()
            try:
                await self.flush()
            except OSError as exc:  # a full disk: the lines are lost, the session goes on
                log.warning("writing the plugins' log files under %s failed: %s", self.directory, exc)

    async def flush(self) -> None:
        """Write every queued line now (in a worker thread); an ``OSError`` is logged by the caller's logger.

        Raises ``OSError`` when the folder or a file cannot be written (the lines are then lost).
        Cancellation waits for a write in progress.
        """
        async with self._lock:
            self._queued = trio.Event()
            pending, lost = self._pending, self._lost
            self._pending, self._lost = {}, {}
            if pending:
                await trio.to_thread.run_sync(self._write, pending, lost)

    async def read(self, plugin_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """``(the last limit lines, oldest first; lines dropped)`` of ``plugin_id``, with the queued ones written first.

        ``dropped`` counts what compaction (and a full queue) removed, across hostd processes. Raises ``OSError``.
        """
        await self.flush()
        return await trio.to_thread.run_sync(self._read, plugin_id, limit)

    async def drop(self, plugin_id: str) -> None:
        """Forget ``plugin_id``'s lines: the queued ones and its file (at uninstall)."""
        async with self._lock:
            self._pending.pop(plugin_id, None)
            self._lost.pop(plugin_id, None)
            with contextlib.suppress(FileNotFoundError):
                await trio.to_thread.run_sync(os.unlink, self._path(plugin_id))

    # -- blocking parts (worker threads) --------------------------------------------------

    def _path(self, plugin_id: str) -> Path:
        return self.directory / f"{plugin_id}.jsonl"

    def _write(self, pending: dict[str, list[dict[str, Any]]], lost: dict[str, int]) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for plugin_id, lines in pending.items():
            data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
            if lost.get(plugin_id):
                data = orjson.dumps({"dropped": lost[plugin_id]}) + b"\n" + data
            fd = os.open(
                self._path(plugin_id),
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
            try:
                _write_all(fd, data)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > self.max_bytes:
                self._compact(plugin_id)

    def _records(self, plugin_id: str) -> tuple[list[bytes], int]:
        """The file's line records (raw JSON) and the dropped count of its ``{"dropped": N}`` records."""
        try:
            fd = os.open(self._path(plugin_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return [], 0
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read(self.max_bytes * 4)  # bounded even if something else grew the file
        lines: list[bytes] = []
        dropped = 0
        for record in raw.split(b"\n"):
            try:
                value = orjson.loads(record)
            except orjson.JSONDecodeError:
                continue  # empty, or torn by a crash during a write
            if isinstance(value, dict) and set(value) == {"dropped"} and isinstance(value["dropped"], int):
                dropped += value["dropped"]
            elif isinstance(value, dict) and all(k in value for k in _FIELDS):
                lines.append(record)
        return lines, dropped

    def _compact(self, plugin_id: str) -> None:
        lines, dropped = self._records(plugin_id)
        keep: list[bytes] = []
        budget = self.max_bytes // 2
        for record in reversed(lines):
            budget -= len(record) + 1
            if budget < 0:
                break
            keep.append(record)
        keep.reverse()
        header = orjson.dumps({"dropped": dropped + len(lines) - len(keep)}) + b"\n"
        path = self._path(plugin_id)
        fresh = path.with_name(f".{path.name}.new")
        with contextlib.suppress(FileNotFoundError):
            fresh.unlink()
        fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, header + b"".join(record + b"\n" for record in keep))
        finally:
            os.close(fd)
        os.replace(fresh, path)

    def _read(self, plugin_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        lines, dropped = self._records(plugin_id)
        chosen: Sequence[bytes] = lines[-limit:] if limit > 0 else []
        return [orjson.loads(record) for record in chosen], dropped


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
