"""The compiled schema check in front of jsonschema (hostd.mcp.tools._fast_valid) never changes an outcome.

The class of bug: a faster validator that disagrees with jsonschema (a draft keyword, a local ``$ref``,
an integer past 64 bits, ``format``, a remote ``$ref``) would let through a call or a result that
jsonschema refuses. For each member, both the tools/call arguments check and the result's
structuredContent check must give exactly what jsonschema alone gives.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.validators import Draft202012Validator, validator_for

from hostd.mcp.convert import _certainly_clean, _schema_problems
from hostd.mcp.tools import RegisteredTool, structured_content_problem, validate_arguments
from hostd.wire.errors import HostError

CASES: list[tuple[dict[str, Any], Any]] = [
    ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1}),
    ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.0}),  # 1.0 is an integer in JSON Schema
    ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 1.5}),
    ({"type": "object", "properties": {"n": {"type": "integer"}}}, {"n": 2**80}),  # past 64 bits
    ({"type": "object", "properties": {"n": {"maximum": 2**70}}}, {"n": 2**71}),
    ({"type": "object", "required": ["a"]}, {}),
    ({"type": "object", "additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}),
    ({"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}, {"e": "not an email"}),
    (
        {"type": "object", "$defs": {"p": {"type": "string"}}, "properties": {"p": {"$ref": "#/$defs/p"}}},
        {"p": 3},
    ),
    (
        {"type": "object", "$defs": {"p": {"type": "string"}}, "properties": {"p": {"$ref": "#/$defs/p"}}},
        {"p": "ok"},
    ),
    ({"type": "object", "properties": {"t": {"type": "array", "prefixItems": [{"type": "string"}]}}}, {"t": [1]}),
    (
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {"t": {"items": [{"type": "string"}]}},
        },
        {"t": [1]},
    ),
    ({"type": "object", "properties": {"s": {"pattern": "^a+$"}}}, {"s": "aab"}),
    ({"type": "object", "properties": {"u": {"uniqueItems": True}}}, {"u": [1, 1.0]}),
    ({"type": "object", "dependentRequired": {"a": ["b"]}}, {"a": 1}),
    ({"type": "object", "properties": {"x": {"const": {"k": [1, 2]}}}}, {"x": {"k": [1, 2]}}),
]


def tool(schema: dict[str, Any], index: int) -> RegisteredTool:
    return RegisteredTool(
        name=f"p.t{index}",
        remote_name=f"t{index}",
        plugin="p",
        function_name=f"p_t{index}",
        description="",
        input_schema=schema,
        output_schema=schema,
        annotations=None,
        permission=None,
        definition_digest=f"sha256:fast-path-{index}",
    )


@pytest.mark.parametrize(("index", "schema", "value"), [(i, s, v) for i, (s, v) in enumerate(CASES)])
def test_the_fast_path_agrees_with_jsonschema(index: int, schema: dict[str, Any], value: Any) -> None:
    expected = validator_for(schema, default=Draft202012Validator)(schema).is_valid(value)
    host_tool = tool(schema, index)
    try:
        validate_arguments(host_tool, value)
        accepted = True
    except HostError:
        accepted = False
    assert accepted == expected
    assert (structured_content_problem(host_tool, value) is None) == expected


# -- the listing's metaschema check (hostd.mcp.convert._certainly_clean) ------------------------------------------
#
# The same class for the check of a listed tool's schemas: a compiled metaschema check that calls a schema clean
# where jsonschema finds a problem would let a tool through that hostd refuses today. Each schema below is given
# to both: the fast verdict "clean" must never meet a jsonschema finding, and the plain valid schemas must take the
# fast path (else the test would pass with no fast path at all).

PLAIN_VALID: list[dict[str, Any]] = [
    {"type": "object"},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"text": {"type": "string", "description": "what to echo"}}, "required": ["text"]},
    {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "head": {"type": "number", "minimum": 0},
            "tail": {"type": "integer", "minimum": 1.0},  # 1.0 is an integer to both
            "mode": {"enum": ["a", "b"]},
            "opts": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "list": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
            "any": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "when": {"type": "string", "format": "date-time"},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"x": {"const": {"k": [1, 2]}, "default": None, "examples": [1, "a"]}}},
    {"type": "object", "properties": {"t": {"type": ["string", "integer"]}}, "dependentRequired": {"a": ["b"]}},
    {"type": "object", "properties": {"e": {"enum": []}}},  # an empty enum is valid in 2020-12
    {"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": True, "not": False},
]

BROKEN: list[dict[str, Any]] = [
    {"type": "object", "properties": {"a": 1}},
    {"type": "object", "properties": {"a": {"type": "strin"}}},
    {"type": "object", "properties": {"a": {"type": ["string", "string"]}}},
    {"type": "object", "required": ["a", "a"]},
    {"type": "object", "required": [1]},
    {"type": "object", "required": "a"},
    {"type": "object", "properties": {"a": {"minLength": -1}}},
    {"type": "object", "properties": {"a": {"minLength": 1.5}}},
    {"type": "object", "properties": {"a": {"minLength": "1"}}},
    {"type": "object", "properties": {"a": {"maxItems": True}}},
    {"type": "object", "properties": {"a": {"minimum": "0"}}},
    {"type": "object", "properties": {"a": {"multipleOf": 0}}},
    {"type": "object", "properties": {"a": {"items": 1}}},
    {"type": "object", "properties": {"a": {"anyOf": []}}},
    {"type": "object", "properties": {"a": {"allOf": {}}}},
    {"type": "object", "additionalProperties": "no"},
    {"type": "object", "dependentRequired": {"a": [1]}},
    {"type": "object", "properties": {"a": {"enum": "x"}}},
    {"type": "object", "properties": {"a": {"uniqueItems": "yes"}}},
    {"type": "object", "properties": {"a": {"description": 3}}},
    {"type": "object", "properties": {"a": {"format": 3}}},
    {"type": "object", "properties": {"a": {"if": 3}}},
]

#: Schemas the fast path leaves to jsonschema by their text (a keyword checked with a format, a reference, a
#: declared draft, a regex), whether or not they have a problem; and one too deep.
SLOW: list[dict[str, Any]] = [
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    {"type": "object", "$defs": {"p": {"type": "string"}}, "properties": {"p": {"$ref": "#/$defs/p"}}},
    {"type": "object", "properties": {"p": {"$ref": "#/$defs/missing"}}},
    {"type": "object", "properties": {"s": {"pattern": "(unclosed"}}},
    {"type": "object", "patternProperties": {"[a-": {"type": "string"}}},
    {"type": "object", "$id": "not a uri reference \\"},
    {"type": "object", "properties": {"s": {"description": "$5 or a pattern"}}},
]


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _jsonschema_findings(schema: dict[str, Any]) -> list[str]:
    """What hostd's jsonschema path reports for ``schema`` (hostd.mcp.convert._schema_findings without its
    fast path): the metaschema errors of the 2020-12 draft with its format checker."""
    meta = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [error.message for error in meta.iter_errors(schema)]


def _fast(schema: dict[str, Any]) -> bool:
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _certainly_clean(schema, canonical)


@pytest.mark.parametrize("schema", PLAIN_VALID)
def test_a_plain_valid_schema_is_clean_without_jsonschema(schema: dict[str, Any]) -> None:
    assert _jsonschema_findings(schema) == []
    assert _fast(schema) is True


@pytest.mark.parametrize("schema", BROKEN)
def test_a_broken_schema_is_never_called_clean(schema: dict[str, Any]) -> None:
    assert _jsonschema_findings(schema) != []
    assert _fast(schema) is False
    # and the listing check reports it as before (the jsonschema path's message)
    [problem] = _schema_problems(0, "inputSchema", schema, require_object=True)
    assert problem.message.startswith("not a valid JSON Schema (Draft202012): "), problem.message


@pytest.mark.parametrize("schema", [*SLOW, _nested(40)])
def test_a_schema_with_a_format_keyword_a_reference_or_depth_takes_the_jsonschema_path(schema: dict[str, Any]) -> None:
    assert _fast(schema) is False


# Generated schemas: the keywords of the 2020-12 metaschema with values of every JSON type, nested, so that both
# verdicts meet the members nobody listed (a keyword with a value of the wrong type, a wrong bound, a wrong
# nesting). The property is the fast path's one promise: "clean" only where jsonschema finds nothing.
_KEYWORDS = [
    "type", "properties", "required", "items", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
    "multipleOf", "enum", "const", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "additionalProperties",
    "minItems", "maxItems", "uniqueItems", "dependentRequired", "dependentSchemas", "propertyNames", "contains",
    "minContains", "prefixItems", "unevaluatedProperties", "description", "title", "default", "format",
    "minProperties", "readOnly", "deprecated", "contentEncoding", "examples",
]  # fmt: skip
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from([0.5, 1.0, -1.5, 2**70]),
    st.sampled_from(["object", "string", "integer", "array", "number", "null", "boolean", "strin", "a", ""]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from([*_KEYWORDS, "a", "b"]), inner, max_size=4),
    ),
    max_leaves=12,
)
_SCHEMAS = st.dictionaries(st.sampled_from(_KEYWORDS), _VALUES, max_size=5)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(schema=_SCHEMAS)
def test_generated_schemas_are_called_clean_only_where_jsonschema_finds_nothing(schema: dict[str, Any]) -> None:
    fast = _fast(schema)
    assert not fast or _jsonschema_findings(schema) == [], schema
