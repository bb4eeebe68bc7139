"""Memory: hostd's RSS idle and with 1, 10 and 50 echo plugins enabled.

One hostd; "idle" is after its host is built (first ``plugins/list``
answered, the heavy modules loaded) with no plugin. Then copies of the echo
fixture are enabled up to each level, and after a settle pause the bench
reads, with psutil:

- hostd's RSS and USS (USS: the pages only this process holds);
- the plugin side, told apart by the sandbox token (``HOSTD_SANDBOX_TOKEN``
  naming this hostd's pid): the shims (``sandbox/shim.py``, the parent of
  each plugin's main process) and the servers, each group's RSS and USS
  summed. RSS sums count shared pages (the interpreter, libc) once per
  process; USS sums do not. A shim forked by the fork server carries its
  plugin's token too; with ``pidns`` a plugin has two shim processes (the
  shim and its forked pid 1), both counted as its shim;
- the fork server (``hostd-shimsrv``, one per hostd, no token: hostd's child
  by that name), whose USS is shared out over the plugins for the per-plugin
  supervision cost, printed against the target (``SHIM_USS_TARGET_MIB``).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import psutil
import trio

from bench.common import echo_copy, open_hostd, ready, sandbox_processes
from hostd.cli.client import plugin_environment

MIB = 1024 * 1024
#: The issue's target for one plugin's supervision: its shim processes plus its share of the fork server.
SHIM_USS_TARGET_MIB = 2.0

#: What hostd's idle RSS is made of: the peak RSS of a fresh interpreter after each import.
IMPORTS = (
    ("pass", "nothing (the interpreter)"),
    ("import trio", "trio"),
    ("import hostd.cli.hostd", "hostd's start path (trio, orjson, control channel)"),
    ("import pydantic, jsonschema", "pydantic + jsonschema"),
    ("import mcp_types", "mcp_types (the MCP models alone)"),
    ("import mcp", "the mcp SDK package (client, server, HTTP stack)"),
    ("import hostd.host.service", "hostd's host (everything it loads after initialize)"),
)
# VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec.
_PEAK = "import re, sys; sys.stdout.write(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])"


async def _import_rss() -> list[dict[str, Any]]:
    rows = []
    for code, label in IMPORTS:
        done = await trio.run_process(
            [sys.executable, "-c", f"{code}\n{_PEAK}"], capture_stdout=True, env=plugin_environment()
        )
        rows.append({"code": code, "what": label, "peak_rss_mib": int(done.stdout) / 1024})
    return rows


def _memory(proc: psutil.Process) -> tuple[int, int]:
    info = proc.memory_full_info()
    return info.rss, info.uss


def _snapshot(hostd_pid: int, plugins: int) -> dict[str, Any]:
    rss, uss = _memory(psutil.Process(hostd_pid))
    groups: dict[str, dict[str, float]] = {
        "shims": {"count": 0, "rss_mib": 0.0, "uss_mib": 0.0},
        "servers": {"count": 0, "rss_mib": 0.0, "uss_mib": 0.0},
        "fork_server": {"count": 0, "rss_mib": 0.0, "uss_mib": 0.0},
    }
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(hostd_pid).children():
            with contextlib.suppress(psutil.Error):
                if child.name() == "hostd-shimsrv":
                    p_rss, p_uss = _memory(child)
                    groups["fork_server"] = {"count": 1, "rss_mib": p_rss / MIB, "uss_mib": p_uss / MIB}
    for proc in sandbox_processes(hostd_pid):
        try:
            is_shim = any(part.endswith("shim.py") for part in proc.cmdline())
            p_rss, p_uss = _memory(proc)
        except psutil.Error:
            continue
        group = groups["shims" if is_shim else "servers"]
        group["count"] += 1
        group["rss_mib"] += p_rss / MIB
        group["uss_mib"] += p_uss / MIB
    return {"plugins": plugins, "hostd_rss_mib": rss / MIB, "hostd_uss_mib": uss / MIB, **groups}


async def run(quick: bool, scratch_dir: Path) -> dict[str, Any]:
    """Levels 0, 1, 10, 50 (``quick``: 0, 1, 3)."""
    levels = (1, 3) if quick else (1, 10, 50)
    settle = 0.3 if quick else 2.0
    folders = [echo_copy(scratch_dir, f"mem-{i}") for i in range(1, levels[-1] + 1)]
    rows: list[dict[str, Any]] = []
    async with open_hostd(scratch_dir / "state-memory") as hostd:
        await hostd.request("plugins/list", {})
        await trio.sleep(settle)
        rows.append(_snapshot(hostd.process.pid, 0))
        enabled = 0
        limiter = trio.CapacityLimiter(4)

        async def enable(folder: Path) -> None:
            async with limiter:
                await ready(hostd, folder)

        for level in levels:
            async with trio.open_nursery() as nursery:
                for folder in folders[enabled:level]:
                    nursery.start_soon(enable, folder)
            enabled = level
            # One call per plugin, so each link has served a tools/call too.
            for folder in folders[:level]:
                await hostd.request("tools/call", {"name": f"{folder.name}.echo", "arguments": {"text": "hi"}})
            await trio.sleep(settle)
            rows.append(_snapshot(hostd.process.pid, level))
    idle = rows[0]
    for row in rows[1:]:
        n = row["plugins"]
        row["hostd_rss_per_plugin_mib"] = (row["hostd_rss_mib"] - idle["hostd_rss_mib"]) / n
        row["hostd_uss_per_plugin_mib"] = (row["hostd_uss_mib"] - idle["hostd_uss_mib"]) / n
    first, last = rows[1], rows[-1]
    span = last["plugins"] - first["plugins"]
    slope = (last["hostd_rss_mib"] - first["hostd_rss_mib"]) / span if span else float("nan")
    at_ten = next((row for row in rows if row["plugins"] == 10), None)
    return {
        "rows": rows,
        "imports": await _import_rss(),
        "hostd_rss_slope_mib_per_plugin": slope,
        "hostd_rss_at_10_mib": None if at_ten is None else at_ten["hostd_rss_mib"],
    }


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows of the memory section."""
    lines = [
        "| plugins | hostd RSS MiB | hostd USS MiB | hostd Δ RSS/plugin MiB | shims: n, RSS, USS MiB "
        "| servers: n, RSS, USS MiB |",
        "|---:|---:|---:|---:|---|---|",
    ]
    for row in result["rows"]:
        per = row.get("hostd_rss_per_plugin_mib")
        shims, servers = row["shims"], row["servers"]
        lines.append(
            f"| {row['plugins']} | {row['hostd_rss_mib']:.1f} | {row['hostd_uss_mib']:.1f} "
            f"| {'—' if per is None else f'{per:.2f}'} "
            f"| {shims['count']}, {shims['rss_mib']:.1f}, {shims['uss_mib']:.1f} "
            f"| {servers['count']}, {servers['rss_mib']:.1f}, {servers['uss_mib']:.1f} |"
        )
    last = result["rows"][-1]
    if last["plugins"]:
        n = last["plugins"]
        lines.append(
            f"\nper plugin at {n}: hostd +{result['hostd_rss_slope_mib_per_plugin']:.2f} MiB RSS "
            f"(slope from 1 to {n}); shim {last['shims']['rss_mib'] / n:.1f} MiB RSS "
            f"/ {last['shims']['uss_mib'] / n:.1f} MiB USS; "
            f"server {last['servers']['rss_mib'] / n:.1f} MiB RSS / {last['servers']['uss_mib'] / n:.1f} MiB USS"
        )
        server = last.get("fork_server", {"count": 0, "uss_mib": 0.0})
        supervision = (last["shims"]["uss_mib"] + server["uss_mib"]) / n
        lines.append(
            f"\nfork server: {server['count']}, {server['uss_mib']:.1f} MiB USS; supervision per plugin "
            f"(shim processes + fork server share) {supervision:.2f} MiB USS "
            f"(target <= {SHIM_USS_TARGET_MIB:.1f}: {'met' if supervision <= SHIM_USS_TARGET_MIB else 'not met'})"
        )
    lines += ["", "| fresh interpreter after … | peak RSS MiB |", "|---|---:|"]
    for row in result["imports"]:
        lines.append(f"| `{row['code']}`: {row['what']} | {row['peak_rss_mib']:.1f} |")
    return lines
