"""The catalog (hostd/host/catalog.py) without processes: a change written with the state document or undone,
the records' round trip through state.json, the restore from a state folder, a damaged record.

Each test builds a real :class:`Host` (no ``initialize``, no plugin started) on a state folder in
``tmp_path``; its plugins are remote ones, whose launch resolves without running anything.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from hostd.control.core import InitializeOptions
from hostd.host import catalog, installs
from hostd.host.records import RECORDED_FIELDS, DerivedState, InstalledPlugin, RecordedState, load_stored_manifest
from hostd.host.service import Host, HostSettings
from hostd.storage.state import PluginRecord, StateStore, UnreadableRecord
from hostd.wire.errors import ErrorKind, HostError

Sent = list[tuple[str, dict[str, Any]]]


@pytest.fixture(autouse=True)
def _file_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOSTD_SECRETS", "file")  # no keyring looked for


def remote_plugin(folder: Path, plugin_id: str, permissions: list[str]) -> Path:
    """A remote plugin's folder: its manifest only."""
    folder.mkdir(parents=True)
    manifest = {
        "id": plugin_id,
        "name": plugin_id.title(),
        "version": "1.0.0",
        "permissions": permissions,
        "contributes": {"tools": [f"{plugin_id}.echo"]},
        "backend": {"type": "mcp", "transport": "streamable-http", "url": f"https://{plugin_id}.example.com/mcp"},
    }
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


@asynccontextmanager
async def host_on(state: Path, sent: Sent) -> AsyncIterator[Host]:
    """A host on the state folder ``state`` (opened and locked), its records read; closed after."""
    store = StateStore(state)
    opened = await trio.to_thread.run_sync(store.open)
    options = InitializeOptions("test", "1", "2026-01-01", None, str(state), state_store=store)

    async def notify(method: str, params: dict[str, Any]) -> None:
        sent.append((method, params))

    try:
        async with trio.open_nursery() as nursery:
            host = Host(options, notify, nursery, HostSettings())
            host.catalog.records = dict(opened.plugins)
            yield host
    finally:
        store.close()


async def install(host: Host, folder: Path) -> InstalledPlugin:
    """Install ``folder`` as ``plugins/install`` does: added and resolved under one change."""
    manifest, digest = await trio.to_thread.run_sync(load_stored_manifest, folder)
    async with host.catalog.change():
        plugin = host.add_plugin(folder, manifest, digest)
        plugin.install = installs.new_install(installs.origin_identity(manifest, folder))  # as install_folder does
        await host.resolve(plugin)
    return plugin


