"""Tracing: a span per control request and per plugin call; the parent's trace context reaches the plugin.

The class of bug: trace context that stops at a boundary, so the app's trace ends at hostd (or at the
plugin). Members tested: the parent's ``params._meta.traceparent`` arriving in the plugin's MCP request
``_meta`` (end to end, real hostd and plugin, API only as shipped); ``_meta`` accepted on any method
(before, the params models refused it as an unknown field); garbage ``_meta`` ignored, not fatal; and,
with an SDK recording spans, the span tree (server span child of the parent's, client span child of it)
and the error attributes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from hostd.cli.client import HostdClient
from hostd.wire import tracing
from hostd.wire.errors import ErrorKind, HostError
from tests.conftest import MakePlugin, ready

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN}-01"


def recorded_calls(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    messages = [json.loads(line)["msg"] for line in lines if line.strip()]
    return [m for m in messages if isinstance(m, dict) and m.get("method") == "tools/call"]


async def test_parent_trace_context_reaches_the_plugin(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    await ready(hostd, make_plugin(args=["--record", str(record)]))
    # _meta is accepted on any request (it used to be refused as an unknown field of the params model).
    listed = await hostd.request("plugins/list", {"_meta": {"traceparent": TRACEPARENT}})
    assert [p["id"] for p in listed["plugins"]] == ["mcp-echo"]
    cases: list[Any] = [
        {"traceparent": TRACEPARENT, "tracestate": "vendor=1"},
        None,  # no _meta at all
        {"traceparent": "not-a-traceparent"},
        "a string",
        {"traceparent": 7},
    ]
    for meta in cases:
        params: dict[str, Any] = {"name": "mcp-echo.echo", "arguments": {"text": "hi"}}
        if meta is not None:
            params["_meta"] = meta
        result = await hostd.request("tools/call", params)
        assert result["structuredContent"] == {"text": "hi", "length": 2}
    metas = [call["params"]["_meta"] for call in recorded_calls(record)]
    assert len(metas) == len(cases)
    # Without an SDK, hostd's spans are non-recording and pass the parent's context on unchanged.
    assert {k: v for k, v in metas[0].items() if k != "progressToken"} == {
        "traceparent": TRACEPARENT,
        "tracestate": "vendor=1",
    }
    for meta in metas[1:]:
        assert set(meta) == {"progressToken"}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("hostd")
    original = tracing._tracer
    tracing._tracer = tracer
    try:
        yield exporter
    finally:
        tracing._tracer = original


def test_spans_form_one_trace(exporter: InMemorySpanExporter) -> None:
    with (
        tracing.request_span("tools/call", 7, {"traceparent": TRACEPARENT}) as server,
        tracing.plugin_span("mcp-echo", "tools/call", "echo") as meta,
    ):
        client = trace.get_current_span()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"tools/call", "mcp-echo tools/call"}
    server_span, client_span = spans["tools/call"], spans["mcp-echo tools/call"]
    assert server_span.kind is SpanKind.SERVER and client_span.kind is SpanKind.CLIENT
    assert format(server_span.context.trace_id, "032x") == TRACE_ID
    assert server_span.parent is not None and format(server_span.parent.span_id, "016x") == PARENT_SPAN
    assert client_span.parent is not None and client_span.parent.span_id == server_span.context.span_id
    assert server.get_span_context().span_id == server_span.context.span_id
    ctx = client.get_span_context()
    assert meta == {"traceparent": f"00-{TRACE_ID}-{ctx.span_id:016x}-01"}
    assert dict(server_span.attributes or {}) == {
        "rpc.system": "jsonrpc",
        "rpc.method": "tools/call",
        "rpc.jsonrpc.request_id": 7,
    }
    assert dict(client_span.attributes or {})["hostd.target"] == "echo"


@pytest.mark.parametrize("meta", [None, "x", {"traceparent": "00-zz-zz-01"}, {"traceparent": 1}])
def test_bad_meta_starts_a_new_trace(exporter: InMemorySpanExporter, meta: Any) -> None:
    with tracing.request_span("ping", "a", meta):
        pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    assert format(span.context.trace_id, "032x") != TRACE_ID


def test_errors_are_recorded(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(HostError), tracing.request_span("tools/call", 1, None):
        raise HostError(ErrorKind.TOOL_NOT_FOUND, "no tool x")
    with pytest.raises(ValueError), tracing.plugin_span("p", "tools/call"):
        raise ValueError("boom")
    server, client = exporter.get_finished_spans()
    assert server.status.status_code is StatusCode.ERROR and server.status.description == "no tool x"
    assert dict(server.attributes or {})["hostd.error.kind"] == "TOOL_NOT_FOUND"
    assert dict(server.attributes or {})["rpc.jsonrpc.error_code"] == -32020
    assert client.status.status_code is StatusCode.ERROR


@pytest.mark.parametrize(
    ("meta", "passed_on"),
    [
        (None, False),
        ({}, False),
        ({"traceparent": "00-zz-zz-01"}, False),
        ({"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN}-01"}, True),
    ],
)
def test_without_an_sdk_trace_context_passes_through_unchanged(meta: Any, passed_on: bool) -> None:
    # The class: with the API alone (no SDK) spans are no-ops and hostd skips them (a fast path),
    # which must not change what reaches the plugin: nothing without a valid incoming context, the
    # parent's own trace id and span id with one (the no-op span carries the parent's context).
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with tracing.request_span("tools/call", 1, meta) as server:
        assert not server.is_recording()
        with tracing.plugin_span("p", "tools/call", "echo") as sent:
            pass
    if passed_on:
        assert sent == {"traceparent": f"00-{TRACE_ID}-{PARENT_SPAN}-01"}
    else:
        assert sent == {}
    with pytest.raises(HostError), tracing.request_span("tools/call", 2, meta):
        raise HostError(ErrorKind.TOOL_NOT_FOUND, "no tool x")
