"""The supervisor's driver without processes: enable, a crash, the restart backoff, disable.

:class:`PluginSupervisor` is driven with an instance of this module (:class:`MemoryInstance`): it
satisfies :class:`hostd.plugins.backends.Instance` and its link is the real link driver
(:class:`hostd.mcp.link.PluginLink`, the real session) over an in-memory transport to a small
MCP server written here (:class:`Server`: ``initialize``, ``tools/list``, ``ping``). Nothing is
spawned, nothing is connected. The clock is trio's ``MockClock`` with autojump, so the restart
timer's delays (0.5 s, then 1 s: no jitter) are exact virtual times.

What is checked: the exact states and notifications in order, the events the host is told
(``ToolsPinned``, ``RestartCounted``), when each restart happened, and how each instance was stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio
import trio.testing

import hostd.mcp.handshake  # noqa: F401 - loaded here, not in a worker thread (the mock clock would jump)
from hostd.install.manifest import Manifest
from hostd.mcp.link import PluginLink
from hostd.mcp.session import LEGACY_VERSIONS, METHOD_NOT_FOUND
from hostd.plugins.backends import Instance
from hostd.plugins.events import RestartCounted, RetryDue, SupervisorEvent, ToolsPinned
from hostd.plugins.registry import ToolRegistry
from hostd.plugins.restart import RestartPolicy
from hostd.plugins.supervisor import Liveness, PluginSupervisor, Start, State
from hostd.wire.redact import Redactor
from sandbox.launch import Launch
from sandbox.policy import IsolationPolicy
from sandbox.process import StopReport
from sandbox.watchdog import LimitHit

PLUGIN = "demo"
TOOL = {"name": "echo", "description": "Echo the text.", "inputSchema": {"type": "object"}}


class Server:
    """A small legacy-era MCP server: the answer to each message, or None (a notification)."""

    def __init__(self) -> None:
        self.methods: list[str] = []

    def answer(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method = message.get("method")
        assert isinstance(method, str)
        self.methods.append(method)
        if "id" not in message:
            return None
        rid = message["id"]
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": LEGACY_VERSIONS[-1],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "memory", "version": "1.0"},
            }
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "ping":
            result = {}
        else:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": METHOD_NOT_FOUND, "message": f"no {method}"}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}


class MemoryLink(PluginLink):
    """The link driver over memory: what it sends, the server answers at once; answers go to ``deliver``."""

    def __init__(self, server: Server) -> None:
        super().__init__(PLUGIN, redact=Redactor([]), on_log=_ignore_log, on_notification=_ignore_notification)
        self.server = server
        self._inbound_send, self._inbound = trio.open_memory_channel[dict[str, Any]](100)

    def _start_transport(self, nursery: trio.Nursery) -> None:
        nursery.start_soon(self._pump)

    async def _pump(self) -> None:
        async for message in self._inbound:
            if not await self.deliver(message):
                return

    async def _send(self, message: dict[str, Any]) -> bool:
        if self.done.is_set():
            return False
        answer = self.server.answer(message)
        if answer is not None:
            self._inbound_send.send_nowait(answer)
        return True


class MemoryInstance:
    """An :class:`~hostd.plugins.backends.Instance` with no process: its link, and how it was stopped."""

    def __init__(self) -> None:
        self.server = Server()
        self._link = MemoryLink(self.server)
        self.stops: list[float] = []
        self.kills = 0

    @property
    def link(self) -> PluginLink:
        return self._link

    @property
    def isolation(self) -> tuple[str, ...]:
        return ()

    @property
    def accounting(self) -> None:
        return None

    async def watch(self, limits: IsolationPolicy, disk_paths: tuple[str, ...]) -> LimitHit:
        del limits, disk_paths
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    def kernel_hit(self) -> None:
        return None

    async def stop(self, grace: float) -> StopReport:
        self.stops.append(grace)
        return StopReport("stdin-eof", 0, 0.0)

    def kill_now(self) -> None:
        self.kills += 1

    def crash(self) -> None:
        """What the stdio transport does when the server's process exits with code 1."""
        self._link.fail("exited with code 1")


