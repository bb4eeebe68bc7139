"""Depth and size bounds on JSON from an untrusted peer, and raw pass-through, with no I/O in it.

The class of bug
----------------
A value a plugin (or the parent) sends is parsed once, at the frame, and then
travels: into the registry, into ``tools/list`` for *every* plugin, into error
``data``, into log lines. A value that parsed but is deeper than a later
consumer can handle (orjson serialises at most 255 levels, jsonschema and
``json.dumps`` recurse in Python) or bigger than the bound of where it goes
breaks that consumer, possibly in a request about another plugin. So every
value is checked *where it enters hostd*, against one set of documented
limits (``docs/protocol.md`` "Limits"), by one checker: :func:`check_json`.

The checker is iterative (an explicit stack, never recursion) and visits each
node once, so its work is linear in the value, which the frame bound already
bounds; it stops at the first violation. Only once the depth is known to be
within the bound is the size measured (by serialising, which is then safe).

:func:`object_members` finds the raw bytes of an object's members without
re-encoding, so a result that needs no change reaches the parent as the
plugin's own JSON (integers beyond 64 bits, key order and number forms like
``1E2`` survive; orjson would turn the first into floats and the last into
``100.0``).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import orjson

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_TOOL_BYTES",
    "DocumentRefused",
    "LimitExceeded",
    "check_document",
    "check_json",
    "json_int",
    "load_document",
    "object_members",
]

MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted in any one value a peer sends
(a tool field, tool-call arguments, a result, error ``data``, log ``data``).
``[]`` and ``{}`` have depth 1, a scalar 0. Well below orjson's 255, so nothing
accepted can fail to serialise later, whatever hostd wraps it in."""

MAX_TOOL_BYTES: Final = 128 * 1024
"""Largest tool definition accepted at discovery, in bytes of compact UTF-8 JSON."""


@dataclass(frozen=True)
class LimitExceeded:
    """Why a value is over a bound.

    Attributes:
        bound: ``"depth"`` or ``"size"``.
        pointer: JSON pointer (RFC 6901) of the first container nested deeper
            than the limit (depth), or ``""`` (size: the whole value).
        limit: the bound (levels or bytes).
        size: the value's size in bytes (size only; ``None`` for depth).
    """

    bound: str
    pointer: str
    limit: int
    size: int | None = None

    @property
    def message(self) -> str:
        """One sentence for an error message, naming the bound and where it was passed."""
        if self.bound == "depth":
            return f"nested deeper than {self.limit} levels at {self.pointer or '/'}"
        return f"{self.size} bytes as JSON, over the {self.limit}-byte bound"


def check_json(value: Any, *, max_depth: int = MAX_JSON_DEPTH, max_bytes: int | None = None) -> LimitExceeded | None:
    """The first bound ``value`` (a parsed JSON value) passes, or ``None`` when within all.

    Args:
        value: dicts, lists and scalars as a JSON parser returns them (exact ``dict``
            and ``list``; subclasses are not looked into).
        max_depth: deepest nesting of arrays/objects allowed (``[]`` is 1).
        max_bytes: largest compact UTF-8 JSON encoding allowed, or ``None``.

    Depth is found without recursion, level by level; only when it is over the
    limit is the pointer of the first container too deep (document order) looked
    for. Work is linear in the number of nodes. Raises nothing for JSON values.
    """
    if _deeper_than(value, max_depth):
        return LimitExceeded("depth", _first_too_deep(value, max_depth), max_depth)
    if max_bytes is not None:
        size = _encoded_size(value)
        if size > max_bytes:
            return LimitExceeded("size", "", max_bytes, size)
    return None


