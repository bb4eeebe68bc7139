"""hostctl's ``next:`` hints run word for word (issue 28): the program as the user invoked it, the state
folder they named, hostctl's verbs rather than protocol methods; and the README's walkthrough, run as
printed in a fresh HOME, prints only hints that run as printed."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import trio

from hostd.cli.client import RpcError
from hostd.cli.connection import Failure
from hostd.cli.render import cli_words, invoked_as, status_row
from hostd.wire.advice import CLI_VERBS
from tests.conftest import ECHO, ECHO_TOOLS, ROOT


def test_the_program_is_named_as_the_user_invoked_it(tmp_path: Path) -> None:
    """Members: a console script by a relative path (the README's ``.venv/bin/hostctl``), one found on PATH,
    one by an absolute path not on PATH, a path with a space (quoted), ``python -m`` with the interpreter
    as typed (found on PATH) and with one the shell would not find by that name (its full path)."""
    bin_dir = tmp_path / "my bin"
    bin_dir.mkdir()
    script = bin_dir / "hostctl"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    python = bin_dir / "python3"
    python.symlink_to(sys.executable)
    module = "hostd.cli.hostctl"
    assert invoked_as(".venv/bin/hostctl", sys.executable, [], None) == ".venv/bin/hostctl"
    assert invoked_as(str(script), sys.executable, [], None) == shlex.quote(str(script))  # not on PATH
    path = os.environ["PATH"]
    try:
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{path}"
        assert invoked_as(str(script), sys.executable, [], None) == "hostctl"
        assert invoked_as("x", str(python), ["python3", "-m", module], module) == f"python3 -m {module}"
    finally:
        os.environ["PATH"] = path
    # Not on PATH any more: the same invocation is named by the interpreter's full path (still this venv's).
    assert invoked_as("x", str(python), ["python3", "-m", module], module) == f"{shlex.quote(str(python))} -m {module}"
    assert invoked_as("x", sys.executable, [], module) == f"{shlex.quote(sys.executable)} -m {module}"


#: Messages of hostd's that name a method hostctl has a verb for but that hostctl never shows: hostctl always
#: runs hostd on a state folder.
NEVER_SHOWN_BY_HOSTCTL = {"plugins/import needs a state directory", "plugins/prepare needs a state directory"}


def _message_texts(source: str) -> list[str]:
    """The string literals of a module that read as messages (a space in them), f-strings with ``{}`` for
    each value; docstrings left out."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))
    texts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            texts.append("".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values))
            skipped.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            texts.append(node.value)
    return [text for text in texts if " " in text]


def test_hostd_advice_reaches_a_hostctl_user_in_hostctl_words() -> None:
    """The class: every message of the host and the plugins (the layers whose errors hostctl shows) that
    names a control method hostctl has a verb for ("enable it with tools/setEnabled", "(plugins/approve
    with its digest)", "use plugins/restart"...), as hostctl shows it (:func:`cli_words`), names no method."""
    found = []
    for path in sorted([*(ROOT / "hostd" / "host").glob("*.py"), *(ROOT / "hostd" / "plugins").glob("*.py")]):
        for text in _message_texts(path.read_text(encoding="utf-8")):
            if any(method in text for method in CLI_VERBS) and text not in NEVER_SHOWN_BY_HOSTCTL:
                found.append((path.name, text, cli_words(text, {"plugin": "web", "tool": "web.fetch"})))
    assert len(found) >= 6  # the members read from the source: the scan still finds them
    assert [(name, shown) for name, _, shown in found if any(method in shown for method in CLI_VERBS)] == []
    shown = {text: words for _, text, words in found}
    assert shown["{} is disabled; enable it with tools/setEnabled"] == (
        "{} is disabled; enable it with hostctl enable web.fetch"
    )
    assert shown["gave up after {} restarts within {} s; use plugins/restart"] == (
        "gave up after {} restarts within {} s; use hostctl restart web"
    )
    # The places hostctl shows hostd's words: an error's message (Failure), the STATUS table's ERROR column.
    gave_up = {
        "kind": "PLUGIN_START_FAILED",
        "plugin": "web",
        "reason": "gave up after 5 restarts within 60 s; use plugins/restart",
    }
    assert status_row({"plugin_id": "web", "status": "error", "error": gave_up})[-1] == (
        "gave up after 5 restarts within 60 s; use hostctl restart web"
    )
    advice = "plugin web: approve this exact launch first (plugins/approve with its digest)"
    refused = RpcError({"code": -32020, "message": advice, "data": {"kind": "X", "plugin": "web"}})
    assert (
        Failure.from_exception(refused).message == "plugin web: approve this exact launch first (hostctl approve web)"
    )


# -- the README's walkthrough, run as printed --------------------------------------------------------------


