"""Memory under a stream of malformed requests: does ``hostd serve``'s RSS level off? (issue 31)

    .venv/bin/python -m bench.bad_requests [ROUNDS] [PER_ROUND]

One ``hostd serve`` on a scratch state folder, no plugin. Each round writes ``PER_ROUND`` malformed lines of
every kind below, in turn, then a ``ping``, and reads
the round's ``PER_ROUND + 1`` answers (every line is answered once, in any order: requests run concurrently).
After each round it reads hostd's RSS and USS with psutil and prints one row. Kinds (each answered with its
named error; ``PARSE_ERROR``, ``INVALID_REQUEST``, ``METHOD_NOT_FOUND``, ``INVALID_PARAMS``, ``TOOL_NOT_FOUND``):
text that is not JSON, JSON nested past the depth bound, a lone surrogate, a JSON-RPC 1.0 envelope, an unknown
method, wrong parameter types, an unknown tool, a 60 KiB id, install of a missing folder, import of text that
is not a config, the status of an unknown plugin, an unknown resource, and the cancellation of a request that
never was.

The verdict compares the second half's growth with the first's: flat means the last half grew less than
1 MiB per 10,000 requests. Numbers vary by machine; nothing is enforced.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import orjson
import psutil

MIB = 1024 * 1024


def _kinds() -> list[Callable[[int], bytes]]:
    """One maker per kind of malformed line; each takes a fresh request id."""

    def envelope(rid: int, method: str, params: object = None) -> bytes:
        message: dict[str, object] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        return orjson.dumps(message)

    deep = b"[" * 3000 + b"]" * 3000
    return [
        lambda rid: b'{"jsonrpc": "2.0", "id": ' + str(rid).encode() + b", not json",
        lambda rid: deep,
        lambda rid: b'{"jsonrpc":"2.0","id":' + str(rid).encode() + b',"method":"\\ud800"}',
        lambda rid: orjson.dumps({"jsonrpc": "1.0", "id": rid, "method": "ping"}),
        lambda rid: envelope(rid, f"nope/{rid}"),
        lambda rid: envelope(rid, "plugins/enable", {"id": rid}),
        lambda rid: envelope(rid, "tools/call", {"name": f"x{rid}/y", "arguments": {"a": rid}}),
        lambda rid: orjson.dumps({"jsonrpc": "2.0", "id": "i" * 60_000 + str(rid), "method": "ping"}),
        lambda rid: envelope(rid, "plugins/install", {"path": f"/nonexistent/{rid}"}),
        lambda rid: envelope(rid, "plugins/import", {"config": "{" + "x" * (rid % 97)}),
        lambda rid: envelope(rid, "plugins/status", {"id": f"p{rid}"}),
        lambda rid: envelope(rid, "resources/read", {"uri": f"file:///r/{rid}"}),
        # A cancellation of a request that never was (a notification: no answer), then a ping to keep one
        # answer per line.
        lambda rid: (
            orjson.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid + 10**9}})
            + b"\n"
            + envelope(rid, "ping")
        ),
    ]


def _lines(proc: subprocess.Popen[bytes]) -> Iterator[bytes]:
    assert proc.stdout is not None
    yield from proc.stdout


def _write_round(pipe: IO[bytes], kinds: list[Callable[[int], bytes]], first_id: int, count: int, marker: int) -> None:
    """Write ``count`` malformed lines (ids from ``first_id``), then the marker ``ping``."""
    for rid in range(first_id, first_id + count):
        pipe.write(kinds[rid % len(kinds)](rid) + b"\n")
    pipe.write(orjson.dumps({"jsonrpc": "2.0", "id": marker, "method": "ping"}) + b"\n")
    pipe.flush()


def main(argv: list[str]) -> int:
    """Run the bench; ``argv`` is ``[ROUNDS] [PER_ROUND]`` (defaults 8 and 10,000 lines a round)."""
    rounds = int(argv[0]) if argv else 8
    per_round = int(argv[1]) if len(argv) > 1 else 10_000
    kinds = _kinds()
    with tempfile.TemporaryDirectory(prefix="hostd-bench-bad-") as scratch:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hostd", "serve", "--state-dir", str(Path(scratch) / "state")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None
        answers = _lines(proc)
        host = psutil.Process(proc.pid)
        try:
            hello = {"clientInfo": {"name": "bench", "version": "1"}, "protocolVersion": "0"}
            proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}))
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            next(answers)
            rows: list[tuple[int, float, float]] = []
            print(f"{'requests':>9} {'RSS MiB':>8} {'USS MiB':>8}")
            rid = 1
            for _ in range(rounds):
                first_id = rid
                marker = -(rid + per_round)
                # A writer thread: hostd answers while it reads, and a parent that wrote everything before
                # reading would fill hostd's stdout and stop it reading (its backpressure, by design).
                writer = threading.Thread(target=_write_round, args=(proc.stdin, kinds, first_id, per_round, marker))
                writer.start()
                # Every line is answered once; answers come in any order (requests run concurrently).
                ids = [orjson.loads(next(answers)).get("id") for _ in range(per_round + 1)]
                writer.join()
                rid += per_round
                if marker not in ids:
                    print(f"the ping {marker} was not among the round's {len(ids)} answers", file=sys.stderr)
                    return 1
                info = host.memory_full_info()
                rows.append((rid - 1, info.rss / MIB, info.uss / MIB))
                print(f"{rid - 1:>9} {info.rss / MIB:>8.1f} {info.uss / MIB:>8.1f}", flush=True)
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)
    half = len(rows) // 2
    first = rows[half][1] - rows[0][1]
    last = rows[-1][1] - rows[half][1]
    per_10k = last / ((rows[-1][0] - rows[half][0]) / 10_000) if rows[-1][0] > rows[half][0] else 0.0
    verdict = "flat" if per_10k < 1.0 else "growing"
    print(f"first half +{first:.1f} MiB, second half +{last:.1f} MiB ({per_10k:.2f} MiB per 10k requests): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
