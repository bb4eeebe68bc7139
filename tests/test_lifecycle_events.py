"""Lifecycle events end to end (issue 11): a start cut short ends where ``hostd/plugins/lifecycle.py`` says.

The class: every way a start of ``plugins/enable`` or ``plugins/restart`` can end (ready, failed,
cancelled by the parent, abandoned by a disable) leaves a defined state and tells the parent. Here:
cancelled *before* the spawn, while the ``starting`` notification waits on a parent that stopped
reading (the host is driven in-process, with a notify that blocks there), and cancelled *after* the
spawn (the real hostd, with the ``slow-start`` fixture), for both enable and restart; and the
plugin is usable again afterwards. The echo fixture and slow-start fixture are real processes.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.control.core import InitializeOptions, RequestContext
from hostd.host.service import Host, HostSettings
from hostd.plugins.supervisor import State
from hostd.wire.errors import HostError
from tests.conftest import MakePlugin

REQUEST_CANCELLED = -32800


class BlockingParent:
    """A parent seen through ``notify``: records every notification, and stops reading at one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.block_at: tuple[str, int] | None = None  # (status, restarts) of the statusChanged that blocks
        self.blocked = trio.Event()
        self.release = trio.Event()  # never set unless a test reads on

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        self.seen.append((method, params))
        if method == "plugins/statusChanged" and (params["status"], params["restarts"]) == self.block_at:
            self.blocked.set()
            await self.release.wait()  # the control queue is full: the parent stopped reading

    def statuses(self) -> list[str]:
        return [p["status"] for m, p in self.seen if m == "plugins/statusChanged"]


