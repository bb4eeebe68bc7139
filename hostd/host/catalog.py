"""The catalog: the installed plugins, the broken ones and what the state document holds of each, changed
transactionally (:meth:`Catalog.change`: memory and the document together, or neither), persisted, and
restored from the state folder at start (:func:`restore`, :func:`restore_record`) or re-read on SIGHUP
(:func:`reload_manifests`).

The restore is written against :class:`RestoreHost`, the small interface it needs of the host (the catalog,
notifications, a plugin's supervisor and its launch), so this module does not import the host.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import trio

from hostd.control.core import Notify
from hostd.host.records import (
    RECORDED_FIELDS,
    BrokenPlugin,
    InstalledPlugin,
    broken_error,
    load_stored_manifest,
    log,
    write_failed,
)
from hostd.install.manifest import Manifest
from hostd.storage.state import PluginRecord, StateStore, StoredRecord, UnreadableRecord
from hostd.wire.errors import ErrorKind, HostError
from sandbox.launch import Launch, LaunchError


class Catalog:
    """The host's plugins (installed, broken) and the records of the state document, kept in step."""

    def __init__(self, store: StateStore | None) -> None:
        self.store = store
        self.plugins: dict[str, InstalledPlugin] = {}
        #: What the state document holds per plugin id, readable or not (an unreadable record is written back as is).
        self.records: dict[str, StoredRecord] = {}
        #: Installed plugins whose stored files no longer load (:class:`BrokenPlugin`); an id in
        #: :attr:`plugins` shadows its entry here.
        self.broken: dict[str, BrokenPlugin] = {}
        self._save_lock = trio.Lock()
        #: Held by every request that changes what the state document records (see :meth:`change`).
        self._change_lock = trio.Lock()

    def plugin(self, plugin_id: str) -> InstalledPlugin:
        """The installed plugin ``plugin_id``; ``PLUGIN_BROKEN`` (its error) or ``PLUGIN_NOT_FOUND`` otherwise."""
        plugin = self.plugins.get(plugin_id)
        if plugin is None:
            broken = self.broken.get(plugin_id)
            if broken is not None:
                raise broken.error
            if self.store is None:
                raise HostError(ErrorKind.PLUGIN_NOT_FOUND, f"no installed plugin {plugin_id!r}", plugin=plugin_id)
            # Which state folder was searched: a command run on another folder (a dropped --state-dir) says so.
            folder = str(self.store.directory)
            raise HostError(
                ErrorKind.PLUGIN_NOT_FOUND,
                f"no installed plugin {plugin_id!r} in the state folder {folder}",
                plugin=plugin_id,
                stateDir=folder,
            )
        return plugin

    def broken_only(self, plugin_id: str) -> BrokenPlugin | None:
        """The broken plugin ``plugin_id`` when no installed plugin has that id."""
        return self.broken.get(plugin_id) if plugin_id not in self.plugins else None

    async def persist(self) -> None:
        """Write every installed plugin's record to the state document (atomically).

        Raises ``STATE_WRITE_FAILED`` (``data.errno``, e.g. ``"ENOSPC"``;
        ``data.path``) when the document cannot be written: the document
        on disk is then the previous one. Writes are serialised; each records
        memory as it is when its turn comes.
        """
        if self.store is None:
            return
        store = self.store
        async with self._save_lock:
            records = dict(self.records)
            for plugin_id, plugin in self.plugins.items():
                records[plugin_id] = plugin.record()
            try:
                await trio.to_thread.run_sync(store.save, records)
            except OSError as exc:
                raise write_failed(exc, store.path) from None
            self.records = records

    # State changes. The class: a request (install, import, uninstall, grant, approve,
    # enable, disable, a SIGHUP reload) or a supervisor event (ToolsPinned: the first
    # pins after an approval) changes what the state document records, in memory, and
    # then writes the document. If the write fails (ENOSPC, EFBIG, EIO...), memory must
    # not keep what disk does not have (lost at the next restart, or half there): each
    # such change runs in ``async with catalog.change():``, which undoes the change in
    # memory when the write (or the change itself) fails, and the request answers
    # STATE_WRITE_FAILED (ToolsPinned: the start fails, nothing pinned). Side effects
    # that cannot be undone (stopping a plugin, releasing withheld tools) come after the
    # write succeeded. The restart counter (RestartCounted) is a statistic, written
    # best-effort (``persist_quietly``). Every recorded field lives on InstalledPlugin;
    # none on the supervisor.

    @contextlib.asynccontextmanager
    async def change(self) -> AsyncIterator[None]:
        """Apply the body's changes to memory and the state document together, or to neither.

        Runs the body under :attr:`_change_lock`, then :meth:`persist`. If
        either raises, every recorded field the body changed (and nobody
        changed since) is put back, and the exception propagates
        (``STATE_WRITE_FAILED`` from the write). Cancellation undoes the same way.
        """
        async with self._change_lock:
            before = self._snapshot()
            after: _Snapshot | None = None
            try:
                yield
                after = self._snapshot()
                await self.persist()
            except BaseException:
                self._undo(before, after if after is not None else self._snapshot())
                raise

    def _snapshot(self) -> _Snapshot:
        fields: dict[tuple[int, str], tuple[Any, Any]] = {}
        for plugin in self.plugins.values():
            for name in PLUGIN_FIELDS:
                fields[(id(plugin), name)] = (plugin, _copied(getattr(plugin, name)))
        return _Snapshot(plugins=dict(self.plugins), records=dict(self.records), fields=fields)

    def _undo(self, before: _Snapshot, after: _Snapshot) -> None:
        """Put back what changed from ``before`` to ``after``, where it is still as ``after`` left it."""
        now = self._snapshot()
        _undo_table(self.plugins, before.plugins, after.plugins)
        _undo_table(self.records, before.records, after.records)
        for field_key, (owner, was) in before.fields.items():
            if field_key not in after.fields:
                continue
            became = after.fields[field_key][1]
            current = now.fields.get(field_key, (owner, became))[1]
            if was != became and current == became:
                setattr(owner, field_key[1], was)

    async def persist_quietly(self) -> None:
        """:meth:`persist` for counters (restarts): a failed write is logged, not raised."""
        try:
            await self.persist()
        except HostError as error:
            log.warning("%s", error.message)


