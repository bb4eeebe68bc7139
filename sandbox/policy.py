"""Isolation policy: what the host allows a plugin, and the layers that enforce it.

Theory of operation. An :class:`IsolationPolicy` is the host's decision
(hostd's configuration, per plugin from the parent), never the manifest's
alone. :func:`plan_layers` turns it, together with what :func:`sandbox.probe.probe`
found on this machine, into the exact tuple of layers that will be in force;
:func:`sandbox.launch.resolve_launch` stores that tuple in the
:class:`~sandbox.launch.Launch` (so the launch digest covers it) and the
resolved folders in an :class:`IsolationPlan`. At spawn,
:func:`landlock_rules` computes the Landlock path lists from the launch.

Optional layers (``landlock``, ``seccomp``) are applied when the kernel
offers them and simply left out of the tuple when it does not. Network
denial is not optional: ``network="deny"`` that no layer here can enforce
makes :func:`plan_layers` raise :class:`IsolationUnavailable`.

Network modes:

- ``"allow"``: no network restriction (``allowed_tcp_ports`` must be empty);
- ``"deny"`` without ports: a private network namespace (``netns``: no
  interface but its own loopback, so neither TCP nor UDP nor DNS reach
  anything) where unprivileged user namespaces work, plus Landlock TCP
  denial (``landlock-net``: no TCP bind or connect at all) where Landlock
  ABI 4 is offered; either one suffices (Landlock alone leaves UDP open);
- ``"deny"`` with ports: ``landlock-net`` only (a namespace would cut those
  ports too): TCP connect only to the listed ports, no TCP bind; UDP (DNS)
  stays open.

With ``"deny"`` (either form) the seccomp layer also refuses
``socket(AF_UNIX)``: no connection to local daemons through pathname unix
sockets (D-Bus, ``docker.sock``, an ssh-agent), which neither a network
namespace nor Landlock ABI 7 covers.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sandbox.probe import Capability

__all__ = [
    "DEVICES_R",
    "DEVICES_RW",
    "ETC_READ",
    "LAYER_ORDER",
    "SYSTEM_READ",
    "IsolationPlan",
    "IsolationPolicy",
    "IsolationUnavailable",
    "base_layers",
    "landlock_rules",
    "order_layers",
    "plan_layers",
    "runtime_read_paths",
]

NetworkMode = Literal["allow", "deny"]

#: Every layer name, in the canonical order used in ``Launch.isolation``.
LAYER_ORDER: tuple[str, ...] = (
    "shim",
    "rlimits",
    "no_new_privs",
    "landlock-fs",
    "landlock-net",
    "landlock-scope",
    "userns",
    "netns",
    "seccomp",
)

#: System folders a plugin may read and execute from under ``landlock-fs``.
#: ``/proc`` is readable, but Landlock's ptrace scoping keeps another
#: domain's ``/proc/<pid>/environ``, ``mem`` and ``fd`` out of reach.
SYSTEM_READ: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/nix/store",
    "/proc",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
)
#: The parts of ``/etc`` a runtime needs (loader, TLS, name service, time zone, locale,
#: interpreter configuration); the rest of ``/etc`` (``shadow``, ``ssh``, ...) stays closed.
ETC_READ: tuple[str, ...] = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/gnutls",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/networks",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/zoneinfo",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/python3",
    f"/etc/python{sys.version_info.major}.{sys.version_info.minor}",
    "/etc/npmrc",
    "/etc/nodejs",
    "/etc/gitconfig",
)
#: Character devices a plugin may read and write (and truncate, ``O_TRUNC``) under ``landlock-fs``.
DEVICES_RW: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full")
#: Character devices a plugin may read under ``landlock-fs``.
DEVICES_R: tuple[str, ...] = ("/dev/random", "/dev/urandom")

_PREFIX_PARTS = ("bin", "sbin", "lib", "lib32", "lib64", "libexec", "etc", "pyvenv.cfg")


class IsolationUnavailable(Exception):
    """The policy asks for a protection no layer on this machine can give."""


def _check_path(name: str, value: str) -> str:
    if not os.path.isabs(value) or "\0" in value:
        raise ValueError(f"{name} must be an absolute path, not {value!r}")
    return os.path.normpath(value)


@dataclass(frozen=True)
class IsolationPolicy:
    """What the host allows a plugin (host policy; never taken from a manifest alone).

    ``landlock``: apply the Landlock layers the kernel offers (filesystem,
    TCP ports, signal scoping). ``network``: ``"allow"`` or ``"deny"`` (see
    the module text). ``allowed_tcp_ports``: with ``"deny"``, connect to
    these TCP ports only (Landlock ABI 4; sorted and de-duplicated). ``seccomp``:
    apply the seccomp deny-list where available. ``max_rss_bytes`` /
    ``max_cpu_percent`` (percent of one CPU, averaged over
    ``cpu_window_seconds``): limits for :func:`sandbox.watchdog.watch`
    (``None`` = no limit). ``max_disk_bytes``: bound of the bytes allocated
    beneath the plugin's data folder and ``TMPDIR`` together, measured by
    the watchdog every ``disk_interval_seconds`` (``None`` = no bound; hostd
    sets :data:`sandbox.watchdog.DEFAULT_MAX_DISK_BYTES`). ``data_dir``: the plugin's writable data folder
    (absolute; created ``0700`` by ``resolve_launch``). ``extra_read_paths``
    / ``extra_write_paths``: further absolute paths the host grants under
    ``landlock-fs`` (e.g. an npm or uv cache, a Node from nvm).

    Raises ``ValueError`` for an inconsistent policy (ports with
    ``"allow"``, a port outside 1..65535, a relative path, a limit <= 0).
    """

    landlock: bool = True
    network: NetworkMode = "allow"
    allowed_tcp_ports: tuple[int, ...] = ()
    seccomp: bool = True
    max_rss_bytes: int | None = None
    max_cpu_percent: float | None = None
    cpu_window_seconds: float = 30.0
    max_disk_bytes: int | None = None
    disk_interval_seconds: float = 5.0
    data_dir: str | None = None
    extra_read_paths: tuple[str, ...] = ()
    extra_write_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.network not in ("allow", "deny"):
            raise ValueError(f"network must be 'allow' or 'deny', not {self.network!r}")
        ports = tuple(sorted({int(port) for port in self.allowed_tcp_ports}))
        if any(not 1 <= port <= 65535 for port in ports):
            raise ValueError(f"TCP ports must be in 1..65535: {ports}")
        if ports and self.network == "allow":
            raise ValueError("allowed_tcp_ports only make sense with network='deny'")
        object.__setattr__(self, "allowed_tcp_ports", ports)
        if self.max_rss_bytes is not None and self.max_rss_bytes <= 0:
            raise ValueError("max_rss_bytes must be positive")
        if self.max_cpu_percent is not None and self.max_cpu_percent <= 0:
            raise ValueError("max_cpu_percent must be positive")
        if self.cpu_window_seconds <= 0:
            raise ValueError("cpu_window_seconds must be positive")
        if self.max_disk_bytes is not None and self.max_disk_bytes <= 0:
            raise ValueError("max_disk_bytes must be positive")
        if self.disk_interval_seconds <= 0:
            raise ValueError("disk_interval_seconds must be positive")
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", _check_path("data_dir", self.data_dir))
        for name in ("extra_read_paths", "extra_write_paths"):
            paths = tuple(_check_path(name, p) for p in getattr(self, name))
            object.__setattr__(self, name, paths)


@dataclass(frozen=True)
class IsolationPlan:
    """The resolved folders and parameters a launch's layers need at spawn.

    ``tmpdir``: the host-chosen ``TMPDIR`` (writable under ``landlock-fs``,
    whatever the manifest put into the environment). ``data_dir``: the
    created data folder (realpath) or ``None``. ``tcp_ports``: connectable
    TCP ports under ``landlock-net``. ``deny_unix_sockets``: seccomp refuses
    ``socket(AF_UNIX)``. ``extra_read`` / ``extra_write``: the policy's
    extra paths.
    """

    tmpdir: str
    data_dir: str | None = None
    tcp_ports: tuple[int, ...] = ()
    deny_unix_sockets: bool = False
    extra_read: tuple[str, ...] = ()
    extra_write: tuple[str, ...] = ()


def base_layers() -> tuple[str, ...]:
    """The layers every shim launch has: ``shim``, ``rlimits`` and, on Linux, ``no_new_privs``."""
    if sys.platform.startswith("linux"):
        return ("shim", "rlimits", "no_new_privs")
    return ("shim", "rlimits")


def order_layers(layers: Iterable[str]) -> tuple[str, ...]:
    """``layers`` de-duplicated, in :data:`LAYER_ORDER` (unknown names last, sorted)."""
    unique = set(layers)
    known = [layer for layer in LAYER_ORDER if layer in unique]
    return (*known, *sorted(unique - set(LAYER_ORDER)))


def plan_layers(
    policy: IsolationPolicy, capabilities: Sequence[Capability], *, euid: int | None = None
) -> tuple[str, ...]:
    """The layers that will be in force for ``policy`` on a machine with ``capabilities``.

    ``euid`` (default: ours): for root, ``userns`` is added where user
    namespaces work and ``netns`` is not already planned, so a root plugin
    holds no capability over the host.

    Raises :class:`IsolationUnavailable` when ``network="deny"`` cannot be
    enforced (no network namespace and no Landlock ABI 4; or ports asked for
    without Landlock ABI 4 or with ``landlock=False``).
    """
    have = {cap.name for cap in capabilities if cap.available}
    if euid is None:
        euid = os.geteuid() if hasattr(os, "geteuid") else -1
    layers = list(base_layers())
    landlock = policy.landlock
    if landlock and "landlock-fs" in have:
        layers.append("landlock-fs")
    if policy.network == "deny":
        tcp = landlock and "landlock-net" in have
        if policy.allowed_tcp_ports:
            if not tcp:
                raise IsolationUnavailable(
                    "network 'deny' with TCP ports needs Landlock TCP rules (ABI 4), which are "
                    + ("turned off by the policy" if not landlock else "not offered here")
                )
            layers.append("landlock-net")
        else:
            if "netns" in have:
                layers.append("netns")
            if tcp:
                layers.append("landlock-net")
            if "netns" not in have and not tcp:
                raise IsolationUnavailable(
                    "network 'deny' needs an unprivileged network namespace or Landlock TCP rules; neither is "
                    "available here"
                )
    if landlock and "landlock-scope" in have:
        layers.append("landlock-scope")
    if euid == 0 and "netns" in have and "netns" not in layers:
        # Root in its own user namespace keeps no capability over the host (measured: without it,
        # a Landlocked root plugin still reads other root processes' /proc/<pid>/environ).
        layers.append("userns")
    if policy.seccomp and "seccomp" in have:
        layers.append("seccomp")
    return order_layers(layers)


def _prefix_paths(binary: str, home: str | None) -> list[str]:
    """The folders an executable at ``binary`` needs: its own, and its install prefix's parts."""
    found: list[str] = []
    for path in dict.fromkeys([binary, os.path.realpath(binary)]):
        folder = os.path.dirname(path)
        found.append(folder)
        if os.path.basename(folder) in ("bin", "sbin"):
            prefix = os.path.dirname(folder)
            if prefix not in ("/", home):
                found += [os.path.join(prefix, part) for part in _PREFIX_PARTS]
    return found


