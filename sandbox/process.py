"""Spawning a plugin and ending its whole process tree.

Theory of operation. :func:`spawn` starts a resolved
:class:`~sandbox.launch.Launch` with three pipes (stdin, stdout, stderr) and
a fresh per-instance token, set as ``HOSTD_SANDBOX_TOKEN`` in the plugin's
environment; every descendant inherits it unless it clears its environment.
:meth:`SandboxedProcess.stop` ends the tree in the order the MCP stdio
transport prescribes (close stdin, wait, SIGTERM, wait, SIGKILL), then sweeps
by token, so nothing of the tree is alive when it returns.

Two ways to run a plugin, chosen by ``launch.isolation``:

- ``"shim"`` listed (the default from :func:`~sandbox.launch.resolve_launch`):
  the fork server (:class:`~sandbox.forkserver._ForkServer`, started once from the trio thread
  as ``sys.executable -I -S sandbox/shim.py --serve``) forks a shim in a new
  session (``SHIM_START = "exec"``: hostd starts ``sys.executable -I -S
  sandbox/shim.py`` itself, one interpreter per plugin, ~25 ms more), and
  the shim starts the plugin (see ``shim.py`` for the protocol). The shim is
  a child subreaper, holds a lifeline pipe whose write end only hostd holds
  (so hostd's death, SIGKILL included, ends the tree), and sets the
  plugin's parent-death signal from its single thread. hostd uses no
  ``preexec_fn`` (it forces ``fork`` and is not thread-safe) and never sets
  ``PR_SET_PDEATHSIG`` itself: trio forks from worker threads that retire
  after 10 s idle, and the kernel ties that signal to the forking thread.
- otherwise, the direct variant: the plugin is a child of hostd in a new
  session; ``stop`` finds the tree through the token, the session and
  psutil. It does not survive hostd's death; it exists as a fallback and
  to compare.

Where this differs from the mcp SDK's stdio client (new session +
``killpg``): a ``setsid`` grandchild or a double-forked daemon leaves the
process group, so the SDK misses it; here the subreaper and the token find it.

The class of bug this guards against: any way for a process of the plugin
to outlive its stop or hostd (double fork, ``setsid``, a cleared
environment, forking faster than a sweep walks ``/proc``, a killed shim).
A sweep (the shim's, or the token sweep of :mod:`sandbox.sweep`) races the tree and trusts
what the tree can erase; so where the probe finds user namespaces work the
plan has ``pidns``: the tree lives in a pid namespace whose pid 1 is the
shim's child, the kernel kills every process of the namespace when that
pid 1 goes (stop, the main process's exit, the shim's death through its
parent-death signal, hostd's death through the lifeline), and no process
can leave a pid namespace. The sweeps stay for launches without it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Protocol

import trio

from sandbox import cgroups
from sandbox.forkserver import _FORK_SERVER, _SHIM_SLACK, _ControlReader, _ForkedShim, _shim_command
from sandbox.home_view import make_view
from sandbox.launch import Launch, LaunchError
from sandbox.limits import plugin_nofile_soft
from sandbox.netns import PROXY_PORT, transparent_ports
from sandbox.paths import PathRefused, ensure_private_dir, write_private_file
from sandbox.policy import IsolationPlan, IsolationPolicy, order_layers
from sandbox.sweep import _DEATH_WAIT, TOKEN_VAR, _is_zombie, _new_token, _pids_with_token, _signal_all, sweep_leftovers

__all__ = [
    "NOFILE_LIMIT",
    "SandboxedProcess",
    "StopReport",
    "spawn",
]

_POLL = 0.02  # seconds between liveness checks while waiting for a tree to end

#: ``RLIMIT_NOFILE`` cap (soft and hard) applied under the ``"rlimits"`` layer.
NOFILE_LIMIT = 65536
#: Seconds the shim gets to start and report the plugin's pid.
SPAWN_TIMEOUT = 10.0
#: How shims start: ``"fork"`` (forked by the fork server, Linux with pidfds) or ``"exec"`` (a fresh
#: ``python -I -S shim.py`` per plugin: elsewhere, and the baseline ``bench.spawn_cost`` compares with).
SHIM_START = "fork" if sys.platform.startswith("linux") and hasattr(os, "pidfd_open") else "exec"


@dataclass(frozen=True)
class StopReport:
    """How :meth:`SandboxedProcess.stop` ended a plugin.

    ``step``: what ended the plugin's main process: ``"already-exited"``
    (it had exited before ``stop`` was called), ``"stdin-eof"`` (it exited
    within the grace after stdin was closed), ``"sigterm"`` or ``"sigkill"``.
    ``returncode``: its exit status (negative = killed by that signal), or
    ``None`` if it could not be learnt. ``seconds``: wall time ``stop`` took.
    """

    step: str
    returncode: int | None
    seconds: float


def _tree(root: int, token: str) -> set[int]:
    """Live members of a plugin tree: token carriers, the session and descendants of ``root``."""
    import psutil  # noqa: PLC0415 (~20 ms of import: a tree's end only, not hostctl's reading commands: issue 28)

    pids = set(_pids_with_token(token))
    with contextlib.suppress(psutil.Error):
        pids.update(child.pid for child in psutil.Process(root).children(recursive=True))
    with contextlib.suppress(OSError):
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getsid(proc.pid) == root:
                    pids.add(proc.pid)
    pids.add(root)
    pids.discard(os.getpid())
    return {pid for pid in pids if not _is_zombie(pid)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


class _ProcessHandle(Protocol):
    """What a :class:`SandboxedProcess` needs of the process hostd supervises: ``trio.Process`` or a forked shim."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> trio.abc.SendStream | None: ...
    @property
    def stdout(self) -> trio.abc.ReceiveStream | None: ...
    @property
    def stderr(self) -> trio.abc.ReceiveStream | None: ...
    def poll(self) -> int | None: ...
    async def wait(self) -> int: ...
    def kill(self) -> None: ...
    def terminate(self) -> None: ...


