"""What this machine offers the sandbox's layers, asked of the kernel directly: never of hostd's probe.

The isolation tests skip a layer only where the platform lacks it (a kernel without Landlock, user
namespaces turned off, not Linux). Where the platform has it, a sandbox that does not apply it is a
regression and the test fails: :func:`need_layers` skips on these facts and then asserts that
:func:`sandbox.probe.probe` agrees. Each fact is asked the plainest way there is: the Landlock syscall
through ctypes, util-linux ``unshare`` for the namespaces (as nobody through setpriv, where asked),
``/proc/self/status`` for seccomp. tests/test_test_hygiene.py checks that the isolation tests skip on
nothing else.
"""

from __future__ import annotations

import ctypes
import functools
import shutil
import subprocess
import sys

import pytest

from sandbox.probe import probe
from tests.nobody import SETPRIV

#: landlock_create_ruleset: one number on every architecture (the unified syscall table, Linux 5.13).
_LANDLOCK_CREATE_RULESET = 444
_LANDLOCK_CREATE_RULESET_VERSION = 1
#: The Landlock ABI each layer needs (sandbox/probe.py states the same, from the kernel's documentation).
_LANDLOCK_ABI = {"landlock-fs": 1, "landlock-net": 4, "landlock-scope": 6}
#: unshare's flags for a user namespace plus the layer's own.
_NAMESPACES = {
    "netns": ("--net",),
    "pidns": ("--pid", "--fork"),
    "private-proc": ("--pid", "--fork", "--mount", "--mount-proc"),
}
_SECCOMP = ("seccomp", "seccomp-net")


@functools.cache
def landlock_abi() -> int:
    """The Landlock ABI version the kernel reports (0: no Landlock, not Linux, or Landlock turned off)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(
        ctypes.c_long(_LANDLOCK_CREATE_RULESET),
        ctypes.c_void_p(None),
        ctypes.c_size_t(0),
        ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION),
    )
    return max(int(version), 0)


@functools.cache
def _unshare(flags: tuple[str, ...], as_nobody: bool) -> tuple[bool, str]:
    if shutil.which("unshare") is None:
        return False, "util-linux unshare is not installed to ask the kernel"
    if as_nobody and shutil.which("setpriv") is None:
        return False, "setpriv is not installed to ask as nobody"
    command = [*(SETPRIV if as_nobody else []), "unshare", "--user", "--map-root-user", *flags, "true"]
    done = subprocess.run(command, capture_output=True, timeout=30, check=False, cwd="/")
    said = done.stderr.decode(errors="replace").strip()
    return done.returncode == 0, " ".join(command[-len(flags) - 4 :]) + (f": {said}" if said else "")


def platform_offers(layer: str, *, as_nobody: bool = False) -> tuple[bool, str]:
    """Whether the platform offers sandbox layer ``layer`` to this user (or to nobody), and what says so."""
    if not sys.platform.startswith("linux"):
        return False, f"Linux only (this is {sys.platform})"
    if layer in _LANDLOCK_ABI:
        abi = landlock_abi()
        return abi >= _LANDLOCK_ABI[layer], f"the kernel's Landlock ABI is {abi}, {layer} needs {_LANDLOCK_ABI[layer]}"
    if layer in _NAMESPACES:
        return _unshare(_NAMESPACES[layer], as_nobody)
    if layer in _SECCOMP:
        with open("/proc/self/status", encoding="utf-8") as status:
            has = any(line.startswith("Seccomp:") for line in status)
        return has, "/proc/self/status " + ("shows" if has else "lacks") + " a Seccomp field"
    raise ValueError(f"no platform fact known for layer {layer!r}")


def need_layers(*layers: str) -> None:
    """Skip unless the platform offers every one of ``layers``; then fail unless the sandbox's probe
    finds each available (a probe or layer that broke must not turn the test into a skip)."""
    for layer in layers:
        offered, why = platform_offers(layer)
        if not offered:
            pytest.skip(f"{layer}: {why}")
    probed = {cap.name: cap for cap in probe()}
    missing = {layer: probed[layer].detail for layer in layers if not probed[layer].available}
    assert missing == {}, f"the platform offers {list(layers)}, the sandbox's probe finds these unavailable"
