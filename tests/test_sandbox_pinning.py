"""The sandbox holds against a plugin that redirects paths, rewrites what runs or plants code (issue 9).

Each test drives a real hostd with the hostile fixture ``fixtures/mcp-probe`` (or the echo fixture)
under the default ``standard`` level, and asserts what the plugin could reach, not log lines.
The classes:

1. a rule follows a path someone else can change: the plugin's own ``TMPDIR`` swapped for a link
   (by the plugin, or while it is stopped), a folder argument swapped for a link after approval, a
   link planted in another plugin's writable folder, a host grant covering the state folder;
2. runtime read rules derived from an unresolved interpreter path (``#!/usr/bin/../../bin/python3``
   once opened ``/etc``);
3. the approval does not cover what runs (a script replaced after approval);
4. shared package caches writable by every plugin.

As root, Landlock is what denies (root's file permissions would allow everything), so these prove
the rules themselves; tests/test_sandbox_unprivileged.py repeats the TMPDIR and prefix checks as
``nobody``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin, ready, spawn_hostd
from tests.nobody import ROOT, nobody_folder, run_driver, skip_reason
from tests.platform_facts import need_layers, platform_offers

PROBE = Path(__file__).resolve().parent.parent / "fixtures" / "mcp-probe"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux only")


def _need_landlock() -> None:
    need_layers("landlock-fs")  # skips where the kernel has no Landlock, fails where the sandbox lost it


def probe_plugin(
    tmp_path: Path, plugin_id: str = "mcp-probe", *, args: list[str] | None = None, command: str | None = None
) -> Path:
    """A copy of fixtures/mcp-probe as ``plugin_id`` with extra ``args`` (after server.py) or another command."""
    folder = tmp_path / plugin_id
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["id"] = plugin_id
    manifest["contributes"]["tools"] = [f"{plugin_id}.run"]
    if command is not None:
        manifest["backend"]["command"] = command
        manifest["backend"]["args"] = []
    manifest["backend"]["args"] += args or []
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


def hidden(ops: tuple[list[Any], ...]) -> list[list[Any]]:
    """``ops`` with each absolute path written ``@/path`` (fixtures/mcp-probe reads it as ``/path``): hidden from
    hostd's call-time grants (tests/test_call_grants.py), so what these tests see refused is the kernel's doing."""
    return [[f"@{a}" if isinstance(a, str) and a.startswith("/") else a for a in op] for op in ops]


async def run(hostd: HostdClient, *ops: list[Any], plugin: str = "mcp-probe") -> list[Any]:
    """Call the probe's ``run`` tool; the outcome of each operation."""
    result = await hostd.request("tools/call", {"name": f"{plugin}.run", "arguments": {"ops": hidden(ops)}})
    outcomes: list[Any] = result["structuredContent"]["results"]
    return outcomes


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    folder = tmp_path / "secret"
    folder.mkdir()
    (folder / "key.txt").write_text("top secret")
    return folder


# -- 1. rules follow only paths no plugin can change ----------------------------------------------


async def test_tmpdir_swapped_by_the_plugin_reaches_nothing_after_its_restart(
    hostd: HostdClient, tmp_path: Path, secret: Path
) -> None:
    _need_landlock()
    await ready(hostd, probe_plugin(tmp_path))
    [tmpdir] = await run(hostd, ["env", "TMPDIR"])
    # The plugin tries to swap its TMPDIR for a link to the secret folder, then crashes.
    await run(hostd, ["link", str(secret), tmpdir])
    with pytest.raises(RpcError):
        await run(hostd, ["exit", 3])
    await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "ready" and s["restarts"] == 1)
    assert await run(hostd, ["read", str(secret / "key.txt")], ["write", str(secret / "planted"), "x"]) == [
        "EACCES",
        "EACCES",
    ]
    assert not (secret / "planted").exists()
    assert not os.path.islink(tmpdir) and os.path.isdir(tmpdir)


