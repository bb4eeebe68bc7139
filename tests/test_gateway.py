"""``hostd mcp``: hostd as an MCP server, driven by the official SDK's client (``mcp`` 2.x ``ClientSession`` over
stdio) as any MCP client would, with real plugin processes behind it (issue 27).

One gateway process serves several assertions (the suite's time, issue 28): the listing under hostd's names, a
call's result and structured content, a tool's own error (``isError``), hostd's refusals as tool errors carrying the
hostctl command, progress relayed, a cancel reaching the plugin, ``list_changed`` after a plugin is enabled from
hostctl through the control socket, and the state folder's lock against a second hostd. Both MCP eras are driven:
2025-11-25 (``initialize``) and 2026-07-28 (``server/discover``, the per-request envelope, ``subscriptions/listen``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged, listen

from hostd.cli.client import plugin_environment
from hostd.control.core import EXIT_TEMPFAIL
from hostd.gateway.features import template_pattern
from hostd.gateway.search import terms
from hostd.wire.framing import LineDecoder, Message
from tests.conftest import (
    ECHO_TOOLS,
    FIXTURES,
    ROOT,
    MakePlugin,
    ready,
    run_hostctl,
    run_quietly,
    spawn_hostd,
    stdio_plugin,
)
from tests.waiting import GENEROUS, until, until_answered

VERBS = ("create", "list", "get", "update", "delete", "search", "archive", "export", "import", "share")
ECHO_NAMES = sorted(f"mcp-echo.{tool}" for tool in ECHO_TOOLS)
OPENING = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


async def prepare(tmp_path: Path, make_plugin: MakePlugin) -> Path:
    """A state folder with ``mcp-echo`` enabled and ``second`` installed, granted and approved but not enabled
    (through ``hostd serve``, as an app or hostctl would); returns the state folder."""
    async with spawn_hostd(tmp_path) as client:
        await ready(client, make_plugin("mcp-echo"))
        info = await client.request("plugins/install", {"path": str(make_plugin("second"))})
        await client.request("plugins/grant", {"id": "second", "permissions": info["permissions"]})
        await client.request("plugins/approve", {"id": "second", "digest": info["launch"]["digest"]})
    return tmp_path / "state"


@asynccontextmanager
async def gateway(tmp_path: Path, *options: str, **session: Any) -> AsyncIterator[ClientSession]:
    """``python -m hostd mcp --state-dir <tmp>/state *options`` started by the SDK's stdio client; the session is
    not yet initialized (``session``: the ``ClientSession``'s callbacks)."""
    state, shared = str(tmp_path / "state"), str(tmp_path / "shared")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hostd", "mcp", "--state-dir", state, "--allow-write", shared, *options],
        env=plugin_environment(),
        cwd=ROOT,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **session) as client:
        yield client


async def cancel_at_first_progress(client: ClientSession, seconds: float) -> None:
    """Abandon a call of ``mcp-echo.sleep`` at its first progress notification; return once the plugin says the
    cancellation reached it (``mcp-echo.seen``: one cancelled request, ``notifications/cancelled`` seen), waiting at
    most ``seconds``. Shared by the stdio and the Streamable HTTP gateway tests (one cancel path, two transports)."""
    with trio.CancelScope() as scope:

        async def cancel_at_first(progress: float, total: float | None, message: str | None) -> None:
            scope.cancel()

        await client.call_tool("mcp-echo.sleep", {"seconds": 600, "steps": 600}, progress_callback=cancel_at_first)
    assert scope.cancelled_caught
    seen: dict[str, Any] = {}

    async def plugin_saw_cancel() -> bool:
        seen.update((await client.call_tool("mcp-echo.seen", {})).structured_content or {})
        return len(seen.get("cancelled", [])) == 1

    await until_answered(plugin_saw_cancel, seconds)
    assert "notifications/cancelled" in seen["notifications"]


