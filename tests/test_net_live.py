"""A change of a running plugin's network allowlist applies at once, without a restart (issue 26).

One real plugin (fixtures/mcp-probe with ``network: {hosts: ["127.0.0.1:<listed>"]}``) behind hostd's proxy, one
hostd serving it, and hostctl reaching that hostd through its control socket (as a user does while a client
runs it). The class: *a grant or revoke that the running plugin does not see* — members: a host granted
(``hostctl grant --host``, i.e. ``plugins/grant networkHosts``) reached by a new connection; that host revoked
(``--revoke-host``) refused to a new connection with the exact reason; an open connection to the revoked host
closed (the promise: a revoke holds for every byte after it, not only for new connections); an open connection
the change does not touch kept; a lasting answer to ``network/request`` recorded (``plugins/grant
networkCallHosts``) after the proxy had refused that destination, and taken back. A tunnel
opened before the grant still carries a request after it: the same process ran throughout (no restart).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import trio
import yaml

from tests.conftest import ROOT, run_hostctl, spawn_hostd
from tests.http_upstream import upstream
from tests.platform_facts import need_layers

PROBE = ROOT / "fixtures" / "mcp-probe"


async def test_a_grant_and_a_revoke_reach_the_running_plugin(tmp_path: Path, nursery: trio.Nursery) -> None:
    need_layers("netns", "pidns")
    ports = {}
    for name in ("listed", "granted"):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        await nursery.start(trio.serve_listeners, upstream, listeners)
        ports[name] = listeners[0].socket.getsockname()[1]
    listed, granted = (f"127.0.0.1:{ports[name]}" for name in ("listed", "granted"))
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = {"hosts": [listed]}
    manifest["backend"]["tool_timeout_seconds"] = 60
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    env = {**os.environ, "HOSTD_SECRETS": "file"}
    async with spawn_hostd(tmp_path) as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        await hostd.request("plugins/enable", {"id": "mcp-probe"})

        async def run(*ops: list[Any]) -> list[Any]:
            result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": list(ops)}})
            outcomes: list[Any] = result["structuredContent"]["results"]
            return outcomes

        async def hostctl(*args: str) -> None:
            done = await run_hostctl(tmp_path / "state", "grant", "mcp-probe", *args, env=env)
            assert done.returncode == 0, done.stderr

        fetch = ["fetch", f"http://{granted}/granted"]
        refused = (
            f"403 {granted} is not in the plugin's allowlist, and no allowed name resolves to it "
            f"(to let it through: hostctl grant mcp-probe --host {granted})"
        )
        assert await run(["open", "127.0.0.1", ports["listed"]], fetch) == ["0", refused]

        await hostctl("--host", granted)
        assert await run(
            fetch,
            ["through", 0, "/before-the-grant"],  # opened before the grant: the same process, never restarted
            ["open", "127.0.0.1", ports["granted"]],
            ["open", "127.0.0.1", ports["listed"]],
        ) == ["200 hello /granted", "hello /before-the-grant", "1", "2"]

        await hostctl("--revoke-host", granted)
        assert await run(fetch, ["ended", 1], ["through", 2, "/kept"]) == [refused, "closed", "hello /kept"]
        logged = await hostd.wait_for(
            "plugins/log", lambda n: n["source"] == "host" and "an open connection" in n["message"]
        )
        assert logged["message"] == (
            f"network: refused {granted} (403): an open connection to {granted} closed: the plugin's allowlist no "
            "longer allows it"
        )

        # The parent's lasting answers (networkCallHosts, what an 'always' records) follow the same way, both ways,
        # though this proxy refused the destination before (its answer was kept for the plugin's life).
        grant = {"id": "mcp-probe", "permissions": ["probe.run"]}
        await hostd.request("plugins/grant", {**grant, "networkCallHosts": [granted]})
        assert await run(fetch) == ["200 hello /granted"]
        await hostd.request("plugins/grant", {**grant, "networkCallHosts": []})
        assert await run(fetch) == [refused]


async def test_an_imported_server_starts_with_an_empty_allowlist(tmp_path: Path, nursery: trio.Nursery) -> None:
    """Issue 26: a server imported from a client config reaches no host until one is granted (and each
    destination is asked of a parent that can ask, tests/test_net_ask.py); it runs behind the proxy where the
    kernel can enforce that, and under ``--sandbox basic`` the launch says the allowlist is not enforced."""
    need_layers("netns", "pidns")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, upstream, listeners)
    target = f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    config = {"mcpServers": {"probe": {"command": "python3", "args": [str(PROBE / "server.py")]}}}
    (tmp_path / "basic").mkdir()
    async with spawn_hostd(tmp_path / "basic", "--sandbox", "basic") as hostd:
        [imported] = (await hostd.request("plugins/import", {"config": config}))["entries"]
        assert imported["plugin"]["launch"]["capabilities"]["network"] == {
            "access": "all",
            "tcpPorts": [],
            "hosts": [],
            "filtering": "not enforced: --sandbox basic applies no network isolation",
        }
    async with spawn_hostd(tmp_path) as hostd:
        [imported] = (await hostd.request("plugins/import", {"config": config}))["entries"]
        info = imported["plugin"]
        assert imported["notes"][-1] == "network hosts: none, each asked"
        assert info["launch"]["network"] == {"hosts": [], "private": []}
        assert {"netns", "netproxy"} <= set(info["launch"]["isolation"])
        assert info["launch"]["capabilities"]["network"] == {
            "access": "hosts",
            "tcpPorts": [],
            "hosts": [],
            "filtering": "enforced",
        }
        await hostd.request("plugins/approve", {"id": "probe", "digest": info["launch"]["digest"]})
        await hostd.request("plugins/enable", {"id": "probe"})
        ops = {"ops": [["fetch", f"http://{target}/imported"]]}

        async def fetch() -> list[Any]:
            result = await hostd.request("tools/call", {"name": "probe.run", "arguments": ops})
            outcomes: list[Any] = result["structuredContent"]["results"]
            return outcomes

        assert await fetch() == [
            f"403 {target} is not in the plugin's allowlist, and no allowed name resolves to it "
            f"(to let it through: hostctl grant probe --host {target})"
        ]
        await hostd.request("plugins/grant", {"id": "probe", "permissions": [], "networkHosts": [target]})
        assert await fetch() == ["200 hello /imported"]