def _copied(value: Any) -> Any:
    """A shallow copy of a mutable container (set, dict, list); anything else as it is."""
    return copy.copy(value) if isinstance(value, set | dict | list) else value


def _undo_table(table: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
    """Put back ``old``'s entries (by identity) where ``new`` changed them and ``table`` still has ``new``'s."""
    for key in set(old) | set(new):
        was, became = old.get(key), new.get(key)
        if was is became or table.get(key) is not became:
            continue
        if was is None:
            table.pop(key, None)
        else:
            table[key] = was


@dataclass
class _Snapshot:
    """What :meth:`Catalog.change` can undo: the plugin and record tables and each plugin's recorded fields."""

    plugins: dict[str, InstalledPlugin]
    records: dict[str, StoredRecord]
    #: (id of the owner, field name) -> (owner, a shallow copy of the value)
    fields: dict[tuple[int, str], tuple[Any, Any]]


#: What a request may change on an InstalledPlugin that the state document records or derives from: every
#: recorded field, and what the launch resolution derives.
PLUGIN_FIELDS = (
    *RECORDED_FIELDS,
    "manifest",
    "launch",
    "launch_error",
    "policy",
    "package",
    "prepared",
    "unpreparable",
)


# -- restore ---------------------------------------------------------------------


class RestoreHost(Protocol):
    """What the restore needs of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def catalog(self) -> Catalog: ...

    @property
    def notify(self) -> Notify: ...

    def add_plugin(self, folder: Path, manifest: Manifest, digest: str, *, restarts: int = 0) -> InstalledPlugin:
        """Add a stopped plugin (replacing one of the same id) with a supervisor of its own."""
        ...

    async def resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch; raises :class:`sandbox.launch.LaunchError`."""
        ...


async def restore(host: RestoreHost, warnings: list[str]) -> list[tuple[InstalledPlugin, PluginRecord]]:
    """Install every stored plugin again (before any request is served), so that
    ``plugins/list`` right after ``initialize`` already shows them. Returns the
    plugins to enable again, which :meth:`Host._restore_enabled` does in the background."""
    for warning in warnings:
        await host.notify("plugins/log", {"plugin": None, "level": "warning", "source": "host", "message": warning})
    to_enable: list[tuple[InstalledPlugin, PluginRecord]] = []
    for plugin_id, record in sorted(host.catalog.records.items()):
        plugin = await restore_record(host, plugin_id, record)
        if plugin is not None and isinstance(record, PluginRecord) and record.enabled:
            to_enable.append((plugin, record))
    return to_enable


async def restore_record(host: RestoreHost, plugin_id: str, record: StoredRecord) -> InstalledPlugin | None:
    """Install one stored plugin again, or list it ``broken`` (:class:`BrokenPlugin`) with the reason.

    Nothing of the record is lost either way: it stays in the document as it is. The parent is
    told of a broken plugin (``plugins/log`` and ``plugins/statusChanged``).
    """
    if isinstance(record, UnreadableRecord):
        field = f"plugins.{plugin_id}" + (f".{record.field}" if record.field else "")
        error = broken_error(
            plugin_id,
            record.path,
            "state",
            f"its record in state.json cannot be read ({record.reason})",
            [{"field": field, "message": record.reason}],
        )
        await _mark_broken(host, plugin_id, record, error)
        return None
    try:
        manifest, digest = await trio.to_thread.run_sync(load_stored_manifest, Path(record.path))
    except HostError as failure:
        errors = failure.data.get("errors")
        reason = f"its manifest cannot be loaded ({failure.message})"
        error = broken_error(plugin_id, record.path, "manifest", reason, errors if isinstance(errors, list) else [])
        await _mark_broken(host, plugin_id, record, error)
        return None
    if manifest.id != plugin_id:
        reason = f"its manifest now has the id {manifest.id!r}"
        error = broken_error(plugin_id, record.path, "manifest", reason, [{"field": "id", "message": reason}])
        await _mark_broken(host, plugin_id, record, error)
        return None
    host.catalog.broken.pop(plugin_id, None)
    plugin = host.add_plugin(Path(record.path), manifest, digest, restarts=record.restarts)
    plugin.take_record(record, manifest)
    with contextlib.suppress(LaunchError):
        await host.resolve(plugin)
    return plugin


async def _mark_broken(host: RestoreHost, plugin_id: str, record: StoredRecord, error: HostError) -> None:
    broken = BrokenPlugin(plugin_id, error.data.get("path"), record, error)
    host.catalog.broken[plugin_id] = broken
    log.warning("%s", error.message)
    await host.notify(
        "plugins/log", {"plugin": plugin_id, "level": "error", "source": "host", "message": error.message}
    )
    await host.notify("plugins/statusChanged", broken.status())


async def reload_manifests(host: RestoreHost) -> None:
    """SIGHUP's work, under :meth:`Catalog.change`: load again a broken plugin whose manifest was fixed,
    and take each installed plugin's manifest again where it changed on disk (see :meth:`Host.reload_manifests`)."""
    for plugin_id, broken in sorted(host.catalog.broken.items()):
        # A plugin whose manifest was fixed on disk is loaded again (a bad record stays broken: SIGHUP
        # does not re-read state.json).
        if plugin_id not in host.catalog.plugins and isinstance(broken.record, PluginRecord):
            restored = await restore_record(host, plugin_id, broken.record)
            if restored is not None:  # stopped now; enabling it goes through the usual checks
                message = "its manifest loads again: installed, stopped (plugins/enable starts it)"
                await host.notify(
                    "plugins/log", {"plugin": plugin_id, "level": "warning", "source": "host", "message": message}
                )
                await host.notify("plugins/statusChanged", restored.supervisor.status())
    for plugin_id, plugin in sorted(host.catalog.plugins.items()):
        try:
            manifest, digest = await trio.to_thread.run_sync(load_stored_manifest, plugin.path)
        except HostError as error:
            # The last good manifest is kept (the plugin runs and starts with it until one loads).
            await host.notify(
                "plugins/log", {"plugin": plugin_id, "level": "error", "source": "host", "message": error.message}
            )
            continue
        if digest == plugin.manifest_digest or manifest.id != plugin_id:
            continue
        plugin.manifest, plugin.manifest_digest = manifest, digest  # a running plugin keeps its own
        with contextlib.suppress(LaunchError):
            await host.resolve(plugin)
        await host.notify(
            "plugins/log",
            {
                "plugin": plugin_id,
                "level": "warning",
                "source": "host",
                "message": "manifest changed on disk; approve the new launch before the next start",
            },
        )
