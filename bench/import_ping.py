"""``ping`` latency while ``plugins/import`` works: the import runs off the event loop (issue 10).

Usage: python -m bench.import_ping [entries]. Starts a real ``hostd serve``, sends an import of
``entries`` servers (default 500, the documented maximum: hostd refuses more at once) whose names
all sanitise alike (the quadratic case of the first version), and pings every 5 ms while it runs.
Prints one JSON object: the import's duration, the pings sent during it and their latency
percentiles in milliseconds, and the target (a ping answered within 100 ms). A second line does the
same with an import of 10,000 entries, which hostd refuses at once (``IMPORT_INVALID``).
Timings belong here, never in tests.
"""

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment


def config(entries: int) -> dict[str, Any]:
    """``entries`` servers named "srv", "srv ", "SRV!"...: each sanitises to "srv" and needs a suffix."""
    names = [f"srv{'!' * (i % 7)}{' ' * (i // 7)}" for i in range(entries)]
    return {"mcpServers": {name: {"command": "python3", "args": ["server.py"]} for name in names}}


async def measure(entries: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hostd-bench-import-") as tmp:
        args = ["--state-dir", str(Path(tmp) / "state"), "--log-level", "error"]
        async with HostdClient.spawn(args, env=plugin_environment()) as hostd:
            latencies: list[float] = []
            done = trio.Event()
            outcome: dict[str, Any] = {}

            async def importer() -> None:
                started = time.perf_counter()
                try:
                    result = await hostd.request("plugins/import", {"config": config(entries)}, timeout=600)
                    outcome["installed"] = sum(e["outcome"] == "installed" for e in result["entries"])
                except RpcError as error:
                    outcome["refused"] = error.kind
                outcome["import_ms"] = round((time.perf_counter() - started) * 1000, 1)
                done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(importer)
                while not done.is_set():
                    started = time.perf_counter()
                    await hostd.request("ping", {})
                    latencies.append((time.perf_counter() - started) * 1000)
                    with trio.move_on_after(0.005):
                        await done.wait()
    ordered = sorted(latencies) or [0.0]
    return {
        "entries": entries,
        **outcome,
        "pings": len(latencies),
        "ping_ms_p50": round(statistics.median(ordered), 2),
        "ping_ms_p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
        "ping_ms_max": round(ordered[-1], 2),
        "target_ms": 100,
    }


async def main() -> None:
    entries = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    for count in (entries, 10_000):
        print(json.dumps(await measure(count)), flush=True)


if __name__ == "__main__":
    trio.run(main)
