"""hostctl driven as a person would: every verb on one state folder, --json parsed, the restore
race, the progress display (also under tmux), and the guard against another state's folders."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, plugin_environment
from tests.conftest import ECHO, HOSTCTL, ROOT, MakePlugin, hostctl_on_a_terminal, run_hostctl
from tests.test_hostctl import hostile_plugin


async def hostctl(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m hostd.cli.hostctl *args --state-dir state``; both streams captured, stdin empty (no terminal)."""
    return await run_hostctl(state, *args, timeout=timeout)


async def as_json(state: Path, *args: str) -> Any:
    done = await hostctl(state, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_every_verb_from_install_to_uninstall(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    folder = make_plugin(variant="slow-start", args=["--delay", "0.05"])
    assert await as_json(state, "list") == {"plugins": []}

    info = await as_json(state, "install", str(folder))
    assert (info["id"], info["enabled"], info["status"], info["launch"]["approved"]) == (
        "mcp-echo",
        False,
        "stopped",
        False,
    )
    granted = await as_json(state, "grant", "mcp-echo", "--all")
    assert granted["granted"] == ["echo.inspect", "echo.use"]
    approved = await as_json(state, "approve", "mcp-echo", "--yes")
    assert approved["launch"]["approved"] is True
    assert approved["launch"]["digest"] == info["launch"]["digest"]

    enabled = await as_json(state, "enable", "mcp-echo")
    assert (enabled["plugin_id"], enabled["status"], enabled["tools_count"]) == ("mcp-echo", "ready", 7)
    statuses = await as_json(state, "status")  # reading commands start nothing (issue 28)
    assert [(s["plugin_id"], s["status"]) for s in statuses["plugins"]] == [("mcp-echo", "stopped")]
    listed = await as_json(state, "list")
    assert [(p["id"], p["enabled"], p["status"]) for p in listed["plugins"]] == [("mcp-echo", True, "stopped")]

    tools = await as_json(state, "tools", "mcp-echo")  # reading: its hostd starts no plugin, so lists none
    assert tools["tools"] == []
    hidden = await as_json(state, "disable", "mcp-echo.sleep")
    assert (hidden["name"], hidden["enabled"]) == ("mcp-echo.sleep", False)

    called = await as_json(state, "call", "mcp-echo", "echo", '{"text": "hi"}')
    assert called["structuredContent"] == {"text": "hi", "length": 2}
    refused = await hostctl(state, "call", "mcp-echo", "mcp-echo.sleep", '{"seconds": 0}')
    assert refused.returncode == 1
    assert "error: TOOL_DISABLED: mcp-echo.sleep is disabled" in refused.stderr
    shown = await as_json(state, "enable", "mcp-echo.sleep")
    assert shown["enabled"] is True

    restarted = await as_json(state, "restart", "mcp-echo")
    assert (restarted["status"], restarted["restarts"]) == ("ready", 1)
    logs = await as_json(state, "logs", "mcp-echo")
    # This hostd started the plugin at restore and again at restart: each start wrote its line.
    assert [line["message"] for line in logs["lines"] if line["source"] == "stderr"].count("loading 1") >= 1
    human_logs = await hostctl(state, "logs", "mcp-echo")
    assert "stderr" in human_logs.stdout and "loading 1" in human_logs.stdout

    stopped = await as_json(state, "disable", "mcp-echo")
    assert stopped["status"] == "stopped"
    listed = await as_json(state, "list")
    assert [(p["id"], p["enabled"]) for p in listed["plugins"]] == [("mcp-echo", False)]
    assert await as_json(state, "uninstall", "mcp-echo") is None
    assert await as_json(state, "list") == {"plugins": []}


async def test_human_output_names_the_next_command(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    folder = make_plugin()
    installed = await hostctl(state, "install", str(folder))
    assert installed.returncode == 0, installed.stderr
    assert f"next: review and approve its launch: {HOSTCTL} --state-dir {state} approve mcp-echo" in installed.stdout

    # No terminal and no --yes: nothing is approved, the launch was shown, the exit says why.
    asked = await hostctl(state, "approve", "mcp-echo")
    assert asked.returncode == 1
    assert "mcp-echo would run:" in asked.stderr
    assert "server.py" in asked.stderr and "digest" in asked.stderr
    assert "error: NOT_APPROVED: approving needs a yes" in asked.stderr
    listed = await as_json(state, "list")
    assert listed["plugins"][0]["launch"]["approved"] is False

    typed = f"{HOSTCTL} --state-dir {state}"  # how every next: line names hostctl here
    not_yet = await hostctl(state, "enable", "mcp-echo")
    assert not_yet.returncode == 1
    assert "error: PERMISSION_NOT_GRANTED" in not_yet.stderr
    assert f"next: {typed} grant mcp-echo --all, then {typed} enable mcp-echo" in not_yet.stderr
    granted = await hostctl(state, "grant", "mcp-echo", "--all")
    assert f"next: review and approve its launch: {typed} approve mcp-echo" in granted.stdout
    not_approved = await hostctl(state, "enable", "mcp-echo")
    assert f"next: {typed} approve mcp-echo, then {typed} enable mcp-echo" in not_approved.stderr
    approved = await hostctl(state, "approve", "mcp-echo", "--yes")
    assert f"next: start it: {typed} enable mcp-echo" in approved.stdout

    missing = await hostctl(state, "enable", "nope")
    assert missing.returncode == 1
    assert missing.stderr.strip().endswith(
        f"error: PLUGIN_NOT_FOUND: no installed plugin 'nope' (installed: mcp-echo); state folder searched: {state}"
    )
    usage = await hostctl(state, "grant", "mcp-echo")
    assert usage.returncode == 2
    assert "name the permissions to grant, or --all" in usage.stderr


async def test_import_tells_the_next_step_and_its_command(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {"echo": {"command": "python3", "args": [str(ECHO / "server.py")]}}}))
    done = await hostctl(state, "import", str(config))
    assert done.returncode == 0, done.stderr
    assert "installed" in done.stdout
    assert f"next: echo: review and approve its launch: {HOSTCTL} --state-dir {state} approve echo" in done.stdout
    # each imported id by name: a command that runs as printed (it said "enable ID")
    assert f"next: echo: then start it: {HOSTCTL} --state-dir {state} enable echo" in done.stdout
    again = await as_json(tmp_path / "other", "import", str(config))
    assert [(e["name"], e["outcome"], e["id"]) for e in again["entries"]] == [("echo", "installed", "echo")]


async def test_call_on_an_enabled_plugin_waits_for_its_restore_and_never_reinstalls(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    """The found race: hostd restores the enabled plugin while call installed the folder again
    (PLUGIN_STATE_CONFLICT 5 times in 8). By folder and by id, repeatedly: never a conflict."""
    state = tmp_path / "state"
    folder = make_plugin(variant="slow-start", args=["--delay", "0.2"])
    first = await hostctl(state, "call", str(folder), "echo", '{"text": "first"}')
    assert first.returncode == 0, first.stderr
    for target in [str(folder)] * 4 + ["mcp-echo"] * 2:
        done = await hostctl(state, "call", target, "echo", '{"text": "again"}')
        assert "PLUGIN_STATE_CONFLICT" not in done.stderr
        assert (done.returncode, done.stdout) == (0, "again\n"), done.stderr
        # Not installed again, not approved again: the approval notice is not printed.
        assert "approving the launch" not in done.stderr
    document = json.loads((state / "state.json").read_text())
    assert list(document["plugins"]) == ["mcp-echo"]


async def test_status_waits_for_the_restore_to_settle(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """Through the hostd serving the folder, which restores at its start: status waits for that restore."""
    state = tmp_path / "state"
    good = make_plugin(variant="slow-start", args=["--delay", "0.3"])
    assert (await hostctl(state, "call", str(good), "echo", '{"text": "x"}')).returncode == 0
    async with HostdClient.spawn(["--state-dir", str(state), "--log-level", "error"], env=plugin_environment()) as app:
        await app.request("plugins/list", {})  # the host is built (and listens): its restore has begun
        done = await hostctl(state, "status")
        assert done.returncode == 0, done.stderr
        assert "starting" not in done.stdout
        assert done.stdout.splitlines()[2].split()[:3] == ["mcp-echo", "ready", "yes"]
        assert f"hostctl: using the hostd already serving {state}" in done.stderr


async def test_a_folder_of_another_state_is_never_written(tmp_path: Path) -> None:
    """An imported plugin's folder belongs to the state that imported it: a call with another
    state folder (a temporary one, say) must not install it and rewrite its plugin.json."""
    first = tmp_path / "first"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {"echo": {"command": "python3", "args": [str(ECHO / "server.py")]}}}))
    assert (await hostctl(first, "import", str(config))).returncode == 0
    imported = first / "imported" / "echo"
    before = (imported / "plugin.json").read_bytes()
    for verb in (["call", str(imported), "echo", '{"text": "x"}'], ["install", str(imported)]):
        done = await hostctl(tmp_path / "second", *verb)
        assert done.returncode == 1
        assert "error: FOREIGN_STATE" in done.stderr
        assert f"--state-dir {first}" in done.stderr
    assert (imported / "plugin.json").read_bytes() == before
    second = json.loads((tmp_path / "second" / "state.json").read_text())
    assert second["plugins"] == {}


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
async def test_progress_display_on_a_terminal_under_tmux(tmp_path: Path, make_plugin: MakePlugin) -> None:
    """A person's terminal: the spinner names what is awaited and the seconds, the plugin's
    lines scroll above it, and the table follows. Captured from the pane's output stream."""
    state = tmp_path / "state"
    folder = make_plugin(variant="slow-start", args=["--delay", "1.5"])
    assert (await hostctl(state, "install", str(folder))).returncode == 0
    assert (await hostctl(state, "grant", "mcp-echo", "--all")).returncode == 0
    assert (await hostctl(state, "approve", "mcp-echo", "--yes")).returncode == 0
    socket = tmp_path / "tmux.sock"
    captured = tmp_path / "pane.out"
    command = " ".join(
        [
            "tmux -S", str(socket), "wait-for go;",
            f"cd {ROOT} && {sys.executable} -m hostd.cli.hostctl enable mcp-echo --state-dir {state};",
            f"echo exit=$? >> {tmp_path / 'exit.txt'};",
            "tmux -S", str(socket), "wait-for -S done;",
            "tmux -S", str(socket), "wait-for hold",  # the pane stays until kill-server: capture it first
        ]
    )  # fmt: skip
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("TMUX", None)

    async def tmux(*args: str) -> None:
        with trio.fail_after(120):
            await trio.run_process(["tmux", "-S", str(socket), *args], env=env)

    await tmux("new-session", "-d", "-x", "120", "-y", "40", "sh", "-c", command)
    try:
        await tmux("pipe-pane", "-o", f"cat >> {captured}")
        await tmux("wait-for", "-S", "go")
        await tmux("wait-for", "done")
        with trio.fail_after(60):
            screen = await trio.run_process(
                ["tmux", "-S", str(socket), "capture-pane", "-p", "-J", "-S", "-100"], env=env, capture_stdout=True
            )
    finally:
        await trio.run_process(["tmux", "-S", str(socket), "kill-server"], env=env, check=False)
    assert (tmp_path / "exit.txt").read_text() == "exit=0\n"
    raw = captured.read_text(errors="replace")
    # The spinner's text, redrawn with the seconds elapsed (only the terminal display has this form).
    assert re.search(r"starting mcp-echo \(\d+ s\)", raw), raw
    assert "mcp-echo | loading 1" in raw and "mcp-echo | loading 2" in raw
    text = screen.stdout.decode()
    assert "hostctl: starting mcp-echo: done in" in text
    # -J: the lines the terminal wrapped, joined (a next: line is one line, as a copy from the terminal gets it)
    assert "ready" in text and f"next: see its tools: {HOSTCTL} --state-dir {state} tools mcp-echo" in text.splitlines()


