"""The network allowlist (issue 26) of a plugin made from a format that has no field for it. Sans-IO.

A hostd manifest names the hosts its server may reach in ``network: {hosts, private}`` (hostd/net/allowlist.py).
The formats a plugin also comes from carry it at their documented extension point, under one key,
:data:`NETWORK_KEY` (``dev.hostd/network``, reverse-DNS as both formats ask), whose value is the manifest's field:

- an MCPB bundle's ``manifest.json`` (0.3 and later): ``_meta`` holds client metadata under reverse-DNS keys,
  each an object (MCPB ``MANIFEST.md``, ``_meta``): ``"_meta": {"dev.hostd/network": {"hosts": [...]}}``;
- an MCP Registry entry (``server.json``): ``_meta`` holds extensions under reverse-DNS keys, and the official
  registry keeps a publisher's own under ``io.modelcontextprotocol.registry/publisher-provided`` only
  (:data:`PUBLISHER_KEY`): ``"_meta": {PUBLISHER_KEY: {"dev.hostd/network": {"hosts": [...]}}}``. It applies to
  every package of the entry; a remote's allowlist is its URL's host and port plus the hosts named here (what
  hostd itself may reach for it: every request hostd makes for a remote with an allowlist, the ones its server
  names included, goes only to its hosts, hostd/mcp/transport/http.py; the endpoint's own host is always among
  them, and the loopback and private-address rules of hostd/remote/connect.py apply as before, issue 29).

Every member is attacker input: the value becomes the generated manifest's ``network`` and is checked exactly as
the manifest field is (the same model, the same messages), each error naming the source document's field
(:func:`field_table`), e.g. ``_meta.dev.hostd/network.hosts.1``. The approval shows it (``launch.network``) and
the digest covers it, as it covers the rest of the generated manifest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from hostd.net.allowlist import host_port

__all__ = ["NETWORK_KEY", "PUBLISHER_KEY", "declared", "field_table", "remote_entry"]

#: The extension key holding hostd's ``network`` field in formats without one (module text).
NETWORK_KEY: Final = "dev.hostd/network"
#: The key of a registry entry's ``_meta`` that holds what its publisher provided (the official registry's rule).
PUBLISHER_KEY: Final = "io.modelcontextprotocol.registry/publisher-provided"


def declared(meta: object, *path: str) -> tuple[Any, str] | None:
    """``(value, its dotted field)`` of ``meta[path...][NETWORK_KEY]`` when the document names one, else None.

    ``meta`` is the document's ``_meta`` (anything: it is attacker input); ``path`` the keys before
    :data:`NETWORK_KEY` (``PUBLISHER_KEY`` for a registry entry). A level that is not an object names nothing
    here (its format's own validation judges it); the value itself is returned as it is, for the manifest model.
    """
    found: object = meta
    for key in (*path, NETWORK_KEY):
        if not isinstance(found, Mapping) or key not in found:
            return None
        found = found[key]
    return found, ".".join(("_meta", *path, NETWORK_KEY))


def field_table(value: object, where: str) -> dict[str, str]:
    """The rows of hostd/install/generated.py's ``source_field`` table for a manifest ``network`` made from
    ``value`` found at ``where``: each ``network.KEY[.N]`` to ``where.KEY[.N]``, ``network`` to ``where``."""
    table = {"network": where}
    if isinstance(value, Mapping):
        for key, items in value.items():
            table[f"network.{key}"] = f"{where}.{key}"
            if isinstance(items, list):
                table.update({f"network.{key}.{i}": f"{where}.{key}.{i}" for i in range(len(items))})
    return table


def remote_entry(url: str) -> str | None:
    """The allowlist entry of a remote server's URL: ``host:port`` (the scheme's port when the URL names none),
    or None for a URL without a host (the remote's own checks refuse it: hostd/remote/endpoint.py)."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme.lower())
    except ValueError:
        return None
    host = parts.hostname
    if not host or port is None:
        return None
    return host_port(host, port)
