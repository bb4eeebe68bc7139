"""The installer sandbox and its bounded runner: how every installer run of a preparation is started.

What lives here: :class:`InstallerSandbox` (where one preparation's installer runs may write and read, its
:class:`~sandbox.policy.IsolationPolicy`), :func:`installer_environment` (the trimmed environment), ``_run``
(one installer as a sandboxed process tree, bounded in time, disk and output: ``_BoundedOutput``),
``_failure`` (a precise :class:`~hostd.install.packages.PrepareError` from an installer's exit and output)
and :func:`find_installer` / :class:`Installer` (which uv, npm, node or deno hostd runs). The per-ecosystem
installers (:mod:`hostd.install.ecosystems`) and the orchestration (:mod:`hostd.install.prepare`) use it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import trio

from hostd.install.installer_network import InstallerNetwork, RegistryHosts, upstream_proxy
from hostd.install.packages import PackageLaunch, PrepareError
from sandbox.environment import EnvPolicy
from sandbox.launch import Launch, LaunchError, resolve_launch
from sandbox.policy import IsolationPolicy, plan_layers, runtime_read_paths
from sandbox.probe import Capability, probe
from sandbox.process import SandboxedProcess
from sandbox.watchdog import watch

__all__ = [
    "INSTALL_DISK_BYTES",
    "INSTALL_TIMEOUT",
    "OUTPUT_BOUND",
    "Installer",
    "InstallerName",
    "InstallerSandbox",
    "find_installer",
    "installer_environment",
]

#: Bytes of an installer's output kept (the first and last parts); the rest is dropped.
OUTPUT_BOUND = 64 * 1024
#: Seconds one installer may run before it is ended (a stuck registry connection).
INSTALL_TIMEOUT = 600.0
#: Bytes an installer may allocate beneath the folders it may write (environment, caches, HOME, TMPDIR).
INSTALL_DISK_BYTES = 4 * 1024**3


#: What an installer keeps of hostd's environment: finding programs, locale, and what a real network
#: needs (proxy, CA). Nothing else passes; ``HOME`` is replaced by an empty folder of the plugin's own
#: (:func:`installer_home`), so no ``~/.npmrc``, ``pip.conf``, ``uv.toml`` or ``.gitconfig`` of the user
#: is read: registry mirrors and CA settings come from hostd's own options.
_INSTALLER_ENV = (
    "PATH",
    "LANG",
    "LC_ALL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
)


def installer_environment(base: Mapping[str, str], **extra: str) -> dict[str, str]:
    """The trimmed environment of an installer: :data:`_INSTALLER_ENV` of ``base``, plus ``extra``."""
    env = {k: base[k] for k in _INSTALLER_ENV if k in base}
    env.update(extra)
    return env


@dataclass(frozen=True)
class InstallerSandbox:
    """Where one preparation's installer runs may write, and what else they may read.

    The fault class this closes: *package text that makes an installer run code of the package's
    choice on the host* (an install script turned back on, a ``.pth`` file started by the new
    environment's interpreter, a build backend of a source distribution, an interpreter inside the
    package's folder probed by ``uv venv``). Each member is also closed at its own root (no option
    from package text, wheels only, no interpreter of the new environment started, ``--python`` a
    version hostd resolves); this is the layer under all of them: every installer run (npm, uv, deno,
    the bytecode compile) is a sandboxed process tree (:func:`sandbox.process.spawn`: the shim,
    Landlock, seccomp, user and pid namespaces, rlimits, the tree kill) that may write only
    ``writable`` (the environment folder being filled, the plugin's installer caches, its private
    ``HOME`` and ``TMPDIR``), read the system and runtime folders plus ``readable``, and reach the
    registries in use only, through hostd's proxy (:mod:`hostd.install.installer_network`).
    ``state_dir``: hostd's state folder (no rule may cover it). ``network``: the preparation's record of
    what its runs reached and what the proxy refused (shared by copies made with ``dataclasses.replace``).
    """

    state_dir: Path
    base: Path
    writable: tuple[str, ...]
    readable: tuple[str, ...] = ()
    network: InstallerNetwork | None = field(default=None, compare=False)

    @property
    def home(self) -> Path:
        """The installer's ``HOME``: an empty folder of the plugin's own, made anew for each preparation."""
        return self.base / "home"

    @property
    def tmpdir(self) -> Path:
        """The installer's ``TMPDIR``."""
        return self.base / "tmp"

    @property
    def cwd(self) -> Path:
        """The working folder: empty, read-only (no installer finds a project file of anyone's there)."""
        return self.base / "work"

    def proxied(
        self, hosts: RegistryHosts, environ: Mapping[str, str], capabilities: Sequence[Capability] | None = None
    ) -> bool:
        """Whether a run reaching ``hosts`` goes through hostd's proxy: ``environ`` (the installer's, from
        hostd's) names no proxy of its own and ``capabilities`` (default: this machine's,
        :func:`sandbox.probe.probe`, cached after its first call: blocking) allow the ``netproxy`` layer."""
        if upstream_proxy(environ) is not None:
            return False
        return "netproxy" in plan_layers(self.policy(hosts), probe() if capabilities is None else capabilities)

    def reached(self) -> str:
        """What the runs so far reached through hostd's proxy, as the progress says it (``""``: nothing)."""
        return self.network.summary() if self.network is not None else ""

    def policy(self, hosts: RegistryHosts | None = None) -> IsolationPolicy:
        """The installer's :class:`~sandbox.policy.IsolationPolicy`: ``hosts`` its allowlist (the ``netproxy``
        layer where the kernel allows it), or ``None`` for the network as it is (an upstream proxy to use)."""
        state = os.path.realpath(self.state_dir)
        return IsolationPolicy(
            landlock=True,
            network="allow",
            proxy_hosts=hosts.entries if hosts is not None else None,
            proxy_private=hosts.private if hosts is not None else (),
            seccomp=True,
            max_disk_bytes=INSTALL_DISK_BYTES,
            extra_read_paths=tuple(self.readable),
            extra_write_paths=tuple(os.path.realpath(p) for p in self.writable),
            protected_paths=(state, os.path.realpath(Path.home())),
            # What plugins may write at run time: no link there may redirect an installer's rule.
            writable_paths=(os.path.join(state, "data"), os.path.join(state, "tmp")),
        )


