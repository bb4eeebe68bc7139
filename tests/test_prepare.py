"""Install-time preparation (``plugins/prepare``, :mod:`hostd.install.prepare`) with real registries and servers.

The class under test: a launch that names a package (npx, uvx, an ``mcpServers`` entry using
them) must be installed once, into the plugin's own environment, and then start with no network,
no package tool and no shared cache. Each hostd here runs in a fresh home (no ``~/.npm``, no uv
cache), so nothing warm on the machine helps. Members: server-memory (npx, pinned) and
mcp-server-time (uvx) under ``--sandbox strict``; an unpinned npx entry imported from a Claude
Desktop config; an unreachable registry set by flag or by hostd's environment (npm and Python);
a cancelled preparation and an unfinished one left on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install.packages import parse_package_launch
from hostd.install.prepare import MARKER
from tests.conftest import ROOT
from tests.platform_facts import platform_offers

pytestmark = pytest.mark.real_server

MEMORY = ROOT / "manifests" / "server-memory"
TIME = ROOT / "manifests" / "mcp-server-time"
MEMORY_SPEC = "@modelcontextprotocol/server-memory@2026.8.31"
TIME_SPEC = "mcp-server-time==2026.10.19"
#: Seconds one preparation may take (a cold download from the registry).
PREPARE_TIMEOUT = 300.0
ENABLE_TIMEOUT = 60.0


def _need_tools() -> None:
    env = plugin_environment()
    for tool in ("npm", "node", "uv"):
        if shutil.which(tool, path=env["PATH"]) is None:
            pytest.skip(f"{tool} is not on PATH")


@asynccontextmanager
async def hostd_at(tmp_path: Path, *args: str, environ: Mapping[str, str] | None = None) -> AsyncIterator[HostdClient]:
    """A hostd with its state under ``tmp_path`` and a fresh, empty home."""
    _need_tools()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**plugin_environment(), "HOME": str(home), **(environ or {})}
    for name in ("npm_config_registry", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if environ is None or name not in environ:
            env.pop(name, None)
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state"), *args], env=env) as client:
        client.mirror = bool(environ) or any(a in ("--npm-registry", "--python-index") for a in args)  # type: ignore[attr-defined]
        yield client


def _mirror(client: HostdClient) -> bool:
    """True when the test itself pointed ``client`` at a registry (then unreachable is the point)."""
    return bool(getattr(client, "mirror", False))


async def prepare(client: HostdClient, plugin_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``plugins/prepare``; its result and the ``$/progress`` notes sent for it."""
    response = await client.start("plugins/prepare", {"id": plugin_id})
    with trio.fail_after(PREPARE_TIMEOUT):
        try:
            info = await response()
        except RpcError as error:
            # No registry from this machine (CI offline): skipped with the reason, like the catalog tests.
            if error.kind == "PREPARE_FAILED" and error.data["reason"] == "unreachable" and not _mirror(client):
                pytest.skip(f"the package registry cannot be reached: {error.message}")
            raise
    rid = response.request_id  # type: ignore[attr-defined]
    return info, [n for n in client.seen("$/progress") if n["requestId"] == rid]