def _walkthrough() -> list[str]:
    """The command lines of the README's hostctl walkthrough (the ``sh`` block that installs mcp-echo)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.DOTALL)
    block = next(b for b in blocks if ".venv/bin/hostctl install fixtures/mcp-echo" in b)
    return [line for line in block.splitlines() if line.strip()]


def _hint_commands(output: str, program: str) -> list[str]:
    """Each command a ``next:`` line of ``output`` names: the text from the program's name on, split at
    ", then " and " / " (one hint may name two steps)."""
    commands = []
    for line in output.splitlines():
        _, found, hint = line.partition("next: ")
        if not found:
            continue
        start = hint.find(program)
        assert start >= 0, f"a next: line that does not name the program as invoked: {line!r}"
        for step in re.split(r", then | / ", hint[start:]):
            assert step.startswith(program), f"a step of {line!r} that is not a command: {step!r}"
            commands.append(step)
    return commands


async def _run_as_typed(line: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``line`` through ``sh -c`` in ``cwd`` with ``env``; stdin a terminal that has "y" typed (the approval's
    question is answered as a person would); both streams captured."""
    primary, secondary = os.openpty()
    try:
        os.write(primary, b"y\n")
        with trio.fail_after(180):
            done = await trio.run_process(
                ["sh", "-c", line],
                cwd=cwd,
                env=env,
                stdin=secondary,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
    finally:
        os.close(secondary)
        os.close(primary)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


async def test_every_hint_the_readme_walkthrough_prints_runs_as_printed(tmp_path: Path) -> None:
    """A fresh clone set up as the README says (hostctl in ``.venv/bin``, not on PATH), a fresh HOME (the
    default state folder), each walkthrough line run by a shell as printed, then each ``next:`` command it
    printed, as printed: every one exits 0. Before: they said ``hostctl ...`` (sh: hostctl: not found)."""
    clone, home = tmp_path / "clone", tmp_path / "home"
    (clone / ".venv" / "bin").mkdir(parents=True)
    shutil.copytree(ECHO, clone / "fixtures" / "mcp-echo", ignore=shutil.ignore_patterns("__pycache__"))
    script = clone / ".venv" / "bin" / "hostctl"  # what pip writes for the console script
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom hostd.cli.hostctl import main\nsys.exit(main())\n")
    script.chmod(0o755)
    home.mkdir()  # empty: the README's import reads a config its own line writes, not a client's (issue 28)
    venv_bin = os.path.dirname(sys.executable)
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.abspath(d) != venv_bin]
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), PATH=os.pathsep.join(path), PYTHONPATH=str(ROOT), HOSTD_SECRETS="file")
    assert shutil.which("hostctl", path=env["PATH"]) is None  # as after the README's set-up

    ran, said = [], {}
    for line in _walkthrough():
        if " demo" in line:
            continue  # the demo works on a temporary state folder of its own (tests/test_hostctl.py runs it)
        done = await _run_as_typed(line, clone, env)
        assert done.returncode == 0, (line, done.stderr)
        said[shlex.split(line)[1]] = done.stdout
        for command in _hint_commands(done.stdout + done.stderr, ".venv/bin/hostctl"):
            hinted = await _run_as_typed(command, clone, env)
            assert hinted.returncode == 0, (line, command, hinted.stderr)
            ran.append((shlex.split(line)[1], command))
            said[command] = hinted.stdout
    # Each step's hint: install says approve (run: approved, "y"), grant then says enable (run: started),
    # the README's approve and enable of a running plugin say tools, the import says approve.
    # What the README's steps print is true as printed: the tools by the names a call takes (they said
    # mcp-echo.mcp-echo.echo), and a tool disabled through a hostd that runs no plugin (this command's own)
    # is kept for the next start (it said "the plugin keeps running").
    listed = [row.split()[0] for row in said["tools"].splitlines() if row.endswith("declared in its manifest")]
    assert listed == [f"mcp-echo.{tool}" for tool in ECHO_TOOLS]
    assert said["disable"] == "tool mcp-echo.sleep: disabled (kept for the plugin's next start)\n"
    assert ran == [
        ("install", ".venv/bin/hostctl approve mcp-echo"),
        ("grant", ".venv/bin/hostctl enable mcp-echo"),
        ("approve", ".venv/bin/hostctl tools mcp-echo"),
        ("enable", ".venv/bin/hostctl tools mcp-echo"),
        ("import", ".venv/bin/hostctl approve echo"),
        ("import", ".venv/bin/hostctl enable echo"),  # each imported id by name (it said "enable ID")
        ("show", ".venv/bin/hostctl tools echo"),  # approved and started by the import's hints: see its tools
    ]
    # ... and they are there: the tools its first start recorded (it said "no tools to show", the hint a dead end).
    recorded = [row.split()[0] for row in said[".venv/bin/hostctl tools echo"].splitlines() if "recorded at" in row]
    assert recorded == [f"echo.{tool}" for tool in sorted(ECHO_TOOLS)]
    # The imported script's version is the one its server reported when the import's hints started it (before it
    # runs: "unknown"), never the import's placeholder 0.0.0.
    assert said["show"].splitlines()[0] == "echo 1.0.0 (serverInfo) (echo)"