async def test_tmpdir_swapped_while_stopped_is_replaced_at_the_next_start(
    hostd: HostdClient, tmp_path: Path, secret: Path
) -> None:
    """Whoever swapped it (an earlier run of the plugin under a weaker level, anything else): never followed."""
    _need_landlock()
    await ready(hostd, probe_plugin(tmp_path))
    [tmpdir] = await run(hostd, ["env", "TMPDIR"])
    await hostd.request("plugins/disable", {"id": "mcp-probe"})
    shutil.rmtree(tmpdir)
    os.symlink(secret, tmpdir)
    status = await hostd.request("plugins/enable", {"id": "mcp-probe"})
    assert status["status"] == "ready"
    assert await run(hostd, ["read", str(secret / "key.txt")], ["write", os.path.join(tmpdir, "t"), "x"]) == [
        "EACCES",
        "ok",
    ]
    assert not os.path.islink(tmpdir)
    assert sorted(os.listdir(secret)) == ["key.txt"]


async def test_a_folder_argument_swapped_after_approval_voids_the_approval(
    hostd: HostdClient, tmp_path: Path, secret: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    folder = probe_plugin(tmp_path, args=[str(docs)])
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
    await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
    shutil.rmtree(docs)
    docs.symlink_to(secret)
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
    assert refused.value.kind == "MCP_TRUST_APPROVAL_REQUIRED", refused.value.data
    assert info["launch"]["folders"] == {str(docs): str(docs)}
    assert refused.value.data["launch"]["folders"] == {str(docs): str(secret)}
    assert refused.value.data["launch"]["approved"] is False


async def test_a_link_in_another_plugins_writable_folder_is_refused(
    hostd: HostdClient, tmp_path: Path, secret: Path
) -> None:
    _need_landlock()
    shared = tmp_path / "a-docs"
    shared.mkdir()
    await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path, "probe-a", args=[str(shared)]))})
    # Plugin A writes a-docs: a link it plants there must not become plugin B's rule.
    (shared / "inbox").symlink_to(secret)
    info = await hostd.request(
        "plugins/install", {"path": str(probe_plugin(tmp_path, "probe-b", args=[str(shared / "inbox")]))}
    )
    assert info["launch"]["kind"] == "PATH_REFUSED"
    assert (
        f"resolves through the link {shared / 'inbox'}, inside {shared}, which a plugin can write"
        in (info["launch"]["error"])
    )


async def test_a_host_grant_covering_the_state_folder_is_refused(tmp_path: Path) -> None:
    _need_landlock()
    granted = tmp_path / "granted"  # holds the state folder, not the plugin
    granted.mkdir()
    async with HostdClient.spawn(
        ["--state-dir", str(granted / "state"), "--allow-write", str(granted)], env=_env()
    ) as hostd:
        info = await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path))})
        assert info["launch"]["kind"] == "PATH_REFUSED"
        assert f"contains {os.path.realpath(granted / 'state')}, which no plugin may reach" in info["launch"]["error"]
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": "mcp-probe"})
        assert refused.value.data["launchError"] == "PATH_REFUSED"


def _env() -> dict[str, str]:
    from hostd.cli.client import plugin_environment  # noqa: PLC0415

    return plugin_environment()


# -- 2. runtime read rules come from real paths only ----------------------------------------------


async def test_an_interpreter_path_with_dot_dot_opens_no_system_folder(hostd: HostdClient, tmp_path: Path) -> None:
    """``X/bin/python3`` with ``X = /usr/bin/../..`` once made ``X/etc`` (= ``/etc``) readable."""
    _need_landlock()
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs /usr/bin/python3")
    folder = probe_plugin(tmp_path, command="./server.py")
    script = folder / "server.py"
    script.write_text("#!/usr/bin/../../bin/python3\n" + script.read_text())
    script.chmod(0o755)
    status = await ready(hostd, folder)
    assert status["status"] == "ready"
    assert await run(hostd, ["read", "/etc/hostname"], ["read", "/etc/machine-id"]) == ["EACCES", "EACCES"]
    info = await hostd.request("plugins/list", {})
    [plugin] = [p for p in info["plugins"] if p["id"] == "mcp-probe"]
    assert plugin["launch"]["runtime"] == [str(script), os.path.realpath("/usr/bin/python3")]


