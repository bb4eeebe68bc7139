"""Issue 9: plugin disk use is bounded, TMPDIR does not outlive an instance, and a
state write that fails applies nothing (memory and disk stay the same).

The state-write tests make hostd's writes fail for real: ``RLIMIT_FSIZE`` set on the
running hostd (``prlimit``) makes every write of a regular file past one byte fail with
``EFBIG`` (Python ignores ``SIGXFSZ``), exactly as ``ENOSPC`` would fail it.
"""

from __future__ import annotations

import errno
import os
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest
import trio
import yaml

from hostd.cli.checkup import check_state_folder
from hostd.cli.client import HostdClient, RpcError
from hostd.plugins.supervisor import empty_folder
from hostd.storage.state import PluginRecord, StateStore
from sandbox.watchdog import DEFAULT_MAX_DISK_BYTES, DiskWalk, watch_disk
from tests.conftest import MakePlugin, ready, spawn_hostd

MIB = 1024 * 1024


# -- measuring ------------------------------------------------------------------


def test_walk_counts_allocated_bytes_once_and_never_follows_symlinks(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"x" * (4 * MIB))
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "file").write_bytes(b"y" * MIB)
    os.link(root / "a" / "b" / "file", root / "a" / "hardlink")  # the same blocks: counted once
    (root / "link-to-big").symlink_to(outside / "big")  # the link, not the 4 MiB
    (root / "link-to-outside").symlink_to(outside, target_is_directory=True)
    with open(root / "sparse", "wb") as fh:  # 1 GiB long, 4 KiB allocated
        fh.seek(1024 * MIB)
        fh.write(b"z" * 4096)
    walk = DiskWalk([str(root), str(tmp_path / "missing")])
    assert walk.step(10_000) is True
    expected = 0
    for path in (root, root / "a", root / "a" / "b", root / "a" / "b" / "file", root / "sparse"):
        expected += os.lstat(path).st_blocks * 512
    expected += os.lstat(root / "link-to-big").st_blocks * 512 + os.lstat(root / "link-to-outside").st_blocks * 512
    assert walk.allocated == expected
    assert MIB <= walk.allocated < 2 * MIB  # neither the 4 MiB outside nor the sparse 1 GiB


def test_walk_is_bounded_per_step_and_resumes(tmp_path: Path) -> None:
    root = tmp_path / "many"
    for i in range(10):
        (root / f"d{i}").mkdir(parents=True)
        for j in range(10):
            (root / f"d{i}" / f"f{j}").write_bytes(b"x" * 5000)
    whole = DiskWalk([str(root)])
    assert whole.step(1000)
    walk = DiskWalk([str(root)])
    steps = 0
    while not walk.step(7):
        steps += 1
        assert walk.entries <= 7 * steps
    assert walk.entries == whole.entries == 110
    assert walk.allocated == whole.allocated
    assert steps >= 110 // 7
    # A TMPDIR inside the data folder is not counted twice.
    nested = DiskWalk([str(root), str(root / "d3"), str(root)])
    assert nested.step(1000) and nested.allocated == whole.allocated


async def test_watch_disk_reports_the_limit_and_what_it_measured(tmp_path: Path) -> None:
    data, tmp = tmp_path / "data", tmp_path / "tmp"
    data.mkdir()
    tmp.mkdir()
    (data / "a").write_bytes(b"x" * (3 * MIB))
    (tmp / "b").write_bytes(b"x" * (3 * MIB))
    with trio.fail_after(10):
        hit = await watch_disk([str(data), str(tmp)], 5 * MIB, interval=0.05)
    assert hit.limit == "disk"
    assert hit.threshold == 5 * MIB
    assert hit.value >= 6 * MIB
    assert "data folder and TMPDIR" in hit.message


# -- emptying TMPDIR ---------------------------------------------------------------