class SandboxedProcess:
    """A running plugin tree (returned by :func:`spawn`; do not construct).

    ``pid``: the plugin's main process (never the shim). ``stdin``
    (``trio.abc.SendStream``), ``stdout``, ``stderr``
    (``trio.abc.ReceiveStream``): its pipes; ``stop`` closes ``stdin`` only,
    so drain and close ``stdout``/``stderr`` yourself (they reach EOF once the
    tree is gone). ``token``: the per-instance token, in every plugin
    process's environment as ``HOSTD_SANDBOX_TOKEN``. ``returncode``: the
    main process's exit status once known (negative = killed by that
    signal), else ``None``. ``shim_pid``: the supervisor's pid, or ``None``
    without the ``"shim"`` layer. ``isolation``: the layers in force for
    this plugin as the shim reported them after applying them (in
    :data:`~sandbox.policy.LAYER_ORDER`; ``()`` without the shim), never
    merely what was requested. ``cgroup``: the tree's cgroup
    (:class:`~sandbox.cgroups.TreeCgroup`) when one accounts it, else ``None``;
    ``accounting``: the :class:`~sandbox.cgroups.Mechanism` in force for it
    (``watchdog`` with the reason when no cgroup).

    Always call :meth:`stop`, also after the plugin exited by itself: it ends
    the rest of the tree and reaps what hostd started.
    """

    pid: int
    stdin: trio.abc.SendStream
    stdout: trio.abc.ReceiveStream
    stderr: trio.abc.ReceiveStream
    token: str
    shim_pid: int | None
    isolation: tuple[str, ...]
    cgroup: cgroups.TreeCgroup | None
    accounting: cgroups.Mechanism

    def __init__(self, proc: _ProcessHandle, pid: int, token: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        self.pid = pid
        self.stdin = proc.stdin
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.token = token
        self.shim_pid = None
        self.isolation = ()
        self.cgroup = None
        self.accounting = cgroups.Mechanism("watchdog", "the plugin runs without the supervisor shim")
        self._report: StopReport | None = None
        self._stop_lock = trio.Lock()

    @property
    def returncode(self) -> int | None:
        """The main process's exit status once known, else ``None``."""
        raise NotImplementedError

    async def wait(self) -> int:
        """Wait until the plugin's main process exits; return its status.

        Waits for the process, not for pipe EOF (a grandchild can hold the
        pipes open). Negative = killed by that signal. Cancellable; the
        process is left running if cancelled. If the shim itself is killed
        before reporting, the main process dies of its parent-death signal
        and the result is ``-9`` (SIGKILL).
        """
        raise NotImplementedError

    async def stop(self, grace: float = 2.0) -> StopReport:
        """End the whole tree; idempotent, shielded from cancellation.

        ``grace`` in seconds. Steps, per the MCP stdio transport: close stdin
        and wait ``grace`` for the main process; else SIGTERM every member
        of the tree and wait ``grace``; else SIGSTOP and SIGKILL every member.
        Whatever ended the main process, the rest of the tree is then killed,
        everything hostd started is reaped and a token sweep follows, so
        nothing of the tree is alive when this returns. Takes at most
        ``2 * grace`` plus a few tens of milliseconds (plus 3 s per step if
        the shim itself hangs). A second call returns the first call's
        report. Never raises for an already-dead tree.
        """
        with trio.CancelScope(shield=True):
            async with self._stop_lock:
                if self._report is None:
                    self._report = await self._stop(grace)
        assert self._report is not None
        return self._report

    def kill_now(self) -> None:
        """Skip the graces of a stop in progress: SIGKILL the plugin's main process now.

        The stop then proceeds as if the main process had died: the rest of
        the tree is killed and reaped. A no-op once the main process is gone.
        """
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)

    async def _close_stdin(self) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await self.stdin.aclose()

    async def _stop(self, grace: float) -> StopReport:
        raise NotImplementedError


