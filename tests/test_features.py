"""Client features answered by the parent (sampling, elicitation, roots) and the refusal of
server features a server did not declare, against the stdlib fixture ``fixtures/mcp-asker``.

The class of bug: *a plugin reaching a feature it was not given* (the parent does not serve
it, the user did not grant it, a sub-feature was not advertised, the server did not declare
it) and *a request to the parent that never ends* (no answer, a cancelled call). Each test
takes several members of the class.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from tests.conftest import FIXTURES, ready, stdio_plugin

ASKER = FIXTURES / "mcp-asker"
ALL: dict[str, Any] = {"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
RESERVED = ["mcp.sampling", "mcp.elicitation", "mcp.roots"]


def asker(tmp_path: Path, *, permissions: list[str], backend: dict[str, Any] | None = None, **extra: Any) -> Path:
    folder, tools = tmp_path / "asker", ("ask", "cancelled", "capabilities", "task")
    return stdio_plugin(
        folder, ASKER, "Asker (fixture)", tools=tools, permissions=permissions, backend=backend, **extra
    )


@asynccontextmanager
async def running(
    tmp_path: Path,
    *,
    serves: dict[str, Any] | None,
    grant: list[str],
    permissions: list[str] = RESERVED,
    backend: dict[str, Any] | None = None,
    **extra: Any,
) -> AsyncIterator[HostdClient]:
    """A hostd whose parent declares ``serves`` (None: no ``capabilities`` at all), with the asker ready."""
    init: dict[str, Any] = {"clientInfo": {"name": "test", "version": "0"}}
    if serves is not None:
        init["capabilities"] = serves
    folder = asker(tmp_path, permissions=permissions, backend=backend, **extra)
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state")], env=plugin_environment(), initialize=init
    ) as client:
        status = await ready(client, folder, grant=grant)
        assert status["status"] == "ready", status
        yield client


async def tool(client: HostdClient, name: str, arguments: dict[str, Any], **params: Any) -> Any:
    result = await client.request("tools/call", {"name": f"asker.{name}", "arguments": arguments, **params})
    return json.loads(result["content"][0]["text"])


@pytest.mark.parametrize(
    ("serves", "grant", "offered"),
    [
        (ALL, RESERVED, ALL),
        (ALL, ["mcp.roots"], {"roots": {}}),
        (ALL, [], {}),
        ({"sampling": {}}, RESERVED, {"sampling": {}}),
        ({"elicitation": {}}, RESERVED, {"elicitation": {"form": {}}}),  # {}: form only (MCP)
        ({"elicitation": {"url": {}}, "experimental": {"x": {}}}, RESERVED, {"elicitation": {"url": {}}}),
        (None, RESERVED, {}),
    ],
    ids=["all", "roots-granted", "none-granted", "sampling-served", "empty-elicitation", "url-only", "no-capabilities"],
)
async def test_a_plugin_is_offered_what_the_parent_serves_and_the_user_granted(
    tmp_path: Path, serves: dict[str, Any] | None, grant: list[str], offered: dict[str, Any]
) -> None:
    async with running(tmp_path, serves=serves, grant=grant) as client:
        assert await tool(client, "capabilities", {}) == offered


async def test_reserved_permissions_are_optional_and_need_no_known_permissions(tmp_path: Path) -> None:
    """mcp.* need not be in knownPermissions, and enable works with none of them granted."""
    folder = asker(tmp_path, permissions=RESERVED)
    init = {"clientInfo": {"name": "test", "version": "0"}, "knownPermissions": []}
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state")], env=plugin_environment(), initialize=init
    ) as client:
        info = await client.request("plugins/install", {"path": str(folder)})
        assert info["permissions"] == RESERVED
        await client.request("plugins/approve", {"id": "asker", "digest": info["launch"]["digest"]})
        assert (await client.request("plugins/enable", {"id": "asker"}))["status"] == "ready"
        assert await tool(client, "capabilities", {}) == {}


async def test_requests_for_features_not_offered_are_refused_before_the_parent(tmp_path: Path) -> None:
    serves: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}}}
    async with running(tmp_path, serves=serves, grant=["mcp.sampling", "mcp.elicitation"]) as client:
        cases = [
            ("sampling/createMessage", {"messages": [], "maxTokens": 5, "tools": [{"name": "t"}]}, "sampling.tools"),
            ("elicitation/create", {"mode": "url", "url": "https://example.com", "message": "m"}, "elicitation.url"),
            ("roots/list", {}, "roots"),
        ]
        for method, params, capability in cases:
            answer = await tool(client, "ask", {"method": method, "params": params})
            assert answer["error"]["code"] == -32034, answer
            assert answer["error"]["data"]["kind"] == "CAPABILITY_NOT_SUPPORTED"
            assert answer["error"]["data"]["capability"] == capability
        unknown = await tool(client, "ask", {"method": "hostd/secrets"})
        assert unknown["error"]["code"] == -32601
        assert client.requests == []  # the parent saw none of them


async def test_the_parent_answers_and_its_answer_reaches_the_server_unchanged(tmp_path: Path) -> None:
    sampled = {
        "role": "assistant",
        "content": {"type": "text", "text": "42 ✓"},
        "model": "m-1",
        "stopReason": "endTurn",
    }
    elicited = {"action": "accept", "content": {"name": "Ada", "n": 1.50}}

    async def parent(method: str, params: dict[str, Any]) -> Any:
        if method == "sampling/createMessage":
            return sampled
        if method == "elicitation/create":
            return elicited
        raise RpcError({"code": -1, "message": "declined by the user"})

    async with running(tmp_path, serves=ALL, grant=RESERVED) as client:
        client.on_request = parent
        ask = {"messages": [{"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 5}
        assert await tool(client, "ask", {"method": "sampling/createMessage", "params": ask}) == {"result": sampled}
        form = {"mode": "form", "message": "who?", "requestedSchema": {"type": "object", "properties": {}}}
        assert await tool(client, "ask", {"method": "elicitation/create", "params": form}) == {"result": elicited}
        url = {"mode": "url", "url": "https://example.com/consent", "message": "open", "elicitationId": "e1"}
        assert await tool(client, "ask", {"method": "elicitation/create", "params": url}) == {"result": elicited}
        assert [(m, p) for _, m, p in client.requests] == [
            ("sampling/createMessage", {"plugin": "asker", "params": ask}),
            ("elicitation/create", {"plugin": "asker", "params": form}),
            ("elicitation/create", {"plugin": "asker", "params": url}),
        ]
        assert all(isinstance(rid, str) and rid.startswith("hostd-") for rid, _, _ in client.requests)
        # The parent's error: the server gets an error naming it.
        refused = await tool(client, "ask", {"method": "roots/list"})
        assert refused["error"]["data"]["kind"] == "PARENT_REQUEST_FAILED"
        assert refused["error"]["data"]["upstream"] == {"code": -1, "message": "declined by the user"}


async def test_roots_are_cut_to_the_folders_the_plugin_was_granted(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    (granted / "inner").mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    roots = [
        {"uri": granted.as_uri(), "name": "granted"},
        {"uri": (granted / "inner").as_uri()},
        {"uri": other.as_uri(), "name": "other"},
        {"uri": f"{granted.as_uri()}-sibling"},
        {"uri": "file:///etc"},
        {"uri": "https://example.com/"},
        "not a root",
    ]

    async def parent(method: str, params: dict[str, Any]) -> Any:
        assert (method, params) == ("roots/list", {"plugin": "asker"})
        return {"roots": roots}

    async with running(tmp_path, serves=ALL, grant=RESERVED, sandbox={"read": [str(granted)]}) as client:
        client.on_request = parent
        answer = await tool(client, "ask", {"method": "roots/list"})
        assert answer == {"result": {"roots": [roots[0], roots[1]]}}


async def waiting_parent(client: HostdClient) -> trio.Event:
    """Make ``client`` a parent that never answers; the event is set when the first request arrives."""
    asked = trio.Event()

    async def never(method: str, params: dict[str, Any]) -> Any:
        asked.set()
        await trio.sleep_forever()

    client.on_request = never
    return asked


async def test_a_parent_that_never_answers_gets_the_server_an_error_and_a_cancel(tmp_path: Path) -> None:
    async with running(tmp_path, serves=ALL, grant=RESERVED, backend={"tool_timeout_seconds": 1}) as client:
        await waiting_parent(client)
        ask = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}}
        answer = await tool(client, "ask", ask, timeoutMs=120_000)
        assert answer["error"]["data"]["kind"] == "PARENT_REQUEST_FAILED"
        assert answer["error"]["data"]["timeoutSeconds"] == 1
        [(rid, _, _)] = client.requests
        assert await client.wait_for("$/cancelRequest", lambda p: p.get("id") == rid) == {"id": rid}
        # The plugin goes on serving.
        assert await tool(client, "capabilities", {}) == ALL


@pytest.mark.parametrize("how", ["parent-cancels-the-call", "call-times-out"])
async def test_ending_the_call_cancels_its_pending_parent_request(tmp_path: Path, how: str) -> None:
    async with running(tmp_path, serves=ALL, grant=RESERVED) as client:
        asked = await waiting_parent(client)
        params: dict[str, Any] = {
            "name": "asker.ask",
            "arguments": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {}}},
        }
        if how == "call-times-out":
            params["timeoutMs"] = 3000  # long enough to reach the parent on a loaded machine
        response: Callable[[], Awaitable[Any]] = await client.start("tools/call", params)
        await asked.wait()
        [(rid, _, _)] = client.requests
        if how == "parent-cancels-the-call":
            await client.notify("$/cancelRequest", {"id": response.request_id})  # type: ignore[attr-defined]
        with pytest.raises(RpcError) as ended:
            await response()
        assert ended.value.kind == ("REQUEST_CANCELLED" if how == "parent-cancels-the-call" else "TOOL_TIMEOUT")
        assert await client.wait_for("$/cancelRequest", lambda p: p.get("id") == rid) == {"id": rid}
        assert await tool(client, "capabilities", {}) == ALL


@pytest.mark.parametrize(
    ("method", "params", "capability"),
    [
        ("resources/list", {"plugin": "asker"}, "resources"),
        ("resources/templates/list", {"plugin": "asker", "cursor": "c"}, "resources"),
        ("resources/read", {"plugin": "asker", "uri": "file:///etc/passwd"}, "resources"),
        ("resources/subscribe", {"plugin": "asker", "uri": "x://y"}, "resources"),
        ("resources/unsubscribe", {"plugin": "asker", "uri": "x://y"}, "resources"),
        ("prompts/list", {"plugin": "asker"}, "prompts"),
        ("prompts/get", {"name": "asker.p", "arguments": {}}, "prompts"),
        (
            "completion/complete",
            {"plugin": "asker", "ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}},
            "completions",
        ),
        ("plugins/setLogLevel", {"id": "asker", "level": "debug"}, "logging"),
    ],
)
async def test_server_features_the_server_did_not_declare_are_refused(
    tmp_path: Path, method: str, params: dict[str, Any], capability: str
) -> None:
    async with running(tmp_path, serves=ALL, grant=[]) as client:
        with pytest.raises(RpcError) as refused:
            await client.request(method, params)
        assert refused.value.kind == "CAPABILITY_NOT_SUPPORTED"
        assert refused.value.code == -32034
        assert refused.value.data["capability"] == capability
        assert refused.value.data["plugin"] == "asker"
        # Across plugins, one without prompts just has none.
        assert await client.request("prompts/list", {}) == {"prompts": []}


@pytest.mark.parametrize("how", ["parent-cancels-the-call", "call-times-out"])
async def test_a_tool_that_requires_a_task_is_called_as_one_polled_and_cancelled(tmp_path: Path, how: str) -> None:
    async with running(tmp_path, serves=None, grant=[]) as client:
        listing = await client.request("tools/list", {"plugin": "asker"})
        task_tool = next(t for t in listing["tools"] if t["name"] == "asker.task")
        assert task_tool["execution"] == {"taskSupport": "required"}
        assert "execution" not in next(t for t in listing["tools"] if t["name"] == "asker.ask")
        params: dict[str, Any] = {"name": "asker.task", "arguments": {}}
        if how == "call-times-out":
            params["timeoutMs"] = 3000  # long enough for two polls on a loaded machine
        response: Callable[[], Awaitable[Any]] = await client.start("tools/call", params)
        rid = response.request_id  # type: ignore[attr-defined]
        # Each poll's statusMessage reaches the parent as progress of the one tools/call.
        await client.wait_for("$/progress", lambda p: p["requestId"] == rid and p.get("message") == "poll 2")
        if how == "parent-cancels-the-call":
            await client.notify("$/cancelRequest", {"id": rid})
        with pytest.raises(RpcError) as ended:
            await response()
        assert ended.value.kind == ("REQUEST_CANCELLED" if how == "parent-cancels-the-call" else "TOOL_TIMEOUT")
        # The task was cancelled on the server (tasks/cancel), and only it.
        assert await tool(client, "cancelled", {}) == ["task-1"]


async def test_a_tool_that_requires_a_task_on_a_server_without_tasks_is_refused(tmp_path: Path) -> None:
    backend = {"args": ["server.py", "--no-tasks"]}
    async with running(tmp_path, serves=None, grant=[], backend=backend) as client:
        with pytest.raises(RpcError) as refused:
            await client.request("tools/call", {"name": "asker.task", "arguments": {}})
        assert refused.value.kind == "CAPABILITY_NOT_SUPPORTED"
        assert refused.value.data["capability"] == "tasks.requests.tools.call"
        assert refused.value.data["tool"] == "asker.task"
