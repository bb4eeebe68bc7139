"""The per-plugin supervisor shim: one small process between hostd and a plugin.

Run as ``python -I -S shim.py LIFELINE_FD CONTROL_FD`` (isolated mode: no
site-packages, no ``PYTHON*`` variables, so nothing can inject code into it),
or forked by the fork server, ``python -I -S shim.py --serve SOCK HOST_PID``
(``_shim_serve.py``), which hostd starts once and which forks one shim per
plugin; a forked shim is what an exec'd one is from its first line on, but
writes ``shim <pid>`` first and ``done <exit code>`` last on its control
pipe (why a fork server, and the request it answers: ``_shim_serve.py``).
Stdlib only, single-threaded; never imported by hostd (``sandbox.process``
only runs it by path).

Theory of operation.

- It makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``): a plugin
  process that double-forks or calls ``setsid`` is re-parented to the shim,
  not to init, so "every descendant of the shim" is the whole plugin tree.
- It reads one JSON line, the launch spec, from the lifeline pipe, whose
  write end only hostd holds. EOF on the lifeline means hostd died (SIGKILL
  included): the tree is killed at once. Later lines are commands:
  ``stop <grace seconds>``.
- When the spec names a cgroup (``cgroup``: the ``cgroup.procs`` files of the
  tree's cgroup, sandbox/cgroups.py) the shim writes its own pid into each
  before it forks anything (``error cgroup ...`` when refused): every process
  of the plugin is born inside.
- Its child calls ``setsid``, sets ``PR_SET_PDEATHSIG(SIGKILL)`` and checks
  ``getppid()`` (the shim is single-threaded, so the signal is tied to the
  shim itself and not to a thread that may retire: the trio worker-thread
  trap), sets ``RLIMIT_CORE=0``, bounds ``RLIMIT_NOFILE``, sets
  ``PR_SET_NO_NEW_PRIVS`` and ``execve``-s the plugin. Its stdin, stdout and
  stderr are the pipes hostd gave the shim; the shim then points its own at
  ``/dev/null`` so only the plugin tree holds them. A failure before or at
  ``execve`` comes back over a close-on-exec pipe.
- Control lines to hostd (CONTROL_FD): ``pid <pid> <layers>`` after a
  successful exec (``<layers>``: comma-separated, what is in force, ``shim``
  first); ``error <stage> <errno> <text>`` when setup or exec failed (the shim
  then exits 127); ``exit <returncode> <phase> <monotonic seconds>`` when the
  plugin's main process has exited (``returncode`` negative = signal;
  ``phase`` is ``run``, ``term``, ``kill`` or ``lost``: whether it exited by
  itself, during the SIGTERM grace, by the final SIGKILL sweep, or after
  hostd vanished; the time is ``CLOCK_MONOTONIC``, comparable with hostd's
  ``time.monotonic()``).
- Layers (the spec's ``layers`` list; see ``sandbox/README.md``), applied
  by the child in this order, single-threaded, after ``setsid`` and the
  parent-death signal: ``rlimits``; ``netns`` (``unshare(CLONE_NEWUSER |
  CLONE_NEWNET)``, uid/gid mapped to themselves, loopback up) or ``userns``
  (the user namespace alone: a root plugin keeps no capability over the
  host); the parent-death signal is set again after either;
  ``no_new_privs`` (also set whenever Landlock or seccomp is asked for:
  both need it); ``landlock-fs``
  / ``landlock-net`` / ``landlock-scope`` (``_landlock.py``, loaded by path);
  ``seccomp`` / ``seccomp-net`` (one filter, ``_seccomp.py``, loaded by
  path). Right before ``execve`` the child writes the layers it applied to the close-on-exec pipe; the shim
  passes them on in its ``pid`` line. A layer that fails ends the launch
  with ``error <layer> <errno> <text>``: never a weaker plugin.
- ``pidns`` (containment by construction): the shim itself enters one user
  namespace with a pid namespace (plus the network namespace when ``netns``
  is asked for) before it forks, so its child is pid 1 of the new pid
  namespace: ``init_main`` (``_shim_init.py``), a forked copy of this
  script (no exec) that forks the plugin's main process (``plugin_main``,
  which applies the remaining layers and execs), forwards SIGTERM/SIGINT/SIGHUP to the whole
  namespace, reaps, and reports the main process's wait status on a pipe.
  The kernel kills every process of the namespace when that pid 1 exits,
  and the shim's ``waitpid`` of it returns only after that: so the shim's
  stop is SIGTERM to pid 1, the grace, SIGKILL to pid 1, with no sweep to
  race a fast-forking tree, and the ``pid`` line carries the main
  process's pid in the host's namespace (it reports it, as ``P<pid>``,
  before it confines itself). The shim's own namespaces cost it nothing:
  it needs no privilege over the host.
- ``python -I -S shim.py --probe`` prints one JSON line describing which
  layers this kernel lets this user apply (``_shim_probe.py``, loaded by
  path for that command only; used by ``sandbox.probe``).
- Not on Linux (macOS): no subreaper, no parent-death signal, no layers but
  ``rlimits``; the tree is found through ``ps`` and the plugin's process
  group (see ``sandbox/README.md``).
- Stop (``stop <grace>`` or SIGTERM/SIGHUP/SIGINT, which use the spec's
  grace), without ``pidns``: SIGTERM to every descendant, wait the grace for the main process,
  then a SIGSTOP sweep until no new process appears, a SIGKILL to all, and
  ``waitpid`` until ``ECHILD`` proves nothing is left. When the main process
  exits by itself the rest is killed the same way without grace. The shim
  then exits with the main process's status (``128 + n`` for signal ``n``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
import selectors
import signal
import sys
import time
import types
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
CLONE_NEWPID = 0x20000000

EXIT_SETUP_FAILED = 127
EXIT_SHIM_BUG = 70

LINUX = sys.platform.startswith("linux")
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = getattr(_libc, "prctl", None) if LINUX else None
if _prctl is not None:
    _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _prctl.restype = ctypes.c_int
_unshare = getattr(_libc, "unshare", None) if LINUX else None
if _unshare is not None:
    _unshare.argtypes = [ctypes.c_int]
    _unshare.restype = ctypes.c_int

_HANDLED = (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
#: Layers that need the Landlock module, and the layer names the child may report.
_LANDLOCK_LAYERS = ("landlock-fs", "landlock-net", "landlock-scope")
_SECCOMP_LAYERS = ("seccomp", "seccomp-net")  # one filter: the deny-list and/or the socket allowlist


def prctl(option: int, arg2: int = 0) -> None:
    """Call prctl(2); raise OSError on failure (ENOSYS when not on Linux)."""
    if _prctl is None:
        raise OSError(errno.ENOSYS, "prctl needs Linux")
    ctypes.set_errno(0)
    if _prctl(option, arg2, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_LOADED: dict[str, types.ModuleType] = {}


def load_layer_module(name: str) -> types.ModuleType:
    """Load ``sandbox/<name>.py`` by path (``-I -S`` puts nothing of ours on ``sys.path``); once per process.

    The fork server loads both before it forks, so its shims find them here.
    """
    if name in _LOADED:
        return _LOADED[name]
    import importlib.util  # noqa: PLC0415 - only when a layer needs it

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    spec = importlib.util.spec_from_file_location("hostd_shim" + name, path)
    if spec is None or spec.loader is None:
        raise OSError(errno.ENOENT, f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _LOADED[name] = module
    return module


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces(*, network: bool = True, pid: bool = False) -> None:
    """A new user namespace and, with ``network``, a new network namespace (only ``lo``, brought up).

    The user namespace maps this uid and gid to themselves (so files keep
    their owners) and denies ``setgroups``; the caller keeps no capability
    outside it (for root: no ``CAP_SYS_PTRACE``, ``CAP_SYS_ADMIN``... over
    the host). With ``pid``, also a new pid namespace (the same user
    namespace owns it): the caller stays where it is, its next child is the
    namespace's pid 1. Raises OSError (e.g. EPERM where unprivileged user
    namespaces are disabled).
    """
    if _unshare is None:
        raise OSError(errno.ENOSYS, "network namespaces need Linux")
    import fcntl  # noqa: PLC0415 - only when this layer is asked for
    import socket  # noqa: PLC0415
    import struct  # noqa: PLC0415

    uid, gid = os.geteuid(), os.getegid()
    ctypes.set_errno(0)
    if _unshare(CLONE_NEWUSER | (CLONE_NEWNET if network else 0) | (CLONE_NEWPID if pid else 0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    if not network:
        return
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0).ljust(40, b"\0")
        flags = struct.unpack_from("16sH", fcntl.ioctl(sock.fileno(), siocgifflags, request))[1]
        fcntl.ioctl(sock.fileno(), siocsifflags, struct.pack("16sH", b"lo", flags | iff_up).ljust(40, b"\0"))


def write_line(fd: int, text: str) -> None:
    """Write one control line; hostd may be gone, so EPIPE is ignored."""
    data = (text.replace("\n", " ") + "\n").encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass


def _ppid_links() -> dict[int, list[int]]:
    """``{ppid: [pid, ...]}`` for every process: from /proc, or from ``ps`` where there is no /proc."""
    children: dict[int, list[int]] = {}
    if not os.path.isdir("/proc/self"):
        import subprocess  # noqa: PLC0415 - macOS and other systems without /proc

        try:
            out = subprocess.run(
                ["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True, timeout=5, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return children
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                children.setdefault(int(parts[1]), []).append(int(parts[0]))
        return children
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 2:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    return children


def descendants(root: int) -> list[int]:
    """Pids of every live process below ``root`` (from the ppid links)."""
    children = _ppid_links()
    found: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def decode_status(status: int) -> int:
    """A waitpid status as a Popen-style returncode (negative = signal)."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return -1


