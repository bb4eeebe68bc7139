"""Resource watchdog: the plugin tree's memory and CPU, and its folders' disk use, against host limits.

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
- ``rss`` where the tree has a cgroup (:mod:`sandbox.cgroups`: the kernel
  bounds its memory, shared memory, ``memfd`` and page cache included): the
  kernel's counters, read every ``interval``; an OOM kill in the cgroup is a
  hit (value: the cgroup's peak usage, threshold: its limit), and so is a
  ``fork`` the ``pids`` bound refused (``pids``: value the tasks counted,
  threshold ``pids.max``). Nothing is summed.
- ``rss`` without a cgroup (the fallback: ``HOSTD_CGROUPS=off``, or an
  unprivileged user without a delegated cgroup): the sum of the members'
  resident set sizes plus the memory files the tree holds that are in no
  RSS: ``memfd`` and shared-memory files (``/dev/shm``, SysV segments)
  open in any member's ``/proc/<pid>/fd`` or mapped in its
  ``/proc/<pid>/maps``, each counted once across the tree by device and
  inode (:func:`hidden_memory`), against ``max_rss_bytes``, checked at every
  sample. Shared pages (a runtime's libraries, fork copy-on-write) count
  once per process, so the sum errs on the high side. A file only mapped
  is measured through ``/proc/<pid>/map_files`` where this user may
  (root), else by the extent its mappings reach.
- ``cpu``: CPU seconds (user + system) the members used over the last
  ``cpu_window_seconds``, as a percentage of one CPU (200 = two cores busy),
  against ``max_cpu_percent``; judged only once a full window has been
  observed ("sustained"). Each process is tracked by (pid, start time), so
  pid reuse is not mistaken for usage, and a process's CPU time is counted
  from when the watchdog first saw it (a member that was born and died
  between two samples is missed).
- ``disk``: the bytes allocated (``st_blocks * 512``, so a sparse file
  counts what it really occupies and cannot hide written data behind a small
  ``st_size``) beneath the plugin's data folder and its ``TMPDIR`` together,
  against ``max_disk_bytes``, every ``disk_interval_seconds`` (slower than
  the tree: a walk costs more than a psutil sample). The walk
  (:class:`DiskWalk`) uses ``os.scandir`` without following symlinks (a
  link to a big file elsewhere counts as the link), counts a file with
  several hard links once, and looks at no more than
  :data:`DISK_ENTRIES_PER_SAMPLE` entries per sample, in a worker thread; a
  bigger tree is measured across several samples, and a walk that already
  passed the limit part-way reports at once. Inodes are not bounded (empty
  files allocate nothing). Files the tree holds after deleting them count
  too, whether it holds them open or only mapped (:func:`deleted_open_bytes`).
  No kernel mechanism bounds the folders here (no project quota or
  size-limited mount is made): this walk is the disk bound, under a cgroup
  too (which charges the page cache of what is written, not the blocks).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from sandbox.cgroups import Figures, TreeCgroup
from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess

if TYPE_CHECKING:
    import psutil

__all__ = [
    "DEFAULT_MAX_DISK_BYTES",
    "DISK_ENTRIES_PER_SAMPLE",
    "DiskWalk",
    "LimitHit",
    "TreeSample",
    "cgroup_hit",
    "hidden_memory",
    "sample_tree",
    "watch",
    "watch_cgroup",
    "watch_disk",
]

#: hostd's default bound of one plugin's data folder and ``TMPDIR`` together
#: (``hostd serve --max-disk-mb``, default 1024; per plugin ``plugins/grant``
#: ``limits.maxDiskMb``): 1 GiB.
DEFAULT_MAX_DISK_BYTES = 1024 * 1024 * 1024
#: Directory entries one disk sample looks at, at most (a few ms each thousand).
DISK_ENTRIES_PER_SAMPLE = 20_000


@dataclass(frozen=True)
class LimitHit:
    """A limit the plugin tree exceeded.

    ``limit``: ``"rss"`` (bytes), ``"cpu"`` (percent of one CPU over the
    window), ``"pids"`` (tasks, where a cgroup bounds them) or ``"disk"`` (bytes allocated beneath the data folder and
    ``TMPDIR``). ``value``: what was measured. ``threshold``: the policy's
    limit. ``message``: one human-readable line naming both, e.g.
    ``"memory: the plugin's processes use 312.0 MB resident, over the limit of 100.0 MB"``.
    """

    limit: str
    value: float
    threshold: float
    message: str


@dataclass(frozen=True)
class TreeSample:
    """One sample of a plugin tree: ``processes`` counted, ``rss_bytes`` summed (``hidden_bytes`` of it:
    memory files in no RSS, :func:`hidden_memory`), ``cpu_seconds`` per member keyed by ``(pid, create_time)``."""

    processes: int
    rss_bytes: int
    cpu_seconds: dict[tuple[int, float], float]
    hidden_bytes: int = 0


def _members(process: SandboxedProcess) -> list[psutil.Process]:
    import psutil  # noqa: PLC0415 (~20 ms of import: a sample only, not hostctl's reading commands: issue 28)

    root_pid = process.shim_pid if process.shim_pid is not None else process.pid
    try:
        root = psutil.Process(root_pid)
        members = root.children(recursive=True)
    except psutil.Error:
        return []
    if process.shim_pid is None:
        members.insert(0, root)
    return members


#: Where a memory file's name starts in ``/proc/<pid>/fd`` and ``/proc/<pid>/maps``: ``memfd_create``
#: files, POSIX shared memory (``shm_open``), SysV segments (``shmget``). All are shmem: in no RSS unless mapped
#: and touched, freed only with their last reference.
_MEMORY_FILES = ("/memfd:", "/dev/shm/", "/SYSV")


def _mapped_files(pid: int) -> Iterator[tuple[str, tuple[int, int], str, int]]:
    """``(path, (st_dev, st_ino), map_files entry, extent)`` of each file mapping of ``pid``.

    ``extent``: the file offset the mapping reaches (offset + length), a lower bound of the file's size.
    """
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
    except OSError:
        return
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[4] == "0":
            continue
        span, offset, device, inode, path = fields[0], fields[2], fields[3], fields[4], fields[5].rstrip("\n")
        try:
            start, end = (int(part, 16) for part in span.split("-"))
            major, minor = (int(part, 16) for part in device.split(":"))
            key = (os.makedev(major, minor), int(inode))
            extent = int(offset, 16) + end - start
        except ValueError:
            continue
        yield path, key, f"/proc/{pid}/map_files/{span}", extent


def _held_files(pids: Sequence[int], wanted: Callable[[str, int], bool]) -> int:
    """Bytes allocated to files ``wanted(path, st_dev)`` that the members ``pids`` hold open or mapped, each once.

    ``path``: the name ``/proc`` gives the file (``" (deleted)"`` appended once unlinked). An open
    descriptor is measured by ``stat`` (``st_blocks * 512``); a file only mapped through
    ``/proc/<pid>/map_files`` (root), else by the furthest extent its mappings reach.
    """
    sizes: dict[tuple[int, int], int] = {}
    extents: dict[tuple[int, int], int] = {}
    for pid in pids:
        folder = f"/proc/{pid}/fd"
        with contextlib.suppress(OSError):
            for name in os.listdir(folder):
                with contextlib.suppress(OSError):
                    path = os.readlink(f"{folder}/{name}")
                    if not path.startswith("/"):
                        continue  # pipe:, socket:, anon_inode:
                    st = os.stat(f"{folder}/{name}")
                    if stat.S_ISREG(st.st_mode) and wanted(path, st.st_dev):
                        sizes[(st.st_dev, st.st_ino)] = st.st_blocks * 512
        for path, key, entry, extent in _mapped_files(pid):
            if key in sizes or not wanted(path, key[0]):
                continue
            try:
                st = os.stat(entry)
            except OSError:
                extents[key] = max(extents.get(key, 0), extent)
            else:
                sizes[key] = st.st_blocks * 512
    return sum(sizes.values()) + sum(size for key, size in extents.items() if key not in sizes)


def _tmpfs_devices() -> set[int]:
    """``st_dev`` of every tmpfs mounted in our view (``/proc/self/mountinfo``): files there are memory."""
    devices: set[int] = set()
    with contextlib.suppress(OSError), open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields = left.split()
            if right.split()[:1] == ["tmpfs"] and len(fields) > 2 and ":" in fields[2]:
                with contextlib.suppress(ValueError):
                    major, minor = (int(part) for part in fields[2].split(":"))
                    devices.add(os.makedev(major, minor))
    return devices


def hidden_memory(pids: Sequence[int]) -> int:
    """Bytes of memory files the processes ``pids`` hold (open or mapped), each file once across them:
    ``memfd``, ``/dev/shm`` and SysV shared-memory files, and deleted files on any tmpfs (no folder walk
    sees them); memory in no process's RSS (a plugin held 600 MiB in a ``memfd`` past a 100 MiB bound).
    Blocking; processes that vanish are skipped."""
    tmpfs = _tmpfs_devices()
    return _held_files(
        pids,
        lambda path, dev: path.startswith(_MEMORY_FILES) or (path.endswith(" (deleted)") and dev in tmpfs),
    )


def sample_tree(process: SandboxedProcess, *, hidden: bool = True) -> TreeSample:
    """Sample the tree of ``process`` once (blocking; a few milliseconds).

    With ``hidden``, ``rss_bytes`` includes the memory files the tree holds (:func:`hidden_memory`).
    """
    import psutil  # noqa: PLC0415 (as in _members)

    rss = 0
    count = 0
    cpu: dict[tuple[int, float], float] = {}
    pids: list[int] = []
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
            pids.append(member.pid)
    extra = hidden_memory(pids) if hidden else 0
    return TreeSample(processes=count, rss_bytes=rss + extra, cpu_seconds=cpu, hidden_bytes=extra)


def _mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


async def watch(
    process: SandboxedProcess,
    policy: IsolationPolicy,
    interval: float = 1.0,
    *,
    disk_paths: Sequence[str] = (),
) -> LimitHit:
    """Return the first :class:`LimitHit` of ``process``'s tree (and folders) against ``policy``.

    Samples the tree every ``interval`` seconds (``max_rss_bytes``,
    ``max_cpu_percent``) and, when ``policy.max_disk_bytes`` is set, the
    folders ``disk_paths`` (the plugin's data folder and ``TMPDIR``) every
    ``policy.disk_interval_seconds`` (:func:`watch_disk`). With no limit set
    it never returns (it sleeps until cancelled). Where the tree has a cgroup
    (:attr:`SandboxedProcess.cgroup`) its memory and process bounds are the
    kernel's: :func:`watch_cgroup` reports their events (whatever the policy
    says) and the RSS sum is not taken. Cancellable at any point;
    it signals nothing, the caller stops the plugin. A tree that has exited
    simply samples as empty; missing folders count 0 bytes.
    """
    cgroup = process.cgroup
    tree = (policy.max_rss_bytes is not None and cgroup is None) or policy.max_cpu_percent is not None
    disk = policy.max_disk_bytes is not None and bool(disk_paths)
    if not tree and not disk and cgroup is None:
        await trio.sleep_forever()
    hits: list[LimitHit] = []
    async with trio.open_nursery() as nursery:

        async def first(hit: LimitHit) -> None:
            hits.append(hit)
            nursery.cancel_scope.cancel()

        async def tree_watch() -> None:
            await first(await _watch_tree(process, policy, interval))

        async def disk_watch() -> None:
            assert policy.max_disk_bytes is not None
            await first(
                await watch_disk(disk_paths, policy.max_disk_bytes, policy.disk_interval_seconds, process=process)
            )

        async def kernel_watch() -> None:
            assert cgroup is not None
            await first(await watch_cgroup(cgroup, interval))

        if tree:
            nursery.start_soon(tree_watch)
        if cgroup is not None:
            nursery.start_soon(kernel_watch)
        if disk:
            nursery.start_soon(disk_watch)
    return hits[0]


class DiskWalk:
    """One measurement of the bytes allocated beneath ``roots``, done in bounded steps.

    ``roots``: absolute folder paths (a missing one counts 0). Every entry
    beneath them (files, folders, symlinks themselves; never what a symlink
    points to) counts ``st_blocks * 512`` bytes; a file with several hard
    links counts once. The roots themselves count too. Not thread-safe: one
    caller at a time (``watch_disk`` runs each step in a worker thread).
    Entries that vanish or cannot be read during the walk are skipped. A
    root inside another root (a ``TMPDIR`` in the data folder) is walked once.
    """

    def __init__(self, roots: Sequence[str]) -> None:
        self.allocated = 0
        self.entries = 0
        self.done = False
        self._roots = _outermost(roots)
        self._folders: list[str] = []
        self._listing: Iterator[os.DirEntry[str]] | None = None
        self._linked: set[tuple[int, int]] = set()

    def _count(self, st: os.stat_result) -> None:
        if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
            key = (st.st_dev, st.st_ino)
            if key in self._linked:
                return
            self._linked.add(key)
        self.allocated += st.st_blocks * 512

    def step(self, budget: int = DISK_ENTRIES_PER_SAMPLE) -> bool:
        """Look at up to ``budget`` more entries; True once the whole walk is done.

        ``allocated`` then holds the total in bytes (before: what was counted
        so far, a lower bound). Blocking (file system calls).
        """
        while budget > 0 and not self.done:
            if self._listing is None:
                if self._roots:
                    root = self._roots.pop()
                    budget -= 1
                    try:
                        st = os.lstat(root)
                    except OSError:
                        continue
                    self._count(st)
                    if stat.S_ISDIR(st.st_mode):
                        self._folders.append(root)
                    continue
                if not self._folders:
                    self.done = True
                    break
                folder = self._folders.pop()
                try:
                    self._listing = os.scandir(folder)
                except PermissionError:
                    # A folder the plugin made unreadable (chmod 000) must not hide what it holds.
                    if not _restore_owner_access(folder):
                        continue
                    try:
                        self._listing = os.scandir(folder)
                    except OSError:
                        continue
                except OSError:
                    continue
            try:
                entry = next(self._listing, None)
            except OSError:
                entry = None
            if entry is None:
                with contextlib.suppress(OSError):
                    self._listing.close()  # type: ignore[attr-defined]
                self._listing = None
                continue
            budget -= 1
            self.entries += 1
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            self._count(st)
            if stat.S_ISDIR(st.st_mode):
                self._folders.append(entry.path)
        return self.done


def _lstat_or_none(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _restore_owner_access(folder: str) -> bool:
    """Give the owner read, write and search on ``folder`` again, never through a symlink; True if done.

    Only a real folder owned by this user (checked on an ``O_PATH|O_NOFOLLOW``
    descriptor, which cannot be swapped afterwards); the change goes through
    ``/proc/self/fd``, since ``fchmod`` refuses ``O_PATH`` descriptors.
    """
    try:
        fd = os.open(folder, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(st.st_mode) | 0o700)
    except OSError:
        return False
    else:
        return True
    finally:
        os.close(fd)


def deleted_open_bytes(process: SandboxedProcess, devices: set[int]) -> int:
    """Bytes allocated to files the tree of ``process`` holds after deleting them, on ``devices``.

    An unlinked file no folder walk can see still holds its blocks until the
    last descriptor closes or the last mapping goes: a plugin wrote 300 MB
    that way past a 50 MB bound. Open descriptors and memory mappings both
    count (:func:`_held_files`); each such file counts once (by device and
    inode); only files on the filesystems of the plugin's folders
    (``devices``, ``st_dev`` values). Blocking; processes or descriptors that
    vanish are skipped.
    """
    pids = [member.pid for member in _members(process)]
    return _held_files(pids, lambda path, dev: path.endswith(" (deleted)") and dev in devices)


def _outermost(roots: Sequence[str]) -> list[str]:
    """``roots`` without those inside another one (after resolving symlinks of the roots themselves)."""
    real = {root: os.path.realpath(root) for root in roots}
    kept: list[str] = []
    for root in dict.fromkeys(roots):
        inside = any(
            other != root and (real[root] + "/").startswith(real[other].rstrip("/") + "/") and real[root] != real[other]
            for other in real
        )
        duplicate = any(real[k] == real[root] for k in kept)
        if not inside and not duplicate:
            kept.append(root)
    return kept


async def watch_disk(
    paths: Sequence[str],
    limit: int,
    interval: float = 5.0,
    *,
    entries_per_sample: int = DISK_ENTRIES_PER_SAMPLE,
    process: SandboxedProcess | None = None,
) -> LimitHit:
    """Return a ``disk`` :class:`LimitHit` once the bytes allocated beneath ``paths`` exceed ``limit``.

    One :class:`DiskWalk` step of ``entries_per_sample`` entries every
    ``interval`` seconds, in a worker thread (the first at once); a finished
    walk starts again. With ``process``, files its tree holds open after
    deleting them count too (:func:`deleted_open_bytes`). Cancellable at any
    point (a step in progress is abandoned).
    """
    devices = {st.st_dev for path in paths if (st := _lstat_or_none(path)) is not None}
    walk = DiskWalk(paths)
    while True:
        done = await trio.to_thread.run_sync(walk.step, entries_per_sample, abandon_on_cancel=True)
        hidden = 0
        if process is not None:
            hidden = await trio.to_thread.run_sync(deleted_open_bytes, process, devices, abandon_on_cancel=True)
        if walk.allocated + hidden > limit:
            used = walk.allocated + hidden
            return LimitHit(
                limit="disk",
                value=float(used),
                threshold=float(limit),
                message=(
                    f"disk: the plugin's data folder and TMPDIR hold {_mb(used)}"
                    + (f" ({_mb(hidden)} of it in deleted files it keeps open)" if hidden else "")
                    + f", over the limit of {_mb(limit)}"
                ),
            )
        if done:
            walk = DiskWalk(paths)
        await trio.sleep(interval)


def cgroup_hit(figures: Figures) -> LimitHit | None:
    """The limit a tree's cgroup reports as exceeded in ``figures``, or ``None``.

    ``rss``: the kernel killed a process of the tree for the memory limit (an
    OOM kill): value the cgroup's peak usage (bytes), threshold its limit.
    ``pids``: the kernel refused a ``fork`` (or thread) for the process bound:
    value the tasks counted, threshold ``pids.max``. Pure.
    """
    if figures.oom_kills > 0:
        peak = figures.memory_peak if figures.memory_peak is not None else figures.memory_current
        limit = figures.memory_limit if figures.memory_limit is not None else peak
        return LimitHit(
            limit="rss",
            value=float(peak),
            threshold=float(limit),
            message=(
                f"memory: the plugin's cgroup reached its limit of {_mb(limit)} (peak {_mb(peak)}, shared memory "
                f"and memfd included); the kernel ended {figures.oom_kills} of its process(es)"
            ),
        )
    if figures.pids_refused > 0:
        limit = figures.pids_limit if figures.pids_limit is not None else figures.pids_current
        return LimitHit(
            limit="pids",
            value=float(max(figures.pids_current, limit)),
            threshold=float(limit),
            message=(
                f"processes: the plugin tried to run more than {limit} processes and threads; the kernel "
                f"refused {figures.pids_refused} fork(s)"
            ),
        )
    return None


async def watch_cgroup(cgroup: TreeCgroup, interval: float = 1.0) -> LimitHit:
    """Return the first :class:`LimitHit` the kernel's counters of ``cgroup`` show (:func:`cgroup_hit`).

    Reads them every ``interval`` seconds (the first at once), in a worker
    thread. Cancellable at any point.
    """
    while True:
        figures = await trio.to_thread.run_sync(cgroup.figures, abandon_on_cancel=True)
        hit = cgroup_hit(figures)
        if hit is not None:
            return hit
        await trio.sleep(interval)


async def _watch_tree(process: SandboxedProcess, policy: IsolationPolicy, interval: float) -> LimitHit:
    window = policy.cpu_window_seconds
    last: dict[tuple[int, float], float] | None = None  # None until the first sample sets the baseline
    used: collections.deque[tuple[float, float]] = collections.deque()  # (time, CPU seconds in that interval)
    started = time.monotonic()
    while True:
        counting = process.cgroup is None and policy.max_rss_bytes is not None
        sample = await trio.to_thread.run_sync(
            functools.partial(sample_tree, process, hidden=counting), abandon_on_cancel=True
        )
        now = time.monotonic()
        if counting and policy.max_rss_bytes is not None and sample.rss_bytes > policy.max_rss_bytes:
            hidden = sample.hidden_bytes
            return LimitHit(
                limit="rss",
                value=float(sample.rss_bytes),
                threshold=float(policy.max_rss_bytes),
                message=(
                    f"memory: the plugin's {sample.processes} process(es) use {_mb(sample.rss_bytes)}"
                    + (f" ({_mb(hidden)} of it in memfd and shared-memory files)" if hidden else " resident")
                    + f", over the limit of {_mb(policy.max_rss_bytes)}"
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
