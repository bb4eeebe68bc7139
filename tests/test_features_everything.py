"""Resources, prompts, completion, logging, sampling, elicitation and roots against the real
``@modelcontextprotocol/server-everything`` (npm), with a parent that serves the client features
and one that serves none.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from tests.test_real_servers import ENABLE_TIMEOUT, EVERYTHING, EVERYTHING_TOOLS, everything_served  # noqa: F401

pytestmark = pytest.mark.real_server

#: The tools server-everything adds for a client offering sampling, elicitation (form and url) and roots.
CONDITIONAL = ["get-roots-list", "trigger-elicitation-request", "trigger-sampling-request", "trigger-url-elicitation"]
SERVES: dict[str, Any] = {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}
RESERVED = ["mcp.sampling", "mcp.elicitation", "mcp.roots"]
PLUGIN = "server-everything"


@asynccontextmanager
async def everything(
    tmp_path: Path, *, serves: dict[str, Any] | None, grant: list[str] = RESERVED, granted: Path | None = None
) -> AsyncIterator[HostdClient]:
    """A hostd (its parent declaring ``serves``) with server-everything ready from the catalog
    manifest as shipped, the reserved permissions ``grant`` granted (and folder ``granted``)."""
    folder = tmp_path / PLUGIN
    shutil.copytree(EVERYTHING, folder)  # the catalog manifest, unchanged
    init: dict[str, Any] = {"clientInfo": {"name": "test", "version": "0"}, "contentLimits": {"maxBlobBytes": 16}}
    if serves is not None:
        init["capabilities"] = serves
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state")], env=plugin_environment(), initialize=init
    ) as client:
        await client.request("plugins/install", {"path": str(folder)})
        # npx: installed once into the plugin's own environment, never fetched at start (plugins/prepare).
        await client.request("plugins/prepare", {"id": PLUGIN}, timeout=ENABLE_TIMEOUT)
        folders = {"read": [str(granted)], "write": []} if granted is not None else None
        info = await client.request(
            "plugins/grant", {"id": PLUGIN, "permissions": grant, **({"folders": folders} if folders else {})}
        )
        await client.request("plugins/approve", {"id": PLUGIN, "digest": info["launch"]["digest"]})
        status = await client.request("plugins/enable", {"id": PLUGIN}, timeout=ENABLE_TIMEOUT)
        assert status["status"] == "ready", status
        yield client


async def tool_names(client: HostdClient) -> list[str]:
    """The plugin's tool names (MCP names), sorted."""
    tools = (await client.request("tools/list", {"plugin": PLUGIN}))["tools"]
    return sorted(t["name"].removeprefix(f"{PLUGIN}.") for t in tools)