async def _ignore_log(level: str, source: str, message: str) -> None:
    del level, source, message


async def _ignore_notification(method: str, params: dict[str, Any] | None) -> None:
    del method, params


def _manifest() -> Manifest:
    return Manifest.model_validate(
        {
            "id": PLUGIN,
            "name": "Demo",
            "version": "1.0.0",
            "permissions": [],
            "contributes": {"tools": [f"{PLUGIN}.echo"]},
            "backend": {
                "type": "mcp",
                "transport": "stdio",
                "command": "demo",
                "args": [],
                "env": {},
                "startup_timeout_seconds": 10,
                "tool_timeout_seconds": 10,
            },
        }
    )


def _launch() -> Launch:
    return Launch(
        command="demo",
        executable="/nonexistent/demo",
        args=(),
        cwd="/nonexistent",
        env={},
        isolation=(),
        manifest_env={},
    )


class Harness:
    """A host's side of one supervisor: what it was told, in order, at which (virtual) time."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.instances: list[MemoryInstance] = []
        #: ``(virtual time, method, status or None, whether next_retry_at is set)``
        self.told: list[tuple[float, str, str | None, bool]] = []
        self.events: list[SupervisorEvent] = []
        self.pins: dict[str, str] | None = None
        self._changed = trio.Event()
        self.supervisor = PluginSupervisor(
            _manifest(),
            ToolRegistry(),
            self.notify,
            nursery,
            on_event=self.on_event,
            restart_policy=RestartPolicy(jitter=0.0),
            liveness=Liveness(interval=1e6),
            open_instance=self.open_instance,
        )

    async def open_instance(self, launch: Launch) -> Instance:
        del launch
        instance = MemoryInstance()
        self.instances.append(instance)
        return instance

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        status = params.get("status") if method == "plugins/statusChanged" else None
        retry = method == "plugins/statusChanged" and params.get("next_retry_at") is not None
        self.told.append((trio.current_time(), method, status, retry))
        self._changed.set()
        self._changed = trio.Event()

    async def on_event(self, event: SupervisorEvent) -> None:
        self.events.append(event)
        if isinstance(event, ToolsPinned):
            self.pins = dict(event.pins)
        elif isinstance(event, RetryDue):  # the host's answer: the trust gate passed
            await self.supervisor.retry(self.start())

    def start(self) -> Start:
        return Start(launch=_launch(), manifest=_manifest(), pins=self.pins)

    async def until(self, ready: Callable[[], bool]) -> None:
        """Wait for the next notifications until ``ready()`` (no sleeps: the clock moves only for timers)."""
        while not ready():
            await self._changed.wait()

    def statuses(self) -> list[str | None]:
        return [status for _t, method, status, _r in self.told if method == "plugins/statusChanged"]


def _run(test: Callable[[Harness], Any]) -> None:
    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await test(Harness(nursery))
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


STARTED = [("plugins/statusChanged", "starting"), ("plugins/statusChanged", "ready"), ("tools/listChanged", None)]
CRASHED = [("tools/listChanged", None), ("plugins/statusChanged", "unhealthy"), ("plugins/statusChanged", "unhealthy")]


def _state(supervisor: PluginSupervisor) -> State:
    """The state now (a call: mypy does not carry a narrowed state across the awaits that change it)."""
    return supervisor.state


def _told(harness: Harness, since: int = 0) -> list[tuple[str, str | None]]:
    return [(method, status) for _t, method, status, _r in harness.told[since:]]


def test_enable_crash_backoff_restart_disable() -> None:
    async def test(h: Harness) -> None:
        sup = h.supervisor
        status = await sup.enable(h.start())
        assert (status["status"], status["tools_count"], status["pinned"]) == ("ready", 1, [f"{PLUGIN}.echo"])
        assert _state(sup) is State.READY
        assert _told(h) == STARTED
        assert h.pins is not None and list(h.pins) == ["echo"]
        assert h.events == [ToolsPinned(PLUGIN, h.pins)]
        assert h.instances[0].server.methods == [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
        ]

        # A crash: unhealthy with the reason; the instance stopped at once; the timer armed at 0.5 s.
        mark, crashed_at = len(h.told), trio.current_time()
        h.instances[0].crash()
        await h.until(lambda: sup.state is State.READY and len(h.instances) == 2)
        assert _told(h, mark) == CRASHED + STARTED
        unhealthy, armed, retried = h.told[mark + 1], h.told[mark + 2], h.told[mark + 3]
        assert (unhealthy[3], armed[3], retried[3]) == (False, True, False)  # next_retry_at: only while armed
        assert unhealthy[0] == armed[0] == crashed_at
        assert retried[0] - crashed_at == 0.5  # base delay, attempt 0
        assert h.instances[0].stops == [0.5]
        assert sup.restarts == 1
        assert sup.status()["error"] is None  # cleared by the restart

        # A second crash within the window: backoff doubles.
        mark, crashed_at = len(h.told), trio.current_time()
        h.instances[1].crash()
        await h.until(lambda: len(h.told) >= mark + 3)
        status = sup.status()
        assert status["status"] == "unhealthy"
        error = status["error"]
        assert (error["kind"], error["reason"]) == ("PLUGIN_HOST_UNAVAILABLE", "exited with code 1")
        await h.until(lambda: sup.state is State.READY and len(h.instances) == 3)
        assert _told(h, mark) == CRASHED + STARTED
        assert h.told[mark + 3][0] - crashed_at == 1.0  # base delay · 2
        assert sup.restarts == 2
        assert h.events[1:] == [
            RetryDue(PLUGIN),
            RestartCounted(PLUGIN, 1),
            RetryDue(PLUGIN),
            RestartCounted(PLUGIN, 2),
        ]

        # Disable: the tools go, the instance is stopped with the full grace, state stopped.
        mark = len(h.told)
        status = await sup.disable()
        assert (status["status"], status["tools_count"], status["next_retry_at"]) == ("stopped", 0, None)
        assert _state(sup) is State.STOPPED
        assert _told(h, mark) == [("tools/listChanged", None), ("plugins/statusChanged", "stopped")]
        assert [i.stops for i in h.instances] == [[0.5], [0.5], [2.0]]
        assert h.statuses() == [
            *["starting", "ready", "unhealthy", "unhealthy"] * 2,
            "starting",
            "ready",
            "stopped",
        ]

    _run(test)


def test_disable_while_the_restart_timer_is_armed_cancels_it() -> None:
    async def test(h: Harness) -> None:
        sup = h.supervisor
        await sup.enable(h.start())
        h.instances[0].crash()
        await h.until(lambda: sup.next_retry_at is not None)
        status = await sup.disable()
        assert (status["status"], status["next_retry_at"]) == ("stopped", None)
        await trio.sleep(60)  # well past the 0.5 s the timer would have fired at
        assert _state(sup) is State.STOPPED
        assert len(h.instances) == 1
        assert [e for e in h.events if isinstance(e, RestartCounted | RetryDue)] == []
        assert h.statuses() == ["starting", "ready", "unhealthy", "unhealthy", "stopped"]

    _run(test)


def test_the_restart_policy_gives_up_after_max_restarts() -> None:
    async def test(h: Harness) -> None:
        sup = h.supervisor
        sup.policy.max_restarts = 1
        await sup.enable(h.start())
        h.instances[0].crash()
        await h.until(lambda: sup.state is State.READY and len(h.instances) == 2)
        mark = len(h.told)
        h.instances[1].crash()
        await h.until(lambda: sup.state is State.ERROR)
        assert _told(h, mark) == [
            ("tools/listChanged", None),
            ("plugins/statusChanged", "unhealthy"),
            ("plugins/statusChanged", "error"),
        ]
        error = sup.status()["error"]
        assert error["kind"] == "PLUGIN_START_FAILED"
        assert error["reason"] == "gave up after 1 restarts within 60 s; use plugins/restart"
        await trio.sleep(60)
        assert (_state(sup), len(h.instances), sup.restarts) == (State.ERROR, 2, 1)

    _run(test)