async def test_every_plugin_provided_string_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    """The class: whatever a plugin or its manifest controls (launch arguments in approve's
    table, log lines in the progress display and in logs, tool results) is printed with its
    control and bidi characters escaped, never as terminal commands."""
    state = tmp_path / "state"
    hostile_arg = "\x1b]0;title\x07\rnext: hostctl approve other\u202e"
    prelude = "sys.stderr.write('boot \\x1b[2J\\u202eevil\\n'); sys.stderr.flush(); "
    folder = hostile_plugin(tmp_path, hostile_arg, prelude)
    outputs = [await hostctl(state, "install", str(folder)), await hostctl(state, "grant", "mcp-echo", "--all")]
    approved = await hostctl(state, "approve", "mcp-echo", "--yes")
    assert approved.returncode == 0, approved.stderr
    assert "\\u001b]0;title\\u0007\\u000dnext: hostctl approve other\\u202e" in approved.stderr
    enabled = await hostctl(state, "enable", "mcp-echo")
    assert enabled.returncode == 0, enabled.stderr
    assert "mcp-echo | boot \\u001b[2J\\u202eevil" in enabled.stderr
    log = json.dumps({"level": "info", "data": "line\nnext: forged \x1b[31m"})
    called = await hostctl(state, "call", "mcp-echo", "raw", json.dumps({"result": '{"content":[]}', "log": log}))
    assert called.returncode == 0, called.stderr
    logs = await hostctl(state, "logs", "mcp-echo")
    assert "boot \\u001b[2J\\u202eevil" in logs.stdout
    outputs += [approved, enabled, called, logs, await hostctl(state, "list"), await hostctl(state, "tools")]
    for done in outputs:
        for control in ("\x1b", "\x07", "\r", "\u202e"):
            assert control not in done.stdout + done.stderr, (done.args, control)


async def test_approve_asks_on_a_terminal(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    assert (await hostctl(state, "install", str(make_plugin()))).returncode == 0
    code, screen = await hostctl_on_a_terminal(state, b"n\n", b"[y/N]", "approve", "mcp-echo", columns=160)
    assert code == 1
    assert "mcp-echo would run:" in screen and "Approve this launch of mcp-echo? [y/N]" in screen
    assert "error: NOT_APPROVED: the launch of mcp-echo was not approved" in screen
    assert (await as_json(state, "list"))["plugins"][0]["launch"]["approved"] is False
    code, screen = await hostctl_on_a_terminal(state, b"y\n", b"[y/N]", "approve", "mcp-echo", columns=160)
    assert code == 0, screen
    assert "mcp-echo: approved sha256:" in screen
    assert (await as_json(state, "list"))["plugins"][0]["launch"]["approved"] is True
