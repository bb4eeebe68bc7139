"""Throughput: tools/call per second through hostd at 1, 16, 64 and 256 calls in flight.

One hostd with 8 copies of the echo fixture enabled (distinct ids
``echo-1`` ... ``echo-8``). ``one plugin``: every call goes to ``echo-1``;
``8 plugins``: call ``k`` goes to ``echo-(k mod 8)``. ``C`` workers in the
parent each make calls back to back until the fixed total is done; calls/s =
total / wall time. hostd's own CPU time over the run is read from /proc
(psutil) and reported per call.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import psutil
import trio

from bench.common import echo_copy, now_us, open_hostd, ready, summary

CONCURRENCY = (1, 16, 64, 256)
PLUGINS = 8


async def _run_level(hostd: Any, names: list[str], concurrency: int, total: int, cpu: psutil.Process) -> dict[str, Any]:
    counter = itertools.count()
    latencies: list[float] = []

    async def worker() -> None:
        while (k := next(counter)) < total:
            name = names[k % len(names)]
            start = now_us()
            result = await hostd.request("tools/call", {"name": name, "arguments": {"text": "hi"}})
            latencies.append(now_us() - start)
            if result["content"][0]["text"] != "hi":
                raise RuntimeError(f"unexpected result {result!r}")

    before = cpu.cpu_times()
    start = now_us()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    elapsed = (now_us() - start) / 1e6
    after = cpu.cpu_times()
    hostd_cpu = (after.user - before.user) + (after.system - before.system)
    stats = summary(latencies)
    return {
        "concurrency": concurrency,
        "calls": total,
        "seconds": elapsed,
        "calls_per_s": total / elapsed,
        "latency_us": stats,
        "hostd_cpu_us_per_call": hostd_cpu / total * 1e6,
    }


async def run(quick: bool, scratch_dir: Path) -> dict[str, Any]:
    """Both spreads at every concurrency; ``quick``: 200 calls per level instead of 4000."""
    total = 200 if quick else 4000
    folders = [echo_copy(scratch_dir, f"echo-{i}") for i in range(1, PLUGINS + 1)]
    rows: list[dict[str, Any]] = []
    async with open_hostd(scratch_dir / "state-throughput") as hostd:
        for folder in folders:
            await ready(hostd, folder)
        cpu = psutil.Process(hostd.process.pid)
        spreads = {
            "one plugin": [f"{folders[0].name}.echo"],
            f"{PLUGINS} plugins": [f"{folder.name}.echo" for folder in folders],
        }
        for names in spreads.values():  # warm-up: every plugin answers once or more
            await _run_level(hostd, names, 8, 64, cpu)
        for spread, names in spreads.items():
            for concurrency in CONCURRENCY:
                row = await _run_level(hostd, names, concurrency, max(total, concurrency * 4), cpu)
                row["spread"] = spread
                rows.append(row)
    return {"rows": rows}


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows of the throughput section."""
    lines = [
        "| spread | in flight | calls/s | p50 µs | p99 µs | hostd CPU µs/call | calls |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lat = row["latency_us"]
        lines.append(
            f"| {row['spread']} | {row['concurrency']} | {row['calls_per_s']:,.0f} | {lat['p50']:,.0f} "
            f"| {lat['p99']:,.0f} | {row['hostd_cpu_us_per_call']:,.0f} | {row['calls']} |"
        )
    return lines
