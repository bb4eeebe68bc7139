"""tools/setEnabled: a disabled tool is hidden and refused by every name, the plugin keeps running,
and the choice is in the state document, so a restarted hostd keeps it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import RpcError
from tests.conftest import MakePlugin, ready, spawn_hostd


def _names(listing: dict[str, Any]) -> list[str]:
    return [t["name"] for t in listing["tools"]]


async def test_disabled_tool_is_hidden_and_refused_by_every_name_without_a_restart(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as client:
        before = await ready(client, folder)
        listed = await client.request("tools/list", {"plugin": "mcp-echo"})
        assert "mcp-echo.sleep" in _names(listed)
        assert all(t["enabled"] is True for t in listed["tools"])
        revision = listed["revision"]

        result = await client.request("tools/setEnabled", {"name": "mcp-echo.sleep", "enabled": False})
        assert result == {"name": "mcp-echo.sleep", "plugin": "mcp-echo", "enabled": False, "revision": revision + 1}
        await client.wait_for("tools/listChanged", lambda n: n["revision"] == revision + 1)

        hidden = await client.request("tools/list", {})
        assert "mcp-echo.sleep" not in _names(hidden)
        assert "mcp-echo.echo" in _names(hidden)
        shown = await client.request("tools/list", {"plugin": "mcp-echo", "includeDisabled": True})
        assert {t["name"]: t["enabled"] for t in shown["tools"]}["mcp-echo.sleep"] is False
        assert {t["name"]: t["enabled"] for t in shown["tools"]}["mcp-echo.echo"] is True

        # The class: every name that reaches the tool (host name, function_name) is refused.
        for name in ("mcp-echo.sleep", "mcp-echo_sleep"):
            with pytest.raises(RpcError) as refused:
                await client.request("tools/call", {"name": name, "arguments": {"seconds": 0}})
            assert refused.value.kind == "TOOL_DISABLED"
            assert refused.value.data["tool"] == "mcp-echo.sleep"

        # Disabling by function_name works too; the plugin was never restarted.
        await client.request("tools/setEnabled", {"name": "mcp-echo_fail", "enabled": False})
        status = await client.request("plugins/status", {"id": "mcp-echo"})
        assert status["status"] == "ready"
        assert status["started_at"] == before["started_at"]
        assert status["restarts"] == 0
        echoed = await client.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "still"}})
        assert echoed["structuredContent"] == {"text": "still", "length": 5}

        again = await client.request("tools/setEnabled", {"name": "mcp-echo.sleep", "enabled": True})
        assert again["enabled"] is True
        called = await client.request("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 0}})
        assert "content" in called


async def test_disabled_tools_survive_a_restart_of_hostd(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as first:
        await ready(first, folder)
        await first.request("tools/setEnabled", {"name": "mcp-echo.sleep", "enabled": False})
        await first.request("tools/setEnabled", {"name": "mcp-echo.large", "enabled": False})
        await first.request("tools/setEnabled", {"name": "mcp-echo.large", "enabled": True})
    document = json.loads((tmp_path / "state" / "state.json").read_text())
    assert document["plugins"]["mcp-echo"]["disabledTools"] == ["sleep"]

    async with spawn_hostd(tmp_path) as second:
        await second.wait_for("plugins/statusChanged", lambda s: s["status"] == "ready")
        names = _names(await second.request("tools/list", {}))
        assert "mcp-echo.sleep" not in names
        assert "mcp-echo.large" in names
        with pytest.raises(RpcError) as refused:
            await second.request("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 0}})
        assert refused.value.kind == "TOOL_DISABLED"
        # Reinstalling the same folder (stopped) keeps the choice.
        await second.request("plugins/disable", {"id": "mcp-echo"})
        info = await second.request("plugins/install", {"path": str(folder)})
        await second.request("plugins/enable", {"id": info["id"]})
        assert "mcp-echo.sleep" not in _names(await second.request("tools/list", {}))


async def test_set_enabled_on_a_stopped_plugin_and_unknown_names(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin()
    async with spawn_hostd(tmp_path) as client:
        info = await client.request("plugins/install", {"path": str(folder)})
        # Not running: the tools its manifest declares can be disabled by host name before the first start.
        result = await client.request("tools/setEnabled", {"name": "mcp-echo.exit", "enabled": False})
        assert result["enabled"] is False
        for name in ("mcp-echo.nope", "nobody.echo", "echo"):
            with pytest.raises(RpcError) as missing:
                await client.request("tools/setEnabled", {"name": name, "enabled": False})
            assert missing.value.kind == "TOOL_NOT_FOUND"
        await client.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
        await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
        await client.request("plugins/enable", {"id": info["id"]})
        names = _names(await client.request("tools/list", {}))
        assert "mcp-echo.exit" not in names
        assert "mcp-echo.echo" in names
