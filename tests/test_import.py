"""Importing mcpServers configs: exact plugins produced, all-or-nothing, discovery on first enable."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import RpcError
from hostd.install.importer import (
    IMPORTED_NETWORK_NOTE,
    IMPORTED_PERMISSIONS,
    MAX_IMPORT_BYTES,
    MAX_IMPORT_ENTRIES,
    ConfigError,
    Imported,
    parse_jsonc,
    plan_import,
    sanitize_id,
)
from tests.conftest import ECHO, MakePlugin, spawn_hostd

DATA = Path(__file__).parent / "data"


def network_note(plugin_id: str) -> str:
    """The note every imported local server gets (issue 26: an empty network allowlist)."""
    return IMPORTED_NETWORK_NOTE


def test_claude_desktop_config_with_comments_windows_commands_and_duplicates() -> None:
    entries = plan_import((DATA / "claude_desktop_config.json").read_text(), taken={"filesystem"})
    assert [(e.name, e.outcome, e.plugin_id) for e in entries] == [
        ("filesystem", "ready-to-install", "filesystem-2"),
        ("My Server", "ready-to-install", "my-server"),
        ("my-server", "ready-to-install", "my-server-2"),
        ("remote", "ready-to-install", "remote"),
    ]
    my_server = entries[1].manifest
    assert my_server is not None
    assert my_server["backend"]["command"] == "npx"
    assert my_server["backend"]["args"] == ["-y", "my-server"]
    # The key is taken out before the manifest is written (issue 14: secrets out of plain files).
    assert my_server["backend"]["env"] == {"API_KEY": "${secret:API_KEY}"}
    assert entries[1].secret_values == {"API_KEY": "sk-test-123456789012"}
    assert my_server["contributes"] == {"tools": [], "discover": True}
    assert entries[1].notes == [
        "command 'C:\\\\Program Files\\\\nodejs\\\\npx.cmd' reduced to 'npx.cmd': "
        "a Windows path; the bare name is found on PATH",
        "Windows launcher 'npx.cmd' run as 'npx'",
        "kept API_KEY in the secret store",
        network_note("my-server"),
    ]
    assert entries[2].notes == ["cwd '/tmp' ignored: a plugin runs in its own folder", network_note("my-server-2")]
    # Issue 26: a local server starts with an empty allowlist (hostd's proxy asks for each host); a remote one
    # is reached by hostd itself.
    assert [e.manifest.get("network") for e in entries if e.manifest] == [{"hosts": []}] * 3 + [None]
    assert entries[3].url == "https://mcp.example.invalid/mcp"


def test_vscode_form() -> None:
    entries = plan_import((DATA / "vscode_mcp.json").read_text())
    assert [(e.name, e.outcome, e.plugin_id) for e in entries] == [
        ("Time", "ready-to-install", "time"),
        ("github", "ready-to-install", "github"),
    ]
    nested = plan_import({"mcp": {"servers": {"a b": {"command": "node", "args": ["x.js"]}}}})
    venv = plan_import({"mcpServers": {"v": {"command": "/home/ada/proj/.venv/bin/python", "args": ["s.py"]}}})
    assert venv[0].manifest is not None and venv[0].notes == [network_note("v")]
    assert venv[0].manifest["backend"]["command"] == "/home/ada/proj/.venv/bin/python"  # never shortened
    assert [(e.plugin_id, e.manifest["backend"]["command"]) for e in nested if e.manifest] == [("a-b", "node")]


def test_ids_and_jsonc() -> None:
    assert sanitize_id("GitHub (work)") == "github-work"
    assert sanitize_id("***") == "server"
    assert len(sanitize_id("x" * 100)) == 63
    assert parse_jsonc('{"a": "// not a comment", /* c */ "b": [1,2,],}') == {"a": "// not a comment", "b": [1, 2]}


def _echo_config(name: str = "Echo Fixture") -> str:
    return json.dumps({"mcpServers": {name: {"command": "python3", "args": [str(ECHO / "server.py")]}}})


async def test_import_is_all_or_nothing(tmp_path: Path) -> None:
    config = {"mcpServers": {"good": {"command": "python3"}, "bad": {"args": ["no command"]}}}
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as refused:
            await client.request("plugins/import", {"config": config})
        assert refused.value.kind == "IMPORT_INVALID"
        assert [(e["name"], e["outcome"]) for e in refused.value.data["entries"]] == [
            ("good", "ready-to-install"),
            ("bad", "invalid"),
        ]
        assert (await client.request("plugins/list", {}))["plugins"] == []
    assert not (tmp_path / "state" / "imported").exists()


async def test_hostctl_import_prints_each_outcome(tmp_path: Path) -> None:
    done = await trio.run_process(
        [
            sys.executable,
            "-m",
            "hostd.cli.hostctl",
            "import",
            str(DATA / "vscode_mcp.json"),
            "--state-dir",
            str(tmp_path / "s"),
        ],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "Time" in out and "installed" in out and "time" in out
    assert "github" in out
    # Issue 26: the local server's empty allowlist, said once under the table (the remote one is hostd's to reach).
    assert (
        "network hosts of time: none yet; each host one asks for is asked of you (hostctl call asks in the "
        "terminal) or refused; hostctl grant ID --host HOST lets one through"
    ) in " ".join(out.split())
    state = json.loads((tmp_path / "s" / "state.json").read_text())
    assert sorted(state["plugins"]) == ["github", "time"]


# -- issue 10 / 11: a config is hostile input -----------------------------------------


# The class: text inside a string that looks like JSONC syntax (a comma before a closing bracket, a
# comment marker, a quote escape) must stay the string's text; syntax outside strings (comments,
# trailing commas) must still be accepted. Members: the args, comment markers in strings,
# an escaped quote followed by a trailing-comma look-alike, and every kind of comment and comma.


def test_jsonc_commas_and_brackets_inside_strings_survive() -> None:
    text = '{"mcpServers": {"s": {"command": "x", "args": ["a, ]b", "c,}", "d,  ]",], /* c */ }, // end\n}}'
    (entry,) = plan_import(text)
    assert entry.manifest is not None
    assert entry.manifest["backend"]["args"] == ["a, ]b", "c,}", "d,  ]"]
    assert parse_jsonc('{"args": ["a, ]b", "c,}"]}') == {"args": ["a, ]b", "c,}"]}
    assert parse_jsonc(r'["// no", "/* nor */", "q\",]", ",]", "\\",]') == ["// no", "/* nor */", 'q",]', ",]", "\\"]
    assert parse_jsonc("[1, /* a */ // b\n ]") == [1]
    assert parse_jsonc('{"a": [1, 2,], "b": {"c": 3,},}') == {"a": [1, 2], "b": {"c": 3}}
    for broken in ('["/*", 1] /* open', '{"a": 1} extra', "[" * 40 + "]" * 40):
        with pytest.raises(ConfigError, match="not JSON"):
            parse_jsonc(broken)


def test_alike_names_get_distinct_ids_up_to_the_entry_bound() -> None:
    alike = {"a" + "!" * i: {"command": "x"} for i in range(MAX_IMPORT_ENTRIES)}
    entries = plan_import({"mcpServers": alike}, taken={"a-3"})
    assert [e.plugin_id for e in entries] == ["a", "a-2", *(f"a-{n}" for n in range(4, MAX_IMPORT_ENTRIES + 2))]
    with pytest.raises(ConfigError) as over:
        plan_import({"mcpServers": {**alike, "one more": {"command": "x"}}})
    assert str(over.value) == f"the config has {MAX_IMPORT_ENTRIES + 1} servers; at most 500 are imported at once"
    padding = " " * MAX_IMPORT_BYTES
    with pytest.raises(ConfigError) as big:
        plan_import('{"mcpServers": {}}' + padding)
    assert str(big.value) == f"the config is {MAX_IMPORT_BYTES + 18} bytes; at most {MAX_IMPORT_BYTES} are accepted"


async def test_oversized_import_leaves_nothing_and_uninstall_removes_what_import_made(tmp_path: Path) -> None:
    many = {f"server {n}": {"command": "python3"} for n in range(MAX_IMPORT_ENTRIES + 1)}
    imported = tmp_path / "state" / "imported"
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as refused:
            await client.request("plugins/import", {"config": json.dumps({"mcpServers": many})})
        assert refused.value.kind == "IMPORT_INVALID"
        assert refused.value.message == (
            f"cannot import: the config has {MAX_IMPORT_ENTRIES + 1} servers; at most 500 are imported at once"
        )
        assert (await client.request("plugins/list", {}))["plugins"] == []
        assert not imported.exists()
        result = await client.request("plugins/import", {"config": _echo_config()})
        assert [e["id"] for e in result["entries"]] == ["echo-fixture"]
        assert sorted(p.name for p in imported.iterdir()) == ["echo-fixture"]
        assert (tmp_path / "state" / "tmp" / "echo-fixture").is_dir()
        await client.request("plugins/uninstall", {"id": "echo-fixture"})
        assert list(imported.iterdir()) == []
        assert not (tmp_path / "state" / "data" / "echo-fixture").exists()
        assert not (tmp_path / "state" / "tmp" / "echo-fixture").exists()
        assert (await client.request("plugins/list", {}))["plugins"] == []


async def test_an_import_that_fails_while_installing_leaves_nothing(tmp_path: Path) -> None:
    # The second entry's folder cannot be written (a stray file holds its name), so the first is
    # already installed when the import fails. (A NUL in an argument did this once; the importer
    # now refuses it before anything is written: test_import_limits.py.)
    config = {"mcpServers": {"first": {"command": "python3"}, "second": {"command": "python3"}}}
    stray = tmp_path / "state" / "imported" / "second"
    stray.parent.mkdir(parents=True)
    stray.write_text("not a folder")
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as failed:
            await client.request("plugins/import", {"config": config})
        assert failed.value.kind == "STATE_WRITE_FAILED"
        assert (await client.request("plugins/list", {}))["plugins"] == []
        assert list((tmp_path / "state" / "imported").iterdir()) == [stray]
        stray.unlink()
        assert not (tmp_path / "state" / "data" / "first").exists()
        again = await client.request("plugins/import", {"config": {"mcpServers": {"first": {"command": "python3"}}}})
        assert [e["id"] for e in again["entries"]] == ["first"]


def test_a_well_known_server_gets_its_declared_needs_by_name_only() -> None:
    """git treats an unreadable ~/.gitconfig as fatal: an imported mcp-server-git gets it, read-only, shown."""
    config = {
        "mcpServers": {
            "git": {"command": "uvx", "args": ["mcp-server-git==2026.10.19", "--repository", "~/src/repo"]},
            "other": {"command": "uvx", "args": ["mcp-server-gitlab"]},
        }
    }
    git, other = plan_import(config)
    assert git.manifest is not None and other.manifest is not None
    assert git.manifest["sandbox"] == {"read": ["~/.gitconfig", "~/.config/git"]}
    assert git.notes == [
        "declared the well-known needs of mcp-server-git: read ~/.gitconfig, ~/.config/git",
        network_note("git"),
    ]
    assert "sandbox" not in other.manifest and other.notes == [network_note("other")]


# -- issue 14: importing the same config again --------------------------------------------
# The class: an entry an earlier import installed, imported again. Members: the same entry (unchanged:
# nothing written, approval kept), a changed entry (updated: manifest rewritten, approval voided, same
# id), a new entry beside them (installed), and two names that differ only in case and punctuation
# (still two plugins, the second numbered). Never a numbered duplicate of the same entry.


def test_plan_import_matches_earlier_imports_by_entry_name() -> None:
    config = {"mcpServers": {"fs": {"command": "npx", "args": ["a"]}, "My Server": {"command": "x"}}}
    (fs, mine) = plan_import(config)
    assert fs.manifest is not None and mine.manifest is not None
    imported = {"fs": Imported("fs", fs.manifest), "My Server": Imported("my-server", mine.manifest)}
    again = {"mcpServers": {**config["mcpServers"], "my-server": {"command": "x"}}}
    planned = plan_import(again, taken={"fs", "my-server"}, imported=imported)
    assert [(e.name, e.outcome, e.plugin_id) for e in planned] == [
        ("fs", "unchanged", "fs"),
        ("My Server", "unchanged", "my-server"),
        ("my-server", "ready-to-install", "my-server-2"),
    ]
    changed = {"mcpServers": {"fs": {"command": "npx", "args": ["b"]}}}
    assert [(e.outcome, e.plugin_id) for e in plan_import(changed, taken={"fs"}, imported=imported)] == [
        ("updated", "fs")
    ]


async def test_importing_the_same_config_again_is_idempotent(tmp_path: Path) -> None:
    def config(args: list[str]) -> dict[str, Any]:
        return {"mcpServers": {"Echo Fixture": {"command": "python3", "args": [str(ECHO / "server.py"), *args]}}}

    async with spawn_hostd(tmp_path) as client:
        first = (await client.request("plugins/import", {"config": config([])}))["entries"]
        digest = first[0]["plugin"]["launch"]["digest"]
        await client.request("plugins/approve", {"id": "echo-fixture", "digest": digest})
        manifest = tmp_path / "state" / "imported" / "echo-fixture" / "plugin.json"
        written = manifest.stat().st_mtime_ns
        again = (await client.request("plugins/import", {"config": config([])}))["entries"]
        assert [(e["name"], e["outcome"], e["id"]) for e in again] == [("Echo Fixture", "unchanged", "echo-fixture")]
        assert again[0]["plugin"]["launch"]["approved"] is True
        assert manifest.stat().st_mtime_ns == written
        both = {"mcpServers": {**config(["--delay", "1"])["mcpServers"], "echo fixture": {"command": "python3"}}}
        updated = (await client.request("plugins/import", {"config": both}))["entries"]
        assert [(e["name"], e["outcome"], e["id"]) for e in updated] == [
            ("Echo Fixture", "updated", "echo-fixture"),
            ("echo fixture", "installed", "echo-fixture-2"),
        ]
        launch = updated[0]["plugin"]["launch"]
        assert (launch["args"][1:], launch["approved"]) == (["--delay", "1"], False)
        listed = (await client.request("plugins/list", {}))["plugins"]
        assert [(i["id"], i["launch"]["approved"]) for i in listed] == [
            ("echo-fixture", False),
            ("echo-fixture-2", False),
        ]
        # the approval stays void when the entry changes back: the user approves what runs now
        back = (await client.request("plugins/import", {"config": config([])}))["entries"]
        assert [(e["outcome"], e["plugin"]["launch"]["approved"]) for e in back] == [("updated", False)]


def test_every_imported_manifest_requests_the_client_feature_permissions() -> None:
    # The class: each form an entry can take (local command, remote url, VS Code servers) declares the
    # reserved permissions, so plugins/grant can let it use sampling, elicitation or roots; none granted.
    from hostd.mcp.permissions import RESERVED_PERMISSIONS  # noqa: PLC0415

    assert set(IMPORTED_PERMISSIONS) == RESERVED_PERMISSIONS
    config = {"mcpServers": {"local": {"command": "x"}, "remote": {"url": "https://example.com/mcp"}}}
    vscode = {"servers": {"code": {"type": "stdio", "command": "y"}}}
    entries = [*plan_import(config), *plan_import(vscode)]
    assert [e.outcome for e in entries] == ["ready-to-install"] * 3
    assert [e.manifest["permissions"] for e in entries if e.manifest is not None] == [list(IMPORTED_PERMISSIONS)] * 3


async def test_a_server_whose_script_lies_in_another_plugins_folder_is_told_whose(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """The README walk in order: a config imported whose script is ``<folder>/server.py``, then ``<folder>``
    installed as a plugin of its own. A plugin's folder is its own, so the imported server is refused
    (``PATH_REFUSED``); the refusal names that plugin and the two ways out (before: only the path, "which no plugin
    may reach", and hostctl's hint to reinstall the imported manifest looped)."""
    folder = make_plugin("owner")
    config = {"mcpServers": {"script": {"command": "python3", "args": [str(folder / "server.py")]}}}
    async with spawn_hostd(tmp_path) as client:
        await client.request("plugins/import", {"config": config})
        info = (await client.request("plugins/list", {}))["plugins"][0]
        await client.request("plugins/approve", {"id": "script", "digest": info["launch"]["digest"]})
        await client.request("plugins/install", {"path": str(folder)})
        with pytest.raises(RpcError) as refused:
            await client.request("plugins/enable", {"id": "script"})
    assert refused.value.message.endswith(
        f"({folder} is the folder of plugin owner: a plugin's folder is its own; uninstall owner, or keep this "
        "server's files in a folder of their own)"
    ), refused.value.message