async def _host(nursery: trio.Nursery, parent: BlockingParent, make_plugin: MakePlugin) -> tuple[Host, RequestContext]:
    options = InitializeOptions(
        client_name="test", client_version="0", protocol_version="1", known_permissions=None, state_dir=None
    )
    host = Host(options, parent.notify, nursery, HostSettings())
    ctx = RequestContext(id=1, method="test", notify=parent.notify)
    info = await host.handle("plugins/install", {"path": str(make_plugin())}, ctx)
    await host.handle("plugins/grant", {"id": "mcp-echo", "permissions": info["permissions"]}, ctx)
    await host.handle("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]}, ctx)
    return host, ctx


async def _cancel_when_blocked(host: Host, ctx: RequestContext, parent: BlockingParent, method: str) -> None:
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as requests:
            requests.start_soon(host.handle, method, {"id": "mcp-echo"}, ctx)
            await parent.blocked.wait()
            scope.cancel()  # the parent's $/cancelRequest (or shutdown) while the notification waits
    assert scope.cancelled_caught


@pytest.mark.parametrize(
    ("method", "blocked_at"),
    [
        ("plugins/enable", "starting"),  # before the spawn
        ("plugins/restart", "starting"),
        ("plugins/enable", "ready"),  # after the spawn, while the start announces ready
        ("plugins/restart", "ready"),
    ],
)
async def test_a_start_cancelled_in_its_notifications_ends_stopped(
    make_plugin: MakePlugin, method: str, blocked_at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", plugin_environment()["PATH"])  # python3 = this interpreter, as for hostd serve
    parent = BlockingParent()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            host, ctx = await _host(nursery, parent, make_plugin)
            plugin = host.plugins["mcp-echo"]
            restarts = 0
            if method == "plugins/restart":
                assert (await host.handle("plugins/enable", {"id": "mcp-echo"}, ctx))["status"] == "ready"
                restarts = 1
            parent.block_at = (blocked_at, restarts)
            await _cancel_when_blocked(host, ctx, parent, method)
            # Was: "starting" (or "ready") for ever, with nothing running.
            assert plugin.supervisor.state is State.STOPPED
            assert parent.statuses()[-2:] == [blocked_at, "stopped"]
            assert parent.seen[-1][1]["error"] is None
            assert not plugin.enabled
            assert host.registry.count("mcp-echo") == 0
            # Not wedged: the next enable starts it.
            parent.block_at = None
            assert (await host.handle("plugins/enable", {"id": "mcp-echo"}, ctx))["status"] == "ready"
            await host.shutdown(fast=True)
            assert plugin.supervisor.state is State.STOPPED
            nursery.cancel_scope.cancel()


async def test_a_disable_while_a_crash_is_handled_arms_no_restart(
    make_plugin: MakePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that moves the plugin on while its failure is handled: the restart policy stays out.

    The crash's ``unhealthy`` notification is held (the parent is slow) while ``plugins/disable``
    arrives; the disable waits for the failed instance to end. Before the table, the failure path
    then armed an automatic restart, so the ``stopped`` plugin said ``next_retry_at``, and an
    ``unhealthy`` came after the disable was accepted.
    """
    monkeypatch.setenv("PATH", plugin_environment()["PATH"])
    parent = BlockingParent()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            host, ctx = await _host(nursery, parent, make_plugin)
            plugin = host.plugins["mcp-echo"]
            assert (await host.handle("plugins/enable", {"id": "mcp-echo"}, ctx))["status"] == "ready"
            parent.block_at = ("unhealthy", 0)

            async def crash() -> None:
                with pytest.raises(HostError) as gone:
                    await host.handle("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 3}}, ctx)
                assert gone.value.kind.name == "PLUGIN_HOST_UNAVAILABLE"

            nursery.start_soon(crash)
            await parent.blocked.wait()
            answered: dict[str, Any] = {}

            async def disable() -> None:
                answered.update(await host.handle("plugins/disable", {"id": "mcp-echo"}, ctx))

            async with trio.open_nursery() as requests:
                requests.start_soon(disable)
                await trio.testing.wait_all_tasks_blocked()  # the disable waits for the failed instance
                parent.release.set()
            assert (answered["status"], answered["next_retry_at"]) == ("stopped", None)
            assert plugin.supervisor.state is State.STOPPED
            assert parent.statuses() == ["starting", "ready", "unhealthy", "stopped"]
            assert plugin.supervisor.status()["next_retry_at"] is None
            nursery.cancel_scope.cancel()


async def _slow_plugin(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="slow-start", args=["--delay", "2"], backend={"startup_timeout_seconds": 30})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": "mcp-echo", "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": info["launch"]["digest"]})


async def test_a_restart_cancelled_mid_start_tells_the_parent_every_step(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    """The documented outcome of CANCEL in ``starting``: stop_instance, clear_error, notify_status."""
    await _slow_plugin(hostd, make_plugin)
    assert (await hostd.request("plugins/enable", {"id": "mcp-echo"}))["status"] == "ready"
    assert len((await hostd.request("tools/list", {}))["tools"]) > 0
    restarting = await hostd.start("plugins/restart", {"id": "mcp-echo"}, id="restart-1")
    await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "starting" and s["restarts"] == 1)
    await hostd.notify("$/cancelRequest", {"id": "restart-1"})
    with pytest.raises(RpcError) as cancelled:
        await restarting()
    assert cancelled.value.code == REQUEST_CANCELLED
    stopped = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "stopped", timeout=10)
    changes = hostd.seen("plugins/statusChanged")
    assert [(s["status"], s["restarts"]) for s in changes] == [
        ("starting", 0),
        ("ready", 0),
        ("starting", 1),
        ("stopped", 1),
    ]
    assert (stopped["error"], stopped["tools_count"], stopped["next_retry_at"]) == (None, 0, None)
    assert (await hostd.request("tools/list", {}))["tools"] == []
    [plugin] = (await hostd.request("plugins/list", {}))["plugins"]
    assert (plugin["status"], plugin["enabled"]) == ("stopped", False)
    # Not wedged: enable again reaches ready.
    assert (await hostd.request("plugins/enable", {"id": "mcp-echo"}))["status"] == "ready"
