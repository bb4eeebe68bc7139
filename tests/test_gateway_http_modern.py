"""``hostd mcp --http``: the 2026-07-28 era over Streamable HTTP, as stdio negotiates it (issue 27).

The official SDK's client (``mcp`` 2.x) over Streamable HTTP, with real plugin processes behind: ``server/discover``
with no ``initialize`` and no session, tools listed and called in the per-request envelope, a list change on the
``subscriptions/listen`` stream after a plugin is enabled from hostctl, and a call cancelled by closing its stream
(the era's cancel over HTTP) reaching the plugin as ``notifications/cancelled``. The 2025-11-25 era over HTTP is in
tests/test_gateway.py; one process serves every assertion here.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged, listen

from hostd.cli.client import plugin_environment
from tests.conftest import ECHO_TOOLS, ROOT, MakePlugin, run_hostctl
from tests.test_gateway import ECHO_NAMES, cancel_at_first_progress, prepare
from tests.waiting import GENEROUS, until


async def test_the_2026_era_over_http_discovers_lists_calls_listens_and_cancels_by_closing(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    state = await prepare(tmp_path, make_plugin)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "hostd", "mcp", "--state-dir", str(state), "--http", "0"],
        stdin=subprocess.DEVNULL,
        env=plugin_environment(),
        cwd=ROOT,
    )
    try:
        await until((state / "mcp-http.json").exists)
        endpoint = json.loads((state / "mcp-http.json").read_text())
        bearer = {"Authorization": f"Bearer {endpoint['token']}"}
        async with (
            httpx2.AsyncClient(headers=bearer, timeout=httpx2.Timeout(30, read=120)) as authorized,
            streamable_http_client(endpoint["url"], http_client=authorized) as (read, write),
            ClientSession(read, write) as client,
        ):
            discovered = await client.discover()
            assert client.protocol_version == "2026-07-28"
            assert discovered.supported_versions[-1] == "2026-07-28"
            assert client.server_info is not None and client.server_info.name == "hostd"
            assert [tool.name for tool in (await client.list_tools()).tools] == ECHO_NAMES
            result = await client.call_tool("mcp-echo.echo", {"text": "modern over http"})
            assert result.structured_content == {"text": "modern over http", "length": 16}

            # Cancel: the client abandons a call after its first progress; the SDK closes that POST's stream.
            await cancel_at_first_progress(client, 60)

            async with listen(client, tools_list_changed=True) as events:
                done = await run_hostctl(state, "enable", "second", env=plugin_environment())
                assert done.returncode == 0, done.stderr
                with trio.fail_after(60):
                    event = await events.__anext__()
                assert isinstance(event, ToolsListChanged)
            assert len((await client.list_tools()).tools) == 2 * len(ECHO_TOOLS)
        process.send_signal(signal.SIGTERM)  # no session to DELETE in this era: the gateway runs until told
        with trio.fail_after(GENEROUS * 6):
            assert await process.wait() == 0
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()