class _DirectProcess(SandboxedProcess):
    """The plugin is the caller's child in a new session (no ``"shim"`` layer).

    hostd never launches this way (:func:`~sandbox.launch.resolve_launch` always lists ``"shim"``),
    and it gives none of the shim's whole-tree guarantees. It stays as the public API's answer to a
    launch without layers, and as the baseline every layer's cost is measured against
    (``bench/spawn_cost.py``, the cost table in ``sandbox/README.md``); tests/test_sandbox_process.py
    runs the stop contract against it too.
    """

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await self._proc.wait()

    async def _stop(self, grace: float) -> StopReport:
        started = time.monotonic()
        step = "already-exited" if self._proc.poll() is not None else ""
        await self._close_stdin()
        if not step:
            with trio.move_on_after(grace):
                await self._proc.wait()
                step = "stdin-eof"
        if not step:
            _signal_all(_tree(self.pid, self.token), signal.SIGTERM)
            with trio.move_on_after(grace):
                await self._proc.wait()
                step = "sigterm"
        if not step:
            step = "sigkill"
        await self._kill_tree()
        return StopReport(step=step, returncode=self._proc.returncode, seconds=time.monotonic() - started)

    async def _kill_tree(self) -> None:
        signalled: set[int] = set()
        for _ in range(50):
            members = await trio.to_thread.run_sync(_tree, self.pid, self.token)
            if self._proc.poll() is not None:
                members.discard(self.pid)
            if not members:
                break
            _signal_all(members, signal.SIGSTOP)
            _signal_all(members, signal.SIGKILL)
            signalled |= members
            await trio.sleep(_POLL / 4)
        await self._proc.wait()
        # A dying process hides its environment before it is a zombie: wait for the deaths.
        for _ in range(int(_DEATH_WAIT / (_POLL / 4))):
            signalled = {pid for pid in signalled if not _is_zombie(pid)}
            if not signalled:
                break
            await trio.sleep(_POLL / 4)


_PHASE_STEP = {"term": "sigterm", "kill": "sigkill", "lost": "sigkill"}


