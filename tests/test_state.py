"""Durable state: restore after a restart, the lock, refusal of newer or corrupt documents."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.storage.state import PluginRecord, StateStore
from tests.conftest import MakePlugin, ready, spawn_hostd


async def test_restart_restores_enabled_plugins_with_the_same_tools(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as first:
        await ready(first, folder)
        before = await first.request("tools/list", {})
    document = json.loads((tmp_path / "state" / "state.json").read_text())
    assert document["version"] == 1
    assert document["plugins"]["mcp-echo"]["enabled"] is True
    assert document["plugins"]["mcp-echo"]["granted"] == ["echo.inspect", "echo.use"]
    assert (tmp_path / "state" / "state.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "state").stat().st_mode & 0o777 == 0o700
    async with spawn_hostd(tmp_path) as second:
        status = await second.wait_for("plugins/statusChanged", lambda s: s["status"] == "ready")
        assert status["plugin_id"] == "mcp-echo"
        after = await second.request("tools/list", {})
        assert [t["name"] for t in after["tools"]] == [t["name"] for t in before["tools"]]
        assert [t["function_name"] for t in after["tools"]] == [t["function_name"] for t in before["tools"]]
        result = await second.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "back"}})
        assert result["structuredContent"] == {"text": "back", "length": 4}


async def test_changed_manifest_is_not_started_on_restore(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as first:
        await ready(first, folder)
    manifest = folder / "plugin.yaml"
    manifest.write_text(manifest.read_text().replace("version: 1.0.0", "version: 1.0.1"))
    async with spawn_hostd(tmp_path) as second:
        status = await second.wait_for("plugins/statusChanged", lambda s: s["status"] == "error")
        assert status["error"]["kind"] == "MANIFEST_CHANGED"
        assert (await second.request("tools/list", {}))["tools"] == []
        listed = await second.request("plugins/list", {})
        assert listed["plugins"][0]["granted"] == ["echo.inspect", "echo.use"]
        assert listed["plugins"][0]["launch"]["approved"] is False


async def test_second_hostd_on_the_same_state_dir_exits_75(tmp_path: Path) -> None:
    async with spawn_hostd(tmp_path) as first:
        await first.request("plugins/list", {})
        second = await trio.run_process(
            [sys.executable, "-m", "hostd", "serve", "--state-dir", str(tmp_path / "state")],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
        assert second.returncode == 75
        assert b"in use by another hostd" in second.stderr
        assert second.stdout == b""


async def test_newer_document_is_refused_and_left_untouched(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    content = b'{"version": 99, "plugins": {}, "future": true}\n'
    (state / "state.json").write_bytes(content)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hostd", "serve", "--state-dir", str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=plugin_environment(),
    )
    client = HostdClient(process)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client._reader)
        await client.request("initialize", {"clientInfo": {"name": "t", "version": "0"}})
        with pytest.raises(RpcError) as refused:
            await client.request("plugins/list", {})
        assert refused.value.kind == "STATE_UNUSABLE"
        with trio.fail_after(10):
            assert await process.wait() == 78
    assert (state / "state.json").read_bytes() == content


async def test_corrupt_document_is_moved_aside_and_reported(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "state.json").write_bytes(b'{"version": 1, "plugins": {"x": ')
    async with spawn_hostd(tmp_path) as client:
        note = await client.wait_for("plugins/log", lambda n: n["source"] == "host")
        assert "was corrupt" in note["message"]
        assert (await client.request("plugins/list", {}))["plugins"] == []
    aside = [p.name for p in state.iterdir() if p.name.startswith("state.json.corrupt-")]
    assert len(aside) == 1
    assert (state / aside[0]).read_bytes() == b'{"version": 1, "plugins": {"x": '


def test_store_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s")
    assert store.open().plugins == {}
    record = PluginRecord(path="/p", manifest_digest="sha256:a", granted=["b", "a"], approved_digest=None, enabled=True)
    store.save({"p": record})
    store.close()
    again = StateStore(tmp_path / "s")
    opened = again.open()
    assert opened.plugins == {"p": PluginRecord("/p", "sha256:a", ["a", "b"], None, True, 0)}
    assert [p.name for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")] == []
    again.close()


_WRITER = """
import sys
from pathlib import Path
from hostd.storage.state import PluginRecord, StateStore
store = StateStore(Path(sys.argv[1]))
store.open()
print("ready", flush=True)
i = 0
while True:
    i += 1
    store.save({f"p{j}": PluginRecord(path=f"/p/{i}", manifest_digest=f"sha256:{i}", restarts=i) for j in range(20)})
