"""Stop cost per ending step, and the leftover sweep: medians in ms, as JSON.

Usage: python -m bench.stop_cost [rounds] [grace]. The timings the tests no longer assert (they check
which step ended a plugin, not how long it took): each case spawns a fixture of fixtures/sandbox under
the default layers (the shim), waits for its ``ready`` line, then times ``stop(grace)``:

- ``stdin-eof``: echo.py exits at stdin EOF (expected: a few ms);
- ``slow-exit``: slow_exit.py takes 1.5 s after EOF, inside a grace of at least 2 s (expected ~1.5 s);
- ``sigterm``: wrapper.py ignores EOF and exits on SIGTERM (expected: about one grace);
- ``sigkill``: stubborn.py ignores both (expected: about two graces);
- ``sweep``: ``sweep_leftovers`` of a stubborn process tree (tree.py) by its token.

The step each stop reports is recorded too, so a run shows when a case did not end the way it should.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import trio

from sandbox.environment import EnvPolicy
from sandbox.launch import DEFAULT_ISOLATION, Launch, resolve_launch
from sandbox.process import SandboxedProcess, spawn
from sandbox.sweep import sweep_leftovers

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox"
HOST_ENV = {"PATH": f"{os.path.dirname(os.path.realpath(sys.executable))}:/usr/bin:/bin", "HOME": "/tmp"}

#: Case name -> the fixture's arguments (script first). slow-exit's marker goes to a scratch file.
CASES: dict[str, list[str]] = {
    "stdin-eof": ["echo.py"],
    "slow-exit": ["slow_exit.py", "/tmp/hostd-bench-slow-exit.marker"],
    "sigterm": ["wrapper.py", "stubborn.py", "--ignore-eof"],
    "sigkill": ["stubborn.py"],
}


def _launch(args: list[str]) -> Launch:
    launch = resolve_launch("python3", args, HERE, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir="/tmp")
    return dataclasses.replace(launch, isolation=DEFAULT_ISOLATION)


async def _first_line(proc: SandboxedProcess) -> bytes:
    buf = b""
    while b"\n" not in buf:
        chunk = await proc.stdout.receive_some(4096)
        if not chunk:
            break
        buf += chunk
    return buf


async def _close(proc: SandboxedProcess) -> None:
    for stream in (proc.stdout, proc.stderr):
        await stream.aclose()


async def _stop_once(args: list[str], grace: float) -> tuple[float, str]:
    proc = await spawn(_launch(args))
    if args[0] == "echo.py":  # it prints nothing until it reads a line
        await proc.stdin.send_all(b"ping\n")
    await _first_line(proc)
    report = await proc.stop(grace=grace)
    await _close(proc)
    return report.seconds, report.step


async def _sweep_once() -> float:
    proc = await spawn(_launch(["tree.py", "stubborn"]))
    await _first_line(proc)
    started = time.perf_counter()
    sweep_leftovers(proc.token)
    seconds = time.perf_counter() - started
    await proc.stop(grace=0.1)
    await _close(proc)
    return seconds


async def measure(rounds: int, grace: float = 2.0) -> dict[str, dict[str, object]]:
    """Median stop time (ms) and the steps seen, per case; the sweep's median (ms).

    ``grace`` is the grace of each stop step (seconds; hostd's default is 2). Raises what
    :func:`sandbox.process.spawn` raises (``LaunchError``) when the shim is not available.
    """
    result: dict[str, dict[str, object]] = {}
    for name, args in CASES.items():
        samples = [await _stop_once(args, grace) for _ in range(rounds)]
        result[name] = {
            "rounds": rounds,
            "grace_s": grace,
            "stop_ms": round(statistics.median(seconds for seconds, _ in samples) * 1000, 1),
            "steps": sorted({step for _, step in samples}),
        }
    sweeps = [await _sweep_once() for _ in range(rounds)]
    result["sweep"] = {"rounds": rounds, "sweep_ms": round(statistics.median(sweeps) * 1000, 1)}
    return result


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    grace_s = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    print(json.dumps(trio.run(measure, count, grace_s), indent=1))
