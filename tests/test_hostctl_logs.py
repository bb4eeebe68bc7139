"""plugins/logs: a plugin's recent log lines on demand, from a bounded ring that outlives its instances."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.client import RpcError
from hostd.host import LogRing
from tests.conftest import ECHO_TOOLS, MakePlugin, ready, spawn_hostd


def _messages(result: dict[str, Any], source: str) -> list[str]:
    return [line["message"] for line in result["lines"] if line["source"] == source]


async def test_logs_after_a_crash_show_the_stderr_of_each_instance(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="slow-start", args=["--delay", "0.05"])
    async with spawn_hostd(tmp_path) as client:
        await ready(client, folder)
        with pytest.raises(RpcError) as crashed:
            await client.request("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 3}})
        assert crashed.value.kind == "PLUGIN_HOST_UNAVAILABLE"
        # The restart policy starts it again: a second instance writes its own lines.
        await client.wait_until(
            lambda: len([s for s in client.seen("plugins/statusChanged") if s["status"] == "ready"]) >= 2, timeout=60
        )
        logs = await client.request("plugins/logs", {"id": "mcp-echo"})
        assert _messages(logs, "stderr").count("loading 1") == 2
        assert logs["dropped"] == 0
        assert all(line["time"].endswith("Z") for line in logs["lines"])
        # Oldest first, and exactly what plugins/log carried for the plugin.
        sent = [n for n in client.seen("plugins/log") if n["plugin"] == "mcp-echo"]
        assert [(x["level"], x["source"], x["message"]) for x in logs["lines"]] == [
            (n["level"], n["source"], n["message"]) for n in sent
        ]
        last = await client.request("plugins/logs", {"id": "mcp-echo", "limit": 1})
        assert last["lines"] == logs["lines"][-1:]


async def test_logs_of_a_start_that_failed(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="exit-at-start")
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as failed:
            await ready(client, folder)
        assert failed.value.kind == "PLUGIN_START_FAILED"
        logs = await client.request("plugins/logs", {"id": "mcp-echo"})
        assert "API key missing" in _messages(logs, "stderr")


async def test_logs_keep_mcp_log_messages_redacted(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="raw-replies", tools=[*ECHO_TOOLS, "raw"])
    async with spawn_hostd(tmp_path) as client:
        await ready(client, folder)
        log = json.dumps({"level": "warning", "logger": "t", "data": "connected with token=hunter2secret"})
        await client.request(
            "tools/call", {"name": "mcp-echo.raw", "arguments": {"result": '{"content":[]}', "log": log}}
        )
        logs = await client.request("plugins/logs", {"id": "mcp-echo"})
        mcp = [line for line in logs["lines"] if line["source"] == "mcp"]
        assert [(m["level"], m["message"]) for m in mcp] == [("warning", "connected with token=[REDACTED]")]


async def test_logs_of_unknown_plugins_and_bad_limits(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as missing:
            await client.request("plugins/logs", {"id": "nope"})
        assert missing.value.kind == "PLUGIN_NOT_FOUND"
        info = await client.request("plugins/install", {"path": str(make_plugin())})
        assert await client.request("plugins/logs", {"id": info["id"]}) == {"lines": [], "dropped": 0}
        for limit in (0, -1, 1001):
            with pytest.raises(RpcError) as bad:
                await client.request("plugins/logs", {"id": info["id"], "limit": limit})
            assert bad.value.kind == "INVALID_PARAMS"


def test_ring_is_bounded_by_lines_and_by_characters() -> None:
    by_lines = LogRing(max_lines=3, max_chars=1000)
    for i in range(5):
        by_lines.add("info", "stderr", f"line {i}")
    assert [line.message for line in by_lines.recent(10)] == ["line 2", "line 3", "line 4"]
    assert by_lines.dropped == 2
    by_chars = LogRing(max_lines=100, max_chars=10)
    for text in ("aaaa", "bbbb", "cccc"):
        by_chars.add("info", "stderr", text)
    assert [line.message for line in by_chars.recent(10)] == ["bbbb", "cccc"]
    assert by_chars.dropped == 1
    assert by_chars.recent(0) == []
