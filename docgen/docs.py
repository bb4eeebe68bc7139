"""Generated parts of ``docs/protocol.md``: the error table, the type tables, the examples.

Nothing between a pair of markers is written by hand:

- ``<!-- errors:begin -->`` … ``<!-- errors:end -->``: rendered from
  :class:`~hostd.wire.errors.ErrorKind` by :func:`error_table_markdown`;
- ``<!-- type:NAME:begin -->`` … ``<!-- type:NAME:end -->``: the field table of
  the wire model ``NAME`` in :data:`TYPES` (:mod:`hostd.control.models`), by
  :func:`type_table_markdown` (field, type, meaning from its ``Field`` description);
- ``<!-- example:NAME:begin -->`` … ``<!-- example:NAME:end -->``: an example
  captured from a live hostd by :func:`docgen.examples.capture`;
- ``docs/protocol.schema.json``: the JSON Schema of every result and notification
  model (:func:`schema_document`);
- ``docs/openrpc.json``: the OpenRPC document (:func:`hostd.control.openrpc.document_text`).

``tests/test_docs.py`` fails when any of them differs from what this module
produces (the examples test runs a real hostd; it takes a few seconds).
Regenerate with::

    python -m docgen.docs                       # tables and schema, in place
    python -m docgen.docs --examples            # also run hostd and rewrite the examples
    python -m docgen.docs --check [--examples]  # exit 1 if anything is stale

Rows come in three groups: the JSON-RPC 2.0 codes in the specification's
order (-32700, then -32600 to -32603), the two codes borrowed from LSP (-32002
not initialized, -32800 cancelled), then hostd's own codes in the
server-defined range; within a group, by code descending (-32010 before
-32011). The output depends on ``ErrorKind`` only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel

from docgen import env_table
from docgen.examples import capture, mask
from hostd.control import models as p
from hostd.control import openrpc
from hostd.control.openrpc import OPENRPC_DOC
from hostd.wire.errors import ErrorKind

__all__ = [
    "BEGIN_MARKER",
    "END_MARKER",
    "PROTOCOL_DOC",
    "SCHEMA_DOC",
    "TYPES",
    "error_table_markdown",
    "extract_error_block",
    "replace_blocks",
    "replace_error_block",
    "schema_document",
    "type_table_markdown",
]

BEGIN_MARKER: Final = "<!-- errors:begin -->"
END_MARKER: Final = "<!-- errors:end -->"

PROTOCOL_DOC: Final = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
"""Where ``python -m docgen.docs`` rewrites the error table in a source checkout."""
SCHEMA_DOC: Final = PROTOCOL_DOC.with_name("protocol.schema.json")
"""The JSON Schema of the results and notifications, beside ``protocol.md``."""

#: The wire models whose field tables ``docs/protocol.md`` holds (``<!-- type:NAME:begin -->``).
TYPES: Final[Mapping[str, type[BaseModel]]] = {
    "InitializeResult": p.InitializeResult,
    "PluginInfo": p.PluginInfo,
    "GrantedLimits": p.GrantedLimits,
    "ConfigItem": p.ConfigItem,
    "Launch": p.Launch,
    "LaunchUnresolved": p.LaunchUnresolved,
    "PluginStatus": p.PluginStatus,
    "HostTool": p.HostTool,
    "ImportEntry": p.ImportEntry,
    "ToolsListResult": p.ToolsListResult,
    "ToolsCallResult": p.ToolsCallResult,
    "ToolEnabledResult": p.ToolEnabledResult,
    "LogsResult": p.LogsResult,
    "LogLine": p.LogLine,
    "ProgressParams": p.ProgressParams,
    "LogParams": p.LogParams,
    "StateRecord": p.StateRecord,
    "PagedResult": p.PagedResult,
    "ReadResourceResult": p.ReadResourceResult,
    "GetPromptResult": p.GetPromptResult,
    "CompleteResult": p.CompleteResult,
    "ResourceUpdatedParams": p.ResourceUpdatedParams,
    "SamplingRequestParams": p.SamplingRequestParams,
    "GrantRequestParams": p.GrantRequestParams,
    "RequestedPath": p.RequestedPath,
    "GrantAnswer": p.GrantAnswer,
    "NetworkRequestParams": p.NetworkRequestParams,
    "NetworkAnswer": p.NetworkAnswer,
    "CapabilitySet": p.CapabilitySet,
    "FolderCapability": p.FolderCapability,
    "NetworkCapability": p.NetworkCapability,
    "NetworkAllowlist": p.NetworkAllowlist,
    "SecretCapability": p.SecretCapability,
    "PackageCapability": p.PackageCapability,
    "RootsRequestParams": p.RootsRequestParams,
    "Accounting": p.Accounting,
}

_SCALARS: Final[Mapping[Any, str]] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    Any: "any",
    type(None): "null",
}

_JSONRPC_CODES: Final = frozenset({-32700, -32600, -32601, -32602, -32603})
_LSP_CODES: Final = frozenset({-32002, -32800})


def _order(code: int) -> tuple[int, bool, int]:
    """Sort key: group (JSON-RPC, LSP, hostd), -32700 first as in the JSON-RPC spec, code descending."""
    group = 0 if code in _JSONRPC_CODES else 1 if code in _LSP_CODES else 2
    return group, code != -32700, -code


def _cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, line breaks folded."""
    return " ".join(text.replace("|", "\\|").split())


