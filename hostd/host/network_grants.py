"""Call-time network consent (issue 26): a destination a plugin's allowlist does not name is asked of the parent.

A plugin with an allowlist reaches the network only through hostd's proxy (:mod:`hostd.net.proxy`). When its
proxy meets a host and port no entry allows, the plugin's connection waits while :func:`decide` answers, once
per destination for the life of that proxy:

- a destination the parent let through for good before (``always``, recorded as ``networkCallHosts``) is let
  through without asking;
- a parent that declared ``capabilities.network`` at ``initialize`` is asked ``network/request {plugin, host,
  port, reason}`` and answers ``no``, ``once`` (while the plugin runs) or ``always`` (recorded first, in the
  state document; not part of the approved launch, like a call-time file grant);
- otherwise (no such capability, an error, silence for :data:`hostd.host.call_grants.CONSENT_TIMEOUT` seconds)
  the destination is refused as before.

The proxy still applies every other rule to a destination let through: a name resolving to a loopback or
private address is refused unless the allowlist names it in ``network.private``.

**Live changes** (:func:`apply_live`): a grant or revoke of network hosts (``plugins/grant networkHosts`` or
``networkCallHosts``, which ``hostctl grant --host/--revoke-host`` sends) reaches the running plugin's proxy at
once: new connections follow the new allowlist, and an open connection it no longer allows is closed. The
approval digest still covers ``networkHosts`` (a granted host is approved again before the next start).
"""

from __future__ import annotations

from typing import Any, Protocol

from hostd.control import models as p
from hostd.control.core import InitializeOptions
from hostd.host.call_grants import CONSENT_TIMEOUT
from hostd.host.launch import allowlist
from hostd.host.records import InstalledPlugin
from hostd.net.allowlist import Allowlist, EntryError, address_kind, canonical_host, host_port, parse_entry
from hostd.wire.errors import HostError

__all__ = ["NetworkGrantHost", "apply_live", "decide", "destination"]


class NetworkGrantHost(Protocol):
    """What :func:`decide` needs of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def options(self) -> InitializeOptions: ...

    def change(self) -> Any:
        """Apply the body's changes to memory and the state document together, or to neither."""
        ...


def destination(host: str, port: int) -> str:
    """The canonical ``host:port`` entry of a destination (an IPv6 address in brackets)."""
    return parse_entry(host_port(host, port)).text


async def decide(host: NetworkGrantHost, plugin: InstalledPlugin, name: str, port: int) -> str:
    """The answer for ``plugin``'s proxy about ``name:port``: ``always`` (recorded), ``once``, ``no``, or
    ``unanswered`` (nobody to ask, an error, silence: refused). See the module text. Never raises but a
    cancellation; an ``always`` whose recording fails counts as ``once``."""
    try:
        entry = destination(name, port)
    except EntryError:
        return "unanswered"
    if entry in plugin.network_call_hosts:
        return "always"
    request_parent = host.options.request_parent
    if "network" not in host.options.client_capabilities or request_parent is None:
        return "unanswered"
    plugin_id = plugin.manifest.id
    # The class: a question whose "yes" means more than it says. A yes to an IP literal reaches that address,
    # this machine's loopback included (a name is checked again after the answer: addresses_problem), so the
    # question names a non-public address's kind, in the sentence and as a field a parent can show.
    kind = address_kind(name) if canonical_host(name)[1] is not None else None
    shown = f"{entry} (a {kind} address{': this machine' if kind == 'loopback' else ''})" if kind else entry
    params = p.NetworkRequestParams(
        plugin=plugin_id,
        host=name,
        port=port,
        reason=f"plugin {plugin_id} asks to connect to {shown}, which its network allowlist does not name",
        addressKind=kind,
    )
    try:
        answer = p.NetworkAnswer.model_validate(
            await request_parent("network/request", params.wire(), CONSENT_TIMEOUT)
        ).grant
    except (HostError, ValueError):
        return "unanswered"
    if answer == "always":
        try:
            async with host.change():
                plugin.network_call_hosts = sorted({*plugin.network_call_hosts, entry})
        except HostError:
            return "once"
    return answer


def apply_live(plugin: InstalledPlugin) -> None:
    """Hand ``plugin``'s allowlist as it is now (the manifest's ``network``, ``networkHosts``; ``networkCallHosts``
    as the parent's lasting answers) to its running proxy, if one runs (module text). A plugin whose grants were
    all revoked and that has no ``network`` field keeps its proxy with an empty allowlist until it stops (its next
    start has the level's network, as before issue 26). Never blocks, never raises."""
    hosts, private = allowlist(plugin) or ([], [])
    plugin.supervisor.apply_network(Allowlist.parse(hosts, private), list(plugin.network_call_hosts))
