"""MCP tool -> host tool conversion and argument validation (cases D1, D2, D3).

Plain function calls: the conversion is sans-IO, so no process is needed here.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import urllib.request
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from hostd.mcp import tools as tools_module
from hostd.mcp.convert import ToolProblem, convert_tools, function_name_for
from hostd.mcp.tools import RegisteredTool, validate_arguments
from hostd.plugins.registry import ToolRegistry
from hostd.wire.errors import ErrorKind, HostError

OBJECT = {"type": "object"}
SAFE = re.compile(r"^[A-Za-z0-9_-]+$")

POINT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
        }
    },
    "properties": {"point": {"$ref": "#/$defs/Point"}},
    "required": ["point"],
}


def tool(name: Any, input_schema: Any = OBJECT, **fields: Any) -> dict[str, Any]:
    """A raw MCP tool object as a server would send it."""
    raw: dict[str, Any] = {"name": name, "inputSchema": input_schema}
    raw.update(fields)
    return raw


def convert(
    plugin_id: str,
    raw_tools: Sequence[Any],
    *,
    contributes: Sequence[str] | None = None,
    permissions: Sequence[str] = (),
    protocol_version: str | None = None,
) -> list[RegisteredTool]:
    """convert_tools with contributes defaulting to exactly the listed (string) names."""
    if contributes is None:
        contributes = [f"{plugin_id}.{t['name']}" for t in raw_tools if isinstance(t.get("name"), str)]
    return convert_tools(
        plugin_id, raw_tools, permissions=permissions, contributes=contributes, protocol_version=protocol_version
    )


def problems_of(
    plugin_id: str, raw_tools: Sequence[Any], kind: ErrorKind = ErrorKind.PLUGIN_START_FAILED, **kwargs: Any
) -> list[dict[str, Any]]:
    """The ``data.problems`` of the listing's rejection, whose kind must be ``kind`` (``NAME_INVALID`` when a
    tool's name breaks the rule)."""
    with pytest.raises(HostError) as caught:
        convert(plugin_id, raw_tools, **kwargs)
    error = caught.value
    assert error.kind is kind
    assert error.data["plugin"] == plugin_id
    problems: list[dict[str, Any]] = error.data["problems"]
    return problems


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Record (and refuse) any attempt to open a connection or fetch a URL."""
    attempts: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(args)
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    yield attempts
    assert attempts == []


# --- D1: names -------------------------------------------------------------------------

LONG_70 = "a" * 70
SIXTY_X = "b" * 55 + "x" * 5
SIXTY_Y = "b" * 55 + "y" * 5
D1_NAMES = ["calendar.read", "github.git_commit", "New-Tool", "v1.2-beta_3", LONG_70, SIXTY_X, SIXTY_Y]
D1_EXPECTED = {
    "names.calendar.read": "names_calendar_read",
    "names.github.git_commit": "names_github_git_commit",
    "names.New-Tool": "names_New-Tool",
    "names.v1.2-beta_3": "names_v1_2-beta_3",
    f"names.{LONG_70}": "names_" + "a" * 49 + "_d2f1ee9f",
    f"names.{SIXTY_X}": "names_" + "b" * 49 + "_96667529",
    f"names.{SIXTY_Y}": "names_" + "b" * 49 + "_63dc4511",
}


def test_d1_names_are_exact_and_function_names_safe_unique_stable() -> None:
    converted = convert("names", [tool(name) for name in D1_NAMES])

    assert [t.name for t in converted] == [f"names.{name}" for name in D1_NAMES]
    assert [t.remote_name for t in converted] == D1_NAMES  # tools/call sends these back unchanged
    assert {t.name: t.function_name for t in converted} == D1_EXPECTED
    functions = [t.function_name for t in converted]
    assert len(set(functions)) == len(functions)
    for function in functions:
        assert SAFE.match(function), function
        assert len(function) <= 64
    # The two 60-character names share their first 55 characters and still differ.
    assert functions[5][:55] == functions[6][:55]
    assert functions[5] != functions[6]


def test_d1_function_names_do_not_depend_on_listing_order() -> None:
    forward = {t.name: t.function_name for t in convert("names", [tool(n) for n in D1_NAMES])}
    backward = {t.name: t.function_name for t in convert("names", [tool(n) for n in reversed(D1_NAMES)])}
    assert forward == backward == D1_EXPECTED


def test_short_host_names_are_only_sanitized() -> None:
    # "d1." + 60 characters = 63 <= 64: no hash suffix needed, and the two stay distinct.
    converted = convert("d1", [tool(SIXTY_X), tool(SIXTY_Y)])
    assert [t.function_name for t in converted] == [f"d1_{SIXTY_X}", f"d1_{SIXTY_Y}"]


@pytest.mark.parametrize(
    ("host_name", "expected"),
    [
        ("p.calendar.read", "p_calendar_read"),
        ("p.ok-name_1", "p_ok-name_1"),
        ("p.emoji 🙂", "p_emoji__"),
        ("x" * 64, "x" * 64),
        ("x" * 65, "x" * 55 + "_" + hashlib.sha256(b"x" * 65).hexdigest()[:8]),
        ("", "_" + hashlib.sha256(b"").hexdigest()[:8]),
    ],
)
def test_function_name_for(host_name: str, expected: str) -> None:
    assert function_name_for(host_name) == expected
    assert function_name_for(host_name) == expected  # deterministic


def test_sanitizing_collision_gives_both_a_hash_suffix() -> None:
    # "p.a.b" and "p.a_b" both sanitize to "p_a_b".
    converted = convert("p", [tool("a.b"), tool("a_b"), tool("c")])
    assert {t.name: t.function_name for t in converted} == {
        "p.a.b": "p_a_b_7ab17355",
        "p.a_b": "p_a_b_0bb00422",
        "p.c": "p_c",
    }
    reordered = convert("p", [tool("c"), tool("a_b"), tool("a.b")])
    assert {t.name: t.function_name for t in reordered} == {t.name: t.function_name for t in converted}


def test_empty_and_duplicate_names_are_precise_problems() -> None:
    listing = [tool("ok"), tool(""), tool("dup"), tool("dup")]
    problems = problems_of("d1", listing, ErrorKind.NAME_INVALID, contributes=["d1.ok", "d1.dup"])
    assert problems == [
        {"tool": 1, "field": "name", "message": "the tool name is empty"},
        {
            "tool": "dup",
            "field": "name",
            "message": "duplicate tool name 'dup' at index 3 (first at index 2); names must be unique",
        },
    ]


ALLOWED = "only A-Z, a-z, 0-9, '_', '-' and '.' are allowed"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"inputSchema": OBJECT}, "the tool has no name"),
        (tool(7), "the tool name must be a string, got a number"),
        (tool("bad\nname"), f"the tool name 'bad\\nname' contains U+000A at 3; {ALLOWED}"),
        (tool("x" * 129), "the tool name is 129 characters long; at most 128 are allowed"),
        (tool("lone\ud800"), f"the tool name 'lone\\ud800' contains U+D800 at 4; {ALLOWED}"),
        # Issue 29: names are MCP's allowlist, not "anything but controls".
        (tool("github/git_commit"), f"the tool name 'github/git_commit' contains U+002F '/' at 6; {ALLOWED}"),
        (tool("New Tool"), f"the tool name 'New Tool' contains U+0020 ' ' at 3; {ALLOWED}"),
        (tool("naïve_ü"), f"the tool name 'naïve_ü' contains U+00EF 'ï' at 2; {ALLOWED}"),
        (tool("echo\u2060"), f"the tool name 'echo\\u2060' contains U+2060 at 4; {ALLOWED}"),
        (tool("echo\U000e0041"), f"the tool name 'echo\\U000e0041' contains U+E0041 at 4; {ALLOWED}"),
        (tool("\u061cecho"), f"the tool name '\\u061cecho' contains U+061C at 0; {ALLOWED}"),
        (tool("ec\u200dho"), f"the tool name 'ec\\u200dho' contains U+200D at 2; {ALLOWED}"),
        # A variation selector and a Hangul filler: printable to Python's repr, escaped all the same.
        (tool("echo\ufe0f"), f"the tool name 'echo\\ufe0f' contains U+FE0F at 4; {ALLOWED}"),
        (tool("\u3164echo"), f"the tool name '\\u3164echo' contains U+3164 at 0; {ALLOWED}"),
        (tool("\ufeffecho"), f"the tool name '\\ufeffecho' contains U+FEFF at 0; {ALLOWED}"),
    ],
)
def test_unusable_names_are_reported_by_index(raw: dict[str, Any], message: str) -> None:
    problems = problems_of("d1", [raw], ErrorKind.NAME_INVALID, contributes=[])
    assert problems == [{"tool": 0, "field": "name", "message": message}]


def test_non_object_tool_entry() -> None:
    problems = problems_of("d1", ["not a tool"], contributes=[])
    assert problems == [{"tool": 0, "field": "", "message": "a tool must be a JSON object, got a string"}]


# --- D2: schemas -----------------------------------------------------------------------


def test_d2_local_ref_accepted_and_argument_validation_follows_it() -> None:
    (converted,) = convert("geo", [tool("move", POINT_SCHEMA)])
    validate_arguments(converted, {"point": {"x": 1, "y": 2.5}})

    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"point": {"x": "left", "y": 2}})
    error = caught.value
    assert error.kind is ErrorKind.INVALID_ARGUMENTS
    assert error.data == {
        "tool": "geo.move",
        "pointer": "/point/x",
        "reason": "'left' is not of type 'number'",
        "keyword": "type",
    }
    assert error.message == "invalid arguments for tool 'geo.move' at /point/x: 'left' is not of type 'number'"
    assert error.to_error_object()["code"] == -32021
    assert error.to_error_object()["data"]["kind"] == "INVALID_ARGUMENTS"

    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"point": {"x": 1}})
    assert caught.value.data["pointer"] == "/point"
    assert caught.value.data["keyword"] == "required"

    with pytest.raises(HostError) as caught:
        validate_arguments(converted, ["not", "an", "object"])
    assert caught.value.data["pointer"] == ""


def test_d2_dangling_ref_rejected_with_pointer() -> None:
    schema = {"type": "object", "properties": {"point": {"$ref": "#/$defs/Missing"}}}
    problems = problems_of("geo", [tool("move", schema)])
    assert problems == [
        {
            "tool": "move",
            "field": "inputSchema",
            "message": "$ref '#/$defs/Missing' does not resolve inside the schema (at /properties/point/$ref)",
            "pointer": "/properties/point/$ref",
        }
    ]


def test_d2_non_object_input_schema_rejected() -> None:
    problems = problems_of("d2", [tool("s", {"type": "string"})])
    assert problems == [
        {
            "tool": "s",
            "field": "inputSchema",
            "message": 'the root must be {"type": "object"}; \'type\' is "string"',
            "pointer": "/type",
        }
    ]


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"properties": {}}, 'the root must be {"type": "object"}; \'type\' is missing'),
        ("object", "must be a JSON Schema object, got a string"),
        (None, "must be a JSON Schema object, got null"),
    ],
)
def test_d2_input_schema_must_be_an_object_schema(schema: Any, message: str) -> None:
    problems = problems_of("d2", [tool("t", schema)])
    assert [p["message"] for p in problems] == [message]


def test_d2_missing_input_schema_rejected() -> None:
    problems = problems_of("d2", [{"name": "t", "description": "no schema"}])
    assert problems == [
        {
            "tool": "t",
            "field": "inputSchema",
            "message": 'missing; the MCP spec requires one (at least {"type": "object"})',
        }
    ]


def test_d2_remote_ref_rejected_and_never_fetched(no_network: list[Any]) -> None:
    schema = {"type": "object", "properties": {"p": {"$ref": "https://example.com/schemas/p.json"}}}
    problems = problems_of("d2", [tool("remote", schema)])
    assert problems == [
        {
            "tool": "remote",
            "field": "inputSchema",
            "message": "$ref 'https://example.com/schemas/p.json' points outside the schema; hostd never "
            "fetches schemas, so inline it (e.g. under $defs) and use a local '#/...' reference "
            "(at /properties/p/$ref)",
            "pointer": "/properties/p/$ref",
        }
    ]


def test_d2_argument_validation_never_fetches_even_if_conversion_was_bypassed(no_network: list[Any]) -> None:
    schema = {"type": "object", "properties": {"p": {"$ref": "https://example.com/schemas/p.json"}}}
    bypassed = RegisteredTool(
        name="d2.remote",
        remote_name="remote",
        plugin="d2",
        function_name="d2_remote",
        description="",
        input_schema=schema,
        output_schema=None,
        annotations=None,
        permission=None,
        definition_digest="sha256:" + "0" * 64,
    )
    with pytest.raises(HostError) as caught:
        validate_arguments(bypassed, {"p": 1})
    assert caught.value.kind is ErrorKind.INTERNAL_ERROR
    assert caught.value.data == {"tool": "d2.remote"}


def test_relative_ref_is_remote_too() -> None:
    schema = {"type": "object", "properties": {"p": {"$ref": "other.json#/x"}}}
    (problem,) = problems_of("d2", [tool("t", schema)])
    assert problem["pointer"] == "/properties/p/$ref"
    assert "points outside the schema" in problem["message"]


def test_invalid_schema_reports_pointer_inside_schema() -> None:
    schema = {"type": "object", "properties": {"p": {"type": 5}}}
    (problem,) = problems_of("d2", [tool("t", schema)])
    assert problem["field"] == "inputSchema"
    assert problem["pointer"] == "/properties/p/type"
    assert problem["message"].startswith("not a valid JSON Schema (Draft202012): ")


def test_anchor_references() -> None:
    good = {
        "type": "object",
        "$defs": {"n": {"$anchor": "num", "type": "number"}},
        "properties": {"v": {"$ref": "#num"}},
    }
    (converted,) = convert("a", [tool("t", good)])
    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"v": "x"})
    assert caught.value.data["pointer"] == "/v"

    bad = {"type": "object", "properties": {"v": {"$ref": "#nowhere"}}}
    (problem,) = problems_of("a", [tool("t", bad)])
    assert problem["message"] == "$ref '#nowhere' names an anchor the schema does not define (at /properties/v/$ref)"


def test_ref_like_data_is_not_a_reference() -> None:
    schema = {
        "type": "object",
        "properties": {"doc": {"type": "object", "default": {"$ref": "#/nowhere"}, "examples": [{"$ref": "x"}]}},
        "const_holder": {"const": {"$ref": "https://example.com"}},
    }
    (converted,) = convert("a", [tool("t", schema)])
    assert converted.input_schema is schema


def test_ref_with_escaped_pointer_and_array_index() -> None:
    schema = {
        "type": "object",
        "$defs": {"a/b~c": {"type": "string"}, "list": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        "properties": {"s": {"$ref": "#/$defs/a~1b~0c"}, "i": {"$ref": "#/$defs/list/anyOf/0"}},
    }
    (converted,) = convert("a", [tool("t", schema)])
    validate_arguments(converted, {"s": "ok", "i": 3})
    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"i": "three"})
    assert caught.value.data["pointer"] == "/i"

    # The check and the validator resolve references with the same library (referencing), so they
    # agree: what one accepts the other follows, and what one cannot resolve the other refuses.
    past_end = dict(schema, properties={"i": {"$ref": "#/$defs/list/anyOf/2"}})
    assert problems_of("a", [tool("t", past_end)]) == [
        {
            "tool": "t",
            "field": "inputSchema",
            "message": "$ref '#/$defs/list/anyOf/2' does not resolve inside the schema (at /properties/i/$ref)",
            "pointer": "/properties/i/$ref",
        }
    ]


def test_embedded_resources_and_anchors_resolve_as_the_validator_resolves_them() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "point": {"$id": "https://example.invalid/point", "$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"},
            "named": {"$anchor": "label", "type": "string"},
        },
        "properties": {"p": {"$ref": "https://example.invalid/point"}, "l": {"$ref": "#label"}},
    }
    (converted,) = convert("a", [tool("t", schema)])
    validate_arguments(converted, {"p": 3, "l": "x"})
    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"p": "three"})
    assert caught.value.data["pointer"] == "/p"
    missing = dict(schema, properties={"l": {"$ref": "#nolabel"}, "o": {"$ref": "other.json#/x"}})
    assert [p["message"] for p in problems_of("a", [tool("t", missing)])] == [
        "$ref '#nolabel' names an anchor the schema does not define (at /properties/l/$ref)",
        "$ref 'other.json#/x' points outside the schema; hostd never fetches schemas, so inline it (e.g. under "
        "$defs) and use a local '#/...' reference (at /properties/o/$ref)",
    ]


def test_many_dangling_refs_are_bounded() -> None:
    schema = {"type": "object", "properties": {f"p{i:02}": {"$ref": f"#/$defs/m{i}"} for i in range(25)}}
    problems = problems_of("a", [tool("t", schema)])
    assert len(problems) == 11
    assert problems[-1] == {"tool": "t", "field": "inputSchema", "message": "... and 15 more bad references"}


def test_schema_draft_follows_dollar_schema() -> None:
    # Tuple-form "items" is valid in draft 7 and invalid in 2020-12.
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"n": {"type": "number"}},
        "properties": {"pair": {"type": "array", "items": [{"$ref": "#/definitions/n"}, {"type": "string"}]}},
    }
    (converted,) = convert("a", [tool("t", draft7)])
    validate_arguments(converted, {"pair": [1, "one"]})
    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"pair": ["one", "two"]})
    assert caught.value.data["pointer"] == "/pair/0"

    without = {key: value for key, value in draft7.items() if key != "$schema"}
    (problem,) = problems_of("a", [tool("t", without)])
    assert problem["pointer"] == "/properties/pair/items"


def test_output_schema_checked() -> None:
    good = convert("o", [tool("t", outputSchema={"type": "object", "properties": {"n": {"type": "integer"}}})])
    assert good[0].output_schema == {"type": "object", "properties": {"n": {"type": "integer"}}}

    array_output = tool("t", outputSchema={"type": "array"})
    (problem,) = problems_of("o", [array_output])
    assert problem["field"] == "outputSchema"
    # From MCP 2026-07-28 on, an outputSchema may have any root.
    assert convert("o", [array_output], protocol_version="2026-07-28")[0].output_schema == {"type": "array"}

    dangling = tool("t", outputSchema={"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}})
    (problem,) = problems_of("o", [dangling])
    assert problem == {
        "tool": "t",
        "field": "outputSchema",
        "message": "$ref '#/$defs/N' does not resolve inside the schema (at /properties/n/$ref)",
        "pointer": "/properties/n/$ref",
    }


def test_embedded_resource_refs_resolve_against_their_resource() -> None:
    schema = {
        "type": "object",
        "$defs": {
            "inner": {
                "$id": "urn:example:inner",
                "type": "object",
                "$defs": {"leaf": {"type": "string"}},
                "properties": {"leaf": {"$ref": "#/$defs/leaf"}},
            }
        },
        "properties": {"inner": {"$ref": "#/$defs/inner"}},
    }
    (converted,) = convert("a", [tool("t", schema)])
    with pytest.raises(HostError) as caught:
        validate_arguments(converted, {"inner": {"leaf": 1}})
    assert caught.value.data["pointer"] == "/inner/leaf"


# --- other fields, permissions, contributes ----------------------------------------------


def test_permission_from_meta() -> None:
    raw = tool("read", _meta={"hostd/permission": "notes.read", "other": 1})
    (converted,) = convert("n", [raw], permissions=["notes.read"])
    assert converted.permission == "notes.read"
    assert converted.to_wire()["permission"] == "notes.read"

    problems = problems_of("n", [raw], permissions=["notes.write"])
    assert problems == [
        {
            "tool": "read",
            "field": "_meta.hostd/permission",
            "message": "permission 'notes.read' is not declared in the manifest's permissions (declared: notes.write)",
        }
    ]
    problems = problems_of("n", [tool("read", _meta={"hostd/permission": 3})])
    assert problems == [
        {"tool": "read", "field": "_meta.hostd/permission", "message": "must be a string, got a number"}
    ]


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"description": 5}, "description", "must be a string, got a number"),
        ({"annotations": []}, "annotations", "must be an object, got an array"),
        ({"_meta": "x"}, "_meta", "must be an object, got a string"),
        ({"description": "bad \udc80"}, "", None),
    ],
)
def test_other_fields_are_type_checked(fields: dict[str, Any], field: str, message: str | None) -> None:
    (problem,) = problems_of("f", [tool("t", **fields)])
    assert problem["field"] == field
    if message is not None:
        assert problem["message"] == message
    else:
        assert problem["message"].startswith("the tool definition cannot be encoded as JSON in UTF-8")


def test_contributes_mismatch_reports_missing_and_unexpected_separately() -> None:
    with pytest.raises(HostError) as caught:
        convert("cal", [tool("read"), tool("write")], contributes=["cal.read", "cal.delete"])
    data = caught.value.data
    assert data["missing"] == ["cal.delete"]
    assert data["unexpected"] == ["cal.write"]
    assert data["problems"] == [
        {
            "tool": "delete",
            "field": "contributes.tools",
            "message": "'cal.delete' is declared in the manifest's contributes.tools but the server did not list it",
        },
        {
            "tool": "write",
            "field": "name",
            "message": "the server lists 'cal.write' but the manifest's contributes.tools does not declare it",
        },
    ]
    assert caught.value.message.startswith("plugin 'cal': tool listing rejected: tool 'delete', contributes.tools:")
    assert caught.value.to_error_object()["data"]["kind"] == "PLUGIN_START_FAILED"


def test_all_problems_are_collected() -> None:
    listing = [
        tool("good"),
        tool(""),
        tool("s", {"type": "string"}),
        {"name": "none"},
        tool("perm", _meta={"hostd/permission": "secret"}),
    ]
    declared = ["all.good", "all.s", "all.none", "all.perm", "all.gone"]
    problems = problems_of("all", listing, ErrorKind.NAME_INVALID, contributes=declared)
    assert [(p["tool"], p["field"]) for p in problems] == [
        (1, "name"),
        ("s", "inputSchema"),
        ("none", "inputSchema"),
        ("perm", "_meta.hostd/permission"),
        ("gone", "contributes.tools"),
    ]


def test_to_wire_and_digest() -> None:
    raw = tool(
        "search",
        {"type": "object", "properties": {"q": {"type": "string"}}},
        description="Search notes.",
        annotations={"readOnlyHint": True},
        title="ignored by hostd",
    )
    (converted,) = convert("notes", [raw])
    assert converted.to_wire() == {
        "name": "notes.search",
        "function_name": "notes_search",
        "description": "Search notes.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
        "plugin": "notes",
        "enabled": True,
    }
    canonical = json.dumps(
        {
            "name": "search",
            "description": "Search notes.",
            "inputSchema": raw["inputSchema"],
            "outputSchema": None,
            "annotations": {"readOnlyHint": True},
            "permission": None,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    assert converted.definition_digest == "sha256:" + hashlib.sha256(canonical).hexdigest()

    (bare,) = convert("notes", [tool("bare")])
    assert bare.to_wire() == {
        "name": "notes.bare",
        "function_name": "notes_bare",
        "description": "",
        "inputSchema": OBJECT,
        "plugin": "notes",
        "enabled": True,
    }

    changed = dict(raw, inputSchema={"type": "object", "properties": {"q": {"type": "integer"}}})
    (other,) = convert("notes", [changed])
    assert other.definition_digest != converted.definition_digest
    (again,) = convert("notes", [dict(raw)])
    assert again.definition_digest == converted.definition_digest


def test_compiled_validators_are_cached_per_definition() -> None:
    (converted,) = convert("geo", [tool("move", POINT_SCHEMA)])
    first = tools_module._validator_for_tool(converted)
    validate_arguments(converted, {"point": {"x": 0, "y": 0}})
    assert tools_module._validator_for_tool(converted) is first


def test_tool_problem_to_wire() -> None:
    assert ToolProblem("t", "inputSchema", "bad").to_wire() == {"tool": "t", "field": "inputSchema", "message": "bad"}
    assert ToolProblem(3, "name", "bad", pointer="/x").to_wire() == {
        "tool": 3,
        "field": "name",
        "message": "bad",
        "pointer": "/x",
    }


# --- D3: a thousand tools --------------------------------------------------------------


def thousand_tools() -> list[dict[str, Any]]:
    return [
        tool(
            f"tool_{i:04}",
            {
                "type": "object",
                "properties": {"q": {"type": "string", "description": f"query for tool {i}"}},
                "required": ["q"],
            },
            description=(f"Tool {i}. " + "d" * 2048)[:2048],
        )
        for i in range(1000)
    ]


def test_d3_a_thousand_tools_with_2kb_descriptions() -> None:
    listing = thousand_tools()
    assert len(json.dumps(listing)) > 2_000_000  # several MB on the wire
    converted = convert("big", listing)
    assert len(converted) == 1000
    assert [t.remote_name for t in converted] == [f"tool_{i:04}" for i in range(1000)]
    assert all(len(t.description) == 2048 for t in converted)
    assert len({t.function_name for t in converted}) == 1000


# --- function_name clashes across plugins ------------------------------------------------
# The class: two plugins whose tools get one function_name. Host names cannot clash (the plugin id,
# unique and dot-free, comes first); function names can, when a long host name is cut to a
# 55-character prefix plus a hash and another plugin's id is that prefix.


def test_a_function_name_clash_across_plugins_is_refused_by_the_registry() -> None:
    long_id, short_id = "p" * 60, "p" * 55
    (long_tool,) = convert(long_id, [tool("t" * 10)])
    assert long_tool.function_name.startswith(short_id + "_")
    hashed = long_tool.function_name.removeprefix(short_id + "_")
    (copycat,) = convert(short_id, [tool(hashed)])
    assert copycat.name != long_tool.name
    assert copycat.function_name == long_tool.function_name
    registry = ToolRegistry()
    registry.register(long_id, [long_tool])
    with pytest.raises(HostError) as clash:
        registry.register(short_id, [copycat])
    assert clash.value.kind is ErrorKind.TOOL_CONFLICT
    assert clash.value.data == {"plugin": short_id, "tools": [copycat.name]}
    assert registry.tools() == [long_tool]  # nothing of the refused set was registered
    # The same plugin replacing its own set is no clash.
    registry.register(long_id, [long_tool])
    assert registry.lookup(long_tool.function_name) is long_tool