# -- 3. the approval covers what runs ---------------------------------------------------------------


@pytest.mark.parametrize("form", ["argument", "command"])
async def test_a_script_changed_after_approval_voids_the_approval(
    hostd: HostdClient, tmp_path: Path, form: str
) -> None:
    folder = probe_plugin(tmp_path, command="./server.py" if form == "command" else None)
    script = folder / "server.py"
    if form == "command":
        script.write_text("#!/usr/bin/env python3\n" + script.read_text())
        script.chmod(0o755)
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
    await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
    with script.open("a") as fh:
        fh.write("\nimport os; os.system('touch /tmp/owned')  # noqa\n")
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
    assert refused.value.kind == "MCP_TRUST_APPROVAL_REQUIRED"
    assert list(info["launch"]["files"]) == [str(script)]
    assert refused.value.data["launch"]["files"][str(script)] != info["launch"]["files"][str(script)]
    listed = await hostd.request("plugins/list", {})
    assert [p["launch"]["approved"] for p in listed["plugins"]] == [False]


# -- 4. no shared writable caches -------------------------------------------------------------------


async def test_the_users_package_caches_are_not_writable(hostd: HostdClient, tmp_path: Path) -> None:
    _need_landlock()
    home = Path.home()
    caches = [home / ".npm", home / ".cache" / "uv", home / ".local" / "share" / "uv"]
    made = [c for c in caches if not c.exists()]
    for cache in made:
        cache.mkdir(parents=True)
    planted = [c / "hostd-test-planted" for c in caches]
    try:
        await ready(hostd, probe_plugin(tmp_path))
        assert await run(hostd, *(["write", str(p), "#!/bin/sh\n"] for p in planted)) == ["EACCES"] * 3
        [npm, uv, xdg] = await run(
            hostd, ["env", "npm_config_cache"], ["env", "UV_CACHE_DIR"], ["env", "XDG_CACHE_HOME"]
        )
        data = os.path.realpath(tmp_path / "state" / "data" / "mcp-probe")
        assert (npm, uv, xdg) == (f"{data}/cache/npm", f"{data}/cache/uv", f"{data}/cache")
        assert await run(hostd, ["write", f"{data}/own-file", "x"]) == ["ok"]
    finally:
        for path in planted:
            path.unlink(missing_ok=True)
        for cache in reversed(made):
            shutil.rmtree(cache, ignore_errors=True)


async def test_two_plugins_do_not_share_a_cache(tmp_path: Path) -> None:
    async with spawn_hostd(tmp_path) as hostd:
        await ready(hostd, probe_plugin(tmp_path, "probe-a"))
        await ready(hostd, probe_plugin(tmp_path, "probe-b"))
        [a] = await run(hostd, ["env", "npm_config_cache"], plugin="probe-a")
        [b] = await run(hostd, ["env", "npm_config_cache"], plugin="probe-b")
        assert a != b
        if platform_offers("landlock-fs")[0]:  # the kernel's word, not the probe's: a lost layer fails here
            data_a = os.path.dirname(os.path.dirname(a))
            assert await run(hostd, ["write", os.path.join(data_a, "x"), "x"], plugin="probe-b") == ["EACCES"]


# -- the same, as an unprivileged user ----------------------------------------------------------------


@pytest.fixture
def nobody_work() -> Iterator[Path]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with nobody_folder() as folder:
        yield folder


async def test_pinned_rules_hold_for_an_unprivileged_user(nobody_work: Path) -> None:
    """As nobody: a TMPDIR swapped for a link (before resolution, or between resolution and spawn) and an
    interpreter path with ``..`` reach nothing outside; the swapped TMPDIR is a real folder again."""
    work = nobody_work
    _need_landlock()
    result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_pinning.py", work)
    assert result == {
        "swapped_before_resolve": ["EACCES", "EACCES"],
        "swapped_before_spawn": ["EACCES", "EACCES"],
        "tmp_is_dir": True,
        "prefix": ["EACCES", "EACCES"],
    }
    assert not (work / "outside" / "planted").exists()


