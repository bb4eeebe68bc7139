"""``hostd mcp`` driven once by the official MCP TypeScript SDK's client (``@modelcontextprotocol/sdk``, pinned in
tests/typescript_sdk/package-lock.json) over stdio, with the echo fixture as a real plugin behind it (issue 27):
the SDK's own schemas parse every answer, so a field hostd spells differently from the spec fails here even where
the Python SDK is lenient. Node runs tests/typescript_sdk/client.mjs; its packages come from ``npm ci`` (run here
when node_modules is missing or older than the lockfile; CI runs it in .ci/run). Without node and npm the test is
skipped, except under CI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostd.cli.client import plugin_environment
from tests.conftest import ECHO_TOOLS, ROOT, MakePlugin, ready, run_quietly, spawn_hostd

PACKAGE = ROOT / "tests" / "typescript_sdk"


def node_with_the_sdk() -> str:
    """The node binary, once the SDK's packages are installed from the lockfile."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed to run the TypeScript SDK's client")
        pytest.skip("node or npm is not installed")
    modules = PACKAGE / "node_modules"
    if not modules.is_dir() or (PACKAGE / "package-lock.json").stat().st_mtime > modules.stat().st_mtime:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=PACKAGE,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        modules.touch()
    return node


async def test_the_typescript_sdk_client_lists_and_calls_through_hostd_mcp(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    node = node_with_the_sdk()
    async with spawn_hostd(tmp_path) as client:
        await ready(client, make_plugin("mcp-echo"))
    state = tmp_path / "state"
    calls = [["mcp-echo.echo", {"text": "from node"}], ["mcp-echo.fail", {"message": "as asked"}]]
    argv = [node, str(PACKAGE / "client.mjs"), sys.executable, str(state), json.dumps(calls)]
    done = await run_quietly(argv, env={**plugin_environment(), "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["server"] == "hostd"
    assert {"tools", "resources", "prompts", "logging"} <= set(out["capabilities"])
    assert out["tools"] == sorted(f"mcp-echo.{tool}" for tool in ECHO_TOOLS)
    # The SDK checked structuredContent against the tool's outputSchema from the listing before returning it.
    assert out["called"] == [
        {"content": [{"type": "text", "text": "from node"}], "structuredContent": {"text": "from node", "length": 9}},
        {"content": [{"type": "text", "text": "as asked"}], "isError": True},
    ]
