"""The two direct clients hostd is compared with.

- :func:`sdk_session`: the official mcp SDK client, ``ClientSession`` over the
  SDK's own ``stdio_client`` transport (what an application that skips hostd
  would write). Connect = spawn + ``initialize`` + ``tools/list``, as hostd's
  link does, so the session validates results against the listed output
  schemas exactly as hostd's session does.
- :class:`RawClient`: the floor for a Python client, a minimal hand-written
  NDJSON JSON-RPC client (trio pipes, orjson, one request in flight, no
  models, no validation).

Both start the same server hostd starts (:func:`bench.common.resolve_server`:
same executable, arguments, folder and environment), without the shim.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import orjson
import psutil
import trio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.common import HOSTD_PIDS, ROOT, ServerLaunch
from hostd.cli.client import plugin_environment

MCP_PROTOCOL_VERSION = "2025-11-25"


@asynccontextmanager
async def sdk_session(server: ServerLaunch) -> AsyncIterator[Any]:
    """An initialized ``mcp.ClientSession`` over ``mcp.client.stdio.stdio_client``, tools listed.

    On exit the SDK closes stdin, waits (at most 2 s) and kills the process group.
    """
    params = StdioServerParameters(command=server.executable, args=server.argv[1:], cwd=server.cwd, env=server.env)
    devnull = _devnull()  # the server's stderr (server-everything says hello on every start)
    try:
        async with stdio_client(params, errlog=devnull) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            yield session
    finally:
        devnull.close()


def _devnull() -> TextIO:
    return open(os.devnull, "w", encoding="utf-8")


@asynccontextmanager
async def raw_hostd(state_dir: Path, folder: Path, tree: Path = ROOT) -> AsyncIterator[RawClient]:
    """A minimal NDJSON parent (:class:`RawClient`) driving its own ``hostd serve``, plugin ``folder`` ready.

    Isolates hostd's cost from :class:`hostd.cli.client.HostdClient`'s: same
    hostd command line and environment as :func:`bench.common.open_hostd`;
    on exit, stdin EOF (hostd's orderly shutdown) and a bounded wait.
    ``tree``: the source tree whose hostd runs (its ``PYTHONPATH`` and working folder; another checkout
    for :mod:`bench.side_by_side`).
    """
    env = plugin_environment()
    if tree != ROOT:
        env["PYTHONPATH"] = str(tree)
    hostd = ServerLaunch(
        executable=sys.executable,
        argv=[sys.executable, "-m", "hostd", "serve", "--state-dir", str(state_dir), "--log-level", "error"],
        cwd=str(tree),
        env=env,
    )
    async with RawClient.open(hostd, initialize=False, close_grace=15.0) as client:
        HOSTD_PIDS.add(client.process.pid)
        await client.request("initialize", {"clientInfo": {"name": "hostd-bench-raw", "version": "0"}})
        info = await client.request("plugins/install", {"path": str(folder)})
        if (info["launch"].get("prepare") or {}).get("state") == "needed":  # as bench.common.install
            info = await client.request("plugins/prepare", {"id": info["id"]})
        await client.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
        await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
        with trio.fail_after(150):
            status = await client.request("plugins/enable", {"id": info["id"]})
        if status.get("status") != "ready":
            raise RuntimeError(f"{info['id']} is {status.get('status')} after enable")
        yield client


class RawClient:
    """A minimal NDJSON JSON-RPC 2.0 client over a child's pipes (one request at a time).

    Use :meth:`open` (an async context manager). Server-to-client requests are
    answered inline (``ping`` with ``{}``, anything else with -32601);
    notifications are dropped.
    """

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = bytearray()
        self._ids = itertools.count(1)

    @classmethod
    @asynccontextmanager
    async def open(
        cls, server: ServerLaunch, *, initialize: bool = True, close_grace: float = 2.0
    ) -> AsyncIterator[RawClient]:
        """Start ``server`` in a new session; MCP-``initialize`` it; on exit :meth:`close` it."""
        process = await trio.lowlevel.open_process(
            server.argv,
            executable=server.executable,
            cwd=server.cwd,
            env=server.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = cls(process)
        try:
            if initialize:
                await client.initialize()
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await client.close(close_grace)

    async def initialize(self) -> dict[str, Any]:
        """The MCP handshake: ``initialize`` then ``notifications/initialized``."""
        result: dict[str, Any] = await self.request(
            "initialize",
            {
                "protocolVersion": MCP_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "hostd-bench-raw", "version": "0"},
            },
        )
        await self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    async def request(self, method: str, params: Any) -> Any:
        """Send one request and read until its response arrives; return ``result`` (raise on ``error``)."""
        rid = next(self._ids)
        await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            message = await self._receive()
            if message.get("id") == rid and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message.get("result")
            if "method" in message and "id" in message:
                await self._answer(message)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Walk every ``tools/list`` page (at most 100); return the tools."""
        tools: list[dict[str, Any]] = []
        params: dict[str, Any] = {}
        for _ in range(100):
            result = await self.request("tools/list", params)
            tools.extend(result.get("tools", []))
            cursor = result.get("nextCursor")
            if cursor is None:
                break
            params = {"cursor": cursor}
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """``tools/call``; return the result."""
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def _answer(self, message: dict[str, Any]) -> None:
        if message["method"] == "ping":
            await self._send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            error = {"code": -32601, "message": "not supported"}
            await self._send({"jsonrpc": "2.0", "id": message["id"], "error": error})

    async def _send(self, message: dict[str, Any]) -> None:
        await self._stdin.send_all(orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))

    async def _receive(self) -> dict[str, Any]:
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                if line.strip():
                    value = orjson.loads(line)
                    if isinstance(value, dict):
                        return value
                continue
            data = await self._stdout.receive_some(65536)
            if not data:
                raise EOFError("the server closed its stdout")
            self._buffer += data

    async def close(self, grace: float = 2.0) -> None:
        """Close stdin and wait ``grace`` s; then SIGTERM, then SIGKILL what is left of the tree."""
        tree: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self.process.pid)
            tree = [root, *root.children(recursive=True)]  # npx -> sh -> node: the children outlive npx
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self._stdin.aclose()
        with trio.move_on_after(grace):
            await self.process.wait()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = [p for p in tree if p.pid != self.process.pid and _alive(p)]
            if self.process.returncode is None:
                self.process.send_signal(sig)
            elif not alive:
                break
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
            with trio.move_on_after(grace):
                await self.process.wait()
                await trio.to_thread.run_sync(psutil.wait_procs, alive, grace)
        await self._stdout.aclose()


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
