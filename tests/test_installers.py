"""The installers hostd needs come with it (hostd/install/installers.py ``find_installer``, ``hostd doctor``).

uv is a runtime dependency: the one next to hostd's interpreter is used before any on ``PATH``. npm is
the one that came with the node found on ``PATH``. The npm layouts are built in the test (a node prefix
with npm beside node, beside its real path, or only as ``lib/node_modules/npm/bin/npm-cli.js``, and a
decoy npm earlier on ``PATH``); the doctor runs them for their versions.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostd.cli.client import HostdClient, RpcError
from hostd.install.installers import Installer, _tool, find_installer
from hostd.install.packages import PackageLaunch, PrepareError, parse_package_launch
from tests.conftest import ROOT

#: The uv of hostd's environment: next to this interpreter (pyproject.toml's runtime dependency).
OWN_UV = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "uv")
TIME_SPEC = "mcp-server-time==2026.10.19"


def script(path: Path, text: str) -> Path:
    """An executable shell script at ``path`` printing ``text`` (shell words expanded)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{text}"\n')
    path.chmod(0o755)
    return path


def launch() -> PackageLaunch:
    parsed = parse_package_launch("npx", ["-y", "left-pad@1.3.0"])
    assert parsed is not None
    return parsed


def node_layout(tmp_path: Path, npm_at: str | None) -> tuple[str, Path, Path]:
    """``(PATH, the node on it, the npm that came with it)``: a decoy npm first on PATH, then ``links/node``
    (a link to ``prefix/bin/node``); ``npm_at`` (relative to ``prefix``; ``"links/npm"`` means beside the
    link) holds the npm of that node, or none when None."""
    decoy = script(tmp_path / "decoy" / "npm", "0.0.1-decoy")
    node = script(tmp_path / "prefix" / "bin" / "node", "v99.0.0")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "node").symlink_to(node)
    npm = decoy
    if npm_at == "links/npm":
        npm = script(tmp_path / "links" / "npm", "9.9.9 [${HOSTD_TEST_SECRET}]")
    elif npm_at is not None:
        npm = script(tmp_path / "prefix" / npm_at, "9.9.9 [${HOSTD_TEST_SECRET}]")
    return f"{decoy.parent}{os.pathsep}{tmp_path / 'links'}", tmp_path / "links" / "node", npm


@pytest.mark.parametrize("npm_at", ["links/npm", "bin/npm", "lib/node_modules/npm/bin/npm-cli.js"])
def test_npm_is_the_one_that_came_with_node(tmp_path: Path, npm_at: str) -> None:
    """Fails before (the decoy npm first on PATH was used, whatever node ran the package)."""
    path, node, npm = node_layout(tmp_path, npm_at)
    assert _tool("npm", path, launch()) == str(npm)
    assert find_installer("npm", path) == Installer("npm", str(npm), f"with node {node}")
    assert find_installer("node", path) == Installer("node", str(node), "PATH")


def test_without_an_npm_beside_node_the_path_one_is_used_and_none_is_a_clear_error(tmp_path: Path) -> None:
    path, _node, decoy = node_layout(tmp_path, None)
    assert find_installer("npm", path) == Installer("npm", str(decoy), "PATH")
    empty = str(tmp_path / "empty")
    with pytest.raises(PrepareError) as missing:
        _tool("npm", empty, launch())
    assert missing.value.reason == "tool-missing"
    assert str(missing.value) == f"cannot prepare left-pad@1.3.0: npm not found (PATH={empty})"


def test_uv_is_the_one_next_to_hostds_python_before_any_on_path(tmp_path: Path) -> None:
    """Fails before (uv was looked for on PATH only: 'uv not found')."""
    other = script(tmp_path / "bin" / "uv", "uv 0.0.0-other")
    assert _tool("uv", str(tmp_path / "empty"), launch()) == OWN_UV
    assert find_installer("uv", str(other.parent)) == Installer("uv", OWN_UV, "next to hostd's Python")


def test_doctor_names_each_installer_with_its_version(tmp_path: Path) -> None:
    """Fails before (the doctor listed the sandbox layers only)."""
    path, node, npm = node_layout(tmp_path, "lib/node_modules/npm/bin/npm-cli.js")
    env = {
        "PATH": f"{path}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": str(tmp_path),
        "SHELL": "/bin/false",  # no login shell PATH: only the test's
        "PYTHONPATH": str(ROOT),
        "HOSTD_TEST_SECRET": "leaked",  # the version queries get PATH and HOME only
    }
    done = subprocess.run(
        [sys.executable, "-m", "hostd", "doctor"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    own = subprocess.run([OWN_UV, "--version"], capture_output=True, text=True, check=True, timeout=60)
    table = done.stdout[done.stdout.index("ecosystem  installer") :].splitlines()
    rows = [re.split(r"\s{2,}", line) for line in table]
    assert rows == [
        ["ecosystem", "installer", "version", "executable", "found"],
        ["pypi", "uv", own.stdout.strip(), OWN_UV, "next to hostd's Python"],
        ["npm", "npm", "9.9.9 []", str(npm), f"with node {node}"],
        ["npm", "node", "v99.0.0", str(node), "PATH"],
        ["deno", "deno", "-", "-", "deno not on PATH"],
    ]


@pytest.mark.real_server
async def test_a_python_package_is_prepared_with_no_uv_on_path(tmp_path: Path) -> None:
    """hostd's PATH holds no uv (only /usr/bin and /bin, no login shell's): plugins/prepare still installs
    the pinned package with the uv that came with hostd. Fails before (PREPARE_FAILED tool-missing)."""
    path = f"/usr/bin{os.pathsep}/bin"
    if find_installer("uv", path) != Installer("uv", OWN_UV, "next to hostd's Python") or not os.path.exists(
        "/usr/bin/python3"
    ):
        pytest.skip("this machine has a uv on /usr/bin:/bin, or no python3 there")
    assert shutil.which("uv", path=path) is None
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": path, "HOME": str(home), "SSL_CERT_FILE": os.environ.get("SSL_CERT_FILE", "")}
    env = {k: v for k, v in env.items() if v}
    state = ["--state-dir", str(tmp_path / "state"), "--no-login-path"]
    async with HostdClient.spawn(state, env=env) as hostd:
        await hostd.request("plugins/install", {"path": str(ROOT / "manifests" / "mcp-server-time")})
        try:
            prepared = await hostd.request("plugins/prepare", {"id": "mcp-server-time"}, timeout=300)
        except RpcError as error:
            if error.kind == "PREPARE_FAILED" and error.data["reason"] == "unreachable":
                pytest.skip(f"PyPI cannot be reached: {error.message}")
            raise
    prepare = prepared["launch"]["prepare"]
    assert prepare["state"] == "prepared"
    assert prepare["resolved"] == {"mcp-server-time": "2026.10.19"}
    assert f"{TIME_SPEC}\n" in (Path(prepare["root"]) / "requirements.lock").read_text()