def requested_layers(spec: dict[str, Any]) -> list[str]:
    """The layers the spec asks the child for (``shim`` is the supervisor's own)."""
    if "layers" in spec:
        return [str(layer) for layer in spec["layers"] if layer != "shim"]
    # The spec of an older sandbox.process: two booleans.
    return [name for name in ("rlimits", "no_new_privs") if spec.get(name, True)]


def load_modules(layers: Iterable[str]) -> dict[str, types.ModuleType]:
    """The layer modules the child will need, loaded before fork (and before Landlock forbids reading them)."""
    wanted = set(layers)
    modules: dict[str, types.ModuleType] = {}
    if wanted.intersection(_LANDLOCK_LAYERS):
        modules["landlock"] = load_layer_module("_landlock")
    if wanted.intersection(_SECCOMP_LAYERS):
        modules["seccomp"] = load_layer_module("_seccomp")
    if "pidns" in wanted:
        modules["init"] = load_sibling("_shim_init")  # pid 1 of the namespace
    if "netproxy" in wanted:
        modules["net"] = load_sibling("_shim_net")  # the namespace's one way out (issue 26)
    return modules


def _fail(err_w: int, stage: str, exc: BaseException) -> None:
    """Write the ``E<stage>\\0<errno>\\0<text>`` record for ``exc`` to ``err_w``."""
    if isinstance(exc, OSError):
        code = exc.errno or 0
        text = (exc.strerror or str(exc)).replace("\n", " ")
    else:
        code, text = 0, repr(exc).replace("\n", " ")
    with contextlib.suppress(OSError):
        os.write(err_w, f"E{stage}\0{code}\0{text}\n".encode("utf-8", "replace"))