class _ShimProcess(SandboxedProcess):
    """The plugin runs under a supervisor shim (the ``"shim"`` layer)."""

    def __init__(
        self,
        shim: _ProcessHandle,
        pid: int,
        token: str,
        lifeline: trio.lowlevel.FdStream,
        control: _ControlReader,
        *,
        isolation: tuple[str, ...],
    ) -> None:
        super().__init__(shim, pid, token)
        self.shim_pid = shim.pid
        self.isolation = isolation
        self._lifeline = lifeline
        self._control = control
        self._wait_lock = trio.Lock()
        self._returncode: int | None = None
        self._exit_phase = ""
        self._exit_time = 0.0

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def wait(self) -> int:
        async with self._wait_lock:
            while self._returncode is None:
                line = await self._control.line()
                if line is None:
                    await self._lost()
                    break
                words = line.split()
                if len(words) == 4 and words[0] == "exit":
                    self._returncode = int(words[1])
                    self._exit_phase = words[2]
                    self._exit_time = float(words[3])
        assert self._returncode is not None
        return self._returncode

    async def _lost(self) -> None:
        """The control pipe ended without an ``exit`` line: the shim died."""
        noticed = time.monotonic()
        await self._proc.wait()
        # Its child had PR_SET_PDEATHSIG(SIGKILL); wait until the kernel has delivered it.
        for _ in range(int(_SHIM_SLACK / (_POLL / 4))):
            if not _alive(self.pid):
                break
            await trio.sleep(_POLL / 4)
        self._returncode = -signal.SIGKILL
        self._exit_phase = "lost"
        self._exit_time = noticed

    async def _ask_stop(self, grace: float) -> None:
        try:
            await self._lifeline.send_all(f"stop {grace:.3f}\n".encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError, OSError):
            with contextlib.suppress(ProcessLookupError):
                self._proc.terminate()

    async def _stop(self, grace: float) -> StopReport:
        started = time.monotonic()
        await self._close_stdin()
        if self._returncode is None:
            with trio.move_on_after(grace):
                await self.wait()
        if self._returncode is None:
            await self._ask_stop(grace)
            with trio.move_on_after(grace + _SHIM_SLACK):
                await self.wait()
        if self._returncode is None:  # the shim does not answer: end it; PDEATHSIG ends the plugin
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            with trio.move_on_after(_SHIM_SLACK):
                await self.wait()
        # The shim exits by itself once waitpid says ECHILD.
        with trio.move_on_after(_SHIM_SLACK):
            await self._proc.wait()
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            await self._proc.wait()
        # With "pidns" a shim that exited by itself has reaped the namespace's pid 1, and the kernel
        # returns that only once every process of the namespace is gone: nothing can be left to sweep.
        # Otherwise (no pid namespace, or a shim that had to be killed) sweep by token: belt and braces
        # for what escaped the shim's own sweep; a tree that clears its environment escapes this too.
        contained = "pidns" in self.isolation and self._proc.returncode is not None and self._proc.returncode >= 0
        if not contained:
            await trio.to_thread.run_sync(sweep_leftovers, self.token)
        await self._lifeline.aclose()
        await self._control.stream.aclose()
        if self.cgroup is not None:  # whatever is still inside is killed, then the folder goes
            await trio.to_thread.run_sync(self.cgroup.remove)

        if self._returncode is not None and self._exit_time < started:
            step = "already-exited"
        else:
            step = _PHASE_STEP.get(self._exit_phase, "stdin-eof" if self._exit_phase == "run" else "sigkill")
        return StopReport(step=step, returncode=self._returncode, seconds=time.monotonic() - started)


def _exec_failed(launch: Launch, detail: str) -> LaunchError:
    return LaunchError(
        "EXEC_FAILED", launch.command, f"cannot start {launch.command!r} ({launch.executable}): {detail}"
    )


#: Error stages of the shim that mean "a layer could not be applied".
_LAYER_STAGES = frozenset(
    {
        "rlimits",
        "no_new_privs",
        "netns",
        "netproxy",
        "userns",
        "pidns",
        "private-proc",
        "landlock",
        "seccomp",
        "layers",
        "load",
        "pdeathsig",
        "setsid",
        "init",
        "pid",
        "cgroup",
    }
)


