"""What a new user met walking the README (issue 28), each shown as hostctl shows it, read directly.

The classes:

- *a reading command hostctl does not have*: ``show`` and ``doctor`` were named as reading commands and answered
  "invalid choice". Members: ``show`` of a plugin that is stopped, one whose start failed, an imported one, an
  unknown id; ``doctor`` of a folder a hostd would repair (it is not repaired: nothing starts).
- *a figure hostd does not know shown as one it knows*: an imported script entry listed as ``VERSION 0.0.0``
  (the import's placeholder), a declared tool listed ``ENABLED -`` whose setting is in the state. Members: the
  version in ``list`` and ``show``, each declared tool's setting in ``tools`` and in ``show``'s count.
- *a command that starts a hostd for nothing*: ``import`` of a config that does not exist started one (which
  created the state folder) before failing ``CANNOT_READ``; it now fails first, with where configs are.

One folder set up through one real hostd (two plugins started once each: one serves, one fails), then read by
real hostctl processes; proof that nothing starts is the plugins' own count (tests/test_hostctl_attach.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.cli.render import VERSION_NOTE, VERSION_UNKNOWN
from hostd.storage.state import SERVER_INFO_CHARS, PluginRecord
from tests.conftest import ECHO, ECHO_TOOLS, MakePlugin, run_quietly
from tests.test_hostctl_attach import COUNTING, FAILING, hostctl, starts

PROGRAM = f"{sys.executable} -m hostd.cli.hostctl"


async def test_show_tools_list_and_doctor_read_the_folder_and_say_what_is_known(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    state = tmp_path / "state"
    env = {**plugin_environment(), "HOSTD_SECRETS": "file"}
    config = tmp_path / "mcp.json"
    entry = {"command": "python3", "args": [str(ECHO / "server.py")]}
    config.write_text(json.dumps({"mcpServers": {"script": entry, "started": entry}}))
    async with HostdClient.spawn(["--state-dir", str(state), "--log-level", "error"], env=env) as hd:
        for plugin_id, code in (("mcp-echo", COUNTING), ("broken-echo", FAILING)):
            folder = make_plugin(plugin_id, backend={"args": ["-c", code]})
            await hd.request("plugins/install", {"path": str(folder)})
            hosts = {"networkHosts": ["example.com"]} if plugin_id == "mcp-echo" else {}
            info = await hd.request(
                "plugins/grant", {"id": plugin_id, "permissions": ["echo.use", "echo.inspect"], **hosts}
            )
            await hd.request("plugins/approve", {"id": plugin_id, "digest": info["launch"]["digest"]})
        assert (await hd.request("plugins/enable", {"id": "mcp-echo"}, timeout=60))["status"] == "ready"
        try:
            await hd.request("plugins/enable", {"id": "broken-echo"}, timeout=60)
        except RpcError as exc:
            assert exc.kind == "PLUGIN_START_FAILED"
        await hd.request("tools/setEnabled", {"name": "mcp-echo.sleep", "enabled": False})
        imported = await hd.request("plugins/import", {"config": config.read_text()})
        assert [e["outcome"] for e in imported["entries"]] == ["installed", "installed"]
        started = imported["entries"][1]["plugin"]
        await hd.request("plugins/approve", {"id": "started", "digest": started["launch"]["digest"]})
        assert (await hd.request("plugins/enable", {"id": "started"}, timeout=60))["status"] == "ready"
    assert (starts(state), starts(state, "broken-echo")) == (1, 1)
    damaged = tmp_path / "damaged"  # a folder a hostd would repair (move the document aside) before answering
    damaged.mkdir()
    (damaged / "state.json").write_text("{not json")

    # Every reading command at once (they only read; one after another they took twice as long).
    verbs: dict[str, tuple[Path, list[str]]] = {
        "list": (state, ["list"]),
        "tools": (state, ["tools", "mcp-echo"]),
        "mcp-echo": (state, ["show", "mcp-echo"]),
        "broken-echo": (state, ["show", "broken-echo"]),
        "script": (state, ["show", "script"]),
        "started": (state, ["show", "started"]),
        "nope": (state, ["show", "nope"]),
        "json": (state, ["show", "mcp-echo", "--json"]),
        "doctor": (damaged, ["doctor"]),
    }
    ran: dict[str, subprocess.CompletedProcess[str]] = {}

    async def run(name: str, folder: Path, args: list[str]) -> None:
        ran[name] = await hostctl(folder, *args)

    async def hostd_doctor() -> None:
        argv = [sys.executable, "-m", "hostd", "doctor", "--state-dir", str(damaged)]
        ran["hostd doctor"] = await run_quietly(argv, env={**os.environ, "HOSTD_SECRETS": "file"}, timeout=120)

    async with trio.open_nursery() as nursery:
        for name, (folder, args) in verbs.items():
            nursery.start_soon(run, name, folder, args)
        nursery.start_soon(hostd_doctor)

    listed = ran["list"]
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    rows = [line.split()[:8] for line in lines[2:] if line and not line.startswith(" ")][:4]  # a long FOLDER folds
    assert rows == [
        ["broken-echo", "1.0.0", "-", "error", "yes", "yes", "2/2", "-"],
        ["mcp-echo", "1.0.0", "-", "stopped", "yes", "yes", "2/2", "-"],
        ["script", "unknown", "-", "stopped", "no", "no", "0/0", "sampling,"],  # was: 0.0.0, the placeholder
        ["started", "1.0.0", "(serverInfo)", "-", "stopped", "yes", "yes", "0/0"],  # what the server said (was 0.0.0)
    ]
    note = listed.stdout[listed.stdout.index("VERSION unknown") :].splitlines()  # folded at 200 columns
    assert " ".join(line.rstrip() for line in note) == VERSION_NOTE

    tools = ran["tools"]
    assert tools.returncode == 0, tools.stderr
    enabled = [line.split()[:2] for line in tools.stdout.splitlines()[2 : 2 + len(ECHO_TOOLS)]]
    assert enabled == [[f"mcp-echo.{t}", "no" if t == "sleep" else "yes"] for t in ECHO_TOOLS]  # was: all "-"

    shown = {plugin_id: ran[plugin_id] for plugin_id in ("mcp-echo", "broken-echo", "script")}
    for plugin_id, done in shown.items():
        assert done.returncode == 0, (plugin_id, done.stderr)
        assert done.stderr == f"hostctl: read {state} directly (no hostd serves it; nothing started)\n"
    assert (starts(state), starts(state, "broken-echo")) == (1, 1)  # show starts nothing
    echo = shown["mcp-echo"].stdout.splitlines()
    assert echo[0] == "mcp-echo 1.0.0 (Echo fixture (plain))"
    assert echo[1:5] == [
        f"folder             {tmp_path / 'mcp-echo-plain'}",
        "status             stopped, enabled",
        "granted            echo.inspect, echo.use",
        "approved           yes",
    ]
    assert (
        "network            only through hostd's proxy, to example.com; any other host is asked of you, or refused"
    ) in echo
    assert echo[-8:] == [
        "version            1.0.0",
        "package            -",
        "features           -",
        "network hosts      example.com",
        f"tool count         {len(ECHO_TOOLS)} declared in its manifest (a running server lists its own); 1 disabled: "
        "mcp-echo.sleep",
        "last start error   none",
        f"state folder       {state}",
        f"next: see its tools: {PROGRAM} --state-dir {state} tools mcp-echo",
    ]
    assert shown["broken-echo"].stdout.splitlines()[-3:-1] == [
        "last start error   exited with code 3 during start",
        f"state folder       {state}",
    ]
    # A launch whose network is not limited to an allowlist needs no host granted (it said "none granted" under
    # "network all", which a new user's walk read as a contradiction).
    broken = _rows(shown["broken-echo"].stdout.splitlines()[1:-1])
    assert (broken["network"], broken["network hosts"]) == (
        "all",
        "none needed (its network is not limited to an allowlist)",
    )
    script = shown["script"].stdout.splitlines()
    assert script[0] == "script unknown (script)"
    assert f"command            python3 {ECHO / 'server.py'}" in script
    script_rows = _rows(script[1:-1])
    assert script_rows["version"] == f"unknown: {VERSION_UNKNOWN}"
    assert (script_rows["package"], script_rows["features"], script_rows["tool count"]) == (
        "-",
        "sampling, elicitation, roots",
        "0 declared in its manifest (a running server lists its own); 0 disabled",
    )
    assert _rows(ran["started"].stdout.splitlines()[1:-1])["version"] == (
        "1.0.0, as its server reported it at its last start (serverInfo); the config named no version"
    )
    recorded = json.loads((state / "state.json").read_text())["plugins"]["started"]["serverInfo"]
    assert recorded == {"name": "mcp-echo", "version": "1.0.0"}  # the echo server's serverInfo, kept in the state
    unknown = ran["nope"]
    assert unknown.returncode == 1
    assert unknown.stderr.splitlines()[1:] == [
        f"error: PLUGIN_NOT_FOUND: no installed plugin 'nope' (installed: broken-echo, mcp-echo, script, started); "
        f"state folder searched: {state}"
    ]
    as_json = json.loads(ran["json"].stdout)
    assert (as_json["plugin"]["disabledTools"], as_json["status"]["status"], as_json["tools"]) == (
        ["mcp-echo.sleep"],
        "stopped",
        [],
    )

    # doctor: hostd doctor's output, of a folder a hostd would repair, left as it is (no hostd started).
    doctor = ran["doctor"]
    assert (doctor.returncode, doctor.stderr) == (0, f"hostctl: read {damaged} directly (nothing started)\n")
    assert doctor.stdout == ran["hostd doctor"].stdout
    assert f"\nstate folder {damaged}:\n  problem: " in doctor.stdout
    assert sorted(p.name for p in damaged.iterdir()) == ["state.json"]  # not moved aside: no hostd started
    assert (damaged / "state.json").read_text() == "{not json"
    assert (starts(state), starts(state, "broken-echo")) == (1, 1)


async def test_importing_a_config_that_does_not_exist_fails_before_any_hostd_starts(tmp_path: Path) -> None:
    """No hostd: the state folder it would have created is not there. The hint names where the clients hostctl
    knows keep their config (which of them are here: none, in a fresh HOME) and how to write one."""
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    missing = home / ".config" / "Claude" / "claude_desktop_config.json"
    done = await run_quietly(
        [sys.executable, "-m", "hostd.cli.hostctl", "import", str(missing), "--state-dir", str(state)],
        env={**os.environ, "HOME": str(home), "HOSTD_SECRETS": "file"},
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"error: CANNOT_READ: cannot read {missing}: No such file or directory",
        "  found here: none of the known client configs",
        "  the clients hostctl knows keep theirs at Claude Desktop (Linux): "
        "~/.config/Claude/claude_desktop_config.json; "
        "Claude Desktop (macOS): ~/Library/Application Support/Claude/claude_desktop_config.json; "
        "Cursor: ~/.cursor/mcp.json; VS Code (a workspace): .vscode/mcp.json",
        '  or write your own: {"mcpServers": {"NAME": {"command": "python3", "args": ["/path/to/server.py"]}}} in a '
        f"file, then {PROGRAM} --state-dir {state} import FILE",
    ]
    assert not state.exists()  # before: a hostd started (and made the folder), then the import failed
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text("{}")
    again = await run_quietly(
        [sys.executable, "-m", "hostd.cli.hostctl", "import", str(tmp_path / "nope.json"), "--state-dir", str(state)],
        env={**os.environ, "HOME": str(home), "HOSTD_SECRETS": "file"},
        timeout=120,
    )
    assert again.stderr.splitlines()[1] == "  found here: ~/.cursor/mcp.json"
    assert not state.exists()


def _rows(lines: list[str]) -> dict[str, str]:
    """``show``'s two-column table as ``{label: value}``, a value folded over several lines joined again."""
    rows: dict[str, str] = {}
    label = ""
    for line in lines:
        if line.startswith(" "):
            rows[label] += " " + line.strip()
        else:
            label, _, value = line.partition("  ")
            rows[label] = value.strip()
    return rows


def test_a_recorded_server_info_is_read_as_attacker_input() -> None:
    """The state document's ``serverInfo`` may be edited or damaged: a malformed one is dropped (the version is
    then unknown again), never a broken record; a long one is cut."""
    base = {"path": "/p", "manifestDigest": "sha256:x"}
    for bad in ({"name": 1, "version": "1"}, {"name": "n"}, ["n", "1"], "1.0.0", {"name": "n", "version": None}):
        assert PluginRecord.from_json({**base, "serverInfo": bad}).server_info is None, bad
    long = PluginRecord.from_json({**base, "serverInfo": {"name": "n" * 500, "version": "9" * 500}}).server_info
    assert long == {"name": "n" * SERVER_INFO_CHARS, "version": "9" * SERVER_INFO_CHARS}
    assert PluginRecord.from_json({**base, "serverInfo": {"name": "n", "version": "2"}}).to_json()["serverInfo"] == {
        "name": "n",
        "version": "2",
    }