def _shebang(path: str) -> list[str]:
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []
    return head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()


def runtime_read_paths(executable: str, path_env: str, home: str | None = None) -> list[str]:
    """Folders the runtime of ``executable`` needs to read: its prefix, and its interpreter's.

    For ``/opt/node/bin/node`` that is ``/opt/node/{bin,lib,...}``; for a
    script with ``#!/usr/bin/env node`` it adds the prefix of ``node`` found
    on ``path_env`` (the child's ``PATH``); two levels of interpreters at
    most. ``home`` (the user's home folder) is never taken as a prefix
    (``~/bin/tool`` does not open all of ``~``).
    """
    found: list[str] = []
    current = [executable]
    for _ in range(3):
        following: list[str] = []
        for binary in current:
            found += _prefix_paths(binary, home)
            words = _shebang(os.path.realpath(binary))
            if not words:
                continue
            interpreter = words[0]
            if os.path.basename(interpreter) == "env":
                found += _prefix_paths(interpreter, home)
                names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
                hit = shutil.which(names[0], path=path_env) if names and path_env else None
                if hit:
                    following.append(hit)
            elif os.path.isabs(interpreter):
                following.append(interpreter)
        current = following
        if not current:
            break
    return list(dict.fromkeys(found))


def landlock_rules(
    *,
    executable: str,
    plugin_dir: str,
    path_env: str,
    plan: IsolationPlan,
    home: str | None = None,
) -> dict[str, list[str]]:
    """The Landlock path lists for one launch (``read``, ``write``, ``devices_rw``, ``devices_r``).

    Read (and execute): :data:`SYSTEM_READ`, :data:`ETC_READ`, the plugin
    folder, :func:`runtime_read_paths` of the executable and the policy's
    extra read paths. Read and write: the plan's ``TMPDIR``, data folder
    and extra write paths. Devices: :data:`DEVICES_RW`, :data:`DEVICES_R`.
    Nothing else is reachable. Paths that do not exist are skipped by the
    shim.
    """
    read = [*SYSTEM_READ, *ETC_READ, plugin_dir, *runtime_read_paths(executable, path_env, home), *plan.extra_read]
    write = [plan.tmpdir, *([plan.data_dir] if plan.data_dir else []), *plan.extra_write]
    return {
        "read": list(dict.fromkeys(read)),
        "write": list(dict.fromkeys(write)),
        "devices_rw": list(DEVICES_RW),
        "devices_r": list(DEVICES_R),
    }
