"""Remote manifests: transport fields, where hostd's requests may go, what the digest covers, import (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from hostd.install.importer import plan_import
from hostd.install.manifest import ManifestError, load_manifest
from hostd.remote.endpoint import address_problem, resolve_headers, url_problem


def write(folder: Path, backend: dict[str, Any], plugin_id: str = "remote") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {
        "id": plugin_id,
        "name": "Remote",
        "version": "1.0.0",
        "permissions": ["remote.use"],
        "contributes": {"tools": [f"{plugin_id}.echo"]},
        "backend": {"type": "mcp", **backend},
    }
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


# -- where a URL may point (the class: a request hostd makes must reach only what the user named) --------------


@pytest.mark.parametrize(
    "url",
    ["https://mcp.example.com/mcp", "http://127.0.0.1:8080/mcp", "http://[::1]:9/mcp", "http://localhost/mcp"],
)
def test_allowed_urls(url: str) -> None:
    assert url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://mcp.example.com/mcp", "must use https"),
        ("http://10.0.0.5/mcp", "must use https"),
        ("ftp://mcp.example.com/mcp", "must be an https URL"),
        ("mcp.example.com/mcp", "must be an absolute https URL"),
        ("https://user:pw@mcp.example.com/mcp", "user name or password"),
        ("https://mcp.example.com/mcp#x", "fragment"),
        ("https:///mcp", "has no host"),
        ("https://mcp.example.com/a b", "spaces or control characters"),
        ("https://mcp.example.com:99999/mcp", "not a valid URL"),
    ],
)
def test_refused_urls(url: str, why: str) -> None:
    problem = url_problem(url)
    assert problem is not None and why in problem


@pytest.mark.parametrize(
    ("host", "addresses", "kind"),
    [
        ("intranet.example.com", ["10.1.2.3"], "private"),
        ("router.example.com", ["192.168.1.1"], "private"),
        ("vpc.example.com", ["172.16.0.9"], "private"),
        ("metadata.example.com", ["169.254.169.254"], "link-local"),
        ("v6.example.com", ["fe80::1"], "link-local"),
        ("ula.example.com", ["fd00::5"], "private"),
        ("mapped.example.com", ["::ffff:10.0.0.1"], "private"),
        ("rebind.example.com", ["127.0.0.1"], "loopback"),  # a public name that leads to this machine
        ("zero.example.com", ["0.0.0.0"], "unspecified"),
        ("mixed.example.com", ["93.184.216.34", "10.0.0.1"], "private"),  # one bad address is enough
        ("cgnat.example.com", ["100.64.0.1"], "private"),
    ],
)
def test_non_public_addresses_are_refused_unless_named(host: str, addresses: list[str], kind: str) -> None:
    problem = address_problem(host, addresses, [])
    assert problem is not None and f"the {kind} address" in problem and "backend.allow_private" in problem
    assert address_problem(host, addresses, [host.upper()]) is None


def test_public_and_literal_loopback_addresses_pass() -> None:
    assert address_problem("mcp.example.com", ["93.184.216.34", "2606:2800:220:1::1"], []) is None
    assert address_problem("127.0.0.1", ["127.0.0.1"], []) is None
    assert address_problem("localhost", ["127.0.0.1", "::1"], []) is None
    assert address_problem("localhost", ["10.0.0.1"], []) is not None  # a loopback name leading elsewhere


# -- the manifest ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ({"transport": "streamable-http"}, "transport 'streamable-http' needs 'url'"),
        ({"transport": "stdio", "command": "x", "url": "https://a.example/mcp"}, "does not use 'url'"),
        ({"transport": "stdio", "command": "x", "headers": {"A": "b"}}, "does not use 'headers'"),
        ({"transport": "stdio", "command": "x", "oauth": {"client_id": "c"}}, "does not use 'oauth'"),
        (
            {"transport": "sse", "url": "https://a.example/mcp", "oauth": {"client_secret": "plain"}},
            "must be a secret reference",
        ),
        ({"transport": "stdio"}, "required field is missing"),
        ({"transport": "sse", "url": "https://a.example/mcp", "command": "x"}, "does not use 'command'"),
        ({"transport": "sse", "url": "https://a.example/mcp", "env": {"A": "b"}}, "does not use 'env'"),
        ({"transport": "streamable-http", "url": "http://a.example/mcp"}, "must use https"),
        ({"transport": "streamable-http", "url": "https://a.example/mcp", "protocol": "newest"}, "Input should be"),
    ],
)
def test_fields_that_do_not_fit_the_transport_are_refused(
    tmp_path: Path, backend: dict[str, Any], message: str
) -> None:
    with pytest.raises(ManifestError) as refused:
        load_manifest(write(tmp_path / "p", backend))
    assert any(message in e["message"] for e in refused.value.data["errors"]), refused.value.data["errors"]


def test_a_header_name_must_be_a_token(tmp_path: Path) -> None:
    backend = {"transport": "streamable-http", "url": "https://a.example/mcp", "headers": {"Bad Name": "x"}}
    with pytest.raises(ManifestError) as refused:
        load_manifest(write(tmp_path / "p", backend))
    assert refused.value.data["errors"][0]["field"] == "backend.headers.Bad Name"
    assert "HTTP header name" in refused.value.data["errors"][0]["message"]


def test_secret_references_resolve_through_the_lookup_given() -> None:
    store = {("p", "TOKEN"): "s3cr3t-value", ("other", "KEY"): "not-for-p"}

    def lookup(plugin: str, name: str) -> str | None:
        return store.get((plugin, name))

    headers, secrets = resolve_headers("p", {"Authorization": "Bearer ${secret:TOKEN}", "X-Version": "2"}, lookup)
    assert headers == {"Authorization": "Bearer s3cr3t-value", "X-Version": "2"}
    assert secrets == ["s3cr3t-value"]
    with pytest.raises(LookupError, match="no secret named 'MISSING'"):
        resolve_headers("p", {"X-Key": "${secret:MISSING}"}, lookup)
    with pytest.raises(LookupError, match="no secret named 'KEY'"):
        resolve_headers("p", {"X-Key": "${secret:KEY}"}, lookup)  # another plugin's secret is not this one's


# -- the trust gate: the digest covers the URL, the header names, the private hosts --------------------------------


async def test_the_launch_digest_covers_the_endpoint(hostd: HostdClient, tmp_path: Path) -> None:
    base = {"transport": "streamable-http", "url": "https://mcp.example.com/mcp"}
    variants: dict[str, dict[str, Any]] = {
        "base": base,
        "url": {**base, "url": "https://mcp.example.com/other"},
        "header": {**base, "headers": {"X-Key": "${secret:KEY}"}},
        "private": {**base, "allow_private": ["mcp.example.com"]},
        "transport": {**base, "transport": "sse"},
        "protocol": {**base, "protocol": "legacy"},
        "client": {**base, "oauth": {"client_id": "hostd-desktop"}},
        "scope": {**base, "oauth": {"client_id": "hostd-desktop", "scope": "mcp"}},
    }
    digests: dict[str, str] = {}
    for name, backend in variants.items():
        info = await hostd.request("plugins/install", {"path": str(write(tmp_path / name, backend, f"r-{name}"))})
        digests[name] = info["launch"]["launchDigest"]
        if name == "header":
            assert info["launch"]["remote"]["headers"] == {"X-Key": None}  # a secret reference: never shown
            assert info["launch"]["command"] == "streamable-http"
            assert info["launch"]["executable"] == "https://mcp.example.com/mcp"
    assert len(set(digests.values())) == len(variants), digests

    # Changing the URL after approval voids the approval.
    folder = tmp_path / "base"
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/approve", {"id": "r-base", "digest": info["launch"]["digest"]})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    assert info["launch"]["approved"] is True
    write(folder, {**base, "url": "https://elsewhere.example.com/mcp"}, "r-base")
    info = await hostd.request("plugins/install", {"path": str(folder)})
    assert info["launch"]["approved"] is False
    assert info["launch"]["remote"]["url"] == "https://elsewhere.example.com/mcp"


async def test_header_values_that_look_secret_are_never_shown(hostd: HostdClient, tmp_path: Path) -> None:
    headers = {
        "Authorization": "Bearer literal-token-123456",
        "X-Api-Key": "literal-key-654321",
        "Cookie": "session=literal-cookie-999",
        "X-Client": "hostd-test",
    }
    backend = {"transport": "streamable-http", "url": "https://mcp.example.com/mcp", "headers": headers}
    info = await hostd.request("plugins/install", {"path": str(write(tmp_path / "h", backend))})
    assert info["launch"]["remote"]["headers"] == {
        "Authorization": None,
        "Cookie": None,
        "X-Api-Key": None,
        "X-Client": "hostd-test",
    }
    shown = json.dumps(
        [info, await hostd.request("plugins/list"), await hostd.request("plugins/status", {"id": "remote"})]
    )
    for value in ("literal-token-123456", "literal-key-654321", "literal-cookie-999"):
        assert value not in shown


async def test_a_private_address_is_refused_before_any_request(hostd: HostdClient, tmp_path: Path) -> None:
    for name, url in (("private", "https://10.255.255.1/mcp"), ("metadata", "https://169.254.169.254/mcp")):
        folder = write(tmp_path / name, {"transport": "streamable-http", "url": url}, name)
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": name, "permissions": ["remote.use"]})
        await hostd.request("plugins/approve", {"id": name, "digest": info["launch"]["digest"]})
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": name})
        assert refused.value.kind == "PLUGIN_START_FAILED"
        assert "backend.allow_private" in refused.value.data["reason"], refused.value.data


async def test_an_unknown_secret_fails_the_start_by_name(hostd: HostdClient, tmp_path: Path) -> None:
    backend = {"transport": "streamable-http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "${secret:NOPE}"}}
    info = await hostd.request("plugins/install", {"path": str(write(tmp_path / "s", backend))})
    await hostd.request("plugins/grant", {"id": "remote", "permissions": ["remote.use"]})
    await hostd.request("plugins/approve", {"id": "remote", "digest": info["launch"]["digest"]})
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/enable", {"id": "remote"})
    assert refused.value.kind == "PLUGIN_START_FAILED"
    assert "no secret named 'NOPE'" in refused.value.data["reason"]


# -- import ------------------------------------------------------------------------------------------------------


def test_import_turns_url_entries_into_remote_plugins_without_copying_credentials() -> None:
    config = {
        "mcpServers": {
            "Weather": {"url": "https://weather.example.com/mcp", "headers": {"Authorization": "Bearer abc123456"}},
            "legacy": {"type": "sse", "url": "https://old.example.com/sse", "headers": {"X-Client": "hostd"}},
            "vscode": {"type": "http", "url": "https://v.example.com/mcp", "headers": {"X-Thing": "Bearer zzz999"}},
            "plain": {"url": "http://weather.example.com/mcp"},
            "nourl": {"type": "http"},
        }
    }
    entries = plan_import(config)
    assert [(e.name, e.outcome, e.plugin_id) for e in entries] == [
        ("Weather", "ready-to-install", "weather"),
        ("legacy", "ready-to-install", "legacy"),
        ("vscode", "ready-to-install", "vscode"),
        ("plain", "invalid", None),
        ("nourl", "invalid", None),
    ]
    weather = entries[0].manifest
    assert weather is not None
    assert weather["backend"] == {
        "type": "mcp",
        "transport": "streamable-http",
        "url": "https://weather.example.com/mcp",
        "startup_timeout_seconds": 120,
        "tool_timeout_seconds": 60,
        "headers": {"Authorization": "${secret:WEATHER_AUTHORIZATION}"},
    }
    assert "abc123456" not in repr(entries[0].manifest) + repr(entries[0].notes)
    assert entries[1].manifest is not None and entries[1].manifest["backend"]["transport"] == "sse"
    assert entries[1].manifest["backend"]["headers"] == {"X-Client": "hostd"}
    assert entries[2].manifest is not None
    assert entries[2].manifest["backend"]["headers"] == {"X-Thing": "${secret:VSCODE_X_THING}"}
    assert entries[3].message is not None and "must use https" in entries[3].message
    assert entries[4].message == '"url" must be a string'


@pytest.mark.parametrize(
    "backend",
    [
        {"transport": "stdio", "command": "python3", "args": ["server.py"]},
        {"transport": "streamable-http", "url": "https://a.example/mcp", "headers": {"X-Key": "${secret:K}"}},
        {"transport": "sse", "url": "http://127.0.0.1:9/sse", "allow_private": ["127.0.0.1"]},
    ],
)
def test_a_manifest_written_back_with_its_defaults_still_loads(tmp_path: Path, backend: dict[str, Any]) -> None:
    # The host writes imported manifests back with every default (model_dump): an empty 'headers' on a
    # stdio plugin, or empty 'args' on a remote one, must not count as a field the transport refuses.
    manifest, _ = load_manifest(write(tmp_path / "first", backend))
    document = manifest.model_dump(mode="json", exclude_none=True)
    assert document["backend"]["args"] == [] or document["backend"]["headers"] == {}
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "plugin.yaml").write_text(yaml.safe_dump(document))
    again, _ = load_manifest(tmp_path / "again")
    assert again == manifest


async def test_plugins_configure_sets_the_secrets_a_remote_backend_refers_to(
    hostd: HostdClient, tmp_path: Path
) -> None:
    # Bug class: a place of the manifest that may hold ${secret:NAME} missing from the names plugins/configure
    # accepts (it knew args and env only): a header's or the OAuth client's secret could not be set at all.
    backend = {
        "transport": "streamable-http",
        "url": "https://mcp.example.com/mcp",
        "headers": {"X-Key": "${secret:KEY}", "Authorization": "Bearer ${secret:TOKEN}"},
        "oauth": {"client_id": "hostd-desktop", "client_secret": "${secret:CLIENT_SECRET}"},
    }
    write(tmp_path / "r", backend, "r-secrets")
    info = await hostd.request("plugins/install", {"path": str(tmp_path / "r")})
    listed = {item["name"]: item["set"] for item in info["userConfig"]}
    assert listed == {"CLIENT_SECRET": False, "KEY": False, "TOKEN": False}
    values = {"KEY": "k-value", "TOKEN": "t-value", "CLIENT_SECRET": "c-value"}
    info = await hostd.request("plugins/configure", {"id": "r-secrets", "values": values})
    assert {item["name"]: item["set"] for item in info["userConfig"]} == dict.fromkeys(listed, True)
    assert "k-value" not in json.dumps(info) and "c-value" not in json.dumps(info)
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/configure", {"id": "r-secrets", "values": {"OTHER": "x"}})
    assert refused.value.kind == "INVALID_PARAMS"
    assert [error["field"] for error in refused.value.data["errors"]] == ["OTHER"]