# -- named paths: `~` and env values become grants; the user's CA files are readable ------------------


async def test_home_paths_and_env_paths_become_shown_grants(tmp_path: Path) -> None:
    """Users write ``~/docs`` and ``MEMORY_FILE_PATH=~/mem/memory.json``; both become grants, shown and
    digested; ``~`` itself (it holds hostd's state folder and every secret) is refused."""
    _need_landlock()
    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True)
    (home / "mem").mkdir()
    (home / "other").mkdir()
    (home / "other" / "secret.txt").write_text("secret")
    env = {**_env(), "HOME": str(home)}
    folder = probe_plugin(tmp_path, args=["~/docs"])
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["env"] = {"MEMORY_FILE_PATH": "~/mem/memory.json"}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env) as hostd:
        status = await ready(hostd, folder)
        assert status["status"] == "ready"
        [plugin] = (await hostd.request("plugins/list", {}))["plugins"]
        assert plugin["launch"]["folders"] == {
            "~/docs": str(home / "docs"),
            "$MEMORY_FILE_PATH": str(home / "mem" / "memory.json"),
        }
        assert plugin["launch"]["env"] == {"MEMORY_FILE_PATH": "~/mem/memory.json"}
        # No shell runs: hostd expands ~ in env values, so the server gets the path it was granted.
        assert await run(hostd, ["env", "MEMORY_FILE_PATH"]) == [str(home / "mem" / "memory.json")]
        assert await run(
            hostd,
            ["write", str(home / "docs" / "note.txt"), "n"],
            ["write", str(home / "mem" / "memory.json"), "{}"],
            ["read", str(home / "other" / "secret.txt")],
            ["write", str(home / "planted"), "x"],
        ) == ["ok", "ok", "EACCES", "EACCES"]

        whole = probe_plugin(tmp_path, "probe-home", args=["~"])
        info = await hostd.request("plugins/install", {"path": str(whole)})
        assert info["launch"]["kind"] == "PATH_REFUSED"
        assert f"{home}: is {home}, which no plugin may reach" in info["launch"]["error"]


async def test_the_users_ca_file_passes_and_is_readable(tmp_path: Path) -> None:
    """Behind a TLS-inspecting proxy every download needs the user's CA: it passes by default and its
    file (only it) is readable."""
    _need_landlock()
    ca = tmp_path / "corp-ca"
    ca.mkdir()
    (ca / "root.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    (ca / "key.pem").write_text("private")
    env = {**_env(), "SSL_CERT_FILE": str(ca / "root.pem"), "NODE_EXTRA_CA_CERTS": str(ca / "root.pem")}
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env) as hostd:
        await ready(hostd, probe_plugin(tmp_path))
        assert await run(
            hostd,
            ["env", "SSL_CERT_FILE"],
            ["env", "NODE_EXTRA_CA_CERTS"],
            ["read", str(ca / "root.pem")],
            ["read", str(ca / "key.pem")],
        ) == [str(ca / "root.pem"), str(ca / "root.pem"), "-----BEGIN CERTIFICATE-----\n", "EACCES"]


async def test_declared_needs_are_shown_and_granted_once_approved(tmp_path: Path) -> None:
    """``sandbox: {read, write}`` in the manifest: git's global config by name, a notes folder, a data
    sub-folder; shown in ``launch.folders``, granted, nothing else of the home."""
    _need_landlock()
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n\tname = Ada\n")
    (home / ".netrc").write_text("machine x password y")
    folder = probe_plugin(tmp_path)
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["sandbox"] = {"read": ["~/.gitconfig", "~/.config/git"], "write": ["~/notes", "${data}"]}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    env = {**_env(), "HOME": str(home)}
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env) as hostd:
        await ready(hostd, folder)
        [plugin] = (await hostd.request("plugins/list", {}))["plugins"]
        data = os.path.realpath(tmp_path / "state" / "data" / "mcp-probe")
        assert plugin["launch"]["folders"] == {
            "sandbox.read[0]": str(home / ".gitconfig"),
            "sandbox.read[1]": str(home / ".config" / "git"),
            "sandbox.write[0]": str(home / "notes"),
            "sandbox.write[1]": data,
        }
        assert await run(
            hostd,
            ["read", str(home / ".gitconfig")],
            ["write", str(home / ".gitconfig"), "x"],
            ["write", str(home / "notes" / "n.txt"), "n"],
            ["read", str(home / ".netrc")],
        ) == ["[user]\n\tname = Ada\n", "EACCES", "ok", "EACCES"]