def _own_session(stage: list[str], parent: Callable[[], int], expected: int) -> None:
    """How each process the shim forks starts: default signals, a session of its own and (Linux) SIGKILL
    when its parent dies. Exits at once (``EXIT_SETUP_FAILED``) when ``parent()`` is no longer ``expected``:
    the parent died before the death signal was armed (prctl(2) PR_SET_PDEATHSIG), so nothing would kill
    this process then. ``stage[0]`` names the step under way, for the ``E`` record of a failure."""
    _default_signals()
    stage[0] = "setsid"
    os.setsid()
    if LINUX:
        stage[0] = "pdeathsig"
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if parent() != expected:
            os._exit(EXIT_SETUP_FAILED)


def _default_signals() -> None:
    """Default dispositions for EVERY signal, no wakeup fd, nothing blocked (what a fresh process expects).

    Every signal, not only the ones this shim and Python change (SIGCHLD, SIGTERM, SIGHUP, SIGINT, SIGPIPE,
    SIGXFSZ): an ignored disposition survives exec, and hostd may have inherited some from whoever started it
    (``cmd &`` in a script ignores SIGQUIT, ``nohup`` SIGHUP, a parent may ignore anything); none of them is
    the plugin's."""
    signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            continue  # a number the kernel reserves (glibc's real-time signals 32 and 33)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _apply_rlimits(spec: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cap = int(spec.get("nofile", 65536))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # The soft limit hostd had before it raised its own (sandbox.limits.raise_nofile_limit): the plugin's.
    soft = int(spec.get("nofile_soft", soft))
    hard = cap if hard == resource.RLIM_INFINITY else min(hard, cap)
    soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _confine_and_exec(
    spec: dict[str, Any], applied: list[str], err_w: int, modules: dict[str, types.ModuleType], stage: list[str]
) -> NoReturn:
    """``chdir``, ``no_new_privs``, Landlock, seccomp; report the layers on ``err_w``; ``execve``.

    ``applied``: the layers already in force (extended here). ``stage[0]``
    is kept up to date for the caller's error record. Raises OSError.
    """
    layers = requested_layers(spec)
    stage[0] = "chdir"
    os.chdir(spec["cwd"])
    landlock = [layer for layer in layers if layer in _LANDLOCK_LAYERS]
    seccomp = [layer for layer in layers if layer in _SECCOMP_LAYERS]
    if "no_new_privs" in layers or landlock or seccomp:
        stage[0] = "no_new_privs"
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        applied.append("no_new_privs")
    if landlock:
        stage[0] = "landlock"
        rules = spec.get("landlock") or {}
        tcp = rules.get("tcp_connect")
        got = modules["landlock"].restrict_self(
            read=rules.get("read", ()),
            write=rules.get("write", ()),
            devices_rw=rules.get("devices_rw", ()),
            devices_r=rules.get("devices_r", ()),
            filesystem="landlock-fs" in landlock,
            tcp_connect=(tcp or []) if "landlock-net" in landlock else None,
            scope="landlock-scope" in landlock,
        )
        missing = [layer for layer in landlock if layer not in got]
        if missing:
            raise OSError(errno.EOPNOTSUPP, "not in force: " + ",".join(missing))
        applied.extend(got)
    if seccomp:
        stage[0] = "seccomp"
        modules["seccomp"].install(
            deny_calls="seccomp" in seccomp,
            deny_unix_sockets=bool((spec.get("seccomp") or {}).get("deny_unix_sockets")),
            socket_allowlist="seccomp-net" in seccomp,
        )
        applied.extend(seccomp)
    unknown = [layer for layer in layers if layer not in applied]
    if unknown:
        stage[0] = "layers"
        raise OSError(errno.EINVAL, "unknown layer " + ",".join(unknown))
    os.closerange(3, err_w)
    os.closerange(err_w + 1, 65536)
    os.write(err_w, ("L" + ",".join(applied) + "\n").encode())
    stage[0] = "exec"
    os.execve(spec["executable"], spec["argv"], spec["env"])


