"""docs/protocol.md stays true to the code: the error table, the type tables, the examples, a section per method."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from docgen import docs, examples
from hostd.control import models as p
from hostd.host.service import Host
from hostd.storage.state import PluginRecord
from hostd.wire.errors import ErrorKind

PROTOCOL = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
CONTROL_METHODS = ["initialize", "shutdown", "exit", "ping", "$/cancelRequest"]


def protocol_text() -> str:
    return PROTOCOL.read_text(encoding="utf-8")


def test_error_table_matches_error_kind() -> None:
    current = docs.extract_error_block(protocol_text())
    assert current == docs.error_table_markdown(), (
        "the error table in docs/protocol.md differs from hostd.wire.errors.ErrorKind; "
        "regenerate it with: python -m docgen.docs"
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
    assert "python -m docgen.docs" in capsys.readouterr().err
    assert docs.main([str(target)]) == 0
    assert docs.main(["--check", str(target)]) == 0
    assert docs.extract_error_block(target.read_text(encoding="utf-8")) == docs.error_table_markdown()


def test_missing_markers_are_an_error() -> None:
    with pytest.raises(ValueError, match="errors:begin"):
        docs.replace_error_block("no markers here\n")


# -- generated type tables, schema and examples (issue 11) -------------------------
#
# The class of bug: a wire shape documented by hand drifts from what hostd sends
# (PluginInfo lacked networkPorts and limits, launch lacked runtime/files/folders/env,
# the state record list was stale). Every member is now generated: type tables from
# hostd.control.models's models, the schema file from the same models, the examples from a
# live hostd; each test below fails when its part of the document is stale.


def test_type_tables_match_the_models() -> None:
    text = protocol_text()
    assert docs.render_types(text) == text, (
        "a type table in docs/protocol.md differs from hostd.control.models; regenerate it with: python -m docgen.docs"
    )
    assert set(docs.blocks(text, "type")) == set(docs.TYPES), "every model in docgen.docs.TYPES has one table"


def test_schema_file_matches_the_models() -> None:
    assert docs.SCHEMA_DOC.read_text(encoding="utf-8") == docs.schema_document(), (
        "docs/protocol.schema.json is stale; regenerate it with: python -m docgen.docs"
    )


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        # a row dropped (the networkPorts drift of issue 11), a meaning edited by hand, a type changed
        ("PluginInfo", lambda t: t.replace("| `networkPorts` | integer[] |", "| `ports` | integer[] |")),
        ("PluginStatus", lambda t: t.replace("| `tools_count` | integer |", "| `tools_count` | number |")),
        ("StateRecord", lambda t: t.replace("granted limits in the units", "limits in the units")),
    ],
)
def test_a_stale_type_table_is_reported(
    name: str, edit: Callable[[str], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = protocol_text()
    stale = edit(text)
    assert stale != text and docs.blocks(stale, "type")[name] != docs.blocks(text, "type")[name]
    target = tmp_path / "protocol.md"
    target.write_text(stale, encoding="utf-8")
    (tmp_path / "protocol.schema.json").write_text(docs.schema_document(), encoding="utf-8")
    assert docs.main(["--check", str(target)]) == 1
    assert "python -m docgen.docs" in capsys.readouterr().err
    assert docs.main([str(target)]) == 0
    assert target.read_text(encoding="utf-8") == text


@pytest.mark.parametrize("model", [p.PluginInfo, p.PluginStatus, p.HostTool, p.Launch, p.StateRecord])
def test_a_field_the_model_does_not_declare_is_refused(model: type[p.Wire]) -> None:
    """Handlers build results through these models: an undocumented field cannot reach the wire."""
    with pytest.raises(ValidationError, match="undocumented"):
        model.model_validate({"undocumented": 1})


def test_the_state_record_model_is_what_the_store_writes() -> None:
    """hostd.storage.state stays free of pydantic (the lock is taken before it loads); the model must match it."""
    record = PluginRecord(
        path="/p", manifest_digest="sha256:x", granted=["b", "a"], network_ports=[443], limits={"max_rss_bytes": 1.0}
    )
    stored = record.to_json()
    assert list(stored) == [f.alias or n for n, f in p.StateRecord.model_fields.items() if f.is_required()]
    assert p.StateRecord.model_validate(stored).wire() == stored
    # The members written only when set, in the model's order.
    record.secret_arguments = True
    record.install = {"id": "00ff", "origin": "folder:/p"}
    record.call_grants = {"/d/q3.xlsx": "read"}
    record.start_error = {"kind": "PLUGIN_START_FAILED", "message": "m", "time": "2026-12-06T06:00:00Z"}
    record.network_hosts = ["api.example.com"]
    record.network_call_hosts = ["files.example.org:443"]
    record.server_info = {"name": "mcp-echo", "version": "1.0.0"}
    stored = record.to_json()
    assert list(stored) == [f.alias or n for n, f in p.StateRecord.model_fields.items()]
    assert p.StateRecord.model_validate(stored).wire() == stored


@pytest.fixture(scope="module")
def live_examples() -> dict[str, str]:
    """The examples captured from a real hostd serving the echo fixture (a few seconds)."""
    return examples.capture()


def test_examples_match_a_live_hostd(live_examples: dict[str, str]) -> None:
    text = protocol_text()
    assert set(docs.blocks(text, "example")) == set(live_examples), "every captured example has one block"
    fresh = docs.render_examples(text, live_examples)
    assert examples.mask(fresh) == examples.mask(text), (
        "an example in docs/protocol.md differs from what a live hostd answers; "
        "regenerate them with: python -m docgen.docs --examples"
    )


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        # the issue-11 drift: a PluginInfo without networkPorts and limits
        ("install", '"networkPorts":[],', ""),
        ("enable", '"tools_count":7', '"tools_count":6'),
        ("tools-call-errors", "TOOL_TIMEOUT", "TIMEOUT"),
    ],
)
def test_a_stale_example_is_reported(live_examples: dict[str, str], name: str, old: str, new: str) -> None:
    text = protocol_text()
    block = docs.blocks(text, "example")[name]
    assert old in block
    stale = text.replace(block, block.replace(old, new, 1))
    fresh = docs.render_examples(stale, live_examples)
    assert examples.mask(fresh) != examples.mask(stale)
    assert examples.mask(fresh) == examples.mask(text)


# Examples still written by hand: the 300 MB hog under --max-rss-mb (too heavy for every test run).
HAND_EXAMPLES = [
    '← {"jsonrpc":"2.0","method":"plugins/statusChanged","params":{"plugin_id":"hog-echo"',
]


def test_no_example_is_added_by_hand() -> None:
    """Every jsonc block is generated, except the listed ones (shrink this list, never grow it)."""
    text = re.sub(r"<!-- example:([A-Za-z0-9_-]+):begin -->.*?<!-- example:\1:end -->", "", protocol_text(), flags=re.S)
    firsts = [block.split("\n", 1)[0] for block in text.split("```jsonc\n")[1:]]
    assert len(firsts) == len(HAND_EXAMPLES)
    for first, expected in zip(firsts, HAND_EXAMPLES, strict=True):
        assert first.startswith(expected)
