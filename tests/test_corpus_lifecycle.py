"""Failure corpus B (start-up and request lifecycle): docs/corpus.md, cases B1-B4.

Helpers (the ``healthy`` neighbour, pid and log filters) live in
``test_corpus_framing.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin, ready
from tests.test_corpus_framing import HOSTILE, assert_healthy, echo, enable_healthy, failed_start, plugin_pids, recorded


def starts(hostd: HostdClient) -> int:
    """How many times the hostile plugin entered ``starting``."""
    return sum(
        1 for s in hostd.seen("plugins/statusChanged") if s["plugin_id"] == HOSTILE and s["status"] == "starting"
    )


# -- B1 exits at start -----------------------------------------------------------------


async def test_b1_exit_at_start_fails_within_a_second_with_the_stderr_tail(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        error = await failed_start(hostd, make_plugin(variant="exit-at-start"))
        assert "exited with code 1" in error.data["reason"]
        assert error.data["stderrTail"] == ["API key missing"]
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["last_exit"] == "already-exited, code 1"
        # No retry storm: a failed enable is not retried, now or later (no retry is scheduled).
        assert starts(hostd) == 1
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["next_retry_at"] is None
        await assert_healthy(hostd)


async def test_b1_exit_at_start_reason_says_during_start(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="exit-at-start"))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert "exited with code 1 during start" in failed.value.data["reason"]
        assert "exited with code 1 during start" in failed.value.message
        await assert_healthy(hostd)


async def test_b1_crash_restarts_back_off(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    # The delays themselves (0.5 s, 1 s, ... exactly) are tests/test_policy.py's; here: each crash schedules
    # one automatic restart (next_retry_at), which happens and counts.
    async def crash_and_restart(restarts: int) -> None:
        with pytest.raises(RpcError) as gone:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.exit", "arguments": {"code": 5}})
        assert gone.value.kind == "PLUGIN_HOST_UNAVAILABLE"
        await hostd.wait_for(
            "plugins/statusChanged",
            lambda s: s["plugin_id"] == HOSTILE and s["status"] == "starting" and s["restarts"] == restarts,
            timeout=5,
        )
        await hostd.wait_for(
            "plugins/statusChanged",
            lambda s: s["plugin_id"] == HOSTILE and s["status"] == "ready" and s["restarts"] == restarts,
            timeout=5,
        )

    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin())
        await crash_and_restart(1)
        await crash_and_restart(2)
        retrying = [
            s
            for s in hostd.seen("plugins/statusChanged")
            if s["plugin_id"] == HOSTILE and s["status"] == "unhealthy" and s["next_retry_at"] is not None
        ]
        assert len(retrying) == 2
        assert retrying[0]["error"]["reason"] == "exited with code 5"
        assert (await echo(hostd, "back"))["structuredContent"] == {"text": "back", "length": 4}
        await assert_healthy(hostd)


# -- B2 slow start ---------------------------------------------------------------------


async def test_b2_slow_start_within_the_timeout_is_starting_then_ready(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        folder = make_plugin(variant="slow-start", args=["--delay", "1.5"], backend={"startup_timeout_seconds": 3})
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": HOSTILE, "permissions": info["permissions"]})
        await hostd.request("plugins/approve", {"id": HOSTILE, "digest": info["launch"]["digest"]})
        enabling = await hostd.start("plugins/enable", {"id": HOSTILE})
        # The plugin runs and is still loading: its first stderr line comes at the start of its 1.5 s delay.
        await hostd.wait_for("plugins/log", lambda n: n["plugin"] == HOSTILE and n["message"] == "loading 1")
        waiting = await hostd.request("plugins/status", {"id": HOSTILE})
        assert waiting["status"] == "starting"
        assert waiting["tools_count"] == 0
        status = await enabling()
        assert status["status"] == "ready"
        assert status["tools_count"] == 7
        progress = [n["message"] for n in hostd.seen("plugins/log") if n["plugin"] == HOSTILE]
        assert progress[:3] == ["loading 1", "loading 2", "loading 3"]
        assert (await echo(hostd, "late"))["structuredContent"] == {"text": "late", "length": 4}
        await assert_healthy(hostd)


async def test_b2_slow_start_past_the_timeout_kills_the_tree(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        before = plugin_pids(hostd)
        with pytest.raises(RpcError) as failed:
            await ready(
                hostd,
                make_plugin(variant="slow-start", args=["--delay", "8"], backend={"startup_timeout_seconds": 1.5}),
            )
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.data["reason"] == "startup timed out after 1.5 s"
        assert failed.value.data["stderrTail"][:3] == ["loading 1", "loading 2", "loading 3"]
        assert plugin_pids(hostd) == before
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["error"]["reason"] == "startup timed out after 1.5 s"
        await assert_healthy(hostd)


# -- B3 never answers one tool ---------------------------------------------------------


async def test_b3_unanswered_tool_times_out_and_is_cancelled(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="never-answers", args=["--record", str(record)]))
        with pytest.raises(RpcError) as slow:
            await hostd.request(
                "tools/call", {"name": f"{HOSTILE}.sleep", "arguments": {"seconds": 1}, "timeoutMs": 500}
            )
        assert slow.value.kind == "TOOL_TIMEOUT"
        assert slow.value.data["timeoutSeconds"] == 0.5
        call_id = next(
            r["msg"]["id"]
            for r in recorded(record)
            if r["msg"].get("method") == "tools/call" and r["msg"]["params"]["name"] == "sleep"
        )
        seen = await hostd.request("tools/call", {"name": f"{HOSTILE}.seen", "arguments": {}})
        assert seen["structuredContent"]["cancelled"] == [call_id]
        assert (await echo(hostd, "others work"))["structuredContent"] == {"text": "others work", "length": 11}
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert status["restarts"] == 0
        assert hostd.stray == []
        await assert_healthy(hostd)


# -- B4 notifications before the initialize response -----------------------------------


async def test_b4_notifications_before_initialize_response(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="notify-before-init"))
        assert status["status"] == "ready"
        assert status["tools_count"] == 7
        assert status["server_name"] == "mcp-echo"
        assert status["protocol_version"] == "2025-11-25"
        assert (await echo(hostd, "hi"))["structuredContent"] == {"text": "hi", "length": 2}
        await assert_healthy(hostd)


async def test_a_tool_of_a_plugin_not_ready_is_not_missing(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    """Issue 28 (item 9): a call to a tool of a known plugin that is starting, restarting or stopped answers
    PLUGIN_NOT_READY with the plugin's state and whether a retry makes sense (transient); TOOL_NOT_FOUND stays
    for names no installed plugin has."""
    with trio.fail_after(40):
        folder = make_plugin(variant="slow-start", args=["--delay", "5"], backend={"startup_timeout_seconds": 20})
        info = await hostd.request("plugins/install", {"path": str(folder)})
        call = {"name": f"{HOSTILE}.echo", "arguments": {"text": "hi"}}
        with pytest.raises(RpcError) as stopped:
            await hostd.request("tools/call", call)
        assert (stopped.value.kind, stopped.value.data["state"], stopped.value.data["transient"]) == (
            "PLUGIN_NOT_READY",
            "stopped",
            False,
        )
        await hostd.request("plugins/grant", {"id": HOSTILE, "permissions": info["permissions"]})
        await hostd.request("plugins/approve", {"id": HOSTILE, "digest": info["launch"]["digest"]})
        enabling = await hostd.start("plugins/enable", {"id": HOSTILE})
        await hostd.wait_for("plugins/log", lambda n: n["plugin"] == HOSTILE and n["message"] == "loading 1")
        with pytest.raises(RpcError) as starting:
            await hostd.request("tools/call", call)
        assert (starting.value.kind, starting.value.data["state"], starting.value.data["transient"]) == (
            "PLUGIN_NOT_READY",
            "starting",
            True,
        )
        assert starting.value.data["plugin"] == HOSTILE
        with pytest.raises(RpcError) as unknown:
            await hostd.request("tools/call", {"name": "nobody-has.echo", "arguments": {}})
        assert unknown.value.kind == "TOOL_NOT_FOUND"
        assert (await enabling())["status"] == "ready"
        assert (await hostd.request("tools/call", call))["structuredContent"] == {"text": "hi", "length": 2}
        with pytest.raises(RpcError) as no_such_tool:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.nope", "arguments": {}})
        assert no_such_tool.value.kind == "TOOL_NOT_FOUND"
