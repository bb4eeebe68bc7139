"""The control protocol as an OpenRPC 1.3 document, generated from :mod:`hostd.control.models`'s models.

One registry, in :mod:`hostd.control.models`: ``PARAMS`` and ``RESULTS`` (requests the
parent sends), ``NOTIFICATIONS`` (hostd -> parent), ``PARENT_NOTIFICATIONS``
(parent -> hostd) and, where defined, ``PARENT_REQUESTS`` (hostd asks the
parent: method -> params type) with ``PARENT_RESULTS`` (their result types). Every entry
becomes one OpenRPC method here, so a method added there appears in
``docs/openrpc.json``, in ``rpc.discover``'s answer and in the TypeScript
client (generated from the document) without an edit in this module.

OpenRPC describes requests one way (client -> server). The other kinds are
told apart by an extension on the method, ``x-direction``:

- ``request`` (absent: the default): the parent sends it, hostd answers;
- ``notification``: hostd sends it to the parent (no answer; OpenRPC's
  ``result`` is left out, as its specification allows for notifications);
- ``parent-request``: hostd sends it, the parent answers with ``result``;
- ``parent-notification``: the parent sends it (``$/cancelRequest``, ``exit``).

Errors: ``components.errors`` holds one error object per
:class:`~hostd.wire.errors.ErrorKind` (``data.kind`` is its name); each request
lists the ones it can answer with (:data:`COMMON_ERRORS` plus
:data:`METHOD_ERRORS`). ``rpc.discover`` itself is not among the methods
(JSON-RPC reserves ``rpc.`` names; OpenRPC's service discovery method).

The document depends on the models only (no clock, no machine): ``python -m
docgen.docs`` writes it and ``tests/test_openrpc.py`` fails when it is stale.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, cast

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from hostd import __version__
from hostd.control import models as p
from hostd.wire.errors import ErrorKind

__all__ = ["COMMON_ERRORS", "METHOD_ERRORS", "OPENRPC_DOC", "OPENRPC_VERSION", "discover", "document", "document_text"]

#: The OpenRPC specification version the document follows.
OPENRPC_VERSION: Final = "1.3.2"
#: Where ``python -m docgen.docs`` writes the document in a source checkout.
OPENRPC_DOC: Final = Path(__file__).resolve().parents[2] / "docs" / "openrpc.json"

_REF: Final = "#/components/schemas/{model}"

#: Errors any request other than ``initialize`` can be answered with.
COMMON_ERRORS: Final[tuple[ErrorKind, ...]] = (
    ErrorKind.INVALID_REQUEST,
    ErrorKind.INVALID_PARAMS,
    ErrorKind.INTERNAL_ERROR,
    ErrorKind.SERVER_NOT_INITIALIZED,
    ErrorKind.REQUEST_CANCELLED,
    ErrorKind.SHUTTING_DOWN,
    ErrorKind.HOST_OVERLOADED,
)

_CHANGE = (ErrorKind.STATE_WRITE_FAILED,)
_PLUGIN = (ErrorKind.PLUGIN_NOT_FOUND,)
_START = (
    ErrorKind.PERMISSION_NOT_GRANTED,
    ErrorKind.MCP_TRUST_APPROVAL_REQUIRED,
    ErrorKind.MANIFEST_CHANGED,
    ErrorKind.MANIFEST_INVALID,
    ErrorKind.PLUGIN_START_FAILED,
    ErrorKind.PLUGIN_STATE_CONFLICT,
    ErrorKind.TOOL_CONFLICT,
    ErrorKind.TOOL_DEFINITION_CHANGED,
)

#: The errors particular to a method, beyond :data:`COMMON_ERRORS` (a method not listed has only those).
METHOD_ERRORS: Final[Mapping[str, tuple[ErrorKind, ...]]] = {
    "initialize": (ErrorKind.STATE_LOCKED, ErrorKind.STATE_UNUSABLE),
    "plugins/install": (ErrorKind.MANIFEST_INVALID, ErrorKind.PLUGIN_ALREADY_INSTALLED, *_CHANGE),
    "plugins/import": (
        ErrorKind.IMPORT_INVALID,
        ErrorKind.MANIFEST_INVALID,
        ErrorKind.PLUGIN_ALREADY_INSTALLED,
        *_CHANGE,
    ),
    "plugins/uninstall": (*_PLUGIN, *_CHANGE),
    "plugins/grant": (*_PLUGIN, ErrorKind.PERMISSION_UNKNOWN, ErrorKind.PLUGIN_STATE_CONFLICT, *_CHANGE),
    "plugins/approve": (*_PLUGIN, ErrorKind.MCP_TRUST_APPROVAL_REQUIRED, ErrorKind.MANIFEST_CHANGED, *_CHANGE),
    "plugins/enable": (*_PLUGIN, *_START, *_CHANGE),
    "plugins/disable": (*_PLUGIN, *_CHANGE),
    "plugins/restart": (*_PLUGIN, *_START, *_CHANGE),
    "plugins/status": _PLUGIN,
    "tools/list": _PLUGIN,
    "tools/call": (
        ErrorKind.TOOL_NOT_FOUND,
        ErrorKind.INVALID_ARGUMENTS,
        ErrorKind.PERMISSION_NOT_GRANTED,
        ErrorKind.TOOL_DEFINITION_CHANGED,
        ErrorKind.TOOL_TIMEOUT,
        ErrorKind.MCP_TOOL_CALL_FAILED,
        ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
        ErrorKind.MCP_UPSTREAM_ERROR,
        ErrorKind.PLUGIN_HOST_UNAVAILABLE,
        ErrorKind.PLUGIN_START_FAILED,
    ),
}

Direction = Literal["request", "notification", "parent-request", "parent-notification"]


def _summary(model: type[BaseModel] | None) -> str:
    """The first paragraph of a model's docstring, without reST markup (``""`` for ``Empty``: it is shared)."""
    doc = (model.__doc__ or "") if model is not None and model is not p.Empty else ""
    return " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "`")


def _parent_requests() -> dict[str, tuple[type[BaseModel], type[BaseModel] | None]]:
    """Requests hostd sends the parent: ``{method: (params type, result type or None)}``.

    From ``protocol.PARENT_REQUESTS`` (method -> params type, or a ``(params, result)`` pair) and
    ``protocol.PARENT_RESULTS`` (method -> result type), each optional: ``None`` means the
    result is documented as any JSON value.
    """
    table: Mapping[str, Any] = getattr(p, "PARENT_REQUESTS", {})
    results: Mapping[str, type[BaseModel]] = getattr(p, "PARENT_RESULTS", {})
    out: dict[str, tuple[type[BaseModel], type[BaseModel] | None]] = {}
    for name, entry in table.items():
        params, result = entry if isinstance(entry, tuple) else (entry, results.get(name))
        out[name] = (params, result)
    return out


def _schemas() -> tuple[dict[type[BaseModel], dict[str, Any]], dict[str, Any]]:
    """JSON Schemas of every model the registry names, sharing ``components.schemas``.

    All in validation mode: a result model's serialiser (``Wire``'s, which drops
    ``omit_none`` fields) would otherwise hide its fields; the validation schema
    states them, with an ``omit_none`` field not required.
    """
    wanted: list[type[BaseModel]] = [*p.PARAMS.values(), *p.PARENT_NOTIFICATIONS.values(), *p.NOTIFICATIONS.values()]
    wanted += [model for model in p.RESULTS.values() if model is not None]
    for params, result in _parent_requests().values():
        wanted += [params] if result is None else [params, result]
    unique: list[tuple[type[BaseModel], JsonSchemaMode]] = [(m, "validation") for m in dict.fromkeys(wanted)]
    keyed, top = models_json_schema(unique, by_alias=True, ref_template=_REF)
    _markdown(top)
    by_model = {cast(type[BaseModel], model): schema for (model, _), schema in keyed.items()}
    return by_model, top.get("$defs", {})


def _markdown(schema: Any) -> None:
    """Turn the reST literals (````x````) of docstring descriptions into Markdown's (```x```), in place."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description" and isinstance(value, str):
                schema[key] = value.replace("``", "`")
            else:
                _markdown(value)
    elif isinstance(schema, list):
        for item in schema:
            _markdown(item)


