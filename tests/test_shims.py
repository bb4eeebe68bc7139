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
from hostd.cli.render import launch_details
from hostd.install.shims import Shim, find_shim, nvm_program, resolve_shim
from tests.conftest import ECHO, FIXTURES, ready

#: The real interpreter behind this test's python (a link from a fake manager's ``versions`` folder runs it).
REAL_PYTHON = os.path.realpath(sys.executable)
#: The machine's node, likewise (``None``: the node launches are skipped).
REAL_NODE = shutil.which("node")
#: Why ``system`` is never followed.
SYSTEM = "the program after the manager's shims on PATH, which hostd does not guess"
#: A stand-in for the mise binary its shims link to: it fails as mise does without its shell setup.
FAKE_MISE = """#!/bin/sh
echo "mise ERROR no version is set for shim: ${0##*/}" >&2
exit 1
"""

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


@pytest.mark.parametrize("named", ["system", "3.0.0", "../../../usr", "/usr", "..", "3.13.0"])
def test_a_version_hostd_cannot_name_safely_leaves_the_shim_unresolved(tmp_path: Path, named: str) -> None:
    """``system``, a version not installed, a version that is a path (it would lead out of the ``versions``
    folder: ``../../../usr`` names ``/usr/bin/python3`` from there), and a version folder that is a link out
    of it give no real program, each with its reason."""
    home = tmp_path / "home"
    shim = pyenv_home(home, named, installed=("3.12.1",))
    versions, source = home / ".pyenv" / "versions", home / ".pyenv" / "version"
    elsewhere = executable(tmp_path / "elsewhere" / "bin" / "python3", "#!/bin/sh\n").parent.parent
    (versions / "3.13.0").symlink_to(elsewhere)
    found = find_shim("python3", str(shim))
    assert found is not None
    reason = {
        "system": f"{source} names `system`, the program after the manager's shims on PATH, which hostd does not guess",
        "3.0.0": f"{source} names `3.0.0`, which is not installed ({versions}/3.0.0/bin/python3 is no executable)",
        "3.13.0": f"{source} names `3.13.0`, and {versions}/3.13.0 leads to {elsewhere}, outside {versions}: hostd "
        "does not follow it",
    }.get(named, f"{source} names `{named}`, which is not one folder name in {versions}: hostd does not follow it")
    resolved = resolve_shim(found, str(tmp_path), {"HOME": str(home)})
    assert resolved == Shim("pyenv", "python3", str(shim), reason=reason)
    assert resolved.message == (
        f"`python3` is a pyenv shim ({shim}); hostd runs it without the shell's setup, and {reason}: name the real "
        f"program as the command: the path `pyenv which python3` prints in your shell (or put its folder before "
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
    assert resolve_shim(found, str(tmp_path), environ).reason == (
        f"{platform} names `../../../../../bin`, which is not one folder name in {real_node.parents[2]}: hostd "
        "does not follow it"
    )

    mise = executable(home / ".local" / "bin" / "mise", "\x7fELF")
    shim = home / ".local" / "share" / "mise" / "shims" / "node"
    shim.parent.mkdir(parents=True)
    shim.symlink_to(mise)
    assert find_shim("node", str(shim)) == Shim("mise", "node", str(shim))
    # Real programs are no shims: an interpreter, and a script that only mentions a manager.
    assert find_shim("python3", REAL_PYTHON) is None
    assert find_shim("tool", str(executable(home / "bin" / "tool", "#!/bin/sh\necho use pyenv to install\n"))) is None


def mise_home(home: Path, installs: dict[str, dict[str, str]]) -> dict[str, Path]:
    """A mise tree in ``home`` as mise lays it out: ``~/.local/bin/mise``, a shim per command in
    ``~/.local/share/mise/shims`` (a link to mise), and for each tool in ``installs`` the versions given
    (version -> the program its ``bin/<command>`` links to) with mise's runtime links (``20`` and ``latest``
    -> ``./20.1.0``, relative, as ``mise install`` makes them). Returns the shims by command."""
    mise = executable(home / ".local" / "bin" / "mise", FAKE_MISE)
    shims: dict[str, Path] = {}
    for command in ("node", "python3"):
        shim = shims[command] = home / ".local" / "share" / "mise" / "shims" / command
        shim.parent.mkdir(parents=True, exist_ok=True)
        shim.symlink_to(mise)
    for tool, versions in installs.items():
        command = "node" if tool == "node" else "python3"
        for version, program in versions.items():
            target = home / ".local" / "share" / "mise" / "installs" / tool / version / "bin" / command
            target.parent.mkdir(parents=True)
            target.symlink_to(program)
        newest = max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
        for link in (newest.split(".")[0], "latest"):
            (home / ".local" / "share" / "mise" / "installs" / tool / link).symlink_to(f"./{newest}")
    return shims


def test_mise_reads_its_variable_then_the_nearest_config_then_the_global_one(tmp_path: Path) -> None:
    """mise's choice, in its order: ``MISE_NODE_VERSION``; the plugin folder's and its parents' configuration
    (``mise.toml`` over ``.tool-versions`` in one folder, the nearer folder first; ``nodejs`` is mise's alias
    of ``node``); the global ``~/.config/mise/config.toml``. A prefix (``20``, ``prefix:18``) is the newest
    installed match (mise's link ``20`` is followed to its folder), ``latest`` the newest of all."""
    home, plugin = tmp_path / "home", tmp_path / "projects" / "plugin"
    plugin.mkdir(parents=True)
    shims = mise_home(home, {"node": {"20.1.0": "/bin/true", "18.2.0": "/bin/true", "18.10.1": "/bin/true"}})
    installs = home / ".local" / "share" / "mise" / "installs" / "node"
    shim = find_shim("node", str(shims["node"]))
    assert shim == Shim("mise", "node", str(shims["node"]))
    environ = {"HOME": str(home)}
    config = home / ".config" / "mise" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[settings]\nexperimental = true\n\n[tools]\nnode = "20"  # the newest 20\n')

    def picked(env: dict[str, str] = environ) -> tuple[str | None, str | None, str | None, str | None]:
        found = resolve_shim(shim, str(plugin), env)
        return found.real, found.version, found.source, found.reason

    assert picked() == (str(installs / "20.1.0/bin/node"), "20.1.0", str(config), None)
    (tmp_path / "projects" / ".tool-versions").write_text("python 3.12.1\nnodejs 18.2.0\n")
    assert picked() == (str(installs / "18.2.0/bin/node"), "18.2.0", str(tmp_path / "projects/.tool-versions"), None)
    (tmp_path / "projects" / "mise.toml").write_text('[tools]\nnode = ["prefix:18", "20"]\n')
    assert picked() == (str(installs / "18.10.1/bin/node"), "18.10.1", str(tmp_path / "projects/mise.toml"), None)
    (plugin / ".mise.toml").write_text('[tools]\nnode = { version = "latest" }\n')
    assert picked() == (str(installs / "20.1.0/bin/node"), "20.1.0", str(plugin / ".mise.toml"), None)
    assert picked({**environ, "MISE_NODE_VERSION": "18.2.0"}) == (
        str(installs / "18.2.0/bin/node"),
        "18.2.0",
        "MISE_NODE_VERSION",
        None,
    )


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ('node = "../../../../usr"', "names `../../../../usr`, which is not one folder name in {installs}: {refused}"),
        ('node = "path:/usr"', "names `path:/usr`, which is not one folder name in {installs}: {refused}"),
        ('node = "system"', "names `system`, {system}"),
        ('node = "22"', "names `22`, which is not installed ({installs}/22/bin/node is no executable)"),
        ('node = "linked"', "names `linked`, and {installs}/linked leads to {elsewhere}, outside {installs}: {no}"),
    ],
)
def test_a_mise_version_that_leads_out_of_its_installs_is_refused_with_its_reason(
    tmp_path: Path, entry: str, why: str
) -> None:
    """The plugin folder's own ``mise.toml`` (it comes with the plugin: attacker input) may choose among the
    installed versions only: a path, ``path:``, a link out of ``installs`` are refused, and say so."""
    home, plugin = tmp_path / "home", tmp_path / "plugin"
    plugin.mkdir()
    shims = mise_home(home, {"node": {"20.1.0": "/bin/true"}})
    installs = home / ".local" / "share" / "mise" / "installs" / "node"
    elsewhere = executable(tmp_path / "elsewhere" / "bin" / "node", "#!/bin/sh\n").parent.parent
    (installs / "linked").symlink_to(elsewhere)
    (plugin / "mise.toml").write_text(f"[tools]\n{entry}\n")
    found = resolve_shim(Shim("mise", "node", str(shims["node"])), str(plugin), {"HOME": str(home)})
    reason = f"{plugin / 'mise.toml'} " + why.format(
        installs=installs,
        elsewhere=elsewhere,
        refused="hostd does not follow it",
        no="hostd does not follow it",
        system=SYSTEM,
    )
    assert found == Shim("mise", "node", str(shims["node"]), reason=reason)
    # A configuration hostd cannot read decides nothing either, and says which file.
    (plugin / "mise.toml").write_text("[tools\nnode = 1\n")
    assert resolve_shim(found, str(plugin), {"HOME": str(home)}).reason == (
        f"{plugin / 'mise.toml'} is not TOML hostd can read (Expected ']' at the end of a table declaration "
        "(at line 1, column 7))"
    )