def test_empty_folder_removes_contents_without_following_symlinks(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("mine")
    tmp = tmp_path / "tmp"
    (tmp / "nested" / "locked").mkdir(parents=True)
    (tmp / "nested" / "locked" / "f").write_text("x")
    (tmp / "nested" / "locked").chmod(0o500)
    (tmp / "file").write_text("x")
    (tmp / "dirlink").symlink_to(precious, target_is_directory=True)
    (tmp / "filelink").symlink_to(precious / "keep")
    empty_folder(str(tmp))
    assert list(tmp.iterdir()) == []
    assert (tmp.stat().st_mode & 0o777) == 0o700
    assert (precious / "keep").read_text() == "mine"


def test_empty_folder_replaces_a_symlinked_tmpdir_and_refuses_shared_ones(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep").write_text("mine")
    tmp = tmp_path / "tmp"
    tmp.symlink_to(precious, target_is_directory=True)  # a plugin swapped its TMPDIR for a link
    empty_folder(str(tmp))
    assert not tmp.is_symlink() and tmp.is_dir() and list(tmp.iterdir()) == []
    assert (precious / "keep").read_text() == "mine"
    for shared in ("/tmp", "/", "/tmp/"):
        with pytest.raises(ValueError):
            empty_folder(shared)


# -- state files ------------------------------------------------------------------


def test_stale_temporary_files_are_removed_when_the_state_is_opened(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = StateStore(state)
    store.open()
    store.save({"p": PluginRecord(path="/p", manifest_digest="sha256:a")})
    store.close()
    (state / ".state.json.4242.tmp").write_text('{"half": ')
    (state / ".facts.json.4243.tmp").write_text('{"half": ')  # a hostd killed while it kept what it learnt
    (state / "imported" / "x").mkdir(parents=True)
    (state / "imported" / "x" / ".plugin.json.tmp").write_text("{")
    (state / "imported" / "x" / "plugin.json").write_text("{}")
    (state / "notes.tmp").write_text("not ours")
    # hostd doctor names them (before: the facts file's was not named, and hostd left it for good)
    assert [line for line in check_state_folder(state) if line.startswith("temporary:")] == [
        f"temporary: {name} (an interrupted write; hostd removes it at start)"
        for name in (".facts.json.4243.tmp", ".state.json.4242.tmp")
    ]
    again = StateStore(state)
    opened = again.open()
    again.close()
    assert opened.plugins == {"p": PluginRecord(path="/p", manifest_digest="sha256:a")}
    assert opened.warnings == [
        "removed 3 temporary file(s) of interrupted state writes: .facts.json.4243.tmp, .state.json.4242.tmp, "
        "imported/x/.plugin.json.tmp"
    ]
    assert sorted(p.name for p in state.iterdir()) == ["imported", "notes.tmp", "state.json", "state.lock"]
    assert [p.name for p in (state / "imported" / "x").iterdir()] == ["plugin.json"]


# -- hostd: the disk bound ----------------------------------------------------------


async def test_a_plugin_over_its_disk_bound_is_stopped_and_another_keeps_serving(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    filler = make_plugin("filler", variant="fill-tmp", args=["--fill-mib", "16"])
    other = make_plugin("other", variant="fill-tmp", args=["--fill-mib", "1"])
    async with spawn_hostd(tmp_path, "--restart", "never") as hostd:
        info = (await hostd.request("plugins/list", {}))["plugins"]
        assert info == []
        installed = await hostd.request("plugins/install", {"path": str(filler)})
        granted = await hostd.request(
            "plugins/grant", {"id": "filler", "permissions": installed["permissions"], "limits": {"maxDiskMb": 8}}
        )
        assert granted["limits"] == {
            "maxRssMb": None,
            "maxCpuPercent": None,
            "maxDiskMb": 8.0,
            "maxTools": None,
            "maxListingMb": None,
        }
        await hostd.request("plugins/approve", {"id": "filler", "digest": granted["launch"]["digest"]})
        assert (await ready(hostd, other))["status"] == "ready"  # the host's bound (1 GiB) for this one
        await hostd.request("plugins/enable", {"id": "filler"})
        stopped = await hostd.wait_for(
            "plugins/statusChanged", lambda s: s["plugin_id"] == "filler" and s["status"] == "unhealthy", timeout=30
        )
        assert stopped["error"]["limit"]["limit"] == "disk"
        assert stopped["error"]["limit"]["threshold"] == 8 * MIB
        assert 16 * MIB <= stopped["error"]["limit"]["value"] < 17 * MIB  # TMPDIR counted once
        assert "exceeding a limit: disk" in stopped["error"]["reason"]
        # "unhealthy" is announced before the tree is ended; disable waits for the end of that stop.
        await hostd.request("plugins/disable", {"id": "filler"})
        tmpdir = tmp_path / "state" / "tmp" / "filler"
        assert list(tmpdir.iterdir()) == []  # the offending TMPDIR is emptied once the tree is gone
        result = await hostd.request("tools/call", {"name": "other.echo", "arguments": {"text": "still here"}})
        assert result["structuredContent"] == {"text": "still here", "length": 10}
        assert (await hostd.request("plugins/status", {"id": "other"}))["status"] == "ready"
        other_tmp = tmp_path / "state" / "tmp" / "other"
        assert other_tmp != tmpdir and (other_tmp / "ballast").stat().st_size == MIB
    assert list(other_tmp.iterdir()) == []  # hostd's shutdown stopped it: emptied too


async def test_the_host_disk_bound_applies_and_zero_means_none(tmp_path: Path, make_plugin: MakePlugin) -> None:
    assert DEFAULT_MAX_DISK_BYTES == 1024 * MIB
    from hostd.cli.hostd import DEFAULT_MAX_DISK_MB  # noqa: PLC0415

    assert DEFAULT_MAX_DISK_MB * MIB == DEFAULT_MAX_DISK_BYTES
    async with spawn_hostd(tmp_path, "--max-disk-mb", "4", "--restart", "never") as hostd:
        await ready(hostd, make_plugin(variant="fill-tmp", args=["--fill-mib", "6"]))
        stopped = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "unhealthy", timeout=30)
        assert stopped["error"]["limit"]["threshold"] == 4 * MIB


async def test_tmpdir_is_emptied_whenever_an_instance_stops(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="fill-tmp", args=["--fill-mib", "1"])
    async with spawn_hostd(tmp_path, "--restart", "never") as hostd:
        await ready(hostd, folder)
        tmpdir = tmp_path / "state" / "tmp" / "mcp-echo"
        assert sorted(p.name for p in tmpdir.iterdir()) == ["ballast", "nested"]
        # disable
        assert (await hostd.request("plugins/disable", {"id": "mcp-echo"}))["status"] == "stopped"
        assert list(tmpdir.iterdir()) == []
        # restart (the old instance's files go; the new one writes its own)
        await hostd.request("plugins/enable", {"id": "mcp-echo"})
        (tmpdir / "left-by-the-first").write_text("x")
        await hostd.request("plugins/restart", {"id": "mcp-echo"})
        assert sorted(p.name for p in tmpdir.iterdir()) == ["ballast", "nested"]
        # crash
        with pytest.raises(RpcError):
            await hostd.request("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 3}})
        await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "unhealthy")
        # "unhealthy" is announced before the tree is ended; disable waits for the end of that stop
        # (and, with no instance left, empties nothing itself).
        await hostd.request("plugins/disable", {"id": "mcp-echo"})
        assert list(tmpdir.iterdir()) == []
        # hostd's shutdown
        await hostd.request("plugins/enable", {"id": "mcp-echo"})
        assert sorted(p.name for p in tmpdir.iterdir()) == ["ballast", "nested"]
    assert list(tmpdir.iterdir()) == []


# -- hostd: a state write that fails applies nothing -----------------------------------


def _document(state: Path) -> dict[str, Any]:
    return orjson.loads((state / "state.json").read_bytes())  # type: ignore[no-any-return]


def _fail_file_writes(client: HostdClient, fail: bool) -> None:
    """Make every write of hostd into a regular file past its first byte fail with EFBIG (or not)."""
    process = psutil.Process(client.process.pid)
    _, hard = process.rlimit(psutil.RLIMIT_FSIZE)
    process.rlimit(psutil.RLIMIT_FSIZE, (1 if fail else resource.RLIM_INFINITY, hard))


async def test_a_failed_state_write_applies_nothing(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    running, waiting, newcomer = make_plugin("running"), make_plugin("waiting"), make_plugin("newcomer")
    async with spawn_hostd(tmp_path, "--restart", "never") as hostd:
        await ready(hostd, running)
        info = await hostd.request("plugins/install", {"path": str(waiting)})
        await hostd.request("plugins/grant", {"id": "waiting", "permissions": ["echo.use"]})
        listed = await hostd.request("plugins/list", {})
        document = (state / "state.json").read_bytes()

        _fail_file_writes(hostd, True)
        attempts: list[tuple[str, dict[str, Any]]] = [
            ("plugins/grant", {"id": "running", "permissions": ["echo.use"]}),
            ("plugins/grant", {"id": "running", "permissions": ["echo.use"], "limits": {"maxDiskMb": 5}}),
            ("plugins/grant", {"id": "waiting", "permissions": ["echo.use", "echo.inspect"]}),
            ("plugins/approve", {"id": "waiting", "digest": info["launch"]["digest"]}),
            ("plugins/uninstall", {"id": "running"}),
            ("plugins/install", {"path": str(newcomer)}),
            ("plugins/import", {"config": {"mcpServers": {"imp": {"command": "python3", "args": ["x.py"]}}}}),
        ]
        for method, params in attempts:
            with pytest.raises(RpcError) as failed:
                await hostd.request(method, params)
            assert await hostd.request("plugins/list", {}) == listed, method  # memory: as before
            assert failed.value.kind == "STATE_WRITE_FAILED", (method, failed.value)
            assert failed.value.data["errno"] == "EFBIG"
            assert "nothing of the request was applied" in failed.value.message
            assert (state / "state.json").read_bytes() == document, method
            assert [p.name for p in state.iterdir() if p.name.endswith(".tmp")] == [], method
        assert not (state / "imported" / "imp").exists()
        # Nothing was stopped either: the running plugin still serves.
        result = await hostd.request("tools/call", {"name": "running.echo", "arguments": {"text": "up"}})
        assert result["structuredContent"] == {"text": "up", "length": 2}

        # Disable is how a user ends a plugin that fills the disk: it stops the plugin even when the
        # write fails, and says what the state document still holds.
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/disable", {"id": "running"})
        assert failed.value.kind == "STATE_WRITE_FAILED"
        assert failed.value.message.endswith("; the plugin is stopped, but hostd's next start will start it again")
        assert failed.value.data["status"]["status"] == "stopped"
        [still] = [p for p in (await hostd.request("plugins/list", {}))["plugins"] if p["id"] == "running"]
        assert (still["enabled"], still["status"]) == (True, "stopped")
        assert (state / "state.json").read_bytes() == document

        # The same requests go through once the disk takes writes again.
        _fail_file_writes(hostd, False)
        await hostd.request("plugins/grant", {"id": "waiting", "permissions": ["echo.use", "echo.inspect"]})
        assert _document(state)["plugins"]["waiting"]["granted"] == ["echo.inspect", "echo.use"]
        await hostd.request("plugins/uninstall", {"id": "running"})
        assert sorted(_document(state)["plugins"]) == ["waiting"]


async def test_a_failed_write_of_enable_starts_nothing(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    async with spawn_hostd(tmp_path, "--restart", "never") as hostd:
        info = await hostd.request("plugins/install", {"path": str(make_plugin())})
        await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": info["permissions"]})
        await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})
        document = (state / "state.json").read_bytes()
        _fail_file_writes(hostd, True)
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/enable", {"id": "mcp-echo"})
        assert failed.value.kind == "STATE_WRITE_FAILED"
        listed = (await hostd.request("plugins/list", {}))["plugins"][0]
        assert (listed["enabled"], listed["status"]) == (False, "stopped")
        assert hostd.seen("plugins/statusChanged") == []
        assert (state / "state.json").read_bytes() == document
        _fail_file_writes(hostd, False)
        assert (await hostd.request("plugins/enable", {"id": "mcp-echo"}))["status"] == "ready"
        assert _document(state)["plugins"]["mcp-echo"]["enabled"] is True


def _fill(path: Path) -> int | None:
    """Write into ``path`` until the file system refuses; return the errno."""
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"x" * 4096)
        except OSError as exc:
            return exc.errno


@pytest.fixture
def tiny_state_fs(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/state`` on a 1 MiB tmpfs of its own (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(state)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield state
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


async def test_a_full_state_filesystem_fails_the_request_with_enospc(
    tmp_path: Path, make_plugin: MakePlugin, tiny_state_fs: Path
) -> None:
    state = tiny_state_fs
    async with spawn_hostd(tmp_path) as hostd:
        await hostd.request("plugins/install", {"path": str(make_plugin())})
        await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": ["echo.use"]})
        listed = await hostd.request("plugins/list", {})
        document = (state / "state.json").read_bytes()
        filler = state / "filler"
        assert _fill(filler) == errno.ENOSPC  # what a plugin filling its TMPDIR there would do
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": ["echo.use", "echo.inspect"]})
        assert failed.value.kind == "STATE_WRITE_FAILED"
        assert failed.value.data["errno"] == "ENOSPC"
        assert await hostd.request("plugins/list", {}) == listed
        assert (state / "state.json").read_bytes() == document
        assert [p.name for p in state.iterdir() if p.name.endswith(".tmp")] == []
        filler.unlink()
        granted = await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": ["echo.use", "echo.inspect"]})
        assert granted["granted"] == ["echo.inspect", "echo.use"]
        assert _document(state)["plugins"]["mcp-echo"]["granted"] == ["echo.inspect", "echo.use"]


async def test_tool_pins_that_cannot_be_written_fail_the_start(tmp_path: Path, make_plugin: MakePlugin) -> None:
    # The supervisor records the first discovery's tool digests itself: not in memory unless on disk.
    state = tmp_path / "state"
    folder = make_plugin(variant="wait-go")
    async with spawn_hostd(tmp_path, "--restart", "never") as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": info["permissions"]})
        await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})
        enabling = await hostd.start("plugins/enable", {"id": "mcp-echo"})
        await hostd.wait_for("plugins/log", lambda m: m["message"] == "waiting for ./go")  # enabled=true written
        _fail_file_writes(hostd, True)
        (folder / "go").write_text("")
        with pytest.raises(RpcError) as failed:
            await enabling()
        assert failed.value.kind == "STATE_WRITE_FAILED"
        status = await hostd.request("plugins/status", {"id": "mcp-echo"})
        assert (status["status"], status["error"]["kind"]) == ("error", "STATE_WRITE_FAILED")
        assert (await hostd.request("tools/list", {}))["tools"] == []
        assert _document(state)["plugins"]["mcp-echo"]["pinnedTools"] is None
        _fail_file_writes(hostd, False)
        assert (await hostd.request("plugins/enable", {"id": "mcp-echo"}))["status"] == "ready"
        assert sorted(_document(state)["plugins"]["mcp-echo"]["pinnedTools"]) == sorted(
            ["echo", "fail", "sleep", "large", "environment", "exit", "seen"]
        )


async def test_a_full_disk_during_configure_keeps_secrets_and_settings_as_they_were(
    tmp_path: Path, make_plugin: MakePlugin, tiny_state_fs: Path
) -> None:
    """Issue 31: a full disk during each state-changing request, secrets and settings included: the request
    fails with STATE_WRITE_FAILED (ENOSPC), the files on disk and what hostd answers stay as they were, no
    temporary is left, and the same request works once there is room."""
    state = tiny_state_fs
    folder = make_plugin(
        "cfg", backend={"env": {"SERVICE_TOKEN": "${secret:SERVICE_TOKEN}"}}, args=["${user_config.level}"]
    )
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["user_config"] = {"level": {"type": "string", "title": "Level", "required": False, "default": "low"}}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    async with spawn_hostd(tmp_path) as hostd:
        await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/configure", {"id": "cfg", "values": {"SERVICE_TOKEN": "one", "level": "mid"}})
        listed = await hostd.request("plugins/list", {})
        files = {p.name: p.read_bytes() for p in state.rglob("*") if p.is_file()}
        filler = state / "filler"
        assert _fill(filler) == errno.ENOSPC
        for values in ({"SERVICE_TOKEN": "two" * 50_000}, {"level": "high" * 50_000}):
            with pytest.raises(RpcError) as failed:
                await hostd.request("plugins/configure", {"id": "cfg", "values": values})
            assert (failed.value.kind, failed.value.data["errno"]) == ("STATE_WRITE_FAILED", "ENOSPC")
            assert await hostd.request("plugins/list", {}) == listed
            assert {p.name: p.read_bytes() for p in state.rglob("*") if p.is_file() and p != filler} == files
        filler.unlink()
        info = await hostd.request(
            "plugins/configure", {"id": "cfg", "values": {"SERVICE_TOKEN": "two", "level": "high"}}
        )
        assert "high" in info["launch"]["args"]
