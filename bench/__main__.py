"""``python -m bench``: run hostd's benchmarks, print the tables, write the JSON.

    .venv/bin/python -m bench                      # everything, full length (a few minutes)
    .venv/bin/python -m bench --quick              # a few iterations of each (< 60 s; CI's smoke run)
    .venv/bin/python -m bench --only latency       # one bench (repeat --only, or use commas)

Benches: latency, throughput, startup, memory, framing, listing, tool_search, proxy_cost (``docs/performance.md``
says what each number means). The tables go to stdout as Markdown; the full
results with the machine's description go to ``bench/results/<time>-<mode>.json``
(or ``--out``). Exit status: 0 when every bench ran and left no process
behind, 1 otherwise. Targets are reported, never enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio

from bench import common, framing, latency, listing, memory, proxy_cost, startup, throughput, tool_search

BENCHES = ("latency", "throughput", "startup", "memory", "framing", "listing", "tool_search", "proxy_cost")
RESULTS = Path(__file__).resolve().parent / "results"
#: A safety net per bench (seconds); every loop inside is bounded on its own.
BENCH_DEADLINE = {"quick": 120.0, "full": 1200.0}

TABLES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "latency": latency.table,
    "throughput": throughput.table,
    "startup": startup.table,
    "memory": memory.table,
    "framing": framing.table,
    "listing": listing.table,
    "tool_search": tool_search.table,
    "proxy_cost": proxy_cost.table,
}
TITLES = {
    "latency": "Call latency: the same tools/call by four paths, interleaved",
    "throughput": "Throughput through hostd (echo fixture)",
    "startup": "Enable and start-up",
    "memory": "Memory (echo fixture plugins)",
    "framing": "Framing: LineDecoder alone",
    "listing": "Listing: tools/list of 500 plugins' tools, page by page",
    "tool_search": "Tool search: the listing an MCP client's model reads, with and without hostd mcp --tool-search",
    "proxy_cost": "The plugins' network proxy (issue 26): an HTTPS request and a download, direct and proxied",
}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description="hostd benchmarks (docs/performance.md)")
    parser.add_argument("--quick", action="store_true", help="a few iterations of each bench (< 60 s in all)")
    parser.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help=f"run only these benches (repeatable, or comma-separated): {', '.join(BENCHES)}",
    )
    parser.add_argument("--out", type=Path, help="where to write the JSON (default: bench/results/<time>-<mode>.json)")
    args = parser.parse_args(argv)
    selected: list[str] = []
    for item in args.only or []:
        for raw in item.split(","):
            name = raw.strip()
            if name not in BENCHES:
                parser.error(f"unknown bench {name!r}; choose from {', '.join(BENCHES)}")
            if name not in selected:
                selected.append(name)
    args.selected = [name for name in BENCHES if name in selected] if selected else list(BENCHES)
    return args


def _run_one(name: str, quick: bool, scratch_dir: Path) -> dict[str, Any]:
    deadline = BENCH_DEADLINE["quick" if quick else "full"]
    if name == "framing":
        return framing.run(quick)
    if name == "listing":
        return listing.run(quick, scratch_dir)
    if name == "tool_search":
        return tool_search.run(quick)
    module = {
        "latency": latency,
        "throughput": throughput,
        "startup": startup,
        "memory": memory,
        "proxy_cost": proxy_cost,
    }[name]

    async def main() -> dict[str, Any]:
        with trio.fail_after(deadline):
            result: dict[str, Any] = await module.run(quick, scratch_dir)
            return result

    return trio.run(main)


def evaluate_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The targets of issue 11 ("One clear, fast core"), each with the measured value and whether it is met
    (only for benches that ran). Targets are reported, never enforced."""
    targets: list[dict[str, Any]] = []

    def add(target: str, value: str, met: bool) -> None:
        targets.append({"target": target, "value": value, "met": met})

    lat = results.get("latency")
    if lat is not None:
        for server in lat["servers"]:
            paths = server["paths_us"]
            for pct, bound in (("p50", 0.8), ("p99", 1.0)):
                ratio = server[f"ratio_hostd_sdk_{pct}"]
                add(
                    f"hostd call {pct} ≤ {bound:.1f}x direct SDK client — {server['server']}",
                    f"{ratio:.2f}x ({paths['hostd'][pct]:,.0f} µs vs {paths['sdk'][pct]:,.0f} µs)",
                    ratio <= bound,
                )
    thr = results.get("throughput")
    if thr is not None:
        rows = [r for r in thr["rows"] if r["concurrency"] == 64 and r["spread"] != "one plugin"]
        for row in rows:
            cpu = row["hostd_cpu_us_per_call"]
            add(
                f"hostd CPU ≤ 150 µs/call at 64 in flight across {row['spread']}",
                f"{cpu:,.0f} µs ({row['calls_per_s']:,.0f} calls/s)",
                cpu <= 150,
            )
    start = results.get("startup")
    if start is not None:
        cold = start["cold"]
        ms = cold["ms"]
        trio_ms = ms["import_trio"]["p50"]
        ready = ms["hostd_host_ready"]["p50"] / trio_ms
        add(
            "first host answer (`plugins/list`) ≤ 2x `import trio`",
            f"{ready:.2f}x ({ms['hostd_host_ready']['p50']:.0f} ms vs {trio_ms:.0f} ms)",
            ready <= 2.0,
        )
        ratio = cold["ratio_initialize_import_trio_p50"]
        add(
            "hostd cold start to initialize ≤ 1.1x `import trio`",
            f"{ratio:.2f}x ({ms['hostd_initialize']['p50']:.0f} ms vs {trio_ms:.0f} ms)",
            ratio <= 1.1,
        )
    fr = results.get("framing")
    if fr is not None:
        rows = [row for row in fr["throughput"] if row["messages"].startswith("1 MiB")]
        worst = min(row["split_bound_mb_s"] for row in rows)
        add(
            "framing ≥ 1 GB/s on 1 MiB messages before JSON parsing",
            f"{worst:,.0f} MB/s (slowest 1 MiB case)",
            worst >= 1000,
        )
    mem = results.get("memory")
    if mem is not None and mem.get("hostd_rss_at_10_mib") is not None:
        rss = mem["hostd_rss_at_10_mib"]
        add("hostd RSS ≤ 60 MB with 10 plugins", f"{rss * 1.048576:.1f} MB ({rss:.1f} MiB)", rss * 1.048576 <= 60)
    return targets


