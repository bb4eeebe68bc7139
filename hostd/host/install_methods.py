"""The install paths, as control methods: ``plugins/install`` (a plugin folder, an MCPB bundle, a registry
``server.json``) and ``plugins/import`` (an ``mcpServers`` config), with what they share: unpacking a bundle or
an entry into a folder hostd generates, checking a replacement, adding the plugin, checking a bundle's runtimes.

The methods are written against :class:`InstallHost`, the small interface they need of the host (its plugins,
its state folder and secret store, its settings, a state change, adding a plugin, resolving its launch), so this
module does not import the host that registers them in ``Host.METHODS``. What they unpack and parse lives in
:mod:`hostd.install` (bundle, serverjson, importer, runtimes), which imports nothing of the host.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import trio

from hostd.control import models as p
from hostd.control.core import RequestContext
from hostd.host import installs
from hostd.host.records import HostSettings, InstalledPlugin, write_failed
from hostd.install.manifest import BUNDLE_SUFFIXES, Manifest, load_manifest
from hostd.mcp.permissions import RESERVED_PERMISSIONS
from hostd.plugins.supervisor import State
from hostd.storage import secrets as secrets_
from hostd.storage.state import MANIFEST_TEMPORARY, StateStore
from hostd.wire.errors import ErrorKind, HostError
from sandbox.launch import Launch, LaunchError

if TYPE_CHECKING:
    from hostd.install.importer import Imported, ImportedServer

log = logging.getLogger(__name__)

# Start-up cost: bundles, config import (pydantic models, zipfile, the JSON5 parser) and registry entries are
# imported in the function that needs them: only a request that installs one pays for it.


class InstallHost(Protocol):
    """What the install paths need of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def plugins(self) -> dict[str, InstalledPlugin]: ...

    @property
    def store(self) -> StateStore | None: ...

    @property
    def secret_store(self) -> secrets_.SecretStore | None: ...

    @property
    def settings(self) -> HostSettings: ...

    @property
    def known_permissions(self) -> set[str] | None: ...

    def change(self) -> AbstractAsyncContextManager[None]:
        """Apply the body's changes to memory and the state document together, or to neither."""
        ...

    def add_plugin(self, folder: Path, manifest: Manifest, digest: str, *, restarts: int = 0) -> InstalledPlugin:
        """Add a stopped plugin (replacing one of the same id) with a supervisor of its own."""
        ...

    async def resolve(self, plugin: InstalledPlugin) -> Launch:
        """Resolve ``plugin``'s launch; raises :class:`sandbox.launch.LaunchError`."""
        ...

    async def command_path(self) -> str:
        """hostd's ``PATH`` followed by the login shell's entries it lacks."""
        ...

    def info(self, plugin: InstalledPlugin) -> dict[str, Any]:
        """:class:`hostd.control.models.PluginInfo` as sent on the wire."""
        ...


