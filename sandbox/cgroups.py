"""Kernel accounting of a plugin tree: one cgroup per tree, where this machine lets hostd make one.

Theory of operation. The watchdog (:mod:`sandbox.watchdog`) finds what a tree
holds by enumerating references (each process's RSS, each descriptor), and a
tree can hold memory no reference shows: pages written into a ``memfd`` or a
``/dev/shm`` file are in no process's RSS (a plugin held 600 MiB past a 100 MiB
bound, still ``ready``). The class: every resource charged to an object rather
than to a process. A memory cgroup charges the pages themselves (anonymous
memory, shared memory, ``memfd``, page cache), however the tree reaches them,
so where one is usable each plugin tree runs in a cgroup of its own:

- :func:`detect` chooses the mechanism (:class:`Mechanism`): cgroup v2 with the
  ``memory`` and ``pids`` controllers (as root, or in a delegated subtree such
  as a systemd user session's: the topmost cgroup above ours that this user may
  write), else the v1 ``memory`` and ``pids`` hierarchies of a hybrid host
  (our own cgroup in each, when writable), else ``watchdog`` (counting, with
  the reason). ``HOSTD_CGROUPS=off`` in hostd's environment forces the
  fallback. The decision itself is :func:`choose`, sans-IO (mountinfo and
  ``/proc/self/cgroup`` texts in, a :class:`Mechanism` out).
- :func:`create` makes ``hostd-<pid>-<start ticks>-<pid namespace>/<token>`` beneath that
  cgroup (the parent is hostd's own; a parent whose hostd is gone, left by a
  crash, is swept first: its processes SIGKILLed, its folders removed) and
  writes the tree's bounds: memory (v2 ``memory.max`` with ``memory.swap.max
  = 0`` and ``memory.oom.group = 1``; v1 ``memory.limit_in_bytes`` and
  ``memory.memsw.limit_in_bytes``), processes (``pids.max``: tasks, threads
  included) and a CPU weight (v2 ``cpu.weight`` when the ``cpu`` controller is
  offered; v1 ``cpu.shares`` when the ``cpu`` hierarchy is writable; else none,
  and :attr:`Mechanism.cpu` says so).
- The supervisor shim moves itself into the cgroup (it writes its pid into
  each ``cgroup.procs``) before it forks anything of the plugin, so every
  process of the tree is born inside: none can escape by forking early.
- :meth:`TreeCgroup.figures` reads the kernel's counters (:class:`Figures`);
  the watchdog stops the plugin on an OOM kill (``rss``) or a refused fork
  (``pids``). :meth:`TreeCgroup.remove` ends whatever is still inside and
  removes the folder (and hostd's parent once it is empty).

Nothing here runs in the plugin; a plugin that may write the cgroup files
(root without Landlock) could move itself out or raise its bounds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_MAX_PIDS",
    "DISABLE_VAR",
    "DISK_BOUND",
    "CgroupError",
    "Figures",
    "Mechanism",
    "TreeCgroup",
    "TreeLimits",
    "choose",
    "create",
    "describe",
    "detect",
    "parse_keyed",
    "parse_membership",
    "parse_mountinfo",
    "sweep_stale",
    "sweep_stale_detected",
]

#: hostd's environment variable that forces the watchdog's counting (``off``, ``0``, ``no``).
DISABLE_VAR = "HOSTD_CGROUPS"
#: Tasks (processes and threads) a plugin tree may run at once under a cgroup (``pids.max``).
DEFAULT_MAX_PIDS = 1024
#: What bounds a plugin's data folder and ``TMPDIR`` (the same under every mechanism).
DISK_BOUND = (
    "watchdog: the blocks allocated beneath the data folder and TMPDIR (st_blocks, hard links once, a folder "
    "made unreadable still read), plus deleted files the tree holds open or mapped; no kernel quota (no project "
    "quota or size-limited mount is made: neither is available to hostd without privileges or a dedicated "
    "filesystem)"
)
#: Seconds :meth:`TreeCgroup.remove` waits for the processes it killed to leave the cgroup.
_REMOVE_WAIT = 5.0
_PARENT = re.compile(r"^hostd-(\d+)-(\d+)-(\d+)$")

Kind = Literal["cgroup-v2", "cgroup-v1", "watchdog"]


class CgroupError(OSError):
    """A cgroup could not be made or bounded (the spawn fails with ``ISOLATION_FAILED``)."""


@dataclass(frozen=True)
class Mount:
    """One line of ``/proc/self/mountinfo`` (proc(5)): ``root`` inside the filesystem, ``point``, ``fstype``
    and the super options (for cgroup v1: the controllers)."""

    root: str
    point: str
    fstype: str
    options: frozenset[str]


@dataclass(frozen=True)
class Mechanism:
    """How plugin trees are accounted on this machine.

    ``kind``: ``"cgroup-v2"``, ``"cgroup-v1"`` or ``"watchdog"``. ``reason``: one
    sentence, why this one (what was found, or what was missing). ``folders``:
    controller (``memory``, ``pids``, ``cpu``) → the cgroup folder hostd's parent
    cgroup goes into (v2: the same folder for all). ``cpu``: how the CPU weight
    is applied, or why it is not.
    """

    kind: Kind
    reason: str
    folders: Mapping[str, str] = field(default_factory=dict)
    cpu: str = ""

    @property
    def usable(self) -> bool:
        """A cgroup backend is in force (not the watchdog's counting)."""
        return self.kind != "watchdog"


@dataclass(frozen=True)
class TreeLimits:
    """The bounds of one tree's cgroup: ``memory_bytes`` (``None``: accounted, not bounded), ``pids`` (tasks),
    ``cpu_weight`` (1-10000, 100 = an equal share; v1 ``cpu.shares`` = weight * 1024 / 100)."""

    memory_bytes: int | None = None
    pids: int = DEFAULT_MAX_PIDS
    cpu_weight: int = 100


@dataclass(frozen=True)
class Figures:
    """The kernel's counters of one tree's cgroup (bytes, tasks, counts; ``None``: not offered here).

    ``memory_current`` / ``memory_peak`` (v1 ``memory.usage_in_bytes`` /
    ``memory.max_usage_in_bytes``; v2 ``memory.current`` / ``memory.peak``),
    ``memory_limit``, ``oom_kills`` (processes the kernel killed for the limit:
    v1 ``memory.oom_control`` ``oom_kill``, v2 ``memory.events`` ``oom_kill``),
    ``memory_max_hits`` (times the limit was reached: v1 ``memory.failcnt``, v2
    ``memory.events`` ``max``), ``pids_current``, ``pids_limit``,
    ``pids_refused`` (forks refused: ``pids.events`` ``max``).
    """

    memory_current: int
    memory_peak: int | None
    memory_limit: int | None
    oom_kills: int
    memory_max_hits: int
    pids_current: int
    pids_limit: int | None
    pids_refused: int


# -- sans-IO: parsing and the choice -----------------------------------------------------------------


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/<pid>/mountinfo`` text (octal escapes such as ``\\040`` decoded)."""
    mounts: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        mounts.append(
            Mount(
                root=_unescape(fields[3]),
                point=_unescape(fields[4]),
                fstype=tail[0],
                options=frozenset(tail[2].split(",")),
            )
        )
    return mounts


def _unescape(value: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), value)


def parse_membership(text: str) -> dict[str, str]:
    """``/proc/<pid>/cgroup`` (cgroups(7)): controller → path; the v2 line (``0::/path``) under ``""``.

    A v1 line naming several controllers (``2:cpu,cpuacct:/x``) gives each the path; ``name=systemd``
    lines are kept under their name.
    """
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def parse_keyed(text: str) -> dict[str, int]:
    """``key value`` lines (``memory.events``, ``pids.events``, ``memory.oom_control``) as integers."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[1].lstrip("-").isdigit():
            values[words[0]] = int(words[1])
    return values


def _inside(mount: Mount, path: str) -> str | None:
    """The folder of cgroup ``path`` under ``mount`` (``None`` when the mount does not show it)."""
    root = mount.root.rstrip("/")
    if root and path != root and not path.startswith(root + "/"):
        return None
    rest = path[len(root) :].lstrip("/")
    return os.path.normpath(os.path.join(mount.point, rest)) if rest else mount.point


def choose(
    mounts: list[Mount],
    membership: Mapping[str, str],
    *,
    writable: Callable[[str], bool],
    read: Callable[[str], str | None],
    disabled: str | None = None,
) -> Mechanism:
    """The :class:`Mechanism` for this process: cgroup v2, else v1, else the watchdog, with the reason.

    ``mounts`` (:func:`parse_mountinfo`), ``membership`` (:func:`parse_membership`); ``writable(path)``:
    this user may create folders in and write files of ``path``; ``read(path)``: a file's text or
    ``None``. ``disabled``: the reason cgroups are not to be used (``HOSTD_CGROUPS=off``). Pure.
    """
    if disabled:
        return Mechanism("watchdog", disabled)
    v2 = _choose_v2(mounts, membership, writable=writable, read=read)
    if isinstance(v2, Mechanism):
        return v2
    v1 = _choose_v1(mounts, membership, writable=writable)
    if isinstance(v1, Mechanism):
        return v1
    return Mechanism("watchdog", f"no usable cgroup: {v2}; {v1}")


def _choose_v2(
    mounts: list[Mount],
    membership: Mapping[str, str],
    *,
    writable: Callable[[str], bool],
    read: Callable[[str], str | None],
) -> Mechanism | str:
    mount = next((m for m in mounts if m.fstype == "cgroup2"), None)
    own = membership.get("")
    if mount is None or own is None:
        return "cgroup v2: not mounted" if mount is None else "cgroup v2: this process is in no v2 cgroup"
    start = _inside(mount, own)
    if start is None:
        return f"cgroup v2: our cgroup {own} is not visible under {mount.point}"
    if not (writable(start) and writable(os.path.join(start, "cgroup.procs"))):
        return f"cgroup v2: {start} is not writable by uid {os.geteuid()} (no delegation)"
    top = start  # the delegation's top: the highest cgroup above ours that we may still write
    while top != mount.point:
        up = os.path.dirname(top)
        if not (writable(up) and writable(os.path.join(up, "cgroup.procs"))):
            break
        top = up
    controllers = set((read(os.path.join(top, "cgroup.controllers")) or "").split())
    missing = sorted({"memory", "pids"} - controllers)
    if missing:
        return f"cgroup v2: {top} does not offer the {' and '.join(missing)} controller(s)"
    enabled = set((read(os.path.join(top, "cgroup.subtree_control")) or "").split())
    occupied = (read(os.path.join(top, "cgroup.procs")) or "").strip() != ""
    if not {"memory", "pids"} <= enabled and occupied and top != mount.point:
        return f"cgroup v2: {top} holds processes and does not enable memory and pids for its children"
    cpu = "cpu.weight" if "cpu" in controllers else f"none: {top} does not offer the cpu controller"
    folders = dict.fromkeys(("memory", "pids", *(["cpu"] if "cpu" in controllers else [])), top)
    return Mechanism("cgroup-v2", f"cgroup v2 at {top}: memory and pids controllers, writable", folders, cpu)


def _choose_v1(
    mounts: list[Mount], membership: Mapping[str, str], *, writable: Callable[[str], bool]
) -> Mechanism | str:
    folders: dict[str, str] = {}
    for controller in ("memory", "pids", "cpu"):
        mount = next((m for m in mounts if m.fstype == "cgroup" and controller in m.options), None)
        path = membership.get(controller)
        folder = _inside(mount, path) if mount is not None and path is not None else None
        if folder is None:
            if controller == "cpu":
                continue
            return f"cgroup v1: no {controller} hierarchy this process is in"
        if not writable(folder):
            if controller == "cpu":
                continue
            return f"cgroup v1: {folder} is not writable by uid {os.geteuid()}"
        folders[controller] = folder
    cpu = "cpu.shares" if "cpu" in folders else "none: no writable v1 cpu hierarchy"
    return Mechanism(
        "cgroup-v1", f"cgroup v1 (hybrid): {folders['memory']} and {folders['pids']}, writable", folders, cpu
    )


def describe(mechanism: Mechanism) -> dict[str, str]:
    """``{"memory", "reason", "cpu", "disk"}``: the mechanism as ``hostd doctor`` and ``Launch.accounting`` say it."""
    cpu = mechanism.cpu or "none: no cgroup (the watchdog's maxCpuPercent only)"
    return {"memory": mechanism.kind, "reason": mechanism.reason, "cpu": cpu, "disk": DISK_BOUND}


# -- IO: detection, creation, figures, removal ---------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK)


_detected: dict[str, Mechanism] = {}
_lock = threading.Lock()


def detect(*, refresh: bool = False) -> Mechanism:
    """The :class:`Mechanism` for this process (cached; ``HOSTD_CGROUPS`` is read at every call).

    Blocking (a few small ``/proc`` and ``/sys`` reads, once). Not Linux: ``watchdog``.
    """
    value = os.environ.get(DISABLE_VAR, "").strip().lower()
    if value in {"off", "0", "no", "false"}:
        return Mechanism("watchdog", f"cgroups disabled ({DISABLE_VAR}={value})")
    with _lock:
        if refresh or "mechanism" not in _detected:
            mountinfo, membership = _read("/proc/self/mountinfo"), _read("/proc/self/cgroup")
            if mountinfo is None or membership is None:
                found = Mechanism("watchdog", "no cgroup information (/proc/self/mountinfo, /proc/self/cgroup)")
            else:
                found = choose(parse_mountinfo(mountinfo), parse_membership(membership), writable=_writable, read=_read)
            _detected["mechanism"] = found
        return _detected["mechanism"]


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _self_name() -> str:
    """``hostd-<pid>-<start ticks>-<pid namespace inode>``: names this hostd, in its pid namespace."""
    data = _read("/proc/self/stat") or ""
    fields = data[data.rfind(")") + 2 :].split()
    return f"hostd-{os.getpid()}-{fields[19] if len(fields) > 19 else 0}-{_pid_namespace()}"


def _owner_alive(name: str) -> bool:
    """False only for a parent named by a hostd of our pid namespace that is gone (pid and start time)."""
    match = _PARENT.match(name)
    if match is None or int(match.group(3)) != _pid_namespace():
        return True  # not ours to judge: another program's cgroup, or another pid namespace's hostd
    data = _read(f"/proc/{match.group(1)}/stat")
    if data is None:
        return False
    fields = data[data.rfind(")") + 2 :].split()
    return len(fields) > 19 and fields[19] == match.group(2)


def _kill_inside(folder: str) -> None:
    """SIGKILL every process of ``folder`` (v2: ``cgroup.kill`` when offered)."""
    if os.path.exists(os.path.join(folder, "cgroup.kill")):
        with contextlib.suppress(OSError):
            _write(os.path.join(folder, "cgroup.kill"), "1")
            return
    for word in (_read(os.path.join(folder, "cgroup.procs")) or "").split():
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(word), signal.SIGKILL)