def child_main(spec: dict[str, Any], shim_pid: int, err_w: int, modules: dict[str, types.ModuleType]) -> NoReturn:
    """In the forked child (no ``pidns``): isolate, then exec the plugin. Never returns.

    Writes ``L<layer,layer,...>\\n`` to ``err_w`` just before ``execve`` and
    ``E<stage>\\0<errno>\\0<text>\\n`` on any failure.
    """
    stage = ["signals"]
    layers = requested_layers(spec)
    applied: list[str] = []
    try:
        _own_session(stage, os.getppid, shim_pid)
        if "rlimits" in layers:
            stage[0] = "rlimits"
            _apply_rlimits(spec)
            applied.append("rlimits")
        namespace = "netns" if "netns" in layers else "userns" if "userns" in layers else None
        if namespace is not None:
            stage[0] = namespace
            enter_namespaces(network=namespace == "netns")
            # A change of credentials may clear the parent-death signal: set it again.
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != shim_pid:
                os._exit(EXIT_SETUP_FAILED)
            applied.append(namespace)
            if namespace == "netns" and "userns" in layers:
                applied.append("userns")  # the network namespace came with a user namespace
        _confine_and_exec(spec, applied, err_w, modules, stage)
    except BaseException as exc:
        _fail(err_w, stage[0], exc)
    finally:
        os._exit(EXIT_SETUP_FAILED)


