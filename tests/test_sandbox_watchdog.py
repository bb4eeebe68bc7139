"""The resource watchdog against real plugin trees: memory and sustained CPU."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import psutil
import trio

from sandbox.environment import EnvPolicy
from sandbox.launch import Launch, resolve_launch
from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess, spawn
from sandbox.watchdog import LimitHit, sample_tree, watch
from tests.plugin_pids import host_pids
from tests.waiting import GENEROUS

#: A private TMPDIR for launches with a policy (a shared /tmp is refused as a plugin TMPDIR).
PRIVATE_TMP = os.path.realpath(tempfile.mkdtemp(prefix="hostd-tests-"))

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox"
PYTHON_DIR = os.path.dirname(os.path.realpath(sys.executable))
HOST_ENV = {"PATH": f"{PYTHON_DIR}:/usr/bin:/bin", "HOME": "/root"}
MB = 1_000_000


def launch_of(*args: str, policy: IsolationPolicy | None = None) -> Launch:
    return resolve_launch(
        "python3", list(args), FIXTURES, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir=PRIVATE_TMP, isolation_policy=policy
    )


async def first_line(proc: SandboxedProcess) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await proc.stdout.receive_some(4096)
        assert chunk, "the plugin closed stdout"
        line += chunk
    return line


async def test_memory_hog_is_reported_with_the_rss_limit() -> None:
    policy = IsolationPolicy(max_rss_bytes=100 * MB)
    with trio.fail_after(60):
        proc = await spawn(launch_of("hog.py", "300", policy=policy))
        try:
            line = json.loads(await first_line(proc))
            pids = host_pids(line["pidns"], line["pids"])
            # The hog is a setsid child, outside the plugin's process group: the tree still counts it.
            assert os.getsid(pids[1]) == pids[1]
            hit = await watch(proc, policy, interval=0.1)
        finally:
            report = await proc.stop(grace=GENEROUS)
    assert isinstance(hit, LimitHit)
    assert hit.limit == "rss"
    assert hit.threshold == 100 * MB
    assert hit.value > 250 * MB
    assert "100.0 MB" in hit.message and "memory" in hit.message
    assert report.step == "sigterm"  # stdin EOF is ignored; SIGTERM ends it (and the shim the rest)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in pids)


async def test_sustained_cpu_is_reported_and_an_idle_plugin_is_not() -> None:
    # 20 % of one CPU: a spinner gets that even with ten runnable tasks on two cores (the suite runs
    # four workers on two), while an idle plugin's start-up (~50 ms of CPU) stays far below it in a window.
    policy = IsolationPolicy(max_cpu_percent=20.0, cpu_window_seconds=1.0)
    with trio.fail_after(30):
        idle = await spawn(launch_of("echo.py", policy=policy))
        try:
            with trio.move_on_after(2.0) as quiet:
                await watch(idle, policy, interval=0.1)
            assert quiet.cancelled_caught, "an idle plugin was reported"
        finally:
            await idle.stop()

        busy = await spawn(launch_of("spin.py", policy=policy))
        try:
            assert await first_line(busy) == b"ready\n"
            started = trio.current_time()
            hit = await watch(busy, policy, interval=0.1)
            elapsed = trio.current_time() - started
        finally:
            await busy.stop(grace=0.1)
    assert hit.limit == "cpu"
    assert hit.value > 20.0 and hit.threshold == 20.0
    assert elapsed >= 1.0  # judged only over a full window (a lower bound; the cost is bench/'s)
    assert "1 s" in hit.message


async def test_no_limit_means_watch_never_returns() -> None:
    with trio.fail_after(10):
        proc = await spawn(launch_of("echo.py"))
        try:
            with trio.move_on_after(0.5) as scope:
                await watch(proc, IsolationPolicy(), interval=0.05)
            assert scope.cancelled_caught
        finally:
            await proc.stop()


async def test_sample_covers_the_whole_tree() -> None:
    with trio.fail_after(10):
        proc = await spawn(launch_of("tree.py", "stubborn"))
        try:
            pids = json.loads(await first_line(proc))["pids"]
            sample = await trio.to_thread.run_sync(sample_tree, proc)
            # tree.py's double-forked daemon was re-parented to the shim: still sampled.
            assert sample.processes >= len(pids)
            assert {pid for pid, _ in sample.cpu_seconds} >= set(pids)
            assert sample.rss_bytes > 0
        finally:
            await proc.stop(grace=0.1)
