"""What this machine lets hostd apply to a plugin, probed once and cached.

Theory of operation. :func:`probe` runs the supervisor shim once as
``python -I -S shim.py --probe``: it tries each kernel layer for real in a
throwaway child (create and enforce a Landlock ruleset and check that a read
is denied; enter a user + network namespace and check that only ``lo`` is
left; enter a user + pid namespace and check that the next child is its
pid 1 and that a process of it dies with that pid 1; have that pid 1 mount
a ``/proc`` of its own namespace in a mount namespace of its own and check
that it lists only itself (``private-proc``; where the kernel refuses, the
detail is its errno, e.g. a container's masked ``/proc``); install the seccomp
filter and check ``Seccomp: 2``), as the user
hostd runs as, so a distribution that disables unprivileged user namespaces
(Ubuntu 24.04's AppArmor rule, Docker's default seccomp profile) or a kernel
without Landlock shows up here and not at a plugin's spawn. The result is
cached for the life of the process (about 50 ms on first call, then free;
call it at startup, it blocks). It also looks, without trying, for
bubblewrap (reported, not used by ``sandbox``) and a cgroup it can use (:mod:`sandbox.cgroups`).

Capability names are the layer names of :class:`~sandbox.launch.Launch`
(``shim``, ``landlock-fs``, ``landlock-net``, ``landlock-scope``,
``netns``, ``pidns``, ``private-proc``, ``seccomp``, ``seccomp-net``) plus ``bubblewrap``, ``cgroup-v2`` and
``accounting`` (what bounds a plugin tree's memory and processes: ``cgroup-v2``, ``cgroup-v1`` or the
watchdog's counting, and why; :mod:`sandbox.cgroups`).
``seccomp-net`` (the socket allowlist planned under network ``"deny"``) is
tried on its own: an MPTCP socket must be refused, a TCP socket not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sandbox.cgroups import describe, detect

__all__ = [
    "CAPABILITY_NAMES",
    "Capability",
    "adopt",
    "available",
    "landlock_abi",
    "probe",
    "render_table",
    "shim_answer",
]

_SHIM = str(Path(__file__).resolve().with_name("shim.py"))
_TIMEOUT = 10.0

#: The rows of :func:`probe`, in order.
CAPABILITY_NAMES: tuple[str, ...] = (
    "shim",
    "landlock-fs",
    "landlock-net",
    "landlock-scope",
    "netns",
    "pidns",
    "private-proc",
    "seccomp",
    "seccomp-net",
    "bubblewrap",
    "cgroup-v2",
    "accounting",
)


@dataclass(frozen=True)
class Capability:
    """One probed capability: ``name`` (see :data:`CAPABILITY_NAMES`),
    ``available`` (this process's user can apply it here) and ``detail`` (the
    ABI, the reason it is missing, or what it covers)."""

    name: str
    available: bool
    detail: str


_lock = threading.Lock()
_cache: dict[str, tuple[list[Capability], int]] = {}
#: The shim's answer the cached result was built from (:func:`shim_answer`).
_answers: dict[str, dict[str, object]] = {}


def _run_shim_probe() -> dict[str, object]:
    if not sys.executable:
        return {"error": "no Python interpreter to run the shim (sys.executable is empty)"}
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", _SHIM, "--probe"],
            capture_output=True,
            timeout=_TIMEOUT,
            check=False,
            env={},
            cwd="/",
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"the shim probe did not run: {exc}"}
    try:
        result = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = done.stderr.decode("utf-8", "replace").strip()[-300:]
        return {"error": f"the shim probe failed (status {done.returncode}): {tail}"}
    if not isinstance(result, dict):
        return {"error": "the shim probe answered nonsense"}
    return result


def _pair(raw: dict[str, object], key: str) -> tuple[bool, str]:
    value = raw.get(key)
    if isinstance(value, list) and len(value) == 2:
        return bool(value[0]), str(value[1])
    return False, str(raw.get("error", "not probed"))


def _bubblewrap() -> Capability:
    found = shutil.which("bwrap") or next((p for p in ("/usr/bin/bwrap", "/bin/bwrap") if os.access(p, os.X_OK)), None)
    if found is None:
        return Capability("bubblewrap", False, "not installed; not needed: the shim applies its own layers")
    return Capability("bubblewrap", True, f"{found}; not used by sandbox (the shim applies its own layers)")


def _cgroup_v2() -> Capability:
    """A cgroup v2 folder of ours where we could create per-plugin children with memory + pids."""
    name = "cgroup-v2"
    if not sys.platform.startswith("linux"):
        return Capability(name, False, f"Linux only (this is {sys.platform})")
    try:
        own = next(
            line.split("::", 1)[1].strip()
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
    except (OSError, StopIteration):
        return Capability(name, False, "no cgroup v2 membership in /proc/self/cgroup")
    mount = None
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            if right.split()[:1] == ["cgroup2"]:
                mount = left.split()[4]
                break
    except OSError:
        pass
    if mount is None:
        return Capability(name, False, "no cgroup2 filesystem mounted")
    folder = os.path.normpath(os.path.join(mount, own.lstrip("/")))
    try:
        controllers = set(Path(folder, "cgroup.controllers").read_text().split())
    except OSError as exc:
        return Capability(name, False, f"{folder}: {exc.strerror}")
    writable = os.access(folder, os.W_OK) and os.access(os.path.join(folder, "cgroup.subtree_control"), os.W_OK)
    if not writable:
        return Capability(name, False, f"{folder} is not writable by this user (no delegation)")
    missing = sorted({"memory", "pids"} - controllers)
    if missing:
        return Capability(
            name, False, f"{folder} is writable but lacks the {', '.join(missing)} controller(s) (hybrid layout?)"
        )
    return Capability(name, True, f"{folder} (delegated); see the accounting row for what is in force")


def _accounting() -> Capability:
    """What bounds plugin trees here (:func:`sandbox.cgroups.detect`): a cgroup, or the watchdog's counting."""
    said = describe(detect(refresh=True))
    return Capability(
        "accounting",
        said["memory"] != "watchdog",
        f"{said['memory']}: {said['reason']}; CPU weight: {said['cpu']}; disk: {said['disk']}",
    )


