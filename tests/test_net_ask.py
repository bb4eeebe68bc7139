"""Unknown destinations ask the parent (``network/request``; issue 26), like call-time file grants.

One real plugin with an allowlist behind hostd's proxy, a parent that declares ``capabilities.network`` and
answers per destination: ``no`` (refused with the reason, never asked again while the plugin runs), ``once``
(let through while it runs), ``always`` (let through, recorded in the state, let through after a restart of the
plugin without asking). The class: *a destination decided twice, or a decision lost* — each member is asked
exactly once and the requests the parent saw are counted. Without the capability the proxy refuses without
asking (tests/test_net_enforce.py: its parent declares none).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import trio
import yaml

from hostd.cli.client import HostdClient, plugin_environment
from tests.conftest import ROOT, hostctl_on_a_terminal, run_hostctl
from tests.http_upstream import upstream
from tests.platform_facts import need_layers

PROBE = ROOT / "fixtures" / "mcp-probe"


async def test_the_parent_answers_no_once_and_always(tmp_path: Path, nursery: trio.Nursery) -> None:
    need_layers("netns", "pidns")
    ports = {}
    for name in ("listed", "no", "once", "always"):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        await nursery.start(trio.serve_listeners, upstream, listeners)
        ports[name] = listeners[0].socket.getsockname()[1]
    answers = {ports["no"]: "no", ports["once"]: "once", ports["always"]: "always"}
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = {"hosts": [f"127.0.0.1:{ports['listed']}"]}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    initialize = {"clientInfo": {"name": "asking-parent", "version": "0"}, "capabilities": {"network": {}}}
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state")], env=plugin_environment(), initialize=initialize
    ) as hostd:

        async def on_request(method: str, params: dict[str, Any]) -> Any:
            return {"grant": answers[params["port"]]}

        hostd.on_request = on_request
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        await hostd.request("plugins/enable", {"id": "mcp-probe"})

        def fetch(name: str) -> list[str]:
            return ["fetch", f"http://127.0.0.1:{ports[name]}/{name}"]

        async def run(*ops: list[str]) -> list[Any]:
            result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": list(ops)}})
            outcomes: list[Any] = result["structuredContent"]["results"]
            return outcomes

        declined = (
            f"403 127.0.0.1:{ports['no']} is not in the plugin's allowlist, and no allowed name resolves to it; "
            f"the user declined it (to let it through: hostctl grant mcp-probe --host 127.0.0.1:{ports['no']})"
        )
        assert await run(fetch("listed"), fetch("no"), fetch("once"), fetch("always"), fetch("no"), fetch("once")) == [
            "200 hello /listed",
            declined,
            "200 hello /once",
            "200 hello /always",
            declined,
            "200 hello /once",
        ]
        asked = [params for _, method, params in hostd.requests if method == "network/request"]
        assert [(a["plugin"], a["host"], a["port"]) for a in asked] == [
            ("mcp-probe", "127.0.0.1", ports[name]) for name in ("no", "once", "always")
        ]
        # The question says what the address is: a "yes" to 127.0.0.1 lets the plugin reach this machine.
        assert [a.get("addressKind") for a in asked] == ["loopback"] * 3
        assert asked[0]["reason"] == (
            f"plugin mcp-probe asks to connect to 127.0.0.1:{ports['no']} (a loopback address: this machine), "
            "which its network allowlist does not name"
        )
        stored = json.loads((tmp_path / "state" / "state.json").read_text())
        assert stored["plugins"]["mcp-probe"]["networkCallHosts"] == [f"127.0.0.1:{ports['always']}"]

        # A new start of the plugin: a new proxy. The recorded destination passes without asking.
        await hostd.request("plugins/disable", {"id": "mcp-probe"})
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
        answers.clear()  # any question now would get no answer: refused
        assert await run(fetch("always")) == ["200 hello /always"]
        assert len([1 for _, method, _ in hostd.requests if method == "network/request"]) == 3

        # Forgotten (plugins/grant networkCallHosts []): at the next start the parent is asked again.
        info = await hostd.request(
            "plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"], "networkCallHosts": []}
        )
        assert "networkCallHosts" not in info
        await hostd.request("plugins/disable", {"id": "mcp-probe"})
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
        answers[ports["always"]] = "no"
        assert await run(fetch("always")) == [
            f"403 127.0.0.1:{ports['always']} is not in the plugin's allowlist, and no allowed name resolves to it; "
            "the user declined it (to let it through: hostctl grant mcp-probe --host "
            f"127.0.0.1:{ports['always']})"
        ]
        assert len([1 for _, method, _ in hostd.requests if method == "network/request"]) == 4
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert "networkCallHosts" not in stored["plugins"]["mcp-probe"]


async def test_hostctl_call_asks_in_the_terminal(tmp_path: Path, nursery: trio.Nursery) -> None:
    """hostctl declares capabilities.network for ``call`` on a terminal and asks there (issue 26)."""
    need_layers("netns", "pidns")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, upstream, listeners)
    port = listeners[0].socket.getsockname()[1]
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = {"hosts": []}  # an empty allowlist: every destination is asked
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    state, env = tmp_path / "state", {**os.environ, "HOSTD_SECRETS": "file"}
    for step in (["install", str(folder)], ["grant", "mcp-probe", "--all"], ["approve", "mcp-probe", "--yes"]):
        done = await run_hostctl(state, *step, env=env)
        assert done.returncode == 0, done.stderr
    arguments = json.dumps({"ops": [["fetch", f"http://127.0.0.1:{port}/terminal"]]})
    code, screen = await hostctl_on_a_terminal(state, b"o\n", b"[N]o:", "call", "mcp-probe", "run", arguments, env=env)
    assert code == 0, screen
    assert (
        f"mcp-probe wants to connect to 127.0.0.1:{port} (a loopback address: this machine), which its network "
        "allowlist does not name"
    ) in screen
    assert "200 hello /terminal" in screen
