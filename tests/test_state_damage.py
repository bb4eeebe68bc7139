"""Damaged or unreadable state beyond state.json (issue 31, class 5): hostd serves on, loses nothing, says so.

The class: a file hostd keeps in its state folder (a record of state.json, the secrets file, a
plugin's settings, a temporary of an interrupted write) that it can no longer use. Members tested
here, each against real hostd processes: one record of the wrong shape among good ones; a damaged
secrets file met by a secret written for another plugin; a secrets file that cannot be read (a
folder in its place: root reads through chmod 000); a damaged settings file; temporaries of
interrupted writes of the secrets file and of settings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import ECHO, MakePlugin, ready, run_quietly, spawn_hostd, stdio_plugin

TOKEN = "tok-for-ref-0123456789"
OLD_TOKEN = "old-secret-of-gone-4242"


def _host_lines(client: HostdClient, plugin: str | None) -> list[tuple[str, str]]:
    """(level, message) of every plugins/log line hostd wrote about ``plugin`` (None: about no plugin)."""
    return [
        (n["level"], n["message"])
        for n in client.seen("plugins/log")
        if n["source"] == "host" and n["plugin"] == plugin
    ]


async def _doctor(state: Path) -> list[str]:
    done = await run_quietly([sys.executable, "-m", "hostd", "doctor", "--state-dir", str(state)], env=None, timeout=60)
    assert done.returncode == 0, done.stderr
    tail = done.stdout.split(f"state folder {state}:\n", 1)[1]
    return [line.strip() for line in tail.splitlines()]


async def test_one_bad_record_breaks_only_its_plugin(tmp_path: Path, make_plugin: MakePlugin) -> None:
    good, other = make_plugin("mcp-echo"), make_plugin("other")
    state = tmp_path / "state"
    async with spawn_hostd(tmp_path) as first:
        await ready(first, good)
        await first.request("plugins/install", {"path": str(other)})
    document = json.loads((state / "state.json").read_text())
    document["plugins"]["other"]["granted"] = "echo.use"  # a string where a list belongs
    bad_record = document["plugins"]["other"]
    (state / "state.json").write_text(json.dumps(document))
    async with spawn_hostd(tmp_path) as second:
        listed = {p["id"]: p for p in (await second.request("plugins/list", {}))["plugins"]}
        assert sorted(listed) == ["mcp-echo", "other"]
        reason = "its record in state.json cannot be read (plugin record field 'granted' has the wrong type)"
        message = (
            f"plugin other is broken: {reason}; stop hostd and fix its record in state.json, or uninstall the plugin"
        )
        error = {
            "kind": "PLUGIN_BROKEN",
            "message": message,
            "plugin": "other",
            "path": str(other),
            "source": "state",
            "reason": reason,
            "errors": [
                {"field": "plugins.other.granted", "message": "plugin record field 'granted' has the wrong type"}
            ],
        }
        assert listed["other"]["status"] == "broken"
        assert listed["other"]["error"] == error
        assert (listed["other"]["path"], listed["other"]["enabled"], listed["other"]["tools"]) == (
            str(other),
            False,
            [],
        )
        assert "error" not in listed["mcp-echo"]
        status = await second.request("plugins/status", {"id": "other"})
        assert (status["status"], status["error"]) == ("broken", error)
        assert _host_lines(second, "other") == [("error", message)]
        with pytest.raises(RpcError) as refused:
            await second.request("plugins/enable", {"id": "other"})
        assert (refused.value.kind, refused.value.message) == ("PLUGIN_BROKEN", message)
        logs = await second.request("plugins/logs", {"id": "other"})
        assert [line["message"] for line in logs["lines"]] == [message]
        # the good one is restored and serves
        await second.wait_for(
            "plugins/statusChanged", lambda s: s["plugin_id"] == "mcp-echo" and s["status"] == "ready"
        )
        called = await second.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "hi"}})
        assert called["structuredContent"] == {"text": "hi", "length": 2}
        await second.request("plugins/disable", {"id": "mcp-echo"})  # a write: the bad record goes back as it was
        assert json.loads((state / "state.json").read_text())["plugins"]["other"] == bad_record
        assert await _doctor(state) == [
            "ok: state.json holds 2 plugin record(s)",
            f"ok: plugin mcp-echo loads from {good}",
            "problem: plugin 'other' is broken: its record in state.json cannot be read "
            "(plugin record field 'granted' has the wrong type)",
            "ok: no secrets file",
        ]
        await second.request("plugins/uninstall", {"id": "other"})
        assert [p["id"] for p in (await second.request("plugins/list", {}))["plugins"]] == ["mcp-echo"]
    assert sorted(json.loads((state / "state.json").read_text())["plugins"]) == ["mcp-echo"]
    assert [p.name for p in state.glob("state.json.corrupt-*")] == []


async def _install_ref(client: HostdClient, folder: Path) -> dict[str, Any]:
    info: dict[str, Any] = await client.request("plugins/install", {"path": str(folder)})
    await client.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
    await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    return info


async def test_damaged_secrets_file_is_kept_aside_not_overwritten(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    (state / "secrets").mkdir(parents=True, mode=0o700)
    damaged = b'{"backend": "file", "plugins": {"gone": {"GONE_TOKEN": "' + OLD_TOKEN.encode() + b'"}'  # cut short
    (state / "secrets" / "secrets.json").write_bytes(damaged)
    folder = make_plugin("ref", backend={"env": {"SERVICE_TOKEN": "${secret:SERVICE_TOKEN}"}})
    async with spawn_hostd(tmp_path) as client:
        await _install_ref(client, folder)
        await client.request("plugins/configure", {"id": "ref", "values": {"SERVICE_TOKEN": TOKEN}})
        assert (await client.request("plugins/enable", {"id": "ref"}))["status"] == "ready"
        aside = [p.name for p in (state / "secrets").iterdir() if p.name != "secrets.json"]
        assert len(aside) == 1 and aside[0].startswith("secrets.json.corrupt-")
        assert (state / "secrets" / aside[0]).read_bytes() == damaged  # kept as it was: GONE_TOKEN is still there
        install = json.loads((state / "state.json").read_text())["plugins"]["ref"]["install"]["id"]
        assert json.loads((state / "secrets" / "secrets.json").read_text())["plugins"] == {
            f"ref#{install}": {"SERVICE_TOKEN": TOKEN}  # the install's (issue 25)
        }
        assert _host_lines(client, None) == [
            (
                "error",
                f"the secrets file {state / 'secrets' / 'secrets.json'} was damaged (not valid JSON: Expecting ',' "
                f"delimiter at line 1 column {len(damaged) + 1}): moved aside to {aside[0]}, kept as it was; set what "
                "is missing again with plugins/configure",
            )
        ]
        assert await _doctor(state) == [
            "ok: state.json holds 1 plugin record(s)",
            f"ok: plugin ref loads from {folder}",
            "ok: the secrets file holds secrets of 1 plugin(s)",
            f"kept aside: secrets/{aside[0]} (a damaged file hostd moved there, as it was)",
        ]


async def test_unreadable_secrets_file_fails_only_the_plugins_that_use_secrets(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    state = tmp_path / "state"
    plain = make_plugin("mcp-echo")
    folder = make_plugin("ref", backend={"env": {"SERVICE_TOKEN": "${secret:SERVICE_TOKEN}"}})
    async with spawn_hostd(tmp_path) as first:
        await ready(first, plain)
        await _install_ref(first, folder)
        await first.request("plugins/configure", {"id": "ref", "values": {"SERVICE_TOKEN": TOKEN}})
        assert (await first.request("plugins/enable", {"id": "ref"}))["status"] == "ready"
    secrets_file = state / "secrets" / "secrets.json"
    secrets_file.unlink()
    secrets_file.mkdir()  # cannot be read as a file, by root too (chmod 000 does not stop root)
    expected = {
        "kind": "STATE_FILE_UNREADABLE",
        "message": f"cannot read the secrets file {secrets_file}: Is a directory; make it a file you can read and "
        "write (mode 0600) or move it away, then retry",
        "path": str(secrets_file),
        "errno": "EISDIR",
    }
    async with spawn_hostd(tmp_path) as second:
        ref_status = await second.wait_for(
            "plugins/statusChanged", lambda s: s["plugin_id"] == "ref" and s["status"] == "error"
        )
        assert ref_status["error"] == expected
        await second.wait_for(
            "plugins/statusChanged", lambda s: s["plugin_id"] == "mcp-echo" and s["status"] == "ready"
        )
        called = await second.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "ok"}})
        assert called["structuredContent"] == {"text": "ok", "length": 2}
        with pytest.raises(RpcError) as refused:
            await second.request("plugins/enable", {"id": "ref"})
        assert (refused.value.kind, refused.value.message, refused.value.data) == (
            "STATE_FILE_UNREADABLE",
            expected["message"],
            {"kind": "STATE_FILE_UNREADABLE", "path": str(secrets_file), "errno": "EISDIR"},
        )
        with pytest.raises(RpcError) as configure:
            await second.request("plugins/configure", {"id": "ref", "values": {"SERVICE_TOKEN": "new"}})
        assert configure.value.kind == "STATE_FILE_UNREADABLE"
        assert _host_lines(second, None) == [("warning", expected["message"])]
        # another plugin is installed and enabled as usual
        third = make_plugin("third")
        assert (await ready(second, third))["status"] == "ready"
    assert secrets_file.is_dir()  # left as it was


async def test_temporaries_of_secrets_and_settings_writes_are_removed_at_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    for name in ("secrets/secrets.json.tmp", "secrets/.secrets.json.4242.tmp", "settings/ref.tmp"):
        (state / name).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        (state / name).write_bytes(b'{"plugins": {"half')
    (state / "settings" / "ref.json").write_text('{"kept": 1}')
    async with spawn_hostd(tmp_path) as client:
        assert (await client.request("plugins/list", {}))["plugins"] == []
        assert _host_lines(client, None) == [
            (
                "warning",
                "removed 3 temporary file(s) of interrupted state writes: secrets/.secrets.json.4242.tmp, "
                "secrets/secrets.json.tmp, settings/ref.tmp",
            )
        ]
    assert sorted(p.name for p in (state / "secrets").iterdir()) == []
    assert sorted(p.name for p in (state / "settings").iterdir()) == ["ref.json"]


async def test_damaged_or_unreadable_settings_fail_only_their_plugin(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folders = [
        stdio_plugin(
            tmp_path / name,
            ECHO,
            "Echo with a setting",
            tools=["echo"],
            permissions=[],
            backend={"env": {"GREETING": "${user_config.GREETING}"}},
            user_config={"GREETING": {"type": "string", "required": True}},
        )
        for name in ("damaged", "unreadable")
    ]
    async with spawn_hostd(tmp_path) as first:
        for folder in folders:
            await first.request("plugins/install", {"path": str(folder)})
            await first.request("plugins/configure", {"id": folder.name, "values": {"GREETING": "hello"}})
    assert json.loads((state / "settings" / "damaged.json").read_text()) == {"GREETING": "hello"}
    (state / "settings" / "damaged.json").write_bytes(b'["GREETING"]')  # JSON, but not an object
    (state / "settings" / "unreadable.json").unlink()
    (state / "settings" / "unreadable.json").mkdir()
    async with spawn_hostd(tmp_path) as second:
        listed = {p["id"]: p for p in (await second.request("plugins/list", {}))["plugins"]}
        assert [(c["name"], c["set"]) for c in listed["damaged"]["userConfig"]] == [("GREETING", False)]
        aside = [p.name for p in (state / "settings").iterdir() if p.name.startswith("damaged.json.corrupt-")]
        assert len(aside) == 1
        assert (state / "settings" / aside[0]).read_bytes() == b'["GREETING"]'
        assert _host_lines(second, "damaged") == [
            (
                "error",
                f"the settings of damaged ({state / 'settings' / 'damaged.json'}) were damaged (not a JSON object): "
                f"moved aside to {aside[0]}, kept as they were; set them again with plugins/configure",
            )
        ]
        with pytest.raises(RpcError) as unreadable:
            await second.request("plugins/enable", {"id": "unreadable"})
        path = state / "settings" / "unreadable.json"
        assert (unreadable.value.kind, unreadable.value.message, unreadable.value.data) == (
            "STATE_FILE_UNREADABLE",
            f"cannot read the settings of unreadable {path}: Is a directory; make it a file you can read and write "
            "(mode 0600) or move it away, then retry",
            {"kind": "STATE_FILE_UNREADABLE", "path": str(path), "errno": "EISDIR", "plugin": "unreadable"},
        )
        info = await second.request("plugins/configure", {"id": "damaged", "values": {"GREETING": "again"}})
        assert [(c["name"], c["set"]) for c in info["userConfig"]] == [("GREETING", True)]
    assert json.loads((state / "settings" / "damaged.json").read_text()) == {"GREETING": "again"}
    assert (state / "settings" / aside[0]).read_bytes() == b'["GREETING"]'