async def approve_and_enable(client: HostdClient, info: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """grant (nothing) -> approve -> enable; the status and the seconds enable took."""
    await client.request("plugins/grant", {"id": info["id"], "permissions": []})
    await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    started = time.monotonic()
    status: dict[str, Any] = await client.request("plugins/enable", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
    return status, time.monotonic() - started


def memory_key() -> str:
    """The environment folder name of the server-memory manifest's launch."""
    launch = parse_package_launch("npx", ["-y", MEMORY_SPEC])
    assert launch is not None
    return launch.key


def through_proxy(notes: list[dict[str, Any]]) -> dict[str, int]:
    """What the installer reached through hostd's proxy, as the step-3 progress message counts it:
    ``{host:port: connections}`` (the proxy's own count of the connections it let through)."""
    [said] = [n["message"] for n in notes if n["message"].startswith("recording what was installed")]
    found = re.fullmatch(r"recording what was installed \(through hostd's proxy: (.+)\)", said)
    assert found is not None, said
    return {host: int(count) for host, count in re.findall(r"(\S+), (\d+) connections?", found.group(1))}


def home_is_untouched(tmp_path: Path) -> None:
    """Nothing was written into the user's home: no ~/.npm, no ~/.cache/uv, nothing."""
    assert sorted(os.listdir(tmp_path / "home")) == []


# -- npx, pinned, under strict ----------------------------------------------------------------------


async def test_a_prepared_npx_server_starts_under_strict_with_no_network(tmp_path: Path) -> None:
    async with hostd_at(tmp_path, "--sandbox", "strict") as hostd:
        info = await hostd.request("plugins/install", {"path": str(MEMORY)})
        assert info["launch"]["prepare"] == {"state": "needed", "manager": "npm", "packages": [MEMORY_SPEC]}
        assert info["launch"]["command"] == "npx"
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": "server-memory"})
        assert refused.value.kind == "PLUGIN_NOT_PREPARED"
        assert refused.value.data["packages"] == [MEMORY_SPEC]

        prepared, notes = await prepare(hostd, "server-memory")
        root = tmp_path / "state" / "prepared" / "server-memory" / memory_key()
        script = root / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
        launch = prepared["launch"]
        lock = json.loads((root / "node_modules" / ".package-lock.json").read_text())
        assert launch["prepare"] == {
            "state": "prepared",
            "manager": "npm",
            "packages": [MEMORY_SPEC],
            "resolved": {"@modelcontextprotocol/server-memory": "2026.8.31"},
            "lockfile": "sha256:"
            + hashlib.sha256((root / "node_modules" / ".package-lock.json").read_bytes()).hexdigest(),
            "root": str(root),
            "registry": "https://registry.npmjs.org/",
            "unpinned": [],
            "build": False,
        }
        assert lock["packages"]["node_modules/@modelcontextprotocol/server-memory"]["version"] == "2026.8.31"
        assert launch["command"] == shutil.which("node", path=plugin_environment()["PATH"])
        assert launch["args"] == [str(script)]
        assert launch["digest"] != info["launch"]["digest"]  # what runs changed: approve again
        assert [n["progress"] for n in notes] == [1, 2, 3, 4]
        assert {n["total"] for n in notes} == {4}
        assert notes[-1]["message"] == f"prepared {MEMORY_SPEC}"
        assert "netns" in launch["isolation"]
        # npm went through hostd's proxy, with the registry as its one allowed host (issue 26).
        assert notes[0]["message"] == (
            f"preparing {MEMORY_SPEC} (npm, sandboxed; network: registry.npmjs.org:443 only, through hostd's proxy)"
        )
        reached = through_proxy(notes)
        assert list(reached) == ["registry.npmjs.org:443"]
        assert reached["registry.npmjs.org:443"] >= 1
        assert hostd.seen("plugins/log") == []  # nothing refused

        status, seconds = await approve_and_enable(hostd, prepared)
        assert status["status"] == "ready", status
        print(f"\nenable of prepared server-memory under strict: {seconds:.2f} s")
        created = await hostd.request(
            "tools/call",
            {
                "name": "server-memory.create_entities",
                "arguments": {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}]},
            },
        )
        assert created["structuredContent"] == {
            "entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}]
        }
        graph = await hostd.request("tools/call", {"name": "server-memory.read_graph", "arguments": {}})
        assert graph["structuredContent"] == {
            "entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}],
            "relations": [],
        }
        memory = tmp_path / "state" / "data" / "server-memory" / "memory.jsonl"
        assert json.loads(memory.read_text().splitlines()[0])["name"] == "Ada"
        memory_text = memory.read_text()

        # A second prepare finds the environment: no installer, no network.
        again, notes = await prepare(hostd, "server-memory")
        assert again["launch"]["digest"] == prepared["launch"]["digest"]
        assert [(n["progress"], n["message"]) for n in notes] == [(4, f"already prepared: {MEMORY_SPEC}")]

        # Uninstall deletes the environment and its caches; the graph is kept aside for this install (issue 25).
        await hostd.request("plugins/uninstall", {"id": "server-memory"})
        assert not (tmp_path / "state" / "prepared" / "server-memory").exists()
        [kept] = (tmp_path / "state" / "kept" / "server-memory").iterdir()
        assert (kept / "data" / "memory.jsonl").read_text() == memory_text
    home_is_untouched(tmp_path)


# -- uvx, under strict ----------------------------------------------------------------------------


