"""A server hostd rejected for what it sent (issue 28): the error names the release and what its listing lacks,
a release known to work when hostd's catalog pins one, and a command; ``logs`` says why each start failed; the
hint after a rejection does not point at ``tools``; importing a fixed release replaces the failed plugin."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from hostd.cli.remedies import Release, catalog_release, rejection_remedy
from tests.conftest import ECHO, HOSTCTL, ROOT, MakePlugin, run_hostctl

UNTYPED = 'the root must be {"type": "object"}; \'type\' is missing'


def rejected(plugin_id: str) -> str:
    """hostd's message for the fixture's listing (the variant untyped-schemas) of ``plugin_id``."""
    return (
        f"plugin {plugin_id!r}: tool listing of 'mcp-echo' version '1.0.0' rejected: tool 'echo', inputSchema: "
        f"{UNTYPED} (and 2 more)"
    )


LACKS = (
    'what it lacks: 3 of its tools (echo, sleep, large) send a schema without "type": "object" at the root, '
    "which the MCP spec requires (hostd does not guess what such a schema means)"
)


async def hostctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_hostctl(state, *args, env={**os.environ, "HOSTD_SECRETS": "file"})


async def test_a_rejected_listing_names_the_release_what_it_lacks_and_a_command(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """The fixture server sends three tools whose inputSchema has no "type" (as some releases of real servers
    do). Before: only the first problem, no release, no command; ``logs`` said "no log lines"; approve's hint
    said ``tools``."""
    state = tmp_path / "state"
    folder = make_plugin(variant="untyped-schemas")
    for verb in (["install", str(folder)], ["grant", "mcp-echo", "--all"], ["approve", "mcp-echo", "--yes"]):
        assert (await hostctl(state, *verb)).returncode == 0
    enabled = await hostctl(state, "enable", "mcp-echo")
    assert enabled.returncode == 1
    assert enabled.stderr.splitlines()[-5:] == [
        "error: PLUGIN_START_FAILED: " + rejected("mcp-echo"),
        "  rejected: server mcp-echo 1.0.0 (as it names itself)",
        f"  {LACKS}",
        "  a release of the server that sends valid schemas is needed: import or install it again (it replaces "
        "mcp-echo); until then no restart can help",
        f"  next: {HOSTCTL} --state-dir {state} disable mcp-echo",
    ]
    logs = json.loads((await hostctl(state, "logs", "mcp-echo", "--json")).stdout)
    assert [(line["source"], line["level"], line["message"]) for line in logs["lines"]][:4] == [
        ("host", "error", "start failed: PLUGIN_START_FAILED: " + rejected("mcp-echo")),
        ("host", "error", f"  tool 'echo', inputSchema: {UNTYPED}"),
        ("host", "error", f"  tool 'sleep', inputSchema: {UNTYPED}"),
        ("host", "error", f"  tool 'large', inputSchema: {UNTYPED}"),
    ]
    approved = await hostctl(state, "approve", "mcp-echo", "--yes")
    assert approved.stdout.splitlines()[-1] == (
        f"next: see why its start failed: {HOSTCTL} --state-dir {state} logs mcp-echo"
    )
    # A later command's hostd does not start it again: it shows the recorded failure (issue 28).
    status = json.loads((await hostctl(state, "status", "mcp-echo", "--json")).stdout)["plugins"][0]
    assert status["status"] == "error"
    assert status["error"]["message"].startswith(rejected("mcp-echo") + " (its last start, at ")
    assert status["error"]["message"].endswith(", failed; not tried again here)")


async def test_importing_a_fixed_release_replaces_a_plugin_in_error(tmp_path: Path) -> None:
    """Before: the second import answered PLUGIN_STATE_CONFLICT ("disable it before reinstalling")."""
    state, config = tmp_path / "state", tmp_path / "mcp.json"
    server = str(ECHO / "server.py")

    def write(args: list[str]) -> None:
        config.write_text(json.dumps({"mcpServers": {"echo": {"command": "python3", "args": [server, *args]}}}))

    write(["--variant", "untyped-schemas"])
    assert (await hostctl(state, "import", str(config))).returncode == 0
    assert (await hostctl(state, "approve", "echo", "--yes")).returncode == 0
    failed = await hostctl(state, "enable", "echo")
    assert failed.returncode == 1
    assert "error: PLUGIN_START_FAILED: " + rejected("echo") in failed.stderr
    write([])  # the fixed release
    again = await hostctl(state, "import", str(config), "--json")
    assert again.returncode == 0, again.stderr
    entry = json.loads(again.stdout)["entries"][0]
    assert (entry["outcome"], entry["plugin"]["status"], entry["plugin"]["enabled"]) == ("updated", "stopped", False)
    assert (await hostctl(state, "approve", "echo", "--yes")).returncode == 0
    started = await hostctl(state, "enable", "echo", "--json")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["status"] == "ready"


def test_the_catalog_names_a_release_known_to_work() -> None:
    """hostd's catalog (manifests/) pins one reviewed release per server: an npm and a PyPI member, the
    pinned release itself (nothing to suggest), a package the catalog does not have, a server known only by
    its serverInfo."""
    memory = Release("npm", "@modelcontextprotocol/server-memory", "2025.4.25")
    assert catalog_release(memory) == (
        Release("npm", "@modelcontextprotocol/server-memory", "2026.8.31"),
        ROOT / "manifests" / "server-memory",
    )
    time_server = Release("uv", "mcp-server-time", "0.6.2")
    assert catalog_release(time_server) == (
        Release("uv", "mcp-server-time", "2026.10.19"),
        ROOT / "manifests" / "mcp-server-time",
    )
    assert catalog_release(Release("npm", "@modelcontextprotocol/server-memory", "2026.8.31")) is None
    assert catalog_release(Release("npm", "some-other-server", "1.0.0")) is None
    assert catalog_release(Release("", "server-memory", "2025.4.25")) is None
    info = {
        "id": "memory",
        "launch": {
            "prepare": {
                "manager": "npm",
                "packages": ["@modelcontextprotocol/server-memory"],
                "resolved": {"@modelcontextprotocol/server-memory": "2025.4.25", "zod": "3.0.0"},
                "state": "prepared",
            }
        },
    }
    problem = {"tool": "read_graph", "field": "inputSchema", "message": UNTYPED, "pointer": "/type"}
    lines, command = rejection_remedy(info, {"plugin": "memory", "problems": [problem]})
    folder = ROOT / "manifests" / "server-memory"
    assert lines == [
        "rejected: npm package @modelcontextprotocol/server-memory 2025.4.25",
        'what it lacks: 1 of its tools (read_graph) sends a schema without "type": "object" at the root, which '
        "the MCP spec requires (hostd does not guess what such a schema means)",
        f"known to work: @modelcontextprotocol/server-memory 2026.8.31 (hostd's catalog: {folder})",
    ]
    assert command == f"hostctl uninstall memory, then hostctl install {folder}"
    assert rejection_remedy(info, {"plugin": "memory", "reason": "exited with code 1"}) == ([], None)
