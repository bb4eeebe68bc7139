"""The call path of two hostd source trees side by side, in one run: has a change made ``tools/call`` slower?

``python -m bench.side_by_side BASE [--iterations N]``: a hostd from ``BASE`` (another checkout, e.g. ``git
archive HEAD~1 | tar -x -C /tmp/base``) and one from this tree, each driven by the minimal NDJSON parent
(:func:`bench.clients.raw_hostd`: hostd's cost without the Python client's), each with its own copy of the
echo fixture ready. Each iteration makes one tiny ``echo`` call through the base, then one through this
tree, so drift of the machine hits both alike. Printed (and returned by :func:`run`): p50/p90/p99 of each
path in microseconds (the caller's time, request written to response decoded), each hostd's CPU per call
over the loop, and the ratio of the p50s (this tree / base).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import psutil
import trio

from bench.clients import raw_hostd
from bench.common import ROOT, echo_copy, now_us, summary

ARGUMENTS = {"text": "hello"}


def _cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def run(base: Path, iterations: int) -> dict[str, Any]:
    """Both hostds, ``iterations`` interleaved calls after a warm-up of a tenth of them (at least 10)."""
    with tempfile.TemporaryDirectory(prefix="hostd-bench-sbs-") as scratch:
        root = Path(scratch)
        trees = {"base": base, "this": ROOT}
        folders = {name: echo_copy(root, f"echo-{name}") for name in trees}
        async with (
            raw_hostd(root / "state-base", folders["base"], base) as old,
            raw_hostd(root / "state-this", folders["this"], ROOT) as new,
        ):
            clients = {"base": (old, "echo-base.echo"), "this": (new, "echo-this.echo")}
            samples: dict[str, list[float]] = {name: [] for name in clients}

            async def loop(count: int, record: bool) -> None:
                for _ in range(count):
                    for name, (client, tool) in clients.items():
                        start = now_us()
                        result = await client.call_tool(tool, ARGUMENTS)
                        if record:
                            samples[name].append(now_us() - start)
                        if "hello" not in result["content"][0]["text"]:
                            raise RuntimeError(f"{name}: unexpected result {result!r}")

            await loop(max(10, iterations // 10), record=False)
            processes = {name: psutil.Process(client.process.pid) for name, (client, _) in clients.items()}
            before = {name: _cpu_seconds(process) for name, process in processes.items()}
            await loop(iterations, record=True)
            cpu = {name: (_cpu_seconds(p) - before[name]) / iterations * 1e6 for name, p in processes.items()}
    stats = {name: summary(values) for name, values in samples.items()}
    return {
        "base": str(base),
        "iterations": iterations,
        "paths_us": stats,
        "hostd_cpu_us_per_call": cpu,
        "ratio_p50": stats["this"]["p50"] / stats["base"]["p50"],
    }


def main() -> None:
    """The command line: ``BASE [--iterations N]`` (default 2000); prints the result as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.side_by_side", description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path, help="the other hostd source tree (its root folder)")
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(trio.run(run, args.base.resolve(), args.iterations), indent=2))


if __name__ == "__main__":
    main()