async def test_a_prepared_uvx_server_starts_under_strict(tmp_path: Path) -> None:
    async with hostd_at(tmp_path, "--sandbox", "strict") as hostd:
        info = await hostd.request("plugins/install", {"path": str(TIME)})
        assert info["launch"]["prepare"] == {"state": "needed", "manager": "uv", "packages": [TIME_SPEC]}
        prepared, notes = await prepare(hostd, "mcp-server-time")
        launch = prepared["launch"]
        root = Path(launch["prepare"]["root"])
        assert launch["prepare"]["resolved"] == {"mcp-server-time": "2026.10.19"}
        assert f"{TIME_SPEC}\n" in (root / "requirements.lock").read_text()
        assert launch["command"] == str(root / "venv" / "bin" / "python")
        assert launch["args"] == [str(root / "venv" / "bin" / "mcp-server-time"), "--local-timezone", "UTC"]
        assert [n["progress"] for n in notes] == [1, 2, 3, 4]
        # uv went through hostd's proxy: PyPI's index and its files' host are the only ones allowed (issue 26).
        assert notes[0]["message"] == (
            f"preparing {TIME_SPEC} (uv, sandboxed; network: pypi.org:443, files.pythonhosted.org:443 only, "
            "through hostd's proxy)"
        )
        reached = through_proxy(notes)
        assert sorted(reached) == ["files.pythonhosted.org:443", "pypi.org:443"]
        assert min(reached.values()) >= 1
        assert hostd.seen("plugins/log") == []

        status, seconds = await approve_and_enable(hostd, prepared)
        assert status["status"] == "ready", status
        print(f"\nenable of prepared mcp-server-time under strict: {seconds:.2f} s")
        before = datetime.now(UTC)
        now = await hostd.request(
            "tools/call", {"name": "mcp-server-time.get_current_time", "arguments": {"timezone": "UTC"}}
        )
        after = datetime.now(UTC)
        structured = now["structuredContent"]
        assert set(structured) == {"timezone", "datetime", "day_of_week", "is_dst"}
        moment = datetime.fromisoformat(structured["datetime"])
        assert moment.utcoffset() == timedelta(0)
        assert before - timedelta(seconds=1) <= moment <= after
        assert structured["timezone"] == "UTC"
        assert structured["is_dst"] is False
    home_is_untouched(tmp_path)


# -- an unpinned mcpServers entry, through plugins/import -------------------------------------------


