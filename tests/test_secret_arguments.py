"""Secrets never travel in argv (issue 25, over-granting 2).

The class (hostd/host/launch.py ``refuse_secret_arguments``): a secret value on a command line, which
every process of the machine reads in ``/proc/<pid>/cmdline``. Members: a ``sensitive`` bundle option
used in ``args`` (as ``--token=${user_config.api_key}`` and as a whole argument); a ``${secret:NAME}``
in a hand-written manifest's args is the same reference after install. A real node server is started;
the test finds its real pid in ``/proc`` and reads the command line the kernel shows for it.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from sandbox.paths import write_private_file
from tests.conftest import FIXTURES
from tests.test_bundle import build, call_text, mcpb_manifest
from tests.test_sandbox_pinning import probe_plugin, run

NODE = FIXTURES / "mcp-node"
SECRET = "sk-argv-SECRET-0123456789"
OPTIONS = {"api_key": {"type": "string", "title": "API key", "description": "k", "sensitive": True, "required": True}}


def _bundle(tmp_path: Path, name: str, args: list[str], env: dict[str, str]) -> Path:
    config = {"command": "node", "args": ["${__dirname}/server/index.js", *args], "env": env}
    return build(
        tmp_path / f"{name}.mcpb",
        mcpb_manifest(
            name=name,
            user_config=OPTIONS,
            server={"type": "node", "entry_point": "server/index.js", "mcp_config": config},
        ),
        {"server/index.js": (NODE / "server.js").read_bytes()},
    )


def _pid_running(script: Path) -> int:
    """The real pid of the process whose command line names ``script`` (read from /proc, as any process can)."""
    [pid] = [int(name) for name in os.listdir("/proc") if name.isdigit() and _names(name, script)]
    return pid


async def _installed(client: HostdClient, path: Path, plugin_id: str) -> dict[str, Any]:
    await client.request("plugins/install", {"path": str(path)})
    info: dict[str, Any] = await client.request("plugins/configure", {"id": plugin_id, "values": {"api_key": SECRET}})
    return info


async def test_a_secret_reaches_the_plugin_but_never_its_command_line(tmp_path: Path, hostd: HostdClient) -> None:
    # Through env: the plugin gets it, /proc/<pid>/cmdline does not show it.
    info = await _installed(hostd, _bundle(tmp_path, "env-key", [], {"API_KEY": "${user_config.api_key}"}), "env-key")
    assert "secretArguments" not in info["launch"]
    await hostd.request("plugins/approve", {"id": "env-key", "digest": info["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": "env-key"}))["status"] == "ready"
    assert await call_text(hostd, "env-key.env", {"name": "API_KEY"}) == SECRET
    pid = _pid_running(tmp_path / "state" / "bundles" / "env-key" / "server" / "index.js")
    assert SECRET.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()

    # As an argument: refused by default, named, before anything runs.
    for plugin_id, args in (
        ("argv-key", ["--token=${user_config.api_key}"]),
        ("argv-word", ["${user_config.api_key}"]),
    ):
        info = await _installed(hostd, _bundle(tmp_path, plugin_id, args, {}), plugin_id)
        assert info["launch"]["secretArguments"] == ["api_key"]
        await hostd.request("plugins/approve", {"id": plugin_id, "digest": info["launch"]["digest"]})
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": plugin_id})
        assert refused.value.kind == "SECRET_IN_ARGUMENTS", plugin_id
        assert refused.value.data["secrets"] == ["api_key"]
        assert "plugins/grant secretArguments: true" in refused.value.message
        # The remedy names the file channel, in the manifest's own words (issue 25).
        assert refused.value.data["remedy"] == ["${user_config.api_key:file}"]
        assert "as a 0600 file whose path the argument names" in refused.value.message
        script = tmp_path / "state" / "bundles" / plugin_id / "server" / "index.js"
        assert not [n for n in os.listdir("/proc") if n.isdigit() and _names(n, script)]

    # The explicit opt-in: a new digest to approve (the approval shows it), then the argument is passed.
    before = (await hostd.request("plugins/list", {}))["plugins"]
    [old] = [p["launch"]["digest"] for p in before if p["id"] == "argv-key"]
    info = await hostd.request("plugins/grant", {"id": "argv-key", "permissions": [], "secretArguments": True})
    assert info["launch"]["digest"] != old and info["launch"]["approved"] is False
    assert info["launch"]["secretArguments"] == ["api_key"]
    await hostd.request("plugins/approve", {"id": "argv-key", "digest": info["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": "argv-key"}))["status"] == "ready"
    assert await call_text(hostd, "argv-key.argv", {}) == f'["--token={SECRET}"]'


def _names(pid: str, script: Path) -> bool:
    try:
        return str(script).encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


async def test_a_secret_as_a_0600_file_only_its_path_on_the_command_line(tmp_path: Path, hostd: HostdClient) -> None:
    """The file channel: ``${user_config.X:file}`` (a sensitive bundle option) and ``${secret:NAME:file}`` (a
    hand-written manifest), in ``args`` and in ``env``, become the path of a file holding the value, readable
    by its owner only, in the plugin's TMPDIR; the command line shows the path, never the value; the approval
    lists the secret by that channel and no opt-in is needed; the file is gone once the plugin stops."""
    args = ["--token-file", "${user_config.api_key:file}"]
    bundle = _bundle(tmp_path, "file-key", args, {"API_KEY_FILE": "${user_config.api_key:file}"})
    info = await _installed(hostd, bundle, "file-key")
    assert "secretArguments" not in info["launch"]  # no opt-in needed: only a path is on the command line
    assert info["launch"]["args"][-2:] == ["--token-file", "${secret:api_key:file}"]  # what is approved
    assert info["launch"]["capabilities"]["secrets"] == [{"name": "api_key", "channel": "file", "set": True}]
    await hostd.request("plugins/approve", {"id": "file-key", "digest": info["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": "file-key"}))["status"] == "ready"
    path = str(tmp_path / "state" / "tmp" / "file-key" / "hostd-secret-api_key")
    assert json.loads(await call_text(hostd, "file-key.argv", {})) == ["--token-file", path]
    assert await call_text(hostd, "file-key.env", {"name": "API_KEY_FILE"}) == path
    assert Path(path).read_text() == SECRET
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    pid = _pid_running(tmp_path / "state" / "bundles" / "file-key" / "server" / "index.js")
    assert SECRET.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
    # The server logging what it read from the file: what hostd relays is masked, as for an env secret.
    assert await call_text(hostd, "file-key.log", {"text": f"read {SECRET}!"}) == "logged"
    logged = await hostd.wait_for("plugins/log", lambda n: n["message"].startswith("read "))
    assert logged["message"] == "read [REDACTED]!"

    # A hand-written manifest's ${secret:NAME:file}, read by the plugin itself inside its sandbox.
    folder = probe_plugin(tmp_path, "probe-file", args=["${secret:TOKEN:file}"])
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["env"] = {"TOKEN_FILE": "${secret:TOKEN:file}"}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/configure", {"id": "probe-file", "values": {"TOKEN": SECRET}})
    await hostd.request("plugins/grant", {"id": "probe-file", "permissions": ["probe.run"]})
    info = (await hostd.request("plugins/list", {}))["plugins"]
    [probe] = [p for p in info if p["id"] == "probe-file"]
    assert probe["launch"]["capabilities"]["secrets"] == [{"name": "TOKEN", "channel": "file", "set": True}]
    await hostd.request("plugins/approve", {"id": "probe-file", "digest": probe["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": "probe-file"}))["status"] == "ready"
    token_file = str(tmp_path / "state" / "tmp" / "probe-file" / "hostd-secret-TOKEN")
    ops = [["env", "TOKEN_FILE"], ["read", token_file], ["write", token_file + ".copy", "x"], ["read", path]]
    # Its own file it reads; another plugin's (same user, 0600 does not part them) Landlock keeps from it.
    assert await run(hostd, *ops, plugin="probe-file") == [token_file, SECRET, "ok", "EACCES"]
    await hostd.request("plugins/disable", {"id": "file-key"})
    assert not os.path.lexists(path)  # removed when the plugin stops


def test_a_secret_file_is_never_written_through_a_link_the_plugin_planted(tmp_path: Path) -> None:
    """The plugin writes its TMPDIR: a link at the file's name is replaced (its target untouched), and a TMPDIR
    that is itself a link is refused (ELOOP or ENOTDIR), so hostd never writes a secret where the plugin
    points it."""
    tmpdir, outside = tmp_path / "tmp", tmp_path / "outside"
    tmpdir.mkdir(mode=0o700)
    outside.mkdir()
    (outside / "target").write_text("theirs")
    (tmpdir / "hostd-secret-TOKEN").symlink_to(outside / "target")
    write_private_file(str(tmpdir / "hostd-secret-TOKEN"), SECRET)
    assert not (tmpdir / "hostd-secret-TOKEN").is_symlink()
    assert (tmpdir / "hostd-secret-TOKEN").read_text() == SECRET
    assert stat.S_IMODE((tmpdir / "hostd-secret-TOKEN").stat().st_mode) == 0o600
    assert (outside / "target").read_text() == "theirs"
    linked = tmp_path / "linked-tmp"
    linked.symlink_to(outside)
    with pytest.raises(OSError):
        write_private_file(str(linked / "hostd-secret-TOKEN"), SECRET)
    assert sorted(os.listdir(outside)) == ["target"]
