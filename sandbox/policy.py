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

Network modes (a policy with an allowlist, ``proxy_hosts``, takes the
``netproxy`` layer instead where the kernel allows it: a private network
namespace whose only way out is hostd's proxy, ``sandbox/netns.py``; with
it ``seccomp-net`` refuses ``socket(AF_UNIX)`` as under ``"deny"``):

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

With ``"deny"`` (either form, and whatever ``IsolationPolicy.seccomp`` says:
it is part of the network denial) ``seccomp-net`` is planned where seccomp
works: ``socket(2)`` becomes an allowlist of the kinds the rules above were
written for (TCP and UDP over IPv4/IPv6, route netlink, ``socketpair`` of
``AF_UNIX``); MPTCP, SCTP, ICMP, raw and packet sockets, vsock and every
other family fail (``sandbox/_seccomp.py`` has the list and the errnos).
Landlock's TCP rules do not cover MPTCP, and a namespace does not cover
vsock, so granted ports open plain TCP only. It stays optional like the
other seccomp layer: on a machine without seccomp it is left out (and
``hostd doctor`` says so).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from sandbox.paths import PathRefused, check_fences, check_rule_path, covers, is_inside
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
    "runtime_chain",
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
    "netproxy",
    "pidns",
    "private-proc",
    "seccomp",
    "seccomp-net",
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