def nvm_home(home: Path, default: str, installed: dict[str, str]) -> Path:
    """An nvm tree in ``home`` as its installer and ``nvm install``/``nvm alias`` lay it out: ``~/.nvm/nvm.sh``,
    ``alias/default`` holding ``default``, the LTS aliases (``lts/*`` -> ``lts/iron`` -> ``v20.20.2``), and each
    of ``installed`` (version -> the program ``versions/node/<version>/bin/node`` links to)."""
    nvm = home / ".nvm"
    (nvm / "alias" / "lts").mkdir(parents=True)
    (nvm / "nvm.sh").write_text("nvm() { :; }\n")
    (nvm / "alias" / "default").write_text(default + "\n")
    (nvm / "alias" / "lts" / "*").write_text("lts/iron\n")
    (nvm / "alias" / "lts" / "iron").write_text("v20.20.2\n")
    for version, program in installed.items():
        target = nvm / "versions" / "node" / version / "bin" / "node"
        target.parent.mkdir(parents=True)
        target.symlink_to(program)
    return nvm


@pytest.mark.parametrize(
    ("default", "picked", "source"),
    [
        ("lts/*", "v20.20.2", "alias/lts/iron"),
        ("20", "v20.20.2", "alias/default"),
        ("v18", "v18.19.1", "alias/default"),
        ("node", "v20.20.2", "alias/default"),
        ("18.2.0", "v18.2.0", "alias/default"),
    ],
)
def test_nvm_follows_its_default_alias_to_an_installed_version(
    tmp_path: Path, default: str, picked: str, source: str
) -> None:
    home = tmp_path / "home"
    nvm = nvm_home(home, default, dict.fromkeys(("v20.20.2", "v18.2.0", "v18.19.1", "v9.11.2"), "/bin/true"))
    found = nvm_program("node", {"HOME": str(home)})
    assert found == Shim(
        "nvm", "node", str(nvm / "nvm.sh"), str(nvm / "versions/node" / picked / "bin/node"), picked, str(nvm / source)
    )
    # Not nvm's command, or no nvm: nothing to say.
    assert nvm_program("python3", {"HOME": str(home)}) is None
    assert nvm_program("node", {"HOME": str(tmp_path)}) is None