async def call(client: HostdClient, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.request("tools/call", {"name": f"{PLUGIN}.{tool}", "arguments": arguments})
    return "\n".join(item["text"] for item in result["content"] if item["type"] == "text")


async def test_server_features_of_server_everything(tmp_path: Path, everything_served: str) -> None:  # noqa: F811
    async with everything(tmp_path, serves=None) as client:
        listed = await client.request("resources/list", {"plugin": PLUGIN})
        assert listed["resources"][0] == {
            "uri": "demo://resource/static/document/architecture.md",
            "name": "architecture.md",
            "mimeType": "text/markdown",
            "description": "Static document file exposed from /docs: architecture.md",
        }
        templates = await client.request("resources/templates/list", {"plugin": PLUGIN})
        assert [t["uriTemplate"] for t in templates["resourceTemplates"]] == [
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/blob/{resourceId}",
        ]
        read = await client.request("resources/read", {"plugin": PLUGIN, "uri": "demo://resource/dynamic/text/7"})
        [content] = read["contents"]
        assert (content["uri"], content["mimeType"]) == ("demo://resource/dynamic/text/7", "text/plain")
        assert content["text"].startswith("Resource 7: This is a plaintext resource created at ")

        # A resource_link a tool returns is read with resources/read; a blob over maxBlobBytes (16) is a marker.
        links = await client.request("tools/call", {"name": f"{PLUGIN}.get-resource-links", "arguments": {"count": 1}})
        link = links["content"][1]
        assert (link["type"], link["uri"]) == ("resource_link", "demo://resource/dynamic/blob/1")
        blob = await client.request("resources/read", {"plugin": PLUGIN, "uri": link["uri"]})
        [marker] = blob["contents"]
        omitted = marker["_meta"]["hostd/omitted"]
        assert (marker["uri"], omitted["bound"], omitted["limit"]) == (link["uri"], "maxBlobBytes", 16)
        assert marker["text"].startswith("[hostd: resource (text/plain) of ")

        prompts = await client.request("prompts/list", {"plugin": PLUGIN})
        names = [p["name"] for p in prompts["prompts"]]
        assert names[:3] == [f"{PLUGIN}.simple-prompt", f"{PLUGIN}.args-prompt", f"{PLUGIN}.completable-prompt"]
        assert {p["plugin"] for p in prompts["prompts"]} == {PLUGIN}
        assert await client.request("prompts/list", {}) == prompts
        got = await client.request("prompts/get", {"name": f"{PLUGIN}.args-prompt", "arguments": {"city": "Paris"}})
        assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "What's weather in Paris?"}}]
        completed = await client.request(
            "completion/complete",
            {
                "plugin": PLUGIN,
                "ref": {"type": "ref/prompt", "name": f"{PLUGIN}.completable-prompt"},
                "argument": {"name": "department", "value": "S"},
            },
        )
        assert completed == {"completion": {"values": ["Sales", "Support"], "total": 2, "hasMore": False}}
        assert await client.request("plugins/setLogLevel", {"id": PLUGIN, "level": "debug"}) == {}

        uri = "demo://resource/static/document/features.md"
        assert await client.request("resources/subscribe", {"plugin": PLUGIN, "uri": uri}) == {}
        await call(client, "toggle-subscriber-updates", {})
        updated = await client.wait_for("resources/updated", timeout=60)
        assert updated == {"plugin": PLUGIN, "uri": uri}
        assert await client.request("resources/unsubscribe", {"plugin": PLUGIN, "uri": uri}) == {}

        # A tool whose execution.taskSupport is "required" is called as a task; its status reaches the parent.
        research = next(
            t for t in (await client.request("tools/list", {"plugin": PLUGIN}))["tools"] if "research" in t["name"]
        )
        assert research["execution"] == {"taskSupport": "required"}
        response = await client.start("tools/call", {"name": research["name"], "arguments": {"topic": "mcp"}})
        report = await response()
        assert report["content"][0]["text"].startswith("# Research Report: mcp\n")
        stages = ["Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."]
        said = [p["message"] for p in client.seen("$/progress") if p["requestId"] == response.request_id]  # type: ignore[attr-defined]
        assert said, "no progress from the task"
        assert said == [s for s in stages if s in said]  # in stage order, each once

        # This parent serves no client feature: none offered, so none of the conditional tools,
        # and the catalog manifest (which declares them with their needs) expects none.
        assert await tool_names(client) == EVERYTHING_TOOLS
        assert client.requests == []


async def test_client_features_of_server_everything(tmp_path: Path, everything_served: str) -> None:  # noqa: F811
    granted = tmp_path / "granted"
    granted.mkdir()
    sampled = {"role": "assistant", "content": {"type": "text", "text": "sampled ✓"}, "model": "m-1"}
    url_asked = trio.Event()

    async def parent(method: str, params: dict[str, Any]) -> Any:
        if method == "sampling/createMessage":
            return sampled
        if method == "roots/list":
            return {"roots": [{"uri": granted.as_uri(), "name": "granted"}, {"uri": "file:///etc", "name": "etc"}]}
        if params["params"].get("mode") == "url":
            url_asked.set()
            return {"action": "decline"}
        return {"action": "accept", "content": {"name": "Ada", "check": True}}

    async with everything(tmp_path, serves=SERVES, granted=granted) as client:
        client.on_request = parent
        # Every feature served and granted: the same catalog manifest expects all four conditional tools.
        assert await tool_names(client) == sorted([*EVERYTHING_TOOLS, *CONDITIONAL])
        text = await call(client, "trigger-sampling-request", {"prompt": "hi", "maxTokens": 7})
        assert '"text": "sampled ✓"' in text
        sampling = next(p for _, m, p in client.requests if m == "sampling/createMessage")
        assert sampling == {
            "plugin": PLUGIN,
            "params": {
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "text", "text": "Resource trigger-sampling-request context: hi"},
                    }
                ],
                "systemPrompt": "You are a helpful test server.",
                "maxTokens": 7,
                "temperature": 0.7,
            },
        }
        text = await call(client, "trigger-elicitation-request", {})
        assert "- Name: Ada" in text
        assert "- Agreed to terms: true" in text
        text = await call(client, "trigger-url-elicitation", {"url": "https://example.com/consent"})
        assert url_asked.is_set()
        assert "declined" in text
        text = await call(client, "get-roots-list", {})
        assert f"Current MCP Roots (1 total):\n\n1. granted\n   URI: {granted.as_uri()}" in text
        assert "file:///etc" not in text
        assert {m for _, m, _ in client.requests} == {"sampling/createMessage", "elicitation/create", "roots/list"}


