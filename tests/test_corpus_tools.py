"""Failure corpus D (tool metadata and results): docs/corpus.md, cases D1-D4.

Helpers (the ``healthy`` neighbour, pid and log filters) live in
``test_corpus_framing.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import ECHO_TOOLS, MakePlugin, ready, spawn_hostd
from tests.test_corpus_framing import (
    FRAME_BOUND,
    HOSTILE,
    assert_healthy,
    echo,
    enable_healthy,
    failed_start,
)

LONG_70 = "long_tool_name_" + "x" * 55
SHARED_A = "shared_prefix_tool_name_" + "p" * 31 + "alpha"
SHARED_B = "shared_prefix_tool_name_" + "p" * 31 + "bravo"
ODD_NAMES = ["calendar.read", "github.git_commit", "New-Tool", "v1.2-beta_3", LONG_70, SHARED_A, SHARED_B]
PROVIDER_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MANY = [f"t{i:04d}" for i in range(1000)]


async def listing(hostd: HostdClient) -> dict[str, dict[str, Any]]:
    tools = (await hostd.request("tools/list", {"plugin": HOSTILE}))["tools"]
    return {t["name"]: t for t in tools}


async def call_text(hostd: HostdClient, name: str, arguments: dict[str, Any]) -> Any:
    result = await hostd.request("tools/call", {"name": name, "arguments": arguments})
    return json.loads(result["content"][0]["text"])


# -- D1 names --------------------------------------------------------------------------


async def test_d1_odd_names_exact_host_ids_and_safe_function_names(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="tool-names", tools=ECHO_TOOLS + ODD_NAMES))
        assert status["status"] == "ready"
        assert status["tools_count"] == 14
        tools = await listing(hostd)
        assert sorted(tools) == sorted(f"{HOSTILE}.{n}" for n in ECHO_TOOLS + ODD_NAMES)
        functions = {name: tool["function_name"] for name, tool in tools.items()}
        assert all(PROVIDER_SAFE.match(f) for f in functions.values()), functions
        assert len(set(functions.values())) == len(functions)
        assert functions[f"{HOSTILE}.calendar.read"] == "mcp-echo_calendar_read"
        assert functions[f"{HOSTILE}.github.git_commit"] == "mcp-echo_github_git_commit"
        assert functions[f"{HOSTILE}.New-Tool"] == "mcp-echo_New-Tool"
        assert functions[f"{HOSTILE}.v1.2-beta_3"] == "mcp-echo_v1_2-beta_3"
        for long_name in (LONG_70, SHARED_A, SHARED_B):
            assert len(functions[f"{HOSTILE}.{long_name}"]) == 64
        assert functions[f"{HOSTILE}.{SHARED_A}"] != functions[f"{HOSTILE}.{SHARED_B}"]
        # tools/call sends the original name on the wire, by host name or by function name.
        for name in ODD_NAMES:
            answer = await call_text(hostd, f"{HOSTILE}.{name}", {"text": "hi"})
            assert answer == {"arguments": {"text": "hi"}, "tool": name}
        answer = await call_text(hostd, functions[f"{HOSTILE}.{LONG_70}"], {"text": "by function"})
        assert answer == {"arguments": {"text": "by function"}, "tool": LONG_70}
        # Stable across restarts.
        restarted = await hostd.request("plugins/restart", {"id": HOSTILE})
        assert restarted["status"] == "ready"
        again = await listing(hostd)
        assert {name: tool["function_name"] for name, tool in again.items()} == functions
        await assert_healthy(hostd)


async def test_d1_empty_name_is_a_precise_validation_error(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="empty-name"))
        assert failed.value.kind == "NAME_INVALID"
        named = {k: failed.value.data[k] for k in ("what", "index", "name", "length", "rule")}
        assert named == {
            "what": "tool",
            "index": 7,
            "name": "",
            "length": 0,
            "rule": "1 to 128 characters, each one of A-Z, a-z, 0-9, '_', '-' and '.'",
        }
        assert failed.value.data["problems"] == [{"tool": 7, "field": "name", "message": "the tool name is empty"}]
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "error"
        await assert_healthy(hostd)


async def test_d1_duplicate_name_is_a_precise_validation_error(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="dup-names", tools=[*ECHO_TOOLS, "dup"]))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.data["problems"] == [
            {
                "tool": "dup",
                "field": "name",
                "message": "duplicate tool name 'dup' at index 8 (first at index 7); names must be unique",
            }
        ]
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "error"
        await assert_healthy(hostd)


# -- D2 schemas ------------------------------------------------------------------------


async def test_d2_string_input_schema_is_rejected(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="bad-schema"))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert "inputSchema" in failed.value.message
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["tools_count"] == 0
        await assert_healthy(hostd)


async def test_d2_string_input_schema_names_the_tool_and_pointer(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="bad-schema"))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.data["problems"] == [
            {
                "tool": "echo",
                "field": "inputSchema",
                "message": 'the root must be {"type": "object"}; \'type\' is "string"',
                "pointer": "/type",
            }
        ]
        await assert_healthy(hostd)


async def test_d2_bad_schemas_are_reported_per_tool_with_the_pointer(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    tools = [*ECHO_TOOLS, "refs", "dangling", "remote", "no-schema"]
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        with pytest.raises(RpcError) as failed:
            await ready(hostd, make_plugin(variant="schemas", tools=tools))
        assert failed.value.kind == "PLUGIN_START_FAILED"
        problems = {(p["tool"], p["field"]): p for p in failed.value.data["problems"]}
        assert set(problems) == {("dangling", "inputSchema"), ("remote", "inputSchema"), ("no-schema", "inputSchema")}
        assert problems["dangling", "inputSchema"]["pointer"] == "/properties/point/$ref"
        assert "'#/$defs/missing'" in problems["dangling", "inputSchema"]["message"]
        assert problems["remote", "inputSchema"]["pointer"] == "/properties/thing/$ref"
        assert "never fetches" in problems["remote", "inputSchema"]["message"]
        assert "missing" in problems["no-schema", "inputSchema"]["message"]
        await assert_healthy(hostd)


async def test_d2_local_ref_is_followed_by_argument_validation(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    tools = [*ECHO_TOOLS, "refs"]
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="refs", tools=tools))
        assert status["status"] == "ready"
        ok = await call_text(hostd, f"{HOSTILE}.refs", {"point": {"x": 1}})
        assert ok == {"arguments": {"point": {"x": 1}}, "tool": "refs"}
        with pytest.raises(RpcError) as invalid:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.refs", "arguments": {"point": {"x": "one"}}})
        assert invalid.value.kind == "INVALID_ARGUMENTS"
        assert invalid.value.data["pointer"] == "/point/x"
        await assert_healthy(hostd)


# -- D3 a thousand tools ---------------------------------------------------------------


async def test_d3_thousand_tools_in_ten_pages(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        # Within the manifest's startup_timeout_seconds, or the enable would fail.
        status = await ready(hostd, make_plugin(variant="many-tools", tools=MANY, args=["--pages", "10"]))
        assert status["status"] == "ready"
        assert status["tools_count"] == 1000
        tools = await listing(hostd)
        assert sorted(tools) == [f"{HOSTILE}.{n}" for n in MANY]
        assert {len(t["description"]) for t in tools.values()} == {2048}
        answer = await call_text(hostd, f"{HOSTILE}.t0999", {"text": "last"})
        assert answer == {"arguments": {"text": "last"}, "tool": "t0999"}
        await assert_healthy(hostd)


async def test_d3_thousand_tools_in_one_page_over_the_bound_is_an_explicit_error(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # Documented choice: a listing over the plugin frame bound (here lowered to 2 MiB: the one-page
    # listing is ~2.19 MB) is rejected with an error naming the bound, never registered cut short.
    async with spawn_hostd(tmp_path, "--max-plugin-message-bytes", str(FRAME_BOUND)) as hostd:
        await _one_page_over_the_bound(hostd, make_plugin)


async def _one_page_over_the_bound(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        error = await failed_start(hostd, make_plugin(variant="many-tools", tools=MANY))
        assert f"exceeded the {FRAME_BOUND}-byte frame bound" in error.data["reason"]
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["tools_count"] == 0
        await assert_healthy(hostd)


# -- D4 isError and protocol errors ----------------------------------------------------


async def test_d4_is_error_and_protocol_errors_keep_the_plugin_ready(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin())
        with pytest.raises(RpcError) as failed:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.fail", "arguments": {"message": "nope"}})
        assert failed.value.kind == "MCP_TOOL_CALL_FAILED"
        assert failed.value.data["content"] == [{"type": "text", "text": "nope"}]
        assert "nope" in failed.value.message
        with pytest.raises(RpcError) as default_text:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.fail", "arguments": {}})
        assert default_text.value.kind == "MCP_TOOL_CALL_FAILED"
        assert default_text.value.data["content"] == [{"type": "text", "text": "failed on purpose"}]
        fine = await hostd.request(
            "tools/call", {"name": f"{HOSTILE}.fail", "arguments": {"message": "fine", "is_error": False}}
        )
        assert fine == {"content": [{"type": "text", "text": "fine"}]}
        assert (await echo(hostd, "absent"))["content"] == [{"type": "text", "text": "absent"}]  # no isError
        with pytest.raises(RpcError) as upstream:
            await hostd.request(
                "tools/call", {"name": f"{HOSTILE}.fail", "arguments": {"message": "boom", "code": -32042}}
            )
        assert upstream.value.kind == "MCP_UPSTREAM_ERROR"
        assert upstream.value.data["upstream"] == {"code": -32042, "message": "boom"}
        assert upstream.value.code != failed.value.code
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert status["restarts"] == 0
        changes = [s["status"] for s in hostd.seen("plugins/statusChanged") if s["plugin_id"] == HOSTILE]
        assert changes == ["starting", "ready"]
        await assert_healthy(hostd)