async def test_an_mcp_client_lists_calls_cancels_and_sees_a_plugin_enabled_from_hostctl(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    state = await prepare(tmp_path, make_plugin)
    outside = tmp_path / "outside.txt"  # a file the plugin's sandbox does not cover
    outside.write_text("not for the plugin")
    changed = trio.Event()
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async with gateway(tmp_path, message_handler=on_message, logging_callback=on_log) as client:
        opened = await client.initialize()
        assert (opened.protocol_version, opened.server_info.name) == ("2025-11-25", "hostd")
        assert opened.capabilities.tools is not None and opened.capabilities.tools.list_changed is True

        # The listing: the enabled plugin's tools under hostd's names, with the plugin's schemas.
        listed = await client.list_tools()
        assert [tool.name for tool in listed.tools] == ECHO_NAMES
        echo = next(tool for tool in listed.tools if tool.name == "mcp-echo.echo")
        assert echo.input_schema["properties"] == {"text": {"type": "string"}}
        assert echo.output_schema is not None

        # A call: content and structured content as the plugin sent them.
        result = await client.call_tool("mcp-echo.echo", {"text": "hi"})
        assert (result.is_error, result.structured_content) == (False, {"text": "hi", "length": 2})
        assert [(c.type, getattr(c, "text", None)) for c in result.content] == [("text", "hi")]

        # The tool's own error is relayed as a tool error.
        failed = await client.call_tool("mcp-echo.fail", {"message": "boom"})
        assert failed.is_error is True
        assert [getattr(c, "text", None) for c in failed.content] == ["boom"]

        # hostd's refusal of a file the sandbox does not cover: a tool error naming the hostctl command; the
        # gateway answers no grants/request itself (consent needs a person).
        refused = await client.call_tool("mcp-echo.echo", {"text": str(outside)})
        assert refused.is_error is True
        assert refused.meta is not None
        error = refused.meta["hostd/error"]
        assert (error["code"], error["data"]["kind"], error["data"]["reason"]) == (
            -32052,
            "ACCESS_NOT_GRANTED",
            "no-capability",
        )
        assert error["data"]["commands"] and all("hostctl" in command for command in error["data"]["commands"])
        assert str(outside) in getattr(refused.content[0], "text", "")

        # A tool not served: the JSON-RPC error itself.
        try:
            await client.call_tool("mcp-echo.nothing", {})
        except Exception as exc:  # the SDK's MCPError
            assert getattr(exc, "error", None) is not None and exc.error.code == -32020  # type: ignore[attr-defined]
        else:
            raise AssertionError("a tool no plugin has was answered")

        # Progress: the plugin's notifications reach the client under its own token.
        steps: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append((progress, total, message))

        slept = await client.call_tool("mcp-echo.sleep", {"seconds": 0.1, "steps": 2}, progress_callback=on_progress)
        assert [getattr(c, "text", None) for c in slept.content] == ["slept 0.1"]
        assert steps == [(1, 2, "step 1/2"), (2, 2, "step 2/2")]

        # Cancel: the client abandons a call after its first progress; the plugin gets notifications/cancelled.
        await cancel_at_first_progress(client, 30)

        # Enabled from hostctl, through the control socket of this very hostd: list_changed, then the tools.
        done = await run_hostctl(state, "enable", "second", env=plugin_environment())
        assert done.returncode == 0, done.stderr
        with trio.fail_after(30):
            await changed.wait()
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names == sorted([*ECHO_NAMES, *(f"second.{tool}" for tool in ECHO_TOOLS)])

        # Two hostds never serve one state folder.
        second = await run_quietly(
            [sys.executable, "-m", "hostd", "serve", "--state-dir", str(state)], env=None, timeout=60
        )
        assert second.returncode == EXIT_TEMPFAIL, second.stderr
        assert f"state directory {state} is in use by another hostd" in second.stderr


async def test_the_2026_era_discovers_lists_calls_and_listens(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """2026-07-28: ``server/discover`` (no handshake), every request in the envelope, list changes on a
    ``subscriptions/listen`` stream tagged with its id; a version hostd does not speak is refused with -32022."""
    state = await prepare(tmp_path, make_plugin)
    async with gateway(tmp_path) as client:
        discovered = await client.discover()
        assert client.protocol_version == "2026-07-28"
        assert discovered.supported_versions == ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
        assert client.server_info is not None and client.server_info.name == "hostd"
        assert [tool.name for tool in (await client.list_tools()).tools] == ECHO_NAMES
        result = await client.call_tool("mcp-echo.echo", {"text": "modern"})
        assert result.structured_content == {"text": "modern", "length": 6}
        async with listen(client, tools_list_changed=True) as events:
            done = await run_hostctl(state, "enable", "second", env=plugin_environment())
            assert done.returncode == 0, done.stderr
            with trio.fail_after(30):
                event = await events.__anext__()
            assert isinstance(event, ToolsListChanged)
        assert len((await client.list_tools()).tools) == 2 * len(ECHO_TOOLS)


async def test_resources_prompts_and_sampling_reach_the_client(tmp_path: Path) -> None:
    """The SDK-written fixture's resource, template and prompt through the gateway; its ``sample`` tool's
    ``sampling/createMessage`` answered by the MCP client (which declared sampling; the user granted
    ``mcp.sampling``)."""
    folder = tmp_path / "mcp-gateway"
    folder.mkdir()
    for name in ("server.py", "plugin.yaml"):
        (folder / name).write_bytes((FIXTURES / "mcp-gateway" / name).read_bytes())
    async with spawn_hostd(tmp_path) as hostd:
        status = await ready(hostd, folder)
        assert status["status"] == "ready", status
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="a model's answer"), model="test-model"
        )

    async with gateway(tmp_path, sampling_callback=sampling) as client:
        opened = await client.initialize()
        assert opened.capabilities.resources is not None and opened.capabilities.prompts is not None
        resources = (await client.list_resources()).resources
        assert [(r.uri, r.name, r.meta) for r in resources] == [
            ("notes://readme", "readme", {"hostd/plugin": "mcp-gateway"})
        ]
        templates = (await client.list_resource_templates()).resource_templates
        assert [(t.uri_template, t.meta) for t in templates] == [("notes://{name}", {"hostd/plugin": "mcp-gateway"})]
        for uri, text in (("notes://readme", "read me"), ("notes://ada", "note ada")):
            contents = (await client.read_resource(uri)).contents
            assert [getattr(c, "text", None) for c in contents] == [text]
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["mcp-gateway.greet"]
        greeting = await client.get_prompt("mcp-gateway.greet", {"name": "Ada"})
        assert [getattr(m.content, "text", None) for m in greeting.messages] == ["Hello, Ada!"]
        sampled = await client.call_tool("mcp-gateway.sample", {"prompt": "hi"})
        assert [getattr(c, "text", None) for c in sampled.content] == ["a model's answer"]
        assert [[getattr(m.content, "text", None) for m in p.messages] for p in asked] == [["hi"]]
        assert asked[0].max_tokens == 5


