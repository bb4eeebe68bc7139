"""Failure corpus A (stdout framing and encoding): docs/corpus.md, cases A1-A8.

Every test runs a hostile fixture variant (fixtures/README.md) beside a
well-behaved plugin (id ``healthy``) and calls that one afterwards. The
hostile plugin keeps the id ``mcp-echo``, the same as its serverInfo name.

hostd's state model decides one thing the corpus leaves open: a violation
that happens before the ``tools/list`` walk finished (A5 and A7, whose
fixtures misbehave right after ``notifications/initialized`` or on the first
``tools/list``) fails the start (``PLUGIN_START_FAILED``, state ``error``);
only an instance that was ``ready`` becomes ``unhealthy``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin, ready, sandboxed_pids, spawn_hostd

HOSTILE = "mcp-echo"
HEALTHY = "healthy"
FRAME_BOUND = 2 * 1024 * 1024
MIB = 1024 * 1024


# -- helpers ------------------------------------------------------------------------


async def enable_healthy(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    status = await ready(hostd, make_plugin(HEALTHY))
    assert status["status"] == "ready"


async def failed_start(hostd: HostdClient, folder: Path) -> RpcError:
    """Enable ``folder`` expecting ``PLUGIN_START_FAILED`` by a verdict, never the start-up timeout,
    with nothing of the plugin left running when enable answers."""
    before = plugin_pids(hostd)
    with pytest.raises(RpcError) as failed:
        await ready(hostd, folder)
    assert failed.value.kind == "PLUGIN_START_FAILED"
    # A start-up timeout says so in its reason and message ("startup timed out after N s").
    assert "timed out" not in f"{failed.value.data.get('reason')} {failed.value.message}", failed.value.data
    assert plugin_pids(hostd) == before  # the process is gone when enable answers
    return failed.value


async def assert_healthy(hostd: HostdClient) -> None:
    """The well-behaved plugin still answers, still ready, never restarted."""
    result = await hostd.request(
        "tools/call", {"name": f"{HEALTHY}.echo", "arguments": {"text": "still here"}}, timeout=5
    )
    assert result == {
        "content": [{"type": "text", "text": "still here"}],
        "structuredContent": {"text": "still here", "length": 10},
    }
    status = await hostd.request("plugins/status", {"id": HEALTHY})
    assert status["status"] == "ready"
    assert status["restarts"] == 0


def plugin_pids(hostd: HostdClient) -> set[int]:
    """Live plugin processes (supervisor shims included) of this hostd: their token names its pid."""
    issuer = f"hs1.{hostd.process.pid}."
    found = set()
    for proc in sandboxed_pids():
        try:
            if proc.environ().get("HOSTD_SANDBOX_TOKEN", "").startswith(issuer):
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


def logs(hostd: HostdClient, *, source: str | None = None, level: str | None = None) -> list[dict[str, Any]]:
    """``plugins/log`` notifications of the hostile plugin."""
    return [
        n
        for n in hostd.seen("plugins/log")
        if n["plugin"] == HOSTILE
        and (source is None or n["source"] == source)
        and (level is None or n["level"] == level)
    ]


def hostd_rss(hostd: HostdClient) -> int:
    return int(psutil.Process(hostd.process.pid).memory_info().rss)


def recorded(path: Path) -> list[dict[str, Any]]:
    """What a fixture started with ``--record path`` received, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def echo(hostd: HostdClient, text: str) -> dict[str, Any]:
    result: dict[str, Any] = await hostd.request(
        "tools/call", {"name": f"{HOSTILE}.echo", "arguments": {"text": text}}, timeout=10
    )
    return result


# -- A1 banner before the handshake ----------------------------------------------------


async def test_a1_banner_strict_fails_fast_quoting_the_line(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        error = await failed_start(hostd, make_plugin(variant="banner"))
        reason = error.data["reason"]
        assert "'demo server ready'" in reason
        assert "not JSON" in reason
        assert "timed out" not in reason
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["tools_count"] == 0
        assert status["error"]["kind"] == "PLUGIN_START_FAILED"
        assert status["error"]["reason"] == reason
        await assert_healthy(hostd)


async def test_a1_banner_quote_is_redacted(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    # Every value of the manifest's env is a secret to hostd: the quoted line must hide it.
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="banner", backend={"env": {"DEMO_TOKEN": "server"}}))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert "'demo [REDACTED] ready'" in failed.value.data["reason"]
        assert "server" not in failed.value.data["reason"]
        await assert_healthy(hostd)


async def test_a1_banner_dropped_with_a_warning(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="banner", backend={"stdout_noise": "drop"}))
        assert status["status"] == "ready"
        assert status["tools_count"] == 7
        warnings = logs(hostd, source="stdout")
        assert len(warnings) == 1
        assert warnings[0]["level"] == "warning"
        assert "'demo server ready'" in warnings[0]["message"]
        assert "(1 so far)" in warnings[0]["message"]
        assert (await echo(hostd, "after banner"))["structuredContent"] == {"text": "after banner", "length": 12}
        await assert_healthy(hostd)


