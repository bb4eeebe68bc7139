"""Version-manager shims (issue 28, item 6; hostd/install/shims.py).

The class: the command a manifest names (``python3``, ``node``) is found on ``PATH`` as a version
manager's shim, which picks the real program from the shell's setup that hostd does not run. Members:
pyenv (its version from ``$PYENV_ROOT/version``, a ``.python-version`` in the plugin folder,
``PYENV_VERSION``; ``system`` and a version not installed), asdf (``.tool-versions``), volta
(``platform.json``), mise (a link to ``mise``: recognised, never resolved), and a version file that
names a path instead of a version. The shim trees are real executable scripts in a temporary HOME,
shaped like the managers' own; the launches below are real process starts.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install.shims import Shim, find_shim, resolve_shim
from tests.conftest import ECHO, ready

#: The real interpreter behind this test's python (a link from a fake manager's ``versions`` folder runs it).
REAL_PYTHON = os.path.realpath(sys.executable)

#: pyenv's own shim, as ``pyenv rehash`` writes it (the root made a variable of the test's HOME).
PYENV_SHIM = """#!/usr/bin/env bash
set -e
[ -n "$PYENV_DEBUG" ] && set -x

program="${0##*/}"

export PYENV_ROOT="$HOME/.pyenv"
exec "$HOME/.pyenv/libexec/pyenv" exec "$program" "$@"
"""
#: What pyenv says when the version its file names is not installed (it then exits 1).
FAKE_PYENV = """#!/bin/sh
echo "pyenv: version \\`$(cat "$HOME/.pyenv/version")' is not installed (set by $HOME/.pyenv/version)" >&2
exit 1
"""
ASDF_SHIM = """#!/usr/bin/env bash
# asdf-plugin: python 3.11.9
exec /opt/asdf/bin/asdf exec "python3" "$@" # asdf_allow: ' asdf '
"""


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def pyenv_home(home: Path, version: str, installed: tuple[str, ...] = ()) -> Path:
    """A pyenv tree in ``home``: the shim, a pyenv that fails as pyenv does, ``version`` as the global
    version, and each of ``installed`` as a version whose ``bin/python3`` is the real interpreter."""
    shim = executable(home / ".pyenv" / "shims" / "python3", PYENV_SHIM)
    executable(home / ".pyenv" / "libexec" / "pyenv", FAKE_PYENV)
    (home / ".pyenv" / "version").write_text(version + "\n")
    for name in installed:
        target = home / ".pyenv" / "versions" / name / "bin" / "python3"
        target.parent.mkdir(parents=True)
        target.symlink_to(REAL_PYTHON)
    return shim


# -- recognising and resolving (files only) ----------------------------------------------------------


def test_pyenv_reads_the_version_variable_then_the_local_file_then_the_global_one(tmp_path: Path) -> None:
    home, plugin = tmp_path / "home", tmp_path / "projects" / "plugin"
    plugin.mkdir(parents=True)
    shim = pyenv_home(home, "3.12.1", installed=("3.12.1", "3.11.9", "3.10.4"))
    versions = home / ".pyenv" / "versions"
    found = find_shim("python3", str(shim))
    assert found == Shim("pyenv", "python3", str(shim))
    environ = {"HOME": str(home)}
    assert resolve_shim(found, str(plugin), environ) == Shim(
        "pyenv", "python3", str(shim), str(versions / "3.12.1/bin/python3"), "3.12.1", str(home / ".pyenv/version")
    )
    # A .python-version above the plugin folder wins over the global file (as in the shell); its first
    # installed version is taken ("system" is never one hostd can name).
    (tmp_path / "projects" / ".python-version").write_text("system\n3.9.0\n3.11.9\n")
    local = resolve_shim(found, str(plugin), environ)
    assert (local.real, local.version, local.source) == (
        str(versions / "3.11.9/bin/python3"),
        "3.11.9",
        str(tmp_path / "projects" / ".python-version"),
    )
    # PYENV_VERSION wins over both.
    chosen = resolve_shim(found, str(plugin), {**environ, "PYENV_VERSION": "3.10.4"})
    assert (chosen.real, chosen.version, chosen.source) == (
        str(versions / "3.10.4/bin/python3"),
        "3.10.4",
        "PYENV_VERSION",
    )


@pytest.mark.parametrize("named", ["system", "3.0.0", "../../../usr", "/usr", ".."])
def test_a_version_hostd_cannot_name_safely_leaves_the_shim_unresolved(tmp_path: Path, named: str) -> None:
    """``system``, a version not installed, and a version that is a path (it would lead out of the
    ``versions`` folder: ``../../../usr`` names ``/usr/bin/python3`` from there) give no real program."""
    home = tmp_path / "home"
    shim = pyenv_home(home, named, installed=("3.12.1",))
    found = find_shim("python3", str(shim))
    assert found is not None
    assert resolve_shim(found, str(tmp_path), {"HOME": str(home)}) == found
    assert found.message == (
        f"`python3` is a pyenv shim ({shim}); hostd runs it without the shell's setup: name the real program as "
        f"the command: the path `pyenv which python3` prints in your shell (or put its folder before "
        f"{shim.parent} on hostd's PATH)"
    )


def test_asdf_volta_and_mise_shims(tmp_path: Path) -> None:
    home = tmp_path / "home"
    environ = {"HOME": str(home)}
    asdf = executable(home / ".asdf" / "shims" / "python3", ASDF_SHIM)
    (home / ".tool-versions").write_text("nodejs 20.1.0\npython 3.11.9 3.10.4  # two\n")
    real = home / ".asdf" / "installs" / "python" / "3.11.9" / "bin" / "python3"
    executable(real, "#!/bin/sh\n")
    found = find_shim("python3", str(asdf))
    assert found == Shim("asdf", "python3", str(asdf))
    assert resolve_shim(found, str(tmp_path), environ) == Shim(
        "asdf", "python3", str(asdf), str(real), "3.11.9", str(home / ".tool-versions")
    )

    volta_shim = executable(home / ".volta" / "bin" / "volta-shim", "#!/bin/sh\n")
    node = home / ".volta" / "bin" / "node"
    node.symlink_to(volta_shim)
    platform = home / ".volta" / "tools" / "user" / "platform.json"
    platform.parent.mkdir(parents=True)
    platform.write_text('{"node": {"runtime": "20.1.0", "npm": null}}')
    real_node = executable(home / ".volta" / "tools" / "image" / "node" / "20.1.0" / "bin" / "node", "#!/bin/sh\n")
    found = find_shim("node", str(node))
    assert found == Shim("volta", "node", str(node))
    assert resolve_shim(found, str(tmp_path), environ) == Shim(
        "volta", "node", str(node), str(real_node), "20.1.0", str(platform)
    )
    platform.write_text('{"node": {"runtime": "../../../../../bin"}}')
    assert resolve_shim(found, str(tmp_path), environ) == found

    mise = executable(home / ".local" / "bin" / "mise", "\x7fELF")
    shim = home / ".local" / "share" / "mise" / "shims" / "node"
    shim.parent.mkdir(parents=True)
    shim.symlink_to(mise)
    assert find_shim("node", str(shim)) == Shim("mise", "node", str(shim))
    # Real programs are no shims: an interpreter, and a script that only mentions a manager.
    assert find_shim("python3", REAL_PYTHON) is None
    assert find_shim("tool", str(executable(home / "bin" / "tool", "#!/bin/sh\necho use pyenv to install\n"))) is None


# -- real launches ----------------------------------------------------------------------------------


def hostd_environment(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """hostd's environment with ``HOME=home`` and its pyenv shims first on ``PATH`` (as a shell with
    ``eval "$(pyenv init -)"`` has them)."""
    env = plugin_environment([str(home / ".pyenv" / "shims")])
    # The machine's own pyenv (if any) is not this test's: its root and version variables would win.
    env = {k: v for k, v in env.items() if not k.startswith(("PYENV_", "ASDF_", "VOLTA_"))}
    return {**env, "HOME": str(home), **(extra or {})}


def plugin_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "plugin"
    shutil.copytree(ECHO, folder)
    return folder


async def test_hostd_runs_the_interpreter_the_pyenv_shim_would_pick(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shim = pyenv_home(home, "3.99.1", installed=("3.99.1",))
    real = home / ".pyenv" / "versions" / "3.99.1" / "bin" / "python3"
    folder = plugin_copy(tmp_path)
    args = ["--state-dir", str(tmp_path / "state")]
    async with HostdClient.spawn(args, env=hostd_environment(home)) as client:
        info = await client.request("plugins/install", {"path": str(folder)})
        assert info["launch"]["executable"] == str(real)
        assert info["launch"]["shim"] == {
            "manager": "pyenv",
            "shim": str(shim),
            "resolved": str(real),
            "version": "3.99.1",
            "source": str(home / ".pyenv" / "version"),
            "message": f"`python3` is a pyenv shim ({shim}); hostd runs it without the shell's setup, so it runs "
            f"{real} (pyenv version 3.99.1, from {home / '.pyenv' / 'version'})",
        }
        status = await ready(client, folder)
        assert status["status"] == "ready"
        called = await client.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "via pyenv"}})
        assert called["content"] == [{"type": "text", "text": "via pyenv"}]


async def test_a_shim_hostd_cannot_resolve_fails_with_the_path_fix_as_its_hint(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shim = pyenv_home(home, "3.0.0", installed=("3.12.1",))
    folder = plugin_copy(tmp_path)
    args = ["--state-dir", str(tmp_path / "state")]
    async with HostdClient.spawn(args, env=hostd_environment(home)) as client:
        info = await client.request("plugins/install", {"path": str(folder)})
        assert info["launch"]["executable"] == str(shim)
        message = (
            f"`python3` is a pyenv shim ({shim}); hostd runs it without the shell's setup: name the real program "
            f"as the command: the path `pyenv which python3` prints in your shell (or put its folder before "
            f"{shim.parent} on hostd's PATH)"
        )
        assert info["launch"]["shim"] == {"manager": "pyenv", "shim": str(shim), "message": message}
        with pytest.raises(RpcError) as failed:
            await ready(client, folder)
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.data["hint"] == message
