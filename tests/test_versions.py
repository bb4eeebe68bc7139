"""Which version runs is in sight (issue 28, item 4): an imported plugin names its package and version.

The class: a plugin whose manifest has no version of its own (an ``mcpServers`` entry: the importer
writes the placeholder ``0.0.0``) runs a registry package whose version was either pinned by the
config or resolved at preparation. ``PluginInfo.package`` carries the package's name and version
(the prepared one once prepared, else the pinned one), and every place a person reads a plugin
(``list``, ``show``, the approval, the import table) shows it; an unpinned request says it was
"resolved to X (the config did not pin a version)". Members: npx pinned and unpinned, uvx pinned and
unpinned (``--from`` and a bare name), deno's ``npm:`` module, and a launch that names no package.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import plugin_environment
from hostd.cli.render import describe_launch
from tests.conftest import run_hostctl, spawn_hostd

MEMORY = "@modelcontextprotocol/server-memory"


async def test_each_package_launch_names_its_package_and_version_before_preparation(tmp_path: Path) -> None:
    """No registry is asked: the versions here are the ones the configs pin (``None`` where none is)."""
    config = {
        "mcpServers": {
            "npx-pinned": {"command": "npx", "args": ["-y", f"{MEMORY}@2026.8.31"]},
            "npx-unpinned": {"command": "npx", "args": ["-y", MEMORY]},
            "uvx-from": {"command": "uvx", "args": ["--from", "mcp-server-git==2026.10.19", "mcp-server-git"]},
            "uvx-bare": {"command": "uvx", "args": ["mcp-server-time"]},
            "deno": {"command": "deno", "args": ["run", "-A", "npm:@scope/server@1.2.3/cli"]},
            "plain": {"command": "python3", "args": ["server.py"]},
        }
    }
    async with spawn_hostd(tmp_path) as client:
        await client.request("plugins/import", {"config": config})
        plugins = {p["id"]: p for p in (await client.request("plugins/list", {}))["plugins"]}
    assert {plugin_id: info.get("package") for plugin_id, info in plugins.items()} == {
        "npx-pinned": {"manager": "npm", "name": MEMORY, "version": "2026.8.31", "pinned": True},
        "npx-unpinned": {"manager": "npm", "name": MEMORY, "pinned": False},
        "uvx-from": {"manager": "uv", "name": "mcp-server-git", "version": "2026.10.19", "pinned": True},
        "uvx-bare": {"manager": "uv", "name": "mcp-server-time", "pinned": False},
        "deno": {"manager": "deno", "name": "npm:@scope/server", "version": "1.2.3", "pinned": True},
        "plain": None,
    }
    assert {info["version"] for info in plugins.values()} == {"0.0.0"}  # the manifests' placeholder, unchanged


async def hostctl(state: Path, home: Path, *args: str) -> tuple[str, str]:
    """``hostctl *args --state-dir state`` as a person runs it (``HOME=home``): its standard output and error."""
    env = {**plugin_environment(), "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}
    done = await run_hostctl(state, *args, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


def row(output: str, first: str) -> list[str]:
    """The cells (split on two or more spaces) of the table row of ``output`` whose first cell is ``first``."""
    for line in output.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{output}")


@pytest.mark.real_server
async def test_import_list_show_and_approval_show_the_version_that_runs(tmp_path: Path) -> None:
    """A pinned and an unpinned npx entry of the same server, imported, prepared and shown by hostctl."""
    env = plugin_environment()
    if shutil.which("npm", path=env["PATH"]) is None:
        pytest.skip("npm is not on PATH")
    with trio.fail_after(120):
        latest = await trio.run_process(
            ["npm", "view", MEMORY, "version"],
            env={**env, "npm_config_cache": str(tmp_path / "npm-view")},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if latest.returncode != 0:
        pytest.skip(f"the npm registry cannot be asked: {latest.stderr.decode().strip()[-200:]}")
    current = latest.stdout.decode().strip()
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    config = tmp_path / "claude_desktop_config.json"
    servers = {
        "memory": {"command": "npx", "args": ["-y", f"{MEMORY}@2026.8.31"]},
        "newest": {"command": "npx", "args": ["-y", MEMORY]},
    }
    config.write_text(json.dumps({"mcpServers": servers}))
    resolved = f"{MEMORY}, resolved to {current} (the config did not pin a version)"

    imported, _ = await hostctl(state, home, "import", str(config))
    assert row(imported, "memory")[:4] == ["memory", "installed", "memory", f"{MEMORY}@2026.8.31"]
    assert row(imported, "newest")[:4] == ["newest", "installed", "newest", resolved]

    listed, _ = await hostctl(state, home, "list")
    assert row(listed, "memory")[1:3] == ["2026.8.31", MEMORY]
    assert row(listed, "newest")[1:3] == [current, f"{MEMORY} (not pinned)"]

    # The approval prompt names the package, its exact version, where it came from, and why that version.
    _, prompt = await hostctl(state, home, "approve", "newest", "--yes")
    assert row(prompt, "package") == ["package", resolved]
    prepared = [line.split(None, 1)[1] for line in prompt.splitlines() if line.split(None, 1)[:1] == ["prepared"]]
    assert prepared == [
        f"installed (npm, from https://registry.npmjs.org/): {MEMORY}@{current}",
        "source builds: refused (wheels only)",
        f"{MEMORY}: resolved to {current} (the config did not pin a version)",
    ]
    _, prompt = await hostctl(state, home, "approve", "memory", "--yes")
    assert row(prompt, "package") == ["package", f"{MEMORY}@2026.8.31"]

    listed, _ = await hostctl(state, home, "list", "--json")
    info: dict[str, Any] = {p["id"]: p for p in json.loads(listed)["plugins"]}["newest"]
    assert info["package"] == {"manager": "npm", "name": MEMORY, "version": current, "pinned": False}
    assert describe_launch(info)[-1] == f"{MEMORY}: resolved to {current} (the config did not pin a version)"
