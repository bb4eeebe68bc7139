"""A cancelled ``plugins/enable`` or ``plugins/restart`` ends in a defined state (issue 11).

The parent cancels with ``$/cancelRequest`` while the plugin is still starting (the ``slow-start``
fixture reads nothing for a while). The request is answered ``-32800``; the plugin ends ``stopped``
with a ``plugins/statusChanged`` saying so, ``enabled`` is false (a restart of hostd will not start
it), and nothing of its tree is left (the autouse leak check).
"""

from __future__ import annotations

import pytest

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin

REQUEST_CANCELLED = -32800


async def _installed(hostd: HostdClient, make_plugin: MakePlugin, delay: str) -> None:
    folder = make_plugin(variant="slow-start", args=["--delay", delay], backend={"startup_timeout_seconds": 30})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})


async def test_a_cancelled_enable_ends_stopped_and_not_enabled(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await _installed(hostd, make_plugin, "30")
    enabling = await hostd.start("plugins/enable", {"id": "mcp-echo"}, id="enable-1")
    await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "starting")
    await hostd.notify("$/cancelRequest", {"id": "enable-1"})
    with pytest.raises(RpcError) as cancelled:
        await enabling()
    assert cancelled.value.code == REQUEST_CANCELLED
    stopped = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "stopped", timeout=10)
    assert stopped["error"] is None
    assert [s["status"] for s in hostd.seen("plugins/statusChanged")] == ["starting", "stopped"]
    [plugin] = (await hostd.request("plugins/list", {}))["plugins"]
    assert (plugin["status"], plugin["enabled"]) == ("stopped", False)


async def test_a_cancelled_restart_ends_stopped_and_not_enabled(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    await _installed(hostd, make_plugin, "2")
    assert (await hostd.request("plugins/enable", {"id": "mcp-echo"}))["status"] == "ready"
    restarting = await hostd.start("plugins/restart", {"id": "mcp-echo"}, id="restart-1")
    await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "starting" and s["restarts"] == 1)
    await hostd.notify("$/cancelRequest", {"id": "restart-1"})
    with pytest.raises(RpcError) as cancelled:
        await restarting()
    assert cancelled.value.code == REQUEST_CANCELLED
    await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "stopped", timeout=10)
    [plugin] = (await hostd.request("plugins/list", {}))["plugins"]
    assert (plugin["status"], plugin["enabled"]) == ("stopped", False)
