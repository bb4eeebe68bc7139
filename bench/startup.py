"""Enable and start-up times.

- **enable → ready**: ``plugins/enable`` on an installed, granted, approved
  plugin until its ``ready`` answer (hostd spawns the shim and the server,
  handshakes, walks ``tools/list``, validates the tools against the
  manifest, registers them), against a bare SDK connect to the same server
  (``stdio_client`` + ``ClientSession``: spawn, ``initialize``,
  ``tools/list``) and the minimal NDJSON client doing the same. Each run
  disables the plugin (untimed) before the next; the direct clients'
  teardown is untimed too.
- **hostd cold start**: from spawning ``python -m hostd serve --state-dir
  <fresh folder>`` to its answer to ``initialize`` (the parent's readiness
  signal), and to its first answer from the host (``plugins/list``: the
  heavy modules are loaded), against ``python -c "import trio"`` and
  ``python -c pass`` run to exit, spawned the same way.

The kinds of run are interleaved (one of each per round).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from bench.clients import RawClient, sdk_session
from bench.common import (
    echo_copy,
    everything_copy,
    everything_unavailable,
    install,
    now_us,
    open_hostd,
    resolve_server,
    summary,
)
from hostd.cli.client import plugin_environment


async def _enable_runs(label: str, folder: Path, state: Path, runs: int) -> dict[str, Any]:
    server = resolve_server(folder)
    samples: dict[str, list[float]] = {"hostd_enable": [], "sdk_connect": [], "raw_connect": []}
    async with open_hostd(state) as hostd:
        info = await install(hostd, folder)
        plugin_id = info["id"]
        for _ in range(runs + 1):  # the first round warms the caches (npx, pyc) and is dropped
            start = now_us()
            status = await hostd.request("plugins/enable", {"id": plugin_id}, timeout=150)
            enable = now_us() - start
            if status["status"] != "ready":
                raise RuntimeError(f"{plugin_id}: {status}")
            await hostd.request("plugins/disable", {"id": plugin_id})

            start = now_us()
            async with sdk_session(server):
                sdk = now_us() - start

            start = now_us()
            async with RawClient.open(server) as raw:
                await raw.list_tools()
                floor = now_us() - start

            for key, value in (("hostd_enable", enable), ("sdk_connect", sdk), ("raw_connect", floor)):
                samples[key].append(value / 1000)
    for values in samples.values():
        del values[0]
    stats = {key: summary(values) for key, values in samples.items()}
    return {
        "server": label,
        "runs": runs,
        "ms": stats,
        "ratio_enable_sdk_p50": stats["hostd_enable"]["p50"] / stats["sdk_connect"]["p50"],
    }


async def _python_run(code: str) -> float:
    start = now_us()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, env=plugin_environment()
    )
    try:
        await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
    if process.returncode != 0:
        raise RuntimeError(f"python -c {code!r} exited {process.returncode}")
    return (now_us() - start) / 1000


async def _hostd_cold(state: Path) -> tuple[float, float]:
    start = now_us()
    async with open_hostd(state) as client:
        initialized = now_us() - start
        await client.request("plugins/list", {})
        host_ready = now_us() - start
    return initialized / 1000, host_ready / 1000


async def _cold_runs(scratch_dir: Path, runs: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {
        "hostd_initialize": [],
        "hostd_host_ready": [],
        "import_trio": [],
        "python_pass": [],
    }
    for index in range(runs + 1):  # the first round is a warm-up and is dropped
        initialized, host_ready = await _hostd_cold(scratch_dir / f"cold-{index}")
        samples["hostd_initialize"].append(initialized)
        samples["hostd_host_ready"].append(host_ready)
        samples["import_trio"].append(await _python_run("import trio"))
        samples["python_pass"].append(await _python_run("pass"))
    for values in samples.values():
        del values[0]
    stats = {key: summary(values) for key, values in samples.items()}
    return {
        "runs": runs,
        "ms": stats,
        "ratio_initialize_import_trio_p50": stats["hostd_initialize"]["p50"] / stats["import_trio"]["p50"],
    }


async def run(quick: bool, scratch_dir: Path) -> dict[str, Any]:
    """``quick``: 1 run of each (after the warm-up round) instead of 20."""
    runs = 1 if quick else 20
    enable: list[dict[str, Any]] = [
        await _enable_runs("mcp-echo (fixture)", echo_copy(scratch_dir), scratch_dir / "state-enable-echo", runs)
    ]
    skipped: dict[str, str] = {}
    reason = everything_unavailable()
    if reason is None:
        enable.append(
            await _enable_runs(
                "server-everything (npx)", everything_copy(scratch_dir), scratch_dir / "state-enable-everything", runs
            )
        )
    else:
        skipped["server-everything"] = reason
    return {"enable": enable, "cold": await _cold_runs(scratch_dir, runs), "skipped": skipped}


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows of the start-up section."""
    lines = [
        "| server | hostd enable→ready p50 ms | SDK connect p50 ms | minimal client p50 ms | enable/SDK | runs |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in result["enable"]:
        ms = row["ms"]
        lines.append(
            f"| {row['server']} | {ms['hostd_enable']['p50']:.0f} (p90 {ms['hostd_enable']['p90']:.0f}) "
            f"| {ms['sdk_connect']['p50']:.0f} (p90 {ms['sdk_connect']['p90']:.0f}) "
            f"| {ms['raw_connect']['p50']:.0f} | {row['ratio_enable_sdk_p50']:.2f}x | {row['runs']} |"
        )
    cold = result["cold"]
    ms = cold["ms"]
    lines += [
        "",
        "| process start to … | p50 ms | p90 ms | runs |",
        "|---|---:|---:|---:|",
    ]
    names = {
        "hostd_initialize": "hostd: `initialize` answered",
        "hostd_host_ready": "hostd: first host answer (`plugins/list`)",
        "import_trio": '`python -c "import trio"` exited',
        "python_pass": '`python -c "pass"` exited',
    }
    for key, name in names.items():
        lines.append(f"| {name} | {ms[key]['p50']:.0f} | {ms[key]['p90']:.0f} | {cold['runs']} |")
    lines.append(f"\nhostd cold start to `initialize` / `import trio`: {cold['ratio_initialize_import_trio_p50']:.2f}x")
    for name, reason in result["skipped"].items():
        lines.append(f"\n{name} skipped: {reason}")
    return lines