class Shim:
    """The supervisor's state; one instance per shim process."""

    def __init__(self, lifeline: int, control: int) -> None:
        self.lifeline = lifeline
        self.control = control
        self.me = os.getpid()
        self.main_pid: int | None = None
        self.main_status: int | None = None
        #: With ``pidns``: pid 1 of the plugin's namespace (our only child) and the pipe it reports on.
        self.init_pid: int | None = None
        self.status_r: int | None = None
        self.init_alive = False  # True from fork until reaped: its pid is ours to signal until then
        self.phase = "run"
        self.deadline: float | None = None
        self.grace = 2.0
        self.buffer = b""
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    # -- start ------------------------------------------------------------

    def install_signals(self) -> None:
        for sig in _HANDLED:
            signal.signal(sig, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)

    def read_spec(self) -> dict[str, Any] | None:
        """Block until the spec line arrives; None if hostd closed the lifeline first."""
        while b"\n" not in self.buffer:
            try:
                chunk = os.read(self.lifeline, 65536)
            except InterruptedError:
                continue
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        spec: dict[str, Any] = json.loads(line.decode("utf-8", "surrogateescape"), strict=False)
        return spec

    def enter_cgroup(self, spec: dict[str, Any]) -> bool:
        """Move the shim into the tree's cgroup (the spec's ``cgroup``: ``cgroup.procs`` files, one per
        hierarchy; sandbox/cgroups.py) before anything of the plugin is forked, and before any namespace:
        every process of the tree is born inside, none can fork its way out first. False (and an ``error
        cgroup`` line) when the kernel refuses."""
        for procs in spec.get("cgroup", ()):
            try:
                _write_file(str(procs), str(os.getpid()))
            except OSError as exc:
                write_line(self.control, f"error cgroup {exc.errno or 0} {exc.strerror or exc}: {procs}")
                return False
        return True

    def enter(self, spec: dict[str, Any], modules: dict[str, types.ModuleType]) -> list[str] | None:
        """With ``pidns``: enter the namespaces (and hand the ``netproxy`` listener over); the layers entered.
        ``[]`` without ``pidns``; None after reporting ``error pidns|netproxy ...`` on the control pipe."""
        layers = requested_layers(spec)
        if "pidns" not in layers:
            return []
        # One user namespace owns the pid (and network) namespace; the shim enters the user and
        # network ones itself (it needs no privilege over the host), its next child is pid 1.
        network = "netns" in layers
        stage = "pidns"
        try:
            enter_namespaces(network=network, pid=True)
            entered = ["pidns", *(["netns"] if network else []), *(["userns"] if "userns" in layers else [])]
            if network and "netproxy" in layers:
                stage = "netproxy"  # the namespace's one way out, before anything of the plugin runs
                modules["net"].hand_off(spec.get("proxy") or {})
                entered.append("netproxy")
        except (OSError, KeyError, ValueError, TypeError) as exc:
            code = getattr(exc, "errno", 0) or 0
            write_line(self.control, f"error {stage} {code} {getattr(exc, 'strerror', None) or exc}")
            return None
        return entered

    def start(self, spec: dict[str, Any]) -> bool:
        """Fork and exec the plugin; report ``pid`` or ``error``. False on failure."""
        self.grace = float(spec.get("grace", 2.0))
        try:
            modules = load_modules(requested_layers(spec))
        except OSError as exc:
            write_line(self.control, f"error load {exc.errno or 0} {exc.strerror or exc}")
            return False
        entered = self.enter(spec, modules)
        if entered is None:
            return False
        err_r, err_w = os.pipe()
        status_w = -1
        if entered:
            self.status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(err_r)
            if entered:
                assert self.status_r is not None
                os.close(self.status_r)
                modules["init"].init_main(spec, self.me, err_w, modules, status_w=status_w, entered=entered)
            child_main(spec, self.me, err_w, modules)
        os.close(err_w)
        if entered:
            os.close(status_w)
            self.init_pid = pid
            self.init_alive = True
        # Only the plugin tree holds the stdio pipes from now on.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        report = b""
        while True:
            try:
                chunk = os.read(err_r, 4096)
            except InterruptedError:
                continue
            if not chunk:
                break
            report += chunk
        os.close(err_r)
        applied: str | None = None
        failure: str | None = None
        main_pid = pid
        for record in report.decode("utf-8", "replace").split("\n"):
            if record.startswith("L"):
                applied = record[1:]
            elif record.startswith("E"):
                failure = record[1:]
            elif record.startswith("P") and record[1:].isdigit():
                main_pid = int(record[1:])
        if failure is None and applied is not None and entered and main_pid == pid:
            failure = "pid\x000\x00the plugin in the pid namespace did not report its pid"
        if failure is not None or applied is None:
            stage, code, text = [*(failure or "exec\x000\x00no report from the child").split("\0"), "", ""][:3]
            if entered:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)  # pid 1: the kernel ends the rest of the namespace
            self.reap_blocking(pid)
            write_line(self.control, f"error {stage or 'exec'} {code or '0'} {text}")
            return False
        self.main_pid = main_pid
        write_line(self.control, f"pid {main_pid} {','.join(['shim', *filter(None, applied.split(','))])}")
        return True

    # -- stopping ---------------------------------------------------------

    def begin_stop(self, grace: float) -> None:
        if self.phase != "run":
            return
        self.phase = "term"
        if self.init_pid is not None:
            if not self.init_alive:
                return
            # pid 1 passes it on to the whole namespace with one kill(-1): every member gets it once.
            with contextlib.suppress(OSError):
                os.kill(self.init_pid, signal.SIGTERM)
            self.deadline = time.monotonic() + max(0.0, grace)
            return
        signal_all(descendants(self.me), signal.SIGTERM)
        if not LINUX and self.main_pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(self.main_pid, signal.SIGTERM)
        self.deadline = time.monotonic() + max(0.0, grace)

    def kill_everything(self) -> None:
        """SIGSTOP sweep until stable, SIGKILL all, reap until ECHILD.

        With ``pidns`` no sweep: SIGKILL to pid 1 makes the kernel kill
        every process of the namespace (new forks in it fail from then on),
        and its ``waitpid`` returns only once they are all gone. The sweep
        races a tree that forks faster than it walks ``/proc``; it stays
        for launches without the layer.
        """
        if self.init_pid is not None:
            if self.init_alive:
                with contextlib.suppress(OSError):
                    os.kill(self.init_pid, signal.SIGKILL)
            self.reap_all()
            return
        stopped: set[int] = set()
        for _ in range(1000):
            fresh = [pid for pid in descendants(self.me) if pid not in stopped]
            if not fresh:
                break
            signal_all(fresh, signal.SIGSTOP)
            stopped.update(fresh)
        signal_all(stopped, signal.SIGKILL)
        signal_all(descendants(self.me), signal.SIGKILL)
        if not LINUX and self.main_pid is not None:
            # No subreaper: a double-forked member left our tree but not the plugin's process group.
            with contextlib.suppress(OSError):
                os.killpg(self.main_pid, signal.SIGKILL)
        self.reap_all()

    def reap_all(self) -> None:
        """``waitpid`` until ``ECHILD``: nothing started by the shim is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            self.note_exit(pid, status)

    def reap_blocking(self, pid: int) -> None:
        while True:
            try:
                os.waitpid(pid, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                pass
            return

    def note_exit(self, pid: int, status: int) -> None:
        if pid == self.init_pid:
            self.init_alive = False
        if pid == self.init_pid and self.main_status is None:
            # pid 1 wrote the main process's status before it exited; nothing written = it was
            # killed first, and the kernel killed the main process with the rest of the namespace.
            status = self.read_main_status()
            pid = self.main_pid or pid
        if pid == self.main_pid and self.main_status is None:
            self.main_status = status
            phase = self.phase
            if phase == "term" and self.deadline is not None and time.monotonic() >= self.deadline:
                phase = "kill"
            write_line(self.control, f"exit {decode_status(status)} {phase} {time.monotonic():.6f}")

    def read_main_status(self) -> int:
        """The main process's raw wait status as pid 1 reported it (SIGKILL if it reported none)."""
        data = b""
        if self.status_r is not None:
            with contextlib.suppress(OSError):
                while chunk := os.read(self.status_r, 64):
                    data += chunk
            os.close(self.status_r)
            self.status_r = None
        text = data.decode("ascii", "replace").strip()
        return int(text) if text.lstrip("-").isdigit() else int(signal.SIGKILL)

    def reap_some(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            except InterruptedError:
                continue
            if pid == 0:
                return
            self.note_exit(pid, status)

    # -- main loop --------------------------------------------------------

    def on_lifeline(self) -> bool:
        try:
            chunk = os.read(self.lifeline, 4096)
        except InterruptedError:
            return True
        if not chunk:
            return False
        self.buffer += chunk
        while b"\n" in self.buffer:
            line, _, self.buffer = self.buffer.partition(b"\n")
            words = line.split()
            if words[:1] == [b"stop"]:
                grace = float(words[1]) if len(words) > 1 else self.grace
                self.begin_stop(grace)
        return True

    def on_signals(self) -> None:
        try:
            data = os.read(self.wake_r, 4096)
        except (BlockingIOError, InterruptedError):
            return
        if any(sig in data for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)):
            self.begin_stop(self.grace)

    def run(self) -> int:
        """Supervise until the plugin's main process is gone; return the exit code."""
        selector = selectors.DefaultSelector()
        selector.register(self.lifeline, selectors.EVENT_READ, "lifeline")
        selector.register(self.wake_r, selectors.EVENT_READ, "signals")
        while True:
            self.reap_some()
            if self.main_status is not None:
                # The main process is gone: nothing of its tree may stay.
                self.kill_everything()
                break
            timeout = None
            if self.deadline is not None:
                timeout = self.deadline - time.monotonic()
                if timeout <= 0:
                    self.phase = "kill"
                    self.kill_everything()
                    break
            host_gone = False
            for key, _ in selector.select(timeout):
                if key.data == "lifeline":
                    host_gone = not self.on_lifeline()
                else:
                    self.on_signals()
            if host_gone:
                self.phase = "lost"
                self.kill_everything()
                break
        status = self.main_status
        if status is None:
            return EXIT_SHIM_BUG
        code = decode_status(status)
        return 128 - code if code < 0 else code