def _machine_lines(info: dict[str, Any]) -> list[str]:
    packages = ", ".join(f"{k} {v}" for k, v in info["packages"].items() if v)
    return [
        f"machine: {info['cpu_model']}, {info['cores']} cores, {info['memory_gib']} GiB, {info['os']}",
        f"python {info['python']}; node {info['node'] or 'absent'}; {packages}",
        f"hostd {info['hostd_commit']}; load average at start {info['load_at_start']}",
    ]


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    mode = "quick" if args.quick else "full"
    info = common.machine()
    info["load_at_start"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    started = datetime.now(UTC)
    print(f"# hostd benchmarks ({mode}), {started:%Y-%m-%d %H:%M} UTC\n")
    print("\n".join(_machine_lines(info)))
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    leftovers: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    with common.scratch() as scratch_dir:
        for name in args.selected:
            began = time.monotonic()
            folder = scratch_dir / name
            folder.mkdir()
            try:
                results[name] = _run_one(name, args.quick, folder)
            except Exception as exc:
                errors[name] = "".join(traceback.format_exception(exc))
                print(f"\n## {TITLES[name]}\n\nFAILED: {exc!r}", flush=True)
                print(errors[name], file=sys.stderr)
            seconds[name] = time.monotonic() - began
            left = common.end_leftovers()
            if left:
                leftovers[name] = left
                print(f"\n{name}: processes left behind, now killed: {left}", file=sys.stderr)
            if name in results:
                print(f"\n## {TITLES[name]}\n")
                print("\n".join(TABLES[name](results[name])))
                print(f"\n({seconds[name]:.1f} s)", flush=True)
    targets = evaluate_targets(results)
    if targets:
        print("\n## Targets\n")
        print("| target | measured | met |")
        print("|---|---|---|")
        for t in targets:
            print(f"| {t['target']} | {t['value']} | {'yes' if t['met'] else '**no**'} |")
    info["load_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    document = {
        "mode": mode,
        "started_utc": started.isoformat(timespec="seconds"),
        "seconds": seconds,
        "machine": info,
        "results": results,
        "targets": targets,
        "errors": errors,
        "leftover_processes": leftovers,
    }
    out = args.out
    if out is None:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / f"{started:%Y%m%d-%H%M%S}-{mode}.json"
    out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"\nresults: {out}; load average at end {info['load_at_end']}; {sum(seconds.values()):.0f} s in all")
    if errors or leftovers:
        print(f"failed: {', '.join(errors) or '-'}; left processes behind: {', '.join(leftovers) or '-'}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
