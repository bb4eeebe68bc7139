"""hostctl's figures explained (issue 28): ``GRANTED`` counts the permissions to grant, the reserved ``mcp.*``
ones are shown as the MCP client features they are (and that hostctl serves none); a tool count at ``ready``
that differs from the manifest's says why."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from hostd.cli.render import FEATURES_NOTE, tool_count_note
from tests.conftest import ECHO, MakePlugin, run_hostctl


async def hostctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_hostctl(state, *args, env={**os.environ, "HOSTD_SECRETS": "file"})


def _row(output: str, plugin_id: str) -> list[str]:
    """The cells of ``plugin_id``'s row of a table (columns are two or more spaces apart)."""
    line = next(line for line in output.splitlines() if line.startswith(plugin_id + " "))
    return [cell.strip() for cell in line.split("  ") if cell.strip()]


async def test_granted_counts_permissions_and_features_are_shown_as_features(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """Before: ``GRANTED 0/4`` for two permissions and two reserved ones, ``2/4`` after ``grant --all`` of the two
    (the features looked like permissions left to grant)."""
    state = tmp_path / "state"
    folder = make_plugin(permissions=["echo.use", "echo.inspect", "mcp.sampling", "mcp.roots"])
    assert (await hostctl(state, "install", str(folder))).returncode == 0
    listed = await hostctl(state, "list")
    assert _row(listed.stdout, "mcp-echo")[6:8] == ["0/2", "sampling, roots"]
    assert " ".join(listed.stdout.split()).endswith(FEATURES_NOTE)  # unfolded: rich folds at 200 columns
    assert (await hostctl(state, "grant", "mcp-echo", "echo.use", "echo.inspect", "mcp.roots")).returncode == 0
    assert _row((await hostctl(state, "list")).stdout, "mcp-echo")[6:8] == ["2/2", "sampling, roots (granted)"]
    plain = make_plugin("plain-echo")  # no reserved permission: no features
    assert (await hostctl(state, "install", str(plain))).returncode == 0
    again = await hostctl(state, "list")
    assert _row(again.stdout, "plain-echo")[6:8] == ["0/2", "-"]


async def test_a_tool_count_that_differs_from_the_manifest_says_why(tmp_path: Path) -> None:
    """An imported server declares no tools (approval shows "recorded at the first start"); at ready it serves
    seven. Before: the table said 7/7 and nothing connected it to the empty list shown at approval."""
    state, config = tmp_path / "state", tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": {"command": "python3", "args": [str(ECHO / "server.py")]}}}))
    assert (await hostctl(state, "import", str(config))).returncode == 0
    assert (await hostctl(state, "approve", "echo", "--yes")).returncode == 0
    enabled = await hostctl(state, "enable", "echo")
    assert enabled.returncode == 0, enabled.stderr
    assert (
        "tools: 0 declared in the manifest, 7 listed by the server; the manifest names none (an imported server's "
        "tools are recorded at its first start)"
    ) in enabled.stdout.splitlines()


def test_tool_count_note_members() -> None:
    """The other members, on the wire shapes: a conditional tool not served, a tool withheld, no difference."""
    info = {"id": "web", "tools": ["web.a", "web.b", "web.c"]}
    assert tool_count_note(info, {"status": "ready", "tools_count": 2, "withheld": []}) == (
        "tools: 3 declared in the manifest, 2 listed by the server; the others need an MCP client feature the "
        "parent does not offer (contributes.tools[].needs), so the server does not list them"
    )
    assert tool_count_note(info, {"status": "ready", "tools_count": 2, "withheld": ["web.c"]}) == (
        "tools: 3 declared in the manifest, 3 listed by the server; 1 withheld: changed since approval "
        "(hostctl approve web)"
    )
    assert tool_count_note(info, {"status": "ready", "tools_count": 3, "withheld": []}) is None
    assert tool_count_note(info, {"status": "error", "tools_count": 0}) is None