def _spec(launch: Launch, env: dict[str, str], proxy_socket: str | None = None) -> bytes:
    layers = [layer for layer in launch.isolation if layer != "shim"]
    spec: dict[str, object] = {
        "executable": launch.executable,
        "argv": launch.argv,
        "cwd": launch.cwd,
        "env": env,
        "layers": layers,
        "nofile": NOFILE_LIMIT,
        "grace": 2.0,
    }
    plugin_soft = plugin_nofile_soft()
    if plugin_soft is not None:
        spec["nofile_soft"] = plugin_soft
    plan = launch.plan or IsolationPlan(tmpdir="")
    if any(layer.startswith("landlock-") for layer in layers):
        if launch.plan is None:
            raise _isolation_failed(launch, "Landlock layers need launch.plan (from resolve_launch with a policy)")
        try:  # at every start: a plugin may have swapped its TMPDIR or data folder for a link since the last
            for folder in (plan.tmpdir, plan.data_dir):
                if folder:
                    ensure_private_dir(folder)
            if launch.home is not None:  # and its entries leading to the real HOME (sandbox/home_view.py)
                make_view(launch.home)
        except (OSError, PathRefused) as exc:
            raise _isolation_failed(launch, f"private folder: {exc}") from exc
        rules: dict[str, object] = dict(plan.rule_lists())
        rules["tcp_connect"] = list(plan.tcp_ports)
        spec["landlock"] = rules
    if "seccomp" in layers:
        spec["seccomp"] = {"deny_unix_sockets": plan.deny_unix_sockets}
    if "netproxy" in layers:
        if proxy_socket is None:
            raise _isolation_failed(launch, "netproxy needs the proxy's Unix socket (spawn's proxy_socket)")
        hosts = launch.network[0] if launch.network is not None else ()
        spec["proxy"] = {"socket": proxy_socket, "port": PROXY_PORT, "ports": transparent_ports(hosts)}
    try:  # secrets as 0600 files in the plugin's TMPDIR (emptied before this start and after it stops)
        for path, value in launch.secret_files:
            ensure_private_dir(os.path.dirname(path))
            write_private_file(path, value)
    except (OSError, PathRefused) as exc:
        raise _isolation_failed(launch, f"secret file: {exc}") from exc
    return json.dumps(spec).encode("ascii") + b"\n"


def _isolation_failed(launch: Launch, detail: str) -> LaunchError:
    return LaunchError(
        "ISOLATION_FAILED",
        launch.command,
        f"cannot isolate {launch.command!r} ({launch.executable}) as {','.join(launch.isolation)}: {detail}",
    )


async def _tree_cgroup(
    launch: Launch, token: str, limits: IsolationPolicy | None
) -> tuple[cgroups.Mechanism, cgroups.TreeCgroup | None]:
    """The tree's cgroup (:mod:`sandbox.cgroups`) when ``limits`` are given and a backend is usable.

    Without ``limits`` it returns at once, with no checkpoint (a spawn without limits reaches the fork
    server as it did before). The detection is cached (a few small reads once), so it runs inline.
    """
    if limits is None:
        return cgroups.Mechanism("watchdog", "no limits given to spawn"), None
    mechanism = cgroups.detect()
    if not mechanism.usable:
        return mechanism, None
    bounds = cgroups.TreeLimits(memory_bytes=limits.max_rss_bytes, pids=limits.max_pids or cgroups.DEFAULT_MAX_PIDS)
    try:
        made = await trio.to_thread.run_sync(cgroups.create, mechanism, token, bounds)
    except cgroups.CgroupError as exc:
        raise _isolation_failed(launch, str(exc)) from exc
    return mechanism, made


async def _spawn_shim(
    launch: Launch, token: str, env: dict[str, str], limits: IsolationPolicy | None, proxy_socket: str | None = None
) -> SandboxedProcess:
    if not sys.executable:
        raise _exec_failed(launch, "no Python interpreter for the supervisor shim (sys.executable is empty)")
    spec = _spec(launch, env, proxy_socket)  # before anything starts: it may refuse the launch
    mechanism, cgroup = await _tree_cgroup(launch, token, limits)
    try:
        if cgroup is not None:
            spec = json.dumps({**json.loads(spec), "cgroup": cgroup.procs_files}).encode("ascii") + b"\n"
        if SHIM_START == "fork":
            shim, lifeline, control = await _fork_shim(launch, token)
        else:
            shim, lifeline, control = await _exec_shim(launch, token)
        process = await _start_plugin(launch, token, spec, shim=shim, lifeline=lifeline, control=control)
    except BaseException:
        if cgroup is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(cgroup.remove)
        raise
    process.cgroup = cgroup
    process.accounting = mechanism
    return process


async def _exec_shim(launch: Launch, token: str) -> tuple[_ProcessHandle, trio.lowlevel.FdStream, _ControlReader]:
    """A fresh ``python -I -S shim.py LIFELINE CONTROL`` (``SHIM_START == "exec"``)."""
    lifeline_r, lifeline_w = os.pipe()
    control_r, control_w = os.pipe()
    try:
        command, options = _shim_command(
            [str(lifeline_r), str(control_w)], {TOKEN_VAR: token}, subprocess.PIPE, lifeline_r, control_w
        )
        shim = await trio.lowlevel.open_process(command, **options)
    except BaseException as exc:
        os.close(lifeline_w)
        os.close(control_r)
        if isinstance(exc, OSError):
            raise _exec_failed(launch, f"supervisor shim: {exc.strerror or exc}") from exc
        raise
    finally:
        os.close(lifeline_r)
        os.close(control_w)
    return shim, trio.lowlevel.FdStream(lifeline_w), _ControlReader(trio.lowlevel.FdStream(control_r))