# -- a start the sandbox broke says what was refused and how to grant it --------------------------


FAILING = """
import sys
path = "/etc/hostname"
try:
    open(path).read()
except OSError as exc:
    print(f"PermissionError: [Errno {exc.errno}] {exc.strerror}: {path!r}", file=sys.stderr)
for n in range(30):
    print(f"noise {n}", file=sys.stderr)
sys.exit(1)
"""


async def test_a_start_the_sandbox_broke_names_the_path_and_keeps_the_first_lines(
    hostd: HostdClient, tmp_path: Path, secret: Path
) -> None:
    _need_landlock()
    folder = probe_plugin(tmp_path, args=[])
    (folder / "failing.py").write_text(FAILING)
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["args"] = ["failing.py"]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    with pytest.raises(RpcError) as failed:
        await ready(hostd, folder)
    data = failed.value.data
    assert failed.value.kind == "PLUGIN_START_FAILED"
    assert data["stderrHead"] == [
        "PermissionError: [Errno 13] Permission denied: '/etc/hostname'",
        *(f"noise {n}" for n in range(4)),
    ]
    assert data["stderrTail"] == [f"noise {n}" for n in range(20, 30)]
    assert data["hint"].startswith("the sandbox refused /etc/hostname: a plugin reads only its folder")
    assert "sandbox.read / sandbox.write" in data["hint"]


# -- file metadata: no setuid, no chown, no xattrs -------------------------------------------------


async def test_a_plugin_cannot_make_a_file_setuid_nor_change_owners_or_attributes(
    hostd: HostdClient, tmp_path: Path
) -> None:
    """Landlock does not govern chmod, chown or xattrs: seccomp refuses chown, xattr writes, and any chmod
    that sets setuid, setgid or sticky. A root plugin once made a root-owned copy of ``id``, outside its
    rules, setuid root for every local user."""
    tool = tmp_path / "tool"
    shutil.copy("/usr/bin/id", tool)
    before = tool.stat().st_mode
    await ready(hostd, probe_plugin(tmp_path))
    [data] = await run(hostd, ["env", "XDG_CACHE_HOME"])
    own = os.path.join(os.path.dirname(data), "own.sh")
    assert await run(
        hostd,
        ["chmod", str(tool), "4755"],
        ["chmod", str(tool), "2755"],
        ["chown", str(tool)],
        ["setxattr", str(tool)],
        ["write", own, "#!/bin/sh\n"],
        ["chmod", own, "755"],
        ["chmod", own, "4755"],
    ) == ["EPERM", "EPERM", "EPERM", "EPERM", "ok", "ok", "EPERM"]
    assert tool.stat().st_mode == before
    assert os.stat(own).st_mode & 0o7777 == 0o755


# -- code that runs never lies where a plugin can write (found by an attack) --------------------------