def _remove_installer_folders(sandbox: InstallerSandbox) -> None:
    """Delete the installer's ``HOME``, ``TMPDIR`` and working folder (scratch of one preparation). Blocking."""
    for folder in (sandbox.home, sandbox.tmpdir, sandbox.cwd):
        shutil.rmtree(folder, ignore_errors=True)


def _installer_folders(sandbox: InstallerSandbox) -> None:
    """A fresh empty ``HOME``, ``TMPDIR`` and working folder (mode 0700) for one preparation. Blocking."""
    for folder in (sandbox.home, sandbox.tmpdir, sandbox.cwd):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700, parents=True)


async def _run(
    sandbox: InstallerSandbox, argv: Sequence[str], env: Mapping[str, str], hosts: RegistryHosts | None = None
) -> tuple[int, list[str]]:
    """Run ``argv`` as a sandboxed process tree; return its exit code and its output's lines, bounded.

    ``argv[0]`` is an absolute program hostd found itself (never package text); ``env``: the
    variables the installer needs besides the allowlist (registry, cache folders); ``HOME`` and
    ``TMPDIR`` are the sandbox's. ``hosts``: the registries this run may reach
    (:func:`hostd.install.installer_network.registry_hosts`; ``None``: none, as ``uv venv`` and the
    compile), through hostd's proxy where the ``netproxy`` layer is planned (``env`` naming a proxy of
    hostd's own network keeps the network as it is: module text of :mod:`hostd.install.installer_network`);
    what the proxy let through and refused goes to ``sandbox.network``, each refusal also to its ``log``.
    No shell, stdin closed, the working folder empty. stdout and
    stderr are read together; at most :data:`OUTPUT_BOUND` bytes are kept (the first 8 KiB and
    the last rest). Bounded in time (:data:`INSTALL_TIMEOUT`, then :class:`trio.TooSlowError`)
    and in disk (:data:`INSTALL_DISK_BYTES` beneath the folders it may write: a
    :class:`PrepareError` ``"failed"``). Raises :class:`PrepareError` ``"sandbox"`` when the
    sandbox cannot be set up (a layer the kernel offers fails, a rule path is refused, the namespace's
    listener never reaches hostd): the installer never runs outside it. Cancellation ends the whole
    tree and its proxy (shielded) and propagates.
    """
    hosts = hosts if hosts is not None else RegistryHosts(os.path.basename(argv[0]))
    network = sandbox.network if sandbox.network is not None else InstallerNetwork()
    network.run_refused = []
    policy = sandbox.policy(None if upstream_proxy(env) else hosts)
    host_env = {**env, "HOME": str(sandbox.home)}
    try:
        launch = await trio.to_thread.run_sync(
            lambda: resolve_launch(
                argv[0],
                list(argv[1:]),
                sandbox.cwd,
                {},
                EnvPolicy(pass_proxy=True),
                host_env=host_env,
                tmpdir=str(sandbox.tmpdir),
                isolation_policy=policy,
                host_vars={k: v for k, v in env.items() if k not in _INSTALLER_ENV},
            )
        )
    except LaunchError as exc:
        raise PrepareError("sandbox", f"cannot start {os.path.basename(argv[0])} in the sandbox: {exc}") from None
    process, listener = await _spawn(launch, policy, os.path.basename(argv[0]))
    output = _BoundedOutput()
    hit: list[str] = []
    try:
        async with trio.open_nursery() as logs:  # a refusal's log line is sent even as the run ends
            with trio.fail_after(INSTALL_TIMEOUT):
                async with trio.open_nursery() as nursery:
                    if listener is not None:
                        from hostd.install.registry_proxy import RegistryProxy  # noqa: PLC0415 (runs only)

                        proxy = RegistryProxy(sandbox.base.name, hosts, network, logs)  # base: prepared/<id>
                        nursery.start_soon(proxy.serve, listener)
                    nursery.start_soon(_watch_disk, process, policy, [*sandbox.writable, str(sandbox.tmpdir)], hit)
                    async with trio.open_nursery() as readers:
                        readers.start_soon(output.drain, process.stdout)
                        readers.start_soon(output.drain, process.stderr)
                        await process.stdin.aclose()
                    code = await process.wait()
                    nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await process.stop(grace=0.5)
            if listener is not None:
                await listener.aclose()  # closed by the proxy's serve already, unless it never started
    if hit:
        raise PrepareError("failed", f"{os.path.basename(argv[0])}: {hit[0]}", output=output.lines()[-20:])
    return code, output.lines()


