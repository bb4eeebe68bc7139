"""hostd's proxy for one installer run (issue 26): the registries in use its whole allowlist.

Loaded only when an installer runs (:func:`hostd.install.installers._run`), with :mod:`hostd.net.proxy`: a hostd
that only reads never loads either. What the allowlist holds and why: :mod:`hostd.install.installer_network`.
"""

from __future__ import annotations

import trio

from hostd.install.installer_network import InstallerNetwork, RegistryHosts
from hostd.net.allowlist import EntryError, canonical_host, host_port
from hostd.net.proxy import Decision, PluginProxy, ProxyLimits, Refused

__all__ = ["INSTALLER_LIMITS", "RegistryProxy"]

#: The proxy's bounds for an installer run: a plugin's defaults (:class:`~hostd.net.proxy.ProxyLimits`) but 64 MiB/s
#: instead of 8: downloading from the registry is the run's purpose (a 700 MB wheel would take 90 s at 8 MiB/s),
#: and the run is bounded in time and disk already (hostd/install/installers.py).
INSTALLER_LIMITS = ProxyLimits(bytes_per_second=64 * 1024 * 1024)


class RegistryProxy(PluginProxy):
    """hostd's proxy for one installer run: :class:`~hostd.net.proxy.PluginProxy` with ``hosts`` as its whole
    allowlist (no parent to ask), a refusal that names the registries in use instead of a grant, and a count of
    the connections it lets through (``network.reached``)."""

    def __init__(self, plugin: str, hosts: RegistryHosts, network: InstallerNetwork, nursery: trio.Nursery) -> None:
        super().__init__(
            plugin,
            hosts.allowlist(),
            limits=INSTALLER_LIMITS,
            on_refused=lambda record: network.record(record, nursery),
        )
        self.hosts = hosts
        self.network = network

    async def decide(self, host: str, port: int) -> Decision:
        """:meth:`PluginProxy.decide`, where a well-formed host outside the registries is refused (``403``) as
        ``"HOST:PORT is not one of the registries in use (...)"``; raises :class:`~hostd.net.proxy.Refused`."""
        try:
            name, _address = canonical_host(host)
            listed = self.allowlist.match(host, port) is not None
        except EntryError:
            listed = True  # the proxy's own refusal names what is malformed
            name = host
        if not listed:
            shown = host_port(name, port)
            raise Refused(403, f"{shown} is not one of the registries in use ({self.hosts.shown()})")
        decision = await super().decide(host, port)
        where = host_port(decision.host, port)
        self.network.reached[where] = self.network.reached.get(where, 0) + 1
        return decision
