"""hostd's own handshake models (hostd/mcp/handshake.py) accept and refuse what ``mcp_types``' models of the
same names do, and an invalid ``initialize`` answer from a real server fails its start with the fields named.

The class of fault: a field, type or optionality of ``InitializeResult`` / ``DiscoverResult`` (or the
capability and ``Implementation`` objects inside) that differs from the MCP schema the SDK's models encode,
so hostd would start a server the SDK refuses, or refuse one it accepts.
"""

from __future__ import annotations

from typing import Any

import mcp_types
import pytest
from pydantic import BaseModel, ValidationError

from hostd.cli.client import HostdClient, RpcError
from hostd.mcp import handshake
from tests.conftest import MakePlugin, ready

INFO = {"name": "srv", "version": "1.0"}
INITIALIZE: list[dict[str, Any]] = [
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": "yes"}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"tools": []}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "future": {"x": 1}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"resources": {"subscribe": 1}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"experimental": {"x": 1}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"experimental": {"x": {}}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"logging": None, "completions": {}}, "serverInfo": INFO},
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {"requests": {"tools": {"call": {}}}}},
        "serverInfo": INFO,
    },
    {"protocolVersion": "2025-11-25", "capabilities": {"tasks": {"list": 3}}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {"extensions": {"e": []}}, "serverInfo": INFO},
    {"protocolVersion": 20251125, "capabilities": {}, "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "serverInfo": INFO},
    {"protocolVersion": "2025-11-25", "capabilities": {}},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "srv"}},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": 1, "version": "1"}},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {**INFO, "icons": [{"src": "a"}]}},
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "serverInfo": {**INFO, "icons": [{"src": "a", "theme": "x"}]},
    },
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {**INFO, "icons": [{}]}},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {**INFO, "websiteUrl": 5}},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": INFO, "instructions": ["x"]},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": INFO, "_meta": {"k": 1}},
    {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": INFO, "_meta": []},
    {"hello": "world"},
]
DISCOVER: list[dict[str, Any]] = [
    {"supportedVersions": ["2026-07-28"], "capabilities": {}},
    {"supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": 10, "cacheScope": "public"},
    {"supportedVersions": ["2026-07-28"], "capabilities": {}, "ttlMs": -1},
    {"supportedVersions": ["2026-07-28"], "capabilities": {}, "cacheScope": "shared"},
    {"supportedVersions": ["2026-07-28"], "capabilities": {}, "resultType": "complete"},
    {"supportedVersions": ["2026-07-28"], "capabilities": {}, "resultType": 1},
    {"supportedVersions": "2026-07-28", "capabilities": {}},
    {"supportedVersions": [1], "capabilities": {}},
    {"supportedVersions": ["2026-07-28"]},
    {"supportedVersions": ["2026-07-28"], "capabilities": {"prompts": {"listChanged": None}}},
    {"capabilities": {}},
]


def problems(model: type[BaseModel], result: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]] | None:
    """``(location, error type)`` of each problem, None when ``result`` validates."""
    try:
        model.model_validate(result)
    except ValidationError as exc:
        return sorted((tuple(e["loc"]), e["type"]) for e in exc.errors())
    return None


@pytest.mark.parametrize("result", INITIALIZE)
def test_initialize_results_are_judged_as_the_sdk_judges_them(result: dict[str, Any]) -> None:
    assert problems(handshake.McpInitializeResult, result) == problems(mcp_types.InitializeResult, result)


@pytest.mark.parametrize("result", DISCOVER)
def test_discover_results_are_judged_as_the_sdk_judges_them(result: dict[str, Any]) -> None:
    assert problems(handshake.DiscoverResult, result) == problems(mcp_types.DiscoverResult, result)


def test_snake_case_members_are_not_the_fields() -> None:
    # mcp_types also accepts field names (populate_by_name); hostd reads the camelCase members it checked.
    result = {"protocol_version": "2025-11-25", "capabilities": {}, "server_info": INFO}
    assert problems(handshake.McpInitializeResult, result) == [
        (("protocolVersion",), "missing"),
        (("serverInfo",), "missing"),
    ]
    assert handshake.SERVER_INFO_META_KEY == mcp_types.SERVER_INFO_META_KEY


async def test_an_invalid_initialize_answer_fails_the_start_naming_the_fields(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with pytest.raises(RpcError) as failed:
        await ready(hostd, make_plugin("bad-init", "bad-initialize"))
    reason = (
        "invalid answer from the server: protocolVersion: Field required; capabilities: Field required; "
        "serverInfo: Field required"
    )
    assert failed.value.kind == "PLUGIN_START_FAILED"
    assert failed.value.message == f"plugin bad-init failed to start: {reason}"
    assert failed.value.data["reason"] == reason
