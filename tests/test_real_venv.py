"""A FastMCP server run from its own virtualenv, imported as users write it, under the default sandbox.

The usual form in a Claude Desktop config is ``/path/.venv/bin/python /path/server.py``. The venv's
``python`` is a link to its base interpreter outside any plugin folder; the import once shortened it
to ``python`` (hostd's own interpreter: ``ModuleNotFoundError``) and the sandbox refused the link.
The venv is made with uv and the mcp SDK 1.x (``from mcp.server.fastmcp import FastMCP``, the API
these servers are written against) installed into it from the package index.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hostd.cli.client import HostdClient, plugin_environment

pytestmark = pytest.mark.real_server

SERVER = '''
from mcp.server.fastmcp import FastMCP

server = FastMCP("venv-demo")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


server.run()
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv", path=os.path.dirname(os.path.realpath(__file__)) + "/../.venv/bin") or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    folder = tmp_path_factory.mktemp("fastmcp-project")
    done = subprocess.run([uv, "venv", "--quiet", str(folder / ".venv")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(folder / ".venv" / "bin" / "python"), "mcp>=1.9,<2"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"could not install mcp 1.x from the package index: {done.stderr[-500:]}")
    (folder / "server.py").write_text(SERVER)
    return folder


async def test_a_venv_fastmcp_server_imported_as_written_works_under_the_default_sandbox(
    tmp_path: Path, project: Path
) -> None:
    python = str(project / ".venv" / "bin" / "python")
    config = {"mcpServers": {"Venv Demo": {"command": python, "args": [str(project / "server.py")]}}}
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=plugin_environment()) as hostd:
        result = await hostd.request("plugins/import", {"config": json.dumps(config)})
        [entry] = result["entries"]
        assert (entry["outcome"], entry["id"]) == ("installed", "venv-demo")
        launch = entry["plugin"]["launch"]
        assert launch["command"] == python and launch["executable"] == python
        assert launch["runtime"] == [os.path.realpath(python)]
        assert launch["folders"] == {str(project / "server.py"): str(project / "server.py")}
        await hostd.request("plugins/approve", {"id": "venv-demo", "digest": launch["digest"]})
        status = await hostd.request("plugins/enable", {"id": "venv-demo"})  # one approval, one spawn
        assert (status["status"], status["tools_count"], status["pinned"]) == ("ready", 1, ["venv-demo.add"])
        added = await hostd.request("tools/call", {"name": "venv-demo.add", "arguments": {"a": 2, "b": 40}})
        assert added["content"] == [{"type": "text", "text": "42"}]
        assert added == {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}}
