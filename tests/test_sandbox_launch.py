"""Launch resolution: PATH lookup, plugin-folder containment, a stable digest."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
import tempfile
from pathlib import Path

import pytest

from sandbox.environment import EnvPolicy
from sandbox.launch import DEFAULT_ISOLATION, Launch, LaunchError, plugin_tmpdir, resolve_launch


def make_exe(path: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    folder = tmp_path / "plugin"
    make_exe(folder / "bin" / "server")
    return folder


@pytest.fixture
def host(tmp_path: Path) -> dict[str, str]:
    tools = tmp_path / "tools"
    make_exe(tools / "mytool")
    return {"PATH": f"relative:{tools}:/usr/bin:/bin", "HOME": "/home/ada", "OPENAI_API_KEY": "sk-x"}


def resolve(
    plugin: Path,
    host: dict[str, str],
    command: str,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    policy: EnvPolicy | None = None,
) -> Launch:
    return resolve_launch(command, args or [], plugin, env or {}, policy or EnvPolicy(), host_env=host, tmpdir="/tmp/t")


def test_bare_name_is_found_on_the_trimmed_path(plugin: Path, host: dict[str, str], tmp_path: Path) -> None:
    launch = resolve(plugin, host, "mytool", ["--flag", "a b"])
    assert launch.command == "mytool"
    assert launch.executable == str(tmp_path / "tools" / "mytool")
    assert launch.args == ("--flag", "a b")
    assert launch.argv == ["mytool", "--flag", "a b"]
    assert launch.cwd == os.path.realpath(plugin)
    assert launch.isolation == DEFAULT_ISOLATION
    assert launch.env["PATH"] == f"{tmp_path / 'tools'}:/usr/bin:/bin"
    assert "OPENAI_API_KEY" not in launch.env
    assert launch.env_keys == ["HOME", "PATH", "PYTHONUNBUFFERED", "PYTHONUTF8", "TMPDIR"]


def test_bare_name_is_not_looked_up_in_the_plugin_folder(plugin: Path, host: dict[str, str]) -> None:
    make_exe(plugin / "only-here")
    with pytest.raises(LaunchError) as info:
        resolve(plugin, host, "only-here")
    assert info.value.kind == "COMMAND_NOT_FOUND"


def test_not_found_names_command_and_searched_path(plugin: Path, host: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(LaunchError) as info:
        resolve(plugin, host, "definitely-not-installed-xyz")
    assert info.value.kind == "COMMAND_NOT_FOUND"
    assert info.value.command == "definitely-not-installed-xyz"
    assert str(info.value) == (
        f"command 'definitely-not-installed-xyz' not found on PATH='{tmp_path / 'tools'}:/usr/bin:/bin'"
    )


def test_manifest_path_is_refused_unless_loader_vars_are_allowed(plugin: Path, host: dict[str, str]) -> None:
    with pytest.raises(LaunchError, match=r"manifest env sets PATH, a variable of the executable search path") as info:
        resolve(plugin, host, "npx", env={"PATH": "/nonexistent:rel"})
    assert info.value.kind == "ENV_POLICY"
    with pytest.raises(LaunchError, match=r"npx.*PATH='/nonexistent'") as info:
        resolve(plugin, host, "npx", env={"PATH": "/nonexistent:rel"}, policy=EnvPolicy(allow_loader_vars=True))
    assert info.value.kind == "COMMAND_NOT_FOUND"


def test_relative_path_command_resolves_inside_plugin(plugin: Path, host: dict[str, str]) -> None:
    launch = resolve(plugin, host, "./bin/server")
    assert launch.executable == os.path.realpath(plugin / "bin" / "server")
    assert launch.command == "./bin/server"
    assert resolve(plugin, host, "bin/server").executable == launch.executable


def test_symlink_inside_plugin_is_resolved(plugin: Path, host: dict[str, str]) -> None:
    (plugin / "run").symlink_to("bin/server")
    assert resolve(plugin, host, "./run").executable == os.path.realpath(plugin / "bin" / "server")


@pytest.mark.parametrize("command", ["../outside", "./bin/../../outside"])
def test_path_escaping_plugin_is_rejected(plugin: Path, host: dict[str, str], command: str) -> None:
    make_exe(plugin.parent / "outside")
    with pytest.raises(LaunchError, match="outside the plugin folder") as info:
        resolve(plugin, host, command)
    assert info.value.kind == "COMMAND_OUTSIDE_PLUGIN"
    assert command in str(info.value)


def test_absolute_command_is_the_users_own_program_kept_unresolved(plugin: Path, host: dict[str, str]) -> None:
    """A venv's ``python`` links to its base interpreter; run unresolved, it still finds ``pyvenv.cfg``."""
    venv = plugin.parent / "project" / ".venv"
    make_exe(venv / "base" / "python3.11", "#!/bin/sh\nexit 0\n")
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(venv / "base" / "python3.11")
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    launch = resolve(plugin, host, str(venv / "bin" / "python"), ["server.py"])
    assert launch.executable == str(venv / "bin" / "python")
    assert launch.runtime == (str(venv / "base" / "python3.11"), os.path.realpath("/bin/sh"))
    assert resolve(plugin, host, "/usr/bin/env").executable == "/usr/bin/env"