def load_sibling(name: str) -> types.ModuleType:
    """Load ``sandbox/<name>.py``, a part of the shim, as a layer module is (once per process).

    The parts: ``_shim_init`` (pid 1 of a ``pidns`` namespace), ``_shim_probe``
    (``--probe``), ``_shim_serve`` (``--serve``). Each calls back into this
    module, which it finds as its ``shim``.
    """
    module = load_layer_module(name)
    module.__dict__["shim"] = sys.modules[__name__]
    return module


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--probe"]:
        sys.stdout.write(json.dumps(load_sibling("_shim_probe").probe()) + "\n")
        sys.stdout.flush()
        return 0
    if argv[1:2] == ["--serve"]:
        return int(load_sibling("_shim_serve").serve(int(argv[2]), int(argv[3])))
    return supervise(int(argv[1]), int(argv[2]))


def supervise(lifeline: int, control: int) -> int:
    """One shim's whole life over its lifeline and control pipe (the protocol above); the exit code."""
    for fd in (lifeline, control):
        os.set_inheritable(fd, False)
    shim = Shim(lifeline, control)
    try:
        shim.install_signals()
        if LINUX:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
        spec = shim.read_spec()
        if spec is None:
            return 0
        if not shim.enter_cgroup(spec) or not shim.start(spec):
            return EXIT_SETUP_FAILED
        return shim.run()
    except BaseException as exc:
        write_line(control, f"error shim {getattr(exc, 'errno', 0) or 0} {exc!r}")
        with contextlib.suppress(BaseException):
            shim.kill_everything()
        return EXIT_SHIM_BUG


if __name__ == "__main__":
    os._exit(main(sys.argv))
