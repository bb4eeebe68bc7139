"""A stranger's document ends in that document's named error, with the field, never INTERNAL_ERROR (issue 31).

Class 2: what parsing raises. Depth is bounded before anything recursive
touches a value (the control request's params, a ``serverJson`` string, a
bundle's ``manifest.json``, an imported config, a plugin's result), lone
surrogates are refused where text enters, a NUL where a path enters.

Class 3: converters check their own output. What ``plugins/import`` or a
``server.json`` entry lets through but the manifest refuses is reported against
the entry and field the user wrote (IMPORT_INVALID, PACKAGE_INVALID), and
nothing is written into the state folder; before, the parent got
MANIFEST_INVALID naming a file hostd had generated there.

Every test here fails on the code before issue 31 (INTERNAL_ERROR,
MANIFEST_INVALID, or another field).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from hostd.cli.client import _AwaitedReply as Pending
from tests.conftest import ECHO_TOOLS, MakePlugin, ready
from tests.test_bundle import mcpb_manifest
from tests.test_corpus_framing import HOSTILE

DEEP = 1000  # what the fuzzer found: Python's json and str() recurse past the stack near this depth


def nested(depth: int, leaf: str = '"x"') -> str:
    """JSON text of ``depth`` nested arrays around ``leaf``."""
    return "[" * depth + leaf + "]" * depth


async def raw_request(client: HostdClient, rid: str, text: str) -> Any:
    """Send one request frame written by hand (deeper than orjson can encode); its result or RpcError."""
    pending = client._waiting[rid] = Pending()
    await client.send_raw(text.encode() + b"\n")
    with trio.fail_after(30):
        await pending.done.wait()
    assert pending.reply is not None
    if "error" in pending.reply:
        raise RpcError(pending.reply["error"])
    return pending.reply.get("result")


def entry(**package: Any) -> dict[str, Any]:
    """A registry entry with one npm package (overridden by ``package``)."""
    base = {"registryType": "npm", "identifier": "x", "version": "1.0.0", "transport": {"type": "stdio"}}
    return {
        "name": "io.github.someone/thing",
        "description": "d",
        "version": "1.0.0",
        "packages": [{**base, **package}],
    }


def refusal(error: RpcError) -> tuple[str | None, str]:
    """``(kind, data.errors[0].field)``."""
    return error.kind, error.data["errors"][0]["field"]


# -- class 2: depth, surrogates, NUL -----------------------------------------------------------


async def test_deep_documents_through_the_control_channel(hostd: HostdClient) -> None:
    with trio.fail_after(60):
        # A serverJson string: json.loads recursed (RecursionError, INTERNAL_ERROR).
        with pytest.raises(RpcError) as text:
            await hostd.request("plugins/install", {"serverJson": nested(DEEP)})
        assert refusal(text.value) == ("PACKAGE_INVALID", "")
        assert text.value.message == "serverJson is refused: nested deeper than 64 levels at line 1, column 65"
        # The same as objects in the request: held to the bound before any handler reads them.
        value = nested(DEEP)
        for method, params, pointer in (
            (
                "plugins/install",
                '{"serverJson": {"name": "a", "version": "1", "description": ' + value + "}}",
                "/serverJson/description/",
            ),
            (
                "plugins/import",
                '{"config": {"mcpServers": {"x": {"url": ' + value + "}}}}",
                "/config/mcpServers/x/url/",
            ),
        ):
            frame = '{"jsonrpc": "2.0", "id": "deep", "method": "' + method + '", "params": ' + params + "}"
            with pytest.raises(RpcError) as deep:
                await raw_request(hostd, "deep", frame)
            assert deep.value.kind == "INVALID_PARAMS", method
            assert deep.value.data["pointer"].startswith(pointer + "0/0/0"), method
            assert deep.value.data["pointer"].count("/") == 64  # the first container past the 64th level
        # hostd serves on.
        assert (await hostd.request("plugins/list", {}))["plugins"] == []


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({**entry(), "description": "a\ud800"}, "description"),
        ({**entry(), "title": "\udc00"}, "title"),
        (entry(identifier="x\ud800y"), "packages.0.identifier"),
    ],
)
async def test_a_lone_surrogate_in_a_registry_entry_is_refused_where_it_is(
    hostd: HostdClient, tmp_path: Path, document: dict[str, Any], field: str
) -> None:
    # json.loads accepts "\ud800"; orjson then could not write the manifest (TypeError, INTERNAL_ERROR).
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"serverJson": json.dumps(document)})
    assert refusal(refused.value) == ("PACKAGE_INVALID", field)
    assert "holds a lone surrogate" in refused.value.message
    assert not (tmp_path / "state" / "registry").exists()


def bundle_with(path: Path, manifest_text: str) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", manifest_text)
        archive.writestr("server/index.js", "")
    path.write_bytes(buffer.getvalue())
    return path


async def test_a_bundle_manifest_deep_or_with_a_lone_surrogate_is_package_invalid(
    hostd: HostdClient, tmp_path: Path
) -> None:
    deep = bundle_with(tmp_path / "deep.mcpb", '{"name": "deep", "x": ' + nested(DEEP) + "}")
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"path": str(deep)})
    assert refusal(refused.value) == ("PACKAGE_INVALID", "")
    assert refused.value.message == "manifest.json is refused: nested deeper than 64 levels at line 1, column 86"
    text = json.dumps(mcpb_manifest()).replace('"description": "', '"description": "\\ud800', 1)
    surrogate = bundle_with(tmp_path / "surrogate.mcpb", text)
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"path": str(surrogate)})
    assert refusal(refused.value) == ("PACKAGE_INVALID", "description")
    assert (await hostd.request("plugins/list", {}))["plugins"] == []


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("plugins/install", {"path": "/tmp/a\u0000b"}, "path"),
        ("plugins/install", {"path": "/tmp/a\u0000b.mcpb"}, "path"),
        ("plugins/grant", {"id": "x", "permissions": [], "folders": {"read": ["/tmp\u0000"]}}, "folders.read.0"),
    ],
)
async def test_a_nul_in_a_path_is_invalid_params(hostd: HostdClient, method: str, params: Any, field: str) -> None:
    # os.open raised ValueError("embedded null byte"): INTERNAL_ERROR.
    with pytest.raises(RpcError) as refused:
        await hostd.request(method, params)
    assert refusal(refused.value) == ("INVALID_PARAMS", field)
    assert "must not contain a NUL character" in refused.value.message


async def test_a_deep_result_type_is_an_invalid_result_and_the_plugin_serves_on(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    # str() of resultType ran before the depth check: RecursionError, INTERNAL_ERROR.
    with trio.fail_after(60):
        await ready(hostd, make_plugin("mcp-echo", variant="raw-replies", tools=[*ECHO_TOOLS, "raw"]))
        result = '{"content": [], "resultType": ' + nested(DEEP) + "}"
        with pytest.raises(RpcError) as refused:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.raw", "arguments": {"result": result}})
        assert refused.value.kind == "MCP_UPSTREAM_ERROR"
        assert refused.value.data["pointer"] == "/resultType" + "/0" * 63
        assert "nested deeper than 64 levels" in refused.value.message
        answer = await hostd.request("tools/call", {"name": f"{HOSTILE}.echo", "arguments": {"text": "still here"}})
        assert answer["content"][0]["text"] == "still here"


# -- class 3: converters check their own output ------------------------------------------------


@pytest.mark.parametrize(
    ("server", "field", "words"),
    [
        ({"command": "py\u0000thon"}, "command", "must not contain a NUL character"),
        ({"command": "python3", "args": ["ok", "a\u0000b"]}, "args.1", "must not contain a NUL character"),
        ({"command": "python3", "env": {"A": "a\u0000b"}}, "env.A", "must not contain a NUL character"),
        ({"command": "python3", "env": {"NOT A NAME": "1"}}, "env.NOT A NAME", "must be an environment variable name"),
        ({"url": "https://example.com/mcp", "headers": {"Bad Name": "1"}}, "headers.Bad Name", "HTTP header name"),
        ({"url": "https://example.com/mcp", "headers": {"X-A": "a\u0000"}}, "headers.X-A", "NUL character"),
        ({"command": "python3", "args": ["a" * 1000] * 300}, None, "over the 262144-byte bound of a manifest"),
    ],
)
async def test_an_import_the_manifest_would_refuse_is_import_invalid_naming_the_field(
    hostd: HostdClient, tmp_path: Path, server: dict[str, Any], field: str | None, words: str
) -> None:
    config = {"mcpServers": {"fine": {"command": "python3"}, "bad": server}}
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/import", {"config": config})
    assert refused.value.kind == "IMPORT_INVALID"
    fine, bad = refused.value.data["entries"]
    assert (fine["outcome"], bad["outcome"]) == ("ready-to-install", "invalid")
    assert bad.get("field") == field
    assert words in bad["message"]
    if field is not None:
        assert bad["message"].startswith(f'"{field}" ')
    assert not (tmp_path / "state" / "imported").exists()  # nothing written, nothing to undo
    assert (await hostd.request("plugins/list", {}))["plugins"] == []


@pytest.mark.parametrize(
    ("document", "field", "words"),
    [
        (
            entry(packageArguments=[{"type": "positional", "value": "a\u0000b"}]),
            "packages.0.packageArguments",
            "NUL character",
        ),
        (
            # Refused before conversion by the package spec grammar (issue 23), at the argument itself.
            entry(runtimeArguments=[{"type": "positional", "value": "--x\u0000"}]),
            "packages.0.runtimeArguments.0",
            "not an allowed runtime argument",
        ),
        (
            entry(environmentVariables=[{"name": "OK", "value": "1"}, {"name": "NOT OK", "value": "1"}]),
            "packages.0.environmentVariables.1",
            "environment variable name",
        ),
        (
            entry(environmentVariables=[{"name": "V", "value": "a\u0000"}]),
            "packages.0.environmentVariables.0",
            "NUL character",
        ),
        (
            {**entry(), "packages": [], "remotes": [{"type": "streamable-http", "url": "ftp://example.com/"}]},
            "remotes.0.url",
            "https",
        ),
        (
            {**entry(), "packages": [], "remotes": [{"type": "websocket", "url": "https://example.com/"}]},
            "remotes.0.type",
            "streamable-http",
        ),
        (
            {
                **entry(),
                "packages": [],
                "remotes": [{"type": "sse", "url": "https://e.com/", "headers": [{"name": "A B", "value": "1"}]}],
            },
            "remotes.0.headers.0",
            "HTTP header name",
        ),
    ],
)
async def test_a_registry_entry_the_manifest_would_refuse_is_package_invalid_naming_the_field(
    hostd: HostdClient, tmp_path: Path, document: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"serverJson": document})
    assert refusal(refused.value) == ("PACKAGE_INVALID", field)
    assert words in refused.value.data["errors"][0]["message"]
    assert f"{field}: " in refused.value.message
    assert not (tmp_path / "state" / "registry").exists()


@pytest.mark.parametrize(
    ("mcp_config", "field"),
    [
        ({"command": "node", "args": ["${__dirname}/server/index.js", "a\u0000b"]}, "server.mcp_config.args.1"),
        ({"command": "node", "args": [], "env": {"NOT A NAME": "1"}}, "server.mcp_config.env.NOT A NAME"),
        ({"command": "node", "args": [], "env": {"V": "a\u0000"}}, "server.mcp_config.env.V"),
    ],
)
async def test_a_bundle_the_manifest_would_refuse_is_package_invalid_naming_its_field(
    hostd: HostdClient, tmp_path: Path, mcp_config: dict[str, Any], field: str
) -> None:
    manifest = mcpb_manifest()
    manifest["server"]["mcp_config"] = mcp_config
    path = bundle_with(tmp_path / "b.mcpb", json.dumps(manifest))
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"path": str(path)})
    assert refusal(refused.value) == ("PACKAGE_INVALID", field)
    assert refused.value.message.startswith(f"invalid bundle manifest.json: {field}: ")
    assert os.listdir(tmp_path / "state" / "bundles") == []  # nothing kept
