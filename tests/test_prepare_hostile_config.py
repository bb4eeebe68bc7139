"""Hostile package text in an ``mcpServers`` config, through a real ``hostd serve`` (issue 23).

The class: *a word of package text reaching an installer as an option, path, URL or source*.
``plugins/prepare`` must answer ``PREPARE_FAILED`` with ``data.reason: spec-unsupported`` before
any installer runs: the ``PATH`` of this hostd holds fake npm/node/uv/uvx/npx/pipx that print
``FAKE-INSTALLER-RAN`` and append to a canary file when run. A valid spec in the same hostd
reaches the fake npm (the control), so the test can fail. The grammar itself:
tests/test_prepare_grammar.py.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment

FAKE_TOOL = """#!/bin/sh
echo "FAKE-INSTALLER-RAN $0 $*"
echo "$0 $*" >> '{canary}' 2>/dev/null
exit 1
"""


def fake_tools(tmp_path: Path) -> tuple[Path, Path]:
    """A folder of fake npm/node/npx/uv/uvx/pipx that say and record that they ran; and the record's path."""
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    canary = tmp_path / "installer-ran"
    for name in ("npm", "node", "npx", "uv", "uvx", "pipx"):
        tool = folder / name
        tool.write_text(FAKE_TOOL.format(canary=canary))
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder, canary


#: mcpServers entries whose text would reach an installer as an option, path, URL or source.
HOSTILE_CONFIG = {
    "scripts-on": ("npx", ["-y", "--package=--ignore-scripts=false", "server"], "--ignore-scripts=false"),
    "tarball": ("npx", ["-y", "./evil.tgz"], "./evil.tgz"),
    "shorthand": ("npx", ["-y", "github:u/r"], "github:u/r"),
    "git-from": ("uvx", ["--from", "git+https://example.invalid/x", "x"], "git+https://example.invalid/x"),
    "index-with": ("uvx", ["--with", "--index-url=http://127.0.0.1:9/", "pkg==1.0"], "--index-url=http://127.0.0.1:9/"),
    "url-with": ("uv", ["run", "--with", "x @ https://example.invalid/x.whl", "python", "s.py"], "x @ https:"),
    "python-path": ("uvx", ["--python", "/usr/bin/python3", "mcp-server-time==2026.10.19"], "/usr/bin/python3"),
    "pipx-path": ("pipx", ["run", "--spec", "./x", "cmd"], "./x"),
}


async def test_hostd_refuses_hostile_package_text_before_any_installer_runs(tmp_path: Path) -> None:
    """plugins/prepare answers PREPARE_FAILED spec-unsupported and no fake installer on PATH ever runs;
    a valid spec in the same hostd does reach the fake npm (the canary can be written)."""
    folder, canary = fake_tools(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    config = {"mcpServers": {name: {"command": c, "args": a} for name, (c, a, _w) in HOSTILE_CONFIG.items()}}
    config["mcpServers"]["control"] = {"command": "npx", "args": ["-y", "left-pad@1.3.0"]}
    env = {**plugin_environment([str(folder)]), "HOME": str(home)}
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env) as hostd:
        imported = await hostd.request("plugins/import", {"config": config})
        ids = {entry["name"]: entry["plugin"]["id"] for entry in imported["entries"]}
        assert sorted(ids) == sorted([*HOSTILE_CONFIG, "control"])
        for name, (_command, _args, word) in HOSTILE_CONFIG.items():
            with pytest.raises(RpcError) as refused:
                await hostd.request("plugins/prepare", {"id": ids[name]})
            assert refused.value.kind == "PREPARE_FAILED", (name, refused.value.message)
            assert refused.value.data["reason"] == "spec-unsupported", (name, refused.value.message)
            assert refused.value.data["output"] == []
            assert word in refused.value.message
            assert "; supported: " in refused.value.message
            with pytest.raises(RpcError) as not_started:
                await hostd.request("plugins/enable", {"id": ids[name]})
            assert not_started.value.kind == "PLUGIN_NOT_PREPARED", (name, not_started.value.message)
        assert not canary.exists(), canary.read_text()
        assert not os.path.exists(tmp_path / "state" / "prepared") or all(
            sorted(os.listdir(tmp_path / "state" / "prepared" / plugin)) in ([], ["cache"])
            for plugin in os.listdir(tmp_path / "state" / "prepared")
        )
        # The control: a valid spec reaches the (fake) installer, so the assertions above can fail.
        with pytest.raises(RpcError) as ran:
            await hostd.request("plugins/prepare", {"id": ids["control"]})
        assert ran.value.data["reason"] == "failed", ran.value.message
        assert any("FAKE-INSTALLER-RAN" in line and "left-pad@1.3.0" in line for line in ran.value.data["output"])
