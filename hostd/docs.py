"""Generated parts of ``docs/protocol.md``: the error table.

:class:`~hostd.errors.ErrorKind` is the one table of error codes. The block
between ``<!-- errors:begin -->`` and ``<!-- errors:end -->`` in
``docs/protocol.md`` is rendered from it by :func:`error_table_markdown`, and
``tests/test_docs.py`` fails when the two differ. Regenerate the block with::

    python -m hostd.docs          # rewrite the block in docs/protocol.md in place
    python -m hostd.docs --check  # exit 1 if it is stale

Rows come in three groups: the JSON-RPC 2.0 codes in the specification's
order (-32700, then -32600 to -32603), the two codes borrowed from LSP (-32002
not initialized, -32800 cancelled), then hostd's own codes in the
server-defined range; within a group, by code descending (-32010 before
-32011). The output depends on ``ErrorKind`` only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from hostd.errors import ErrorKind

__all__ = [
    "BEGIN_MARKER",
    "END_MARKER",
    "PROTOCOL_DOC",
    "error_table_markdown",
    "extract_error_block",
    "replace_error_block",
]

BEGIN_MARKER: Final = "<!-- errors:begin -->"
END_MARKER: Final = "<!-- errors:end -->"

PROTOCOL_DOC: Final = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
"""Where ``python -m hostd.docs`` rewrites the error table in a source checkout."""

_JSONRPC_CODES: Final = frozenset({-32700, -32600, -32601, -32602, -32603})
_LSP_CODES: Final = frozenset({-32002, -32800})


def _order(code: int) -> tuple[int, bool, int]:
    """Sort key: group (JSON-RPC, LSP, hostd), -32700 first as in the JSON-RPC spec, code descending."""
    group = 0 if code in _JSONRPC_CODES else 1 if code in _LSP_CODES else 2
    return group, code != -32700, -code


def _cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, line breaks folded."""
    return " ".join(text.replace("|", "\\|").split())


def error_table_markdown() -> str:
    """The error table as Markdown: ``code | data.kind | meaning``, one row per :class:`ErrorKind`.

    Rows: JSON-RPC 2.0 codes first (-32700, then -32600 to -32603), then the
    LSP codes, then hostd's own, each group by code descending. Ends with a newline.
    """
    kinds = sorted(ErrorKind, key=lambda kind: _order(kind.code))
    lines = ["| code | data.kind | meaning |", "|---:|---|---|"]
    lines.extend(f"| `{kind.code}` | `{kind.name}` | {_cell(kind.meaning)} |" for kind in kinds)
    return "\n".join(lines) + "\n"


def _markers(text: str) -> tuple[int, int]:
    """Offsets just after the begin marker's line and at the start of the end marker."""
    begin = text.find(BEGIN_MARKER)
    end = text.find(END_MARKER)
    if begin < 0 or end < 0 or end < begin:
        raise ValueError(f"the document needs {BEGIN_MARKER} and then {END_MARKER}, each once")
    if text.find(BEGIN_MARKER, begin + 1) >= 0 or text.find(END_MARKER, end + 1) >= 0:
        raise ValueError(f"{BEGIN_MARKER} and {END_MARKER} must each appear exactly once")
    start = text.find("\n", begin)
    return (len(text) if start < 0 else start + 1), end


def extract_error_block(text: str) -> str:
    """The text between the markers (the table as it stands in the document)."""
    start, end = _markers(text)
    return text[start:end]


def replace_error_block(text: str) -> str:
    """``text`` with the block between the markers replaced by :func:`error_table_markdown`."""
    start, end = _markers(text)
    return text[:start] + error_table_markdown() + text[end:]


def main(argv: list[str] | None = None) -> int:
    """``python -m hostd.docs [--check] [PATH]``: rewrite (or check) the error table block."""
    parser = argparse.ArgumentParser(
        prog="python -m hostd.docs", description="Render the ErrorKind table into docs/protocol.md."
    )
    parser.add_argument("path", nargs="?", type=Path, default=PROTOCOL_DOC, help="the document to update")
    parser.add_argument("--check", action="store_true", help="exit 1 if the table in the document is stale")
    args = parser.parse_args(argv)
    target: Path = args.path
    text = target.read_text(encoding="utf-8")
    try:
        updated = replace_error_block(text)
    except ValueError as exc:
        print(f"{target}: {exc}", file=sys.stderr)
        return 1
    if args.check:
        if updated != text:
            print(f"{target}: the error table is stale; regenerate it with: python -m hostd.docs", file=sys.stderr)
            return 1
        return 0
    if updated != text:
        target.write_text(updated, encoding="utf-8")
        print(f"updated the error table in {target}")
    else:
        print(f"{target}: the error table is up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
