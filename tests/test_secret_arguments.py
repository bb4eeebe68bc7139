"""Secrets never travel in argv (issue 25, over-granting 2).

The class (hostd/host/launch.py ``refuse_secret_arguments``): a secret value on a command line, which
every process of the machine reads in ``/proc/<pid>/cmdline``. Members: a ``sensitive`` bundle option
used in ``args`` (as ``--token=${user_config.api_key}`` and as a whole argument); a ``${secret:NAME}``
in a hand-written manifest's args is the same reference after install. A real node server is started;
the test finds its real pid in ``/proc`` and reads the command line the kernel shows for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import FIXTURES
from tests.test_bundle import build, call_text, mcpb_manifest

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
