"""Generate ``src/generated.ts`` (the typed protocol) from ``docs/openrpc.json``.

Usage: ``python clients/typescript/scripts/generate.py [--check]`` from anywhere; standard library only.
``--check`` exits 1 when the file on disk differs (``tests/test_typescript_client.py`` runs it).

What it writes, all from the document (nothing here names a method):

- one ``export interface`` per ``components.schemas`` entry, JSDoc from the descriptions;
- ``Requests`` (parent -> hostd: ``{params, result}`` per method), ``Notifications`` (hostd -> parent:
  params), ``ParentRequests`` (hostd -> parent: ``{params, result}``), ``ParentNotifications``;
- ``ErrorCodes`` (``data.kind`` -> code) and the ``ErrorKind`` type.

JSON Schema is mapped as pydantic writes it: ``$ref``, ``anyOf``, ``type`` (one or a list), ``enum``,
``const``, ``items``, ``properties`` / ``required``, ``additionalProperties``; anything else is ``unknown``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
DOCUMENT = HERE.parent.parent / "docs" / "openrpc.json"
OUTPUT = HERE / "src" / "generated.ts"
IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def key(name: str) -> str:
    return name if IDENT.match(name) else json.dumps(name)


def doc(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    text = text.replace("*/", "*\\/")
    lines = text.splitlines() or [text]
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


#: JSON Schema's scalar ``type`` names -> their TypeScript types.
PRIMITIVES = {"string": "string", "integer": "number", "number": "number", "boolean": "boolean", "null": "null"}


def ts(schema: Any, indent: str = "") -> str:
    """The TypeScript type of a JSON Schema."""
    if schema is True or schema == {}:
        return "unknown"
    if not isinstance(schema, dict):
        return "never" if schema is False else "unknown"
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[1]
    if "const" in schema:
        return json.dumps(schema["const"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    for combinator in ("anyOf", "oneOf"):
        if combinator in schema:
            parts = list(dict.fromkeys(ts(s, indent) for s in schema[combinator]))
            return " | ".join(f"({p})" if "=>" in p else p for p in parts)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(ts({**schema, "type": k}, indent) for k in kind)
    if isinstance(kind, str) and kind in PRIMITIVES:
        return PRIMITIVES[kind]
    if kind == "array":
        item = ts(schema.get("items", {}), indent)
        return f"{item}[]" if IDENT.match(item) else f"Array<{item}>"
    if kind == "object" or "properties" in schema:
        return object_type(schema, indent)
    return "unknown"


def object_type(schema: dict[str, Any], indent: str) -> str:
    properties: dict[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if not properties:
        value = ts(extra, indent) if isinstance(extra, dict) else "unknown"
        return f"{{ [key: string]: {value} }}"
    required = set(schema.get("required", ()))
    inner = indent + "  "
    lines = ["{"]
    for name, field in properties.items():
        lines += doc(field.get("description"), inner)
        optional = "" if name in required else "?"
        lines.append(f"{inner}{key(name)}{optional}: {ts(field, inner)};")
    if extra not in (None, False):
        lines.append(f"{inner}[key: string]: unknown;")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def params_type(descriptors: list[dict[str, Any]], indent: str) -> str:
    if not descriptors:
        return "Record<string, never>"
    schema = {
        "type": "object",
        "properties": {d["name"]: {**d["schema"], "description": d.get("description")} for d in descriptors},
        "required": [d["name"] for d in descriptors if d.get("required")],
    }
    return object_type(schema, indent)


def generate(document: dict[str, Any]) -> str:
    out = [
        "// Generated from docs/openrpc.json by clients/typescript/scripts/generate.py. Do not edit by hand:",
        "// run `python clients/typescript/scripts/generate.py` after `python -m docgen.docs`.",
        "",
        "/** The protocol document this file was generated from (`info.version`). */",
        f"export const PROTOCOL_DOCUMENT_VERSION = {json.dumps(document['info']['version'])};",
        "",
    ]
    for name, schema in document["components"]["schemas"].items():
        out += doc(schema.get("description"), "")
        body = ts(schema)
        if body.startswith("{"):
            out.append(f"export interface {name} {body}")
        else:
            out.append(f"export type {name} = {body};")
        out.append("")
    groups: dict[str, list[str]] = {
        "request": ["/** Requests the parent sends; hostd answers with `result`. */", "export interface Requests {"],
        "notification": [
            "/** Notifications hostd sends the parent (their params). */",
            "export interface Notifications {",
        ],
        "parent-request": [
            "/** Requests hostd sends the parent; the parent answers with `result`. */",
            "export interface ParentRequests {",
        ],
        "parent-notification": [
            "/** Notifications the parent sends hostd (their params). */",
            "export interface ParentNotifications {",
        ],
    }
    # A method whose params are exactly a named schema (plugins/statusChanged sends a PluginStatus) names
    # that type instead of spelling its fields out again: compared as rendered, so only identical shapes share.
    named = {
        (ts(schema, indent), indent): name
        for name, schema in document["components"]["schemas"].items()
        for indent in ("  ", "    ")
        if schema.get("type") == "object"
    }
    for method in document["methods"]:
        direction = method.get("x-direction", "request")
        lines = groups[direction]
        lines += doc(method.get("summary"), "  ")
        indent = "    " if "request" in direction else "  "
        params = params_type(method["params"], indent)
        params = named.get((params, indent), params)
        if direction in ("request", "parent-request"):
            result = ts(method["result"]["schema"], "    ")
            lines.append(f"  {key(method['name'])}: {{\n    params: {params};\n    result: {result};\n  }};")
        else:
            lines.append(f"  {key(method['name'])}: {params};")
    for lines in groups.values():
        out += [*lines, "}", ""]
    out.append("/** `error.data.kind` -> `error.code`, for every error hostd answers with. */")
    out.append("export const ErrorCodes = {")
    for name, error in document["components"]["errors"].items():
        out += doc(error["message"], "  ")
        out.append(f"  {name}: {error['code']},")
    out += ["} as const;", "", "/** hostd's stable symbolic error names (`error.data.kind`). */"]
    out += ["export type ErrorKind = keyof typeof ErrorCodes;", ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    text = generate(json.loads(DOCUMENT.read_text(encoding="utf-8")))
    if "--check" in argv:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(
                f"{OUTPUT} is stale; regenerate it with: python clients/typescript/scripts/generate.py", file=sys.stderr
            )
            return 1
        return 0
    OUTPUT.parent.mkdir(exist_ok=True)
    if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
        OUTPUT.write_text(text, encoding="utf-8")
        print(f"updated {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
