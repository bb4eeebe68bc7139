"""hostctl end to end: the real console entry point, a real hostd, real plugin processes."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hostd.cli.connection import open_hostd
from hostd.cli.demo import Trace, demo_real, example_arguments
from hostd.cli.hostctl import COMMANDS
from hostd.cli.render import content_text, format_table
from tests.conftest import ECHO, ROOT, MakePlugin


async def hostctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``python -m hostd.cli.hostctl *args`` from the repository root; capture both streams."""
    with trio.fail_after(timeout):
        done = await trio.run_process(
            [sys.executable, "-m", "hostd.cli.hostctl", *args],
            cwd=ROOT,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.fixture(autouse=True)
def user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's state folder (platformdirs: $XDG_STATE_HOME/hostd), private to each test."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hostd"


def assert_in_order(text: str, fragments: list[str]) -> None:
    """Each fragment occurs in ``text``, after the previous one."""
    position = 0
    for fragment in fragments:
        found = text.find(fragment, position)
        assert found >= 0, f"{fragment!r} missing after offset {position} in:\n{text}"
        position = found + len(fragment)


# -- call ----------------------------------------------------------------------------


async def test_call_prints_the_text_content() -> None:
    done = await hostctl("call", str(ECHO), "echo", '{"text":"hi"}')
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    assert "approving the launch of mcp-echo: python3 server.py" in done.stderr


async def test_call_json_prints_the_whole_result_by_host_name(tmp_path: Path) -> None:
    state = tmp_path / "state"
    done = await hostctl("call", str(ECHO), "mcp-echo.echo", '{"text":"hi"}', "--json", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["structuredContent"] == {"text": "hi", "length": 2}
    assert result["content"] == [{"type": "text", "text": "hi"}]


async def test_call_of_a_failing_tool_exits_1() -> None:
    done = await hostctl("call", str(ECHO), "fail", '{"message": "nope"}')
    assert done.returncode == 1
    assert done.stdout == ""
    assert "error: MCP_TOOL_CALL_FAILED: mcp-echo.fail reported an error: nope" in done.stderr


async def test_call_timeout_is_the_tool_timeout() -> None:
    done = await hostctl("call", str(ECHO), "sleep", '{"seconds": 20}', "--timeout", "0.3")
    assert done.returncode == 1
    assert "error: TOOL_TIMEOUT: " in done.stderr


async def test_call_of_an_unknown_tool_lists_the_tools() -> None:
    done = await hostctl("call", str(ECHO), "nope")
    assert done.returncode == 1
    assert "error: TOOL_NOT_FOUND: plugin mcp-echo has no tool 'nope'" in done.stderr
    assert "echo, environment, exit, fail, large, seen, sleep" in done.stderr


async def test_call_start_failure_shows_the_stderr_tail(make_plugin: MakePlugin) -> None:
    done = await hostctl("call", str(make_plugin(variant="exit-at-start")), "echo", '{"text": "x"}')
    assert done.returncode == 1
    assert "error: PLUGIN_START_FAILED: " in done.stderr
    # The plugin's line once: live while it starts, or in the error's stderr tail, never both.
    assert done.stderr.count("API key missing") == 1, done.stderr


async def test_call_of_a_missing_folder_is_a_manifest_error(tmp_path: Path) -> None:
    done = await hostctl("call", str(tmp_path / "missing"), "echo")
    assert done.returncode == 1
    assert "error: MANIFEST_INVALID: " in done.stderr


@pytest.mark.parametrize("bad", ["{text: hi}", "[1]", '"hi"'])
async def test_call_with_bad_json_arguments_is_a_usage_error(bad: str) -> None:
    done = await hostctl("call", str(ECHO), "echo", bad)
    assert done.returncode == 2
    assert "JSON_ARGS" in done.stderr
    assert done.stdout == ""


async def test_call_with_a_bad_timeout_is_a_usage_error() -> None:
    done = await hostctl("call", str(ECHO), "echo", "{}", "--timeout", "-1")
    assert done.returncode == 2


# -- status, help ------------------------------------------------------------------


async def test_status_shows_stopped_and_starts_nothing(user_state: Path) -> None:
    """status reads: the plugin the call enabled is enabled, and stopped (status starts no plugin, issue 28)."""
    assert (await hostctl("call", str(ECHO), "echo", '{"text": "x"}')).returncode == 0
    done = await hostctl("status")
    assert done.returncode == 0, done.stderr
    header, _, *rows = done.stdout.splitlines()
    assert header.split() == ["PLUGIN", "STATUS", "ENABLED", "TOOLS", "SERVER", "PROTOCOL", "ERROR"]
    assert len(rows) == 1
    assert re.fullmatch(r"mcp-echo\s+stopped\s+yes\s+-\s+-\s+-", rows[0])  # serves no tool: "-" (was 0/0)
    assert (user_state / "state.json").is_file()


async def test_status_reports_a_plugin_that_failed_to_start(make_plugin: MakePlugin) -> None:
    broken = make_plugin("broken-echo", variant="exit-at-start")
    assert (await hostctl("call", str(ECHO), "echo", '{"text": "x"}')).returncode == 0
    assert (await hostctl("call", str(broken), "echo", '{"text": "x"}')).returncode == 1
    done = await hostctl("status")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    # The failure recorded by the `call` that started it (this hostctl's hostd starts nothing, issue 28): its exit
    # status, also when writing `initialize` found the process gone first (EPIPE; tests/test_link.py forces that).
    why = r"exited with code 1 during start"
    assert re.fullmatch(r"broken-echo\s+error\s+yes\s+-\s+-\s+-\s+" + why, lines[2])
    assert re.match(r"mcp-echo\s+stopped\s+yes\s+-\s", lines[3])
    assert re.search(r"error: broken-echo is enabled but error: " + why, done.stderr)


async def test_status_without_plugins(user_state: Path) -> None:
    done = await hostctl("status")
    assert done.returncode == 0
    assert done.stdout == f"no plugins installed in {user_state}\n"


async def test_help_lists_the_commands() -> None:
    done = await hostctl("--help")
    assert done.returncode == 0
    for command in (*COMMANDS, "demo"):
        assert re.search(rf"^\s+{command}\s", done.stdout, re.MULTILINE), done.stdout
    assert (await hostctl("frobnicate")).returncode == 2


# -- demo --------------------------------------------------------------------------


async def test_demo_without_the_real_server_walks_every_step() -> None:
    done = await hostctl("demo", "--no-real")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_in_order(
        done.stdout,
        [
            "== echo fixture: ",
            '-> plugins/install {"path": ',
            "<- installed mcp-echo 1.0.0",
            "launch: python3 server.py",
            '-> plugins/grant {"id": "mcp-echo", "permissions": ["echo.use", "echo.inspect"]}',
            '-> plugins/approve {"id": "mcp-echo", "digest": "sha256:',
            "<- approved sha256:",
            '-> plugins/enable {"id": "mcp-echo"}',
            "<= plugins/statusChanged starting",
            "<= plugins/statusChanged ready",
            "<- ready, 7 tools, mcp-echo 1.0.0, protocol 2025-11-25",
            '-> tools/list {"plugin": "mcp-echo"}',
            "<- 7 tools, revision 1",
            "mcp-echo.sleep",
            '-> tools/call {"name": "mcp-echo.echo", "arguments": {"text": "hello from hostd"}}',
            "<- hello from hostd",
            '-> tools/call {"name": "mcp-echo.sleep", "arguments": {"seconds": 30}}',
            "-> $/cancelRequest {",
            "<- error -32800 REQUEST_CANCELLED",
            '-> plugins/restart {"id": "mcp-echo"}',
            "<- ready, 7 tools, mcp-echo 1.0.0, protocol 2025-11-25, restarts 1",
            '-> plugins/disable {"id": "mcp-echo"}',
            "<= plugins/statusChanged stopped",
            "<- stopped, 0 tools",
            "-> shutdown",
            "hostd exited with code 0",
            "demo: echo fixture ok; real server not run (--no-real)",
            # where the demo's state went, and a next step that runs as printed (it printed neither)
            "(the demo used a temporary state folder of its own, now removed; yours is untouched)",
            "next: install the echo fixture in your state folder: ",
        ],
    )
    assert "== real server" not in done.stdout


async def test_demo_real_part_reports_a_missing_or_failing_server(tmp_path: Path, make_plugin: MakePlugin) -> None:
    out = io.StringIO()
    async with open_hostd() as client:
        trace = Trace(client, out)
        assert await demo_real(trace, tmp_path / "missing") == "skipped (no missing folder)"
        outcome = await demo_real(trace, make_plugin("real-echo", variant="exit-at-start"))
    assert outcome == "failed (PLUGIN_START_FAILED)"
    assert_in_order(
        out.getvalue(),
        [
            "skipped: no plugin folder at ",
            '-> plugins/enable {"id": "real-echo"}',
            "<- error -32017 PLUGIN_START_FAILED",
            "API key missing",
            "real server FAILED: PLUGIN_START_FAILED",
        ],
    )


@pytest.mark.real_server
@pytest.mark.skipif(shutil.which("npx") is None, reason="needs node's npx")
async def test_demo_with_the_real_server() -> None:
    done = await hostctl("demo", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_in_order(
        done.stdout,
        [
            "<- error -32800",
            "== real server: manifests/server-everything",
            # what preparing installed, not a status ("stopped, 0 tools" read like a failure to a new user)
            "<- prepared with npm: @modelcontextprotocol/server-everything ",
            '-> plugins/enable {"id": "server-everything"}',
            "<- ready, 13 tools",
            # why 13 of the 17 the install counted (the new user's walk: unexplained)
            "   (tools: 17 declared in the manifest, 13 listed by the server; the others need an MCP client feature",
            '-> tools/call {"name": "server-everything.echo", "arguments": {"message": "hello from hostd"}}',
            "<- Echo: hello from hostd",
            '-> plugins/disable {"id": "server-everything"}',
            "demo: echo fixture ok; real server ok",
        ],
    )


# -- helpers -----------------------------------------------------------------------


def test_example_arguments_follow_the_required_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "note": {"type": "string"}},
        "required": ["a", "b"],
    }
    assert example_arguments({"inputSchema": schema}) == {"a": 2, "b": 3}
    assert example_arguments({"inputSchema": {**schema, "required": ["note"]}}) == {"note": "hello from hostd"}
    nested = {"type": "object", "properties": {"x": {"type": "object"}}, "required": ["x"]}
    assert example_arguments({"inputSchema": nested}) is None


def test_content_text_and_table() -> None:
    result = {
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "mimeType": "image/png", "data": "AAAA"},
            {"type": "resource_link", "uri": "file:///x"},
        ]
    }
    assert content_text(result) == "one\n[image image/png, 4 base64 chars]\n[link file:///x]"
    assert content_text({"content": [], "structuredContent": {"a": 1}}) == '{"a": 1}'
    assert format_table(["A", "BB"], [["xyz", "1"], ["q", ""]]) == "A    BB\nxyz  1\nq"