async def _spawn(
    launch: Launch, policy: IsolationPolicy, name: str
) -> tuple[SandboxedProcess, trio.SocketListener | None]:
    """Spawn ``launch``; with ``netproxy`` also take its namespace's listener (:mod:`hostd.net.handoff`), which
    hostd's proxy then serves. Raises :class:`PrepareError` ``"sandbox"`` (the tree is ended first)."""
    from hostd.net.handoff import HandoffError, spawn_handing_off  # noqa: PLC0415 (an installer run only)

    try:
        # A cgroup where usable: its tasks bounded (issue 29).
        process, received = await spawn_handing_off(launch, policy)
    except LaunchError as exc:
        raise PrepareError("sandbox", f"cannot start {name} in the sandbox: {exc}") from None
    except HandoffError as exc:
        raise PrepareError("sandbox", f"cannot start {name} in the sandbox: netproxy: {exc}") from None
    if received is None:
        return process, None
    # The installers (npm, uv, deno) all go through HTTPS_PROXY (tests/test_prepare_network.py proves each):
    # the transparent mode's DNS sockets and listeners are not served for them, and closed here, so a direct
    # connection or a name lookup inside fails at once rather than waiting.
    for sock in received.dns:
        sock.close()
    for listener in received.transparent:
        listener.socket.close()
    return process, received.listener