def _rmdir_when_empty(folder: str, wait: float = _REMOVE_WAIT) -> bool:
    """Remove ``folder`` once its processes are gone (killed again meanwhile); True if it is gone."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
            _kill_inside(folder)
            time.sleep(0.01)  # the kernel detaches dead tasks asynchronously; nothing to wait on
        else:
            return True


def sweep_stale(mechanism: Mechanism) -> list[str]:
    """Remove the ``hostd-<pid>-<ticks>-<pidns>`` parents whose hostd is gone (a crash), their trees killed first.

    Only parents named in our pid namespace are judged (a pid means nothing outside it).

    Returns the folders removed. Blocking (up to a few seconds per busy cgroup).
    """
    removed: list[str] = []
    for base in dict.fromkeys(mechanism.folders.values()):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            parent = os.path.join(base, name)
            if _owner_alive(name) or not os.path.isdir(parent):
                continue
            for child in os.listdir(parent) if os.path.isdir(parent) else []:
                if os.path.isdir(os.path.join(parent, child)):
                    _kill_inside(os.path.join(parent, child))
                    _rmdir_when_empty(os.path.join(parent, child))
            if _rmdir_when_empty(parent):
                removed.append(parent)
    return removed


def sweep_stale_detected() -> list[str]:
    """:func:`sweep_stale` for the mechanism :func:`detect` finds (hostd's start); ``[]`` without a cgroup.

    Marks the sweep done, so :func:`create` does not repeat it. Blocking.
    """
    mechanism = detect()
    if not mechanism.usable:
        return []
    _swept.add(mechanism.kind)
    return sweep_stale(mechanism)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


_swept: set[Kind] = set()


class TreeCgroup:
    """One plugin tree's cgroup (made by :func:`create`): ``folders`` controller → folder,
    ``mechanism``, ``limits``. Blocking methods (small file reads and writes)."""

    def __init__(self, mechanism: Mechanism, folders: dict[str, str], limits: TreeLimits) -> None:
        self.mechanism = mechanism
        self.folders = folders
        self.limits = limits
        self.removed = False

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the shim writes its pid into (one per hierarchy)."""
        return [os.path.join(folder, "cgroup.procs") for folder in dict.fromkeys(self.folders.values())]

    def _number(self, controller: str, name: str) -> int | None:
        text = _read(os.path.join(self.folders[controller], name))
        if text is None:
            return None
        word = text.strip()
        return int(word) if word.isdigit() else None

    def figures(self) -> Figures:
        """The kernel's counters now (:class:`Figures`); a folder already removed reads as zeros."""
        memory, pids = self.folders["memory"], self.folders["pids"]
        pid_events = parse_keyed(_read(os.path.join(pids, "pids.events")) or "")
        if self.mechanism.kind == "cgroup-v2":
            events = parse_keyed(_read(os.path.join(memory, "memory.events")) or "")
            return Figures(
                memory_current=self._number("memory", "memory.current") or 0,
                memory_peak=self._number("memory", "memory.peak"),
                memory_limit=self._number("memory", "memory.max"),
                oom_kills=events.get("oom_kill", 0),
                memory_max_hits=events.get("max", 0),
                pids_current=self._number("pids", "pids.current") or 0,
                pids_limit=self._number("pids", "pids.max"),
                pids_refused=pid_events.get("max", 0),
            )
        oom = parse_keyed(_read(os.path.join(memory, "memory.oom_control")) or "")
        limit = self._number("memory", "memory.limit_in_bytes")
        return Figures(
            memory_current=self._number("memory", "memory.usage_in_bytes") or 0,
            memory_peak=self._number("memory", "memory.max_usage_in_bytes"),
            memory_limit=limit if self.limits.memory_bytes is not None else None,
            oom_kills=oom.get("oom_kill", 0),
            memory_max_hits=self._number("memory", "memory.failcnt") or 0,
            pids_current=self._number("pids", "pids.current") or 0,
            pids_limit=self._number("pids", "pids.max"),
            pids_refused=pid_events.get("max", 0),
        )

    def remove(self) -> bool:
        """Kill whatever is still inside, remove the folders, then hostd's parent once empty; True if all went.

        Idempotent. Blocking: waits (up to a few seconds) for killed processes to leave.
        """
        gone = True
        for folder in dict.fromkeys(self.folders.values()):
            _kill_inside(folder)
            gone = _rmdir_when_empty(folder) and gone
            with contextlib.suppress(OSError):
                os.rmdir(os.path.dirname(folder))  # hostd's parent, once no other tree is in it
        self.removed = gone
        return gone


def create(mechanism: Mechanism, name: str, limits: TreeLimits) -> TreeCgroup:
    """Make the cgroup of one tree, ``<hostd parent>/<name>``, with ``limits`` written; see the module doc.

    ``name``: a folder name (the tree's token). The first call per kind sweeps stale parents
    (:func:`sweep_stale`). Raises :class:`CgroupError` (nothing left behind) when a folder or a bound
    cannot be written; ``ValueError`` for the ``watchdog`` mechanism. Blocking.
    """
    if not mechanism.usable:
        raise ValueError("no cgroup backend: " + mechanism.reason)
    if mechanism.kind not in _swept:
        _swept.add(mechanism.kind)
        sweep_stale(mechanism)
    parent_name = _self_name()
    folders: dict[str, str] = {}
    cgroup = TreeCgroup(mechanism, folders, limits)
    try:
        for controller, base in mechanism.folders.items():
            parent = os.path.join(base, parent_name)
            if parent not in [os.path.dirname(f) for f in folders.values()]:
                _make_parent(mechanism, base, parent)
            folder = os.path.join(parent, name)
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o755)
            folders[controller] = folder
        _write_limits(mechanism, folders, limits)
    except OSError as exc:
        cgroup.remove()
        raise CgroupError(exc.errno or 0, f"cgroup: {exc.strerror or exc} ({getattr(exc, 'filename', '')})") from exc
    return cgroup


