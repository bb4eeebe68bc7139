"""Result shaping: a plugin's ``tools/call`` response as the parent gets it, or the error it becomes.

:func:`tool_result` checks the response (depth, ``resultType``, a ``content`` array of typed items,
``isError``, ``structuredContent`` against the tool's ``outputSchema``, the result bound) and returns
``{content, structuredContent?}`` as the plugin's own bytes where orjson would not write them back
unchanged (:func:`_as_sent`); a JSON-RPC error becomes ``MCP_UPSTREAM_ERROR`` with the error bounded
(:func:`bounded_upstream`). Sans-IO: the call path (:meth:`hostd.plugins.supervisor.PluginSupervisor.call`)
hands it the reply, its frame size and the frame.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from hostd.mcp.tools import RegisteredTool, structured_content_problem
from hostd.wire.content import ContentLimits, bound_content
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.jsonlimits import check_json, object_members

__all__ = ["bounded_upstream", "invalid_result", "tool_error", "tool_result"]


def tool_result(
    plugin_id: str,
    tool: RegisteredTool,
    reply: dict[str, Any],
    size: int,
    *,
    raw: bytes = b"",
    content_limits: ContentLimits | None = None,
    result_limit: int,
) -> dict[str, Any]:
    """Turn the plugin's raw ``tools/call`` response into ``{content, structuredContent?}``.

    The server's JSON is passed through as it came: ``content`` and
    ``structuredContent`` are the frame's own bytes (``orjson.Fragment``), so
    big integers, key order and number forms reach the parent unchanged. The
    result bound applies to the response frame's size in bytes, whatever it
    carries (a result, ``isError`` content or a JSON-RPC error's ``data``),
    and every value is held to ``hostd.wire.jsonlimits.MAX_JSON_DEPTH``.
    """
    error = reply.get("error")
    if error is not None:
        upstream = bounded_upstream(error, size, result_limit)
        raise tool_error(
            plugin_id,
            ErrorKind.MCP_UPSTREAM_ERROR,
            tool,
            f"{tool.name} failed: {str(upstream.get('message'))[:500]}",
            upstream=upstream,
        )
    result = reply.get("result")
    # Depth first, before any field is read or turned into text (issue 31, class 2: str() of a
    # resultType 1000 levels deep raised RecursionError, INTERNAL_ERROR to the parent).
    exceeded = check_json(result)
    if exceeded is not None:
        raise invalid_result(plugin_id, tool, f"the result is {exceeded.message}", pointer=exceeded.pointer)
    kind = result.get("resultType", "complete") if isinstance(result, dict) else "complete"
    if kind != "complete":  # 2026-07-28: absent means complete; input_required needs a retry round
        raise invalid_result(plugin_id, tool, f"resultType {str(kind)[:40]!r} is not served by hostd here")
    content = result.get("content") if isinstance(result, dict) else None
    if (
        not isinstance(result, dict)
        or not isinstance(content, list)
        or not all(isinstance(item, dict) and isinstance(item.get("type"), str) for item in content)
    ):
        raise invalid_result(plugin_id, tool, "the result needs a 'content' array of typed items")
    is_error = result.get("isError", False)
    if not isinstance(is_error, bool):
        raise invalid_result(plugin_id, tool, "'isError' must be a boolean")
    structured = result.get("structuredContent")
    out: dict[str, Any] = {"content": content}
    if structured is not None:
        out["structuredContent"] = structured
    if is_error:
        if size > result_limit:
            out = {"content": [], "truncated": True}
        text = next((c.get("text") for c in content if c.get("type") == "text"), None)
        raise tool_error(
            plugin_id,
            ErrorKind.MCP_TOOL_CALL_FAILED,
            tool,
            f"{tool.name} reported an error: {str(text)[:500] if text is not None else 'no text'}",
            **out,
        )
    problem = structured_content_problem(tool, structured)
    if problem is not None:
        raise invalid_result(plugin_id, tool, problem)
    if size > result_limit:
        raise tool_error(
            plugin_id,
            ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
            tool,
            f"{tool.name} returned {size} bytes, over the {result_limit}-byte result bound",
            size=size,
            limit=result_limit,
        )
    return _as_sent(out, raw, content_limits or ContentLimits())


def bounded_upstream(error: Any, size: int, result_limit: int) -> dict[str, Any]:
    """A plugin's JSON-RPC ``error`` as forwarded in ``data.upstream``, within the result bound.

    Within the bound (frame size) and ``MAX_JSON_DEPTH``: the error object as sent.
    Otherwise ``code``, ``message`` (cut to 1000 characters with a trailing "…")
    and, in place of ``data``, the marker ``{"truncated": true, "size": <bytes of
    the plugin's response>, "limit": <result bound>}`` (or ``"reason"`` for depth).
    """
    if not isinstance(error, dict):
        # Not repr(): a value 1000 levels deep would exhaust the stack.
        error = {"message": f"the plugin sent a JSON-RPC error that is {type(error).__name__}, not an object"}
    bounded: dict[str, Any] = error
    exceeded = check_json(bounded)
    if exceeded is None and size <= result_limit:
        return bounded
    message = bounded.get("message")
    text = message if isinstance(message, str) else "(not a string)"
    upstream: dict[str, Any] = {
        "code": bounded.get("code") if isinstance(bounded.get("code"), int) else None,
        "message": text if len(text) <= _UPSTREAM_MESSAGE else text[: _UPSTREAM_MESSAGE - 1] + "…",
    }
    marker: dict[str, Any] = {"truncated": True, "size": size, "limit": result_limit}
    if exceeded is not None:
        marker["reason"] = f"the error is {exceeded.message}"
    upstream["data"] = marker
    return upstream


def invalid_result(plugin_id: str, tool: RegisteredTool, why: str, **data: Any) -> HostError:
    return tool_error(
        plugin_id,
        ErrorKind.MCP_UPSTREAM_ERROR,
        tool,
        f"{tool.name} returned an invalid result: {why}",
        **data,
    )


def tool_error(plugin_id: str, kind: ErrorKind, tool: RegisteredTool, message: str, **data: Any) -> HostError:
    """A failed ``tools/call`` of ``tool``: ``kind`` with ``data`` ``{plugin, tool, **data}``."""
    return HostError(kind, message, plugin=plugin_id, tool=tool.name, **data)


_UPSTREAM_MESSAGE = 1000


#: Bytes that can only be in a result when it holds an item a ContentLimits bound counts.
_RICH_MARKERS = (b'"image"', b'"audio"', b'"blob"')


def _as_sent(out: dict[str, Any], raw: bytes, content_limits: ContentLimits) -> dict[str, Any]:
    """``out`` with each member replaced by the plugin's own bytes for it, when they can be found.

    ``raw`` is the response frame; its ``result`` member's ``content`` and
    ``structuredContent`` become ``orjson.Fragment`` values, which serialise as
    exactly those bytes. Without ``raw`` (or if a member is missing) ``out`` is
    returned as parsed. ``content`` over ``content_limits`` is sent as bounded
    (parsed) instead; the check costs a byte search unless the frame may hold
    an image, audio or blob item.
    """
    if "content" in out and any(marker in raw for marker in _RICH_MARKERS):
        bounded = bound_content(out["content"], content_limits)
        if bounded is not None:
            return {
                **_as_sent({k: v for k, v in out.items() if k != "content"}, raw, content_limits),
                "content": bounded,
            }
    if not raw or not _may_be_rewritten(raw):
        return out  # orjson writes the parsed value back as the same JSON (order, numbers): no slicing needed
    envelope = object_members(raw)
    result = object_members(envelope["result"]) if envelope is not None and "result" in envelope else None
    if result is None or not all(key in result for key in out):
        return out
    return {key: orjson.Fragment(result[key]) for key in out}


#: A number orjson might not write back as the plugin wrote it: an exponent (1E2), 16 digits or
#: more, alone or around a dot (a 64-bit overflow, a float's lost digits), a fraction ending in 0
#: (1.50), a fraction starting with 00000 (orjson writes 0.000001 as 1e-6), or -0. Found anywhere
#: in the frame (a string holding "1e5" only costs the exact path): a C-speed search instead of
#: slicing every result (the slicing was ~8% of hostd's CPU per call).
#: tests/test_supervisor_numbers.py checks every number form it lets through against orjson itself.
#: The leading lookahead only makes positions that cannot start a match fail at once (~25% faster, same matches).
_REWRITTEN_NUMBER = re.compile(
    rb"(?=[0-9.\-])(?:[0-9][eE]|[0-9]{16}|[0-9.]{17}|\.[0-9]*0(?![0-9])|\.00000|-0(?![.0-9eE]))"
)


def _may_be_rewritten(raw: bytes) -> bool:
    """Whether ``raw`` holds a :data:`_REWRITTEN_NUMBER` outside a ``"2.0"`` string (the jsonrpc version).

    Skips the ``.0`` match of each ``"2.0"`` in place instead of searching a copy
    of the frame without them (a copy of every result frame per call).
    """
    position = 0
    while (found := _REWRITTEN_NUMBER.search(raw, position)) is not None:
        start = found.start()
        if start < 2 or raw[start - 2 : start + 3] != b'"2.0"':
            return True
        position = found.end()
    return False
