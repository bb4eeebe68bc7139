"""How long a hostd takes to end after ``exit``: Python's exit with or without its teardown (issue 28).

Usage: python -m bench.hostd_exit [runs] [--before TREE] (default 11 runs). Per round, one real ``python -m hostd
serve`` in a fresh state folder of a scratch folder, as every test spawns one: ``initialize``, ``plugins/list`` (the
host imported), ``shutdown``; then ``exit`` is written and stdin closed, and the time to the process's end is
measured (``end``), with the whole process's CPU time (user + system of it and its children: ``cpu``). With
``--before TREE`` (a ``git worktree`` or ``git archive`` of an older commit) the same hostd from ``TREE`` runs in
each round right after (``before``), so a change of the machine's load between rounds cancels out in the per-round
ratio (``now_over_before``). Prints one JSON object: p50 and min in milliseconds, the load average at start and
end. Each hostd imports hostd from the folder it runs in (no ``PYTHONPATH``). The first round warms the bytecode
caches and is dropped. Timings belong here, never in tests.

Measured on 2026-12-06 at 16:07 UTC, 11 rounds, load 2.3-3.3 on 2 vCPUs, ``--before`` 6cd936f (docs/performance.md):
``end`` 5.3 ms (min 2.8) against 99.7 (min 58.7), a median ratio of 0.05; the whole hostd's CPU 359 ms (min 332)
against 444 (min 388), a ratio of 0.84.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, before_option, scratch

#: The requests before ``exit``, one JSON-RPC message a line (``initialize`` as hostctl sends it).
BEFORE_EXIT = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "1", "clientInfo": {"name": "bench", "version": "1"}},
    },
    {"jsonrpc": "2.0", "id": 2, "method": "plugins/list", "params": {}},
    {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
]


def _one(tree: Path, state: Path, env: dict[str, str]) -> tuple[float, float]:
    """One hostd from ``tree`` over ``state`` to its end: (ms from ``exit`` written to the end, CPU ms)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    argv = [sys.executable, "-m", "hostd", "serve", "--state-dir", str(state), "--log-level", "error"]
    child = subprocess.Popen(argv, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    for message in BEFORE_EXIT:
        child.stdin.write(json.dumps(message).encode() + b"\n")
        child.stdin.flush()
        reply = json.loads(child.stdout.readline())
        if "error" in reply:
            raise RuntimeError(f"{message['method']}: {reply['error']}")
    started = time.perf_counter()
    child.stdin.write(b'{"jsonrpc": "2.0", "method": "exit"}\n')
    child.stdin.close()
    code = child.wait()
    end = (time.perf_counter() - started) * 1000
    child.stdout.close()
    if code != 0:
        raise RuntimeError(f"hostd from {tree} exited {code}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return end, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def run(runs: int, before: Path | None = None) -> dict[str, Any]:
    """The measurement (see the module header): ``runs`` rounds after one warm-up round."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's hostd runs from its bytecode cache
    os.environ.pop("PYTHONPATH", None)
    env = dict(os.environ)
    trees = {"now": ROOT} | ({"before": before} if before is not None else {})
    samples: dict[str, dict[str, list[float]]] = {way: {"end": [], "cpu": []} for way in trees}
    with scratch() as folder:
        for round_ in range(runs + 1):
            for way, tree in trees.items():
                end, cpu = _one(tree, folder / f"state-{way}-{round_}", env)
                if round_:
                    samples[way]["end"].append(end)
                    samples[way]["cpu"].append(cpu)
    result: dict[str, Any] = {
        "runs": runs,
        "load_at_start": load,
        "load_at_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cores": os.cpu_count(),
        "ms": {
            way: {kind: {"p50": round(statistics.median(v), 1), "min": round(min(v), 1)} for kind, v in kinds.items()}
            for way, kinds in samples.items()
        },
    }
    if before is not None:
        result["now_over_before"] = {
            kind: round(
                statistics.median(a / b for a, b in zip(samples["now"][kind], samples["before"][kind], strict=True)), 3
            )
            for kind in ("end", "cpu")
        }
    return result


def main() -> None:
    before, args = before_option(sys.argv[1:])
    print(json.dumps(run(int(args[0]) if args else 11, before), indent=1))


if __name__ == "__main__":
    main()
