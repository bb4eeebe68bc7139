"""``hostctl import --rewrite`` / ``--undo`` (issue 27, "Import in place"): real hostctl processes on a
temporary config of each client's shape (Claude Desktop, Cursor with comments, VS Code's ``servers`` and its
settings' ``mcp.servers``); the exact JSON written, the backup's bytes and mode, and undo giving back the bytes
exactly. Refused without a terminal and without ``--yes``, and for a config that already starts hostd mcp."""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd.cli import import_rewrite
from tests.conftest import ECHO, HOSTCTL, hostctl_on_a_terminal, run_hostctl

SERVER = str(ECHO / "server.py")


def backups(config: Path) -> list[Path]:
    return sorted(config.parent.glob(config.name + ".hostd-backup-*"))


def gateway(state: Path) -> list[str]:
    """The command the rewritten entry holds: hostd as this test's hostctl runs (``python -m``)."""
    return [sys.executable, "-m", "hostd", "mcp", "--state-dir", str(state)]


CLAUDE = {
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "echo": {"command": "python3", "args": [SERVER], "env": {"ECHO_MODE": "plain"}},
        "Echo Two": {"command": "python3", "args": [SERVER, "--name", "two"]},
    },
    "preferences": {"menuBarEnabled": False},
}

CURSOR = f"""// Cursor: ~/.cursor/mcp.json
{{
  "mcpServers": {{
    /* the echo fixture */
    "cursor-echo": {{"command": "python3", "args": ["{SERVER}"],}},
  }},
}}
"""

VSCODE = {
    "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": True}],
    "servers": {"vs-echo": {"type": "stdio", "command": "python3", "args": [SERVER]}},
}

VSCODE_SETTINGS = {
    "editor.fontSize": 14,
    "mcp": {"servers": {"settings-echo": {"command": "python3", "args": [SERVER]}}, "discovery": {"enabled": True}},
    "workbench.colorTheme": "Default Dark+",
}


def expected(shape: str, state: Path) -> dict[str, Any]:
    command, *args = gateway(state)
    entry = {"command": command, "args": args}
    if shape == "claude":
        return {**CLAUDE, "mcpServers": {"hostd": entry}}
    if shape == "cursor":
        return {"mcpServers": {"hostd": entry}}
    if shape == "vscode":
        return {**VSCODE, "servers": {"hostd": {"type": "stdio", **entry}}}
    nested = {"servers": {"hostd": {"type": "stdio", **entry}}, "discovery": {"enabled": True}}
    return {**VSCODE_SETTINGS, "mcp": nested}


@pytest.mark.parametrize(
    ("shape", "text", "mode"),
    [
        ("claude", json.dumps(CLAUDE, indent=4), 0o644),
        ("cursor", CURSOR, 0o600),
        ("vscode", json.dumps(VSCODE), 0o640),
        ("settings", json.dumps(VSCODE_SETTINGS, indent="\t"), 0o600),
    ],
)
async def test_rewrite_starts_hostd_mcp_instead_and_undo_gives_the_bytes_back(
    tmp_path: Path, shape: str, text: str, mode: int
) -> None:
    state, config = tmp_path / "state", tmp_path / f"{shape}.json"
    config.write_text(text)
    config.chmod(mode)
    original = config.read_bytes()

    if shape == "vscode":  # a person at a terminal: the change is shown, then asked
        code, screen = await hostctl_on_a_terminal(state, b"y\n", b"? [y/N] ", "import", str(config), "--rewrite")
        assert code == 0, screen
        shown = " ".join(screen.split())
        assert f"vs-echo will start as one entry: {shlex.join(gateway(state))}" in shown
        assert f"Back up and rewrite {config}? [y/N]" in shown
    else:
        done = await run_hostctl(state, "import", str(config), "--rewrite", "--yes", "--json")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert {e["outcome"] for e in result["entries"]} == {"installed"}
        assert result["rewrite"] == {
            "config": str(config),
            "backup": str(backups(config)[0]),
            "replaced": [e["name"] for e in result["entries"]],
            "command": gateway(state),
        }
        if shape == "cursor":
            assert "its comments and trailing commas are not kept (the backup keeps them)" in done.stderr
    written = json.loads(config.read_text())
    assert written == expected(shape, state)
    assert list(written) == list(expected(shape, state))  # every other key kept, in its place
    [backup] = backups(config)
    assert backup.read_bytes() == original
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) == mode
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]

    undone = await run_hostctl(state, "import", "--undo", str(config))
    assert undone.returncode == 0, undone.stderr
    assert config.read_bytes() == original
    assert stat.S_IMODE(config.stat().st_mode) == mode
    assert backups(config) == []
    again = await run_hostctl(state, "import", "--undo", str(config))
    assert again.returncode == 1
    assert f"error: CANNOT_UNDO: no backup of {config} made by hostctl import --rewrite" in again.stderr


