"""What ``hostd serve`` loads before a request needs it, and what a module loaded late does when it cannot load.

The class of fault: a module that only some plugins or requests need (the remote stack: httpx2, the
mcp SDK, ``hostd.mcp.transport.http``; bundles, config import, the full ``mcp_types`` models) imported on
the start path or by every stdio plugin's start, so every hostd pays its import time and resident
memory (``docs/performance.md``). A real ``hostd serve`` runs with ``-X importtime``
(``PYTHONPROFILEIMPORTTIME=1``): the interpreter writes one line to stderr for every module it
imports, in any thread, when it imports it. The tests read those lines after hostd exited.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.wire import lazy
from hostd.wire.errors import ErrorKind, HostError
from tests.conftest import ROOT, MakePlugin, ready, run_hostctl
from tests.test_remote import remote_plugin

#: Loaded by no hostd that runs only stdio plugins installed from folders.
REMOTE_AND_PACKAGES = frozenset(
    {
        "httpx",
        "httpx2",
        "mcp",
        "mcp_types",
        "hostd.mcp.transport.http",
        "hostd.install.bundle",
        "hostd.install.importer",
        "hostd.install.serverjson",
        "docgen.docs",
        "docgen.examples",
    }
)
#: Loaded at the first plugin start at the earliest (or by the request that needs them).
PLUGIN_START = frozenset({"hostd.mcp.handshake", "jsonschema_rs"})
#: Loaded only for a tool schema the compiled check leaves to them (a reference, a declared draft, a regex, a
#: problem to report: hostd.mcp.convert._certainly_clean) or an argument it finds invalid: never for plain,
#: valid schemas and calls (~0.1 s of CPU a hostd, issue 28).
SCHEMA_SLOW_PATH = frozenset({"jsonschema", "referencing"})
#: Loaded by no reading command of hostctl (``list``, ``status``, ``tools``, ``logs``) read directly: what only an
#: OAuth flow, a networked plugin's proxy, hostd as an MCP server, a serving hostd's control channel or a running
#: plugin tree (psutil: its sampling and its end) needs (issue 28).
NOT_FOR_A_READER = frozenset(
    {"httpx2", "hostd.net.proxy", "hostd.gateway", "hostd.control.server", "hostd.control.attach", "psutil"}
) | frozenset(
    {
        # What only a plugin's start needs: its request spans (opentelemetry, at the first request), a stdio plugin's
        # link on its pipes, a networked plugin's listener handoff, a remote plugin's endpoint; and what only mise's
        # version files need (tomllib: hostd/install/shims.py).
        "opentelemetry",
        "hostd.wire.tracing",
        "hostd.mcp.transport.stdio",
        "hostd.net.handoff",
        "hostd.remote.endpoint",
        "tomllib",
    }
)
#: Loaded by no hostctl command before it does anything (``import hostd.cli.hostctl``; a reading command then loads
#: hostd's host, a command sent to a hostd does not): the link to a plugin (which only naming the reserved
#: permissions pulled in: hostd/mcp/permissions.py), and the sandbox beyond the environment policy that the secret
#: store's names need (the ``sandbox`` package loads its submodules when they are named: sandbox/__init__.py).
NOT_FOR_ANY_COMMAND = frozenset(
    {
        "hostd.mcp.link",
        "hostd.mcp.client_features",
        "hostd.mcp.session",
        "hostd.wire.tracing",
        "opentelemetry",
        "sandbox.launch",
        "sandbox.policy",
        "sandbox.probe",
        "sandbox.process",
        "sandbox.watchdog",
        "sandbox.forkserver",
    }
)


def imported(stderr: str) -> set[str]:
    """The modules an ``-X importtime`` stderr names (``import time: <self> | <cumulative> | <name>``),
    with every parent package of each: a module that ``importlib.import_module`` loads gets no line of
    its own, but the submodules its code imports do (``mcp_types._types`` stands for ``mcp_types``)."""
    names: set[str] = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                parts = name.split(".")
                names.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return names


async def serve_and_list_imports(tmp_path: Path, work: object = None, env: dict[str, str] | None = None) -> set[str]:
    """Run ``hostd serve`` under ``-X importtime``: ``initialize``, ``plugins/list``, then ``work(client)``
    if given, then shutdown; return the modules it imported."""
    log = tmp_path / "hostd-stderr.txt"
    environment = {**(env or plugin_environment()), "PYTHONPROFILEIMPORTTIME": "1"}
    with log.open("wb") as stderr:
        async with HostdClient.spawn(
            ["--state-dir", str(tmp_path / "state"), "--log-level", "error"], env=environment, stderr=stderr.fileno()
        ) as client:
            assert (await client.request("plugins/list", {}))["plugins"] == []
            if work is not None:
                await work(client)  # type: ignore[operator]
    return imported(log.read_text(encoding="utf-8", errors="replace"))


async def test_the_start_path_loads_no_plugin_or_remote_module(tmp_path: Path) -> None:
    modules = await serve_and_list_imports(tmp_path)
    # The log is read (hostd.host.service itself is loaded by importlib.import_module, which -X importtime omits).
    assert {"trio", "hostd.control.server", "hostd.plugins.supervisor", "pydantic"} <= modules
    assert sorted(modules & (REMOTE_AND_PACKAGES | PLUGIN_START | SCHEMA_SLOW_PATH)) == []


async def test_stdio_plugins_load_no_remote_or_package_module(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async def enable_and_call(client: HostdClient) -> None:
        for plugin_id in ("echo-a", "echo-b"):
            status = await ready(client, make_plugin(plugin_id))
            assert status["status"] == "ready"
            result = await client.request("tools/call", {"name": f"{plugin_id}.echo", "arguments": {"text": "hi"}})
            assert result["content"] == [{"type": "text", "text": "hi"}]
        await client.request("plugins/disable", {"id": "echo-a"})  # echo-b stays enabled, for the reader below

    modules = await serve_and_list_imports(tmp_path, enable_and_call)
    assert modules >= PLUGIN_START  # what a start needs did load, so the log covers the starts
    assert sorted(modules & REMOTE_AND_PACKAGES) == []
    assert sorted(modules & SCHEMA_SLOW_PATH) == []  # the echo fixture's schemas are plain and its calls valid

    # The same folder (one plugin enabled, one disabled), read by hostctl's reading commands in their own process
    # (hostd/cli/direct.py): they load hostd's host, but nothing only a plugin start, a remote server, an OAuth
    # flow, a networked plugin, an install or the gateway needs (issue 28).
    env = {**plugin_environment(), "HOSTD_SECRETS": "file", "PYTHONPROFILEIMPORTTIME": "1"}
    for verb in (["list"], ["status"], ["tools"], ["logs", "echo-b"]):
        done = await run_hostctl(tmp_path / "state", *verb, env=env)
        assert done.returncode == 0, (verb, done.stderr)
        assert "directly (no hostd serves it; nothing started)" in done.stderr, verb
        read = imported(done.stderr)
        assert {"hostd.host.records", "hostd.control.results", "hostd.plugins.supervisor"} <= read, verb
        assert sorted(read & (REMOTE_AND_PACKAGES | PLUGIN_START | SCHEMA_SLOW_PATH | NOT_FOR_A_READER)) == [], verb
    # What every hostctl command loads before its verb runs (here --help, which then only prints).
    done = await run_hostctl(tmp_path / "state", "--help", env=env)
    assert done.returncode == 0, done.stderr
    loaded = imported(done.stderr)
    assert {"hostd.cli.direct", "hostd.cli.render", "hostd.storage.secrets", "sandbox.environment"} <= loaded
    assert sorted(loaded & NOT_FOR_ANY_COMMAND) == []


async def test_a_remote_stack_that_cannot_load_fails_only_the_remote_start(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # A broken install: an httpx2 that raises on import shadows the real one (PYTHONPATH comes first).
    broken = tmp_path / "broken"
    (broken / "httpx2").mkdir(parents=True)
    (broken / "httpx2" / "__init__.py").write_text('raise ImportError("httpx2 is broken in this test")\n')
    env = plugin_environment()
    env["PYTHONPATH"] = str(broken)

    async def start_both(client: HostdClient) -> None:
        folder = remote_plugin(tmp_path, "http://127.0.0.1:9/mcp")  # never contacted: the start fails first
        with pytest.raises(RpcError) as failed:
            await ready(client, folder)
        reason = (
            "hostd could not load hostd.mcp.transport.http (needed for a remote server): "
            "ImportError: httpx2 is broken in this test"
        )
        assert failed.value.kind == ErrorKind.PLUGIN_START_FAILED.name
        assert failed.value.message == f"plugin remote failed to start: {reason}"
        assert (failed.value.data["plugin"], failed.value.data["module"], failed.value.data["reason"]) == (
            "remote",
            "hostd.mcp.transport.http",
            reason,
        )
        status = await client.request("plugins/status", {"id": "remote"})
        assert status["status"] == "error"
        # The same hostd still starts and serves stdio plugins.
        assert (await ready(client, make_plugin("echo-a")))["status"] == "ready"
        result = await client.request("tools/call", {"name": "echo-a.echo", "arguments": {"text": "hi"}})
        assert result["content"] == [{"type": "text", "text": "hi"}]
        await client.request("plugins/disable", {"id": "echo-a"})

    modules = await serve_and_list_imports(tmp_path, start_both, env)
    assert "httpx2" in modules  # the broken one was tried (-X importtime reports a failed import too)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        (None, "ModuleNotFoundError: No module named 'hostd_lazy_probe'"),
        ('raise RuntimeError("the module body failed")\n', "RuntimeError: the module body failed"),
        (
            "import hostd_lazy_probe_missing_dependency\n",
            "ModuleNotFoundError: No module named 'hostd_lazy_probe_missing_dependency'",
        ),
        ("def broken(:\n", "SyntaxError: invalid syntax (hostd_lazy_probe.py, line 1)"),
    ],
)
async def test_a_module_that_cannot_load_is_a_structured_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str | None, reason: str
) -> None:
    if source is not None:
        (tmp_path / "hostd_lazy_probe.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hostd_lazy_probe", raising=False)
    message = f"hostd could not load hostd_lazy_probe (needed for the test): {reason}"
    with pytest.raises(HostError) as failed:
        lazy.load("hostd_lazy_probe", "the test")
    assert (failed.value.kind, failed.value.message, failed.value.data) == (
        ErrorKind.INTERNAL_ERROR,
        message,
        {"module": "hostd_lazy_probe"},
    )
    with pytest.raises(HostError) as failed_async:  # the same from the event loop, through a worker thread
        await lazy.load_async(
            "hostd_lazy_probe", "the test", lambda m, **d: HostError(ErrorKind.PLUGIN_START_FAILED, m, **d)
        )
    assert (failed_async.value.kind, failed_async.value.message) == (ErrorKind.PLUGIN_START_FAILED, message)
    assert "hostd_lazy_probe" not in sys.modules


async def test_a_module_another_thread_is_still_importing_is_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class: a module taken from ``sys.modules`` while another thread still runs its body. Python puts a
    module there before its body runs, so a second caller that only looks it up gets a module without the
    names defined further down ("partially initialized module"): two remote plugins enabled at once, or the host
    module imported in a worker at start while a request imports what it imports. The second caller must wait
    for the import to finish, as the import statement itself does.
    """
    (tmp_path / "hostd_lazy_slow.py").write_text(
        "import sys\n"
        "sys.modules['hostd_lazy_slow_gate'].started.set()\n"
        "sys.modules['hostd_lazy_slow_gate'].release.wait(30)\n"
        "DEFINED_LAST = 'complete'\n"
    )

    class Gate(types.ModuleType):
        started = threading.Event()
        release = threading.Event()

    gate = Gate("hostd_lazy_slow_gate")
    monkeypatch.setitem(sys.modules, "hostd_lazy_slow_gate", gate)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "hostd_lazy_slow", raising=False)
    first = threading.Thread(target=lazy.load, args=("hostd_lazy_slow", "the first caller"))
    first.start()
    try:
        assert await trio.to_thread.run_sync(gate.started.wait, 30)
        results: list[str] = []

        async def second() -> None:
            module = await lazy.load_async("hostd_lazy_slow", "the second caller")
            results.append(getattr(module, "DEFINED_LAST", "<partial>"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            assert results == []  # still importing in the first thread: the second caller waits
            gate.release.set()
        assert results == ["complete"]
    finally:
        gate.release.set()
        await trio.to_thread.run_sync(first.join, 30)
    assert lazy.load("hostd_lazy_slow", "a later caller").DEFINED_LAST == "complete"


def test_a_package_and_its_submodule_imported_from_two_threads_both_load_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class: one thread imports a package while another names one of its submodules first. The second
    takes that submodule's import lock and runs it; when it imports a sibling the first thread is still running,
    it waits for that sibling while holding its own, and the first, going on in ``pkg/__init__``, then needs the
    second's: a cycle of locks that Python breaks by handing one thread a "partially initialized module". In
    hostd: a remote
    plugin's start imports the MCP SDK (and with it ``jsonschema``) in a worker thread while the event loop
    checks another plugin's tool schemas (``from jsonschema.validators import ...``). :func:`lazy.load` imports
    a module's parents first, each one whole, so a thread never holds a submodule's lock while it waits.
    """
    package = tmp_path / "hostd_race_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import first\nfrom . import second\nVALUE = second.VALUE\n")
    (package / "first.py").write_text(
        "import sys\ngate = sys.modules['hostd_race_gate']\ngate.inside.set()\ngate.go.wait(30)\n"
    )
    (package / "second.py").write_text("from . import first\nVALUE = 'whole'\n")

    class Gate(types.ModuleType):
        inside = threading.Event()
        go = threading.Event()

    monkeypatch.setitem(sys.modules, "hostd_race_gate", Gate("hostd_race_gate"))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("hostd_race_pkg", "hostd_race_pkg.first", "hostd_race_pkg.second"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    results: dict[str, str] = {}

    def load(name: str) -> None:
        try:
            results[name] = lazy.load(name, "the test").VALUE
        except HostError as exc:
            results[name] = exc.message

    first = threading.Thread(target=load, args=("hostd_race_pkg",))
    second = threading.Thread(target=load, args=("hostd_race_pkg.second",))
    first.start()
    try:
        assert Gate.inside.wait(30)
        second.start()
        # Wait until the second thread waits on an import lock the first one holds (importlib's own record of
        # who waits on what, and of each lock's owner): it is then blocked for as long as the first one is.
        blocking_on: dict[int, Any] = importlib._bootstrap._blocking_on  # type: ignore[attr-defined]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lock = blocking_on.get(second.ident or 0)
            if lock is not None and lock.owner == first.ident:
                break
            time.sleep(0.001)
        # On the package, to load it whole, holding no lock of its own (before: holding "second", half run).
        assert lock is not None
        assert lock.name == "hostd_race_pkg"
    finally:
        Gate.go.set()
        first.join(30)
        second.join(30)
    assert results == {"hostd_race_pkg": "whole", "hostd_race_pkg.second": "whole"}


def test_the_sandbox_package_gives_each_name_from_its_module() -> None:
    """The class: a name of ``sandbox.__all__`` that the package, which loads its submodules only when a name is
    asked for (PEP 562), maps to the wrong module or to none; and a name that is not the package's."""
    import sandbox  # noqa: PLC0415 (the package itself, as a user of it imports it)

    homes = sandbox._HOME
    assert sorted(homes) == sorted(sandbox.__all__)
    for name, home in homes.items():
        assert getattr(sandbox, name) is getattr(importlib.import_module(home), name), name
    with pytest.raises(AttributeError, match="module 'sandbox' has no attribute 'no_such_name'"):
        _ = sandbox.no_such_name


def test_building_the_control_models_parses_no_builtin_signature() -> None:
    """pydantic asks each default factory's signature; for a builtin such as ``list`` that signature is parsed
    from text with ``tokenize``, whose regular expressions are compiled for it (~10 ms of every hostd's start).
    Building every model of the control protocol must not (hostd.control.params ``_no_paths``; before:
    ``misses`` was 1)."""
    code = (
        "import tokenize, hostd.control.models as m\n"
        "for model in {*m.PARAMS.values(), *m.RESULTS.values()} - {None}:\n"
        "    model.model_rebuild()\n"
        "print(tokenize._compile.cache_info().misses)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout == "0\n"