async def _fork_shim(launch: Launch, token: str) -> tuple[_ProcessHandle, trio.lowlevel.FdStream, _ControlReader]:
    """A shim forked by the fork server (``SHIM_START == "fork"``); it reports ``shim <pid>`` first.

    The wait for that line is shielded (a fork takes a millisecond or two):
    a shim whose pid hostd never learnt could not be waited for.
    """
    ends = [os.pipe() for _ in range(5)]  # stdin, stdout, stderr, lifeline, control
    theirs = [ends[0][0], ends[1][1], ends[2][1], ends[3][0], ends[4][1]]
    ours = [ends[0][1], ends[1][0], ends[2][0], ends[3][1], ends[4][0]]
    try:
        await _FORK_SERVER.request(token, theirs)
    except BaseException as exc:
        for fd in ours:
            os.close(fd)
        if isinstance(exc, ConnectionError):  # EPIPE, ECONNRESET: it died between the check and the request
            raise _exec_failed(launch, await _FORK_SERVER.death()) from exc
        if isinstance(exc, OSError):
            raise _exec_failed(launch, f"supervisor fork server: {exc.strerror or exc}") from exc
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    streams = [trio.lowlevel.FdStream(fd) for fd in ours]
    lifeline = streams[3]
    control = _ControlReader(streams[4])
    line: str | None = None
    with trio.CancelScope(shield=True):
        with trio.move_on_after(SPAWN_TIMEOUT):
            line = await control.line()
        words = (line or "").split()
        pidfd = -1
        if len(words) == 2 and words[0] == "shim" and words[1].isdigit():
            with contextlib.suppress(OSError):
                pidfd = os.pidfd_open(int(words[1]))
        if pidfd < 0:
            if line is None:
                detail = await _FORK_SERVER.death()
            elif words[:1] == ["error"]:
                _, stage, code, *text = [*line.split(" ", 3), ""]
                detail = f"supervisor fork server: {text[0]} (errno {code}, at {stage})"
            else:
                detail = f"supervisor shim: unexpected first line {line!r}"
            for stream in streams:
                await stream.aclose()
            raise _exec_failed(launch, detail)
    shim = _ForkedShim(int(words[1]), pidfd, (streams[0], streams[1], streams[2]), control)
    return shim, lifeline, control


async def _start_plugin(
    launch: Launch,
    token: str,
    spec: bytes,
    *,
    shim: _ProcessHandle,
    lifeline: trio.lowlevel.FdStream,
    control: _ControlReader,
) -> SandboxedProcess:
    """Send the spec to a started shim and wait for its ``pid`` (or ``error``) line."""
    line: str | None = None
    try:
        with trio.move_on_after(SPAWN_TIMEOUT):
            await lifeline.send_all(spec)
            line = await control.line()
        if line is not None and line.startswith("pid "):
            words = line.split()
            applied = order_layers(words[2].split(",") if len(words) > 2 else ["shim"])
            missing = [layer for layer in launch.isolation if layer not in applied]
            if not missing:
                return _ShimProcess(shim, int(words[1]), token, lifeline, control, isolation=applied)
            line = f"error layers 0 the shim reports {','.join(applied)}; missing {','.join(missing)}"
    except BaseException:
        line = None
        with trio.CancelScope(shield=True):
            await _abandon(shim, lifeline, control, token)
        raise
    with trio.CancelScope(shield=True):
        await _abandon(shim, lifeline, control, token)
        stage = ""
        if line is not None and line.startswith("error "):
            _, stage, code, *text = [*line.split(" ", 3), ""]
            detail = f"{text[0]} (errno {code}, at {stage})"
        else:
            tail = b""
            with (
                trio.move_on_after(0.5),
                contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError, OSError),
            ):
                assert shim.stderr is not None
                tail = bytes(await shim.stderr.receive_some(4096))
            detail = f"supervisor shim exited with status {shim.returncode}: {tail.decode(errors='replace')}"
        for stream in (shim.stdin, shim.stdout, shim.stderr):
            if stream is not None:
                await stream.aclose()
    if stage in _LAYER_STAGES:
        raise _isolation_failed(launch, detail)
    raise _exec_failed(launch, detail)


