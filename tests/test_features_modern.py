"""The 2026-07-28 era's way of asking for input (``resultType: "input_required"``), against the
stdlib fixture ``fixtures/mcp-inputs`` (speaks only 2026-07-28).

The class of bug: *an interactive request that never completes or escapes its bounds*: the
rounds of a tools/call, prompts/get or resources/read must each reach the parent as the
same client-feature requests a legacy server makes (with the same refusals), the retry must
carry the server's state unchanged, an endless loop must end after 10 rounds, a cancel must
end it at any round, and a server request (forbidden in this era) must never reach the parent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from tests.conftest import FIXTURES, ready, stdio_plugin

INPUTS = FIXTURES / "mcp-inputs"
STATE = 'opaque:é"state"/1'
ALL: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}}, "roots": {}}
RESERVED = ["mcp.sampling", "mcp.elicitation", "mcp.roots"]
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m", "stopReason": "endTurn"}


@asynccontextmanager
async def running(tmp_path: Path, **extra: Any) -> AsyncIterator[HostdClient]:
    tools, timeouts = ("ask", "loop", "request", "seen"), {"tool_timeout_seconds": 30}
    folder = stdio_plugin(
        tmp_path / "inputs", INPUTS, "Inputs (fixture)", tools=tools, permissions=RESERVED, backend=timeouts, **extra
    )
    init = {"clientInfo": {"name": "test", "version": "0"}, "capabilities": ALL}
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state")], env=plugin_environment(), initialize=init
    ) as client:
        status = await ready(client, folder, grant=RESERVED)
        assert (status["status"], status["era"]) == ("ready", "modern"), status
        yield client


def text_of(result: dict[str, Any]) -> Any:
    return json.loads(result["content"][0]["text"])


async def test_each_round_reaches_the_parent_and_the_retry_carries_the_state_unchanged(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    roots = [{"uri": granted.as_uri(), "name": "g"}, {"uri": "file:///etc"}]

    async def parent(method: str, params: dict[str, Any]) -> Any:
        return SAMPLED if method == "sampling/createMessage" else {"roots": roots}

    async with running(tmp_path, sandbox={"read": [str(granted)]}) as client:
        client.on_request = parent
        ask = {"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 3}
        called = await client.request(
            "tools/call", {"name": "inputs.ask", "arguments": {"method": "sampling/createMessage", "params": ask}}
        )
        assert text_of(called) == {"inputResponses": {"q": SAMPLED}, "requestState": STATE}
        expected = {"inputResponses": {"q": {"roots": [roots[0]]}}, "requestState": STATE}
        prompt = await client.request("prompts/get", {"name": "inputs.ask"})
        assert json.loads(prompt["messages"][0]["content"]["text"]) == expected
        read = await client.request("resources/read", {"plugin": "inputs", "uri": "inputs://ask"})
        assert json.loads(read["contents"][0]["text"]) == expected
        assert [(m, p) for _, m, p in client.requests] == [
            ("sampling/createMessage", {"plugin": "inputs", "params": ask}),
            ("roots/list", {"plugin": "inputs"}),
            ("roots/list", {"plugin": "inputs"}),
        ]


async def test_an_input_request_for_a_feature_not_offered_fails_the_call(tmp_path: Path) -> None:
    async with running(tmp_path) as client:
        url = {"mode": "url", "url": "https://example.com", "message": "m", "elicitationId": "e"}
        with pytest.raises(RpcError) as refused:
            await client.request(
                "tools/call", {"name": "inputs.ask", "arguments": {"method": "elicitation/create", "params": url}}
            )
        assert refused.value.kind == "CAPABILITY_NOT_SUPPORTED"
        assert refused.value.data["capability"] == "elicitation.url"
        assert client.requests == []


async def test_an_endless_input_required_loop_ends_after_ten_rounds(tmp_path: Path) -> None:
    async def parent(method: str, params: dict[str, Any]) -> Any:
        return {"action": "accept", "content": {}}

    async with running(tmp_path) as client:
        client.on_request = parent
        with pytest.raises(RpcError) as ended:
            await client.request("tools/call", {"name": "inputs.loop", "arguments": {}})
        assert ended.value.kind == "MCP_UPSTREAM_ERROR"
        assert ended.value.data["rounds"] == 10
        assert ended.value.data["tool"] == "inputs.loop"
        assert [p["params"]["message"] for _, _, p in client.requests] == [f"round {n}" for n in range(1, 11)]
        seen = text_of(await client.request("tools/call", {"name": "inputs.seen", "arguments": {}}))
        loop_calls = [s for s in seen if s["method"] == "tools/call"][:-1]  # the last is this "seen"
        assert len(loop_calls) == 11  # the first call and ten retries, each a new request


async def test_the_parent_can_cancel_at_any_round(tmp_path: Path) -> None:
    third = trio.Event()

    async def parent(method: str, params: dict[str, Any]) -> Any:
        if params["params"]["message"] == "round 3":
            third.set()
            await trio.sleep_forever()
        return {"action": "accept", "content": {}}

    async with running(tmp_path) as client:
        client.on_request = parent
        response = await client.start("tools/call", {"name": "inputs.loop", "arguments": {}})
        await third.wait()
        pending = client.requests[-1][0]
        await client.notify("$/cancelRequest", {"id": response.request_id})  # type: ignore[attr-defined]
        with pytest.raises(RpcError) as cancelled:
            await response()
        assert cancelled.value.kind == "REQUEST_CANCELLED"
        assert await client.wait_for("$/cancelRequest", lambda p: p.get("id") == pending) == {"id": pending}
        assert len(client.requests) == 3


async def test_a_server_request_in_the_modern_era_never_reaches_the_parent(tmp_path: Path) -> None:
    async def parent(method: str, params: dict[str, Any]) -> Any:
        return SAMPLED

    async with running(tmp_path) as client:
        client.on_request = parent
        answer = text_of(await client.request("tools/call", {"name": "inputs.request", "arguments": {}}))
        assert answer["error"]["code"] == -32601
        assert client.requests == []


async def test_the_log_level_rides_in_every_modern_request(tmp_path: Path) -> None:
    async with running(tmp_path) as client:
        assert await client.request("plugins/setLogLevel", {"id": "inputs", "level": "debug"}) == {}
        seen = text_of(await client.request("tools/call", {"name": "inputs.seen", "arguments": {}}))
        assert seen[-1]["meta"]["io.modelcontextprotocol/logLevel"] == "debug"
        assert "io.modelcontextprotocol/logLevel" not in seen[-2]["meta"]  # before: the server's default


async def test_the_log_level_holds_across_a_restart(tmp_path: Path) -> None:
    async with running(tmp_path) as client:
        assert await client.request("plugins/setLogLevel", {"id": "inputs", "level": "error"}) == {}
        assert (await client.request("plugins/restart", {"id": "inputs"}))["status"] == "ready"
        seen = text_of(await client.request("tools/call", {"name": "inputs.seen", "arguments": {}}))
        assert [s["method"] for s in seen][:1] == ["server/discover"]  # a new instance
        assert seen[-1]["meta"]["io.modelcontextprotocol/logLevel"] == "error"
