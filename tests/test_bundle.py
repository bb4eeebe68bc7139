"""MCPB bundles: safe extraction (hostile archives), validation, user_config, node and python servers end to end."""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install import bundle
from hostd.wire.errors import HostError
from tests.conftest import ECHO, ECHO_TOOLS, FIXTURES

NODE = FIXTURES / "mcp-node"


def mcpb_manifest(**overrides: Any) -> dict[str, Any]:
    """A valid 0.3 manifest for a node server at server/index.js; ``overrides`` replace top-level fields."""
    manifest: dict[str, Any] = {
        "manifest_version": "0.3",
        "name": "node-echo",
        "display_name": "Node echo",
        "version": "1.2.3",
        "description": "The node fixture.",
        "author": {"name": "hostd tests"},
        "server": {
            "type": "node",
            "entry_point": "server/index.js",
            "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js"]},
        },
        "tools": [{"name": "echo"}, {"name": "env"}, {"name": "argv"}, {"name": "log"}],
    }
    manifest.update(overrides)
    return manifest


def build(path: Path, manifest: dict[str, Any] | None, files: dict[str, bytes] | None = None) -> Path:
    """Write a bundle: ``manifest.json`` (unless None) and ``files`` (name -> bytes), deflated."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        if manifest is not None:
            archive.writestr("manifest.json", json.dumps(manifest))
        for name, data in (files or {}).items():
            archive.writestr(name, data)
    return path


def node_bundle(tmp_path: Path, **overrides: Any) -> Path:
    return build(
        tmp_path / "node-echo.mcpb",
        mcpb_manifest(**overrides),
        {"server/index.js": (NODE / "server.js").read_bytes()},
    )


def special(name: str, mode: int, data: bytes = b"") -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix: the mode is in the high 16 bits
    info.external_attr = mode << 16
    return info, data


def archive_of(*members: tuple[zipfile.ZipInfo | str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return buffer.getvalue()


# -- hostile archives ---------------------------------------------------------------------------
# The class (hostd/install/bundle.py): an entry that would land anywhere but a new regular file or folder
# inside the destination, or that costs more than the bounds. One member of each kind below, each
# refused with the entry named, nothing written outside the destination.

HOSTILE: dict[str, tuple[tuple[zipfile.ZipInfo | str, bytes], str, str]] = {
    "zip-slip": (("../evil.txt", b"x"), "../evil.txt", "contains '..'"),
    "deep zip-slip": (("server/../../evil.txt", b"x"), "server/../../evil.txt", "contains '..'"),
    "absolute": (("/tmp/hostd-evil.txt", b"x"), "/tmp/hostd-evil.txt", "is an absolute path"),
    "drive": (("C:/evil.txt", b"x"), "C:/evil.txt", "is an absolute path"),
    "backslash": (("..\\evil.txt", b"x"), "..\\evil.txt", "contains a backslash"),
    "symlink": (special("server/link", stat.S_IFLNK | 0o777, b"/etc/passwd"), "server/link", "is a symbolic link"),
    "device": (special("server/dev", stat.S_IFCHR | 0o666), "server/dev", "is a character device"),
    "fifo": (special("server/fifo", stat.S_IFIFO | 0o666), "server/fifo", "FIFO"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_entries_are_refused_and_nothing_lands_outside(tmp_path: Path, case: str) -> None:
    member, name, reason = HOSTILE[case]
    archive = archive_of(("manifest.json", b"{}"), member)
    destination = tmp_path / "box" / "out"
    destination.parent.mkdir()
    with pytest.raises(HostError) as refused:
        bundle.extract(archive, destination)
    assert refused.value.kind.name == "PACKAGE_INVALID"
    assert refused.value.data["entry"] == name
    assert reason in refused.value.message
    assert not destination.exists()  # checked before anything is written
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["box"]
    assert not Path("/tmp/hostd-evil.txt").exists()


def test_duplicate_entries_are_refused(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        archive = archive_of(("a.txt", b"1"), ("a.txt", b"2"))
    with pytest.raises(HostError, match="appears twice"):
        bundle.extract(archive, tmp_path / "out")


def test_zip_bomb_is_refused_by_ratio_and_by_total(tmp_path: Path) -> None:
    zeros = archive_of(("manifest.json", b"{}"), ("bomb.bin", bytes(64 * 1024 * 1024)))
    assert len(zeros) < 200 * 1024  # 64 MiB of zeros deflate to ~64 KiB: ratio ~1000
    with pytest.raises(HostError) as ratio:
        bundle.extract(zeros, tmp_path / "a")
    assert ratio.value.data["entry"] == "bomb.bin"
    assert "inflates more than 200 times" in ratio.value.message
    # Many entries each under the ratio, together over the total bound.
    with pytest.raises(HostError) as total:
        bundle.extract(zeros, tmp_path / "b", max_unpacked=1024 * 1024, max_ratio=10_000)
    assert "exceeds the bound" in total.value.data["errors"][0]["message"]
    # The sizes counted are the bytes inflated, not the header's claim.
    written = bundle.extract(archive_of(("f", b"abc")), tmp_path / "c")
    assert written == 3
    assert (tmp_path / "c" / "f").read_bytes() == b"abc"
    assert stat.S_IMODE((tmp_path / "c" / "f").stat().st_mode) == 0o600


def test_executable_bit_is_kept_and_nothing_else(tmp_path: Path) -> None:
    info, data = special("bin/server", stat.S_IFREG | 0o4777, b"#!/bin/sh\n")
    bundle.extract(archive_of((info, data), ("lib/a.txt", b"a")), tmp_path / "out")
    assert stat.S_IMODE((tmp_path / "out" / "bin" / "server").stat().st_mode) == 0o700  # no setuid, no group/other
    assert stat.S_IMODE((tmp_path / "out" / "lib").stat().st_mode) == 0o700


# -- validation ---------------------------------------------------------------------------------


def load(tmp_path: Path, manifest: dict[str, Any]) -> bundle.McpbManifest:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return bundle.load_mcpb_manifest(folder)


def fields(tmp_path: Path, manifest: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(HostError) as refused:
        load(tmp_path, manifest)
    assert refused.value.kind.name == "PACKAGE_INVALID"
    return [(e["field"], e["message"]) for e in refused.value.data["errors"]]


def test_manifest_errors_are_precise_and_all_reported(tmp_path: Path) -> None:
    broken = mcpb_manifest(author={}, server={"type": "ruby", "entry_point": "x", "mcp_config": {}}, colour="red")
    del broken["version"]
    assert fields(tmp_path, broken) == [
        ("version", "Field required"),
        ("author.name", "Field required"),
        ("server.type", "Input should be 'python', 'node', 'binary' or 'uv'"),
        ("server.mcp_config.command", "Field required"),
        ("colour", "Extra inputs are not permitted"),
    ]
    no_version = mcpb_manifest()
    del no_version["manifest_version"]
    assert fields(tmp_path, no_version) == [
        ("", "either 'manifest_version' or (deprecated) 'dxt_version' must be given (0.2 to 0.4)")
    ]
    uv = mcpb_manifest(server={"type": "uv", "entry_point": "s.py", "mcp_config": {"command": "uv"}})
    assert fields(tmp_path, uv) == [("", "server.type 'uv' needs manifest_version 0.4")]
    assert load(tmp_path, {**uv, "manifest_version": "0.4"}).server.type == "uv"
    old = mcpb_manifest(manifest_version=None, dxt_version="0.2", icons=[])
    assert fields(tmp_path, old) == [("", "icons: not in manifest version 0.2 (use 0.3 or later)")]
    assert fields(tmp_path, mcpb_manifest(manifest_version="0.5")) == [
        ("manifest_version", "Input should be '0.2', '0.3' or '0.4'")
    ]


def test_conversion_substitutes_without_a_shell(tmp_path: Path) -> None:
    folder = tmp_path / "b"
    config = {
        "command": "${__dirname}/bin/server",
        "args": ["--root", "${__dirname}", "${user_config.dirs}", "--home=${HOME}/x"],
        "env": {"API_KEY": "${user_config.key}", "MODE": "${user_config.mode}"},
        "platform_overrides": {
            sys.platform: {"env": {"MODE": "override ${user_config.mode}"}},
            "nowhere": {"command": "never"},
        },
    }
    user_config = {
        "dirs": {"type": "directory", "title": "Folders", "description": "d", "multiple": True},
        "key": {"type": "string", "title": "Key", "description": "k", "sensitive": True, "required": True},
        "mode": {"type": "string", "title": "Mode", "description": "m", "default": "fast"},
    }
    mcpb = load(
        tmp_path,
        mcpb_manifest(
            server={"type": "binary", "entry_point": "bin/server", "mcp_config": config},
            user_config=user_config,
            tools_generated=True,
        ),
    )
    document = bundle.plugin_manifest(mcpb, folder, sha256="0" * 64, signature="unsigned", source="x.mcpb")
    assert document["backend"] == {
        "type": "mcp",
        "transport": "stdio",
        "command": f"{folder}/bin/server",
        "args": ["--root", str(folder), "${user_config.dirs}", "--home=${HOME}/x"],
        "env": {"API_KEY": "${secret:key}", "MODE": "override ${user_config.mode}"},
        "startup_timeout_seconds": 60,
    }
    assert document["contributes"] == {"tools": [], "discover": True}  # tools_generated
    assert document["user_config"]["key"] == {
        "type": "string",
        "title": "Key",
        "description": "k",
        "required": True,
        "sensitive": True,
    }
    bad = load(tmp_path, mcpb_manifest(server={**mcpb.server.model_dump(), "mcp_config": {"command": "${nope}"}}))
    with pytest.raises(HostError) as unknown:
        bundle.plugin_manifest(bad, folder, sha256="", signature="unsigned", source="")
    assert unknown.value.data["errors"] == [
        {"field": "server.mcp_config.command", "message": "unknown variable ${nope}"}
    ]
    elsewhere = load(tmp_path, mcpb_manifest(compatibility={"platforms": ["win32"]}))
    with pytest.raises(HostError) as platform:
        bundle.plugin_manifest(elsewhere, folder, sha256="", signature="unsigned", source="")
    assert platform.value.message == f"the bundle supports win32, not {sys.platform}"


def test_entry_point_and_binary_command_must_be_in_the_bundle(tmp_path: Path) -> None:
    def refusal(path: Path) -> list[dict[str, Any]]:
        with pytest.raises(HostError) as refused:
            bundle.install_bundle(bundle.read_bundle(path), tmp_path / "root")
        assert os.listdir(tmp_path / "root") == []  # nothing left behind
        errors: list[dict[str, Any]] = refused.value.data["errors"]
        return errors

    missing = build(tmp_path / "a.mcpb", mcpb_manifest(), {})
    assert refusal(missing) == [{"field": "server.entry_point", "message": "is not a file of the bundle"}]
    config = {"command": "/usr/bin/node", "args": []}
    binary = node_bundle(tmp_path, server={"type": "binary", "entry_point": "server/index.js", "mcp_config": config})
    assert refusal(binary) == [
        {
            "field": "server.mcp_config.command",
            "message": "a binary server's command must be a program of the bundle ('${__dirname}/...')",
        }
    ]
    with zipfile.ZipFile(tmp_path / "c.mcpb", "w") as archive:
        archive.writestr("manifest.json", json.dumps(mcpb_manifest()))
        archive.writestr("server/index.js", "")
        archive.writestr("plugin.json", "{}")
    with pytest.raises(HostError, match=r"plugin\.json, a name hostd keeps for its own manifest"):
        bundle.install_bundle(bundle.read_bundle(tmp_path / "c.mcpb"), tmp_path / "root")


def test_signature_block_is_detected(tmp_path: Path) -> None:
    # Signatures that check are in tests/test_bundle_signing.py; a block that is no PKCS#7 is refused.
    path = node_bundle(tmp_path)
    assert bundle.read_bundle(path).signature == "unsigned"
    signature = b"not really PKCS#7"
    with path.open("ab") as out:
        out.write(bundle.SIGNATURE_HEADER + struct.pack("<I", len(signature)) + signature + bundle.SIGNATURE_FOOTER)
    with pytest.raises(HostError) as refused:
        bundle.read_bundle(path)
    assert refused.value.data["reason"] == "signature-malformed"


# -- end to end ---------------------------------------------------------------------------------


async def call_text(client: HostdClient, name: str, arguments: dict[str, Any]) -> str:
    result = await client.request("tools/call", {"name": name, "arguments": arguments})
    text: str = result["content"][0]["text"]
    return text


async def test_node_bundle_with_user_config_secret_and_folders(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    docs, notes = shared / "docs", shared / "notes"
    user_config = {
        "api_key": {"type": "string", "title": "API key", "description": "k", "sensitive": True, "required": True},
        "folders": {"type": "directory", "title": "Folders", "description": "f", "multiple": True, "required": True},
        "verbose": {"type": "boolean", "title": "Verbose", "description": "v", "default": False},
    }
    config = {
        "command": "node",
        "args": ["${__dirname}/server/index.js", "--verbose=${user_config.verbose}", "${user_config.folders}"],
        "env": {"API_KEY": "${user_config.api_key}"},
    }
    path = node_bundle(
        tmp_path,
        user_config=user_config,
        server={"type": "node", "entry_point": "server/index.js", "mcp_config": config},
    )
    secret = "sk-bundle-SECRET-0123456789"
    for made in (docs, notes):
        made.mkdir(parents=True)
    log = (tmp_path / "hostd.log").open("wb")
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state"), "--log-level", "debug"],
        env=plugin_environment(),
        stderr=log.fileno(),
    ) as client:
        info = await client.request("plugins/install", {"path": str(path)})
        folder = tmp_path / "state" / "bundles" / "node-echo"
        assert info["id"] == "node-echo"
        assert info["path"] == str(folder)
        assert info["tools"] == ["node-echo.echo", "node-echo.env", "node-echo.argv", "node-echo.log"]
        assert info["origin"] == {
            "kind": "mcpb",
            "source": str(path),
            "sha256": info["origin"]["sha256"],
            "signature": "unsigned",
        }
        assert [(c["name"], c["required"], c["sensitive"], c["set"], c["value"]) for c in info["userConfig"]] == [
            ("api_key", True, True, False, None),
            ("folders", True, False, False, None),
            ("verbose", False, False, True, False),
        ]
        with pytest.raises(RpcError) as blocked:
            await client.request("plugins/enable", {"id": "node-echo"})
        assert blocked.value.kind == "CONFIG_REQUIRED"
        assert blocked.value.data["missing"] == ["api_key", "folders"]
        assert "plugins/configure" in blocked.value.message

        with pytest.raises(RpcError) as wrong:
            await client.request(
                "plugins/configure", {"id": "node-echo", "values": {"folders": "relative/x", "colour": "red"}}
            )
        assert wrong.value.kind == "INVALID_PARAMS"
        assert [e["field"] for e in wrong.value.data["errors"]] == ["folders", "colour"]

        info = await client.request(
            "plugins/configure",
            {"id": "node-echo", "values": {"api_key": secret, "folders": [str(docs), str(notes)]}},
        )
        assert [(c["name"], c["set"]) for c in info["userConfig"]] == [
            ("api_key", True),
            ("folders", True),
            ("verbose", True),
        ]
        launch = info["launch"]
        assert launch["args"] == [f"{folder}/server/index.js", "--verbose=false", str(docs), str(notes)]
        assert launch["env"] == {"API_KEY": None}
        assert launch["folders"][str(docs)] == str(docs)  # granted, shown, covered by the digest
        await client.request("plugins/approve", {"id": "node-echo", "digest": launch["digest"]})
        status = await client.request("plugins/enable", {"id": "node-echo"})
        assert status["status"] == "ready"
        assert await call_text(client, "node-echo.env", {"name": "API_KEY"}) == secret
        assert json.loads(await call_text(client, "node-echo.argv", {})) == ["--verbose=false", str(docs), str(notes)]
        listed = await client.request("plugins/list", {})
        await client.request("plugins/disable", {"id": "node-echo"})
    log.close()
    # The secret is in the secret store only: not in any manifest, state, settings, log or answer.
    assert secret not in json.dumps(info) + json.dumps(listed)
    store = tmp_path / "state" / "secrets" / "secrets.json"
    install = json.loads((tmp_path / "state" / "state.json").read_text())["plugins"]["node-echo"]["install"]["id"]
    assert json.loads(store.read_text())["plugins"] == {f"node-echo#{install}": {"api_key": secret}}
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    for file in (tmp_path / "state").rglob("*"):
        if file.is_file() and file != store:
            assert secret.encode() not in file.read_bytes(), file
    assert secret.encode() not in (tmp_path / "hostd.log").read_bytes()


async def test_python_bundle_with_generated_tools(tmp_path: Path, hostd: HostdClient) -> None:
    config = {"command": "python3", "args": ["${__dirname}/server/server.py"], "env": {"ECHO_MODE": "plain"}}
    path = build(
        tmp_path / "echo.dxt",
        mcpb_manifest(
            name="Py Echo",
            manifest_version=None,
            dxt_version="0.2",
            server={"type": "python", "entry_point": "server/server.py", "mcp_config": config},
            tools=None,
            tools_generated=True,
        ),
        {"server/server.py": (ECHO / "server.py").read_bytes()},
    )
    info = await hostd.request("plugins/install", {"path": str(path)})
    assert (info["id"], info["tools"], info["name"]) == ("py-echo", [], "Node echo")
    assert "userConfig" not in info
    await hostd.request("plugins/approve", {"id": "py-echo", "digest": info["launch"]["digest"]})
    enabled = await hostd.request("plugins/enable", {"id": "py-echo"})  # tools_generated: pinned on first use
    assert enabled["status"] == "ready"
    assert enabled["pinned"] == sorted(f"py-echo.{t}" for t in ECHO_TOOLS)
    result = await hostd.request("tools/call", {"name": "py-echo.echo", "arguments": {"text": "hi"}})
    assert result["structuredContent"] == {"text": "hi", "length": 2}
    # Reinstalling while it runs is refused before anything on disk changes.
    with pytest.raises(RpcError) as running:
        await hostd.request("plugins/install", {"path": str(path)})
    assert running.value.kind == "PLUGIN_STATE_CONFLICT"
    await hostd.request("plugins/uninstall", {"id": "py-echo"})
    assert sorted(os.listdir(tmp_path / "state" / "bundles")) == []


def echo_bundle(path: Path, version: str, *args: str) -> Path:
    """The echo fixture as a python bundle ``echo-py`` of ``version``, its server run with ``args``."""
    config = {"command": "python3", "args": ["${__dirname}/server/server.py", *args], "env": {"ECHO_MODE": "plain"}}
    return build(
        path,
        mcpb_manifest(
            name="echo-py",
            version=version,
            server={"type": "python", "entry_point": "server/server.py", "mcp_config": config},
            tools=None,
            tools_generated=True,
        ),
        {"server/server.py": (ECHO / "server.py").read_bytes()},
    )


async def test_a_newer_bundle_replaces_a_plugin_in_error_without_a_disable(tmp_path: Path, hostd: HostdClient) -> None:
    """Issue 28: a plugin whose start failed runs nothing; installing a fixed release of its bundle replaces it
    as it is (``plugins/import`` did already), its grants kept; a running plugin is still refused."""
    broken = echo_bundle(tmp_path / "echo-1.0.0.mcpb", "1.0.0", "--variant", "exit-at-start")
    info = await hostd.request("plugins/install", {"path": str(broken)})
    await hostd.request("plugins/grant", {"id": "echo-py", "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": "echo-py", "digest": info["launch"]["digest"]})
    with pytest.raises(RpcError) as failed:
        await hostd.request("plugins/enable", {"id": "echo-py"})
    assert failed.value.kind == "PLUGIN_START_FAILED"
    assert (await hostd.request("plugins/status", {"id": "echo-py"}))["status"] == "error"

    fixed = await hostd.request("plugins/install", {"path": str(echo_bundle(tmp_path / "echo-1.0.1.mcpb", "1.0.1"))})
    assert (fixed["id"], fixed["version"], fixed["status"], fixed["enabled"]) == ("echo-py", "1.0.1", "stopped", False)
    assert fixed["granted"] == sorted(info["permissions"])
    assert fixed["launch"]["approved"] is False  # another launch: approved again
    await hostd.request("plugins/approve", {"id": "echo-py", "digest": fixed["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": "echo-py"}))["status"] == "ready"
    with pytest.raises(RpcError) as running:
        await hostd.request("plugins/install", {"path": str(tmp_path / "echo-1.0.1.mcpb")})
    assert running.value.kind == "PLUGIN_STATE_CONFLICT"


async def test_hostile_bundles_through_install(tmp_path: Path, hostd: HostdClient) -> None:
    cases = {
        "slip.mcpb": archive_of(("manifest.json", json.dumps(mcpb_manifest()).encode()), ("../../escaped", b"x")),
        "link.mcpb": archive_of(
            ("manifest.json", json.dumps(mcpb_manifest()).encode()), special("server/index.js", stat.S_IFLNK | 0o777)
        ),
        "nomanifest.mcpb": archive_of(("server/index.js", b"")),
        "notzip.mcpb": b"PK\x03\x04 not really",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/install", {"path": str(tmp_path / name)})
        assert refused.value.kind == "PACKAGE_INVALID", name
    assert not (tmp_path / "escaped").exists()
    assert not (tmp_path / "state" / "escaped").exists()
    assert os.listdir(tmp_path / "state" / "bundles") == []  # no staging folder left behind
    assert (await hostd.request("plugins/list", {}))["plugins"] == []


async def test_archives_are_validated_as_a_tree_before_extraction(tmp_path: Path, hostd: HostdClient) -> None:
    """Issue 29, found item 8: an archive holding the file ``lib`` and ``lib/x.py`` failed with
    ``INTERNAL_ERROR``. The class: names that cannot all exist as one tree (a file and a folder of one
    name, in either order and at any depth; a name twice, as a file and as a folder); each is
    ``PACKAGE_INVALID`` naming the entry, through hostd's install, and nothing is left behind."""
    manifest = ("manifest.json", json.dumps(mcpb_manifest()).encode())
    cases = {
        "file-then-folder": ([("lib", b"x"), ("lib/x.py", b"")], "lib/x.py", "which the archive also holds as a file"),
        "folder-then-file": ([("lib/x.py", b""), ("lib", b"x")], "lib", "is a file where other entries make a folder"),
        "deep": ([("a/b", b"x"), ("a/b/c/d.py", b"")], "a/b/c/d.py", "inside 'a/b', which the archive also holds"),
        "twice": ([("lib/", b""), ("lib", b"x")], "lib", "appears twice in the archive"),
    }
    for name, (members, entry, words) in cases.items():
        path = tmp_path / f"{name}.mcpb"
        path.write_bytes(archive_of(manifest, *members))
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/install", {"path": str(path)})
        assert refused.value.kind == "PACKAGE_INVALID", name
        assert refused.value.data["entry"] == entry, name
        assert words in refused.value.message, (name, refused.value.message)
    assert os.listdir(tmp_path / "state" / "bundles") == []
    assert (await hostd.request("plugins/list", {}))["plugins"] == []


