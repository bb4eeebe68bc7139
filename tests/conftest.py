"""Shared test harness: a real hostd process, fixture plugins, a leak check."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
import trio
import yaml

from hostd.cli.client import HostdClient, plugin_environment

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
ECHO = FIXTURES / "mcp-echo"
ECHO_TOOLS = ["echo", "fail", "sleep", "large", "environment", "exit", "seen"]


#: The variables that point programs at folders under HOME (XDG base directories, npm's and uv's caches).
_HOME_VARIABLES = (
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "npm_config_cache",
    "UV_CACHE_DIR",
)


def pytest_configure(config: pytest.Config) -> None:
    """Run the suite with a temporary HOME (issue 28: nothing written outside the repository and the
    temporary folder).

    Whatever a test, hostd, a plugin or a tool it runs (npm, uv, node) writes under ``~`` lands in a
    folder of the temporary directory, removed at the end; the user's ``~/.npm``, ``~/.cache`` and
    ``~/.local`` are neither read nor written. Each pytest-xdist worker gets its own.
    """
    home = Path(tempfile.mkdtemp(prefix="hostd-tests-home-"))
    config.stash[_REAL_HOME] = os.environ.get("HOME")
    config.stash[_TEST_HOME] = home
    os.environ["HOME"] = str(home)
    for name in _HOME_VARIABLES:
        os.environ.pop(name, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the temporary HOME and give the real one back."""
    home = config.stash.get(_TEST_HOME, None)
    if home is None:
        return
    shutil.rmtree(home, ignore_errors=True)
    real = config.stash[_REAL_HOME]
    if real is not None:
        os.environ["HOME"] = real


_REAL_HOME = pytest.StashKey[str | None]()
_TEST_HOME = pytest.StashKey[Path]()


def _ours(token: str, mine: set[int]) -> bool:
    """A token ``hs1.<host pid>.…`` belongs to this test run if its host is one of
    our descendants, or is gone (an orphan is a leak whoever made it)."""
    try:
        host = int(token.split(".")[1])
    except (IndexError, ValueError):
        return True
    return host in mine or not psutil.pid_exists(host)


def sandboxed_pids() -> list[psutil.Process]:
    """Live plugin processes (they carry a sandbox token) started by this test run.

    Runs twice around every test, over every process of the machine: each ``/proc/<pid>/environ`` is read as
    bytes and searched for the token (psutil's ``environ()`` decodes the whole environment into a dict: ~3x the
    CPU, paid ~4,400 times a suite); psutil is asked only about the few that carry one."""
    found = []
    mine: set[int] | None = None  # our descendants, listed only when a token is found
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                variables = environ.read()
        except OSError:  # gone, or not ours to read
            continue
        at = variables.find(_TOKEN_VARIABLE)
        if at < 0 or (at > 0 and variables[at - 1] != 0):
            continue
        token = variables[at + len(_TOKEN_VARIABLE) :].split(b"\0", 1)[0].decode("utf-8", "replace")
        try:
            proc = psutil.Process(int(entry.name))
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if mine is None:
                mine = {p.pid for p in psutil.Process().children(recursive=True)} | {os.getpid()}
            if _ours(token, mine):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


#: How the token's variable begins in ``/proc/<pid>/environ`` (NUL-separated ``NAME=value`` entries).
_TOKEN_VARIABLE = b"HOSTD_SANDBOX_TOKEN="


@pytest.fixture(autouse=True)
def no_plugin_left_behind() -> Iterator[None]:
    """Fail any test that leaves a plugin process alive (and clean it up)."""
    before = {p.pid for p in sandboxed_pids()}
    yield
    leaked: list[psutil.Process] = []
    for _ in range(40):
        leaked = [p for p in sandboxed_pids() if p.pid not in before]
        if not leaked:
            return
        psutil.wait_procs(leaked, timeout=0.05)
    details = []
    for proc in leaked:
        try:
            details.append((proc.pid, proc.cmdline()))
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    pytest.fail(f"plugin processes left alive: {details}")


MakePlugin = Callable[..., Path]