async def _abandon(shim: _ProcessHandle, lifeline: trio.lowlevel.FdStream, control: _ControlReader, token: str) -> None:
    """End a shim whose spawn did not complete: lifeline EOF, then SIGKILL, then a sweep."""
    await lifeline.aclose()
    with trio.move_on_after(_SHIM_SLACK):
        await shim.wait()
    if shim.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            shim.kill()
        await shim.wait()
    await control.stream.aclose()
    await trio.to_thread.run_sync(sweep_leftovers, token)


async def spawn(
    launch: Launch, *, limits: IsolationPolicy | None = None, proxy_socket: str | None = None
) -> SandboxedProcess:
    """Start ``launch`` and return the running :class:`SandboxedProcess`.

    The plugin gets ``launch.env`` plus ``HOSTD_SANDBOX_TOKEN`` (a fresh
    token), ``cwd=launch.cwd``, ``argv = [launch.command, *launch.args]``
    executed from ``launch.executable``, three pipes, its own session and no
    other file descriptors. Never a shell. With ``"shim"`` in
    ``launch.isolation`` it runs under the supervisor shim (forked by the
    fork server, started at the first spawn: a few milliseconds more; the
    first spawn also starts the server, about 20 ms), and the shim's child applies the other listed layers just before
    ``execve``, single-threaded (never from a trio thread, never with
    ``preexec_fn``): ``"rlimits"`` (``RLIMIT_CORE=0``, ``RLIMIT_NOFILE``
    capped at :data:`NOFILE_LIMIT`), ``"no_new_privs"``, ``"netns"`` or ``"userns"``, ``"pidns"``
    (the tree in a pid namespace of its own: nothing of it outlives the stop),
    ``"landlock-fs"`` / ``"landlock-net"`` / ``"landlock-scope"`` (the real
    paths ``launch.plan.rules`` pinned at resolution; the plan's ``TMPDIR``
    and data folder are checked again first, see
    :func:`sandbox.paths.ensure_private_dir`) and ``"seccomp"``; see
    ``sandbox/README.md``. Every layer other than ``"shim"`` needs the shim.
    ``"netproxy"`` (with ``pidns``): the namespace's loopback listener on
    :data:`sandbox.netns.PROXY_PORT` is handed to the Unix socket at
    ``proxy_socket`` (hostd's proxy accepts on it; ``sandbox/_shim_net.py``)
    before the plugin runs, with transparent mode's DNS sockets and listeners
    (:func:`sandbox.netns.transparent_ports`); without ``proxy_socket`` such a
    launch is refused.
    Returns once the plugin's executable is running (exec succeeded), with
    :attr:`SandboxedProcess.isolation` set to what the shim reported applied.
    With ``limits`` (the host's policy) and a usable cgroup backend
    (:func:`sandbox.cgroups.detect`), the tree runs in a cgroup of its own
    bounded by ``limits.max_rss_bytes`` and ``limits.max_pids`` (the shim
    enters it before it forks the plugin; :meth:`SandboxedProcess.stop`
    removes it); :attr:`SandboxedProcess.accounting` says which mechanism
    is in force and why.

    Raises :class:`~sandbox.launch.LaunchError` with ``kind="EXEC_FAILED"``
    when the process cannot be started (the message names the command and
    carries the errno text, e.g. ``"No such file or directory"``, or says
    that the fork server died before it forked the shim, with its exit
    status; the next spawn starts a new server), or
    ``kind="ISOLATION_FAILED"`` when a listed layer could not be applied
    (nothing keeps running). If cancelled midway, whatever was started is
    ended before the cancellation propagates.
    """
    token = _new_token()
    env = dict(launch.env)
    env[TOKEN_VAR] = token
    if "shim" in launch.isolation:
        return await _spawn_shim(launch, token, env, limits, proxy_socket)
    if launch.isolation:
        raise _isolation_failed(launch, "these layers are applied by the supervisor shim, which is not listed")
    try:
        proc = await trio.lowlevel.open_process(
            launch.argv,
            executable=launch.executable,
            cwd=launch.cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise _exec_failed(launch, exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))) from exc
    return _DirectProcess(proc, proc.pid, token)