def document(state: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((state / "state.json").read_text())
    return loaded


# -- change and undo -----------------------------------------------------------------------------------


async def test_a_change_is_in_memory_and_in_the_document_together(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with host_on(state, []) as host:
        plugin = await install(host, remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use", "alpha.admin"]))
        async with host.catalog.change():
            plugin.granted = {"alpha.use"}
            plugin.enabled = True
        stored = document(state)["plugins"]["alpha"]
        assert stored["granted"] == ["alpha.use"]
        assert stored["enabled"] is True
        assert stored["path"] == str(tmp_path / "alpha")
        assert host.catalog.records["alpha"] == plugin.record()


async def test_a_failed_write_undoes_every_change_of_the_body(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with host_on(state, []) as host:
        alpha = await install(host, remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use"]))
        before = document(state)
        records_before = dict(host.catalog.records)
        beta_folder = remote_plugin(tmp_path / "beta", "beta", [])
        manifest, digest = load_stored_manifest(beta_folder)
        (state / "state.json").unlink()
        (state / "state.json").mkdir()  # the rename over it fails: EISDIR
        (state / "state.json" / "keep").write_text("")
        with pytest.raises(HostError) as failed:
            async with host.catalog.change():
                alpha.granted = {"alpha.use"}
                alpha.approved_digest = "sha256:whatever"
                alpha.limits["max_cpu_percent"] = 50
                host.add_plugin(beta_folder, manifest, digest)
        assert failed.value.kind is ErrorKind.STATE_WRITE_FAILED
        assert failed.value.data["path"] == str(state / "state.json")
        assert sorted(host.plugins) == ["alpha"]
        assert host.plugins["alpha"] is alpha
        assert alpha.granted == set()
        assert alpha.approved_digest is None
        assert alpha.limits == {}
        assert host.catalog.records == records_before
        (state / "state.json" / "keep").unlink()
        (state / "state.json").rmdir()
        await host.catalog.persist()
        assert document(state) == before


async def test_a_body_that_raises_is_undone_and_nothing_is_written(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with host_on(state, []) as host:
        alpha = await install(host, remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use"]))
        before = document(state)
        with pytest.raises(ValueError, match="midway"):
            async with host.catalog.change():  # as plugins/uninstall does
                host.plugins.pop("alpha")
                host.catalog.records.pop("alpha")
                raise ValueError("midway")
        assert host.plugins == {"alpha": alpha}
        assert host.catalog.records["alpha"] == alpha.record()
        with pytest.raises(ValueError, match="midway"):
            async with host.catalog.change():
                alpha.disabled_tools = {"echo"}
                raise ValueError("midway")
        assert alpha.disabled_tools == set()
        assert document(state) == before


# -- persistence and restore ---------------------------------------------------------------------------


async def test_records_round_trip_and_restore_from_the_state_folder(tmp_path: Path) -> None:
    state = tmp_path / "state"
    alpha_folder = remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use", "alpha.admin"])
    beta_folder = remote_plugin(tmp_path / "beta", "beta", ["beta.use"])
    async with host_on(state, []) as first:
        alpha = await install(first, alpha_folder)
        beta = await install(first, beta_folder)
        assert alpha.launch is not None
        async with first.catalog.change():
            alpha.granted = {"alpha.use", "alpha.admin"}
            alpha.approved_digest = alpha.approval_digest(alpha.launch)
            alpha.enabled = True
            alpha.pins = {"echo": "sha256:pin"}
            alpha.limits = {"max_cpu_percent": 25.0}
            alpha.disabled_tools = {"echo"}
            alpha.folders = {"read": [str(tmp_path)]}
            beta.granted = {"beta.use"}
        written = {plugin_id: plugin.record() for plugin_id, plugin in first.plugins.items()}
    sent: Sent = []
    async with host_on(state, sent) as second:
        assert second.catalog.records == written
        to_enable = await catalog.restore(second, [])
        assert sorted(second.plugins) == ["alpha", "beta"]
        assert [(plugin.manifest.id, record) for plugin, record in to_enable] == [("alpha", written["alpha"])]
        restored = second.plugins["alpha"]
        assert restored.path == alpha_folder
        assert restored.granted == {"alpha.use", "alpha.admin"}
        assert restored.enabled is True
        assert restored.pins == {"echo": "sha256:pin"}
        assert restored.limits == {"max_cpu_percent": 25.0}
        assert restored.disabled_tools == {"echo"}
        assert restored.folders == {"read": [str(tmp_path)]}
        assert restored.launch is not None  # resolved again
        assert restored.approved_digest == restored.approval_digest(restored.launch)
        assert second.plugins["beta"].enabled is False
        assert {plugin_id: plugin.record() for plugin_id, plugin in second.plugins.items()} == written
        assert second.broken == {}
        assert sent == []


async def test_restore_keeps_only_the_grants_the_manifest_still_declares(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use"])
    _, digest = load_stored_manifest(folder)
    record = PluginRecord(path=str(folder), manifest_digest=digest, granted=["alpha.gone", "alpha.use"])
    async with host_on(state, []) as first:
        first.catalog.records = {"alpha": record}
        await first.catalog.persist()
    async with host_on(state, []) as second:
        await catalog.restore(second, [])
        assert second.plugins["alpha"].granted == {"alpha.use"}


async def test_a_damaged_record_is_listed_broken_and_kept_as_it_was(tmp_path: Path) -> None:
    state = tmp_path / "state"
    async with host_on(state, []) as first:
        await install(first, remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use"]))
        await install(first, remote_plugin(tmp_path / "beta", "beta", ["beta.use"]))
    damaged = document(state)
    damaged["plugins"]["beta"]["granted"] = "beta.use"  # a string where a list belongs
    (state / "state.json").write_text(json.dumps(damaged))
    sent: Sent = []
    async with host_on(state, sent) as host:
        assert isinstance(host.catalog.records["beta"], UnreadableRecord)
        await catalog.restore(host, ["a warning of the open"])
        assert sorted(host.plugins) == ["alpha"]
        assert sorted(host.broken) == ["beta"]
        error = host.broken["beta"].error
        reason = "its record in state.json cannot be read (plugin record field 'granted' has the wrong type)"
        assert error.kind is ErrorKind.PLUGIN_BROKEN
        assert error.data["source"] == "state"
        assert error.data["reason"] == reason
        assert error.data["errors"] == [
            {"field": "plugins.beta.granted", "message": "plugin record field 'granted' has the wrong type"}
        ]
        with pytest.raises(HostError) as asked:
            host.catalog.plugin("beta")
        assert asked.value is error
        assert host.catalog.broken_only("beta") is host.broken["beta"]
        assert [(method, params.get("plugin"), params.get("status")) for method, params in sent] == [
            ("plugins/log", None, None),
            ("plugins/log", "beta", None),
            ("plugins/statusChanged", None, "broken"),
        ]
        assert sent[0][1]["message"] == "a warning of the open"
        await host.catalog.persist()  # the damaged record is written back as it was found
        assert document(state)["plugins"]["beta"] == damaged["plugins"]["beta"]


async def test_a_manifest_that_no_longer_loads_is_listed_broken(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use"])
    async with host_on(state, []) as first:
        await install(first, folder)
    (folder / "plugin.yaml").write_text("id: [unclosed\n")
    async with host_on(state, []) as host:
        assert await catalog.restore(host, []) == []
        assert host.plugins == {}
        error = host.broken["alpha"].error
        assert error.kind is ErrorKind.PLUGIN_BROKEN
        assert error.data["source"] == "manifest"
        assert error.data["path"] == str(folder)
        with pytest.raises(HostError) as unknown:
            host.catalog.plugin("nobody")
        assert unknown.value.kind is ErrorKind.PLUGIN_NOT_FOUND


# -- the one field list --------------------------------------------------------------------------------


def test_the_recorded_fields_are_the_records_and_are_undone() -> None:
    """Every field of state.json's record comes from one recorded field (the restart count from the
    supervisor), and every recorded field is one a failed change puts back."""
    stored = {f.name for f in dataclasses.fields(PluginRecord)}
    assert stored == {*RECORDED_FIELDS, "restarts", "pinned_tools"} - {"pins"}
    assert set(RECORDED_FIELDS) <= set(catalog.PLUGIN_FIELDS)
    assert not set(RECORDED_FIELDS) & {f.name for f in dataclasses.fields(DerivedState)}


def test_a_record_taken_back_gives_the_same_record(tmp_path: Path) -> None:
    folder = remote_plugin(tmp_path / "alpha", "alpha", ["alpha.use", "alpha.admin"])
    manifest, digest = load_stored_manifest(folder)
    state = RecordedState(
        path=folder,
        manifest_digest=digest,
        granted={"alpha.use"},
        approved_digest="sha256:approved",
        enabled=True,
        limits={"max_rss_bytes": 1 << 20},
        pins={"echo": "sha256:pin"},
        disabled_tools={"echo"},
        folders={"write": [str(tmp_path)]},
        secret_arguments=True,
        install={"id": "0123456789abcdef", "origin": f"folder:{folder}"},
        call_grants={str(tmp_path / "q3.xlsx"): "read"},
        start_error={"kind": "PLUGIN_START_FAILED", "message": "m", "time": "2026-12-06T06:00:00Z", "reason": "r"},
    )
    record = state.to_record(restarts=3)
    assert record.to_json() == {
        "path": str(folder),
        "manifestDigest": digest,
        "granted": ["alpha.use"],
        "approvedDigest": "sha256:approved",
        "enabled": True,
        "restarts": 3,
        "pinnedTools": {"echo": "sha256:pin"},
        "networkPorts": [],
        "limits": {"max_rss_bytes": 1 << 20},
        "disabledTools": ["echo"],
        "folders": {"write": [str(tmp_path)]},
        "secretArguments": True,
        "install": {"id": "0123456789abcdef", "origin": f"folder:{folder}"},
        "callGrants": {str(tmp_path / "q3.xlsx"): "read"},
        "startError": {"kind": "PLUGIN_START_FAILED", "message": "m", "time": "2026-12-06T06:00:00Z", "reason": "r"},
    }
    taken = RecordedState(path=folder, manifest_digest=digest)
    taken.take_record(record, manifest)
    assert taken == state