def catalog_tools() -> list[dict[str, Any]]:
    """fixtures/mcp-catalog's tools (the fixture's own :func:`catalog`, loaded by path)."""
    spec = importlib.util.spec_from_file_location("mcp_catalog", FIXTURES / "mcp-catalog" / "server.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tools: list[dict[str, Any]] = module.catalog(2)
    return tools


async def test_tool_search_lists_two_tools_and_finds_the_right_one_among_400(tmp_path: Path) -> None:
    """``--tool-search``: the listing is ``search_tools`` and ``call_tool``; a search ranks the catalog's 400 tools
    by name, description and schema property names; ``call_tool`` runs the tool found."""
    names = [tool["name"] for tool in catalog_tools()]
    assert len(names) == 400
    folder = stdio_plugin(
        tmp_path / "catalog", FIXTURES / "mcp-catalog", "Catalog (fixture)", tools=names, permissions=[]
    )
    async with spawn_hostd(tmp_path) as hostd:
        status = await ready(hostd, folder)
        assert (status["status"], status["tools_count"]) == ("ready", 400)
    async with gateway(tmp_path, "--tool-search") as client:
        await client.initialize()
        assert [tool.name for tool in (await client.list_tools()).tools] == ["search_tools", "call_tool"]

        async def found(query: str, limit: int = 5) -> list[str]:
            result = await client.call_tool("search_tools", {"query": query, "limit": limit})
            assert result.is_error is False and result.structured_content is not None
            return [tool["name"] for tool in result.structured_content["tools"]]

        # The name and the description: the one tool that exports the shop's dashboard comes first.
        assert (await found("export the shop dashboard"))[0] == "catalog.shop_export_dashboard"
        assert (await found("create an invoice in the crm"))[0] == "catalog.crm_create_invoice"
        # A property name alone: every tool on shipments, and only those, takes a tracking_number.
        shipments = {f"catalog.{service}_{verb}_shipment" for service in ("crm", "shop") for verb in VERBS}
        assert set(await found("tracking_number", 20)) == shipments
        # Each result carries the definition the model needs to call it.
        result = await client.call_tool("search_tools", {"query": "playlist shuffle", "limit": 1})
        assert result.structured_content is not None
        [best] = result.structured_content["tools"]
        assert best["inputSchema"]["properties"].keys() >= {"tracks", "shuffle"}
        # call_tool runs it (as tools/call would); a direct call by name works as well.
        called = await client.call_tool(
            "call_tool", {"name": "catalog.shop_export_dashboard", "arguments": {"id": "d1"}}
        )
        assert called.structured_content == {"called": "shop_export_dashboard", "arguments": {"id": "d1"}}
        direct = await client.call_tool("catalog.crm_get_user", {"id": "u1"})
        assert direct.structured_content == {"called": "crm_get_user", "arguments": {"id": "u1"}}
        # A search with no query is the model's mistake: a tool error, not a protocol error.
        wrong = await client.call_tool("search_tools", {"limit": 3})
        assert wrong.is_error is True


def test_search_terms_and_resource_templates_split_as_documented() -> None:
    """No process: the terms a tool's name, description and properties give (camelCase humps, punctuation, stop
    words), and which URIs a template routes to its plugin (each expression at least one character; ``/`` only in
    ``{+...}``/``{#...}``)."""
    assert terms("getHTTPResponse of the crm_create-invoice.v2/Path") == [
        "get",
        "http",
        "response",
        "crm",
        "create",
        "invoice",
        "v",
        "2",
        "path",
    ]
    note = template_pattern("notes://{name}")
    assert [bool(note.fullmatch(uri)) for uri in ("notes://ada", "notes://", "notes://a/b", "notes:/xada")] == [
        True,
        False,
        False,
        False,
    ]
    file = template_pattern("file:///{+path}.txt")
    assert [bool(file.fullmatch(uri)) for uri in ("file:///a/b.txt", "file:///.txt", "file:///a/bxtxt")] == [
        True,
        False,
        False,
    ]


async def test_a_file_grant_is_asked_of_the_person_through_the_clients_form_elicitation(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """A client that declared form elicitation is asked hostd's call-time file grant (the gateway decides
    nothing): ``decline`` fails the call with ``ACCESS_NOT_GRANTED`` (``declined``), refused before the plugin;
    ``once`` grants it, the plugin restarts with the file in its sandbox, and the call goes through."""
    async with spawn_hostd(tmp_path) as hostd:
        await ready(hostd, make_plugin("mcp-echo"))
    outside = tmp_path / "outside.txt"
    outside.write_text("for the plugin, once")
    answers = ["decline", "once"]
    asked: list[types.ElicitRequestParams] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        answer = answers.pop(0)
        if answer == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"grant": answer})

    async with gateway(tmp_path, elicitation_callback=elicitation) as client:
        await client.initialize()
        refused = await client.call_tool("mcp-echo.echo", {"text": str(outside)})
        assert refused.is_error is True and refused.meta is not None
        error = refused.meta["hostd/error"]
        assert (error["data"]["kind"], error["data"]["reason"]) == ("ACCESS_NOT_GRANTED", "declined")
        granted = await client.call_tool("mcp-echo.echo", {"text": str(outside)})
        assert (granted.is_error, granted.structured_content) == (
            False,
            {"text": str(outside), "length": len(str(outside))},
        )
        assert answers == [] and len(asked) == 2
        message = getattr(asked[0], "message", "")
        assert f"- {outside} (read)" in message and "mcp-echo" in message
        schema = getattr(asked[0], "requested_schema", None)
        assert schema is not None and schema["properties"]["grant"]["enum"] == ["no", "once", "always"]


