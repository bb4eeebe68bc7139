"""The trust model (hostd/plugins/trust.py): one approval, one spawn; pins; what is withheld.

The class (issue 14): a plugin without a declared tool list (an imported config entry) asked for
the same trust twice, with two spawns: approve, enable (which recorded the tools, stopped the
plugin and answered MCP_TRUST_APPROVAL_REQUIRED), approve again, enable again. Now the tools found
at the first enable after approval are pinned and served at once (the process that listed them is
the launch the user approved), and any later change is withheld until approved again. Members: an
imported plugin end to end (one approval, one spawn, the enable result lists the pins, a changed
definition withheld after a restart, released by approving again); and the screening rule for
each kind of tool (pinned and same, pinned and changed, never pinned) under both kinds of
manifest, without processes (a pure function).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import RpcError
from hostd.install.importer import IMPORTED_PERMISSIONS
from hostd.install.manifest import Manifest
from hostd.mcp.convert import convert_tools
from hostd.mcp.tools import RegisteredTool
from hostd.plugins import trust
from hostd.wire.errors import ErrorKind
from tests.conftest import ECHO, ECHO_TOOLS, MakePlugin, ready, spawn_hostd

OBJECT = {"type": "object"}


def _manifest(discover: bool, tools: list[str]) -> Manifest:
    return Manifest.model_validate(
        {
            "id": "p",
            "name": "p",
            "version": "1.0.0",
            "permissions": [],
            "contributes": {"tools": [] if discover else [f"p.{t}" for t in tools], "discover": discover},
            "backend": {"type": "mcp", "transport": "stdio", "command": "python3", "args": []},
        }
    )


def _tools(**descriptions: str) -> list[RegisteredTool]:
    listing = [{"name": name, "description": text, "inputSchema": OBJECT} for name, text in descriptions.items()]
    return convert_tools("p", listing, permissions=[], contributes=[f"p.{n}" for n in descriptions])


@pytest.mark.parametrize("discover", [False, True])
def test_screen_serves_pinned_tools_and_withholds_changed_ones(discover: bool) -> None:
    first = _tools(a="A", b="B")
    pins = trust.pins_of(first)
    later = _tools(a="A", b="B, and more", c="C")
    screened = trust.screen(_manifest(discover, ["a", "b", "c"]), later, pins)
    changed = {"approvedDigest": pins["b"], "currentDigest": later[1].definition_digest}
    never = {"approvedDigest": None, "currentDigest": later[2].definition_digest}
    if discover:  # only the pins cover a discovered list: a new tool waits for approval too
        assert [t.name for t in screened.allowed] == ["p.a"]
        assert screened.withheld == {"p.b": changed, "p.c": never}
    else:  # the approved manifest declares c: served
        assert [t.name for t in screened.allowed] == ["p.a", "p.c"]
        assert screened.withheld == {"p.b": changed}
    new = trust.withheld_error("p", "p.c", never)
    assert (new.kind, new.message) == (
        ErrorKind.TOOL_DEFINITION_CHANGED,
        "p.c is new since approval; approve the plugin again to use it",
    )
    assert new.data == {"plugin": "p", "tool": "p.c", **never}


def test_a_discovered_tool_keeps_no_permission_but_its_claim_is_pinned() -> None:
    manifest = _manifest(True, [])
    listing: list[dict[str, Any]] = [{"name": "a", "inputSchema": OBJECT, "_meta": {"hostd/permission": "x.use"}}]
    permissions = trust.listing_permissions(manifest, listing)
    assert permissions == ["x.use"]
    converted = convert_tools(
        "p", listing, permissions=permissions, contributes=trust.expected_tools(manifest, listing)
    )
    (served,) = trust.served(manifest, converted)
    assert (served.permission, converted[0].permission) == (None, "x.use")
    assert served.definition_digest == converted[0].definition_digest  # a changed claim is a changed tool


def test_approval_digest_covers_the_launch_and_the_manifest() -> None:
    digest = trust.approval_digest("sha256:l", "sha256:m")
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert (
        len({digest, trust.approval_digest("sha256:l2", "sha256:m"), trust.approval_digest("sha256:l", "sha256:m2")})
        == 3
    )


async def test_an_imported_plugin_needs_one_approval_and_one_spawn(tmp_path: Path) -> None:
    config = {"mcpServers": {"Echo Fixture": {"command": "python3", "args": [str(ECHO / "server.py")]}}}
    names = sorted(f"echo-fixture.{t}" for t in ECHO_TOOLS)
    async with spawn_hostd(tmp_path) as client:
        result = await client.request("plugins/import", {"config": json.dumps(config)})
        info = result["entries"][0]["plugin"]
        # No tools declared; only the reserved client-feature permissions requested (none granted).
        assert (info["tools"], info["permissions"], info["granted"]) == ([], list(IMPORTED_PERMISSIONS), [])
        await client.request("plugins/approve", {"id": "echo-fixture", "digest": info["launch"]["digest"]})
        status = await client.request("plugins/enable", {"id": "echo-fixture"})
        assert (status["status"], status["pinned"], status["tools_count"], status["withheld"]) == (
            "ready",
            names,
            len(ECHO_TOOLS),
            [],
        )
        starts = [s["status"] for s in client.seen("plugins/statusChanged")]
        assert starts == ["starting", "ready"]  # one spawn
        listed = (await client.request("tools/list", {}))["tools"]
        assert [t["name"] for t in listed] == names
        assert all("permission" not in t for t in listed)  # the manifest declares none: none to grant
        echoed = await client.request("tools/call", {"name": "echo-fixture.echo", "arguments": {"text": "imported"}})
        assert echoed["structuredContent"] == {"text": "imported", "length": 8}
        saved = json.loads((tmp_path / "state" / "state.json").read_text())["plugins"]["echo-fixture"]
        assert sorted(saved["pinnedTools"]) == sorted(ECHO_TOOLS)

        # A later change is withheld until approved again; an enable that pins nothing says so by omission.
        folder = tmp_path / "state" / "imported" / "echo-fixture"
        (folder / "echo-description.txt").write_text("Now also sends your text somewhere else.")
        restarted = await client.request("plugins/restart", {"id": "echo-fixture"})
        assert (restarted["withheld"], restarted["tools_count"], "pinned" in restarted) == (
            ["echo-fixture.echo"],
            len(ECHO_TOOLS) - 1,
            False,
        )
        with pytest.raises(RpcError) as changed:
            await client.request("tools/call", {"name": "echo-fixture.echo", "arguments": {"text": "x"}})
        assert changed.value.kind == "TOOL_DEFINITION_CHANGED"
        assert changed.value.data["approvedDigest"] == saved["pinnedTools"]["echo"]
        await client.request("plugins/approve", {"id": "echo-fixture", "digest": info["launch"]["digest"]})
        assert (await client.request("plugins/status", {"id": "echo-fixture"}))["withheld"] == []
        echoed = await client.request("tools/call", {"name": "echo-fixture.echo", "arguments": {"text": "again"}})
        assert echoed["structuredContent"] == {"text": "again", "length": 5}


async def test_an_automatic_restart_goes_through_the_trust_gate(tmp_path: Path, make_plugin: MakePlugin) -> None:
    # Every start is gated: enable and restart (tests/test_lifecycle.py), and the restart timer's retry,
    # which the supervisor asks of the host as an event (RetryDue) and the host answers after the gate.
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as client:
        assert (await ready(client, folder))["status"] == "ready"
        with (folder / "server.py").open("a") as script:  # what runs changed: the approval is void
            script.write("\n# changed after approval\n")
        with pytest.raises(RpcError) as gone:
            await client.request("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 5}})
        assert gone.value.kind == "PLUGIN_HOST_UNAVAILABLE"
        refused = await client.wait_for("plugins/statusChanged", lambda s: s["status"] == "error")
        assert refused["error"]["kind"] == "MCP_TRUST_APPROVAL_REQUIRED"
        assert (refused["next_retry_at"], refused["restarts"]) == (None, 0)
        seen = [(s["status"], s["next_retry_at"] is not None) for s in client.seen("plugins/statusChanged")]
        # the crash, the retry armed, then refused by the gate: no spawn after the crash
        assert seen == [
            ("starting", False),
            ("ready", False),
            ("unhealthy", False),
            ("unhealthy", True),
            ("error", False),
        ]
