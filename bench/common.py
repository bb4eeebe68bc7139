"""Shared pieces of the benchmarks: statistics, the machine, hostd and plugin set-up, clean-up.

Every process a bench starts is started through this module or through
:mod:`bench.clients` and is ended by an ``async with`` whose exit is shielded
from cancellation; :func:`leftover_processes` is the final check that nothing
survived (``bench/__main__.py`` runs it after every bench).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from hostd.cli.client import HostdClient, plugin_environment
from hostd.install.manifest import load_manifest
from sandbox.environment import EnvPolicy
from sandbox.launch import resolve_launch

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "fixtures" / "mcp-echo"
EVERYTHING = ROOT / "manifests" / "server-everything"
ECHO_TOOLS = ["echo", "fail", "sleep", "large", "environment", "exit", "seen"]
TOKEN_VAR = "HOSTD_SANDBOX_TOKEN"

#: pids of every hostd this run started (their plugin trees carry tokens naming them).
HOSTD_PIDS: set[int] = set()
#: The private TMPDIR hostd gives each plugin folder this run made (removed with the scratch folder).
PLUGIN_TMPDIRS: list[Path] = []


# -- statistics -----------------------------------------------------------------


def quantile(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted ``ordered`` (linear interpolation between ranks)."""
    if not ordered:
        return float("nan")
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(samples: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/min/max/mean and the count of ``samples`` (any unit; kept as given)."""
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "n": n,
        "p50": quantile(ordered, 0.50),
        "p90": quantile(ordered, 0.90),
        "p99": quantile(ordered, 0.99),
        "min": ordered[0] if n else float("nan"),
        "max": ordered[-1] if n else float("nan"),
        "mean": sum(ordered) / n if n else float("nan"),
    }


def now_us() -> float:
    """A monotonic clock in microseconds."""
    return time.perf_counter_ns() / 1000.0


# -- the machine ----------------------------------------------------------------


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _command_output(argv: Sequence[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine() -> dict[str, Any]:
    """What the numbers were measured on (for the JSON file and the table's header)."""
    commit = _command_output(["git", "rev-parse", "--short", "HEAD"], ROOT)
    dirty = _command_output(["git", "status", "--porcelain", "--untracked-files=no"], ROOT)
    memory = psutil.virtual_memory().total
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "node": _command_output(["node", "--version"]),
        "packages": {
            name: _version(name) for name in ("trio", "mcp", "mcp-types", "orjson", "pydantic", "anyio", "psutil")
        },
        "hostd_commit": None if commit is None else commit + ("+dirty" if dirty else ""),
    }


# -- hostd and plugins ----------------------------------------------------------


def before_option(argv: Sequence[str]) -> tuple[Path | None, list[str]]:
    """``--before TREE`` taken out of ``argv``: (TREE resolved, or None; the other arguments). TREE is another
    checkout of hostd (a ``git worktree`` or ``git archive`` export) a bench measures side by side."""
    args = list(argv)
    if "--before" not in args:
        return None, args
    at = args.index("--before")
    before = Path(args[at + 1]).resolve()
    del args[at : at + 2]
    return before, args


@contextlib.contextmanager
def scratch(prefix: str = "hostd-bench-") -> Iterator[Path]:
    """A temporary folder, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        for tmpdir in PLUGIN_TMPDIRS:
            if tmpdir.is_dir() and not tmpdir.is_symlink() and tmpdir.stat().st_uid == os.geteuid():
                shutil.rmtree(tmpdir, ignore_errors=True)
        PLUGIN_TMPDIRS.clear()


def _note_plugin_folder(folder: Path) -> Path:
    """Remember the TMPDIR hostd will make for ``folder`` (``sandbox.launch.plugin_tmpdir``'s name)."""
    key = hashlib.sha256(str(folder.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    PLUGIN_TMPDIRS.append(Path(tempfile.gettempdir()) / f"hostd-{os.geteuid()}-{key}")
    return folder


@asynccontextmanager
async def open_hostd(state_dir: Path, *args: str) -> AsyncIterator[HostdClient]:
    """A real ``hostd serve`` (initialized), as an embedding application runs it.

    Its environment is :func:`hostd.cli.client.plugin_environment` (a manifest's
    bare ``python3`` is this interpreter); its state lives in ``state_dir``;
    its log goes to our stderr at level ``error``. On exit: shutdown, exit, a
    bounded wait, a kill if needed (:meth:`HostdClient.spawn`).
    """
    async with HostdClient.spawn(
        ["--state-dir", str(state_dir), "--log-level", "error", *args], env=plugin_environment()
    ) as client:
        HOSTD_PIDS.add(client.process.pid)
        yield client


async def install(client: HostdClient, folder: Path) -> dict[str, Any]:
    """install -> prepare (when the launch names a package) -> grant everything declared -> approve
    the launch digest; return the plugin info."""
    info: dict[str, Any] = await client.request("plugins/install", {"path": str(folder)})
    prepare = info["launch"].get("prepare") if info.get("launch") else None
    if prepare is not None and prepare.get("state") == "needed":
        # npx/uvx launches run from a prepared environment (plugins/prepare) or not at all; the
        # approval digest covers the prepared launch, so approve what prepare returns.
        info = await client.request("plugins/prepare", {"id": info["id"]}, timeout=600)
    await client.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
    await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    return info


async def ready(client: HostdClient, folder: Path, *, timeout: float = 150.0) -> dict[str, Any]:
    """install, grant, approve, enable (as ``tests/conftest.py``); return the ``ready`` status."""
    info = await install(client, folder)
    status: dict[str, Any] = await client.request("plugins/enable", {"id": info["id"]}, timeout=timeout)
    if status.get("status") != "ready":
        raise RuntimeError(f"plugin {info['id']} is {status.get('status')} after enable: {status.get('error')}")
    return status


def echo_copy(parent: Path, plugin_id: str = "mcp-echo") -> Path:
    """A copy of the echo fixture as plugin ``plugin_id`` (its own folder, manifest and tool names).

    Benches run plugins from copies in a scratch folder, never from the
    repository: the test suite's leak check ends plugin processes that run
    in the repository, and a test run may share the machine with a bench.
    """
    folder = parent / plugin_id
    folder.mkdir()
    shutil.copy(ECHO / "server.py", folder / "server.py")
    manifest = yaml.safe_load((ECHO / "plugin.yaml").read_text(encoding="utf-8"))
    manifest["id"] = plugin_id
    manifest["name"] = f"Echo fixture copy {plugin_id}"
    manifest["contributes"]["tools"] = [f"{plugin_id}.{tool}" for tool in ECHO_TOOLS]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return _note_plugin_folder(folder)


def everything_copy(parent: Path) -> Path:
    """A copy of the server-everything manifest folder (npx finds the same cached package from anywhere)."""
    folder = parent / "server-everything"
    folder.mkdir()
    shutil.copy(EVERYTHING / "plugin.yaml", folder / "plugin.yaml")
    return _note_plugin_folder(folder)


def everything_unavailable() -> str | None:
    """Why server-everything cannot be benchmarked here, or None when it can."""
    if not (EVERYTHING / "plugin.yaml").is_file():
        return "manifests/server-everything/plugin.yaml is missing"
    if shutil.which("npx") is None:
        return "npx is not installed (Node.js/npm; then run manifests/prepare.sh)"
    return None


@dataclass(frozen=True)
class ServerLaunch:
    """How a plugin's server is started, resolved as hostd resolves it (minus the shim)."""

    executable: str
    argv: list[str]
    cwd: str
    env: dict[str, str]


def resolve_server(folder: Path) -> ServerLaunch:
    """The exact executable, arguments, folder and environment hostd would start for ``folder``.

    Uses hostd's own manifest loader and launch resolution (``sandbox.launch``)
    with hostd's environment (:func:`plugin_environment`), so the direct
    clients start the very same server process hostd does, without the shim
    and without the sandbox token.
    """
    manifest, _ = load_manifest(folder)
    backend = manifest.backend
    assert backend.command is not None, f"{folder} is a remote plugin: nothing to start"
    launch = resolve_launch(
        backend.command, backend.args, folder, backend.env, EnvPolicy(), host_env=plugin_environment()
    )
    return ServerLaunch(executable=launch.executable, argv=launch.argv, cwd=launch.cwd, env=dict(launch.env))


# -- processes ------------------------------------------------------------------


def _issuer(token: str) -> int | None:
    parts = token.split(".")
    return int(parts[1]) if len(parts) == 4 and parts[1].isdigit() else None


def sandbox_processes(hostd_pid: int) -> list[psutil.Process]:
    """Live plugin-side processes (shims and plugin trees) whose sandbox token names ``hostd_pid``."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            token = proc.environ().get(TOKEN_VAR)
            if token is None or _issuer(token) != hostd_pid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def leftover_processes() -> list[psutil.Process]:
    """Processes this run started that are still alive: our descendants, and plugin trees of our hostds."""
    alive: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        for proc in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive[proc.pid] = proc
    for pid in HOSTD_PIDS:
        for proc in sandbox_processes(pid):
            alive[proc.pid] = proc
    return list(alive.values())


def end_leftovers(grace: float = 3.0) -> list[str]:
    """Wait ``grace`` s for stragglers of this run to exit, then kill them by pid; describe them."""
    deadline = time.monotonic() + grace
    leftovers = leftover_processes()
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = leftover_processes()
    described = []
    for proc in leftovers:
        with contextlib.suppress(psutil.Error):
            described.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
            proc.kill()
    psutil.wait_procs(leftovers, timeout=3)
    return described