def test_symlink_escaping_plugin_is_rejected(plugin: Path, host: dict[str, str]) -> None:
    make_exe(plugin.parent / "outside")
    (plugin / "escape").symlink_to(plugin.parent / "outside")
    with pytest.raises(LaunchError) as info:
        resolve(plugin, host, "./escape")
    assert info.value.kind == "COMMAND_OUTSIDE_PLUGIN"
    (plugin / "dirlink").symlink_to("/usr/bin")
    with pytest.raises(LaunchError) as info:
        resolve(plugin, host, "dirlink/env")
    assert info.value.kind == "COMMAND_OUTSIDE_PLUGIN"


def test_missing_and_non_executable_path_commands(plugin: Path, host: dict[str, str]) -> None:
    with pytest.raises(LaunchError, match="No such file or directory") as info:
        resolve(plugin, host, "./bin/missing")
    assert info.value.kind == "COMMAND_NOT_FOUND"
    (plugin / "data.txt").write_text("x")
    with pytest.raises(LaunchError, match="not executable") as info:
        resolve(plugin, host, "./data.txt")
    assert info.value.kind == "COMMAND_NOT_FOUND"
    with pytest.raises(LaunchError, match="not a file") as info:
        resolve(plugin, host, "./bin")
    assert info.value.kind == "COMMAND_NOT_FOUND"


def test_env_policy_violation_is_a_launch_error(plugin: Path, host: dict[str, str]) -> None:
    with pytest.raises(LaunchError, match="LD_PRELOAD") as info:
        resolve(plugin, host, "mytool", env={"LD_PRELOAD": "/x.so"})
    assert info.value.kind == "ENV_POLICY"
    launch = resolve(plugin, host, "mytool", env={"LD_PRELOAD": "/x.so"}, policy=EnvPolicy(allow_loader_vars=True))
    assert launch.env["LD_PRELOAD"] == "/x.so"


def test_missing_plugin_folder_and_nul_argument(tmp_path: Path, host: dict[str, str]) -> None:
    with pytest.raises(LaunchError, match="missing") as info:
        resolve(tmp_path / "nope", host, "mytool")
    assert info.value.kind == "EXEC_FAILED"
    (tmp_path / "p").mkdir()
    with pytest.raises(LaunchError, match="NUL") as info:
        resolve(tmp_path / "p", host, "mytool", ["a\0b"])
    assert info.value.kind == "EXEC_FAILED"


def test_digest_is_stable_and_ignores_host_values(plugin: Path, host: dict[str, str], tmp_path: Path) -> None:
    first = resolve(plugin, host, "./bin/server", ["-v"], {"MODE": "x"})
    again = resolve(plugin, host, "./bin/server", ["-v"], {"MODE": "x"})
    assert first.digest == again.digest
    assert first.digest.startswith("sha256:")
    assert len(first.digest) == len("sha256:") + 64
    moved_home = resolve(
        plugin, {**host, "HOME": "/elsewhere", "PATH": "/usr/bin"}, "./bin/server", ["-v"], {"MODE": "x"}
    )
    assert moved_home.digest == first.digest


