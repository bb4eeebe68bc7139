"""A failed tool call seen through ``hostd mcp`` gives hostd's advice in hostctl's words (issue 28).

A model relays a tool result's text to a person, who runs hostctl, not control methods: a new user's README walk
met "approve this exact launch first (plugins/approve with its digest) ... restart it (plugins/restart)" in an MCP
client. The class is every method phrase of hostd's advice (hostd/wire/advice.py ``METHOD_PHRASES``, which
tests/test_hostctl_hints.py holds to cover every message in the source); here each member is turned into the
command, with the program as the person runs it, and the error object for programs stays as hostd made it.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from hostd.gateway.tools import ERROR_META_KEY, call_failure, hostctl_program
from hostd.wire.advice import METHOD_PHRASES
from hostd.wire.errors import ErrorKind, HostError

PROGRAM = "/home/you/hostd/.venv/bin/hostctl --state-dir /home/you/state"


@pytest.mark.parametrize(("phrase", "words"), METHOD_PHRASES)
def test_each_method_phrase_reaches_the_client_as_the_hostctl_command(phrase: str, words: str) -> None:
    error = HostError(ErrorKind.PLUGIN_START_FAILED, f"plugin p failed: {phrase}", plugin="p", tool="p.t")
    result = call_failure(error, PROGRAM)
    assert result is not None
    [content] = result["content"]
    expected = words.format(plugin="p", tool="p.t").replace("hostctl", PROGRAM, 1)
    assert content["text"] == f"plugin p failed: {expected}"
    assert "plugins/" not in content["text"] and "tools/setEnabled" not in content["text"]
    assert result["_meta"][ERROR_META_KEY]["message"] == f"plugin p failed: {phrase}"  # for a program: as made


def test_the_program_is_the_hostctl_beside_the_running_hostd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = tmp_path / "my venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name in ("hostd", "hostctl"):
        (venv_bin / name).write_text("#!/bin/sh\n")
        (venv_bin / name).chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(venv_bin / "hostd"), "mcp"])
    assert hostctl_program("/s") == f"{shlex.quote(str(venv_bin / 'hostctl'))} --state-dir /s"
    # python -m hostd: this interpreter's module
    monkeypatch.setattr(sys, "argv", [str(Path("hostd") / "__main__.py"), "mcp"])
    assert hostctl_program(None) == f"{shlex.quote(sys.executable)} -m hostd.cli.hostctl"