@pytest.mark.parametrize(
    ("serves", "grant", "expected"),
    [
        # Served but not granted (roots), granted but not served (roots), a sub-feature not served
        # (elicitation without url: {} means form only): each conditional tool is expected exactly
        # when every feature it needs was offered.
        (SERVES, ["mcp.sampling", "mcp.elicitation"], CONDITIONAL[1:]),
        ({"sampling": {}, "elicitation": {}}, RESERVED, ["trigger-elicitation-request", "trigger-sampling-request"]),
        (
            {"roots": {}, "elicitation": {"url": {}}},
            ["mcp.roots", "mcp.elicitation"],
            CONDITIONAL[:2] + CONDITIONAL[3:],
        ),
    ],
    ids=["roots-not-granted", "elicitation-form-only", "url-and-roots"],
)
async def test_conditional_tools_follow_what_was_offered(
    tmp_path: Path,
    everything_served: str,  # noqa: F811
    serves: dict[str, Any],
    grant: list[str],
    expected: list[str],
) -> None:
    async with everything(tmp_path, serves=serves, grant=grant) as client:
        assert await tool_names(client) == sorted([*EVERYTHING_TOOLS, *expected])


async def test_an_imported_server_asks_for_client_features_and_what_a_grant_adds_is_withheld(
    tmp_path: Path,
    everything_served: str,  # noqa: F811
) -> None:
    """plugins/import declares the reserved permissions (requested, not granted); granting one makes
    server-everything list a new tool, which is withheld until the user approves again (an imported
    plugin's tools are pinned on first use)."""
    config = {"mcpServers": {"Everything": {"command": "npx", "args": ["-y", everything_served, "stdio"]}}}
    init: dict[str, Any] = {"clientInfo": {"name": "test", "version": "0"}, "capabilities": SERVES}
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state")], env=plugin_environment(), initialize=init
    ) as client:
        [entry] = (await client.request("plugins/import", {"config": config}))["entries"]
        assert (entry["outcome"], entry["id"]) == ("installed", "everything")
        assert (entry["plugin"]["permissions"], entry["plugin"]["granted"]) == (RESERVED, [])
        info = await client.request("plugins/prepare", {"id": "everything"}, timeout=ENABLE_TIMEOUT)
        await client.request("plugins/approve", {"id": "everything", "digest": info["launch"]["digest"]})
        status = await client.request("plugins/enable", {"id": "everything"}, timeout=ENABLE_TIMEOUT)
        assert status["status"] == "ready", status
        # Nothing granted: no client feature offered, so the pins are the unconditional tools.
        listing = (await client.request("tools/list", {"plugin": "everything"}))["tools"]
        assert sorted(t["name"].removeprefix("everything.") for t in listing) == EVERYTHING_TOOLS

        await client.request("plugins/grant", {"id": "everything", "permissions": ["mcp.sampling"]})
        await client.request("plugins/disable", {"id": "everything"})
        status = await client.request("plugins/enable", {"id": "everything"}, timeout=ENABLE_TIMEOUT)
        assert (status["status"], status["withheld"]) == ("ready", ["everything.trigger-sampling-request"])
        listing = (await client.request("tools/list", {"plugin": "everything"}))["tools"]
        assert sorted(t["name"].removeprefix("everything.") for t in listing) == EVERYTHING_TOOLS
        with pytest.raises(RpcError) as withheld:
            await client.request("tools/call", {"name": "everything.trigger-sampling-request", "arguments": {}})
        assert (withheld.value.data["kind"], withheld.value.data["approvedDigest"]) == ("TOOL_DEFINITION_CHANGED", None)

        # Approving again pins the new tool and releases it.
        [info] = (await client.request("plugins/list", {}))["plugins"]
        await client.request("plugins/approve", {"id": "everything", "digest": info["launch"]["digest"]})
        status = await client.request("plugins/status", {"id": "everything"})
        assert status["withheld"] == []
        listing = (await client.request("tools/list", {"plugin": "everything"}))["tools"]
        assert sorted(t["name"].removeprefix("everything.") for t in listing) == sorted(
            [*EVERYTHING_TOOLS, "trigger-sampling-request"]
        )

        # Importing the same config again is still `unchanged` (the approval kept).
        [again] = (await client.request("plugins/import", {"config": config}))["entries"]
        assert (again["outcome"], again["plugin"]["launch"]["approved"]) == ("unchanged", True)