def test_digest_changes_with_args_env_keys_manifest_env_and_executable(plugin: Path, host: dict[str, str]) -> None:
    base = resolve(plugin, host, "./bin/server", ["-v"], {"MODE": "x"})
    make_exe(plugin / "bin" / "other")
    variants = [
        resolve(plugin, host, "./bin/server", ["-vv"], {"MODE": "x"}),
        resolve(plugin, host, "./bin/server", ["-v"], {"MODE": "y"}),
        resolve(plugin, host, "./bin/server", ["-v"], {"MODE": "x", "EXTRA": ""}),
        resolve(plugin, {**host, "LANG": "C"}, "./bin/server", ["-v"], {"MODE": "x"}),
        resolve(plugin, host, "./bin/other", ["-v"], {"MODE": "x"}),
    ]
    digests = {base.digest, *(v.digest for v in variants)}
    assert len(digests) == 6
    assert dataclasses.replace(base, isolation=("session",)).digest != base.digest
    assert dataclasses.replace(base, executable="/other").digest != base.digest


def test_describe_shape(plugin: Path, host: dict[str, str]) -> None:
    """The approval shows every value the user approves; a secret by name only (its value is in the digest)."""
    launch = resolve(plugin, host, "mytool", ["x"], {"MODE": "fast", "API_TOKEN": "secret-value"})
    described = launch.describe()
    tool = str(Path(host["PATH"].split(":")[1]) / "mytool")
    assert described == {
        "command": "mytool",
        "executable": launch.executable,
        "runtime": [tool, os.path.realpath("/bin/sh")],
        "args": ["x"],
        "files": {tool: "sha256:" + hashlib.sha256(b"#!/bin/sh\nexit 0\n").hexdigest()},
        "folders": {},
        "cwd": launch.cwd,
        "envKeys": ["API_TOKEN", "HOME", "MODE", "PATH", "PYTHONUNBUFFERED", "PYTHONUTF8", "TMPDIR"],
        "env": {"API_TOKEN": None, "MODE": "fast"},
        "isolation": list(DEFAULT_ISOLATION),
        "digest": launch.digest,
    }
    assert "secret-value" not in repr(described)
    other = resolve(plugin, host, "mytool", ["x"], {"MODE": "fast", "API_TOKEN": "other-value"})
    assert other.digest != launch.digest
    hash(launch)  # usable as a dict key despite the mappings


def test_default_tmpdir_is_private(plugin: Path, host: dict[str, str]) -> None:
    launch = resolve_launch("mytool", [], plugin, {}, EnvPolicy(), host_env=host)
    tmpdir = launch.env["TMPDIR"]
    assert tmpdir == plugin_tmpdir(plugin)
    st = os.lstat(tmpdir)
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.geteuid()
    os.rmdir(tmpdir)


def test_planted_tmpdir_symlink_is_not_followed(plugin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    expected = plugin_tmpdir(plugin)
    os.rmdir(expected)
    target = tmp_path / "attacker"
    target.mkdir()
    os.symlink(target, expected)
    got = plugin_tmpdir(plugin)
    assert got != expected
    assert os.path.dirname(got) == str(tmp_path)
    assert stat.S_IMODE(os.lstat(got).st_mode) == 0o700


def test_home_in_arguments_reaches_the_program_expanded(plugin: Path, host: dict[str, str]) -> None:
    """What the launch shows and hashes is what runs: an interpreter given ``~/srv/server.py`` would look
    for a folder named ``~`` (no shell expands it). Members of the class: ``~``, ``~/x``, ``${HOME}/x``,
    ``$HOME/x``, ``--opt=~/x``; left alone: another user's ``~bob/x``, text, a ``~`` inside a word."""
    args = ["~", "~/srv/server.py", "${HOME}/a", "$HOME/b", "--root=~/docs", "~bob/x", "hello~/x", "-v"]
    launch = resolve(plugin, host, "bin/server", args)
    assert launch.args == (
        "/home/ada",
        "/home/ada/srv/server.py",
        "/home/ada/a",
        "/home/ada/b",
        "--root=/home/ada/docs",
        "~bob/x",
        "hello~/x",
        "-v",
    )
    assert launch.argv == [launch.command, *launch.args]