# -- terminal safety (issue 10) ------------------------------------------------------


def hostile_plugin(tmp_path: Path, hostile_arg: str, prelude: str = "") -> Path:
    """A plugin folder ``hostile``: the echo fixture's raw-replies variant (tools plus ``raw``), run
    by ``python3 -c`` after ``prelude`` (Python source), with ``hostile_arg`` as a launch argument."""
    folder = tmp_path / "hostile"
    folder.mkdir()
    shutil.copy(ECHO / "server.py", folder / "server.py")
    run = (
        f"import runpy, sys; {prelude}sys.argv = ['server.py', '--variant', 'raw-replies']; "
        "runpy.run_path('server.py', run_name='__main__')"
    )
    tools = ["echo", "fail", "sleep", "large", "environment", "exit", "seen", "raw"]
    manifest = {
        "id": "mcp-echo",
        "name": "hostile",
        "version": "1.0.0",
        "permissions": ["echo.use", "echo.inspect"],
        "contributes": {"tools": [f"mcp-echo.{t}" for t in tools]},
        "backend": {"type": "mcp", "transport": "stdio", "command": "python3", "args": ["-c", run, hostile_arg]},
    }
    (folder / "plugin.json").write_text(json.dumps(manifest))
    return folder


async def test_plugin_and_manifest_text_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    """A manifest argument with an escape sequence and a newline cannot forge or hide a line
    of the approval notice; a tool result's control characters are printed as escapes."""
    hostile_arg = "\x1b]0;title\x07\x1b[2K\rhostctl: approving the launch of mcp-echo: python3 server.py\u202e"
    folder = hostile_plugin(tmp_path, hostile_arg)
    text = "\x1b[31mred\x9b\u202eevil\nsecond line\tend"
    result = json.dumps({"content": [{"type": "text", "text": text}]})
    done = await hostctl("call", str(folder), "raw", json.dumps({"result": result}))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "\\u001b[31mred\\u009b\\u202eevil\nsecond line\tend\n"
    notice = [line for line in done.stderr.splitlines() if line.startswith("hostctl: approving")]
    assert len(notice) == 1
    assert (
        " '\\u001b]0;title\\u0007\\u001b[2K\\u000dhostctl: approving the launch of mcp-echo: python3 server.py\\u202e'"
        in notice[0]
    )
    for control in ("\x1b", "\x07", "\r", "\u202e", "\x9b"):
        assert control not in done.stderr + done.stdout
    as_json = await hostctl("call", str(folder), "raw", json.dumps({"result": result}), "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"content": [{"type": "text", "text": text}]}
    assert "\x1b" not in as_json.stdout and "\x9b" not in as_json.stdout
