"""One plugin's file never takes the host down (issue 31, class 1): real hostd processes.

The class: a plugin's stored file (its manifest) that no longer loads, for whatever reason the
loader meets, including one that made the loader itself fail (a tool name listed twice with a
lone surrogate: pydantic failed while rendering its duplicate error). Members tested: that
manifest at install, at hostd's start (JSON, and YAML where the parser refuses the escape), at
SIGHUP with the plugin running, and through hostctl. The plugin is listed ``broken`` with the
reason, the others start and serve, a reload keeps the last good manifest, hostd never exits.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin, ready, run_hostctl, spawn_hostd

#: The fuzzer's find: one tool name twice, with a lone-surrogate escape in it (JSON text, escapes kept).
SURROGATE_JSON = (
    '{"id": "other", "name": "Other", "version": "1.0.0", "permissions": [], '
    '"contributes": {"tools": ["other.a\\ud800", "other.a\\ud800"]}, '
    '"backend": {"type": "mcp", "transport": "stdio", "command": "python3", "args": ["server.py"]}}'
)
SURROGATE_YAML = (
    "id: other\nname: Other\nversion: 1.0.0\npermissions: []\n"
    'contributes:\n  tools: ["other.a\\ud800", "other.a\\ud800"]\n'
    "backend: {type: mcp, transport: stdio, command: python3, args: [server.py]}\n"
)
SURROGATE_ERROR = "must not contain a lone surrogate (U+D800): it is not text"
YAML_ERROR = (
    "YAML syntax error at line 6, column 21: found invalid Unicode character escape code "
    "(while parsing a quoted scalar at line 6, column 11)"
)


def _use_json(folder: Path) -> Path:
    """Replace ``folder``'s plugin.yaml with the surrogate plugin.json; return its path."""
    (folder / "plugin.yaml").unlink()
    (folder / "plugin.json").write_text(SURROGATE_JSON)
    return folder / "plugin.json"


def _broken(path: Path, folder: Path, errors: list[dict[str, Any]]) -> dict[str, Any]:
    first = errors[0]
    loader = f"{path}: " + (f"invalid manifest: {first['field']}: " if first["field"] else "") + first["message"]
    reason = f"its manifest cannot be loaded ({loader})"
    return {
        "kind": "PLUGIN_BROKEN",
        "message": f"plugin other is broken: {reason}; fix its manifest, then send hostd SIGHUP or restart it, "
        "or uninstall the plugin",
        "plugin": "other",
        "path": str(folder),
        "source": "manifest",
        "reason": reason,
        "errors": errors,
    }


async def test_install_refuses_it_with_the_field(tmp_path: Path, make_plugin: MakePlugin, hostd: HostdClient) -> None:
    manifest = _use_json(make_plugin("other"))
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"path": str(manifest.parent)})
    assert (refused.value.kind, refused.value.message, refused.value.data) == (
        "MANIFEST_INVALID",
        f"{manifest}: invalid manifest: contributes.tools.0: {SURROGATE_ERROR}",
        {
            "kind": "MANIFEST_INVALID",
            "path": str(manifest),
            "errors": [{"field": "contributes.tools.0", "message": SURROGATE_ERROR}],
        },
    )
    assert (await hostd.request("plugins/list", {}))["plugins"] == []


@pytest.mark.parametrize("kind", ["json", "yaml"])
async def test_hostd_starts_and_serves_the_others(tmp_path: Path, make_plugin: MakePlugin, kind: str) -> None:
    good, other = make_plugin("mcp-echo"), make_plugin("other")
    state = tmp_path / "state"
    async with spawn_hostd(tmp_path) as first:
        await ready(first, good)
        await ready(first, other)
    original = (other / "plugin.yaml").read_text()
    errors: list[dict[str, Any]]
    if kind == "json":
        path = _use_json(other)
        errors = [{"field": "contributes.tools.0", "message": SURROGATE_ERROR}]
    else:
        path = other / "plugin.yaml"
        path.write_text(SURROGATE_YAML)
        errors = [{"field": "", "message": YAML_ERROR, "line": 6, "column": 21}]
    expected = _broken(path, other, errors)
    async with spawn_hostd(tmp_path) as second:
        listed = {p["id"]: p for p in (await second.request("plugins/list", {}))["plugins"]}
        assert sorted(listed) == ["mcp-echo", "other"]
        assert (listed["other"]["status"], listed["other"]["enabled"], listed["other"]["error"]) == (
            "broken",
            True,
            expected,
        )
        assert (await second.request("plugins/status", {"id": "other"}))["error"] == expected
        logs = await second.request("plugins/logs", {"id": "other"})
        assert logs["lines"][-1]["message"] == expected["message"]
        await second.wait_for("plugins/statusChanged", lambda s: (s["plugin_id"], s["status"]) == ("mcp-echo", "ready"))
        called = await second.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "up"}})
        assert called["structuredContent"] == {"text": "up", "length": 2}
        third = make_plugin("third")  # installing a different plugin works
        assert (await ready(second, third))["status"] == "ready"
        with pytest.raises(RpcError) as refused:
            await second.request("plugins/enable", {"id": "other"})
        assert refused.value.kind == "PLUGIN_BROKEN"
        # fixed on disk, SIGHUP loads it again (stopped, its grants and approval as stored)
        if kind == "json":
            path.unlink()
        (other / "plugin.yaml").write_text(original)
        second.process.send_signal(signal.SIGHUP)
        back = await second.wait_for(
            "plugins/statusChanged", lambda s: (s["plugin_id"], s["status"]) == ("other", "stopped")
        )
        assert back["error"] is None
        info = {p["id"]: p for p in (await second.request("plugins/list", {}))["plugins"]}["other"]
        assert (info["status"], info["name"], info["launch"]["approved"]) == ("stopped", "Echo fixture (plain)", True)
        assert (await second.request("plugins/enable", {"id": "other"}))["status"] == "ready"
    assert sorted(json.loads((state / "state.json").read_text())["plugins"]) == ["mcp-echo", "other", "third"]


async def test_hostctl_lists_it_broken(tmp_path: Path, make_plugin: MakePlugin) -> None:
    other = make_plugin("other")
    state = tmp_path / "state"
    async with spawn_hostd(tmp_path) as first:
        await first.request("plugins/install", {"path": str(other)})
    _use_json(other)
    done = await run_hostctl(state, "list", "--json")
    assert done.returncode == 0, done.stderr
    plugins = json.loads(done.stdout)["plugins"]
    assert [(p["id"], p["status"], p["error"]["errors"]) for p in plugins] == [
        ("other", "broken", [{"field": "contributes.tools.0", "message": SURROGATE_ERROR}])
    ]


async def test_sighup_keeps_the_last_good_manifest(tmp_path: Path, make_plugin: MakePlugin) -> None:
    other = make_plugin("other")
    async with spawn_hostd(tmp_path) as client:
        await ready(client, other)
        before = (await client.request("plugins/list", {}))["plugins"]
        path = _use_json(other)
        client.process.send_signal(signal.SIGHUP)
        note = await client.wait_for("plugins/log", lambda n: n["plugin"] == "other" and n["level"] == "error")
        assert note["message"] == f"{path}: invalid manifest: contributes.tools.0: {SURROGATE_ERROR}"
        assert (await client.request("plugins/list", {}))["plugins"] == before  # the last good one, still ready
        called = await client.request("tools/call", {"name": "other.echo", "arguments": {"text": "still"}})
        assert called["structuredContent"] == {"text": "still", "length": 5}
        assert (await client.request("plugins/restart", {"id": "other"}))["status"] == "ready"
        assert client.process.returncode is None
