"""Where a bundle's words may point: never out of the bundle folder by ``..`` (issue 25, over-granting 1).

The class: a word of ``server.mcp_config`` (command, argument, env value) that
names a path relative to the bundle and walks out of it with ``..``. Members:
``${__dirname}/../../secrets`` in an env value (once a read-write grant on
hostd's secret store), ``${__dirname}/../data/other-plugin`` in an argument,
``--root=${__dirname}/../../credentials``, a bare relative ``../../state.json``
(the launch's working folder is the bundle folder), ``a/../../x``. A bundle
has no business outside its own folder except through the host variables
(``${HOME}``...) and the user's settings, so the word is refused at install
with ``PACKAGE_INVALID`` naming the field; the sandbox's fence
(:func:`sandbox.policy.fence_rules`) refuses whatever reaches the state folder
by another route.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["escape_problem"]

_DIRNAME: Final = "${__dirname}"
#: Where a path inside a word ends: a list separator, whitespace, or an option's ``=``.
_PATH_END: Final = re.compile(r"[\s:;,=]")


def _walks_out(relative: str) -> bool:
    """True when ``relative`` (``/``-separated, taken from inside a folder) climbs above that folder."""
    depth = 0
    for part in relative.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def escape_problem(word: str) -> str | None:
    """Why ``word`` (a bundle's command, argument or env value, before substitution) leaves the bundle, or ``None``.

    Checks each ``${__dirname}`` expansion's path (up to the next ``:``, ``;``,
    ``,``, ``=`` or whitespace) and, for a word that is a relative path (or an
    option ``--x=<relative path>``), the word itself. Pure.
    """
    for piece in word.split(_DIRNAME)[1:]:
        tail = _PATH_END.split(piece, maxsplit=1)[0]
        if _walks_out(tail):
            return f"{_DIRNAME}{tail} leaves the bundle folder ('..' past ${{__dirname}})"
    candidates = [word]
    if word.startswith("-") and "=" in word:
        candidates.append(word.split("=", 1)[1])
    for candidate in candidates:
        if candidate.startswith(("/", "$", "~", "-")) or ".." not in candidate:
            continue
        if _walks_out(candidate):
            return f"the relative path {candidate} leaves the bundle folder ('..' past the working folder)"
    return None
