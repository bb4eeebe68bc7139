"""A plugin with an allowlist reaches its hosts through hostd's proxy and nothing else (issue 26, ``netproxy``).

One real plugin (fixtures/mcp-probe with ``network: {hosts: ["127.0.0.1:<upstream port>"]}``, an entry that
names loopback explicitly) under the default level: it runs in its own network namespace, its only way out the
loopback listener hostd's proxy accepts on. From inside, a real Python client (``urllib``, through
``HTTP_PROXY``) and a real Node.js client (``http`` through the proxy variable; Node 20's built-in clients ignore
it) and a raw-socket client (``CONNECT``, then HTTP through the tunnel: any TCP protocol) reach the upstream
server; a host or port the allowlist does not name is refused by the proxy (``403`` and
the reason, and a ``plugins/log`` line to the parent); a direct connection, to the same upstream or to a public
address, never reaches it (``ECONNRESET``: the loopback literal on a listened port lands on hostd's transparent
listener, which resets it, the literal being no address its DNS gave, tests/test_net_transparent.py;
``ENETUNREACH``: there is no route). What this proves for an unprivileged user: the namespaces are unprivileged
(a user namespace owns them), and this file's nobody test repeats the core checks as nobody, transparent mode's
raw-socket client by name included.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from tests.conftest import ROOT, spawn_hostd
from tests.http_upstream import upstream
from tests.nobody import nobody_folder, run_driver, skip_reason
from tests.platform_facts import need_layers

PROBE = ROOT / "fixtures" / "mcp-probe"


def proxied_probe(tmp_path: Path, hosts: list[str]) -> Path:
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = {"hosts": hosts}
    manifest["backend"]["tool_timeout_seconds"] = 60
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def test_python_and_node_reach_the_allowlisted_host_and_nothing_else(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    need_layers("netns", "pidns")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, upstream, listeners)
    port = listeners[0].socket.getsockname()[1]
    other = port + 1 if port < 65535 else port - 1
    async with spawn_hostd(tmp_path) as hostd:
        info = await hostd.request("plugins/install", {"path": str(proxied_probe(tmp_path, [f"127.0.0.1:{port}"]))})
        assert {"netns", "netproxy", "seccomp-net"} <= set(info["launch"]["isolation"])
        assert "landlock-net" not in info["launch"]["isolation"]
        assert info["launch"]["capabilities"]["network"] == {
            "access": "hosts",
            "tcpPorts": [],
            "hosts": [f"127.0.0.1:{port}"],
            "filtering": "enforced",
        }
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        status = await hostd.request("plugins/enable", {"id": "mcp-probe"})
        assert status["status"] == "ready"
        assert "netproxy" in status["isolation"]
        ops = [
            ["env", "HTTPS_PROXY"],
            ["fetch", f"http://127.0.0.1:{port}/python"],
            ["fetch", f"http://127.0.0.1:{other}/"],
            ["fetch", "http://example.com/"],
            ["raw", "127.0.0.1", port, "/direct"],
            ["connect", "93.184.215.14", 80],
            ["node", "proxy", f"http://127.0.0.1:{port}/node"],
            ["node", "direct", f"http://127.0.0.1:{port}/node"],
            ["node", "proxy", f"http://localhost:{port}/"],
            ["tunnel", "127.0.0.1", port, "/raw"],
            ["tunnel", "127.0.0.1", other, "/raw"],
        ]
        result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": ops}})
        assert result["structuredContent"]["results"] == [
            "http://127.0.0.1:3128",
            "200 hello /python",
            f"403 127.0.0.1:{other} is not in the plugin's allowlist, and no allowed name resolves to it"
            f" (to let it through: hostctl grant mcp-probe --host 127.0.0.1:{other})",
            "403 example.com:80 is not in the plugin's allowlist"
            " (to let it through: hostctl grant mcp-probe --host example.com:80)",
            "ECONNRESET",
            "ENETUNREACH",
            "200 hello /node",
            "ECONNRESET",
            f"403 localhost:{port} is not in the plugin's allowlist"
            f" (to let it through: hostctl grant mcp-probe --host localhost:{port})",
            "hello /raw",
            f"HTTP/1.1 403 Forbidden 127.0.0.1:{other} is not in the plugin's allowlist, and no allowed name resolves "
            f"to it (to let it through: hostctl grant mcp-probe --host 127.0.0.1:{other})",
        ]
        logged = await hostd.wait_for(
            "plugins/log", lambda n: n["source"] == "host" and "refused example.com" in n["message"]
        )
        assert (
            logged["message"]
            == "network: refused example.com:80 (403): example.com:80 is not in the plugin's allowlist"
            " (to let it through: hostctl grant mcp-probe --host example.com:80)"
        )
        assert logged["plugin"] == "mcp-probe"


async def test_an_unprivileged_user_gets_the_same_enforcement() -> None:
    """As nobody (CI runs as root; users do not): the namespaces, the handoff and the proxy need no privilege."""
    need_layers("netns", "pidns")
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with nobody_folder() as work:
        result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_netproxy.py", work, timeout=120)
    assert {"netns", "netproxy", "pidns", "seccomp-net"} <= set(result["isolation"])
    assert result["results"] == [
        "200 hello /nobody",
        "403 127.0.0.1:<other> is not in the plugin's allowlist, and no allowed name resolves to it"
        " (to let it through: hostctl grant mcp-probe --host 127.0.0.1:<other>)",
        "ECONNRESET",
        "HTTP/1.1 200 OK\r\nContent-Length: 17\r\nConnection: close\r\n\r\nhello /nobody-raw",
        "gaierror EAI_NONAME",
    ]