async def _watch_disk(process: SandboxedProcess, policy: IsolationPolicy, paths: list[str], hit: list[str]) -> None:
    """Kill ``process``'s tree when the folders it may write pass the policy's disk bound, or (under a
    cgroup) the kernel refused a fork or killed a process for memory (``hit`` says why)."""
    found = await watch(process, policy, disk_paths=paths)
    hit.append(found.message)
    process.kill_now()


class _BoundedOutput:
    """An installer's stdout and stderr, kept to :data:`OUTPUT_BOUND` bytes (the head and the tail)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = False

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to its end, keeping the first 8 KiB and the last bytes of it."""
        async with stream:
            while chunk := await stream.receive_some(65536):
                if len(self.head) < 8192:
                    take = 8192 - len(self.head)
                    self.head += chunk[:take]
                    chunk = chunk[take:]
                self.tail += chunk
                if len(self.tail) > OUTPUT_BOUND - 8192:
                    del self.tail[: len(self.tail) - (OUTPUT_BOUND - 8192)]
                    self.dropped = True

    def lines(self) -> list[str]:
        """The kept output as non-empty lines (``"..."`` where bytes were dropped)."""
        lines = self.head.decode(errors="replace").splitlines()
        if self.dropped:
            lines.append("...")
        lines += self.tail.decode(errors="replace").splitlines()
        return [line.rstrip() for line in lines if line.strip()]


#: Words of npm's and uv's output that say the registry was not reached.
_UNREACHABLE = re.compile(
    r"ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|ECONNRESET|EHOSTUNREACH|ENETUNREACH|"
    r"[Cc]onnection refused|dns error|[Ff]ailed to connect|timed out|[Nn]etwork is unreachable|"
    r"tcp connect error|error sending request|certificate|_CERT_|UnknownIssuer"
)
_NOT_FOUND = re.compile(
    r"E404|ETARGET|No matching version|not found in the package registry|No solution found|"
    r"package '[^']*' does not exist|Could not find npm package|Could not find version|Could not find package"
)


def _failure(
    what: str,
    code: int,
    output: list[str],
    registry: str,
    sandbox: InstallerSandbox | None = None,
    *,
    hosts: RegistryHosts | None = None,
) -> PrepareError:
    """A precise :class:`PrepareError` from an installer's exit and output; first from what hostd's proxy refused
    the run (``sandbox.network``, ``hosts`` its allowlist: :meth:`InstallerNetwork.failure`), whose words are
    exact where the installer's are a status line."""
    if sandbox is not None and sandbox.network is not None and hosts is not None:
        refused = sandbox.network.failure(what, hosts, registry, output)
        if refused is not None:
            return refused
    # The most telling line: npm's "request to URL failed, reason: ...", else uv's innermost cause (the last).
    hits = [line for line in output if _UNREACHABLE.search(line)]
    cause = next((line for line in hits if "reason:" in line), hits[-1] if hits else None)
    if cause is not None:
        said = cause.strip().removeprefix("npm error ").removeprefix("cause: ")
        return PrepareError(
            "unreachable", f"{what}: cannot reach {registry}: {said}", output=output[-20:], registry=registry
        )
    # npm says "npm error code ETARGET" first, then the sentence ("No matching version found for ...").
    hits = [line for line in output if _NOT_FOUND.search(line)]
    cause = next((line for line in hits if not re.search(r"error (?:code|errno) ", line)), hits[0] if hits else None)
    if cause is not None:
        return PrepareError(
            "not-found",
            f"{what}: {registry} does not serve it: {cause.strip().removeprefix('npm error ')}",
            output=output[-20:],
            registry=registry,
        )
    # npm ends with "A complete log of this run can be found in ...": the cause is an earlier line.
    telling = [line for line in output if "error" in line.lower() and "complete log" not in line]
    last = telling[-1] if telling else output[-1] if output else "no output"
    return PrepareError(
        "failed", f"{what}: the installer exited {code}: {last}", output=output[-20:], registry=registry
    )


