"""What a running instance is to the supervisor: one interface, :class:`Instance`, and its two kinds.

A stdio plugin runs as a sandboxed process tree (:class:`ProcessInstance`: its
:class:`~sandbox.process.SandboxedProcess` and the :class:`~hostd.mcp.transport.stdio.StdioLink`
on its pipes); a remote plugin is one connection (:class:`RemoteInstance`: the
``RemoteLink`` of hostd/mcp/transport/http.py, loaded only when a remote plugin starts, and
nothing else to stop). :class:`hostd.plugins.instance.InstanceRunner` drives either
through :class:`Instance` alone: the link, the isolation layers in force, the
resource watch, the stop and the kill.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import trio

from hostd.mcp.link import PluginLink
from sandbox.cgroups import Mechanism
from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess, StopReport
from sandbox.watchdog import LimitHit, cgroup_hit, watch

if TYPE_CHECKING:  # imported by a stdio plugin's start (hostd.plugins.instance), not by a reader of the state folder
    from hostd.mcp.transport.stdio import StdioLink


class Instance(Protocol):
    """One running server as the supervisor drives it, from its start to its stop."""

    @property
    def link(self) -> PluginLink:
        """The MCP link to the server."""
        ...

    @property
    def isolation(self) -> tuple[str, ...]:
        """The isolation layers in force (what the shim reported; none for a connection)."""
        ...

    @property
    def accounting(self) -> Mechanism | None:
        """How the kernel or the watchdog accounts the instance (:mod:`sandbox.cgroups`); None for a connection."""
        ...

    async def watch(self, limits: IsolationPolicy, disk_paths: tuple[str, ...]) -> LimitHit:
        """Return once the instance exceeds ``limits`` (RSS, CPU, the disk of ``disk_paths``)."""
        ...

    def kernel_hit(self) -> LimitHit | None:
        """The limit the kernel enforced on the instance so far (an OOM kill, a refused fork), or None.

        Read when the instance ended by itself: a tree the kernel killed for its memory bound is reported
        with that limit, not as a crash. Blocking (a few small reads)."""
        ...

    async def stop(self, grace: float) -> StopReport:
        """End the instance (idempotent, shielded); ``grace`` in seconds."""
        ...

    def kill_now(self) -> None:
        """Skip what remains of a stop's grace."""
        ...


class ProcessInstance:
    """A stdio plugin: its sandboxed process tree and the link on its pipes."""

    def __init__(
        self, process: SandboxedProcess, link: StdioLink, proxy: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.process = process
        self._link = link
        #: The plugin's network proxy (``netproxy`` layer, issue 26): run from before the handshake to the stop.
        self.proxy = proxy

    @property
    def link(self) -> PluginLink:
        """The :class:`~hostd.mcp.transport.stdio.StdioLink` on the process's pipes."""
        return self._link

    @property
    def isolation(self) -> tuple[str, ...]:
        """The isolation layers the shim reported in force."""
        return self.process.isolation

    @property
    def accounting(self) -> Mechanism | None:
        """The mechanism in force for the tree (:attr:`sandbox.process.SandboxedProcess.accounting`)."""
        return self.process.accounting

    async def watch(self, limits: IsolationPolicy, disk_paths: tuple[str, ...]) -> LimitHit:
        """The resource watchdog on the process tree (:func:`sandbox.watchdog.watch`)."""
        return await watch(self.process, limits, disk_paths=disk_paths)

    def kernel_hit(self) -> LimitHit | None:
        """The tree's cgroup counters as a limit hit (:func:`sandbox.watchdog.cgroup_hit`); None without a cgroup."""
        cgroup = self.process.cgroup
        return None if cgroup is None or cgroup.removed else cgroup_hit(cgroup.figures())

    async def stop(self, grace: float) -> StopReport:
        """End the whole tree (:meth:`sandbox.process.SandboxedProcess.stop`)."""
        return await self.process.stop(grace=grace)

    def kill_now(self) -> None:
        """Kill the tree now (:meth:`sandbox.process.SandboxedProcess.kill_now`)."""
        self.process.kill_now()


class RemoteInstance:
    """A remote plugin: one connection (its link, ``RemoteLink``); nothing runs here to watch or kill."""

    def __init__(self, link: PluginLink) -> None:
        self._link = link

    @property
    def link(self) -> PluginLink:
        """The ``RemoteLink`` (hostd/mcp/transport/http.py)."""
        return self._link

    @property
    def isolation(self) -> tuple[str, ...]:
        """None: no local process."""
        return ()

    @property
    def accounting(self) -> Mechanism | None:
        """None: no local process."""
        return None

    def kernel_hit(self) -> LimitHit | None:
        """None: no local process."""
        return None

    async def watch(self, limits: IsolationPolicy, disk_paths: tuple[str, ...]) -> LimitHit:
        """Never returns: no local process to exceed a limit."""
        del limits, disk_paths
        await trio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def stop(self, grace: float) -> StopReport:
        """Nothing to end (the link closes the HTTP client itself); ``step`` is ``disconnected``."""
        del grace
        return StopReport("disconnected", 0, 0.0)

    def kill_now(self) -> None:
        """Nothing to kill."""
