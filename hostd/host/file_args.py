"""Which local files and folders a ``tools/call``'s arguments name, and whether the plugin may reach them.

The class (issue 25, under-granting item 4): the user hands a tool a file ("convert
``~/Documents/reports/q3.xlsx``") that the plugin's sandbox does not cover, so the server answers
``Permission denied`` -- or, worse, its library turns ``EACCES`` into a normal-looking result ("Package not
found"). Members of the class, each found here before the call is sent: an absolute path, a ``~/`` path, a
``file://`` URI, in a top-level argument, a nested object or an array; a value the ``inputSchema`` marks as a
path or URI (``format: uri`` / ``uri-reference`` / ``iri``..., or a property named ``path``, ``file``,
``filename``, ``dir``, ``inputPath``...); a file to read, a folder, and an output the tool writes (a property
named ``output``, ``dest``..., or a tool whose annotations do not say ``readOnlyHint: true``, read with the
spec's defaults: a ``title`` only, ``destructiveHint: false``...), whose file may not exist yet (then its
folder is what is needed).

What is not a path: relative strings (the server resolves them in its own folder, which it may read), a
string that only *looks* like one (``"/help"`` in a chat message) but names nothing that exists, and
anything past the walk's bounds (:data:`MAX_DEPTH`, :data:`MAX_STRINGS`, :data:`MAX_PATHS`). Pure functions
but for ``stat``/``realpath`` (blocking: call them from a worker thread when the file system may be slow).
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

#: How deep the walk goes into nested objects and arrays (arguments and schema together).
MAX_DEPTH = 8
#: How many strings are looked at in one call's arguments; the rest are not.
MAX_STRINGS = 512
#: How many paths one call may name; more are not looked at.
MAX_PATHS = 32
#: A string longer than this is no path (PATH_MAX on Linux).
MAX_PATH_CHARS = 4096

#: ``format`` values that mark a string as a URI or path (JSON Schema 2020-12 section 7.3.5, and common
#: non-standard ones).
PATH_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference", "path", "file-path", "filepath"})
#: Words in a property name that mark its value as a path (``inputPath`` -> ``input``, ``path``).
PATH_WORDS = frozenset(
    {"path", "paths", "file", "files", "filename", "filepath", "dir", "dirs", "directory", "folder", "dirname"}
    | {"uri", "uris", "source", "src", "input", "output", "dest", "destination", "target", "location", "doc"}
    | {"document", "workbook", "spreadsheet", "image", "pdf", "attachment", "outdir", "root", "cwd"}
)
#: Words in a property name that say the tool writes there.
WRITE_WORDS = frozenset({"output", "out", "outdir", "dest", "destination", "target", "save", "write", "export"})

Access = Literal["read", "write"]


@dataclass(frozen=True)
class NamedPath:
    """One local path a call's arguments name.

    ``pointer``: where, as a JSON Pointer into ``arguments`` (RFC 6901; ``""`` for the whole value).
    ``value``: the argument as written. ``path``: the absolute path it names (``~`` expanded, a ``file://``
    URI decoded, normalised, links resolved). ``access``: ``"read"`` or ``"write"`` (read and write).
    ``grant``: what must be reachable for the call to work: ``path`` itself, or its folder for an output
    that does not exist yet and for an existing file to write (:func:`_write_grant`).
    """

    pointer: str
    value: str
    path: str
    access: Access
    grant: str


def _words(name: str) -> set[str]:
    """The lowercase words of a property name: ``inputFilePath`` -> ``{input, file, path}``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w}


def _as_local_path(value: str, home: str | None) -> str | None:
    """The absolute path ``value`` names (absolute, ``~``, ``~/...``, ``file://``), or ``None``."""
    if not value or len(value) > MAX_PATH_CHARS or "\0" in value or "\n" in value:
        return None
    if value.startswith("file:"):
        parts = urlsplit(value)
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return None
        path = unquote(parts.path)
        return os.path.normpath(path) if "\0" not in path else None
    if value == "~" or value.startswith("~/"):
        if not home:
            return None
        return os.path.normpath(home + value[1:])
    if value.startswith("/"):
        return os.path.normpath(value)
    return None


