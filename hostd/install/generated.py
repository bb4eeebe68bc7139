"""Converters check their own output: the manifest they generate must be one hostd then loads.

The class (issue 31, class 3): a converter (``plugins/import``, a registry
``server.json``) turns a stranger's document into a manifest that hostd writes
into its state folder and then loads. What the converter let through but the
manifest refuses (a NUL in a command, argument, env or header value; an env or
header name that is not one; a remote URL or transport the manifest rejects; a
manifest over :data:`~hostd.install.manifest.MANIFEST_MAX_BYTES` built from a config
under the import bound; a lone surrogate orjson cannot write) reached the
parent as MANIFEST_INVALID naming a file hostd generated, not the entry and
field the user wrote. :func:`manifest_errors` runs, in memory, every check
``load_manifest`` would run on the file ``_write_manifest`` would write;
:func:`source_field` maps a manifest field back to the source document's field
through the converter's own table, so the converter reports its document's
error (IMPORT_INVALID, PACKAGE_INVALID) before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from hostd.wire.jsonlimits import DocumentRefused, check_document

__all__ = ["WRITE_OPTIONS", "manifest_errors", "source_field"]

#: The orjson options hostd writes a generated ``plugin.json`` with (hostd/host/install_methods.py ``_write_manifest``).
WRITE_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE


def manifest_errors(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The errors ``load_manifest`` would report for ``document`` written as ``plugin.json``; ``[]`` when it loads.

    Each error is ``{"field": <dotted manifest path, "" for the whole file>,
    "message": str}``, worded as ``load_manifest`` words it. Checks, in order:
    depth and lone surrogates (hostd/wire/jsonlimits.py), that orjson can write it,
    the size bound on the bytes written, then the manifest model on the
    document read back. Pure (no I/O); CPU only (one serialisation and one
    validation). Raises nothing for a JSON-shaped document.
    """
    from hostd.install import manifest as manifests  # noqa: PLC0415 - the model is built on first use

    try:
        check_document(dict(document))
    except DocumentRefused as exc:
        return [{"field": exc.field, "message": exc.message}]
    try:
        data = orjson.dumps(document, option=WRITE_OPTIONS)
    except TypeError as exc:
        return [{"field": "", "message": f"cannot be written as JSON: {exc}"}]
    if len(data) > manifests.MANIFEST_MAX_BYTES:
        return [
            {
                "field": "",
                "message": f"the manifest would be {len(data)} bytes, over the "
                f"{manifests.MANIFEST_MAX_BYTES}-byte bound of a manifest",
            }
        ]
    if not manifests.Manifest.__pydantic_complete__:
        with manifests._BUILD_LOCK:
            if not manifests.Manifest.__pydantic_complete__:
                manifests.Manifest.model_rebuild()
    try:
        manifests.Manifest.model_validate(orjson.loads(data))
    except ValidationError as exc:
        return [manifests._field_error(err, yaml_source=False) for err in exc.errors()]
    return []


def source_field(field: str, table: Mapping[str, str], fallback: str) -> str:
    """The source document's field for the generated manifest's ``field``.

    ``table`` maps a manifest path or path prefix (``backend.args.2``,
    ``backend.env.API_KEY``, ``backend.command``) to the source field it was
    made from; the longest prefix that matches whole path components wins.
    ``fallback`` when none does (the entry as a whole).
    """
    parts = field.split(".") if field else []
    for end in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:end]))
        if found is not None:
            return found
    return fallback
