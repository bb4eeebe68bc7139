"""hostctl install of a server run by npx: the packages are installed by install itself (plugins/prepare), so
a person's install -> approve -> enable -> call works on the first try and the server never fetches at start."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostd.client import plugin_environment
from tests.conftest import ROOT, run_hostctl

MEMORY = ROOT / "manifests" / "server-memory"


async def hostctl(state: Path, home: Path, *args: str) -> Any:
    """``python -m hostd.hostctl *args --json --state-dir state`` with ``HOME=home``; the parsed JSON answer."""
    env = {**plugin_environment(), "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    done = await run_hostctl(state, *args, "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout) if done.stdout.strip() else None


@pytest.mark.real_server
async def test_install_prepares_an_npx_server_so_approve_and_enable_just_work(tmp_path: Path) -> None:
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    info = await hostctl(state, home, "install", str(MEMORY))
    prepare = info["launch"]["prepare"]
    assert (prepare["state"], prepare["manager"]) == ("prepared", "npm")
    assert prepare["resolved"] == {"@modelcontextprotocol/server-memory": "2026.8.31"}
    assert os.path.basename(info["launch"]["command"]) == "node"  # the prepared program, not npx
    approved = await hostctl(state, home, "approve", "server-memory", "--yes")
    assert approved["launch"]["approved"] is True
    enabled = await hostctl(state, home, "enable", "server-memory")
    assert (enabled["status"], enabled["tools_count"]) == ("ready", 9)
    entity = {"name": "Ada", "entityType": "person", "observations": ["hostctl"]}
    await hostctl(state, home, "call", "server-memory", "create_entities", json.dumps({"entities": [entity]}))
    graph = await hostctl(state, home, "call", "server-memory", "read_graph", "{}")
    assert graph["structuredContent"] == {"entities": [entity], "relations": []}
    assert not (home / ".npm").exists()  # nothing of the user's caches was created or used
    assert sorted(os.listdir(state / "prepared")) == ["server-memory"]
