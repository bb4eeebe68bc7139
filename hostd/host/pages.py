"""Pages of the parent-facing listings: every answer fits the parent's line bound (issue 29).

The class: a listing hostd assembles for the parent (``tools/list`` over every plugin) grew with the
plugins' listings, and one plugin's 80 legal tools of 100 KiB made the answer larger than the 8 MiB line
bound of hostd's own Python client and of the TypeScript client, so no tool of any plugin could be listed.
Now such a listing is cut into pages as MCP does ("Pagination": ``cursor`` in the params, ``nextCursor`` in
the result): a page holds items while their compact JSON stays within :data:`PAGE_BYTES` (at least one item;
an item is at most 128 KiB, ``hostd.wire.jsonlimits.MAX_TOOL_BYTES``, plus hostd's fields), so a page is
always far under the line bound. A caller that sends no cursor gets the first page, as before.

The cursor names the last item of the page (its sort key, base64url of UTF-8 after ``"k1."``): the next page
starts after it, so a page never repeats an item and a change between pages (the ``revision`` changes then)
loses no item that stayed listed.
"""

from __future__ import annotations

import base64
import binascii
import bisect
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import orjson

from hostd.wire.errors import ErrorKind, HostError

__all__ = ["PAGE_BYTES", "cursor_key", "page_of"]

#: Bytes of the items of one page, as compact JSON (1 MiB: an eighth of the 8 MiB line bound).
PAGE_BYTES: Final = 1024 * 1024
_PREFIX: Final = "k1."

_Item = TypeVar("_Item")


def _cursor_after(key: str) -> str:
    return _PREFIX + base64.urlsafe_b64encode(key.encode()).decode("ascii")


def cursor_key(cursor: str) -> str:
    """The sort key a cursor names; ``INVALID_PARAMS`` (``data.field: "cursor"``) for one hostd did not make."""
    if cursor.startswith(_PREFIX):
        try:
            return base64.urlsafe_b64decode(cursor[len(_PREFIX) :].encode("ascii")).decode()
        except (binascii.Error, UnicodeError, ValueError):
            pass
    raise HostError(
        ErrorKind.INVALID_PARAMS,
        "cursor: not a cursor of this listing (pass back the nextCursor of the previous page)",
        field="cursor",
    )


def page_of(
    items: Sequence[_Item],
    key: Callable[[_Item], str],
    wire: Callable[[_Item], dict[str, Any]],
    cursor: str | None,
    *,
    page_bytes: int = PAGE_BYTES,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``items`` (sorted by ``key``, keys unique) as wire objects, and the cursor of the next page.

    ``cursor``: ``None`` for the first page, else a ``nextCursor`` this function returned. The page holds the
    items after the cursor's key while their compact JSON totals at most ``page_bytes`` (and at least one
    item); the cursor is ``None`` after the last item. Raises ``INVALID_PARAMS`` for a cursor it did not make.
    """
    keys = [key(item) for item in items]
    start = 0 if cursor is None else bisect.bisect_right(keys, cursor_key(cursor))
    page: list[dict[str, Any]] = []
    used = 0
    index = start
    while index < len(items):
        value = wire(items[index])
        size = len(orjson.dumps(value))
        if page and used + size > page_bytes:
            break
        page.append(value)
        used += size
        index += 1
    return page, (_cursor_after(keys[index - 1]) if index < len(items) else None)
