"""What a fresh user found in hostctl, each as a class: errors name hostctl's own command, a launch
that cannot run is the first thing said, a second import tells the truth and the next steps, a
plugin's line is printed once, ``status`` counts enabled tools, ``logs`` says something true."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import yaml

from hostd.cli.client import plugin_environment
from hostd.cli.render import next_command
from tests.conftest import ECHO, HOSTCTL, ROOT, MakePlugin, run_hostctl, run_quietly


async def hostctl(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m hostd.cli.hostctl *args --state-dir state`` (secrets in the 0600 file); both streams captured."""
    return await run_hostctl(state, *args, env={**os.environ, "HOSTD_SECRETS": "file"}, timeout=timeout)


async def ready_echo(state: Path, make_plugin: MakePlugin) -> Path:
    folder = make_plugin()
    for verb in (["install", str(folder)], ["grant", "mcp-echo", "--all"], ["approve", "mcp-echo", "--yes"]):
        assert (await hostctl(state, *verb)).returncode == 0
    return folder


async def test_an_error_hostctl_can_fix_ends_with_the_hostctl_command(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """Members of the class: a disabled tool (hostd says tools/setEnabled), a launch not approved
    (plugins/approve), a permission not granted; each names the hostctl command, never only a method."""
    state = tmp_path / "state"
    folder = make_plugin()
    assert (await hostctl(state, "install", str(folder))).returncode == 0
    typed = f"{HOSTCTL} --state-dir {state}"  # how every next: line names hostctl here
    not_granted = await hostctl(state, "enable", "mcp-echo")
    assert "error: PERMISSION_NOT_GRANTED" in not_granted.stderr
    assert not_granted.stderr.splitlines()[-1] == f"  next: {typed} grant mcp-echo --all, then {typed} enable mcp-echo"
    assert (await hostctl(state, "grant", "mcp-echo", "--all")).returncode == 0
    not_approved = await hostctl(state, "enable", "mcp-echo")
    assert "error: MCP_TRUST_APPROVAL_REQUIRED" in not_approved.stderr
    assert not_approved.stderr.splitlines()[-1] == f"  next: {typed} approve mcp-echo, then {typed} enable mcp-echo"
    assert (await hostctl(state, "approve", "mcp-echo", "--yes")).returncode == 0
    assert (await hostctl(state, "disable", "mcp-echo.environment")).returncode == 0
    assert (await hostctl(state, "enable", "mcp-echo")).returncode == 0
    disabled = await hostctl(state, "call", "mcp-echo", "environment")
    assert disabled.returncode == 1
    assert "error: TOOL_DISABLED: mcp-echo.environment is disabled" in disabled.stderr
    assert disabled.stderr.splitlines()[-1] == f"  next: {HOSTCTL} --state-dir {state} enable mcp-echo.environment"
    # The same table answers for kinds a test cannot reach cheaply (a package launch not prepared).
    assert next_command("PLUGIN_NOT_PREPARED", {"plugin": "web"}, "/p/web") == (
        "hostctl enable web (it installs the packages), then hostctl approve web"
    )
    gave_up = {"plugin": "web", "reason": "gave up after 5 restarts within 60 s; use plugins/restart"}
    assert next_command("PLUGIN_START_FAILED", gave_up, "/p/web") == "hostctl restart web"
    assert next_command("CONFIG_REQUIRED", {"plugin": "web"}, "/p/web") is None  # no hostctl verb for it


async def test_status_and_restart_name_the_hostctl_command(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """More members: a restore refused for a grant taken back (status shows hostd's reason, then the
    command), and restart of a plugin that is not enabled (hostd says "enable it instead")."""
    state = tmp_path / "state"
    await ready_echo(state, make_plugin)
    not_enabled = await hostctl(state, "restart", "mcp-echo")
    assert not_enabled.returncode == 1
    assert not_enabled.stderr.splitlines()[-2:] == [
        "error: PLUGIN_STATE_CONFLICT: mcp-echo is not enabled: there is nothing to restart",
        f"  next: {HOSTCTL} --state-dir {state} enable mcp-echo",
    ]
    assert (await hostctl(state, "enable", "mcp-echo")).returncode == 0
    assert (await hostctl(state, "grant", "mcp-echo", "echo.use")).returncode == 0
    refused = await hostctl(state, "status")
    assert refused.returncode == 1
    assert " ".join(refused.stderr.split()).endswith(  # unfolded: rich folds a long line
        "error: mcp-echo is enabled but error: plugin mcp-echo needs permissions not granted: echo.inspect"
        f" next: {HOSTCTL} --state-dir {state} grant mcp-echo --all, then {HOSTCTL} --state-dir {state} enable mcp-echo"
    )


async def test_a_launch_that_cannot_run_comes_before_every_other_step(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """``command: pyhton3`` in a plugin that also needs a grant: install, enable (not granted) and
    approve all say the launch cannot run and how to fix it, never "grant" first."""
    state = tmp_path / "state"
    folder = make_plugin(backend={"command": "pyhton3"})
    installed = await hostctl(state, "install", str(folder))
    assert installed.returncode == 0, installed.stderr
    fix = f"fix the command in the manifest in {folder}"
    # (rich folds a line longer than 200 columns: compare the words)
    assert " ".join(installed.stdout.split()).endswith(
        f"next: its launch cannot run (COMMAND_NOT_FOUND): {fix}: {HOSTCTL} --state-dir {state} install {folder}"
    )
    enabled = await hostctl(state, "enable", "mcp-echo")
    assert enabled.returncode == 1
    assert "error: PLUGIN_START_FAILED: plugin mcp-echo failed to start: command 'pyhton3' not found" in enabled.stderr
    assert "PERMISSION_NOT_GRANTED" not in enabled.stderr
    assert enabled.stderr.splitlines()[-1] == f"  next: {fix}, then {HOSTCTL} --state-dir {state} install {folder}"
    approved = await hostctl(state, "approve", "mcp-echo", "--yes")
    assert approved.returncode == 1
    assert approved.stderr.splitlines()[-1] == f"  next: {fix}, then {HOSTCTL} --state-dir {state} install {folder}"
    # Fixed and installed again: the next step is the grant.
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["command"] = "python3"
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest))
    again = await hostctl(state, "install", str(folder))
    assert again.returncode == 0, again.stderr
    assert "launch cannot run" not in again.stdout


async def test_a_second_import_tells_the_truth_and_the_next_steps(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = tmp_path / "claude_desktop_config.json"

    def write(key: str) -> None:
        server = {"command": "python3", "args": [str(ECHO / "server.py")], "env": {"API_KEY": key}}
        config.write_text(json.dumps({"mcpServers": {"echo": server, "other": {**server, "env": {}}}}))

    write("sk-first-0123456789abcdef")
    first = await hostctl(state, "import", str(config))
    assert first.returncode == 0, first.stderr
    assert "kept API_KEY in the secret store" in first.stdout
    place = f"secret store: {state / 'secrets' / 'secrets.json'} (mode 0600, readable by you only)"
    assert first.stdout.count(place) == 1
    nexts = [line for line in first.stdout.splitlines() if line.startswith("next:")]
    assert nexts == [
        f"next: echo: review and approve its launch: {HOSTCTL} --state-dir {state} approve echo",
        f"next: other: review and approve its launch: {HOSTCTL} --state-dir {state} approve other",
        f"next: echo: then start it: {HOSTCTL} --state-dir {state} enable echo",
        f"next: other: then start it: {HOSTCTL} --state-dir {state} enable other",
    ]

    # Same config again: nothing stored again, nothing installed, the same steps still named.
    assert (await hostctl(state, "approve", "other", "--yes")).returncode == 0
    second = await hostctl(state, "import", str(config))
    assert second.returncode == 0, second.stderr
    assert "in the secret store" not in second.stdout.replace(place, "")
    assert "nothing new was installed" in second.stdout
    nexts = [line for line in second.stdout.splitlines() if line.startswith("next:")]
    assert nexts == [
        f"next: echo: review and approve its launch: {HOSTCTL} --state-dir {state} approve echo",
        f"next: other: start it: {HOSTCTL} --state-dir {state} enable other",
        f"next: echo: then start it: {HOSTCTL} --state-dir {state} enable echo",
    ]

    # A new key for the same server: said once, as an update.
    write("sk-second-0123456789abcdef")
    third = await hostctl(state, "import", str(config))
    assert third.returncode == 0, third.stderr
    assert "secret API_KEY updated in the secret store" in third.stdout
    assert "kept API_KEY" not in third.stdout


async def test_a_plugin_line_is_printed_once(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """A plugin that fails at start with one stderr line: enable prints the line once (not again
    under "stderr tail:"), and so does enable again (it tries again); a later reading command does not
    start it, so prints no line of it, and says nothing comes back (issue 28)."""
    state = tmp_path / "state"
    line = "ModuleNotFoundError: No module named 'polish_missing'"
    code = f"import sys; sys.stderr.write({line!r} + '\\n'); sys.stderr.flush(); sys.exit(1)"
    folder = make_plugin(backend={"args": ["-c", code]}, permissions=[])
    for verb in (["install", str(folder)], ["approve", "mcp-echo", "--yes"]):
        assert (await hostctl(state, *verb)).returncode == 0
    failed = await hostctl(state, "enable", "mcp-echo")
    assert failed.returncode == 1
    assert "error: PLUGIN_START_FAILED" in failed.stderr
    assert failed.stderr.count(line) == 1, failed.stderr
    again = await hostctl(state, "enable", "mcp-echo")
    assert again.returncode == 1
    assert again.stderr.count(line) == 1, again.stderr
    later = await hostctl(state, "list")
    assert later.stderr.count(line) == 0, later.stderr
    assert "failed to start again" not in later.stderr
    assert later.stdout.splitlines()[2].split()[:5] == ["mcp-echo", "1.0.0", "-", "error", "yes"]


async def test_status_counts_enabled_tools_of_all(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    await ready_echo(state, make_plugin)
    enabled = await hostctl(state, "enable", "mcp-echo")
    assert enabled.stdout.splitlines()[2].split()[:4] == ["mcp-echo", "ready", "yes", "7/7"]
    assert (await hostctl(state, "disable", "mcp-echo.environment")).returncode == 0
    status = await hostctl(state, "status")  # starts nothing: tools are counted while it runs
    assert status.stdout.splitlines()[2].split()[:4] == ["mcp-echo", "stopped", "yes", "-"]
    restarted = await hostctl(state, "restart", "mcp-echo")
    assert restarted.stdout.splitlines()[2].split()[:4] == ["mcp-echo", "ready", "yes", "6/7"]


async def test_logs_says_something_true_when_there_are_no_lines(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """The plain echo server writes nothing to stderr: enabled and ready, its logs are empty,
    and the text says why; not enabled, the text says it was not started and how to see a start."""
    state = tmp_path / "state"
    await ready_echo(state, make_plugin)
    stopped = await hostctl(state, "logs", "mcp-echo")
    assert " ".join(stopped.stdout.split()) == (
        "mcp-echo: no log lines: it has not written any since it was installed (it is not enabled) "
        f"next: see its start-up lines: {HOSTCTL} --state-dir {state} enable mcp-echo"
    )
    assert (await hostctl(state, "enable", "mcp-echo")).returncode == 0
    ready = await hostctl(state, "logs", "mcp-echo")  # logs starts nothing: enabled, stopped here
    assert " ".join(ready.stdout.split()) == (
        "mcp-echo: no log lines: it has written nothing to stderr and sent no MCP log message since it was "
        "installed (stopped)"
    )


async def test_prepare_sh_prints_no_npm_update_banner(tmp_path: Path) -> None:
    """manifests/prepare.sh's output is about the pins: an npm that would print its "New minor
    version" notice (as npm does unless npm_config_update_notifier=false) prints none through it."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "npm").write_text(
        "#!/bin/sh\n"
        '[ "$npm_config_update_notifier" = "false" ] || '
        'echo "npm notice New minor version of npm available! 10.8.2 -> 10.9.0" >&2\n'
        'echo "${2##*@}"\n'  # `npm view NAME@VERSION version`: the registry has it
    )
    (fake / "npm").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "UV_OFFLINE": "1"}
    with trio.fail_after(120):
        done = await trio.run_process(
            ["bash", str(ROOT / "manifests" / "prepare.sh")], env=env, capture_stdout=True, capture_stderr=True
        )
    output = done.stdout.decode() + done.stderr.decode()
    assert "npm notice" not in output
    assert "the npm registry does not serve" not in output  # the fake npm was the one asked


@pytest.mark.real_server
async def test_enable_installs_the_packages_it_needs(tmp_path: Path) -> None:
    """README: an npx/uvx plugin's packages are installed by plugins/prepare, "hostctl enable does
    it for you". A plugin whose prepared environment is gone (or never made) is prepared by enable,
    not refused with PLUGIN_NOT_PREPARED naming a method hostctl has no verb for."""
    state, home = tmp_path / "state", tmp_path / "home"
    home.mkdir()
    env = {**plugin_environment(), "HOME": str(home), "XDG_STATE_HOME": str(home / ".local" / "state")}

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        return await run_hostctl(state, *args, env=env, timeout=300)

    assert (await run("install", str(ROOT / "manifests" / "server-memory"))).returncode == 0
    assert (await run("approve", "server-memory", "--yes")).returncode == 0
    shutil.rmtree(state / "prepared" / "server-memory")
    enabled = await run("enable", "server-memory")
    stderr = enabled.stderr
    assert enabled.returncode == 0, stderr
    assert "hostctl: installing the packages of server-memory: done in" in stderr
    assert enabled.stdout.splitlines()[2].split()[:4] == ["server-memory", "ready", "yes", "9/9"]


async def test_a_next_command_run_word_for_word_acts_on_the_same_state_folder(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """A fresh user ran ``hostctl --state-dir DIR import ...``, then its ``next:`` line word for word: it went to
    the default state folder (PLUGIN_NOT_FOUND). Every printed command now carries the ``--state-dir`` the
    user typed. Members: an install's grant step, an error's fix line; HOME is a fresh folder, so the
    default state folder exists nowhere the commands could find the plugin by accident."""
    state, home = tmp_path / "state dir", tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOSTD_SECRETS": "file", "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    folder = make_plugin()
    base = [sys.executable, "-m", "hostd.cli.hostctl"]
    typed = f"{HOSTCTL} --state-dir {shlex.quote(str(state))}"

    def last_next(output: str) -> str:
        """The last ``next:`` line's text, unfolded (rich folds a long line)."""
        return " ".join(output.split()).rsplit("next: ", 1)[1]

    installed = await run_quietly([*base, "--state-dir", str(state), "install", str(folder)], env=env, timeout=120)
    assert last_next(installed.stdout) == f"review and approve its launch: {typed} approve mcp-echo"
    approve = shlex.split(last_next(installed.stdout).split(": ", 1)[1])
    approved = await run_quietly([*approve, "--yes"], env=env, timeout=120)  # as printed
    assert approved.returncode == 0, approved.stderr
    refused = await run_quietly([*base, "--state-dir", str(state), "enable", "mcp-echo"], env=env, timeout=120)
    assert last_next(refused.stderr) == f"{typed} grant mcp-echo --all, then {typed} enable mcp-echo"
    for step in last_next(refused.stderr).split(", then "):
        done = await run_quietly(shlex.split(step), env=env, timeout=120)  # as printed
        assert done.returncode == 0, done.stderr
    assert not (home / "data").exists()  # nothing went to the default state folder
