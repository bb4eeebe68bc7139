"""Start-up time of hostd: the sidecar build against ``python -m hostd``.

Usage: ``python packaging/measure_startup.py [--runs N] [SIDECAR]`` (default: the build in ``dist/``).

For each command, ``runs`` times: spawn ``serve --state-dir <fresh>``, write ``initialize`` and
``plugins/list`` at once, and time (monotonic, from just before the spawn) the ``initialize``
answer (the readiness signal) and the ``plugins/list`` answer (the host loaded: pydantic, the MCP
SDK...); then ``shutdown``/``exit``. Prints a Markdown table of medians and ranges, milliseconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_sidecar import REPO, target_triple


def once(command: list[str]) -> tuple[float, float]:
    """Seconds to the ``initialize`` answer and to the ``plugins/list`` answer."""
    with tempfile.TemporaryDirectory() as state:
        started = time.monotonic()
        process = subprocess.Popen(
            [*command, "serve", "--state-dir", state, "--no-login-path"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert process.stdin is not None and process.stdout is not None
        requests = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"clientInfo": {"name": "measure"}}},
            {"jsonrpc": "2.0", "id": 2, "method": "plugins/list"},
        ]
        process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        process.stdin.flush()
        answered: dict[int, float] = {}
        while len(answered) < 2:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"{command[0]} exited early")
            message = json.loads(line)
            if message.get("id") in (1, 2):
                answered[message["id"]] = time.monotonic() - started
        process.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"shutdown"}\n{"jsonrpc":"2.0","method":"exit"}\n')
        process.stdin.close()
        process.wait(timeout=30)
        return answered[1], answered[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure_startup.py", description=__doc__.splitlines()[0])
    name = f"hostd-{target_triple()}"
    parser.add_argument("sidecar", nargs="?", type=Path, default=REPO / "dist" / name / name)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    commands = {
        "sidecar (`dist/…/" + name + "`)": [str(args.sidecar)],
        "`python -m hostd`": [sys.executable, "-m", "hostd"],
    }
    print("| command | `initialize` answered, ms (median, min-max) | host loaded (`plugins/list`), ms |")
    print("|---|---|---|")
    for label, command in commands.items():
        once(command)  # warm the page cache
        runs = [once(command) for _ in range(args.runs)]
        cells = []
        for values in ([r[0] * 1000 for r in runs], [r[1] * 1000 for r in runs]):
            cells.append(f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})")
        print(f"| {label} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