"""


async def test_sigkill_during_writes_never_corrupts_the_document(tmp_path: Path) -> None:
    state = tmp_path / "state"
    rng = random.Random(7)
    for _round in range(25):
        process = await trio.lowlevel.open_process([sys.executable, "-c", _WRITER, str(state)], stdout=subprocess.PIPE)
        assert process.stdout is not None
        assert (await process.stdout.receive_some(16)).startswith(b"ready")
        await trio.sleep(rng.uniform(0.005, 0.05))
        process.send_signal(signal.SIGKILL)
        await process.wait()
        await process.stdout.aclose()
        temporary = f".state.json.{process.pid}.tmp"
        store = StateStore(state)
        opened = store.open()
        store.close()
        # A kill in the middle of a write leaves its temporary file: the next open removes it.
        assert opened.warnings in ([], [f"removed 1 temporary file(s) of interrupted state writes: {temporary}"])
        assert not (state / temporary).exists()
        if opened.plugins:
            records = [r for r in opened.plugins.values() if isinstance(r, PluginRecord)]
            assert len(records) == len(opened.plugins)  # no record came back unreadable
            generations = {r.restarts for r in records}
            assert len(generations) == 1  # one whole document, never a mix
            assert len(opened.plugins) == 20


async def test_hostd_killed_with_sigkill_comes_back_with_the_same_plugins(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as first:
        await ready(first, folder)
        before = await first.request("tools/list", {})
        first.process.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            await first.process.wait()
    async with spawn_hostd(tmp_path) as second:
        status = await second.wait_for("plugins/statusChanged", lambda s: s["status"] == "ready")
        assert status["plugin_id"] == "mcp-echo"
        after = await second.request("tools/list", {})
        assert [t["name"] for t in after["tools"]] == [t["name"] for t in before["tools"]]
        result = await second.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "again"}})
        assert result["structuredContent"] == {"text": "again", "length": 5}


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        # The class: a recorded start failure is a field of the document, attacker input like the rest.
        (
            {"kind": "PLUGIN_START_FAILED", "message": "m", "time": "t"},
            {"kind": "PLUGIN_START_FAILED", "message": "m", "time": "t"},
        ),
        (
            {"kind": "K", "message": "m", "time": "t", "reason": "r"},
            {"kind": "K", "message": "m", "time": "t", "reason": "r"},
        ),
        ({"kind": "K", "message": "m", "time": "t", "reason": 7}, {"kind": "K", "message": "m", "time": "t"}),
        ({"kind": "K", "message": "x" * 5000, "time": "t"}, {"kind": "K", "message": "x" * 2000, "time": "t"}),
        ({"kind": "K", "message": 3, "time": "t"}, None),
        ({"kind": "K", "time": "t"}, None),
        ("failed", None),
        ([1, 2], None),
        (None, None),
    ],
)
def test_a_recorded_start_failure_is_read_within_bounds_or_dropped(stored: object, read: object) -> None:
    """A malformed ``startError`` is dropped (the plugin shows ``stopped``), never a broken record; text is cut."""
    value = PluginRecord(path="/p", manifest_digest="sha256:x").to_json()
    value["startError"] = stored
    assert PluginRecord.from_json(value).start_error == read