def _params(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A params model's schema as OpenRPC content descriptors, one per field, in wire order."""
    ref = schema.get("$ref")
    body = defs[ref.rsplit("/", 1)[1]] if isinstance(ref, str) else schema
    required = set(body.get("required", ()))
    descriptors = []
    for name, field_schema in body.get("properties", {}).items():
        descriptor: dict[str, Any] = {"name": name, "required": name in required}
        if "description" in field_schema:
            descriptor["description"] = field_schema["description"]
        descriptor["schema"] = field_schema
        descriptors.append(descriptor)
    return descriptors


def _error(kind: ErrorKind) -> dict[str, Any]:
    return {"code": kind.code, "message": kind.meaning, "data": {"kind": kind.name}}


def _method(
    name: str,
    direction: Direction,
    params: list[dict[str, Any]],
    result: dict[str, Any] | None,
    summary: str,
    *,
    errors: tuple[ErrorKind, ...] = (),
) -> dict[str, Any]:
    method: dict[str, Any] = {"name": name}
    if summary:
        method["summary"] = summary
    method["paramStructure"] = "by-name"
    method["params"] = params
    if result is not None:
        method["result"] = result
    if errors:
        method["errors"] = [{"$ref": f"#/components/errors/{kind.name}"} for kind in errors]
    method["x-direction"] = direction
    return method


def _result(name: str, model: type[BaseModel] | None, keyed: Mapping[Any, dict[str, Any]]) -> dict[str, Any]:
    schema = keyed[model] if model is not None else {"type": "null"}
    return {"name": f"{name} result", "schema": schema}


def document() -> dict[str, Any]:
    """The OpenRPC document of the control protocol: ``{openrpc, info, methods, components}``.

    Methods: the parent's requests (in ``PARAMS`` order), then hostd's notifications,
    hostd's requests to the parent, and the parent's notifications, each kind in its
    registry's order. Raises ``KeyError`` when a method in ``RESULTS`` has no ``PARAMS``
    entry or the other way round.
    """
    keyed, defs = _schemas()
    methods: list[dict[str, Any]] = []
    if set(p.PARAMS) != set(p.RESULTS):
        missing = sorted(set(p.PARAMS) ^ set(p.RESULTS))
        raise KeyError(f"methods in only one of protocol.PARAMS and protocol.RESULTS: {missing}")
    for name, params_model in p.PARAMS.items():
        result_model = p.RESULTS[name]
        errors = tuple(dict.fromkeys((*COMMON_ERRORS, *METHOD_ERRORS.get(name, ()))))
        methods.append(
            _method(
                name,
                "request",
                _params(keyed[params_model], defs),
                _result(name, result_model, keyed),
                _summary(result_model) if params_model is p.Empty else _summary(params_model),
                errors=errors,
            )
        )
    for name, model in p.NOTIFICATIONS.items():
        methods.append(_method(name, "notification", _params(keyed[model], defs), None, _summary(model)))
    for name, (params_model, result_model) in _parent_requests().items():
        schema = keyed[result_model] if result_model is not None else {}
        methods.append(
            _method(
                name,
                "parent-request",
                _params(keyed[params_model], defs),
                {"name": f"{name} result", "schema": schema},
                _summary(params_model),
            )
        )
    for name, model in p.PARENT_NOTIFICATIONS.items():
        methods.append(_method(name, "parent-notification", _params(keyed[model], defs), None, _summary(model)))
    return {
        "openrpc": OPENRPC_VERSION,
        "info": {
            "title": "hostd control protocol",
            "version": __version__,
            "description": "JSON-RPC 2.0 between a parent application and `hostd serve`, one JSON object per line on "
            "hostd's stdin and stdout (docs/protocol.md). `x-direction` tells who sends a method: `request` (the "
            "parent; hostd answers), `notification` (hostd), `parent-request` (hostd; the parent answers), "
            "`parent-notification` (the parent). Every request's params may carry `_meta.traceparent` (W3C trace "
            "context). `rpc.discover` answers this document.",
            "license": {"name": "MIT"},
        },
        "methods": methods,
        "components": {
            "schemas": defs,
            "errors": {kind.name: _error(kind) for kind in sorted(ErrorKind, key=lambda k: -k.code)},
        },
    }


@functools.cache
def discover() -> dict[str, Any]:
    """``rpc.discover``'s answer: :func:`document`, built once per process (do not mutate it)."""
    return document()


def document_text() -> str:
    """:func:`document` as ``docs/openrpc.json`` holds it: two-space indent, UTF-8, final newline."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
