"""Call latency in each MCP era, side by side: one SDK 2.x server reached four ways, interleaved.

Usage: python -m bench.eras [iterations]. The server is fixtures/mcp-sdk (the Python SDK's own
``MCPServer``, whose stdio loop serves whichever era the client's first request opens), copied
twice into a scratch folder with ``backend.protocol`` pinned:

- ``hostd legacy``: a parent -> ``hostd serve`` -> the server, ``initialize`` era (2025-11-25);
- ``hostd modern``: the same with the 2026-07-28 per-request envelope (no handshake);
- ``sdk legacy``: the SDK's ``Client(mode="legacy")`` straight to the server;
- ``sdk modern``: the SDK's ``Client(mode="2026-07-28")`` straight to the server.

Each iteration makes one ``echo`` call by each path in turn, so drift of the machine hits all
alike. Times are the caller's, in microseconds; the JSON printed holds p50/p99 per path and the
ratios hostd ÷ SDK per era (issue "Both MCP eras": no regression from "One clear, fast core").
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio
import yaml

from bench.common import now_us, open_hostd, ready, resolve_server, scratch, summary

SDK_SERVER = Path(__file__).resolve().parent.parent / "fixtures" / "mcp-sdk"
ERAS = {"legacy": "legacy", "modern": "2026-07-28"}


def _copy(parent: Path, era: str, protocol: str) -> Path:
    """fixtures/mcp-sdk as plugin ``sdk-<era>`` with ``backend.protocol: protocol``."""
    folder = parent / f"sdk-{era}"
    folder.mkdir()
    shutil.copy(SDK_SERVER / "server.py", folder / "server.py")
    manifest = yaml.safe_load((SDK_SERVER / "plugin.yaml").read_text(encoding="utf-8"))
    manifest["id"] = f"sdk-{era}"
    manifest["contributes"]["tools"] = [f"sdk-{era}.echo"]
    manifest["backend"]["protocol"] = protocol
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return folder


async def run(iterations: int) -> dict[str, Any]:
    """Measure; return ``{paths: {name: summary}, ratios: {era: {p50, p99}}}`` (µs, hostd ÷ SDK)."""
    from mcp import Client  # noqa: PLC0415 - the SDK is the baseline, loaded only here
    from mcp.client.stdio import StdioServerParameters  # noqa: PLC0415

    calls: dict[str, Callable[[], Awaitable[Any]]] = {}
    with scratch() as parent:
        async with AsyncExitStack() as stack:
            hostd = await stack.enter_async_context(open_hostd(parent / "state"))
            for era, protocol in ERAS.items():
                folder = _copy(parent, era, protocol)
                status = await ready(hostd, folder)
                assert status["era"] == era, status
                name = f"sdk-{era}.echo"

                async def through_hostd(name: str = name) -> Any:
                    return await hostd.request("tools/call", {"name": name, "arguments": {"text": "hi"}})

                calls[f"hostd {era}"] = through_hostd
                server = resolve_server(folder)
                params = StdioServerParameters(
                    command=server.executable, args=server.argv[1:], cwd=server.cwd, env=server.env
                )
                client = await stack.enter_async_context(Client(params, mode=protocol))

                async def direct(client: Any = client) -> Any:
                    return await client.call_tool("echo", {"text": "hi"})

                calls[f"sdk {era}"] = direct
            for call in calls.values():  # warm up every path
                await call()
            samples: dict[str, list[float]] = {name: [] for name in calls}
            for _ in range(iterations):
                for name, call in calls.items():
                    start = now_us()
                    await call()
                    samples[name].append(now_us() - start)
    paths = {name: summary(values) for name, values in samples.items()}
    ratios = {
        era: {q: round(paths[f"hostd {era}"][q] / paths[f"sdk {era}"][q], 2) for q in ("p50", "p99")} for era in ERAS
    }
    return {"iterations": iterations, "paths": paths, "ratios": ratios}


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    print(json.dumps(trio.run(run, count), indent=2))
