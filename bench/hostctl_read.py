"""How long hostctl's reading commands take with an enabled plugin: read directly vs through a hostd (issue 28).

Usage: python -m bench.hostctl_read [runs] [--before TREE] (default 7 runs). Makes a state folder holding one
enabled echo plugin (installed, granted, approved, started once and stopped by a real ``hostd serve``), then,
interleaved, one of each per round, runs real hostctl processes to exit:

- ``direct``: ``python -m hostd.cli.hostctl <verb>``, which reads the folder in its own process (no hostd
  serves it: hostd/cli/direct.py);
- ``spawn``: the same command the old way, through a ``hostd serve --no-restore`` of its own (hostctl with its
  reading commands sent to a hostd, as before);
- ``before`` (with ``--before TREE``): ``direct`` run from ``TREE``, another checkout of hostd (``git worktree``
  or ``git archive`` of an older commit), so an import-time change is measured against its base in one run;
- ``import``: ``python -c "import hostd.cli.hostctl"`` (what any hostctl command costs before it does anything),
  with ``--before`` also from ``TREE`` (``import before``; its ratio is ``direct_over_before["import"]``);
- ``floor``: ``python -c`` of :data:`FLOOR`, what any read that gives hostd's own answers loads before its first
  line of work: trio (hostctl and hostd run on it), rich (the tables), PyYAML and pydantic with its first model
  built (the manifest), and hostd's control models (the answers); ``direct`` minus ``floor`` is what hostd's own
  modules and the work itself cost;
- ``python``: ``python -c pass``.

for the verbs ``list`` and ``status``. Prints one JSON object: per verb and way, the wall time and the CPU
time (user + system of the process and its children) in milliseconds, p50 and min, with ``--before`` the
median per-round ratio ``direct`` / ``before`` (``direct_over_before``), the load average at start and end,
and checks that every way printed the same stdout. The folder's hostd kept the login shell's ``PATH`` and the
probe's answer (hostd/storage/facts.py), so ``direct`` runs no process (but trio's ``ldconfig -p``); a
``before`` older than that runs both at every read. Every way, and the hostd that makes the folder, runs with
one environment (that key includes it) and imports hostd from the folder it runs in (no ``PYTHONPATH``). The
first round warms the caches (bytecode) and is dropped. Timings belong here, never in tests; run it on an idle
machine (the load average is in the output).

Measured on 2026-12-06 at 16:05 UTC, 11 rounds, load 5.1 at start and 3.0 at the end on 2 vCPUs, ``--before``
6cd936f (docs/performance.md): ``list`` read directly 405 ms wall, 403 ms CPU (p50; min 365, 361) against 414 and
412, a median ratio of 0.99 (wall and CPU); ``status`` 1.03; ``floor`` 375 ms wall, 374 CPU (min 288, 287), so a
read is its floor plus ~30-75 ms; through a hostd of its own ~0.85 s wall.
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

import trio

from bench.common import ROOT, before_option, echo_copy, open_hostd, ready, scratch

#: hostctl with its reading commands going through a hostd of their own, as before hostd/cli/direct.py.
SPAWN_WAY = "import sys; from hostd.cli import hostctl; hostctl.READING = frozenset(); sys.exit(hostctl.main())"

VERBS = ("list", "status")

#: The ``floor`` way (see the module header): the libraries a direct read cannot do without, and one model built.
FLOOR = (
    "import trio, rich.console, rich.table, yaml, pydantic\n"
    "class Built(pydantic.BaseModel):\n    x: int\n"
    "Built(x=1)\n"
    "import hostd.control.models"
)


def _timed(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, float, str]:
    """Run ``argv`` in ``cwd`` (None: this one) to exit: (wall ms, CPU ms of it and its children, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv}: exit {done.returncode}: {done.stderr}")
    return wall, cpu, done.stdout


def _stats(samples: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(samples), 1), "min": round(min(samples), 1)}


async def _enabled_plugin(state: Path, parent: Path) -> None:
    """``state`` with the echo plugin installed, approved and enabled (then its hostd stopped)."""
    async with open_hostd(state) as hostd:
        await ready(hostd, echo_copy(parent))


def run(runs: int, before: Path | None = None) -> dict[str, Any]:
    """The measurement (see the module header); ``runs`` rounds after one warm-up round; ``before``: the
    checkout the ``before`` way runs from (None: no such way)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    # One environment for the hostd that makes the folder and for every way (the login shell's PATH that hostd
    # keeps is keyed by it: hostd/storage/facts.py): each way imports hostd from the folder it runs in (the
    # first entry of sys.path), none through PYTHONPATH.
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's hostctl runs from its bytecode cache
    os.environ.pop("PYTHONPATH", None)
    env = dict(os.environ)
    with scratch() as folder:
        state = folder / "state"
        trio.run(_enabled_plugin, state, folder)
        python = sys.executable
        ways: dict[str, list[str]] = {"direct": ["-m", "hostd.cli.hostctl"], "spawn": ["-c", SPAWN_WAY]}
        if before is not None:
            ways["before"] = ways["direct"]
        trees = {"before": before}
        wall: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        same_output = True
        for round_ in range(runs + 1):
            for verb in VERBS:
                outputs = []
                for way, program in ways.items():
                    argv = [python, *program, verb, "--state-dir", str(state)]
                    w, c, out = _timed(argv, env, trees.get(way) or ROOT)
                    outputs.append(out)
                    if round_:
                        wall.setdefault(f"{verb} {way}", []).append(w)
                        cpu.setdefault(f"{verb} {way}", []).append(c)
                same_output = same_output and len(set(outputs)) == 1
            imports = [("import hostd.cli.hostctl", [python, "-c", "import hostd.cli.hostctl"], ROOT)]
            if before is not None:  # the same import from TREE, right after: "import before"
                imports.append(("import before", imports[0][1], before))
            floor = ("floor", [python, "-c", FLOOR], ROOT)
            for name, argv, tree in (*imports, floor, ("python -c pass", [python, "-c", "pass"], ROOT)):
                w, c, _ = _timed(argv, env, tree)
                if round_:
                    wall.setdefault(name, []).append(w)
                    cpu.setdefault(name, []).append(c)
    return {
        "runs": runs,
        "load_at_start": load,
        "load_at_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "cores": os.cpu_count(),
        "wall_ms": {k: _stats(v) for k, v in wall.items()},
        "cpu_ms": {k: _stats(v) for k, v in cpu.items()},
        "direct_over_before": _ratios(wall, cpu) if before is not None else None,
        "same_stdout": same_output,
    }


def _ratios(wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per verb, the median over the rounds of ``direct`` / ``before`` of the same round (wall and CPU): the
    two ran one after the other, so a change of the machine's load between rounds cancels out."""
    return {
        verb: {
            kind: round(
                statistics.median(a / b for a, b in zip(m[f"{verb} direct"], m[f"{verb} before"], strict=True)), 3
            )
            for kind, m in (("wall", wall), ("cpu", cpu))
        }
        for verb in VERBS
    } | {
        "import": {
            kind: round(
                statistics.median(
                    a / b for a, b in zip(m["import hostd.cli.hostctl"], m["import before"], strict=True)
                ),
                3,
            )
            for kind, m in (("wall", wall), ("cpu", cpu))
        }
    }


def main() -> None:
    before, args = before_option(sys.argv[1:])
    runs = int(args[0]) if args else 7
    print(json.dumps(run(runs, before), indent=1))


if __name__ == "__main__":
    main()