# -- damaged and unsupported archives (issue 31, class 2) -----------------------------------------
# The class: zipfile and its decompressors raise whatever they like on an archive that is damaged or
# uses what hostd does not read (NotImplementedError, OSError, LZMAError, ValueError, ENAMETOOLONG...).
# The bundle reader admits only stored and deflate members and turns every library failure into
# PACKAGE_INVALID naming the entry. One archive of each shape below.

MANIFEST = json.dumps(mcpb_manifest()).encode()


def _patched(data: bytes, signature: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``data`` with the field at ``offset`` of every record starting with ``signature`` set to ``value``."""
    out = bytearray(data)
    at = out.find(signature)
    while at >= 0:
        struct.pack_into(fmt, out, at + offset, value)
        at = out.find(signature, at + 4)
    return bytes(out)


def _with_method(method: int, name: str = "server/index.js", data: bytes = b"x" * 4000) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("manifest.json", MANIFEST)
        archive.writestr(name, data, compress_type=method)
    return buffer.getvalue()


def _corrupt_last_member(archive: bytes) -> bytes:
    """Flip bytes in the middle of the last member's compressed data (the header and directory intact)."""
    info = zipfile.ZipFile(io.BytesIO(archive)).infolist()[-1]
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    out = bytearray(archive)
    for i in range(start + 8, start + min(info.compress_size - 2, 40)):
        out[i] ^= 0x5A
    return bytes(out)


def unknown_method() -> bytes:
    stored = _with_method(zipfile.ZIP_STORED)
    # the method of the second member in its local header (offset 8) and its central record (offset 10)
    local = stored.find(b"PK\x03\x04", 4)
    central = stored.find(b"PK\x01\x02", stored.find(b"PK\x01\x02") + 4)
    out = bytearray(stored)
    struct.pack_into("<H", out, local + 8, 99)
    struct.pack_into("<H", out, central + 10, 99)
    return bytes(out)


def future_version() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", MANIFEST)
        info = zipfile.ZipInfo("server/index.js")
        info.extract_version = 99  # "needs ZIP 9.9"
        archive.writestr(info, b"x")
    return buffer.getvalue()


def bad_header_offset() -> bytes:
    archive = archive_of(("manifest.json", MANIFEST), ("server/index.js", b"x" * 100))
    central = archive.find(b"PK\x01\x02", archive.find(b"PK\x01\x02") + 4)
    out = bytearray(archive)
    struct.pack_into("<I", out, central + 42, 7)  # the second member's local header "starts" at byte 7
    return bytes(out)


DAMAGED: dict[str, tuple[Any, str | None, str]] = {
    # name: (archive, entry named (None: not asserted), words of the message)
    "unknown method": (unknown_method, "server/index.js", "uses compression method 99; only stored (0), deflate (8)"),
    "bzip2": (lambda: _with_method(zipfile.ZIP_BZIP2), "server/index.js", "uses compression method 12"),
    "corrupt bzip2": (
        lambda: _corrupt_last_member(_with_method(zipfile.ZIP_BZIP2)),
        "server/index.js",
        "uses compression method 12",
    ),
    "corrupt lzma": (
        lambda: _corrupt_last_member(_with_method(zipfile.ZIP_LZMA, data=bytes(range(256)) * 40)),
        "server/index.js",
        "uses compression method 14",
    ),
    # zipfile refuses the version while reading the directory (3.11) or when opening the member
    # (_check_member refuses it first then): the entry is named only in the second case.
    "future version": (future_version, None, "9.9"),
    "bad header offset": (bad_header_offset, "server/index.js", "is corrupt: BadZipFile"),
    "corrupt deflate": (
        lambda: _corrupt_last_member(_with_method(zipfile.ZIP_DEFLATED, data=bytes(range(256)) * 40)),
        "server/index.js",
        "is corrupt: ",
    ),
    "300-byte name": (lambda: archive_of(("manifest.json", MANIFEST), ("a" * 300, b"x")), "a" * 300, "longer than 255"),
    "5000-byte name": (
        lambda: archive_of(("manifest.json", MANIFEST), ("/".join(["d" * 200] * 25), b"x")),
        "/".join(["d" * 200] * 25),
        "is longer than 4095 bytes",
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_and_unsupported_archives_are_package_invalid(tmp_path: Path, case: str) -> None:
    # Every one of these escaped as NotImplementedError, OSError, LZMAError or ValueError. Fails before.
    make, entry, words = DAMAGED[case]
    with pytest.raises(HostError) as refused:
        bundle.extract(make(), tmp_path / "out")
    assert refused.value.kind.name == "PACKAGE_INVALID"
    if entry is not None:
        assert refused.value.data["entry"] == entry
        assert refused.value.data["errors"][0]["field"] == entry
    assert words in refused.value.message


async def test_damaged_archives_through_install(tmp_path: Path, hostd: HostdClient) -> None:
    # Through a real hostd: INTERNAL_ERROR before (fails before), PACKAGE_INVALID naming the entry now.
    for case, (make, entry, words) in sorted(DAMAGED.items()):
        path = tmp_path / f"{case.replace(' ', '-')}.mcpb"
        path.write_bytes(make())
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/install", {"path": str(path)})
        assert refused.value.kind == "PACKAGE_INVALID", case
        assert entry is None or refused.value.data["entry"] == entry, case
        assert words in refused.value.message, case
    assert os.listdir(tmp_path / "state" / "bundles") == []
    assert (await hostd.request("plugins/list", {}))["plugins"] == []


async def test_a_configured_bundle_is_restored_with_its_secret_and_upgraded_in_place(tmp_path: Path) -> None:
    user_config = {"api_key": {"type": "string", "title": "Key", "description": "k", "sensitive": True}}
    config = {"command": "node", "args": ["${__dirname}/server/index.js"], "env": {"API_KEY": "${user_config.api_key}"}}
    server = {"type": "node", "entry_point": "server/index.js", "mcp_config": config}
    path = node_bundle(tmp_path, user_config=user_config, server=server)
    args = ["--state-dir", str(tmp_path / "state")]
    key = {"name": "API_KEY"}
    async with HostdClient.spawn(args, env=plugin_environment()) as client:
        info = await client.request("plugins/install", {"path": str(path)})
        await client.request("plugins/configure", {"id": "node-echo", "values": {"api_key": "first-secret"}})
        await client.request("plugins/approve", {"id": "node-echo", "digest": info["launch"]["digest"]})
        await client.request("plugins/enable", {"id": "node-echo"})
    async with HostdClient.spawn(args, env=plugin_environment()) as client:
        await client.wait_for(
            "plugins/statusChanged", lambda n: n["plugin_id"] == "node-echo" and n["status"] == "ready"
        )
        assert await call_text(client, "node-echo.env", key) == "first-secret"
        await client.request("plugins/disable", {"id": "node-echo"})
        # Version 1.2.4 of the same bundle replaces 1.2.3 in place: the secret stays, the approval does not.
        newer = node_bundle(tmp_path, user_config=user_config, server=server, version="1.2.4")
        info = await client.request("plugins/install", {"path": str(newer)})
        assert (info["version"], info["launch"]["approved"]) == ("1.2.4", False)
        assert [(c["name"], c["set"]) for c in info["userConfig"]] == [("api_key", True)]
        await client.request("plugins/approve", {"id": "node-echo", "digest": info["launch"]["digest"]})
        await client.request("plugins/enable", {"id": "node-echo"})
        assert await call_text(client, "node-echo.env", key) == "first-secret"
        await client.request("plugins/disable", {"id": "node-echo"})
    assert sorted(os.listdir(tmp_path / "state" / "bundles")) == ["node-echo"]
