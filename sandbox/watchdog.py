"""Resource watchdog: the plugin tree's memory and CPU against host limits.

Theory of operation. rlimits fit a process tree badly (measured:
``RLIMIT_AS`` breaks Node's WebAssembly, ``RLIMIT_NPROC`` counts every
process of the user, ``RLIMIT_CPU`` is cumulative and ends healthy
long-lived servers), so limits are watched from outside instead.
:func:`watch` samples the whole tree every ``interval`` seconds with psutil
(in a worker thread, ~3 ms for a dozen processes) and returns a
:class:`LimitHit` as soon as a limit of the :class:`~sandbox.policy.IsolationPolicy`
is exceeded; the caller (hostd's supervisor) then stops the plugin and
reports the hit. It never stops anything itself.

- The tree: every descendant of the supervisor shim (which, as a child
  subreaper, also adopts double-forked and ``setsid`` members), or without
  the shim the plugin's pid and its descendants.
- ``rss``: the sum of the members' resident set sizes, against
  ``max_rss_bytes``, checked at every sample. Shared pages (a runtime's
  libraries, fork copy-on-write) count once per process, so the sum errs on
  the high side.
- ``cpu``: CPU seconds (user + system) the members used over the last
  ``cpu_window_seconds``, as a percentage of one CPU (200 = two cores busy),
  against ``max_cpu_percent``; judged only once a full window has been
  observed ("sustained"). Each process is tracked by (pid, start time), so
  pid reuse is not mistaken for usage, and a process's CPU time is counted
  from when the watchdog first saw it (a member that was born and died
  between two samples is missed).
"""

from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass

import psutil
import trio

from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess

__all__ = ["LimitHit", "TreeSample", "sample_tree", "watch"]


@dataclass(frozen=True)
class LimitHit:
    """A limit the plugin tree exceeded.

    ``limit``: ``"rss"`` (bytes) or ``"cpu"`` (percent of one CPU over the
    window). ``value``: what was measured. ``threshold``: the policy's
    limit. ``message``: one human-readable line naming both, e.g.
    ``"memory: the plugin's processes use 312.0 MB resident, over the limit of 100.0 MB"``.
    """

    limit: str
    value: float
    threshold: float
    message: str


@dataclass(frozen=True)
class TreeSample:
    """One sample of a plugin tree: ``processes`` counted, ``rss_bytes`` summed,
    ``cpu_seconds`` per member keyed by ``(pid, create_time)``."""

    processes: int
    rss_bytes: int
    cpu_seconds: dict[tuple[int, float], float]


def _members(process: SandboxedProcess) -> list[psutil.Process]:
    root_pid = process.shim_pid if process.shim_pid is not None else process.pid
    try:
        root = psutil.Process(root_pid)
        members = root.children(recursive=True)
    except psutil.Error:
        return []
    if process.shim_pid is None:
        members.insert(0, root)
    return members


def sample_tree(process: SandboxedProcess) -> TreeSample:
    """Sample the tree of ``process`` once (blocking; a few milliseconds)."""
    rss = 0
    count = 0
    cpu: dict[tuple[int, float], float] = {}
    for member in _members(process):
        with contextlib.suppress(psutil.Error):
            with member.oneshot():
                if member.status() == psutil.STATUS_ZOMBIE:
                    continue
                memory = member.memory_info().rss
                times = member.cpu_times()
                key = (member.pid, member.create_time())
            rss += memory
            cpu[key] = times.user + times.system
            count += 1
    return TreeSample(processes=count, rss_bytes=rss, cpu_seconds=cpu)


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


async def watch(process: SandboxedProcess, policy: IsolationPolicy, interval: float = 1.0) -> LimitHit:
    """Return the first :class:`LimitHit` of ``process``'s tree against ``policy``.

    Samples every ``interval`` seconds. With neither ``max_rss_bytes`` nor
    ``max_cpu_percent`` set it never returns (it sleeps until cancelled).
    Cancellable at any point; it signals nothing, the caller stops the
    plugin. A tree that has exited simply samples as empty.
    """
    if policy.max_rss_bytes is None and policy.max_cpu_percent is None:
        await trio.sleep_forever()
    window = policy.cpu_window_seconds
    last: dict[tuple[int, float], float] | None = None  # None until the first sample sets the baseline
    used: collections.deque[tuple[float, float]] = collections.deque()  # (time, CPU seconds in that interval)
    started = time.monotonic()
    while True:
        sample = await trio.to_thread.run_sync(sample_tree, process, abandon_on_cancel=True)
        now = time.monotonic()
        if policy.max_rss_bytes is not None and sample.rss_bytes > policy.max_rss_bytes:
            return LimitHit(
                limit="rss",
                value=float(sample.rss_bytes),
                threshold=float(policy.max_rss_bytes),
                message=(
                    f"memory: the plugin's {sample.processes} process(es) use {_mb(sample.rss_bytes)} resident, "
                    f"over the limit of {_mb(policy.max_rss_bytes)}"
                ),
            )
        if policy.max_cpu_percent is not None:
            delta = 0.0
            if last is not None:
                delta = sum(max(0.0, seconds - last.get(key, 0.0)) for key, seconds in sample.cpu_seconds.items())
            last = sample.cpu_seconds
            used.append((now, delta))
            while used and used[0][0] <= now - window:
                used.popleft()
            if now - started >= window:
                percent = 100.0 * sum(seconds for _, seconds in used) / window
                if percent > policy.max_cpu_percent:
                    return LimitHit(
                        limit="cpu",
                        value=percent,
                        threshold=policy.max_cpu_percent,
                        message=(
                            f"cpu: the plugin's processes used {percent:.0f}% of one CPU over the last "
                            f"{window:g} s, over the limit of {policy.max_cpu_percent:g}%"
                        ),
                    )
        await trio.sleep(interval)
