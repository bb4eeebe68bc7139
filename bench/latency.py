"""Call latency, side by side: the same tiny ``tools/call`` by four paths, interleaved.

(a) a parent through hostd: :class:`hostd.cli.client.HostdClient` -> ``hostd serve`` -> plugin,
(a0) the same through a second hostd, driven by a minimal NDJSON parent
     (:func:`bench.clients.raw_hostd`): hostd's cost without HostdClient's,
(b) the mcp SDK's ``ClientSession`` over its ``stdio_client`` straight to the same server,
(c) a minimal hand-written NDJSON JSON-RPC client straight to the same server (the floor).

All connections are open at once in one trio run; each iteration makes one
call by a, a0, b, then c, so drift of the machine hits all of them alike.
The time is the caller's: from just before the request is written to just
after the response is decoded, in microseconds. CPU per call: the bench
process's own (the caller's client code; the other clients are idle
meanwhile) and, for a and a0, their hostd's over the whole loop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import psutil

from bench.clients import RawClient, raw_hostd, sdk_session
from bench.common import (
    echo_copy,
    everything_copy,
    everything_unavailable,
    now_us,
    open_hostd,
    ready,
    resolve_server,
    summary,
)

PATHS = ("hostd", "hostd_raw_parent", "sdk", "raw")


async def _measure(
    calls: Mapping[str, Callable[[], Awaitable[Any]]], iterations: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per-path latencies (µs) and the bench process's own CPU time per call (µs) for each path."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, float] = dict.fromkeys(calls, 0.0)
    for _ in range(iterations):
        for name, call in calls.items():
            cpu_start = time.process_time()
            start = now_us()
            await call()
            samples[name].append(now_us() - start)
            cpu[name] += time.process_time() - cpu_start
    return samples, {name: total / iterations * 1e6 for name, total in cpu.items()}


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def bench_server(
    label: str, folder: Path, tool: str, arguments: dict[str, Any], expect: str, state: Path, iterations: int
) -> dict[str, Any]:
    """The four paths against the server of the plugin in ``folder``."""
    server = resolve_server(folder)
    async with open_hostd(state) as hostd:
        status = await ready(hostd, folder)
        plugin_id = status["plugin_id"]
        async with (
            raw_hostd(state.with_name(state.name + "-raw"), folder) as raw_parent,
            sdk_session(server) as session,
            RawClient.open(server) as raw,
        ):
            host_name = f"{plugin_id}.{tool}"

            async def via_hostd() -> Any:
                return await hostd.request("tools/call", {"name": host_name, "arguments": arguments})

            async def via_raw_hostd() -> Any:
                return await raw_parent.call_tool(host_name, arguments)

            async def via_sdk() -> Any:
                return await session.call_tool(tool, arguments)

            async def via_raw() -> Any:
                return await raw.call_tool(tool, arguments)

            # One checked call each: every path must get the same answer.
            texts = [
                (await via_hostd())["content"][0]["text"],
                (await via_raw_hostd())["content"][0]["text"],
                (await via_sdk()).content[0].text,
                (await via_raw())["content"][0]["text"],
            ]
            if any(expect not in text for text in texts):
                raise RuntimeError(f"{label}: unexpected echo results {texts!r}")
            paths = {"hostd": via_hostd, "hostd_raw_parent": via_raw_hostd, "sdk": via_sdk, "raw": via_raw}
            hostds = {
                "hostd": psutil.Process(hostd.process.pid),
                "hostd_raw_parent": psutil.Process(raw_parent.process.pid),
            }
            await _measure(paths, max(10, iterations // 20))  # warm-up
            before = {name: _cpu_seconds(proc) for name, proc in hostds.items()}
            samples, client_cpu = await _measure(paths, iterations)
            hostd_cpu = {name: (_cpu_seconds(proc) - before[name]) / iterations * 1e6 for name, proc in hostds.items()}
    stats = {name: summary(values) for name, values in samples.items()}
    return {
        "server": label,
        "tool": tool,
        "iterations": iterations,
        "paths_us": stats,
        "client_cpu_us_per_call": client_cpu,
        "hostd_cpu_us_per_call": hostd_cpu,
        "ratio_hostd_sdk_p50": stats["hostd"]["p50"] / stats["sdk"]["p50"],
        "ratio_hostd_raw_p50": stats["hostd"]["p50"] / stats["raw"]["p50"],
        "ratio_hostd_sdk_p99": stats["hostd"]["p99"] / stats["sdk"]["p99"],
        "ratio_hostd_raw_parent_sdk_p50": stats["hostd_raw_parent"]["p50"] / stats["sdk"]["p50"],
    }


async def run(quick: bool, scratch_dir: Path) -> dict[str, Any]:
    """Both servers; ``quick``: 50 iterations instead of 2000."""
    iterations = 50 if quick else 2000
    servers: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    servers.append(
        await bench_server(
            "mcp-echo (fixture, Python stdlib)",
            echo_copy(scratch_dir),
            "echo",
            {"text": "hi"},
            "hi",
            scratch_dir / "state-echo",
            iterations,
        )
    )
    reason = everything_unavailable()
    if reason is None:
        servers.append(
            await bench_server(
                "server-everything (Node)",
                everything_copy(scratch_dir),
                "echo",
                {"message": "hi"},
                "hi",
                scratch_dir / "state-everything",
                iterations,
            )
        )
    else:
        skipped["server-everything"] = reason
    return {"servers": servers, "skipped": skipped}


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows of the latency section."""
    lines = [
        "| server | path | p50 µs | p90 µs | p99 µs | calls | caller CPU µs/call | hostd CPU µs/call |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "hostd": "(a) HostdClient parent → hostd → server",
        "hostd_raw_parent": "(a0) minimal parent → hostd → server",
        "sdk": "(b) mcp SDK ClientSession → server",
        "raw": "(c) minimal NDJSON client → server",
    }
    for server in result["servers"]:
        for path in PATHS:
            s = server["paths_us"][path]
            hostd_cpu = server["hostd_cpu_us_per_call"].get(path)
            lines.append(
                f"| {server['server']} | {names[path]} | {s['p50']:,.0f} | {s['p90']:,.0f} | {s['p99']:,.0f} "
                f"| {s['n']} | {server['client_cpu_us_per_call'][path]:,.0f} "
                f"| {'—' if hostd_cpu is None else f'{hostd_cpu:,.0f}'} |"
            )
    lines.append("")
    lines.append("| server | a/b p50 | a/c p50 | a/b p99 | a0/b p50 |")
    lines.append("|---|---:|---:|---:|---:|")
    for server in result["servers"]:
        lines.append(
            f"| {server['server']} | {server['ratio_hostd_sdk_p50']:.2f}x | {server['ratio_hostd_raw_p50']:.2f}x "
            f"| {server['ratio_hostd_sdk_p99']:.2f}x | {server['ratio_hostd_raw_parent_sdk_p50']:.2f}x |"
        )
    for name, reason in result["skipped"].items():
        lines.append(f"\n{name} skipped: {reason}")
    return lines
