"""The compiled schema check in front of jsonschema (hostd.mcp.tools._fast_valid) never changes an outcome.

The class of bug: a faster validator that disagrees with jsonschema (a draft keyword, a local ``$ref``,
an integer past 64 bits, ``format``, a remote ``$ref``) would let through a call or a result that
jsonschema refuses. For each member, both the tools/call arguments check and the result's
structuredContent check must give exactly what jsonschema alone gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema.validators import Draft202012Validator, validator_for

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