async def test_a_script_in_a_plugin_writable_folder_is_refused_and_one_elsewhere_is_pinned(
    hostd: HostdClient, tmp_path: Path
) -> None:
    """A script named by absolute path outside the plugin folder: in the host-wide write grant another
    plugin could rewrite it (refused); elsewhere its content is in the approval (a change voids it)."""
    _need_landlock()
    planted = tmp_path / "shared" / "tool" / "server.py"
    planted.parent.mkdir(parents=True)
    shutil.copy(PROBE / "server.py", planted)
    folder = probe_plugin(tmp_path, "victim", command="python3")
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["args"] = [str(planted)]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    info = await hostd.request("plugins/install", {"path": str(folder)})
    assert info["launch"]["kind"] == "PATH_REFUSED"
    assert (
        f"{planted}: is code that runs, inside {tmp_path / 'shared'}, which a plugin can write"
        in (info["launch"]["error"])
    )

    elsewhere = tmp_path / "tools" / "server.py"
    elsewhere.parent.mkdir()
    shutil.copy(PROBE / "server.py", elsewhere)
    manifest["backend"]["args"] = [str(elsewhere)]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    await hostd.request("plugins/uninstall", {"id": "victim"})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    assert list(info["launch"]["files"]) == [str(elsewhere)]
    await hostd.request("plugins/grant", {"id": "victim", "permissions": ["probe.run"]})
    await hostd.request("plugins/approve", {"id": "victim", "digest": info["launch"]["digest"]})
    with elsewhere.open("a") as fh:
        fh.write("\n# changed after approval\n")
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/enable", {"id": "victim"})
    assert refused.value.kind == "MCP_TRUST_APPROVAL_REQUIRED"


async def test_a_plugin_folder_inside_another_plugins_grant_is_refused(hostd: HostdClient, tmp_path: Path) -> None:
    """Plugin A may write ~/proj (approved); a plugin installed later from ~/proj/plugD would run code A
    can rewrite."""
    _need_landlock()
    project = tmp_path / "proj"
    project.mkdir()
    await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path, "probe-a", args=[str(project)]))})
    inner = probe_plugin(project, "plugd")
    info = await hostd.request("plugins/install", {"path": str(inner)})
    assert info["launch"]["kind"] == "PATH_REFUSED"
    assert f"the plugin folder lies in {project}, which a plugin can write" in info["launch"]["error"]


# -- the disk bound sees what a plugin hides (found by an attack) --------------------------------


@pytest.mark.parametrize("trick", ["hold", "hide"])
async def test_the_disk_bound_counts_deleted_open_files_and_unreadable_folders(
    tmp_path: Path, make_plugin: MakePlugin, trick: str
) -> None:
    """``hold``: a file written, unlinked and kept open (no folder walk sees it); ``hide``: a folder chmod 000
    after filling it. Both once held hundreds of MB past a 50 MB bound; both now stop the plugin. (As root
    ``hide`` cannot hide anything; the walk's part of it is proved as nobody below.)"""
    async with spawn_hostd(tmp_path, "--restart", "never", "--max-disk-mb", "8") as hostd:
        assert (await ready(hostd, make_plugin("other")))["status"] == "ready"
        await ready(hostd, probe_plugin(tmp_path))
        [cache] = await run(hostd, ["env", "XDG_CACHE_HOME"])
        target = os.path.join(os.path.dirname(cache), "hidden")
        # The watchdog samples while the plugin writes: it may stop the plugin before the 16 MB are written
        # (then the call fails with the stop's reason) or after (then the call said ok). Both are the bound held.
        try:
            assert await run(hostd, [trick, target, 16]) == ["ok"]
        except RpcError as exc:
            assert exc.kind == "PLUGIN_HOST_UNAVAILABLE" and "disk" in exc.message, exc
        stopped = await hostd.wait_for(
            "plugins/statusChanged",
            lambda s: s["plugin_id"] == "mcp-probe" and s["status"] == "unhealthy",
            timeout=30,
        )
        assert stopped["error"]["limit"]["limit"] == "disk"
        assert stopped["error"]["limit"]["value"] > 8 * 1024 * 1024  # over the bound, however far it got
        if trick == "hold":
            assert "in deleted files it keeps open" in stopped["error"]["reason"]
        result = await hostd.request("tools/call", {"name": "other.echo", "arguments": {"text": "up"}})
        assert result["structuredContent"] == {"text": "up", "length": 2}


async def test_an_unreadable_folder_still_counts_in_the_disk_walk_as_nobody(nobody_work: Path) -> None:
    result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_diskwalk.py", nobody_work)
    assert result["allocated"] >= 4 * 1024 * 1024
    assert result["mode"] == "0o700"  # the owner's access given back (never through a link)