async def install(host: InstallHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/install {path} | {serverJson, package?}``: read and validate; start nothing.

    ``path``: a plugin folder, or an MCPB bundle file (``.mcpb`` / ``.dxt``, extracted into
    ``<stateDir>/bundles/<id>``, hostd/install/bundle.py). ``serverJson``: an MCP Registry entry
    (hostd/install/serverjson.py; its manifest is written to ``<stateDir>/registry/<id>``).
    ``PACKAGE_INVALID`` for a bundle or entry that cannot be installed (``data.errors``).
    """
    args = p.parse_params(p.InstallParams, params)
    if (args.path is None) == (args.server_json is None):
        raise HostError(ErrorKind.INVALID_PARAMS, "give exactly one of 'path' and 'serverJson'")
    if args.server_json is not None:
        folder = await unpack_server_json(host, args.server_json, args.package or 0)
    else:
        assert args.path is not None
        folder = Path(os.path.abspath(os.path.expanduser(args.path)))
        if folder.suffix.lower() in BUNDLE_SUFFIXES:
            folder = await unpack_bundle(host, folder)
    async with host.change():
        bundles_root = host.store.directory / "bundles" if host.store is not None else None
        fresh = folder.parent == bundles_root and folder.name not in host.plugins
        try:
            plugin = await install_folder(host, folder, adopt_data=args.adopt_data)
            await check_runtimes(host, plugin)
        except HostError as exc:
            if fresh and exc.data.get("reason") == "runtime-unsupported":  # nothing of it is kept
                await trio.to_thread.run_sync(lambda: shutil.rmtree(folder, ignore_errors=True))
            raise
    return host.info(plugin)


async def check_runtimes(host: InstallHost, plugin: InstalledPlugin) -> None:
    """Check a bundle's ``compatibility.runtimes`` against the runtime its resolved launch runs (at install).

    hostd/install/runtimes.py: the launch's runtime chain (``Launch.runtime``) is
    searched for each required runtime, which is asked its version. Records
    the versions found (``PluginInfo.origin.runtimeVersions``). Raises
    ``PACKAGE_INVALID`` with ``data.reason: runtime-unsupported`` and
    ``runtime``, ``required``, ``found`` (the version, ``null`` when it
    could not be read), ``executable``; a launch that does not resolve is
    not checked (its error is in ``launch.error``). Runs each runtime once,
    in a worker thread; cancellation waits for it (at most 15 s each).
    """
    origin, launch = plugin.manifest.origin, plugin.launch
    if origin is None or not origin.runtimes or not isinstance(launch, Launch):
        return
    from hostd.install import runtimes  # noqa: PLC0415 - only bundles that name runtimes pay for it

    env = {"PATH": await host.command_path(), "HOME": os.path.expanduser("~")}
    untrusted = [str(plugin.path), *([str(host.store.directory)] if host.store is not None else [])]
    try:
        found = await trio.to_thread.run_sync(runtimes.check, origin.runtimes, launch.runtime, env, untrusted)
    except runtimes.RuntimeMismatch as exc:
        what = exc.found
        raise HostError(
            ErrorKind.PACKAGE_INVALID,
            str(exc),
            reason="runtime-unsupported",
            runtime=what.runtime,
            required=what.required,
            found=what.version,
            executable=what.executable,
            errors=[{"field": f"compatibility.runtimes.{what.runtime}", "message": str(exc)}],
        ) from None
    plugin.runtime_versions = {f.runtime: f.version for f in found if f.version is not None}


def generated_root(host: InstallHost, kind: str) -> Path:
    if host.store is None:
        raise HostError(ErrorKind.STATE_UNUSABLE, f"installing {kind} needs a state directory")
    return host.store.directory / kind


async def stop_failed(host: InstallHost, plugin_id: str, folder: Path) -> None:
    """Stop ``plugin_id`` when it is installed from ``folder`` and in ``error``: what installing it again replaces.

    The class (issue 28): *a plugin whose start failed is replaced only after a separate disable*. It runs
    nothing (at most a retry is pending): installing it again (a fixed release, from a folder, a bundle, a
    registry entry, a config imported again) replaces it as it is, its retries stopped. A plugin that runs is
    still refused (:func:`check_replace`). Cancellation waits for the stop (the supervisor's ``disable``).
    """
    existing = host.plugins.get(plugin_id)
    if existing is not None and existing.path == folder and existing.supervisor.state is State.ERROR:
        await existing.supervisor.disable()


def check_replace_from_thread(host: InstallHost, plugin_id: str, folder: Path) -> None:
    """:func:`check_replace` from a worker thread (a bundle being unpacked), after :func:`stop_failed` (run in
    the event loop, waited for)."""
    trio.from_thread.run(stop_failed, host, plugin_id, folder)
    check_replace(host, plugin_id, folder)


def check_replace(host: InstallHost, plugin_id: str, folder: Path) -> None:
    """Refuse to (re)install ``plugin_id`` from ``folder``: another folder has it, or it is not stopped
    (:func:`stop_failed` stops one in ``error`` first)."""
    existing = host.plugins.get(plugin_id)
    if existing is None:
        return
    if existing.path != folder:
        raise HostError(
            ErrorKind.PLUGIN_ALREADY_INSTALLED,
            f"plugin {plugin_id!r} is already installed from {existing.path}",
            plugin=plugin_id,
            path=str(existing.path),
        )
    if existing.supervisor.state is not State.STOPPED:
        raise HostError(
            ErrorKind.PLUGIN_STATE_CONFLICT,
            f"plugin {plugin_id!r} is {existing.supervisor.state.value}; disable it before reinstalling",
            plugin=plugin_id,
        )


async def unpack_bundle(host: InstallHost, path: Path, *, origin: dict[str, Any] | None = None) -> Path:
    """Extract the bundle file at ``path`` and write its ``plugin.json``; return the plugin folder."""
    root = generated_root(host, "bundles")
    from hostd.install import bundle as bundles  # noqa: PLC0415 - lazy (see the imports)

    def unpack() -> Path:
        bundle = bundles.read_bundle(path, trust_roots=host.settings.bundle_trust_roots)
        folder: Path
        folder, document = bundles.install_bundle(
            bundle, root, check=functools.partial(check_replace_from_thread, host)
        )
        if origin is not None:
            document["origin"] = {**document["origin"], **origin}
        _write_manifest(folder, document)
        return folder

    return await trio.to_thread.run_sync(unpack)


async def unpack_server_json(host: InstallHost, entry: dict[str, Any] | str, index: int) -> Path:
    """Turn a registry ``server.json`` into a plugin folder (an mcpb package: a bundle); return it."""
    from hostd.install import serverjson  # noqa: PLC0415 - only installs from the registry pay for it

    plan = await trio.to_thread.run_sync(serverjson.plan, entry, index)
    if plan.bundle_url is not None:
        root = generated_root(host, "bundles")
        path = await serverjson.download_bundle(plan, root, allow_private=host.settings.download_allow_private)
        try:
            return await unpack_bundle(host, path, origin={"kind": "registry", "source": plan.name})
        finally:
            path.unlink(missing_ok=True)
    assert plan.manifest is not None
    plugin_id = str(plan.manifest["id"])
    folder: Path = generated_root(host, "registry") / plugin_id
    await stop_failed(host, plugin_id, folder)
    check_replace(host, plugin_id, folder)
    try:
        await trio.to_thread.run_sync(_write_manifest, folder, plan.manifest)
    except OSError as exc:
        raise write_failed(exc, folder / "plugin.json") from None
    if plan.remote is not None:
        raise HostError(
            ErrorKind.PACKAGE_INVALID,
            f"{plan.name}: a remote server ({plan.remote.get('type')} at {plan.remote.get('url')}); its manifest "
            f"is recorded in {folder}, but this hostd runs only stdio servers",
            errors=[{"field": "remotes", "message": "remote transports are not supported yet"}],
            path=str(folder),
        )
    return folder


async def install_folder(host: InstallHost, folder: Path, *, adopt_data: bool = False) -> InstalledPlugin:
    """Read and validate ``folder``'s manifest and add the plugin (stopped).

    Its private state is its install's (:func:`take_private_state`); ``adopt_data``: ``plugins/install``'s
    ``adoptData``.
    """
    manifest, digest = await trio.to_thread.run_sync(load_manifest, folder)
    if host.known_permissions is not None:
        unknown = sorted(set(manifest.permissions) - host.known_permissions - RESERVED_PERMISSIONS)
        if unknown:
            raise HostError(
                ErrorKind.PERMISSION_UNKNOWN,
                f"permissions not among the parent's knownPermissions: {', '.join(unknown)}",
                path=str(folder),
                plugin=manifest.id,
                permissions=unknown,
            )
    existing = host.plugins.get(manifest.id)
    await stop_failed(host, manifest.id, folder)
    check_replace(host, manifest.id, folder)
    plugin = host.add_plugin(folder, manifest, digest)
    if existing is not None:
        plugin.granted = existing.granted & set(manifest.permissions)
        plugin.approved_digest = existing.approved_digest
        plugin.pins = existing.pins
        plugin.disabled_tools = set(existing.disabled_tools)
    await take_private_state(host, plugin, existing, adopt_data=adopt_data)
    with contextlib.suppress(LaunchError):
        await host.resolve(plugin)  # a failure is shown in launch.error; enable fails with it
    return plugin


async def take_private_state(
    host: InstallHost, plugin: InstalledPlugin, existing: InstalledPlugin | None, *, adopt_data: bool
) -> None:
    """Give ``plugin`` its install identity and only its own private state (issue 25, over-granting 3).

    The same origin as the install it replaces (an update): the identity, data and secrets go on. Any
    other case is a new install: a data folder still under the id (the replaced install's, or one an
    older hostd kept at uninstall) is moved aside (:func:`hostd.host.installs.keep_aside`), the replaced
    install's secrets and settings are dropped, and kept data is adopted only with ``adopt_data`` and
    the same origin (:func:`hostd.host.installs.adopt`). File work in a worker thread.
    """
    origin = installs.origin_identity(plugin.manifest, plugin.path)
    if existing is not None and installs.same_origin(existing.install, origin):
        plugin.install = dict(existing.install)
        return
    plugin.install = installs.new_install(origin)
    if host.store is None:
        return
    state_dir, plugin_id, store = host.store.directory, plugin.manifest.id, host.secret_store
    before = dict(existing.install) if existing is not None else {"origin": "unknown"}
    owner = installs.secret_owner(plugin_id, plugin.install)

    def hand_over() -> None:
        # The replaced install's secrets stay under its own key, kept aside with its data (never this one's).
        held = (
            store is not None and existing is not None and bool(store.names(installs.secret_owner(plugin_id, before)))
        )
        installs.keep_aside(state_dir, plugin_id, before, has_secrets=held)
        with contextlib.suppress(FileNotFoundError):
            (state_dir / secrets_.SETTINGS_FOLDER / f"{plugin_id}.json").unlink()
        adopted = installs.adopt(state_dir, plugin_id, origin) if adopt_data else None
        if adopted is not None and store is not None:
            store.move(secrets_.install_key(plugin_id, adopted.name), owner)

    try:
        await trio.to_thread.run_sync(hand_over)
    except HostError as error:  # an unreadable secrets file: nothing of the old install's is this one's anyway
        log.warning("installing %s: its secrets were not handed over: %s", plugin_id, error.message)
    plugin.settings, plugin.secret_names = {}, set()


async def import_config(host: InstallHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/import {config}``: install every server of an ``mcpServers`` config.

    All-or-nothing: any invalid entry fails the whole import
    (``IMPORT_INVALID``, each entry's outcome in ``data.entries``) and
    nothing is written; a failure or cancellation while installing removes
    what was written. Remote (``url``) entries are reported, not installed.
    At most ``MAX_IMPORT_ENTRIES`` servers and ``MAX_IMPORT_BYTES`` of text
    (``IMPORT_INVALID`` otherwise). Generated manifests live in
    ``<stateDir>/imported/<id>/plugin.json``; uninstall removes that folder.
    """
    from hostd.install.importer import ConfigError, plan_import  # noqa: PLC0415 - lazy (see the imports)

    args = p.parse_params(p.ImportParams, params)
    root = host.store.directory / "imported" if host.store is not None else None
    taken = set(host.plugins)
    earlier = {pid: plugin.path for pid, plugin in host.plugins.items() if plugin.path.parent == root}
    try:
        # Off the event loop: reading the installed manifests is file I/O, parsing and
        # planning are CPU work on parent-sized input.
        entries = await trio.to_thread.run_sync(
            lambda: plan_import(args.config, taken=taken, imported=_read_imported(earlier), secret_env=args.secret_env)
        )
    except ConfigError as exc:
        where = {"errors": [{"field": exc.field, "message": str(exc)}]} if exc.field is not None else {}
        raise HostError(ErrorKind.IMPORT_INVALID, f"cannot import: {exc}", entries=[], **where) from None
    invalid = [e for e in entries if e.outcome == "invalid"]
    if invalid:
        raise HostError(
            ErrorKind.IMPORT_INVALID,
            f"nothing imported: {len(invalid)} invalid entr{'y' if len(invalid) == 1 else 'ies'} "
            f"({', '.join(repr(e.name) for e in invalid)})",
            entries=[e.to_wire() for e in entries],
        )
    if host.store is None or root is None:
        raise HostError(ErrorKind.STATE_UNUSABLE, "plugins/import needs a state directory")
    written: list[Path] = []
    replaced: dict[Path, bytes] = {}  # updated entries: the manifest bytes to put back on failure
    stored: list[str] = []  # plugin ids whose secrets this import stored
    results: list[dict[str, Any]] = []
    try:
        async with host.change():  # a failure undoes every install of this import
            for entry in entries:
                wire = entry.to_wire()
                results.append(wire)
                if entry.manifest is None or entry.plugin_id is None:
                    continue
                folder = root / entry.plugin_id
                await store_secrets(host, entry, wire, stored)
                if entry.outcome == "unchanged":
                    wire["plugin"] = host.info(host.plugins[entry.plugin_id])
                    continue
                if entry.outcome == "updated":
                    replaced[folder] = await trio.to_thread.run_sync((folder / "plugin.json").read_bytes)
                else:
                    for made in (  # install creates them (data folder, TMPDIR)
                        host.store.directory / "data" / entry.plugin_id,
                        host.store.directory / "tmp" / entry.plugin_id,
                    ):
                        if not await trio.to_thread.run_sync(made.exists):
                            written.append(made)
                    written.append(folder)
                try:
                    await trio.to_thread.run_sync(_write_manifest, folder, entry.manifest)
                except OSError as exc:
                    raise write_failed(exc, folder / "plugin.json") from None
                plugin = await install_folder(host, folder)
                if entry.outcome == "ready-to-install" and entry.secret_values:
                    await store_secrets(host, entry, wire, stored)  # now that its install owns them
                    with contextlib.suppress(LaunchError):
                        await host.resolve(plugin)  # which secrets are set
                if entry.outcome == "updated":
                    plugin.approved_digest = None  # a changed entry is a new launch to approve
                else:
                    wire["outcome"] = "installed"
                wire["plugin"] = host.info(plugin)
    except BaseException:
        # Any failure, cancellation included, leaves nothing: no plugin (undone above), no
        # folder, and an updated plugin's manifest as it was.
        with trio.CancelScope(shield=True):
            await _remove_written(host, written, replaced, stored)
        raise
    return p.ImportResult.model_validate({"entries": results}).wire()


async def _remove_written(
    host: InstallHost, written: list[Path], replaced: dict[Path, bytes], stored: list[str]
) -> None:
    """After a failed ``plugins/import``: remove the folders it created, put back the manifests it replaced,
    drop the secrets it stored for new plugins. Call it shielded."""
    for folder in written:
        await trio.to_thread.run_sync(shutil.rmtree, folder, True)
    for folder, document in replaced.items():
        with contextlib.suppress(OSError):
            await trio.to_thread.run_sync(_restore_manifest, folder, document)
    if host.secret_store is not None:
        for owner in stored:
            await trio.to_thread.run_sync(host.secret_store.drop, owner)


async def store_secrets(host: InstallHost, entry: ImportedServer, wire: dict[str, Any], stored: list[str]) -> None:
    """Put the secret values the importer took out of ``entry`` (``secret_values``) in the secret store.

    Its manifest already holds ``${secret:NAME}`` in their place (:func:`hostd.install.importer.plan_import`).
    An ``unchanged`` entry's values are stored too: a new key in the config replaces the old one
    without voiding the approval (the digest covers the reference, not the value).
    """
    values, plugin_id = entry.secret_values, entry.plugin_id
    if not values or host.secret_store is None or plugin_id is None or plugin_id not in host.plugins:
        return  # a new plugin's are stored once it is installed (its install is their owner)
    store = host.secret_store
    plugin = host.plugins[plugin_id]
    owner = installs.secret_owner(plugin_id, plugin.install)
    if entry.outcome == "ready-to-install":
        stored.append(owner)  # a failed import drops a new plugin's secrets, never an installed one's

    def save() -> list[str]:
        changed = []
        for name, value in values.items():
            if store.get(owner, name) != value:
                store.set(owner, name, value)
                changed.append(name)
        return changed

    try:
        changed = await trio.to_thread.run_sync(save)
    except OSError as exc:
        raise write_failed(exc, store.path) from None
    if changed and entry.outcome != "ready-to-install":
        wire.setdefault("notes", []).append(f"secret {', '.join(sorted(changed))} updated in the secret store")


def _write_manifest(folder: Path, document: dict[str, Any]) -> None:
    """Write ``plugin.json`` into ``folder`` (created 0700) atomically.

    Raises ``OSError``; the temporary file is then removed and any previous
    ``plugin.json`` left as it was.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = folder / "plugin.json"
    temporary = folder / MANIFEST_TEMPORARY
    try:
        temporary.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        os.chmod(temporary, 0o600)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise


def _restore_manifest(folder: Path, document: bytes) -> None:
    """Put ``plugin.json`` back as ``document`` (an updated import that failed). Raises ``OSError``."""
    temporary = folder / MANIFEST_TEMPORARY
    temporary.write_bytes(document)
    os.chmod(temporary, 0o600)
    os.replace(temporary, folder / "plugin.json")


def _read_imported(folders: dict[str, Path]) -> dict[str, Imported]:
    """The plugins earlier imports installed, by the config entry name each came from (its
    manifest's ``name``): ``plugins/import`` compares a new entry with them. Blocking (reads
    each ``plugin.json``); one that cannot be read is left out (then it is installed anew)."""
    from hostd.install.importer import Imported  # noqa: PLC0415 - lazy (see the imports)

    found: dict[str, Imported] = {}
    for plugin_id, folder in sorted(folders.items()):
        try:
            document = orjson.loads((folder / "plugin.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if isinstance(document, dict) and isinstance(document.get("name"), str):
            found[document["name"]] = Imported(plugin_id, document)
    return found


async def migrate_secrets(host: InstallHost) -> None:
    """Key a secret store written before installs by install, once, at hostd's start
    (:meth:`hostd.storage.secrets.SecretStore.migrate`).

    Each plugin whose secrets moved has its install recorded (a record from before installs got its
    identity at load: written now, so the key stays its own) and its launch resolved again (which
    secrets are set). An unreadable store is left as it is (its plugins fail at enable, as before); a
    damaged one is moved aside by the read, never overwritten. Cancellation: the store is written in a
    worker thread, one atomic write per moved name.
    """
    store = host.secret_store
    if store is None:
        return
    owners = {key: installs.secret_owner(key, plugin.install) for key, plugin in host.plugins.items()}
    try:
        moved = await trio.to_thread.run_sync(store.migrate, owners)
    except HostError as error:
        log.warning("the secrets were not keyed by install: %s", error.message)
        return
    except OSError as exc:
        log.warning("the secrets were not keyed by install: %s", exc)
        return
    claimed = [host.plugins[key] for key in moved if key in host.plugins]
    if not claimed:
        return
    async with host.change():
        pass  # the installs of the plugins whose secrets moved, recorded
    for plugin in claimed:
        with contextlib.suppress(LaunchError):
            await host.resolve(plugin)