async def test_an_unpinned_imported_npx_entry_is_resolved_to_an_exact_version(tmp_path: Path) -> None:
    with trio.fail_after(120):
        latest = await trio.run_process(
            ["npm", "view", "@modelcontextprotocol/server-memory", "version"],
            env={**plugin_environment(), "npm_config_cache": str(tmp_path / "npm-view")},
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    if latest.returncode != 0:
        pytest.skip(f"the npm registry cannot be asked: {latest.stderr.decode().strip()[-200:]}")
    config = {"mcpServers": {"memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}}}
    async with hostd_at(tmp_path) as hostd:
        imported = await hostd.request("plugins/import", {"config": config})
        [entry] = imported["entries"]
        plugin_id = entry["plugin"]["id"]
        assert entry["plugin"]["launch"]["prepare"]["state"] == "needed"
        # The approval says the version was resolved because the config pinned none, before and after.
        assert entry["plugin"]["launch"]["prepare"]["unpinned"] == ["@modelcontextprotocol/server-memory"]
        prepared, _notes = await prepare(hostd, plugin_id)
        assert prepared["launch"]["prepare"]["unpinned"] == ["@modelcontextprotocol/server-memory"]
        resolved = prepared["launch"]["prepare"]["resolved"]
        assert resolved == {"@modelcontextprotocol/server-memory": latest.stdout.decode().strip()}
        assert re.fullmatch(r"\d+\.\d+\.\d+", resolved["@modelcontextprotocol/server-memory"])
        # An imported server's tools are pinned at its first start after approval (one approval, one spawn).
        status, _seconds = await approve_and_enable(hostd, prepared)
        assert status["status"] == "ready", status
        assert len(status["pinned"]) == 9
        assert status["tools_count"] == 9


# -- unreachable registries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "folder", "expected"),
    [
        ("flag", MEMORY, ("http://127.0.0.1:9/", "npm install")),
        ("flag", TIME, ("http://127.0.0.1:9/simple", "uv pip install")),
        ("environment", MEMORY, ("http://127.0.0.1:9/", "npm install")),
        ("environment", TIME, ("http://127.0.0.1:9/simple", "uv pip install")),
    ],
)
async def test_an_unreachable_registry_is_a_precise_error_at_prepare(
    tmp_path: Path, how: str, folder: Path, expected: tuple[str, str]
) -> None:
    registry, what = expected
    if how == "flag":
        flag = "--npm-registry" if folder == MEMORY else "--python-index"
        spawn = hostd_at(tmp_path, flag, registry)
    else:
        name = "npm_config_registry" if folder == MEMORY else "UV_INDEX_URL"
        spawn = hostd_at(tmp_path, environ={name: registry})
    async with spawn as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        started = time.monotonic()
        with pytest.raises(RpcError) as failed:
            await prepare(hostd, info["id"])
        seconds = time.monotonic() - started
        error = failed.value
        assert error.kind == "PREPARE_FAILED"
        assert error.data["reason"] == "unreachable"
        assert error.data["registry"] == registry
        # Through hostd's proxy (the mirror its one allowed host): the proxy's own words, also sent to the parent as
        # the plugin's log line (issue 26). Before: npm's or uv's words ("connect ECONNREFUSED 127.0.0.1:9").
        said = "127.0.0.1:9 refused the connection (127.0.0.1: Connection refused)"
        package = info["launch"]["prepare"]["packages"][0]
        assert error.message == f"plugin {info['id']}: {what} {package}: cannot reach {registry}: {said}"
        logged = await hostd.wait_for("plugins/log", lambda n: n["plugin"] == info["id"])
        assert logged == {
            "plugin": info["id"],
            "level": "warning",
            "source": "host",
            "message": f"network: refused 127.0.0.1:9 (502): {said}",
        }
        print(f"\nunreachable registry ({how}, {info['id']}) reported after {seconds:.1f} s")
        after = await hostd.request("plugins/list", {})
        assert after["plugins"][0]["launch"]["prepare"]["state"] == "needed"
        # Nothing but the installer's own cache is left.
        assert os.listdir(tmp_path / "state" / "prepared" / info["id"]) == ["cache"]


# -- cancellation and unfinished environments ------------------------------------------------------


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """A registry address that accepts connections and never answers (so a preparation hangs in npm)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/"
    finally:
        server.close()


async def test_a_cancelled_preparation_leaves_nothing_that_is_used(tmp_path: Path, silent_registry: str) -> None:
    root = tmp_path / "state" / "prepared" / "server-memory" / memory_key()
    async with hostd_at(tmp_path, "--npm-registry", silent_registry) as hostd:
        await hostd.request("plugins/install", {"path": str(MEMORY)})
        response = await hostd.start("plugins/prepare", {"id": "server-memory"})
        rid = response.request_id  # type: ignore[attr-defined]
        # Step 2 is sent right before npm starts: the installer is running (and waits on the registry).
        await hostd.wait_for("$/progress", lambda n: n["requestId"] == rid and n["progress"] == 2, timeout=30)
        assert root.is_dir()
        await hostd.notify("$/cancelRequest", {"id": rid})
        with pytest.raises(RpcError) as cancelled:
            with trio.fail_after(30):
                await response()
        assert cancelled.value.kind == "REQUEST_CANCELLED"
        assert not root.exists()
        listed = await hostd.request("plugins/list", {})
        assert listed["plugins"][0]["launch"]["prepare"]["state"] == "needed"
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": "server-memory"})
        assert refused.value.kind == "PLUGIN_NOT_PREPARED"


async def test_an_environment_without_its_marker_is_never_used(tmp_path: Path) -> None:
    """An unfinished preparation (hostd killed mid-install) on disk: not prepared, and replaced by the next one."""
    root = tmp_path / "state" / "prepared" / "server-memory" / memory_key()
    (root / "node_modules" / ".bin").mkdir(parents=True)
    (root / "node_modules" / "half.js").write_text("// half-installed\n")
    async with hostd_at(tmp_path) as hostd:
        info = await hostd.request("plugins/install", {"path": str(MEMORY)})
        assert info["launch"]["prepare"]["state"] == "needed"
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": "server-memory"})
        assert refused.value.kind == "PLUGIN_NOT_PREPARED"
        prepared, _notes = await prepare(hostd, "server-memory")
        assert prepared["launch"]["prepare"]["state"] == "prepared"
        assert not (root / "node_modules" / "half.js").exists()
        assert (root / MARKER).is_file()
        # A marker the next hostd cannot read counts as not prepared either.
        (root / MARKER).write_text("{")
    async with hostd_at(tmp_path) as hostd:
        listed = await hostd.request("plugins/list", {})
        assert listed["plugins"][0]["launch"]["prepare"]["state"] == "needed"


# -- as an unprivileged user ------------------------------------------------------------------------


async def test_a_prepared_npx_server_starts_under_strict_as_nobody() -> None:
    """The same as root's test, as the user real installs run as (CI is root): nothing needs privilege."""
    from tests.nobody import NOBODY, nobody_folder, run_driver, skip_reason  # noqa: PLC0415

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    offered, why = platform_offers("netns", as_nobody=True)
    if not offered:
        pytest.skip(f"as nobody, the kernel offers no network namespace: {why}")
    _need_tools()
    with nobody_folder() as work:
        driver = ROOT / "fixtures" / "sandbox" / "unprivileged_prepare.py"
        trust = {k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")}
        result = await run_driver(driver, work, str(MEMORY), json.dumps(trust), timeout=PREPARE_TIMEOUT)
    assert result["uid"] == NOBODY
    assert result["prepare"]["state"] == "prepared"
    assert result["prepare"]["resolved"] == {"@modelcontextprotocol/server-memory": "2026.8.31"}
    assert result["status"]["status"] == "ready"
    assert "netns" in result["status"]["isolation"]  # strict, and nobody can have one here
    assert result["graph"] == {
        "entities": [{"name": "Ada", "entityType": "person", "observations": ["as nobody"]}],
        "relations": [],
    }
    assert result["home"] == []


@pytest.mark.parametrize(
    ("command", "args", "reason", "said"),
    [
        ("npx", ["-y", "@modelcontextprotocol/server-memory@0.0.0-none"], "not-found", "No matching version"),
        ("uvx", ["--from", "mcp-server-time==0.0.0", "mcp-server-time"], "not-found", "mcp-server-time==0.0.0"),
        ("npx", ["-y", "left-pad@1.3.0"], "no-entry", "left-pad has no program 'left-pad' (bins: )"),
        ("uvx", ["--from", "mcp-server-time==2026.10.19", "no-such-program"], "no-entry", "'no-such-program'"),
    ],
)
async def test_a_package_that_cannot_be_prepared_is_a_precise_error(
    tmp_path: Path, command: str, args: list[str], reason: str, said: str
) -> None:
    config = {"mcpServers": {"server": {"command": command, "args": args}}}
    async with hostd_at(tmp_path) as hostd:
        imported = await hostd.request("plugins/import", {"config": config})
        plugin_id = imported["entries"][0]["plugin"]["id"]
        with pytest.raises(RpcError) as failed:
            await prepare(hostd, plugin_id)
        assert failed.value.kind == "PREPARE_FAILED"
        assert failed.value.data["reason"] == reason, failed.value.message
        assert said in failed.value.message
        assert os.listdir(tmp_path / "state" / "prepared" / plugin_id) == ["cache"]


async def test_a_new_preparation_deletes_the_older_environment_once_nothing_runs_from_it(tmp_path: Path) -> None:
    folder = tmp_path / "plugins" / "server-memory"
    shutil.copytree(MEMORY, folder)

    def relaunch(args: list[str]) -> Path:
        text = (folder / "plugin.yaml").read_text()
        (folder / "plugin.yaml").write_text(text.replace(f'args: [-y, "{MEMORY_SPEC}"]', f"args: {json.dumps(args)}"))
        launch = parse_package_launch("npx", args)
        assert launch is not None
        return tmp_path / "state" / "prepared" / "server-memory" / launch.key

    async with hostd_at(tmp_path) as hostd:
        first = (await hostd.request("plugins/install", {"path": str(folder)}))["id"]
        info, _notes = await prepare(hostd, first)
        old = Path(info["launch"]["prepare"]["root"])
        status, _seconds = await approve_and_enable(hostd, info)
        assert status["status"] == "ready"
        # The manifest now names the same package another way: another environment.
        new = relaunch([f"--package={MEMORY_SPEC}", "-y", "mcp-server-memory"])
        await hostd.request("plugins/disable", {"id": first})
        await hostd.request("plugins/install", {"path": str(folder)})
        info, _notes = await prepare(hostd, first)
        assert info["launch"]["prepare"]["root"] == str(new)
        assert new.is_dir()
        assert not old.exists()
        assert sorted(os.listdir(new.parent)) == sorted(["cache", new.name])
