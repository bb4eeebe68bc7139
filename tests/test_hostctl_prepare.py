"""hostctl install of a server run by npx: the packages are installed by install itself (plugins/prepare), so
a person's install -> approve -> enable -> call works on the first try and the server never fetches at start."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import plugin_environment
from hostd.cli.render import describe_launch
from tests.conftest import ROOT, run_hostctl

MEMORY = ROOT / "manifests" / "server-memory"


async def hostctl(state: Path, home: Path, *args: str) -> Any:
    """``python -m hostd.cli.hostctl *args --json --state-dir state`` with ``HOME=home``; the parsed JSON answer."""
    env = {**plugin_environment(), "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    done = await run_hostctl(state, *args, "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout) if done.stdout.strip() else None


async def enable_and_keep_an_entity(state: Path, home: Path, plugin_id: str) -> None:
    """Enable the memory server ``plugin_id`` (ready, its 9 tools), write one entity and read it back: a graph
    that was written where the server may write."""
    enabled = await hostctl(state, home, "enable", plugin_id)
    assert (enabled["status"], enabled["tools_count"]) == ("ready", 9)
    entity = {"name": "Ada", "entityType": "person", "observations": [plugin_id]}
    await hostctl(state, home, "call", plugin_id, "create_entities", json.dumps({"entities": [entity]}))
    graph = await hostctl(state, home, "call", plugin_id, "read_graph", "{}")
    assert graph["structuredContent"] == {"entities": [entity], "relations": []}


@pytest.mark.real_server
async def test_install_prepares_an_npx_server_so_approve_and_enable_just_work(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    info = await hostctl(state, home, "install", str(MEMORY))
    prepare = info["launch"]["prepare"]
    assert (prepare["state"], prepare["manager"]) == ("prepared", "npm")
    assert prepare["resolved"] == {"@modelcontextprotocol/server-memory": "2026.8.31"}
    assert os.path.basename(info["launch"]["command"]) == "node"  # the prepared program, not npx
    # What approve shows: the package and exact version preparation installed, where from, no build.
    assert describe_launch(info)[-2:] == [
        "installed (npm, from https://registry.npmjs.org/): @modelcontextprotocol/server-memory@2026.8.31",
        "source builds: refused (wheels only)",
    ]
    approved = await hostctl(state, home, "approve", "server-memory", "--yes")
    assert approved["launch"]["approved"] is True
    await enable_and_keep_an_entity(state, home, "server-memory")
    assert not (home / ".npm").exists()  # nothing of the user's caches was created or used
    assert sorted(os.listdir(state / "prepared")) == ["server-memory"]


@pytest.mark.real_server
async def test_an_imported_memory_server_keeps_its_graph_in_its_own_data_folder(tmp_path: Path) -> None:
    """A fresh user imported the most common Claude Desktop entry (npx server-memory): it reached ready 9/9,
    then every write failed with EACCES, since the server writes next to its code (the prepared package
    folder, read-only to it). The import now sets the data path the catalog manifest sets (importer
    KNOWN_DATA_ENV); a MEMORY_FILE_PATH the config names is kept as it is."""
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    server = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@2026.8.31"]}
    mine = {**server, "env": {"MEMORY_FILE_PATH": str(home / "graph.jsonl")}}
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"memory": server, "mine": mine}}))
    imported = await hostctl(state, home, "import", str(config))
    entries = {e["name"]: e for e in imported["entries"]}
    assert "set MEMORY_FILE_PATH=${data}/memory.jsonl: its data in its own folder" in entries["memory"]["notes"]
    assert not any("MEMORY_FILE_PATH" in note for note in entries["mine"].get("notes", []))
    folders = entries["memory"]["plugin"]["launch"]["folders"]
    assert folders["$MEMORY_FILE_PATH"] == str(state / "data" / "memory" / "memory.jsonl")
    await hostctl(state, home, "approve", "memory", "--yes")
    await enable_and_keep_an_entity(state, home, "memory")