def _build(answer: dict[str, object] | None = None) -> tuple[list[Capability], int]:
    raw = _run_shim_probe() if answer is None else answer
    _answers["result"] = raw
    abi_value = raw.get("landlock_abi", 0)
    abi = abi_value if isinstance(abi_value, int) else 0
    landlock_ok, landlock_detail = _pair(raw, "landlock")
    caps = [Capability("shim", *_pair(raw, "subreaper"))]
    if raw.get("linux") is False:
        caps[0] = Capability("shim", True, "supervisor without subreaper or parent-death signal (those are Linux only)")
    if not landlock_ok:
        caps += [Capability(n, False, landlock_detail) for n in ("landlock-fs", "landlock-net", "landlock-scope")]
    else:
        caps.append(Capability("landlock-fs", True, f"Landlock ABI {abi}: filesystem"))
        caps.append(
            Capability("landlock-net", True, f"Landlock ABI {abi}: TCP bind/connect by port (not UDP)")
            if abi >= 4
            else Capability("landlock-net", False, f"Landlock ABI {abi}: TCP rules need ABI 4 (Linux 6.7)")
        )
        caps.append(
            Capability("landlock-scope", True, f"Landlock ABI {abi}: signals and abstract unix sockets")
            if abi >= 6
            else Capability("landlock-scope", False, f"Landlock ABI {abi}: scoping needs ABI 6 (Linux 6.12)")
        )
    caps.append(Capability("netns", *_pair(raw, "netns")))
    caps.append(Capability("pidns", *_pair(raw, "pidns")))
    pidns = caps[-1]
    caps.append(
        Capability("private-proc", *_pair(raw, "private-proc"))
        if pidns.available
        else Capability("private-proc", False, f"needs pidns ({pidns.detail})")
    )
    caps.append(Capability("seccomp", *_pair(raw, "seccomp")))
    caps.append(Capability("seccomp-net", *_pair(raw, "seccomp-net")))
    caps.append(_bubblewrap())
    caps.append(_cgroup_v2())
    caps.append(_accounting())
    return caps, abi if landlock_ok else 0


def probe(*, refresh: bool = False) -> list[Capability]:
    """The capabilities of this machine for this user, in :data:`CAPABILITY_NAMES` order.

    Cached after the first call (``refresh=True`` probes again). Blocking
    (one short-lived ``python -I -S`` process, ~50 ms); thread-safe; safe to
    call as any user (every trial runs in a throwaway child).
    """
    with _lock:
        if "result" not in _cache or refresh:
            _cache["result"] = _build()
        return list(_cache["result"][0])


def shim_answer() -> dict[str, object] | None:
    """The shim's ``--probe`` answer (its JSON object) that the cached :func:`probe` was built from, or ``None``
    when this process has not probed: what a hostd keeps for hostctl's readers (hostd/storage/facts.py).
    Runs nothing."""
    with _lock:
        found = _answers.get("result")
        return dict(found) if found is not None and "result" in _cache else None


def adopt(answer: dict[str, object]) -> list[Capability]:
    """Build the cache of :func:`probe` from ``answer``, a shim's ``--probe`` answer another process got here
    (:func:`shim_answer`), instead of running the shim: hostctl's reading commands, with the answer a hostd kept
    (hostd/storage/facts.py checks its shape and that nothing it depends on changed). The checks of a layer
    not in ``answer`` fail as they do for a shim that did not say. Bubblewrap, the cgroup and the accounting
    are looked at here, as :func:`probe` does. Returns :func:`probe`'s list."""
    with _lock:
        _cache["result"] = _build(dict(answer))
        return list(_cache["result"][0])


def landlock_abi() -> int:
    """The Landlock ABI :func:`probe` found usable (0 = none)."""
    probe()
    return _cache["result"][1]


def available(name: str) -> bool:
    """Whether the probed capability ``name`` is available (False for unknown names)."""
    return any(cap.name == name and cap.available for cap in probe())


def render_table(caps: Iterable[Capability]) -> str:
    """A plain-text table (``capability  available  detail``) for ``hostd doctor``."""
    rows = [("capability", "available", "detail")]
    rows += [(cap.name, "yes" if cap.available else "no", cap.detail) for cap in caps]
    width0 = max(len(r[0]) for r in rows)
    width1 = max(len(r[1]) for r in rows)
    return "\n".join(f"{a:<{width0}}  {b:<{width1}}  {c}".rstrip() for a, b, c in rows) + "\n"