#: Interpreters a package runner starts for the code it fetches (their runtime is the plugin's runtime too).
_RUNNER_INTERPRETERS: dict[str, tuple[str, ...]] = {"uv": ("python3",), "uvx": ("python3",), "pipx": ("python3",)}

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
    apply the seccomp deny-list where available (the ``seccomp-net`` socket
    allowlist of ``"deny"`` does not depend on it). ``max_rss_bytes`` /
    ``max_cpu_percent`` (percent of one CPU, averaged over
    ``cpu_window_seconds``): limits for :func:`sandbox.watchdog.watch`
    (``None`` = no limit). ``max_disk_bytes``: bound of the bytes allocated
    beneath the plugin's data folder and ``TMPDIR`` together, measured by
    the watchdog every ``disk_interval_seconds`` (``None`` = no bound; hostd
    sets :data:`sandbox.watchdog.DEFAULT_MAX_DISK_BYTES`). ``data_dir``: the plugin's writable data folder
    (absolute; created ``0700`` by ``resolve_launch``). ``extra_read_paths``
    / ``extra_write_paths``: further absolute paths the host grants under
    ``landlock-fs`` (e.g. a folder the user approved in the arguments).
    ``protected_paths``: what no rule may cover (the state folder, the
    user's home, other plugins' folders). ``writable_paths``: folders other
    plugins may write (a link there cannot redirect a rule; no runtime
    program may live there). ``code_paths``: every plugin's folder (no
    write rule may reach one). See :func:`landlock_rules`.
    ``grant_named_paths``: the paths the approved arguments and the
    manifest's env values name become grants
    (:func:`sandbox.launch.named_grants`). ``fenced_paths``: folders no rule
    may lie inside either (hostd's state folder, other plugins' folders;
    :func:`sandbox.paths.check_fences`), except the plugin's own data folder
    and ``TMPDIR`` and, for reading, its own folder and the
    ``own_read_paths`` (its prepared environments). ``max_pids``: the tasks
    (processes and threads) the tree may run at once where a cgroup bounds it
    (``pids.max``; ``None`` = :data:`sandbox.cgroups.DEFAULT_MAX_PIDS`); the
    watchdog's counting fallback has no process bound. ``proxy_hosts``: the
    plugin's network allowlist (canonical entries of
    :mod:`hostd.net.allowlist`; ``None``: the plugin has none, and
    ``network`` alone decides), ``proxy_private``: its entries that may
    resolve to non-public addresses; the sandbox treats both as opaque
    strings (hostd's proxy reads them), shown and covered by the launch.

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
    protected_paths: tuple[str, ...] = ()
    writable_paths: tuple[str, ...] = ()
    code_paths: tuple[str, ...] = ()
    grant_named_paths: bool = False
    fenced_paths: tuple[str, ...] = ()
    own_read_paths: tuple[str, ...] = ()
    max_pids: int | None = None
    proxy_hosts: tuple[str, ...] | None = None
    proxy_private: tuple[str, ...] = ()

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
        if self.max_pids is not None and self.max_pids <= 0:
            raise ValueError("max_pids must be positive")
        if self.disk_interval_seconds <= 0:
            raise ValueError("disk_interval_seconds must be positive")
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", _check_path("data_dir", self.data_dir))
        for name in (
            "extra_read_paths",
            "extra_write_paths",
            "protected_paths",
            "writable_paths",
            "code_paths",
            "fenced_paths",
            "own_read_paths",
        ):
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
    extra paths. ``rules``: the checked Landlock path lists, real paths only.
    """

    tmpdir: str
    data_dir: str | None = None
    tcp_ports: tuple[int, ...] = ()
    deny_unix_sockets: bool = False
    extra_read: tuple[str, ...] = ()
    extra_write: tuple[str, ...] = ()
    #: The Landlock path lists from :func:`landlock_rules`, checked at resolution (empty without ``landlock-fs``).
    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def rule_lists(self) -> dict[str, list[str]]:
        """``rules`` as the shim's spec wants them: ``{"read": [...], "write": [...], ...}``."""
        return {name: list(paths) for name, paths in self.rules}


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
    holds no capability over the host. ``pidns`` is added wherever the
    probe found it works, whatever the policy: it is how a plugin's process
    tree is ended for sure (without it, the shim's sweep races the tree).
    ``private-proc`` (a mount namespace with a procfs of that pid
    namespace) comes with ``pidns`` wherever the probe found it works.

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
    proxied = _proxied(policy, have)
    if proxied:
        # The allowlist replaces the level's network: a namespace with no route out, hostd's proxy its one way
        # out (sandbox/netns.py); Landlock's TCP rules would only cut the proxy's own port.
        layers += ["netns", "netproxy"]
    elif policy.network == "deny":
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
    if "pidns" in have:
        # Containment by construction: the plugin's tree lives in a pid namespace whose pid 1 the shim
        # owns; when that ends, the kernel ends every process of it, however fast it forks or hides.
        layers.append("pidns")
        if "private-proc" in have:
            # Issue 25: /proc of the plugin's own pid namespace (no other process's cmdline, hostd's included).
            layers.append("private-proc")
    if euid == 0 and "netns" in have and "netns" not in layers:
        # Root in its own user namespace keeps no capability over the host (measured: without it,
        # a Landlocked root plugin still reads other root processes' /proc/<pid>/environ).
        layers.append("userns")
    if policy.seccomp and "seccomp" in have:
        layers.append("seccomp")
    if (policy.network == "deny" or proxied) and "seccomp-net" in have:
        layers.append("seccomp-net")  # socket kinds the network rules do not cover (module text)
    return order_layers(layers)


def _proxied(policy: IsolationPolicy, have: set[str]) -> bool:
    """Whether ``netproxy`` is planned: the policy has an allowlist (``proxy_hosts``), is not ``basic`` (it
    applies Landlock), and user, network and pid namespaces all work here. Otherwise the plugin keeps the
    level's network (``network``: today's all-or-nothing), which ``launch`` states."""
    return policy.proxy_hosts is not None and policy.landlock and {"netns", "pidns"} <= have


def _is_broad(folder: str, guarded: Sequence[str]) -> bool:
    """A folder no runtime heuristic may grant as a whole: ``/``, a top-level folder, or one covering a guarded path."""
    return folder == "/" or folder.count("/") == 1 or any(covers(folder, g) for g in guarded)


def _prefix_paths(found_at: str, real: str, guarded: Sequence[str]) -> list[str]:
    """The folders a runtime found at ``found_at`` (real path ``real``) needs: its own and its prefix's parts.

    Derived only from real paths: the real file, its real folder, and the
    real folder it was found in (a virtual environment's ``bin`` whose
    ``python`` links elsewhere). Never a broad folder (:func:`_is_broad`);
    the prefix ``X`` of ``X/bin`` adds only ``X/{bin,lib,...}``.
    """
    found = [real]
    for folder in dict.fromkeys([os.path.dirname(real), os.path.realpath(os.path.dirname(found_at))]):
        if not _is_broad(folder, guarded):
            found.append(folder)
        if os.path.basename(folder) in ("bin", "sbin"):
            prefix = os.path.dirname(folder)
            if prefix != "/" and not any(covers(prefix, g) for g in guarded):
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


def runtime_chain(executable: str, path_env: str) -> list[tuple[str, str]]:
    """The programs that run for ``executable``: ``[(as found, real path), ...]``, the executable first.

    A script's ``#!`` interpreter follows it (``#!/usr/bin/env node``:
    ``/usr/bin/env``, then ``node`` looked up on ``path_env``, the child's
    ``PATH``), three levels at most. Real paths come from
    :func:`os.path.realpath`; a missing interpreter ends the chain.
    """
    chain: list[tuple[str, str]] = []
    current = [executable]
    for _ in range(3):
        following: list[str] = []
        for binary in current:
            real = os.path.realpath(binary)
            chain.append((binary, real))
            # A package runner picks its interpreter at run time: uv/uvx/pipx run ``python3`` from the PATH.
            following += [
                hit
                for name in _RUNNER_INTERPRETERS.get(os.path.basename(real), ())
                if (hit := shutil.which(name, path=path_env))
            ]
            words = _shebang(real)
            if not words:
                continue
            interpreter = words[0]
            if os.path.basename(interpreter) == "env":
                chain.append((interpreter, os.path.realpath(interpreter)))
                names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
                hit = shutil.which(names[0], path=path_env) if names and path_env else None
                if hit:
                    following.append(os.path.abspath(hit))
            elif os.path.isabs(interpreter) and os.path.exists(interpreter):
                following.append(interpreter)
        current = following
        if not current:
            break
    return list(dict.fromkeys(chain))


def runtime_read_paths(
    executable: str,
    path_env: str,
    home: str | None = None,
    guarded: Sequence[str] = (),
    chain: Sequence[tuple[str, str]] | None = None,
) -> list[str]:
    """Paths the runtime of ``executable`` needs to read: each program of :func:`runtime_chain` and its prefix.

    For ``/opt/node/bin/node`` that is the file, ``/opt/node/bin`` and
    ``/opt/node/{bin,lib,...}``; for a script with ``#!/usr/bin/env node``
    also ``node``'s, found on ``path_env``. Everything is derived from real
    paths, and no folder granted as a whole is ``/``, a top-level folder, the
    ``home`` folder, or one covering a ``guarded`` path (``~/bin/tool`` adds
    ``~/bin``, never ``~``). ``chain``: :func:`runtime_chain`'s result when
    the caller has it already (each ``#!`` line is then read once).
    """
    guard = [*guarded, *([home] if home else [])]
    found: list[str] = []
    for found_at, real in chain if chain is not None else runtime_chain(executable, path_env):
        found += _prefix_paths(found_at, real, guard)
    return list(dict.fromkeys(found))


def _checked(paths: Iterable[str], *, writable: Sequence[str], protected: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(check_rule_path(p, writable=writable, protected=protected) for p in paths))


def fence_rules(
    read: Sequence[str],
    write: Sequence[str],
    *,
    plan: IsolationPlan,
    plugin_dir: str,
    fenced: Sequence[str],
    own_read: Sequence[str] = (),
) -> None:
    """Raise :class:`~sandbox.paths.PathRefused` when a checked rule lies inside a ``fenced`` folder.

    ``read`` / ``write``: real paths (:func:`landlock_rules` resolved them, so a
    ``..`` walk or a symlink into the fence is caught by where it lands).
    Inside a fence a write rule may be only the plan's ``TMPDIR`` or data folder
    (or beneath them); a read rule also the real ``plugin_dir`` and ``own_read``
    (the plugin's prepared environments, read and run, never written). Issue 25:
    hostd's own tree (``secrets``, ``credentials``, ``bundles``, ``registry``,
    ``state.json``, logs, other plugins' data and prepared folders) is out of
    reach in both directions. Blocking (``realpath`` of the plan's folders).
    """
    if not fenced:
        return
    fences = [os.path.realpath(f) for f in fenced]
    own_write = [os.path.realpath(p) for p in (plan.tmpdir, *([plan.data_dir] if plan.data_dir else []))]
    own = [*own_write, plugin_dir, *(os.path.realpath(p) for p in own_read)]
    for path in read:
        check_fences(path, path, fences, own)
    for path in write:
        check_fences(path, path, fences, own_write)


def landlock_rules(
    *,
    executable: str,
    plugin_dir: str,
    path_env: str,
    plan: IsolationPlan,
    home: str | None = None,
    protected: Sequence[str] = (),
    writable: Sequence[str] = (),
    code: Sequence[str] = (),
    chain: Sequence[tuple[str, str]] | None = None,
    fenced: Sequence[str] = (),
    own_read: Sequence[str] = (),
) -> dict[str, list[str]]:
    """The Landlock path lists for one launch (``read``, ``write``, ``devices_rw``, ``devices_r``), as real paths.

    Read (and execute): :data:`SYSTEM_READ`, :data:`ETC_READ`, the plugin
    folder, :func:`runtime_read_paths` of the executable and the plan's
    extra read paths. Read and write: the plan's ``TMPDIR``, data folder
    and extra write paths. Devices: :data:`DEVICES_RW`, :data:`DEVICES_R`.
    Nothing else is reachable.

    Every path is resolved by :func:`sandbox.paths.check_rule_path`:
    ``writable`` (every folder any plugin may write) must hold no link on the
    way, no rule may cover a ``protected`` path (the state folder, the home
    folder, other plugins' folders), no write rule may cover or lie in a
    ``code`` folder (every plugin's folder), and no program of the runtime
    may lie in a plugin-writable folder (it would run code a plugin wrote).
    No rule may lie inside a ``fenced`` folder (:func:`fence_rules`).
    Raises :class:`~sandbox.paths.PathRefused` naming the path and why.
    ``chain``: :func:`runtime_chain`'s result when the caller has it already.
    Blocking (``lstat`` and a read of the first line of each script).
    """
    if chain is None:
        chain = runtime_chain(executable, path_env)
    own = [plan.tmpdir, *([plan.data_dir] if plan.data_dir else []), *plan.extra_write]
    writable = list(dict.fromkeys(os.path.realpath(p) for p in (*writable, *own)))
    for program in dict.fromkeys(real for _, real in chain):
        for root in writable:
            if is_inside(program, root):
                raise PathRefused(program, f"is a program of the runtime, inside {root}, which a plugin can write")
    real_plugin_dir = os.path.realpath(plugin_dir)
    for root in writable:
        if is_inside(real_plugin_dir, root):
            # Another plugin's grant (or a host-wide one) over this plugin's code: it could plant code here.
            raise PathRefused(plugin_dir, f"the plugin folder lies in {root}, which a plugin can write")
    runtime = runtime_read_paths(executable, path_env, home, protected, chain)
    system = [p for p in (*SYSTEM_READ, *ETC_READ) if os.path.lexists(p)]
    read = _checked([*system, plugin_dir, *runtime, *plan.extra_read], writable=writable, protected=protected)
    write = _checked(
        [plan.tmpdir, *([plan.data_dir] if plan.data_dir else []), *plan.extra_write],
        writable=writable,
        protected=[*protected, *code],
    )
    for path in write:
        for folder in code:
            if is_inside(path, folder):
                raise PathRefused(path, f"lies in the plugin folder {folder}: no plugin may write plugin code")
    fence_rules(read, write, plan=plan, plugin_dir=real_plugin_dir, fenced=fenced, own_read=own_read)
    return {
        "read": read,
        "write": write,
        "devices_rw": list(DEVICES_RW),
        "devices_r": list(DEVICES_R),
    }
