"""hostd's advice in the words of the one reading it: a control method named in a message becomes the hostctl
command that does it (issue 28: "CLI messages name protocol methods").

hostd's messages are written for the control protocol's parent (``approve this exact launch first
(plugins/approve with its digest)``). A person reads them too: in hostctl's output (hostd/cli/render.py) and, through
``hostd mcp``, in an MCP client's tool result that a model relays (hostd/gateway/tools.py). Both turn each phrase
of :data:`METHOD_PHRASES` into the hostctl command, with the program as that person can run it. The class: *a
message of hostd's that reaches a person naming a method they cannot call*; a phrase added to a message is added
here once, and every reader gets it. Sans-IO, standard library only.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

#: (the phrase in hostd's messages, the hostctl words that do it; ``{plugin}`` / ``{tool}`` from the error's data,
#: ``ID`` / ``ID.TOOL`` when it names none). The class is every such phrase in hostd's messages:
#: tests/test_hostctl_hints.py reads them all from the source and checks that :func:`cli_words` leaves no method of
#: :data:`CLI_VERBS` in any of them.
METHOD_PHRASES: tuple[tuple[str, str], ...] = (
    ("enable it with tools/setEnabled", "enable it with hostctl enable {tool}"),
    ("(plugins/approve with its digest)", "(hostctl approve {plugin})"),
    ("(plugins/prepare)", "(hostctl enable {plugin} installs its packages)"),
    ("(plugins/enable starts it)", "(hostctl enable {plugin} starts it)"),
    ("(plugins/enable)", "(hostctl enable {plugin})"),
    ("(plugins/restart)", "(hostctl restart {plugin})"),
    ("use plugins/restart", "use hostctl restart {plugin}"),
)

#: The control methods hostctl has a verb for: none of them may reach a hostctl user's eyes as a method.
CLI_VERBS: dict[str, str] = {
    "tools/setEnabled": "enable / disable ID.TOOL",
    "plugins/approve": "approve",
    "plugins/prepare": "enable (or install)",
    "plugins/enable": "enable",
    "plugins/restart": "restart",
    "plugins/disable": "disable",
    "plugins/install": "install",
    "plugins/import": "import",
    "plugins/uninstall": "uninstall",
}


def with_program(command: str, program: str) -> str:
    """``command`` (prose holding ``hostctl VERB ...``) with each ``hostctl`` replaced by ``program`` (how the reader
    runs hostctl, e.g. ``.venv/bin/hostctl --state-dir DIR``)."""
    return re.sub(r"(?<![\w/.-])hostctl(?= [a-z])", lambda _: program, command)


def cli_words(text: str, data: Mapping[str, Any] | None, typed: Callable[[str], str]) -> str:
    """``text`` (a message of hostd's) with each phrase of :data:`METHOD_PHRASES` as the hostctl command that does
    it, filled from ``data`` (an error's data: ``plugin``, ``tool``; ``ID`` / ``ID.TOOL`` when absent) and passed
    through ``typed`` (``hostctl ...`` -> the program as the reader runs it)."""
    if not any(method in text for method in CLI_VERBS):
        return text
    plugin = (data or {}).get("plugin")
    tool = (data or {}).get("tool")
    values = {
        "plugin": shlex.quote(str(plugin)) if isinstance(plugin, str) else "ID",
        "tool": shlex.quote(str(tool)) if isinstance(tool, str) else "ID.TOOL",
    }
    for phrase, words in METHOD_PHRASES:
        text = text.replace(phrase, typed(words.format(**values)))
    return text


__all__ = ["CLI_VERBS", "METHOD_PHRASES", "cli_words", "with_program"]