def _sub_schema(schema: Any, key: str | int) -> Any:
    """The part of an object/array schema that describes member ``key`` (``None``: unknown)."""
    if not isinstance(schema, Mapping):
        return None
    if isinstance(key, int):
        items = schema.get("items")
        return items if isinstance(items, Mapping) else None
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
        return properties[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def _walk(
    value: Any, schema: Any, pointer: str, names: tuple[str, ...], depth: int
) -> Iterator[tuple[str, str, Any, tuple[str, ...]]]:
    """Every string in ``value``: ``(pointer, string, its schema, the property names on the way)``."""
    if isinstance(value, str):
        yield pointer, value, schema, names
    elif depth >= MAX_DEPTH:
        return
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield from _walk(item, _sub_schema(schema, key), f"{pointer}/{_escaped(key)}", (*names, key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, _sub_schema(schema, index), f"{pointer}/{index}", names, depth + 1)


def _writes(annotations: Mapping[str, Any] | None) -> bool | None:
    """What the tool's annotations say: ``True`` it writes, ``False`` read-only, ``None`` not said.

    Read with the spec's defaults (MCP ``ToolAnnotations``: ``readOnlyHint`` defaults to ``false``): a tool
    that has annotations and does not set ``readOnlyHint: true`` may modify its environment -- a ``title``
    only (office-word-mcp-server 1.1.11's ``add_paragraph``, asked for ``read`` and then refused the write),
    ``destructiveHint: false`` (an additive write), ``idempotentHint`` or ``openWorldHint`` only. Only a tool
    with no annotations object says nothing (issue 25).
    """
    if not isinstance(annotations, Mapping):
        return None
    return annotations.get("readOnlyHint") is not True


def _write_grant(real: str, home: str | None) -> str:
    """What writing the existing regular file ``real`` needs: its folder, read-write.

    The class (issue 25): writing a file is, for many libraries, replacing it -- a temporary file made beside
    it and renamed over it (excel-mcp-server 2.2.2's atomic save: ``mkstemp`` in the folder, then
    ``os.replace``; editors; lock files such as ``~$q3.docx``). Landlock lets a process create or rename an
    entry only with write on the folder, so a grant of the file alone fails those with ``EACCES``. A file right
    in the user's home keeps the file itself: the home as a whole is never granted (the sandbox refuses it).
    """
    folder = os.path.dirname(real)
    if home is not None and folder == os.path.realpath(os.path.expanduser(home)):
        return real
    return folder


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def named_paths(
    arguments: Mapping[str, Any],
    input_schema: Mapping[str, Any] | None,
    annotations: Mapping[str, Any] | None,
    home: str | None,
) -> list[NamedPath]:
    """The local files and folders ``arguments`` (a ``tools/call``'s) name, in the order met, each once.

    ``input_schema``: the tool's MCP ``inputSchema``; its ``properties``/``items`` (no ``$ref``) say which
    strings are paths or URIs (``format`` in :data:`PATH_FORMATS`) and the property names on the way do too
    (:data:`PATH_WORDS`). ``annotations``: the tool's MCP ``annotations`` (``readOnlyHint``,
    ``destructiveHint``). ``home``: what ``~`` means (the user's home). A string names a path when it is
    absolute, ``~/...`` or a ``file://`` URI (a relative one is the server's business) and names something
    that exists -- or, for an output (a property named with :data:`WRITE_WORDS`, or a tool that writes),
    something whose folder exists. Never raises; blocking (``stat``, ``realpath``).
    """
    writes = _writes(annotations)
    found: dict[tuple[str, str], NamedPath] = {}
    for count, (pointer, value, schema, names) in enumerate(_walk(arguments, input_schema, "", (), 0)):
        if count >= MAX_STRINGS or len(found) >= MAX_PATHS:
            break
        path = _as_local_path(value, home)
        if path is None:
            continue
        words = set().union(*(_words(n) for n in names[-1:]))
        hinted = bool(words & PATH_WORDS) or (isinstance(schema, Mapping) and schema.get("format") in PATH_FORMATS)
        output = writes is not False and bool(words & WRITE_WORDS)
        access: Access = "write" if writes or output else "read"
        real = os.path.realpath(path)
        info = _stat(real)
        if info is not None:
            grant = _write_grant(real, home) if access == "write" and stat.S_ISREG(info.st_mode) else real
        elif access == "write" and (hinted or output):
            folder = os.path.dirname(real)
            info = _stat(folder)
            if info is None or not stat.S_ISDIR(info.st_mode):
                continue
            grant = folder
        else:
            continue  # "/help" in a message: names nothing
        item = NamedPath(pointer=pointer, value=value, path=real, access=access, grant=grant)
        key = (item.grant, item.access)
        found.setdefault(key, item)
    return list(found.values())


def may_name_paths(arguments: Mapping[str, Any], home: str | None) -> bool:
    """Whether any string in ``arguments`` (within the walk's bounds) is written as a local path: the
    non-blocking test before :func:`named_paths` (which calls ``stat``), so a call that names none costs no
    worker thread."""
    for count, (_, value, _, _) in enumerate(_walk(arguments, None, "", (), 0)):
        if count >= MAX_STRINGS:
            break
        if _as_local_path(value, home) is not None:
            return True
    return False


def with_real_home(arguments: Mapping[str, Any], home: str) -> tuple[dict[str, Any], list[str]]:
    """``arguments`` with every string written as a ``~`` path (``"~"``, ``"~/..."``) made absolute under the
    user's real ``home``, and the JSON Pointers (RFC 6901) of the strings rewritten, in the order met.

    The class (issue 25, the private ``HOME``; :mod:`sandbox.home_view`): under ``landlock-fs`` a plugin's
    ``HOME`` is its private view, so a server that expands ``~`` in the user's words itself (as
    ``@modelcontextprotocol/server-filesystem`` does) would read ``~/mcp-files/notes.txt`` as a file of that
    view, not the user's. The user's ``~`` means the user's home: hostd writes it out before the server sees
    the call. Members: a top-level argument, a nested object's member, an array's item, ``~`` alone; whether
    the file exists or not (a file to create is the user's too). Not rewritten: ``~user/...`` (another
    user's home), a ``~`` inside a longer string (prose), ``file://`` URIs (no ``~`` in them), and strings
    past the walk's bounds (:data:`MAX_DEPTH`, :data:`MAX_STRINGS`; the same strings :func:`may_name_paths`
    looks at). ``arguments`` is not changed (the result is a copy where anything was rewritten). Pure.
    """
    strings = itertools.islice(_walk(arguments, None, "", (), 0), MAX_STRINGS)
    if not any(_tilde_path(value) for _, value, _, _ in strings):
        return dict(arguments), []  # the usual call (on the tools/call path): one look, no rebuilt tree
    rewritten: list[str] = []
    base = home.rstrip("/")  # "" for a HOME of "/": "~/x" -> "/x"

    def rewrite(value: Any, pointer: str, depth: int, budget: list[int]) -> Any:
        if isinstance(value, str):
            budget[0] -= 1
            if budget[0] >= 0 and _tilde_path(value):
                rewritten.append(pointer)
                return base + value[1:] if value != "~" else (base or "/")
            return value
        if depth >= MAX_DEPTH:
            return value
        if isinstance(value, Mapping):
            return {
                key: rewrite(item, f"{pointer}/{_escaped(key)}", depth + 1, budget) if isinstance(key, str) else item
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [rewrite(item, f"{pointer}/{index}", depth + 1, budget) for index, item in enumerate(value)]
        return value

    result = rewrite(dict(arguments), "", 0, [MAX_STRINGS])
    return (result if rewritten else dict(arguments)), rewritten


def _tilde_path(value: str) -> bool:
    """Whether ``value`` is written as a path in the user's home: ``~`` alone or ``~/...`` (no NUL)."""
    return (value == "~" or value.startswith("~/")) and "\0" not in value


def _escaped(key: str) -> str:
    """``key`` as a JSON Pointer reference token (RFC 6901 section 3)."""
    return key.replace("~", "~0").replace("/", "~1")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def reachable(item: NamedPath, rules: Mapping[str, Sequence[str]]) -> bool:
    """Whether the Landlock rules a plugin runs under (``IsolationPlan.rule_lists()``: ``read``, ``write``,
    ``devices_r``, ``devices_rw`` real paths, each covering what lies inside it) already give ``item`` its
    access."""
    writable = [rules.get("write", ()), rules.get("devices_rw", ())]
    lists = writable if item.access == "write" else [*writable, rules.get("read", ()), rules.get("devices_r", ())]
    return any(_inside(item.grant, rule) for paths in lists for rule in paths)
