"""x-mcp-header (MCP 2026-07-28 "Streamable HTTP", custom headers from tool parameters) against a real server.

fixtures/remote/header_server.py is a modern-era server on 127.0.0.1 that offers two valid tools and one
tool per broken x-mcp-header rule, and answers every ``tools/call`` with the ``mcp-*`` headers it received.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import yaml

from hostd.cli.client import HostdClient
from tests.conftest import FIXTURES, ready
from tests.test_remote import fixture_server

SERVER = FIXTURES / "remote" / "header_server.py"
#: The fixture's invalid tools, each with the reason hostd's warning names (the SDK's validator's words).
LEFT_OUT = {
    "bad_empty": "'' is not an RFC 9110 token",
    "bad_space": "'My Region' is not an RFC 9110 token",
    "bad_colon": "'Region:Primary' is not an RFC 9110 token",
    "bad_non_ascii": "'Région' is not an RFC 9110 token",
    "bad_control": "'Region\\t1' is not an RFC 9110 token",
    "bad_crlf": "'Region\\r\\nX-Injected: 1' is not an RFC 9110 token",
    "bad_not_string": "x-mcp-header must be a string, not int",
    "bad_object": "integer/string/boolean properties (got 'object')",
    "bad_array": "integer/string/boolean properties (got 'array')",
    "bad_null": "integer/string/boolean properties (got 'null')",
    "bad_number": "integer/string/boolean properties (got 'number')",
    "bad_duplicate": "x-mcp-header 'MyField' on property 'one' duplicates property 'two'",
    "bad_under_items": "not reachable via a pure `properties` chain",
    "bad_under_any_of": "not reachable via a pure `properties` chain",
}


def sentinel(value: str) -> str:
    """The spec's Base64 form of a header value that is not plain ASCII."""
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def header_plugin(tmp_path: Path, url: str) -> Path:
    """A plugin folder for the fixture: exactly the two valid tools are declared."""
    folder = tmp_path / "headers"
    folder.mkdir()
    manifest = {
        "id": "headers",
        "name": "Header fixture",
        "version": "1.0.0",
        "permissions": ["remote.use"],
        "contributes": {"tools": ["headers.mirror", "headers.plain"]},
        "backend": {"type": "mcp", "transport": "streamable-http", "url": url},
    }
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def received(hostd: HostdClient, tool: str, arguments: dict[str, object]) -> dict[str, str]:
    """The ``mcp-*`` headers the fixture saw on one ``tools/call``."""
    result = await hostd.request("tools/call", {"name": f"headers.{tool}", "arguments": arguments})
    seen: dict[str, str] = json.loads(result["content"][0]["text"])
    return seen


async def test_invalid_definitions_are_left_out_and_valid_ones_mirrored(hostd: HostdClient, tmp_path: Path) -> None:
    async with fixture_server([sys.executable, str(SERVER)]) as port:
        status = await ready(hostd, header_plugin(tmp_path, f"http://127.0.0.1:{port}/mcp"))
        assert (status["status"], status["protocol_version"], status["tools_count"]) == ("ready", "2026-07-28", 2)
        listed = await hostd.request("tools/list", {"plugin": "headers"})
        assert [tool["name"] for tool in listed["tools"]] == ["headers.mirror", "headers.plain"]
        logs = await hostd.request("plugins/logs", {"id": "headers"})
        warnings = [line["message"] for line in logs["lines"] if line["level"] == "warning"]
        for name, reason in LEFT_OUT.items():  # one warning per tool left out, naming it and why
            mine = [w for w in warnings if w.startswith(f"left out tool {name!r}: invalid x-mcp-header (")]
            assert len(mine) == 1 and reason in mine[0], (name, warnings)
        assert len(warnings) == len(LEFT_OUT)

        # Plain ASCII as is; integers in decimal; booleans in lower case; a nested property by its path;
        # the token "Method" is Mcp-Param-Method, never the standard Mcp-Method; an unannotated argument and
        # an absent one ("note") are not mirrored.
        seen = await received(
            hostd,
            "mirror",
            {
                "region": "us-west1",
                "priority": -7,
                "verbose": False,
                "method": "internal space ok",
                "place": {"zone": "b"},
                "query": "SELECT 1",
            },
        )
        assert seen == {
            "mcp-method": "tools/call",
            "mcp-name": "mirror",
            "mcp-protocol-version": "2026-07-28",
            "mcp-param-region": "us-west1",
            "mcp-param-priority": "-7",
            "mcp-param-verbose": "false",
            "mcp-param-method": "internal space ok",
            "mcp-param-zone": "b",
        }

        # Values that are not plain ASCII travel as the spec's Base64 sentinel: non-ASCII, control
        # characters (CR LF would split the header), edge whitespace, a tab, and the sentinel itself.
        tricky = {
            "region": "Hello, 世界",
            "method": "line1\r\nX-Injected: 1",
            "note": " padded ",
            "place": {"zone": "\tindented"},
        }
        seen = await received(hostd, "mirror", {**tricky, "verbose": True})
        assert {name: value for name, value in seen.items() if name.startswith("mcp-param-")} == {
            "mcp-param-region": sentinel("Hello, 世界"),
            "mcp-param-method": sentinel("line1\r\nX-Injected: 1"),
            "mcp-param-note": sentinel(" padded "),
            "mcp-param-zone": sentinel("\tindented"),
            "mcp-param-verbose": "true",
        }
        assert "x-injected" not in seen
        seen = await received(hostd, "mirror", {"region": "=?base64?literal?="})
        assert seen["mcp-param-region"] == sentinel("=?base64?literal?=")

        # A tool without annotations gets the standard headers only.
        assert await received(hostd, "plain", {"text": "é"}) == {
            "mcp-method": "tools/call",
            "mcp-name": "plain",
            "mcp-protocol-version": "2026-07-28",
        }
        await hostd.request("plugins/disable", {"id": "headers"})