@pytest.mark.parametrize(
    ("default", "why"),
    [
        ("../../../../usr", "default names `../../../../usr`, {neither}"),
        ("lts/../../../usr", "default names `lts/../../../usr`, {neither}"),
        ("missing", "missing does not exist (nvm has no default version)"),
        ("system", "default names `system`, {system}"),
        ("22", "default names `22`, which is not installed ({versions}/22/bin/node is no executable)"),
    ],
)
def test_an_nvm_default_hostd_cannot_follow_is_refused_with_its_reason(tmp_path: Path, default: str, why: str) -> None:
    """``alias/default`` is one path component, or ``lts/<name>``: a path through it is refused, as is a
    missing alias, ``system`` and a version not installed, each with its reason."""
    home = tmp_path / "home"
    nvm = nvm_home(home, default, {"v20.20.2": "/bin/true"})
    neither = "which is neither a version nor an nvm alias: hostd does not follow it"
    reason = f"{nvm}/alias/" + why.format(versions=nvm / "versions" / "node", neither=neither, system=SYSTEM)
    assert nvm_program("node", {"HOME": str(home)}) == Shim("nvm", "node", str(nvm / "nvm.sh"), reason=reason)


# -- real launches ----------------------------------------------------------------------------------


def hostd_environment(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """hostd's environment with ``HOME=home`` and its pyenv shims first on ``PATH`` (as a shell with
    ``eval "$(pyenv init -)"`` has them)."""
    env = plugin_environment([str(home / ".pyenv" / "shims")])
    # The machine's own pyenv (if any) is not this test's: its root and version variables would win.
    env = {k: v for k, v in env.items() if not k.startswith(("PYENV_", "ASDF_", "VOLTA_", "MISE_", "NVM_", "XDG_"))}
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
        reason = (
            f"{home}/.pyenv/version names `3.0.0`, which is not installed ({home}/.pyenv/versions/3.0.0/bin/python3 "
            "is no executable)"
        )
        message = (
            f"`python3` is a pyenv shim ({shim}); hostd runs it without the shell's setup, and {reason}: name the "
            f"real program as the command: the path `pyenv which python3` prints in your shell (or put its folder "
            f"before {shim.parent} on hostd's PATH)"
        )
        assert info["launch"]["shim"] == {"manager": "pyenv", "shim": str(shim), "message": message, "reason": reason}
        with pytest.raises(RpcError) as failed:
            await ready(client, folder)
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert failed.value.data["hint"] == message


def node_plugin(tmp_path: Path, plugin_id: str) -> Path:
    """fixtures/mcp-node as a plugin whose command is a bare ``node``."""
    folder = tmp_path / plugin_id
    folder.mkdir()
    shutil.copy(FIXTURES / "mcp-node" / "server.js", folder / "server.js")
    (folder / "plugin.yaml").write_text(
        f"id: {plugin_id}\nname: Node ({plugin_id})\nversion: 1.0.0\npermissions: []\n"
        f"contributes:\n  tools: [{plugin_id}.echo, {plugin_id}.env, {plugin_id}.argv, {plugin_id}.log]\n"
        "backend:\n  type: mcp\n  transport: stdio\n  command: node\n  args: [server.js]\n"
        "  startup_timeout_seconds: 10\n"
    )
    return folder


@pytest.mark.skipif(REAL_NODE is None, reason="node is not installed")
async def test_hostd_runs_the_node_and_python_the_mise_shims_would_pick(tmp_path: Path) -> None:
    """One hostd, mise's shims first on its PATH: ``node`` (``20`` in the global config, mise's link followed)
    and ``python3`` (``MISE_PYTHON_VERSION``) run the installed programs, which really answer; a plugin whose
    own ``mise.toml`` names a path runs the shim, which fails, and the failure's hint says why and what to do."""
    assert REAL_NODE is not None
    home = tmp_path / "home"
    shims = mise_home(
        home, {"node": {"20.20.2": os.path.realpath(REAL_NODE)}, "python": {"3.99.1": REAL_PYTHON, "3.98.0": "/"}}
    )
    installs = home / ".local" / "share" / "mise" / "installs"
    config = home / ".config" / "mise" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[tools]\nnode = "20"\n')
    env = hostd_environment(home, {"MISE_PYTHON_VERSION": "3.99"})
    env["PATH"] = os.pathsep.join([str(shims["node"].parent), env["PATH"]])
    node, python, refused = node_plugin(tmp_path, "mise-node"), plugin_copy(tmp_path), node_plugin(tmp_path, "mise-x")
    (refused / "mise.toml").write_text('[tools]\nnode = "../../../../../usr"\n')
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state")], env=env) as client:
        info = await client.request("plugins/install", {"path": str(node)})
        real = installs / "node" / "20.20.2" / "bin" / "node"
        assert (info["launch"]["executable"], info["launch"]["shim"]) == (
            str(real),
            {
                "manager": "mise",
                "shim": str(shims["node"]),
                "resolved": str(real),
                "version": "20.20.2",
                "source": str(config),
                "message": f"`node` is a mise shim ({shims['node']}); hostd runs it without the shell's setup, so it "
                f"runs {real} (mise version 20.20.2, from {config})",
            },
        )
        assert (await ready(client, node))["status"] == "ready"
        called = await client.request("tools/call", {"name": "mise-node.echo", "arguments": {"text": "via mise"}})
        assert called["content"] == [{"type": "text", "text": "via mise"}]

        info = await client.request("plugins/install", {"path": str(python)})
        real = installs / "python" / "3.99.1" / "bin" / "python3"
        assert info["launch"]["executable"] == str(real)
        assert info["launch"]["shim"]["source"] == "MISE_PYTHON_VERSION"
        assert (await ready(client, python))["status"] == "ready"
        called = await client.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "python too"}})
        assert called["content"] == [{"type": "text", "text": "python too"}]

        info = await client.request("plugins/install", {"path": str(refused)})
        reason = (
            f"{refused / 'mise.toml'} names `../../../../../usr`, which is not one folder name in "
            f"{installs / 'node'}: hostd does not follow it"
        )
        message = (
            f"`node` is a mise shim ({shims['node']}); hostd runs it without the shell's setup, and {reason}: name "
            f"the real program as the command: the path `mise which node` prints in your shell (or put its folder "
            f"before {shims['node'].parent} on hostd's PATH)"
        )
        assert (info["launch"]["executable"], info["launch"]["shim"]) == (
            str(shims["node"]),
            {"manager": "mise", "shim": str(shims["node"]), "message": message, "reason": reason},
        )
        with pytest.raises(RpcError) as failed:
            await ready(client, refused)
        assert (failed.value.kind, failed.value.data["hint"]) == ("PLUGIN_START_FAILED", message)