def _deeper_than(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests more than ``max_depth`` containers: level by level, no paths.

    This runs on every ``tools/call`` result, so it is the cheap part: one list
    comprehension per container, about 0.5 microseconds a node.
    """
    level = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth:
            return True
        below: list[Any] = []
        for node in level:
            children = node.values() if type(node) is dict else node
            below += [child for child in children if type(child) is dict or type(child) is list]
        level = below
    return False


def _first_too_deep(value: Any, max_depth: int) -> str:
    """The pointer of the first container (document order) nested deeper than ``max_depth``.

    Only called once :func:`_deeper_than` said there is one; depth-first with an
    explicit stack, never deeper than ``max_depth + 1``.
    """
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 0, ())]
    while stack:
        node, depth, path = stack.pop()
        if depth >= max_depth:
            return _pointer(path)
        children = node.items() if type(node) is dict else enumerate(node)
        nested = [(child, depth + 1, (*path, str(key))) for key, child in children if type(child) in (dict, list)]
        stack.extend(reversed(nested))  # reversed: the first child is popped first
    return ""


def _encoded_size(value: Any) -> int:
    """Bytes of compact UTF-8 JSON for ``value`` (depth already bounded, so recursion is safe).

    orjson refuses what hostd's parser never produces (lone surrogates, integers
    beyond 64 bits); values built in Python may hold them, so those are measured
    with the standard library instead.
    """
    try:
        return len(orjson.dumps(value))
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
        return len(text.encode("utf-8", "surrogatepass"))


def _pointer(path: tuple[str, ...]) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)


class DocumentRefused(ValueError):
    """A stranger's document hostd will not take: over a bound, not JSON, or text hostd refuses.

    ``message``: one sentence (no quoting of the document beyond a character
    code). ``pointer``: JSON pointer (RFC 6901) of the value at fault, ``""``
    for the whole document or when unknown. Each boundary turns it into its
    document's named error (PACKAGE_INVALID, IMPORT_INVALID, INVALID_PARAMS...).
    """

    def __init__(self, message: str, pointer: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.pointer = pointer

    @property
    def field(self) -> str:
        """The pointer as a dotted path (``packages.0.identifier``), as ``data.errors[].field`` names fields."""
        return ".".join(part.replace("~1", "/").replace("~0", "~") for part in self.pointer.split("/")[1:])


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def check_document(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse a parsed document nested deeper than ``max_depth`` or holding a lone surrogate.

    The class (issue 31, class 2): a stranger's value reaches code that recurses
    (``str()``, ``repr()``, pydantic's error rendering, ``json.dumps``) or
    encodes it (orjson refuses a lone surrogate: a manifest that cannot be
    written). So every document is held to this *before* anything else reads
    it: depth first (iteratively, :func:`check_json`), then every key and
    string (iteratively) for a UTF-16 surrogate code point, which no UTF-8
    text can hold. Raises :class:`DocumentRefused` with the pointer of the
    first value at fault. Linear in the document.
    """
    exceeded = check_json(value, max_depth=max_depth)
    if exceeded is not None:
        raise DocumentRefused(exceeded.message, exceeded.pointer)
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if type(node) is str:
            found = _SURROGATE.search(node)
            if found is not None:
                raise DocumentRefused(f"holds a lone surrogate (U+{ord(found.group()):04X}), not text", _pointer(path))
        elif type(node) is dict:
            for key, child in node.items():
                if type(key) is str and _SURROGATE.search(key) is not None:
                    raise DocumentRefused("has a key holding a lone surrogate, not text", _pointer(path))
                stack.append((child, (*path, str(key))))
        elif type(node) is list:
            stack.extend((child, (*path, str(index))) for index, child in enumerate(node))


def _text_too_deep(text: str, max_depth: int) -> str | None:
    """Where JSON ``text`` opens its ``max_depth + 1``-th nested container (``line L, column C``), or None.

    A scan of the text itself, before any parser (Python's ``json`` recurses
    and raises ``RecursionError`` near 1000 levels): strings are skipped
    whole, so brackets inside them do not count. Linear; for invalid JSON the
    answer only bounds what a parser will be given.
    """
    depth = 0
    for match in _TEXT_TOKEN.finditer(text):
        first = match.group()[0]
        if first in "[{":
            depth += 1
            if depth > max_depth:
                line = text.count("\n", 0, match.start()) + 1
                column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
                return f"line {line}, column {column}"
        elif first in "]}":
            depth -= 1
    return None


