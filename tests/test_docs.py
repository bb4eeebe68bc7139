"""docs/protocol.md stays true to the code: the error table and a section per method."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hostd import docs
from hostd.errors import ErrorKind
from hostd.host import Host

PROTOCOL = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
CONTROL_METHODS = ["initialize", "shutdown", "exit", "ping", "$/cancelRequest"]


def protocol_text() -> str:
    return PROTOCOL.read_text(encoding="utf-8")


def test_error_table_matches_error_kind() -> None:
    current = docs.extract_error_block(protocol_text())
    assert current == docs.error_table_markdown(), (
        "the error table in docs/protocol.md differs from hostd.errors.ErrorKind; "
        "regenerate it with: python -m hostd.docs"
    )


def test_error_table_has_one_row_per_kind_in_a_stable_order() -> None:
    table = docs.error_table_markdown()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    kinds = [re.findall(r"`([^`]+)`", row)[1] for row in rows]
    assert sorted(kinds) == sorted(kind.name for kind in ErrorKind)
    codes = [int(re.findall(r"`([^`]+)`", row)[0]) for row in rows]
    assert codes[:5] == [-32700, -32600, -32601, -32602, -32603]
    assert codes[5:7] == [-32002, -32800]
    assert codes[7:] == sorted(codes[7:], reverse=True)


@pytest.mark.parametrize("method", [*Host.METHODS, *CONTROL_METHODS])
def test_every_method_has_a_heading(method: str) -> None:
    assert f"### `{method}`" in protocol_text().splitlines(), (
        f"docs/protocol.md has no '### `{method}`' heading; document the method there"
    )


def test_replace_error_block_rewrites_only_the_block() -> None:
    stale = f"intro\n{docs.BEGIN_MARKER}\n| old |\n{docs.END_MARKER}\noutro\n"
    fresh = docs.replace_error_block(stale)
    assert fresh == f"intro\n{docs.BEGIN_MARKER}\n{docs.error_table_markdown()}{docs.END_MARKER}\noutro\n"
    assert docs.replace_error_block(fresh) == fresh


def test_main_check_reports_a_stale_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "protocol.md"
    target.write_text(f"{docs.BEGIN_MARKER}\n| stale |\n{docs.END_MARKER}\n", encoding="utf-8")
    assert docs.main(["--check", str(target)]) == 1
    assert "python -m hostd.docs" in capsys.readouterr().err
    assert docs.main([str(target)]) == 0
    assert docs.main(["--check", str(target)]) == 0
    assert docs.extract_error_block(target.read_text(encoding="utf-8")) == docs.error_table_markdown()


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(ValueError, match="errors:begin"):
        docs.replace_error_block("no markers here\n")