# -- A2 text glued in front of the JSON ------------------------------------------------


async def test_a2_glued_prefix_is_a_parse_error_naming_the_first_bytes(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        error = await failed_start(hostd, make_plugin(variant="glued"))
        reason = error.data["reason"]
        assert "not JSON" in reason
        assert '\'log: starting{"jsonrpc":"2.0"' in reason
        assert reason.endswith("...'")  # the quote is truncated, not the whole line
        assert len(reason) < 400
        assert "timed out" not in reason
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "error"
        await assert_healthy(hostd)


# -- A3 one message over many writes; many messages in one write ------------------------


@pytest.mark.parametrize("variant", ["split-writes", "bytewise", "coalesce"])
async def test_a3_fragmented_and_coalesced_writes_resolve_to_the_right_caller(
    hostd: HostdClient, make_plugin: MakePlugin, variant: str
) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant=variant))
        assert status["status"] == "ready"
        assert status["tools_count"] == 7
        texts = ["first", "second", "third-ü", "fourth"]
        pending = [
            await hostd.start("tools/call", {"name": f"{HOSTILE}.echo", "arguments": {"text": text}}) for text in texts
        ]
        results = [await response() for response in pending]
        assert [r["structuredContent"] for r in results] == [{"text": t, "length": len(t)} for t in texts]
        assert [r["content"] for r in results] == [[{"type": "text", "text": t}] for t in texts]
        assert logs(hostd, level="warning") == []
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "ready"
        await assert_healthy(hostd)


# -- A4 CRLF endings and blank lines ---------------------------------------------------


async def test_a4_crlf_and_blank_lines_work(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="crlf"))
        assert status["status"] == "ready"
        assert status["tools_count"] == 7
        assert (await echo(hostd, "crlf"))["structuredContent"] == {"text": "crlf", "length": 4}
        assert (await echo(hostd, "again"))["structuredContent"] == {"text": "again", "length": 5}
        assert logs(hostd, level="warning") == []
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "ready"
        await assert_healthy(hostd)


# -- A5 invalid UTF-8 line -------------------------------------------------------------


async def test_a5_invalid_utf8_is_a_protocol_violation(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    # The fixture writes the bad line right after notifications/initialized, so before the
    # tools/list answer: the violation fails the start (hostd's `unhealthy` for a new instance).
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        error = await failed_start(hostd, make_plugin(variant="invalid-utf8"))
        reason = error.data["reason"]
        assert "not JSON" in reason
        assert "UTF-8" in reason
        assert "'\\\\xff\\\\xfe'" in reason  # the bytes, escaped, never decoded into the text
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["error"]["reason"] == reason
        await assert_healthy(hostd)


async def test_a5_invalid_utf8_dropped_and_the_next_message_still_parsed(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="invalid-utf8", backend={"stdout_noise": "drop"}))
        assert status["status"] == "ready"
        note = await hostd.wait_for("plugins/log", lambda n: n["plugin"] == HOSTILE and n["source"] == "mcp", timeout=5)
        assert note["message"] == "after invalid utf-8"
        warnings = logs(hostd, source="stdout")
        assert len(warnings) == 1
        assert warnings[0]["level"] == "warning"
        assert "'\\\\xff\\\\xfe'" in warnings[0]["message"]
        assert (await echo(hostd, "ok"))["structuredContent"] == {"text": "ok", "length": 2}
        await assert_healthy(hostd)


# -- A6 large legitimate messages ------------------------------------------------------


async def test_a6_200kb_result_arrives_byte_exact(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin())
        result = await hostd.request("tools/call", {"name": f"{HOSTILE}.large", "arguments": {"bytes": 200_000}})
        assert result == {"content": [{"type": "text", "text": "x" * 200_000}]}
        await assert_healthy(hostd)


async def test_a6_one_and_a_half_mib_result_arrives_byte_exact(tmp_path: Path, make_plugin: MakePlugin) -> None:
    # The result bound (256 KiB by default) is host policy; raised to the frame bound here.
    size = 1536 * 1024
    async with spawn_hostd(tmp_path, "--max-result-bytes", str(2 * 1024 * 1024)) as hostd:
        with trio.fail_after(20):
            await enable_healthy(hostd, make_plugin)
            await ready(hostd, make_plugin())
            result = await hostd.request("tools/call", {"name": f"{HOSTILE}.large", "arguments": {"bytes": size}})
            assert result == {"content": [{"type": "text", "text": "x" * size}]}
            await assert_healthy(hostd)


