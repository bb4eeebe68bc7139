"""The table of refused environment variables in ``sandbox/README.md``, generated from the code's table.

The one list of variables a plugin's ``env`` may not set is :data:`sandbox.env_families.ENV_FAMILIES`
(with the members re-admitted by :data:`sandbox.env_families.ALLOWED_ENV`). The README shows it between
``<!-- env-families:begin -->`` and ``<!-- env-families:end -->``, one row per family: its variables, why
they are refused (how a member makes a runtime load or run other code) and what the user can do.
Nothing between the markers is written by hand: ``python -m docgen.docs`` rewrites it (:func:`sync`),
``--check`` fails when it is stale, and ``tests/test_env_paths.py`` compares it on every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sandbox.env_families import ALLOWED_ENV, ENV_FAMILIES, REMOVE_ADVICE

__all__ = ["BEGIN", "END", "ENV_DOC", "render_block", "replace_block", "sync", "table_markdown"]

ENV_DOC: Final = Path(__file__).resolve().parent.parent / "sandbox" / "README.md"
"""The document that holds the table, in a source checkout."""
BEGIN: Final = "<!-- env-families:begin -->"
END: Final = "<!-- env-families:end -->"


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell (``|`` escaped, no line breaks)."""
    return " ".join(text.split()).replace("|", "\\|")


def table_markdown() -> str:
    """The table: one row per refused family, in :data:`ENV_FAMILIES` order, then the allowed members.

    Columns: family, variables (the family's pattern), refused because (its ``why``, completing "its
    members ..."), what to do (its ``advice`` beyond :data:`REMOVE_ADVICE`, which every row shares and the
    text under the table states once). Ends with a newline.
    """
    lines = ["| family | variables | refused because its members | what to do |", "|---|---|---|---|"]
    for family in ENV_FAMILIES:
        extra = family.advice.removeprefix(REMOVE_ADVICE).removeprefix(":").strip()
        lines.append(
            f"| {_cell(family.label)} | {_cell(family.pattern)} | {_cell(family.why)} | "
            f"{_cell('remove it' + ('; ' + extra if extra else ''))} |"
        )
    allowed = ", ".join(f"`{name}`" for name in sorted(ALLOWED_ENV))
    lines += [
        "",
        f"Every refusal's advice is the same first step: {REMOVE_ADVICE}. Allowed although their family is "
        f"refused (they only tune output, encoding or prompting): {allowed}.",
    ]
    return "\n".join(lines) + "\n"


def render_block() -> str:
    """What stands between the markers: the table."""
    return table_markdown()


def replace_block(text: str) -> str:
    """``text`` with what stands between :data:`BEGIN` and :data:`END` replaced by :func:`render_block`.

    Raises ``ValueError`` when the markers are missing, repeated or out of order.
    """
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < begin or text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"the document needs {BEGIN} and then {END}, each once")
    start = begin + len(BEGIN)
    return text[:start] + "\n" + render_block() + text[end:]


def sync(path: Path = ENV_DOC, *, check: bool) -> bool:
    """Rewrite the table in ``path`` (``check``: only compare); True when it was (or is) up to date.

    Raises ``ValueError`` for broken markers and ``OSError`` when the file cannot be read or written.
    """
    text = path.read_text(encoding="utf-8")
    updated = replace_block(text)
    if updated == text:
        return True
    if not check:
        path.write_text(updated, encoding="utf-8")
    return False