async def test_rewrite_is_refused_without_a_yes_and_on_a_config_already_rewritten(tmp_path: Path) -> None:
    state, config = tmp_path / "state", tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps(CLAUDE))
    original = config.read_bytes()
    refused = await run_hostctl(state, "import", str(config), "--rewrite")  # stdin is not a terminal
    assert refused.returncode == 1
    assert "error: NOT_CONFIRMED: rewriting a config needs a yes: run it in a terminal, or pass --yes" in refused.stderr
    assert config.read_bytes() == original
    assert backups(config) == []
    assert not (state / "plugins").exists() or list((state / "plugins").iterdir()) == []  # nothing imported

    # A config that starts hostd mcp already (rewritten before, by hand or by hostctl): importing it would make
    # the gateway one of its own plugins. Both command forms are recognised.
    for command, args in ((sys.executable, ["-m", "hostd", "mcp"]), ("/opt/venv/bin/hostd", ["mcp", "--http", "9"])):
        config.write_text(json.dumps({"mcpServers": {"gw": {"command": command, "args": args}}}))
        done = await run_hostctl(state, "import", str(config), "--rewrite", "--yes")
        assert done.returncode == 1
        assert done.stderr == (
            f"error: ALREADY_REWRITTEN: {config} already starts hostd mcp (entry 'gw'); "
            f"{HOSTCTL} --state-dir {state} import --undo {config} restores it\n"
        )
    # Undo refuses to put a backup over a config changed since the rewrite.
    backup = config.with_name(config.name + ".hostd-backup-20261206T000000.000000Z")
    backup.write_bytes(original)
    config.write_text(json.dumps({"mcpServers": {"edited": {"command": "node", "args": ["x.js"]}}}))
    edited = config.read_bytes()
    done = await run_hostctl(state, "import", "--undo", str(config))
    assert done.returncode == 1
    assert f"error: CANNOT_UNDO: {config} no longer starts hostd mcp" in done.stderr
    assert (config.read_bytes(), backup.read_bytes()) == (edited, original)


def test_the_command_written_is_hostd_as_invoked_and_names_never_collide(tmp_path: Path) -> None:
    """Pure parts, no process: a console-script hostctl writes the hostd script beside it (absolute), a ``python
    -m`` one (or a script with no hostd beside it) ``<python> -m hostd``; an entry not imported that is already
    called ``hostd`` keeps its place and name; a JSON5 number JSON cannot spell is refused, not written."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "hostctl").write_text("#!/bin/sh\n")
    python = str(bin_dir / "python")
    assert import_rewrite.gateway_command(str(bin_dir / "hostctl"), python, None) == [python, "-m", "hostd"]
    (bin_dir / "hostd").write_text("#!/bin/sh\n")
    (bin_dir / "hostd").chmod(0o755)
    assert import_rewrite.gateway_command(str(bin_dir / "hostctl"), python, None) == [str(bin_dir / "hostd")]
    assert import_rewrite.gateway_command(str(bin_dir / "hostctl"), python, "hostd.cli.hostctl") == [
        python,
        "-m",
        "hostd",
    ]
    document = {"mcpServers": {"a": {"command": "x"}, "hostd": {"command": "y"}, "b": {"command": "z"}}}
    out = import_rewrite.rewritten(document, ["a", "b"], ["/h", "mcp"])
    assert out == {"mcpServers": {"hostd-2": {"command": "/h", "args": ["mcp"]}, "hostd": {"command": "y"}}}
    assert list(out["mcpServers"]) == ["hostd-2", "hostd"]
    config = tmp_path / "nan.json"
    config.write_text('{"mcpServers": {"a": {"command": "x"}}, "zoom": NaN}')
    with pytest.raises(import_rewrite.RewriteError, match="NaN or Infinity"):
        import_rewrite.plan(config, ["a"], ["/h", "mcp"])
