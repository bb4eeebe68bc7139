"""The control channel's method router: one explicit table from a request's method to who serves it.

A request's method is looked up, never inferred: ``METHOD_NOT_FOUND`` is the answer exactly when the method is
in no table, decided before anything runs. (Before, the host's ``handle`` raised ``KeyError(method)`` and the
channel read a ``KeyError`` whose one argument equalled the method as "no such method": a handler's own
``KeyError`` of the same value would have been answered ``METHOD_NOT_FOUND`` instead of ``INTERNAL_ERROR``.)

Two tables make the route: :data:`CONTROL_ROUTES`, the methods the channel serves itself (``initialize``,
``ping``, ``shutdown`` on the stdin reader; ``rpc.discover`` on a request worker), and the host's method table
(``hostd.host.service.Host.METHODS``), known once the host is built. A host table naming a control method is
refused (``ValueError``): the channel's own methods are not the host's to redefine. No I/O, no trio.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Route(enum.Enum):
    """Who serves a method."""

    #: the channel, on the stdin reader, before the host exists
    INITIALIZE = "initialize"
    PING = "ping"
    SHUTDOWN = "shutdown"
    #: the channel, on a request worker: the OpenRPC document (:mod:`hostd.control.openrpc`)
    DISCOVER = "rpc.discover"
    #: the host's ``handle``
    HOST = "host"


#: The methods the control channel serves itself.
CONTROL_ROUTES: dict[str, Route] = {
    "initialize": Route.INITIALIZE,
    "ping": Route.PING,
    "shutdown": Route.SHUTDOWN,
    "rpc.discover": Route.DISCOVER,
}


class MethodRouter:
    """The method table of one control channel: :data:`CONTROL_ROUTES` plus the host's methods.

    ``host_methods``: the names the host serves (its ``METHODS`` keys); empty until the host is built.
    Raises ``ValueError`` when one of them is a control method.
    """

    def __init__(self, host_methods: Iterable[str] = ()) -> None:
        table = dict(CONTROL_ROUTES)
        for method in host_methods:
            if method in CONTROL_ROUTES:
                raise ValueError(f"the host cannot serve {method!r}: the control channel serves it")
            table[method] = Route.HOST
        self._table = table

    def route(self, method: str) -> Route | None:
        """Who serves ``method``; ``None``: no one (the request is answered ``METHOD_NOT_FOUND``)."""
        return self._table.get(method)

    def methods(self) -> frozenset[str]:
        """Every method routed."""
        return frozenset(self._table)


__all__ = ["CONTROL_ROUTES", "MethodRouter", "Route"]
