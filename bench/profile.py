"""Where hostd's time goes during tools/call: py-spy samples a real ``hostd serve``.

    .venv/bin/pip install py-spy            # not a dependency of hostd
    .venv/bin/python -m bench.profile       # sequential echo calls for 10 s
    .venv/bin/python -m bench.profile --concurrency 64 --seconds 10 --svg /tmp/hostd.svg

One hostd with a copy of the echo fixture; the parent makes ``tools/call``
``echo`` calls back to back (``--concurrency`` at once) while ``py-spy
record --gil`` samples the thread holding hostd's GIL (so waiting in
``epoll`` or a pipe write is not counted; a process that is runnable but not
on a CPU is not counted either). Prints hostd's CPU time per call, the busy
samples in buckets along the tools/call path, the share per function
(inclusive: the function or anything it called; self), and writes the
collapsed stacks (and an SVG flame graph with ``--svg`` when
``flamegraph.pl`` is installed).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil
import trio

from bench.common import echo_copy, end_leftovers, now_us, open_hostd, ready, scratch


def _frame_key(frame: str) -> str:
    """``func (path/to/file.py:123)`` -> ``func (file.py)`` with the package folder kept short."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    parts = Path(path).parts
    short = "/".join(parts[-2:]) if len(parts) >= 2 else path
    return f"{name} ({short})"


def summarise(collapsed: Path, top: int) -> tuple[int, list[tuple[str, int, int]]]:
    """Busy samples, and (function, inclusive samples, self samples) sorted by inclusive."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_frame_key(f) for f in stack.split(";")[1:]]  # the first item is the thread
        for key in set(frames):
            inclusive[key] += count
        if frames:
            own[frames[-1]] += count
    ranked = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    return total, [(key, value, own[key]) for key, value in ranked]


#: Buckets for hostd's busy samples on the tools/call path, tried in order (a sample goes to the first match).
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hostd: inputSchema check (validate_arguments, jsonschema)", ("validate_arguments (hostd/mcp/tools.py",)),
    ("mcp SDK: outputSchema check (validate_tool_result, jsonschema)", ("ClientSession.validate_tool_result",)),
    ("mcp SDK: send_request (models, dispatcher, otel span, clocks)", ("ClientSession.send_request",)),
    ("mcp SDK: dispatcher receive loop", ("JSONRPCDispatcher.",)),
    ("hostd: supervisor.call (result re-dump, size check)", ("PluginSupervisor.call",)),
    ("hostd: host.tools_call (params model, registry)", ("Host.tools_call",)),
    ("hostd: control channel (read, decode, task per request, queue, write)", ("ControlServer.",)),
    ("hostd: link stdout pump (decode, envelope models)", ("StdioLink._pump_stdout",)),
    ("hostd: link stdin pump (model_dump, encode, write)", ("StdioLink._pump_stdin", "StdioLink._write")),
    ("trio: scheduler and I/O with no task frame", ("",)),
)


def categorise(collapsed: Path) -> tuple[int, list[tuple[str, int]]]:
    """Busy samples, and how many fall in each of :data:`CATEGORIES`."""
    counts = dict.fromkeys((name for name, _ in CATEGORIES), 0)
    total = 0
    for line in collapsed.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        total += int(count_text)
        for name, needles in CATEGORIES:
            if any(needle in stack for needle in needles):
                counts[name] += int(count_text)
                break
    return total, list(counts.items())


async def drive(seconds: float, concurrency: int, output: Path, svg: Path | None, rate: int) -> dict[str, Any]:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    with scratch() as folder:
        plugin = echo_copy(folder)
        async with open_hostd(folder / "state") as hostd:
            await ready(hostd, plugin)
            for _ in range(200):  # warm-up
                await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "hi"}})
            pid = hostd.process.pid
            cpu = psutil.Process(pid)
            argv = [py_spy, "record", "--pid", str(pid), "--rate", str(rate), "--gil", "--threads"]
            argv += ["--duration", str(int(seconds)), "--format", "raw", "--output", str(output)]
            spy = await trio.lowlevel.open_process(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            calls = 0
            try:
                await trio.sleep(1.0)  # py-spy attaches
                before = cpu.cpu_times()
                start = now_us()
                counter = itertools.count()

                async def worker() -> None:
                    nonlocal calls
                    while now_us() - start < (seconds - 1.5) * 1e6 and next(counter) < 1_000_000:
                        await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "hi"}})
                        calls += 1

                async with trio.open_nursery() as nursery:
                    for _ in range(concurrency):
                        nursery.start_soon(worker)
                elapsed = (now_us() - start) / 1e6
                after = cpu.cpu_times()
                with trio.fail_after(seconds + 30):
                    await spy.wait()
            finally:
                with trio.CancelScope(shield=True):
                    if spy.returncode is None:
                        spy.kill()
                    await spy.wait()
    cpu_s = (after.user - before.user) + (after.system - before.system)
    if svg is not None:
        _flamegraph(output, svg)
    return {"calls": calls, "seconds": elapsed, "cpu_us_per_call": cpu_s / calls * 1e6, "calls_per_s": calls / elapsed}


def _flamegraph(collapsed: Path, svg: Path) -> None:
    """An SVG from the collapsed stacks, if the ``flamegraph.pl`` script is around (optional)."""
    script = shutil.which("flamegraph.pl")
    if script is None:
        print("flamegraph.pl not found: no SVG (the collapsed stacks can be loaded in speedscope)")
        return
    with svg.open("wb") as out:
        subprocess.run([script, str(collapsed)], stdout=out, check=False, timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument(
        "--output", type=Path, default=Path(tempfile.gettempdir()) / "hostd-profile-collapsed.txt", help="stacks file"
    )
    parser.add_argument("--svg", type=Path)
    args = parser.parse_args(argv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    try:
        stats = trio.run(drive, args.seconds, args.concurrency, args.output, args.svg, args.rate)
    finally:
        end_leftovers()
    total, ranked = summarise(args.output, args.top)
    _, buckets = categorise(args.output)
    print(
        f"{stats['calls']} calls in {stats['seconds']:.1f} s ({stats['calls_per_s']:.0f}/s, "
        f"{args.concurrency} in flight); hostd CPU {stats['cpu_us_per_call']:.0f} µs per call; "
        f"{total} busy samples"
    )
    print(f"\n{'share':>7}  where hostd's busy samples go")
    for name, count in buckets:
        print(f"{100 * count / max(total, 1):6.1f}%  {name}")
    print(f"\n{'incl %':>7} {'self %':>7}  function")
    for key, incl, own in ranked:
        print(f"{100 * incl / total:7.1f} {100 * own / total:7.1f}  {key}")
    print(f"\ncollapsed stacks: {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