_TEXT_TOKEN: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)


def json_int(literal: str) -> int:
    """``parse_int`` for :func:`json.loads` of a stranger's document: the integer, or :class:`DocumentRefused`.

    The class (issue 31, found by ``python -m fuzz manifest``): a literal the syntax accepts but whose
    conversion to a value raises the conversion's own exception, not the parser's error. Here an integer of
    more digits than the interpreter converts (``sys.get_int_max_str_digits()``, 4300 by default):
    ``int()`` raises a plain ``ValueError`` from inside ``json.loads``, which no boundary caught. YAML's
    implicit scalars (a timestamp that is no date) are the same class (``hostd.install.manifest``).
    """
    limit = sys.get_int_max_str_digits()
    digits = len(literal) - literal.startswith("-")
    if limit and digits > limit:
        raise DocumentRefused(f"an integer of {digits} digits (at most {limit})")
    return int(literal)


def load_document(
    text: str | bytes,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """Parse a stranger's JSON document (``str``, or ``bytes`` in UTF-8 with or without a BOM) safely.

    Bounds before parsing: the nesting is measured on the text
    (:func:`_text_too_deep`), so the parser never recurses past ``max_depth``;
    then the value is held to :func:`check_document` (lone surrogates, which
    ``\\ud800`` escapes produce). ``object_pairs_hook`` as for
    :func:`json.loads` (a duplicate-key check); an exception it raises
    propagates. Raises :class:`DocumentRefused`: not UTF-8 (byte offset),
    nested too deeply (line and column), not JSON (line and column), a lone
    surrogate (pointer), an integer longer than Python converts (:func:`json_int`).
    NaN and Infinity are refused (not JSON).
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentRefused(f"not UTF-8 (byte offset {exc.start})") from None
    where = _text_too_deep(text, max_depth)
    if where is not None:
        raise DocumentRefused(f"nested deeper than {max_depth} levels at {where}")

    def constant(name: str) -> Any:
        raise DocumentRefused(f"{name} is not a JSON number")

    try:
        value = json.loads(text, object_pairs_hook=object_pairs_hook, parse_constant=constant, parse_int=json_int)
    except json.JSONDecodeError as exc:
        raise DocumentRefused(f"not JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    check_document(value, max_depth=max_depth)
    return value


# A JSON string (escapes included) or one structural character. Strings are matched
# whole, so a bracket or comma inside one is never taken for structure.
_TOKEN: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},:]', re.DOTALL)
_WHITESPACE: Final = b" \t\r\n"


def object_members(text: bytes) -> dict[str, bytes] | None:
    """The raw JSON text of each member of the object ``text``, by key (last duplicate wins).

    ``text`` must be one valid JSON object (a frame that already parsed, or a
    member of one); returns ``None`` if it is not an object. The values are
    slices of ``text``, byte for byte, surrounding whitespace removed. Linear in
    ``len(text)``; strings are skipped by one regular-expression match each.
    """
    text = text.strip(_WHITESPACE)
    if not text.startswith(b"{"):
        return None
    members: dict[str, bytes] = {}
    depth = 0
    expect_key = False
    key: str | None = None
    start = 0
    for match in _TOKEN.finditer(text):
        first = text[match.start()]
        if first == 0x22:  # '"'
            if depth == 1 and expect_key:
                key = orjson.loads(text[match.start() : match.end()])
                expect_key = False
            continue
        if first in (0x7B, 0x5B):  # '{' '['
            depth += 1
            if depth == 1:
                expect_key = True
        elif first in (0x7D, 0x5D):  # '}' ']'
            if depth == 1 and key is not None:
                members[key] = text[start : match.start()].strip(_WHITESPACE)
                key = None
            depth -= 1
        elif depth == 1 and first == 0x3A:  # ':'
            start = match.end()
        elif depth == 1 and first == 0x2C and key is not None:  # ','
            members[key] = text[start : match.start()].strip(_WHITESPACE)
            key = None
            expect_key = True
    return members
