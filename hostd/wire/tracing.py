"""OpenTelemetry spans for control requests and plugin calls (``opentelemetry-api`` only).

hostd ships no exporter and installs no SDK: with the API alone every span is a
no-op that costs about a microsecond. An application that embeds hostd as a
Python library, or runs it with an OpenTelemetry SDK configured (for example
``opentelemetry-instrument hostd serve``), gets the spans exported by its own
setup.

One trace from the parent's UI into the plugin:

- the parent puts W3C trace context in any request's ``params._meta``
  (``traceparent``, optionally ``tracestate``); :func:`request_span` makes
  it the parent of hostd's span ``<method>`` (kind ``SERVER``), which lasts
  until the request is answered;
- :func:`plugin_span` starts a child span ``<plugin> <method>`` (kind
  ``CLIENT``) for each request hostd sends a plugin and returns the
  ``_meta`` fields (``traceparent``, ``tracestate``) to put in that MCP
  request, so the server's own instrumentation continues the trace.

``initialize``, ``ping``, ``shutdown`` and the parent's notifications are
answered by the control channel itself, before the host (and this module) is
loaded or without it, and get no span; every other request does, including
``rpc.discover``.

Attributes follow OpenTelemetry's RPC conventions: ``rpc.system``
(``jsonrpc``), ``rpc.method``, ``rpc.jsonrpc.request_id``, and on an error
``rpc.jsonrpc.error_code`` plus ``hostd.error.kind`` (the ``data.kind``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from hostd import __version__
from hostd.wire.errors import HostError

__all__ = ["TRACE_KEYS", "plugin_span", "request_span"]

#: The ``_meta`` keys that carry trace context (W3C Trace Context), in and out.
TRACE_KEYS: Final = ("traceparent", "tracestate")

_tracer = trace.get_tracer("hostd", __version__)


def _carrier(meta: Any) -> dict[str, str]:
    """The trace-context strings of a ``_meta`` object (anything else is ignored)."""
    if not isinstance(meta, Mapping):
        return {}
    return {key: value for key in TRACE_KEYS if isinstance(value := meta.get(key), str)}


def _no_sdk() -> bool:
    """True while no OpenTelemetry SDK is installed (the API's proxy provider): every span is a no-op.

    The fast paths below skip creating and entering a no-op span (~12% of hostd's
    CPU per ``tools/call``) only when doing so cannot change what is propagated:
    no SDK, and no valid trace context coming in (the parent's ``_meta``) or
    current (the enclosing span). An SDK installed later is seen on the next call.
    """
    return isinstance(_tracer, trace.ProxyTracer) and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _record(span: Span, exc: BaseException) -> None:
    if isinstance(exc, HostError):
        span.set_attribute("rpc.jsonrpc.error_code", exc.kind.code)
        span.set_attribute("hostd.error.kind", exc.kind.name)
        span.set_status(Status(StatusCode.ERROR, exc.message))
    else:
        span.set_status(Status(StatusCode.ERROR, type(exc).__name__))


#: What the no-op paths return: entering them costs next to nothing (no generator, no span).
_NO_REQUEST_SPAN: Final = nullcontext(trace.INVALID_SPAN)  # what the no-op tracer yields for a span without a parent
_NO_PLUGIN_META: Final[nullcontext[dict[str, str]]] = nullcontext({})


def request_span(method: str, request_id: int | str, meta: Any) -> AbstractContextManager[Span]:
    """A ``SERVER`` span named ``method`` for one control request, current inside the block.

    ``meta``: the request's ``params._meta`` (any value; a mapping with a valid
    ``traceparent`` string makes that remote span the parent, anything else starts a
    new trace). A :class:`HostError` or other exception leaving the block marks the span
    as an error and propagates unchanged; cancellation (trio's ``Cancelled``, a
    ``BaseException``) is recorded the same way and also propagates.
    """
    carrier = _carrier(meta)
    if not carrier and _no_sdk():
        return _NO_REQUEST_SPAN
    return _request_span(method, request_id, carrier)


@contextmanager
def _request_span(method: str, request_id: int | str, carrier: dict[str, str]) -> Iterator[Span]:
    parent = propagate.extract(carrier)
    attributes: dict[str, Any] = {"rpc.system": "jsonrpc", "rpc.method": method, "rpc.jsonrpc.request_id": request_id}
    with _tracer.start_as_current_span(
        method,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield span
        except BaseException as exc:
            _record(span, exc)
            raise


def plugin_span(plugin_id: str, method: str, target: str | None = None) -> AbstractContextManager[dict[str, str]]:
    """A ``CLIENT`` span ``<plugin_id> <method>`` for one MCP request to a plugin.

    Yields the ``_meta`` entries (``{"traceparent": ..., "tracestate": ...}``, only
    those the propagator writes; ``{}`` when no SDK records spans) to merge into
    the MCP request's ``_meta``. ``target``: the tool (or other) name, recorded as
    ``hostd.target``. An exception leaving the block marks the span as an error and
    propagates.
    """
    if _no_sdk() and not trace.get_current_span().get_span_context().is_valid:
        return _NO_PLUGIN_META  # the no-op span has no valid context: the propagator writes nothing
    return _plugin_span(plugin_id, method, target)


@contextmanager
def _plugin_span(plugin_id: str, method: str, target: str | None) -> Iterator[dict[str, str]]:
    attributes: dict[str, Any] = {"rpc.system": "jsonrpc", "rpc.method": method, "hostd.plugin": plugin_id}
    if target is not None:
        attributes["hostd.target"] = target
    with _tracer.start_as_current_span(
        f"{plugin_id} {method}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        try:
            yield _carrier(carrier)
        except BaseException as exc:
            _record(span, exc)
            raise