@pytest.mark.skipif(REAL_NODE is None, reason="node is not installed")
async def test_hostd_runs_nvms_default_node_when_no_path_has_node(tmp_path: Path) -> None:
    """nvm's node is on no PATH hostd has (its own holds only its interpreter's folder; no login PATH): hostd
    follows ``alias/default`` (``lts/*`` -> ``lts/iron`` -> ``v20.20.2``) and runs that node, which answers. With
    the alias changed to a path, the next plugin's launch is unresolved, says why, and enabling it fails with
    the fix as its hint."""
    assert REAL_NODE is not None
    home = tmp_path / "home"
    nvm = nvm_home(home, "lts/*", {"v20.20.2": os.path.realpath(REAL_NODE)})
    env = {**hostd_environment(home), "PATH": os.path.dirname(sys.executable)}
    args = ["--state-dir", str(tmp_path / "state"), "--no-login-path"]
    node, other = node_plugin(tmp_path, "nvm-node"), node_plugin(tmp_path, "nvm-x")
    async with HostdClient.spawn(args, env=env) as client:
        info = await client.request("plugins/install", {"path": str(node)})
        real = nvm / "versions" / "node" / "v20.20.2" / "bin" / "node"
        assert (info["launch"]["executable"], info["launch"]["shim"]) == (
            str(real),
            {
                "manager": "nvm",
                "shim": str(nvm / "nvm.sh"),
                "resolved": str(real),
                "version": "v20.20.2",
                "source": str(nvm / "alias" / "lts" / "iron"),
                "message": f"`node` is on no PATH hostd has: nvm ({nvm / 'nvm.sh'}) puts it there only in a shell "
                f"that loaded nvm, so it runs {real} (nvm version v20.20.2, from {nvm / 'alias' / 'lts' / 'iron'})",
            },
        )
        assert (await ready(client, node))["status"] == "ready"
        called = await client.request("tools/call", {"name": "nvm-node.echo", "arguments": {"text": "via nvm"}})
        assert called["content"] == [{"type": "text", "text": "via nvm"}]

        (nvm / "alias" / "default").write_text("../../../../usr\n")
        info = await client.request("plugins/install", {"path": str(other)})
        reason = (
            f"{nvm / 'alias' / 'default'} names `../../../../usr`, which is neither a version nor an nvm alias: "
            "hostd does not follow it"
        )
        message = (
            f"`node` is on no PATH hostd has: nvm ({nvm / 'nvm.sh'}) puts it there only in a shell that loaded nvm, "
            f"and {reason}: name the real program as the command: the path `nvm which default` prints in your shell "
            "(or put its folder on hostd's PATH, or choose an installed version with `nvm alias default VERSION`)"
        )
        assert info["launch"] == {
            "error": f"command 'node' not found on PATH={os.path.dirname(sys.executable)!r}",
            "kind": "COMMAND_NOT_FOUND",
            "shim": {"manager": "nvm", "shim": str(nvm / "nvm.sh"), "message": message, "reason": reason},
        }
        assert launch_details(info) == [  # what hostctl approve and install show
            ("launch", f"cannot be resolved (COMMAND_NOT_FOUND): {info['launch']['error']}"),
            ("shim", message),
        ]
        with pytest.raises(RpcError) as failed:
            await client.request("plugins/enable", {"id": "nvm-x"})
        assert (failed.value.kind, failed.value.data["hint"]) == ("PLUGIN_START_FAILED", message)
