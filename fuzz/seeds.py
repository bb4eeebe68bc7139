"""The seed corpora, written from the repository's own valid documents (``python -m fuzz --seed``).

Small on purpose (they are committed): the plugin manifests in ``fixtures/`` and ``manifests/`` (as YAML and as
JSON), the configs in ``tests/data/``, a few registry entries and bundles of the shapes the tests use, one request
per control method, and the lines a plugin writes in a typical session.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _manifests() -> Iterator[bytes]:
    for path in sorted([*ROOT.glob("fixtures/*/plugin.yaml"), *ROOT.glob("manifests/*/plugin.yaml")]):
        data = path.read_bytes()
        yield data
        yield json.dumps(yaml.safe_load(data), indent=1).encode()


def _configs() -> Iterator[bytes]:
    for path in sorted(ROOT.glob("tests/data/*.json")):
        yield path.read_bytes()
    yield json.dumps(
        {
            "mcpServers": {
                "echo": {"command": "python3", "args": ["server.py"], "env": {"A": "1"}, "cwd": "/tmp"},
                "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
                "sse": {"type": "sse", "serverUrl": "https://example.com/sse"},
            }
        }
    ).encode()


def _entry(**fields: Any) -> dict[str, Any]:
    return {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
        "name": "io.github.modelcontextprotocol/server-memory",
        "description": "Knowledge graph memory.",
        "version": "1.0.0",
        "repository": {"url": "https://github.com/modelcontextprotocol/servers", "source": "github"},
        "packages": [],
        **fields,
    }


def _registry_entries() -> Iterator[bytes]:
    npm = {
        "registryType": "npm",
        "registryBaseUrl": "https://registry.npmjs.org",
        "identifier": "@modelcontextprotocol/server-memory",
        "version": "1.0.0",
        "transport": {"type": "stdio"},
        "environmentVariables": [
            {"name": "MEMORY_FILE_PATH", "description": "Where", "default": "/tmp/m.jsonl"},
            {"name": "API_TOKEN", "isSecret": True, "isRequired": True},
            {"name": "FIXED", "value": "1"},
        ],
        "packageArguments": [
            {"type": "positional", "valueHint": "root_dir", "isRequired": True},
            {"type": "named", "name": "--verbose"},
        ],
    }
    pypi = {
        "registryType": "pypi",
        "identifier": "mcp-server-time",
        "version": "2025.1.1",
        "transport": {"type": "stdio"},
        "packageArguments": [{"type": "named", "name": "--local-timezone", "value": "UTC"}],
    }
    mcpb = {
        "registryType": "mcpb",
        "identifier": "https://github.com/o/r/releases/download/v1/x.mcpb",
        "version": "1.0.0",
        "fileSha256": "0" * 64,
        "transport": {"type": "stdio"},
    }
    remote = {"type": "streamable-http", "url": "https://e.com/mcp", "headers": [{"name": "H", "value": "v"}]}
    for document in [
        _entry(packages=[npm]),
        _entry(packages=[pypi], name="io.github.modelcontextprotocol/mcp-server-time"),
        _entry(packages=[mcpb]),
        _entry(remotes=[remote, {"type": "sse", "url": "https://e.com/sse"}]),
    ]:
        yield json.dumps(document).encode()


def mcpb_manifest() -> dict[str, Any]:
    """A valid 0.3 bundle manifest for a node server at server/index.js (as tests/test_bundle.py builds)."""
    return {
        "manifest_version": "0.3",
        "name": "node-echo",
        "display_name": "Node echo",
        "version": "1.2.3",
        "description": "The node fixture.",
        "author": {"name": "hostd tests"},
        "server": {
            "type": "node",
            "entry_point": "server/index.js",
            "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js"], "env": {"A": "${HOME}"}},
        },
        "tools": [{"name": "echo"}, {"name": "env"}],
        "user_config": {"key": {"type": "string", "title": "Key", "sensitive": True, "required": True}},
    }


def _bundles() -> Iterator[bytes]:
    for method in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", method) as out:
            out.writestr("manifest.json", json.dumps(mcpb_manifest()))
            out.writestr("server/index.js", b"// the server\n" * 4)
            out.writestr("server/lib/util.js", b"module.exports = {}\n")
        yield buffer.getvalue()


def _control() -> Iterator[bytes]:
    from hostd.control.models import PARAMS  # noqa: PLC0415

    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    yield line(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "clientInfo": {"name": "fuzz", "version": "1"},
                "protocolVersion": "0",
                "knownPermissions": ["fs.read"],
                "contentLimits": {"maxImages": 2},
                "capabilities": {"sampling": {"tools": {}}, "roots": {}},
            },
        }
    )
    for number, method in enumerate(PARAMS, 1):
        yield line({"jsonrpc": "2.0", "id": number, "method": method, "params": {"id": "echo"}})
    yield line(
        {
            "jsonrpc": "2.0",
            "id": "c",
            "method": "tools/call",
            "params": {
                "name": "echo.echo",
                "arguments": {"text": "hi"},
                "_meta": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
            },
        }
    )
    yield line({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 3}}) + line(
        {"jsonrpc": "2.0", "id": 9, "result": {"action": "accept"}}
    )


def _plugin_output() -> Iterator[bytes]:
    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    yield line({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}})
    yield line(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 2, "progress": 1, "total": 2},
        }
    ) + line({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "hi"}]}})
    yield line({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "bad"}})
    yield line({"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"messages": []}})
    yield line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    yield line(
        {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 3}},
        }
    )
    yield line({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}})
    yield b"a log line on stdout\n"


def _dns_queries() -> Iterator[bytes]:
    def query(name: bytes, qtype: int = 1, qd: int = 1, flags: int = 0x0100) -> bytes:
        return struct.pack("!HHHHHH", 0x1234, flags, qd, 0, 0, 0) + name + struct.pack("!HH", qtype, 1)

    yield query(b"\x03api\x04test\x00")
    yield query(b"\x03api\x04test\x00", 28)
    yield query(b"\x05other\x07example\x00")
    yield query(b"\x03api\xc0\x0c")
    yield query(b"\x03api\x04test\x00", qd=2)
    yield query(b"\x03api\x04test\x00") + b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00"  # EDNS0 OPT


def _proxy_heads() -> Iterator[bytes]:
    yield b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nUser-Agent: x"
    yield b"CONNECT [::1]:8200 HTTP/1.1"
    yield b"GET http://example.com/a?b=c HTTP/1.1\r\nHost: example.com\r\nProxy-Authorization: x\r\nAccept: */*"
    yield b"POST http://127.0.0.1:8080/x HTTP/1.0\r\nContent-Length: 2\r\nConnection: keep-alive"
    yield b"GET http://user@example.com/ HTTP/1.1"


def _allowlists() -> Iterator[bytes]:
    yield b"api.example.com\n*.pypi.org:443\n127.0.0.1:8200\n[::1]\n!vault.test"
    yield "b\u00fccher.example\nxn--bcher-kva.example:8443\nAPI.Example.COM.".encode()
    yield b"127.1\n0x7f.0.0.1\n::ffff:127.0.0.1\n[::ffff:127.0.0.1]:80\n*.com"


SOURCES = {
    "manifest": _manifests,
    "import": _configs,
    "serverjson": _registry_entries,
    "bundle": _bundles,
    "control": _control,
    "plugin-output": _plugin_output,
    "dns": _dns_queries,
    "proxy-head": _proxy_heads,
    "allowlist": _allowlists,
}


def write_all(root: Path) -> None:
    """Each target's seeds in ``root/<target>/``, named by content (sha1, as libFuzzer names its inputs)."""
    for name, source in SOURCES.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for data in source():
            (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)