@pytest.fixture
def make_plugin(tmp_path: Path) -> MakePlugin:
    """Copy the echo fixture into a fresh folder, as plugin ``plugin_id`` running ``variant``.

    Keyword overrides: ``tools`` (remote names for contributes), ``backend``
    (merged into backend), ``permissions``, ``args`` (extra server args).
    """

    def make(
        plugin_id: str = "mcp-echo",
        variant: str | None = None,
        *,
        tools: list[str] | None = None,
        backend: dict[str, Any] | None = None,
        permissions: list[str] | None = None,
        args: list[str] | None = None,
    ) -> Path:
        folder = tmp_path / f"{plugin_id}-{variant or 'plain'}"
        folder.mkdir()
        shutil.copy(ECHO / "server.py", folder / "server.py")
        server_args = ["server.py"]
        if variant is not None:
            server_args += ["--variant", variant]
        server_args += args or []
        manifest: dict[str, Any] = {
            "id": plugin_id,
            "name": f"Echo fixture ({variant or 'plain'})",
            "version": "1.0.0",
            "permissions": permissions if permissions is not None else ["echo.use", "echo.inspect"],
            "contributes": {"tools": [f"{plugin_id}.{t}" for t in (tools if tools is not None else ECHO_TOOLS)]},
            "backend": {
                "type": "mcp",
                "transport": "stdio",
                "command": "python3",
                "args": server_args,
                "env": {},
                "startup_timeout_seconds": 10,
                "tool_timeout_seconds": 10,
                **(backend or {}),
            },
        }
        (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        return folder

    return make


def stdio_plugin(
    folder: Path,
    source: Path,
    name: str,
    *,
    tools: Iterable[str],
    permissions: list[str],
    backend: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    """Make ``folder`` the plugin ``folder.name`` running ``source/server.py`` (copied in) as ``python3 server.py``
    over stdio, called ``name``.

    ``tools``: the remote tool names it contributes (``plugin_id.`` is prefixed); ``backend`` is merged
    into the backend (10 s start and call timeouts unless it says otherwise); ``extra``: more top-level
    manifest keys. Returns ``folder``.
    """
    folder.mkdir()
    shutil.copy(source / "server.py", folder / "server.py")
    plugin_id = folder.name
    manifest = {
        "id": plugin_id,
        "name": name,
        "version": "1",
        "permissions": permissions,
        "contributes": {"tools": [f"{plugin_id}.{t}" for t in tools]},
        "backend": {
            "type": "mcp",
            "transport": "stdio",
            "command": "python3",
            "args": ["server.py"],
            "startup_timeout_seconds": 10,
            "tool_timeout_seconds": 10,
            **(backend or {}),
        },
        **extra,
    }
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


def hostd_with_home(tmp_path: Path, home: Path) -> Any:
    """``HostdClient.spawn`` for tests of the default level: no grant flags, state under ``tmp_path``,
    ``HOME`` (and so ``~`` in grants and launches) = ``home``.
    """
    env = {**plugin_environment(), "HOME": str(home)}
    return HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env)


def spawn_hostd(tmp_path: Path, *args: str) -> Any:
    """``HostdClient.spawn`` for tests: state under ``tmp_path``, ``python3`` = this interpreter."""
    # Fixture servers write records and markers under tmp_path/shared: the parent grants that folder
    # (Landlock would refuse it otherwise; tests/test_sandbox_* prove the refusal). Not tmp_path itself:
    # no grant may cover the state folder or a plugin's folder.
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    return HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state"), "--allow-write", str(shared), *args], env=plugin_environment()
    )


@pytest.fixture
async def hostd(tmp_path: Path) -> AsyncIterator[HostdClient]:
    """A running hostd (initialized) whose plugins find this interpreter as ``python3``."""
    async with spawn_hostd(tmp_path) as client:
        yield client


async def ready(client: HostdClient, folder: Path, grant: list[str] | None = None) -> dict[str, Any]:
    """install -> grant ``grant`` (None: everything declared) -> approve -> enable; return the status."""
    info = await client.request("plugins/install", {"path": str(folder)})
    permissions = info["permissions"] if grant is None else grant
    await client.request("plugins/grant", {"id": info["id"], "permissions": permissions})
    await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    status: dict[str, Any] = await client.request("plugins/enable", {"id": info["id"]})
    return status


async def run_quietly(
    argv: Sequence[str], *, env: dict[str, str] | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``argv`` run from the repository root with stdin empty (no terminal) and ``env`` (None: this process's
    environment); returncode and both streams as text.

    Raises ``trio.TooSlowError`` after ``timeout`` seconds (the process is killed); cancellation kills it
    likewise."""
    with trio.fail_after(timeout):
        done = await trio.run_process(
            list(argv),
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


#: hostctl as :func:`run_hostctl` runs it, as its ``next:`` hints name it (hostd.cli.render.invoked_as).
HOSTCTL = shlex.join([sys.executable, "-m", "hostd.cli.hostctl"])


async def run_hostctl(
    state: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m hostd.cli.hostctl *args --state-dir state`` run by :func:`run_quietly` (``env``, ``timeout``).

    The one way tests run hostctl as a person would."""
    argv = [sys.executable, "-m", "hostd.cli.hostctl", *args, "--state-dir", str(state)]
    return await run_quietly(argv, env=env, timeout=timeout)


async def hostctl_on_a_terminal(
    state: Path, answer: bytes, prompt: bytes, *args: str, env: dict[str, str] | None = None, columns: int = 200
) -> tuple[int, str]:
    """``python -m hostd.cli.hostctl *args --state-dir state`` with a pseudo-terminal as stdin, stdout and
    stderr (a person's terminal, ``columns`` wide; ``env``: this process's environment when None); ``answer``
    is typed once ``prompt`` is on the screen. Returns (exit code, screen). Fails after 120 s."""
    master, slave = os.openpty()
    screen = bytearray()
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "hostd.cli.hostctl", *args, "--state-dir", str(state)],
            cwd=ROOT,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**(os.environ if env is None else env), "TERM": "xterm-256color", "COLUMNS": str(columns)},
        )
    finally:
        os.close(slave)
    terminal = trio.lowlevel.FdStream(master)
    answered = False
    with trio.fail_after(120):
        while True:
            try:
                data = await terminal.receive_some(65536)
            except trio.BrokenResourceError:  # EIO: every writer of the terminal has closed it
                data = b""
            if not data:
                break
            screen += data
            if not answered and prompt in screen:
                await terminal.send_all(answer)
                answered = True
        code = await process.wait()
    await terminal.aclose()
    return code, screen.decode(errors="replace")