def error_table_markdown() -> str:
    """The error table as Markdown: ``code | data.kind | meaning``, one row per :class:`ErrorKind`.

    Rows: JSON-RPC 2.0 codes first (-32700, then -32600 to -32603), then the
    LSP codes, then hostd's own, each group by code descending. Ends with a newline.
    """
    kinds = sorted(ErrorKind, key=lambda kind: _order(kind.code))
    lines = ["| code | data.kind | meaning |", "|---:|---|---|"]
    lines.extend(f"| `{kind.code}` | `{kind.name}` | {_cell(kind.meaning)} |" for kind in kinds)
    return "\n".join(lines) + "\n"


def type_name(annotation: Any) -> str:
    """A field's type as the tables write it: ``string``, ``integer[]``, ``object``,
    ``string or null``, ``[PluginInfo](#plugininfo)``; a ``Literal`` lists its values."""
    origin = typing.get_origin(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        name = annotation.__name__
        return f"[`{name}`](#{name.lower()})" if name in TYPES else "object"
    if origin is typing.Literal:
        return " or ".join(f"`{json.dumps(v)}`" for v in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(arg) for arg in typing.get_args(annotation))
    if origin is list:
        (item,) = typing.get_args(annotation)
        inner = type_name(item)
        return f"{inner}[]" if " " not in inner else f"({inner})[]"
    if origin is dict:
        return "object"
    raise TypeError(f"no table name for the type {annotation!r}")


def type_table_markdown(model: type[BaseModel]) -> str:
    """The field table of ``model``: ``field | type | meaning``, one row per field in wire order.

    ``field`` is the wire name (the alias where there is one); ``type`` from
    :func:`type_name`, with ``, optional`` for a field left out when ``null``
    (``omit_none``); ``meaning`` is the ``Field`` description. Ends with a newline.
    """
    omitted: frozenset[str] = getattr(model, "omit_none", frozenset())
    lines = ["| field | type | meaning |", "|---|---|---|"]
    for name, info in model.model_fields.items():
        wire = info.alias or name
        kind = type_name(info.annotation)
        if name in omitted:
            kind = kind.removesuffix(" or null") + ", optional"
        lines.append(f"| `{wire}` | {_cell(kind)} | {_cell(info.description or '')} |")
    return "\n".join(lines) + "\n"


def schema_document() -> str:
    """JSON Schema (2020-12) of each result and notification model, as ``protocol.schema.json`` holds it.

    ``{"$schema", "results": {method: schema or null}, "notifications": {method: schema},
    "parentRequests": {method: params schema}}``;
    serialised with sorted keys and a final newline, so the output depends on the models only.
    """
    results = {m: (model.model_json_schema(by_alias=True) if model else None) for m, model in p.RESULTS.items()}
    notes = {m: model.model_json_schema(by_alias=True) for m, model in p.NOTIFICATIONS.items()}
    asks = {m: model.model_json_schema(by_alias=True) for m, model in p.PARENT_REQUESTS.items()}
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "results": results,
        "notifications": notes,
        "parentRequests": asks,
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_BLOCK = re.compile(r"<!-- (type|example):([A-Za-z0-9_-]+):begin -->\n(.*?)<!-- \1:\2:end -->", re.DOTALL)


def blocks(text: str, kind: str) -> dict[str, str]:
    """``{name: content}`` of every ``<!-- KIND:NAME:begin -->`` … ``end`` block in ``text``."""
    return {m.group(2): m.group(3) for m in _BLOCK.finditer(text) if m.group(1) == kind}


def replace_blocks(text: str, kind: str, render: Callable[[str], str]) -> str:
    """``text`` with the content of each ``KIND`` block replaced by ``render(name)``.

    Raises ``KeyError`` (from ``render``) for a block name it does not know, and
    ``ValueError`` for a begin marker without its end.
    """
    begins = len(re.findall(rf"<!-- {kind}:[A-Za-z0-9_-]+:begin -->", text))
    if begins != len(blocks(text, kind)):
        raise ValueError(f"a <!-- {kind}:NAME:begin --> marker has no matching end marker")

    def one(match: re.Match[str]) -> str:
        if match.group(1) != kind:
            return match.group(0)
        name = match.group(2)
        return f"<!-- {kind}:{name}:begin -->\n{render(name)}<!-- {kind}:{name}:end -->"

    return _BLOCK.sub(one, text)


def render_types(text: str) -> str:
    """``text`` with every type table regenerated (:func:`type_table_markdown`)."""
    return replace_blocks(text, "type", lambda name: type_table_markdown(TYPES[name]))


def render_examples(text: str, examples: Mapping[str, str]) -> str:
    """``text`` with every example block replaced by ``examples[name]`` (:func:`docgen.examples.capture`)."""
    return replace_blocks(text, "example", lambda name: examples[name])


def _markers(text: str) -> tuple[int, int]:
    """Offsets just after the begin marker's line and at the start of the end marker."""
    begin = text.find(BEGIN_MARKER)
    end = text.find(END_MARKER)
    if begin < 0 or end < 0 or end < begin:
        raise ValueError(f"the document needs {BEGIN_MARKER} and then {END_MARKER}, each once")
    if text.find(BEGIN_MARKER, begin + 1) >= 0 or text.find(END_MARKER, end + 1) >= 0:
        raise ValueError(f"{BEGIN_MARKER} and {END_MARKER} must each appear exactly once")
    start = text.find("\n", begin)
    return (len(text) if start < 0 else start + 1), end


def extract_error_block(text: str) -> str:
    """The text between the markers (the table as it stands in the document)."""
    start, end = _markers(text)
    return text[start:end]


def replace_error_block(text: str) -> str:
    """``text`` with the block between the markers replaced by :func:`error_table_markdown`."""
    start, end = _markers(text)
    return text[:start] + error_table_markdown() + text[end:]


def _sync_env_table(*, check: bool) -> bool:
    """sandbox/README.md's table of refused environment variables (:mod:`docgen.env_table`); False when
    ``check`` finds it stale or its markers are broken."""
    try:
        fresh = env_table.sync(check=check)
    except ValueError as exc:
        print(f"{env_table.ENV_DOC}: {exc}", file=sys.stderr)
        return False
    if fresh:
        return True
    if check:
        print(f"{env_table.ENV_DOC}: the env table is stale; regenerate it with python -m docgen.docs", file=sys.stderr)
        return False
    print(f"updated the env table in {env_table.ENV_DOC}")
    return True


def main(argv: list[str] | None = None) -> int:
    """``python -m docgen.docs [--check] [--examples] [PATH]``: rewrite (or check) the generated parts.

    Without ``--examples`` the error table, the type tables and the schema; with it
    also the examples, captured from a hostd this runs (a few seconds). Exit 1 when
    ``--check`` finds something stale or a marker is broken.
    """
    parser = argparse.ArgumentParser(
        prog="python -m docgen.docs", description="Render the generated parts of docs/protocol.md."
    )
    parser.add_argument("path", nargs="?", type=Path, default=PROTOCOL_DOC, help="the document to update")
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated part of the document is stale")
    parser.add_argument("--examples", action="store_true", help="also capture the examples from a live hostd")
    args = parser.parse_args(argv)
    target: Path = args.path
    text = target.read_text(encoding="utf-8")
    try:
        updated = render_types(replace_error_block(text))
        if args.examples:
            updated = render_examples(updated, capture())
    except (ValueError, KeyError) as exc:
        print(f"{target}: {exc}", file=sys.stderr)
        return 1
    schema_path = target.with_name(SCHEMA_DOC.name)
    schema = schema_document()
    old_schema = schema_path.read_text(encoding="utf-8") if schema_path.exists() else None
    openrpc_path = target.with_name(OPENRPC_DOC.name)
    try:
        openrpc_text = openrpc.document_text()
    except KeyError as exc:  # a method in RESULTS without its PARAMS entry (or the reverse)
        print(f"docs/openrpc.json: {exc.args[0]}", file=sys.stderr)
        return 1
    old_openrpc = openrpc_path.read_text(encoding="utf-8") if openrpc_path.exists() else None
    what = "the error table, type tables" + (", examples" if args.examples else "") + ", schema and openrpc.json"
    if not _sync_env_table(check=args.check):
        return 1
    if args.check:
        # Examples keep this machine's isolation layers; compare without them (docgen.examples.mask).
        same = mask(updated) == mask(text) if args.examples else updated == text
        if not same or old_schema != schema or old_openrpc != openrpc_text:
            flags = " --examples" if args.examples else ""
            print(f"{target}: {what} are stale; regenerate them with: python -m docgen.docs{flags}", file=sys.stderr)
            return 1
        return 0
    if old_schema != schema:
        schema_path.write_text(schema, encoding="utf-8")
        print(f"updated {schema_path}")
    if old_openrpc != openrpc_text:
        openrpc_path.write_text(openrpc_text, encoding="utf-8")
        print(f"updated {openrpc_path}")
    if updated != text:
        target.write_text(updated, encoding="utf-8")
        print(f"updated {what} in {target}")
    else:
        print(f"{target}: {what} are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
