"""Issue 10: nothing a plugin (or the parent) sends can break another plugin or hostd.

The class: JSON from an untrusted peer that parsed, but is deeper or bigger than a
later consumer handles (orjson serialises at most 255 levels; jsonschema recurses;
error ``data`` had no bound). Each test puts a hostile plugin (the ``deep-tools`` /
``raw-replies`` fixture variants) beside a healthy one that must keep serving, and
checks the documented bounds of ``hostd.wire.jsonlimits`` with exact values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

import hostd.cli.client as client_module
from hostd.cli.client import HostdClient, RpcError
from hostd.wire.framing import LineDecoder
from hostd.wire.jsonlimits import MAX_JSON_DEPTH, MAX_TOOL_BYTES, check_json, object_members
from tests.conftest import ECHO_TOOLS, MakePlugin, ready, spawn_hostd
from tests.test_corpus_framing import HEALTHY, HOSTILE, assert_healthy, enable_healthy, failed_start, logs, recorded

RESULT_BOUND = 4 * 1024 * 1024  # hostd serve --max-result-bytes default
DEEP_TOOLS = ["deep-annotations", "deep-schema", "deep-meta", "huge"]


def nested_objects(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def nested_arrays(depth: int) -> Any:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def assert_everyone_listed(hostd: HostdClient) -> None:
    """The unfiltered tools/list (every plugin's tools) still works."""
    tools = (await hostd.request("tools/list", {}))["tools"]
    assert {t["name"] for t in tools} >= {f"{HEALTHY}.{name}" for name in ECHO_TOOLS}


# -- the checker ---------------------------------------------------------------------


def test_checker_names_the_first_container_too_deep_without_recursing() -> None:
    assert check_json(nested_arrays(MAX_JSON_DEPTH)) is None
    too_deep = check_json({"x": [1, {"a~/b": nested_arrays(5000)}]})
    assert too_deep is not None
    assert (too_deep.bound, too_deep.limit) == ("depth", MAX_JSON_DEPTH)
    assert too_deep.pointer == "/x/1/a~0~1b" + "/0" * (MAX_JSON_DEPTH - 3)
    too_big = check_json({"s": "x" * 100}, max_bytes=100)
    assert too_big is not None
    assert (too_big.bound, too_big.size, too_big.message) == ("size", 108, "108 bytes as JSON, over the 100-byte bound")


def test_object_members_are_the_peers_own_bytes() -> None:
    text = b' {"a" : [1, "],}\\"{"] , "b":{"c":1E2}, "a\\u0021":  12345678901234567890123 } '
    assert object_members(text) == {"a": b'[1, "],}\\"{"]', "b": b'{"c":1E2}', "a!": b"12345678901234567890123"}
    assert object_members(b"[1]") is None
    assert object_members(b"{}") == {}


# -- discovery -----------------------------------------------------------------------


async def test_tools_over_a_bound_are_refused_at_discovery_with_name_and_pointer(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        failure = await failed_start(hostd, make_plugin(variant="deep-tools", tools=[*ECHO_TOOLS, *DEEP_TOOLS]))
        huge = {
            "name": "huge",
            "description": "x" * (200 * 1024),
            "_meta": {"hostd/permission": "echo.use"},
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
        huge_bytes = len(orjson.dumps(huge))
        depth = f"nested deeper than {MAX_JSON_DEPTH} levels at"
        annotations = "/a" * MAX_JSON_DEPTH
        schema = "/properties/p" * (MAX_JSON_DEPTH // 2)
        meta = "/x" + "/a" * (MAX_JSON_DEPTH - 1)
        assert failure.data["problems"] == [
            {
                "tool": "deep-annotations",
                "field": "annotations",
                "message": f"{depth} {annotations}",
                "pointer": annotations,
            },
            {"tool": "deep-schema", "field": "inputSchema", "message": f"{depth} {schema}", "pointer": schema},
            {"tool": "deep-meta", "field": "_meta", "message": f"{depth} {meta}", "pointer": meta},
            {
                "tool": "huge",
                "field": "",
                "message": f"the tool definition is {huge_bytes} bytes as JSON, over the {MAX_TOOL_BYTES}-byte bound",
            },
        ]
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "error"
        await assert_everyone_listed(hostd)
        await assert_healthy(hostd)


async def test_a_deep_initialize_answer_is_a_start_failure(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        failure = await failed_start(hostd, make_plugin(variant="deep-initialize"))
        assert failure.data["reason"] == (
            f"invalid answer from the server: the initialize result is nested deeper than {MAX_JSON_DEPTH} levels"
        )
        await assert_everyone_listed(hostd)
        await assert_healthy(hostd)


# -- arguments from the parent --------------------------------------------------------


async def test_deep_arguments_are_invalid_arguments_with_the_pointer(
    hostd: HostdClient, make_plugin: MakePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hostile parent: it encodes with the standard library, which has no 255-level cap.
    monkeypatch.setattr(client_module, "encode", lambda message: (json.dumps(message) + "\n").encode())
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        for arguments, pointer in [
            ({"text": "x", "extra": nested_arrays(300)}, "/extra" + "/0" * (MAX_JSON_DEPTH - 1)),
            ({"text": nested_objects(300, 1)}, "/text" + "/a" * (MAX_JSON_DEPTH - 1)),
        ]:
            with pytest.raises(RpcError) as refused:
                await hostd.request("tools/call", {"name": f"{HEALTHY}.echo", "arguments": arguments})
            assert refused.value.kind == "INVALID_ARGUMENTS"
            reason = f"nested deeper than {MAX_JSON_DEPTH} levels at {pointer}"
            assert refused.value.data == {
                "kind": "INVALID_ARGUMENTS",
                "tool": f"{HEALTHY}.echo",
                "pointer": pointer,
                "reason": reason,
                "keyword": None,
            }
        await assert_everyone_listed(hostd)
        await assert_healthy(hostd)


# -- results, errors and logs from a plugin ------------------------------------------------


async def raw_call(hostd: HostdClient, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = await hostd.request("tools/call", {"name": f"{HOSTILE}.raw", "arguments": arguments})
    return result


def last_call_id(record: Path) -> int | str:
    calls = [m["msg"] for m in recorded(record) if m["msg"].get("method") == "tools/call"]
    rid = calls[-1]["id"]
    assert isinstance(rid, int | str)
    return rid


def frame_size(rid: int | str, member: str, text: str) -> int:
    return len(('{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"' + member + '":' + text + "}").encode())


async def test_error_data_is_held_to_the_result_bound_with_a_marker_and_the_size(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        await ready(
            hostd, make_plugin(variant="raw-replies", tools=[*ECHO_TOOLS, "raw"], args=["--record", str(record)])
        )
        # 5 MiB of data and a 2000-character message: both cut, the original size reported.
        text = '{"code":-32042,"message":"' + "m" * 2000 + '","data":{"blob":"PAD"}}'
        with pytest.raises(RpcError) as big:
            await raw_call(hostd, error=text, pad=5 * 1024 * 1024)
        size = frame_size(last_call_id(record), "error", text.replace("PAD", "x" * 5 * 1024 * 1024))
        assert big.value.kind == "MCP_UPSTREAM_ERROR"
        assert big.value.data["upstream"] == {
            "code": -32042,
            "message": "m" * 999 + "…",
            "data": {"truncated": True, "size": size, "limit": RESULT_BOUND},
        }
        # Small but 300 levels deep: the same marker, with the reason.
        deep = '{"code":-32043,"message":"deep","data":' + json.dumps(nested_arrays(300)) + "}"
        with pytest.raises(RpcError) as nested:
            await raw_call(hostd, error=deep)
        pointer = "/data" + "/0" * (MAX_JSON_DEPTH - 1)
        assert nested.value.data["upstream"] == {
            "code": -32043,
            "message": "deep",
            "data": {
                "truncated": True,
                "size": frame_size(last_call_id(record), "error", deep),
                "limit": RESULT_BOUND,
                "reason": f"the error is nested deeper than {MAX_JSON_DEPTH} levels at {pointer}",
            },
        }
        # Within the bounds: forwarded whole, as before.
        with pytest.raises(RpcError) as small:
            await raw_call(hostd, error='{"code":-32044,"message":"small","data":{"n":[1,2]}}')
        assert small.value.data["upstream"] == {"code": -32044, "message": "small", "data": {"n": [1, 2]}}
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "ready"
        await assert_everyone_listed(hostd)
        await assert_healthy(hostd)


async def test_deep_results_and_log_data_are_refused_without_breaking_anything(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="raw-replies", tools=[*ECHO_TOOLS, "raw"]))
        deep = json.dumps(nested_objects(300, 1))
        with pytest.raises(RpcError) as refused:
            await raw_call(hostd, result='{"content":[{"type":"text","text":"t"}],"structuredContent":' + deep + "}")
        pointer = "/structuredContent" + "/a" * (MAX_JSON_DEPTH - 1)
        assert refused.value.kind == "MCP_UPSTREAM_ERROR"
        assert refused.value.data["pointer"] == pointer
        assert refused.value.message == (
            f"{HOSTILE}.raw returned an invalid result: the result is nested deeper than "
            f"{MAX_JSON_DEPTH} levels at {pointer}"
        )
        # Log data 300 deep: the line says why it is not shown; the call after it is answered.
        answer = await raw_call(
            hostd,
            log='{"level":"warning","data":' + deep + "}",
            result='{"content":[{"type":"text","text":"after the log"}]}',
        )
        assert answer == {"content": [{"type": "text", "text": "after the log"}]}
        note = await hostd.wait_for("plugins/log", lambda p: p["plugin"] == HOSTILE and p["source"] == "mcp")
        assert note["message"] == (
            f"(log data not shown: nested deeper than {MAX_JSON_DEPTH} levels at {'/a' * MAX_JSON_DEPTH})"
        )
        assert [entry["message"] for entry in logs(hostd, source="mcp")] == [note["message"]]
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "ready"
        await assert_everyone_listed(hostd)
        await assert_healthy(hostd)


async def test_results_reach_the_parent_as_the_plugins_own_json(
    tmp_path: Path, make_plugin: MakePlugin, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parent here parses with the standard library keeping every number's text, so
    # what arrives is exactly what hostd wrote (orjson would read big integers as floats).
    def exact(line: bytes) -> Any:
        return json.loads(line, parse_float=lambda text: ("float", text))

    monkeypatch.setattr(client_module, "LineDecoder", lambda limit: LineDecoder(limit, parse=exact))
    structured = '{"z":123456789012345678901234567890,"neg":-98765432109876543210,"f":1.0,"e":1E2,"a":-0}'
    async with spawn_hostd(tmp_path) as client:
        with trio.fail_after(30):
            await ready(client, make_plugin(variant="raw-replies", tools=[*ECHO_TOOLS, "raw"]))
            answer = await raw_call(
                client, result='{"content":[{"type":"text","text":"n"}],"structuredContent":' + structured + "}"
            )
    assert answer == {
        "content": [{"type": "text", "text": "n"}],
        "structuredContent": {
            "z": 123456789012345678901234567890,
            "neg": -98765432109876543210,
            "f": ("float", "1.0"),
            "e": ("float", "1E2"),
            "a": 0,
        },
    }
    assert list(answer["structuredContent"]) == ["z", "neg", "f", "e", "a"]
