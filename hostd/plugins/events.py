"""What a supervisor tells its host: typed events (through the one ``on_event`` coroutine), and the
shapes of the callbacks it is given. The host handles them (``hostd/host/service.py``); the
supervisor (:mod:`hostd.plugins.supervisor`) and its running instance (:mod:`hostd.plugins.instance`)
emit them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hostd.plugins import trust

__all__ = [
    "NetworkRequested",
    "Notify",
    "OnEvent",
    "ProgressSink",
    "RestartCounted",
    "RetryDue",
    "SupervisorEvent",
    "ToolsPinned",
]


@dataclass(frozen=True)
class RestartCounted:
    """The restart count went up (``restarts``): a statistic the host saves best-effort."""

    plugin_id: str
    restarts: int


@dataclass(frozen=True)
class ToolsPinned:
    """The first discovery after an approval pinned ``pins`` (remote name -> digest).

    The host records them before the tools are served; raising ``HostError``
    (``STATE_WRITE_FAILED``) from the handler fails the start with nothing pinned.
    """

    plugin_id: str
    pins: trust.Pins


@dataclass(frozen=True)
class RetryDue:
    """The restart timer fired. The host answers with :meth:`hostd.plugins.supervisor.PluginSupervisor.retry`
    (a :class:`hostd.plugins.supervisor.Start`, or the ``HostError`` its trust gate raised), from the handler."""

    plugin_id: str


@dataclass(frozen=True)
class NetworkRequested:
    """The plugin's proxy met a destination its allowlist does not name (issue 26). The host appends the
    parent's answer (``no``, ``once``, ``always``; anything else: nobody to ask) to ``reply`` from the handler,
    recording an ``always`` first."""

    plugin_id: str
    host: str
    port: int
    reply: list[str]


#: Everything a supervisor tells its host, other than notifications to the parent.
SupervisorEvent = RestartCounted | ToolsPinned | RetryDue | NetworkRequested
OnEvent = Callable[[SupervisorEvent], Awaitable[None]]

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]
