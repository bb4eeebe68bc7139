"""The network allowlist (issue 26) where a plugin comes from a format without the field: an MCPB bundle's
``_meta["dev.hostd/network"]`` and a registry entry's ``_meta["io.modelcontextprotocol.registry/publisher-provided"]
["dev.hostd/network"]`` (hostd/install/network_field.py).

The class: *an allowlist member from a stranger's document that reaches the approval unchecked, in another
spelling, or not at all*. Members: entries outside the grammar (a one-label wildcard, a short IPv4 form, a URL, a
space in a name), a member of the wrong type (a string for the list), an unknown key; each refused with the
manifest field's own message, naming the source document's field, every error reported at once. A valid value
reaches ``launch.network`` canonically and changes the approval digest; a registry remote's allowlist starts with
its URL's host. Real bundle files, read and extracted as ``plugins/install`` does, and real server.json entries.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from hostd.install import bundle, serverjson
from hostd.wire.errors import ErrorKind, HostError
from tests.conftest import ECHO, ready, spawn_hostd
from tests.test_remote import remote_plugin, remote_server
from tests.test_remote_oauth import Browser, approve, oauth_server

KEY = "dev.hostd/network"
PUBLISHER = "io.modelcontextprotocol.registry/publisher-provided"
#: Three bad entries, one bad private entry and an unknown key: the messages the manifest field gives them.
HOSTILE = {"hosts": ["api.example.com", "*.com", "127.1", "https://x.org/"], "private": ["a b"], "proxy": "x"}


def expected(where: str) -> list[dict[str, str]]:
    return [
        {
            "field": f"{where}.hosts.1",
            "message": "'*.com': a wildcard's domain needs two labels at least (e.g. '*.example.com')",
        },
        {
            "field": f"{where}.hosts.2",
            "message": "'127.1': a name ending in a number is an IPv4 address to resolvers; write the address as "
            "four decimal parts (e.g. 127.0.0.1)",
        },
        {
            "field": f"{where}.hosts.3",
            "message": "'https://x.org/': an entry is a host and an optional port, not a URL",
        },
        {
            "field": f"{where}.private.0",
            "message": "'a b': a host must be a name or an address, without spaces or control characters",
        },
        {"field": f"{where}.proxy", "message": "unknown field 'proxy'"},
    ]


def echo_bundle(path: Path, meta: dict[str, Any] | None) -> Path:
    """The echo fixture as an MCPB 0.3 bundle (``echo-net``), with ``meta`` as its ``_meta``."""
    manifest: dict[str, Any] = {
        "manifest_version": "0.3",
        "name": "echo-net",
        "version": "1.0.0",
        "description": "The echo fixture.",
        "author": {"name": "hostd tests"},
        "server": {
            "type": "python",
            "entry_point": "server/server.py",
            "mcp_config": {"command": "python3", "args": ["${__dirname}/server/server.py"]},
        },
        "tools_generated": True,
        **({"_meta": meta} if meta is not None else {}),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("server/server.py", (ECHO / "server.py").read_bytes())
    return path


async def test_a_bundle_carries_its_allowlist_into_the_approval(tmp_path: Path) -> None:
    plain = echo_bundle(tmp_path / "plain.mcpb", None)
    listed = echo_bundle(
        tmp_path / "listed.mcpb",
        {KEY: {"hosts": ["API.Example.com.", "*.pypi.org:443"], "private": ["vault.test"]}, "com.example": {}},
    )
    async with spawn_hostd(tmp_path) as hostd:
        before = await hostd.request("plugins/install", {"path": str(plain)})
        info = await hostd.request("plugins/install", {"path": str(listed)})
    assert "network" not in before["launch"]
    assert info["launch"]["network"] == {"hosts": ["*.pypi.org:443", "api.example.com"], "private": ["vault.test"]}
    assert info["launch"]["capabilities"]["network"]["hosts"] == ["*.pypi.org:443", "api.example.com"]
    assert info["launch"]["digest"] != before["launch"]["digest"]


def test_a_bundles_malformed_allowlist_is_refused_member_by_member(tmp_path: Path) -> None:
    for meta, errors in (
        ({KEY: HOSTILE}, expected(f"_meta.{KEY}")),
        (
            {KEY: {"hosts": "api.example.com"}},
            [{"field": f"_meta.{KEY}.hosts", "message": "Input should be a valid list"}],
        ),
    ):
        path = echo_bundle(tmp_path / "bad.mcpb", meta)
        with pytest.raises(HostError) as refused:
            bundle.install_bundle(bundle.read_bundle(path), tmp_path / "bundles")
        assert refused.value.kind is ErrorKind.PACKAGE_INVALID
        assert refused.value.data["errors"] == errors
        assert refused.value.message.startswith(f"invalid bundle manifest.json: {errors[0]['field']}: ")
    assert not (tmp_path / "bundles" / "echo-net").exists()
    wrong_type = echo_bundle(tmp_path / "wrong.mcpb", {KEY: ["api.example.com"]})  # MCPB: _meta values are objects
    with pytest.raises(HostError) as refused:
        bundle.install_bundle(bundle.read_bundle(wrong_type), tmp_path / "bundles")
    assert refused.value.data["errors"] == [{"field": f"_meta.{KEY}", "message": "Input should be a valid dictionary"}]


def entry(meta: Any = None, **fields: Any) -> dict[str, Any]:
    """A server.json entry for the pinned mcp-server-time package, with ``meta`` as its ``_meta``."""
    return {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.example/time",
        "description": "Time.",
        "version": "1.0.0",
        "packages": [
            {
                "registryType": "pypi",
                "identifier": "mcp-server-time",
                "version": "1.0.0",
                "transport": {"type": "stdio"},
            }
        ],
        **({"_meta": meta} if meta is not None else {}),
        **fields,
    }


async def test_a_registry_entry_carries_its_allowlist_into_the_approval(tmp_path: Path) -> None:
    network = {"hosts": ["WorldTimeAPI.org", "[::1]:8200"]}
    async with spawn_hostd(tmp_path) as hostd:
        before = await hostd.request("plugins/install", {"serverJson": entry()})
        info = await hostd.request("plugins/install", {"serverJson": entry({PUBLISHER: {KEY: network}})})
    assert "network" not in before["launch"]
    assert info["launch"]["network"] == {"hosts": ["[::1]:8200", "worldtimeapi.org"], "private": []}
    assert info["launch"]["digest"] != before["launch"]["digest"]
    # Only the publisher's own key is read: another extension's key of the same name names nothing.
    assert "network" not in serverjson.plan(entry({"com.example/other": {KEY: network}})).manifest  # type: ignore[operator]


def test_a_registry_entrys_malformed_allowlist_is_refused_member_by_member() -> None:
    where = f"_meta.{PUBLISHER}.{KEY}"
    remote = {"type": "streamable-http", "url": "https://mcp.example.com/mcp"}
    for document in (
        entry({PUBLISHER: {KEY: HOSTILE}}),
        entry({PUBLISHER: {KEY: HOSTILE}}, packages=[], remotes=[remote]),
    ):
        with pytest.raises(HostError) as refused:
            serverjson.plan(document)
        assert refused.value.kind is ErrorKind.PACKAGE_INVALID
        assert refused.value.data["errors"] == expected(where)
    with pytest.raises(HostError) as refused:
        serverjson.plan(entry({PUBLISHER: {KEY: "api.example.com"}}))
    assert refused.value.data["errors"] == [
        {"field": where, "message": "Input should be a valid dictionary or instance of NetworkNeeds"}
    ]


def test_a_registry_remotes_allowlist_starts_with_its_own_host() -> None:
    remote = {"type": "streamable-http", "url": "https://MCP.example.com/mcp"}
    plain = serverjson.plan(entry(packages=[], remotes=[remote]))
    assert plain.manifest is not None and plain.manifest["network"] == {"hosts": ["mcp.example.com:443"]}
    named = {"hosts": ["mcp.example.com:443", "auth.example.com"], "private": []}
    listed = serverjson.plan(entry({PUBLISHER: {KEY: named}}, packages=[], remotes=[remote]))
    assert listed.manifest is not None
    assert listed.manifest["network"] == {"hosts": ["mcp.example.com:443", "auth.example.com"], "private": []}


def with_network(folder: Path, network: dict[str, Any]) -> Path:
    """``folder``'s plugin.yaml with ``network`` added."""
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = network
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def test_a_remotes_allowlist_holds_every_request_hostd_makes_for_it(hostd: HostdClient, tmp_path: Path) -> None:
    """A remote server's allowlist is what hostd itself may reach for it: its own endpoint always, and the hosts
    named. Shown (``launch.network``, ``capabilities.network``) and covered by the digest; a host the server
    names that the allowlist does not (here the authorization server its resource metadata names) is refused
    before any lookup, with the reason, and the parent is never asked to authorize."""
    async with remote_server("streamable-http") as port:
        plain = await hostd.request(
            "plugins/install", {"path": str(remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp"))}
        )
        folder = with_network(remote_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp", "listed"), {"hosts": []})
        status = await ready(hostd, folder)
        info = (await hostd.request("plugins/list", {}))["plugins"][0]
        assert info["id"] == "listed"
        assert info["launch"]["network"] == {"hosts": [f"127.0.0.1:{port}"], "private": []}
        assert info["launch"]["capabilities"]["network"] == {
            "access": "hosts",
            "tcpPorts": [],
            "hosts": [f"127.0.0.1:{port}"],
            "filtering": "enforced by hostd: every request for this remote server goes to these hosts only",
        }
        assert "network" not in plain["launch"] and plain["launch"]["capabilities"]["network"]["access"] == "all"
        assert status["status"] == "ready"
        result = await hostd.request("tools/call", {"name": "listed.echo", "arguments": {"text": "hi"}})
        assert result["content"] == [{"type": "text", "text": "hi"}]
        await hostd.request("plugins/disable", {"id": "listed"})
    hostd.on_request = Browser(hostd)
    async with oauth_server("--issuer", "https://auth.example.com") as origin:
        folder = with_network(remote_plugin(tmp_path, f"{origin}/mcp", "guarded"), {"hosts": ["api.example.com"]})
        plugin = await approve(hostd, folder)
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/enable", {"id": plugin})
    assert failed.value.kind == "PLUGIN_START_FAILED"
    assert "auth.example.com:443 is not in the remote server's network allowlist (network.hosts)" in str(
        failed.value.message
    )
    assert hostd.requests == []