async def test_a_client_that_does_not_read_stalls_nothing_and_gets_the_latest_progress(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """Flow control (the control channel's outbox): while the client reads nothing, a plugin floods 6 MB of
    progress; the gateway keeps reading the plugin (the flood completes: its marker file appears), holds the
    request's latest progress instead of every one, and answers the next call. Once the client reads: far fewer
    progress notifications than sent, the last one the flood's last value, then both answers."""
    tools = [*ECHO_TOOLS, "progress-flood", "log-flood"]
    async with spawn_hostd(tmp_path) as hostd:
        await ready(hostd, make_plugin("mcp-echo", "flood", tools=tools))
    marker = tmp_path / "shared" / "flood.marker"
    state, shared = str(tmp_path / "state"), str(tmp_path / "shared")
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hostd", "mcp", "--state-dir", state, "--allow-write", shared],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=plugin_environment(),
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    decoder = LineDecoder(64 * 1024 * 1024)
    received: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        await process.stdin.send_all(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def read_until(rid: int) -> None:
        assert process.stdout is not None
        while not any(m.get("id") == rid for m in received):
            data = await process.stdout.receive_some(65536)
            assert data, "the gateway ended"
            received.extend(e.value for e in decoder.feed(data) if isinstance(e, Message))

    try:
        with trio.fail_after(120):
            await send({"id": 1, "method": "initialize", "params": OPENING})
            await read_until(1)
            flood = {"count": 3000, "bytes": 2000, "marker": str(marker)}
            call = {"name": "mcp-echo.progress-flood", "arguments": flood, "_meta": {"progressToken": "flood"}}
            await send({"id": 2, "method": "tools/call", "params": call})
            await until(marker.exists)  # the plugin wrote all 3000 while the client read nothing
            await send(
                {"id": 3, "method": "tools/call", "params": {"name": "mcp-echo.echo", "arguments": {"text": "go"}}}
            )
            await read_until(3)
            await read_until(2)
    finally:
        with trio.CancelScope(shield=True):
            await process.stdin.aclose()
            with trio.move_on_after(GENEROUS):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
    answers = {m["id"]: m for m in received if "id" in m and m["id"] in (2, 3)}
    assert answers[2]["result"]["content"] == [{"type": "text", "text": "sent 3000"}]
    assert answers[3]["result"]["structuredContent"] == {"text": "go", "length": 2}
    progress = [m["params"] for m in received if m.get("method") == "notifications/progress"]
    assert {p["progressToken"] for p in progress} == {"flood"}
    assert 0 < len(progress) < 3000
    before_answer = received[: received.index(answers[2])]
    last = [m for m in before_answer if m.get("method") == "notifications/progress"][-1]["params"]
    assert (last["progress"], last["total"]) == (3000, 3000)


async def test_a_state_folder_hostd_cannot_use_is_answered_not_a_crash(tmp_path: Path) -> None:
    """A state document of a newer hostd: the gateway answers the client's requests with ``STATE_UNUSABLE``
    (what ``hostd serve`` answers its parent) and leaves the document as it was."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    content = b'{"version": 99, "plugins": {}, "future": true}\n'
    (state / "state.json").write_bytes(content)
    async with gateway(tmp_path) as client:
        await client.initialize()
        for attempt in (client.list_tools, client.list_prompts):
            try:
                await attempt()
            except Exception as exc:  # the SDK's MCPError
                error = getattr(exc, "error", None)
                assert error is not None and (error.code, error.data["kind"]) == (-32028, "STATE_UNUSABLE")
            else:
                raise AssertionError("an unusable state folder was served")
    assert (state / "state.json").read_bytes() == content


async def test_streamable_http_on_loopback_with_a_token_and_no_rebinding(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """``hostd mcp --http 0``: the SDK's Streamable HTTP client with the bearer token from ``mcp-http.json`` lists,
    calls, gets progress and, on its GET stream, ``list_changed`` after a plugin is enabled from hostctl; without
    the token, with another ``Host`` (DNS rebinding) or another ``Origin``, or on another path, a request is
    refused before it is read; the client's ``DELETE`` at its end ends the gateway."""
    state = await prepare(tmp_path, make_plugin)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hostd", "mcp", "--state-dir", str(state), "--http", "0"],
        stdin=subprocess.DEVNULL,
        env=plugin_environment(),
        cwd=ROOT,
    )
    try:
        await until((state / "mcp-http.json").exists)
        assert (state / "mcp-http.json").stat().st_mode & 0o777 == 0o600
        endpoint = json.loads((state / "mcp-http.json").read_text())
        url, token = endpoint["url"], endpoint["token"]
        port = url.split(":")[2].split("/")[0]
        assert url == f"http://127.0.0.1:{port}/mcp" and len(token) >= 40
        bearer = {"Authorization": f"Bearer {token}"}
        changed = trio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.set()

        async with httpx2.AsyncClient(timeout=30) as raw:
            opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": OPENING}
            refusals = [
                ({}, url),
                ({"Authorization": "Bearer wrong"}, url),
                ({**bearer, "Host": f"rebound.example:{port}"}, url),
                ({**bearer, "Origin": "http://rebound.example"}, url),
                (bearer, url.removesuffix("/mcp") + "/other"),
            ]
            statuses = [(await raw.post(to, json=opening, headers=headers)).status_code for headers, to in refusals]
            assert statuses == [401, 401, 403, 403, 404]
        async with (
            httpx2.AsyncClient(headers=bearer, timeout=httpx2.Timeout(30, read=120)) as authorized,
            streamable_http_client(url, http_client=authorized) as (read, write),
            ClientSession(read, write, message_handler=on_message) as client,
        ):
            opened = await client.initialize()
            assert opened.server_info.name == "hostd"
            assert [tool.name for tool in (await client.list_tools()).tools] == ECHO_NAMES
            result = await client.call_tool("mcp-echo.echo", {"text": "over http"})
            assert result.structured_content == {"text": "over http", "length": 9}
            steps: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                steps.append(progress)

            await client.call_tool("mcp-echo.sleep", {"seconds": 0.1, "steps": 2}, progress_callback=on_progress)
            assert steps == [1, 2]
            done = await run_hostctl(state, "enable", "second", env=plugin_environment())
            assert done.returncode == 0, done.stderr
            with trio.fail_after(30):
                await changed.wait()
            assert len((await client.list_tools()).tools) == 2 * len(ECHO_TOOLS)
        with trio.fail_after(GENEROUS * 6):  # the DELETE ends the session: every plugin is stopped, then the exit
            assert await process.wait() == 0
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()