InstallerName = Literal["uv", "npm", "node", "deno"]


@dataclass(frozen=True)
class Installer:
    """A package tool :func:`find_installer` chose: its ``name``, absolute ``executable`` (not resolved: a
    link stays the link, as its runtime finds itself through it) and ``source``, where it was found (words
    for ``hostd doctor``)."""

    name: InstallerName
    executable: str
    source: str


def find_installer(name: InstallerName, path: str) -> Installer | str:
    """The installer hostd runs for ``name``, or why there is none (a sentence naming every place looked at).

    ``path`` is the ``PATH`` (``os.pathsep``-separated) the launch's commands are found on. The
    installers come with hostd, so that a user without a uv of their own can prepare Python packages:

    - ``uv``: the ``uv`` next to hostd's own interpreter (``Path(sys.executable).parent / "uv"``: the
      runtime dependency's binary in hostd's environment), else the ``uv`` package's
      ``uv.find_uv_bin()`` (its other install layouts), else the first on ``path``;
    - ``npm``: the npm that came with the ``node`` found on ``path`` (``npm`` beside ``node``, beside
      its real path, in its prefix's ``bin``, or the prefix's ``lib/node_modules/npm/bin/npm-cli.js``),
      so the npm matches the node that will run the package; else the first ``npm`` on ``path``;
    - ``node`` and ``deno``: the first on ``path``.

    A candidate must be a regular file (after links) with execute permission. Blocking (a few
    ``stat`` calls); runs nothing. Source: issue 23 ("the installers hostd needs come with it").
    """
    import sys  # noqa: PLC0415 - kept in this function's area of the module (issue 23 works in parallel)

    looked: list[str] = []

    def usable(candidate: str) -> bool:
        looked.append(candidate)
        return os.path.isfile(candidate) and os.access(candidate, os.X_OK)

    if name == "uv":
        own = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "uv")
        if usable(own):
            return Installer("uv", own, "next to hostd's Python")
        try:
            from uv import find_uv_bin  # noqa: PLC0415 - the uv wheel's own finder, when importable

            packaged: str | None = os.path.abspath(find_uv_bin())
        except (ImportError, FileNotFoundError):  # uv.UvNotFound is a FileNotFoundError
            packaged = None
        if packaged is not None and usable(packaged):
            return Installer("uv", packaged, "the uv package of hostd's Python")
    if name == "npm":
        node = shutil.which("node", path=path)
        if node is not None:
            node = os.path.abspath(node)
            real = os.path.realpath(node)
            prefix = os.path.dirname(os.path.dirname(real))
            beside = [
                os.path.join(os.path.dirname(node), "npm"),
                os.path.join(os.path.dirname(real), "npm"),
                os.path.join(prefix, "bin", "npm"),
                os.path.join(prefix, "lib", "node_modules", "npm", "bin", "npm-cli.js"),
            ]
            for candidate in dict.fromkeys(beside):
                if usable(candidate):
                    return Installer("npm", candidate, f"with node {node}")
    found = shutil.which(name, path=path)
    if found is not None:
        return Installer(name, os.path.abspath(found), "PATH")
    places = "".join(f"{place}, " for place in looked)
    return f"{name} not found ({places}PATH={path})"


def _tool(name: InstallerName, path: str, launch: PackageLaunch) -> str:
    """The executable of installer ``name`` (:func:`find_installer`); ``PrepareError`` ``tool-missing`` when none."""
    found = find_installer(name, path)
    if isinstance(found, str):
        raise PrepareError("tool-missing", f"cannot prepare {' '.join(launch.packages)}: {found}")
    return found.executable


def _runtime_paths(program: str, path: str) -> list[str]:
    """The folders ``program``'s runtime needs to read (its prefix, its ``#!`` interpreters)."""
    return runtime_read_paths(program, path, os.path.realpath(Path.home()))