async def test_a6_tools_list_pages_over_64kib_arrive_byte_exact(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    names = [f"t{i:04d}" for i in range(1000)]
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="many-tools", tools=names, args=["--pages", "10"]))
        assert status["tools_count"] == 1000
        listing = await hostd.request("tools/list", {"plugin": HOSTILE})
        by_name = {t["name"]: t for t in listing["tools"]}
        assert sorted(by_name) == [f"{HOSTILE}.{n}" for n in names]
        for name in names:
            expected = (f"Tool {name}: echoes its text. " + "lorem ipsum dolor sit amet " * 80)[:2048]
            assert by_name[f"{HOSTILE}.{name}"]["description"] == expected
        await assert_healthy(hostd)


async def test_a6_twelve_mib_answer_fails_only_its_call_naming_the_bound(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """An answer over the frame bound (here lowered to 2 MiB) fails the call it answers; the plugin stays
    ready and answers the next call; the line is discarded as it arrives, never held whole."""
    async with spawn_hostd(tmp_path, "--max-plugin-message-bytes", str(FRAME_BOUND)) as hostd:
        await _over_long_answer_fails_only_its_call(hostd, make_plugin)


async def _over_long_answer_fails_only_its_call(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin())
        await hostd.request("tools/call", {"name": f"{HOSTILE}.large", "arguments": {"bytes": 200_000}})
        baseline = hostd_rss(hostd)
        with pytest.raises(RpcError) as rejected:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.large", "arguments": {"bytes": 12 * MIB}})
        assert rejected.value.kind == "MCP_TOOL_RESULT_TOO_LARGE"
        assert rejected.value.data["limit"] == FRAME_BOUND and rejected.value.data["bound"] == "frame"
        assert rejected.value.data["size"] > 12 * MIB
        assert hostd_rss(hostd) - baseline < 8 * MIB  # never the 12 MiB, at most the bound
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "ready"
        after = await hostd.request("tools/call", {"name": f"{HOSTILE}.echo", "arguments": {"text": "still here"}})
        assert after["structuredContent"] == {"text": "still here", "length": 10}
        assert [s["status"] for s in hostd.seen("plugins/statusChanged") if s["plugin_id"] == HOSTILE] == [
            "starting",
            "ready",
        ]
        await assert_healthy(hostd)


# -- A7 endless line -------------------------------------------------------------------


async def test_a7_endless_line_fails_fast_with_flat_memory(tmp_path: Path, make_plugin: MakePlugin) -> None:
    # The fixture starts the endless line on the first tools/list, i.e. during hostd's start: no call is
    # in flight that it could answer, so it is a violation as soon as it passes the bound.
    async with spawn_hostd(tmp_path, "--max-plugin-message-bytes", str(FRAME_BOUND)) as hostd:
        await _endless_line_fails_fast(hostd, make_plugin)


async def _endless_line_fails_fast(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        baseline = hostd_rss(hostd)
        error = await failed_start(hostd, make_plugin(variant="endless-line"))
        reason = error.data["reason"]
        assert f"exceeded the {FRAME_BOUND}-byte frame bound" in reason
        assert "timed out" not in reason
        assert hostd_rss(hostd) - baseline < 8 * MIB  # the bound plus a read, never "forever"
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "error"
        await assert_healthy(hostd)


# -- A8 half a message, then silence ---------------------------------------------------


async def test_a8_half_a_message_times_out(hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="half-then-silence", args=["--record", str(record)]))
        with pytest.raises(RpcError) as timed_out:
            await hostd.request(
                "tools/call", {"name": f"{HOSTILE}.echo", "arguments": {"text": "half"}, "timeoutMs": 500}
            )
        assert timed_out.value.kind == "TOOL_TIMEOUT"
        assert timed_out.value.data["timeoutSeconds"] == 0.5
        await assert_healthy(hostd)


def _half_frame_bytes(record: Path, text: str) -> int:
    """The size of the half frame ``half-then-silence`` wrote for the echo call of ``text``."""
    call = next(r["msg"] for r in recorded(record) if r["msg"].get("method") == "tools/call")
    result = {"content": [{"type": "text", "text": text}], "structuredContent": {"text": text, "length": len(text)}}
    frame = json.dumps({"jsonrpc": "2.0", "id": call["id"], "result": result}, separators=(",", ":"))
    return len((frame + "\n").encode()) // 2


async def test_a8_timeout_reports_the_pending_partial_frame(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="half-then-silence", args=["--record", str(record)]))
        with pytest.raises(RpcError) as timed_out:
            await hostd.request(
                "tools/call", {"name": f"{HOSTILE}.echo", "arguments": {"text": "half"}, "timeoutMs": 500}
            )
        assert timed_out.value.kind == "TOOL_TIMEOUT"
        pending = _half_frame_bytes(record, "half")
        assert f"partial frame of {pending} bytes" in timed_out.value.message
        await assert_healthy(hostd)