def _make_parent(mechanism: Mechanism, base: str, parent: str) -> None:
    """hostd's parent cgroup; v2: with memory and pids enabled for its children, and cpu where the kernel
    lets it be (best effort: a cpu controller that cannot be enabled leaves the tree without a weight)."""
    if mechanism.kind == "cgroup-v2":
        for folder in (base, parent):
            if folder == parent:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(parent, 0o755)
            control = os.path.join(folder, "cgroup.subtree_control")
            enabled = set((_read(control) or "").split())
            if not {"memory", "pids"} <= enabled:
                _write(control, "+memory +pids")
            if "cpu" in mechanism.folders and "cpu" not in enabled:
                with contextlib.suppress(OSError):
                    _write(control, "+cpu")
        return
    with contextlib.suppress(FileExistsError):
        os.mkdir(parent, 0o755)


def _write_limits(mechanism: Mechanism, folders: dict[str, str], limits: TreeLimits) -> None:
    memory, pids = folders["memory"], folders["pids"]
    _write(os.path.join(pids, "pids.max"), str(limits.pids))
    if mechanism.kind == "cgroup-v2":
        if limits.memory_bytes is not None:
            _write(os.path.join(memory, "memory.max"), str(limits.memory_bytes))
            with contextlib.suppress(FileNotFoundError):  # no swap accounting: nothing to bound
                _write(os.path.join(memory, "memory.swap.max"), "0")
        with contextlib.suppress(FileNotFoundError):
            _write(os.path.join(memory, "memory.oom.group"), "1")  # an OOM kill ends the whole tree
        if "cpu" in folders:
            with contextlib.suppress(FileNotFoundError):  # cpu could not be enabled (see _make_parent)
                _write(os.path.join(folders["cpu"], "cpu.weight"), str(limits.cpu_weight))
        return
    if limits.memory_bytes is not None:
        _write(os.path.join(memory, "memory.limit_in_bytes"), str(limits.memory_bytes))
        with contextlib.suppress(FileNotFoundError):  # swap accounting off: swap cannot extend the bound
            _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), str(limits.memory_bytes))
    if "cpu" in folders:
        _write(os.path.join(folders["cpu"], "cpu.shares"), str(max(2, limits.cpu_weight * 1024 // 100)))
