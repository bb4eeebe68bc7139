"""``hostd mcp``: an unknown network destination is asked of the person through the MCP client (issue 27).

hostd's ``network/request`` (a plugin's proxy meets a destination its allowlist does not name; issue 26) is not
MCP: the gateway asks it as a form elicitation (``no`` / ``once`` / ``always``) when the client declared
elicitation, else the proxy refuses the destination naming the hostctl command that lets it through. The class:
*a consent a person must give, decided without one* — a client that can ask is asked once per destination (each
answer honoured, ``always`` recorded and not asked again), and a client that cannot ask is never asked and gets
the command. One real plugin (``fixtures/mcp-probe``, an empty allowlist: every destination is asked) behind the
gateway, driven by the SDK's ``ClientSession`` over stdio.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import mcp_types as types
import trio
import yaml

from tests.conftest import ROOT, spawn_hostd
from tests.http_upstream import upstream
from tests.platform_facts import need_layers
from tests.test_gateway import gateway


async def test_an_unknown_destination_is_asked_through_the_clients_elicitation_or_refused_with_the_command(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    need_layers("netns", "pidns")
    ports = {}
    for name in ("no", "once", "always", "unasked"):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        await nursery.start(trio.serve_listeners, upstream, listeners)
        ports[name] = listeners[0].socket.getsockname()[1]
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(ROOT / "fixtures" / "mcp-probe", folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = {"hosts": []}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    async with spawn_hostd(tmp_path) as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
    answers = {ports["no"]: "decline", ports["once"]: "once", ports["always"]: "always"}
    asked: list[types.ElicitRequestParams] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        port = int(re.search(r"127\.0\.0\.1:(\d+)", getattr(params, "message", "")).group(1))  # type: ignore[union-attr]
        answer = answers[port]
        if answer == "decline":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"grant": answer})

    def fetch(name: str) -> list[str]:
        return ["fetch", f"http://127.0.0.1:{ports[name]}/{name}"]

    def refused(name: str, declined: bool = False) -> str:
        where = f"127.0.0.1:{ports[name]}"
        return (
            f"403 {where} is not in the plugin's allowlist, and no allowed name resolves to it"
            + ("; the user declined it" if declined else "")
            + f" (to let it through: hostctl grant mcp-probe --host {where})"
        )

    async with gateway(tmp_path, elicitation_callback=elicitation) as client:
        await client.initialize()
        ops = [fetch("no"), fetch("once"), fetch("always"), fetch("no"), fetch("once")]
        result = await client.call_tool("mcp-probe.run", {"ops": ops})
        declined = refused("no", declined=True)
        assert result.structured_content == {
            "results": [declined, "200 hello /once", "200 hello /always", declined, "200 hello /once"]
        }
        assert [getattr(a, "message", "") for a in asked] == [
            f"plugin mcp-probe asks to connect to 127.0.0.1:{ports[name]} (a loopback address: this machine), "
            "which its network allowlist does not name.\nAllow plugin mcp-probe to connect there?"
            for name in ("no", "once", "always")
        ]
        schema = getattr(asked[0], "requested_schema", None)
        assert schema is not None and schema["properties"]["grant"]["enum"] == ["no", "once", "always"]
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert stored["plugins"]["mcp-probe"]["networkCallHosts"] == [f"127.0.0.1:{ports['always']}"]

    # A client without elicitation: nobody to ask. The recorded destination passes; another is refused with the
    # command, and nothing is asked.
    async with gateway(tmp_path) as client:
        await client.initialize()
        result = await client.call_tool("mcp-probe.run", {"ops": [fetch("always"), fetch("unasked")]})
        assert result.structured_content == {"results": ["200 hello /always", refused("unasked")]}
    assert len(asked) == 3
