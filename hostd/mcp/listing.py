"""Aggregate bounds of a plugin's listings: how many items, and how many bytes of them, hostd takes (sans-IO).

The class (issue 29, found item 1): each tool, resource, resource template and prompt a plugin lists is
bounded on its own (``hostd.wire.jsonlimits``: depth, 128 KiB a tool), and each page by the plugin's frame
bound, but their *sum* was not: a plugin listing 1,600 legal tools made hostd hold ~590 MiB and answer the
parent's ``tools/list`` with 183 MiB, which no client could read. :class:`ListingCount` counts a walk page by
page, and the walk stops at the first page that takes it over a :class:`ListingBounds` bound with
``LISTING_TOO_LARGE`` saying what the plugin sent so far and what the bound is; hostd never holds more than
the bound plus one page. The defaults are documented in docs/protocol.md (``LISTING_TOO_LARGE``); the parent
sets other bounds per plugin (``plugins/grant`` ``limits.maxTools`` / ``limits.maxListingMb``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.jsonlimits import MAX_TOOL_BYTES

__all__ = ["DEFAULT_MAX_ITEMS", "DEFAULT_MAX_ITEM_BYTES", "DEFAULT_MAX_LISTING_BYTES", "ListingBounds", "ListingCount"]

#: Default bound of the items of one listing (tools, or prompts...) of one plugin.
DEFAULT_MAX_ITEMS: Final = 1024
#: Default bound of the bytes of one listing of one plugin: the items as compact UTF-8 JSON, summed.
DEFAULT_MAX_LISTING_BYTES: Final = 16 * 1024 * 1024
#: Bound of one item hostd pages for the parent (a resource, a resource template, a prompt), as compact JSON:
#: a tool's (``hostd.wire.jsonlimits.MAX_TOOL_BYTES``), so one item always fits one of hostd's pages
#: (hostd/host/pages.py) and a page the parent's line bound, whatever the plugin's frame bound.
DEFAULT_MAX_ITEM_BYTES: Final = MAX_TOOL_BYTES


@dataclass(frozen=True, slots=True)
class ListingBounds:
    """The aggregate bounds of one plugin's listings: at most ``max_items`` items and ``max_bytes`` bytes
    (each item's compact UTF-8 JSON, summed) per listing (``tools``, ``prompts``, ``resources``,
    ``resourceTemplates``), across all of its pages."""

    max_items: int = DEFAULT_MAX_ITEMS
    max_bytes: int = DEFAULT_MAX_LISTING_BYTES

    @classmethod
    def of_limits(cls, limits: Mapping[str, Any]) -> ListingBounds:
        """The bounds a plugin's granted ``limits`` (its record's ``max_tools``, ``max_listing_bytes``, set by
        ``plugins/grant``) give; the defaults for those not set."""
        items, size = limits.get("max_tools"), limits.get("max_listing_bytes")
        return cls(
            max_items=int(items) if items is not None else DEFAULT_MAX_ITEMS,
            max_bytes=int(size) if size is not None else DEFAULT_MAX_LISTING_BYTES,
        )


def _size(item: Any) -> int:
    """Bytes of ``item`` as compact UTF-8 JSON; 0 for one orjson cannot write (over its depth of 255, which
    :func:`hostd.mcp.convert.convert_tools` refuses by name, field and pointer)."""
    try:
        return len(orjson.dumps(item))
    except TypeError:
        return 0


class ListingCount:
    """The running count of one listing walk (``listing``: ``"tools"``, ``"prompts"``, ``"resources"``,
    ``"resourceTemplates"``: the MCP result's member) of ``plugin_id``.

    ``max_item_bytes``: the bound of each item as compact JSON (:data:`DEFAULT_MAX_ITEM_BYTES` for the listings
    hostd pages as they came: resources, resource templates, prompts), or ``None`` where another check bounds
    each item (tools: :func:`hostd.mcp.convert.convert_tools`, which names the field).
    """

    def __init__(
        self, plugin_id: str, listing: str, bounds: ListingBounds, *, max_item_bytes: int | None = None
    ) -> None:
        self.plugin_id = plugin_id
        self.listing = listing
        self.bounds = bounds
        self.max_item_bytes = max_item_bytes
        self.count = 0
        self.bytes = 0

    def add(self, items: Sequence[Any], **data: Any) -> None:
        """Count one page's ``items``; raise ``LISTING_TOO_LARGE`` when the walk is now over a bound.

        ``data``: more members for the error's ``data`` (a link's ``stderrTail``). The error's ``data`` is
        ``{plugin, listing, count, bytes, maxCount, maxBytes, reason}``: what the plugin sent up to and
        including this page, and the bounds; for an item over ``max_item_bytes`` also ``{index, itemBytes,
        maxItemBytes}`` (``index``: its position in the whole listing, from 0).
        """
        sizes = [_size(item) for item in items]
        first = self.count
        self.count += len(items)
        self.bytes += sum(sizes)
        bounds = self.bounds
        limit = self.max_item_bytes
        big = next((i for i, size in enumerate(sizes) if size > limit), None) if limit is not None else None
        if big is None and self.count <= bounds.max_items and self.bytes <= bounds.max_bytes:
            return
        if big is not None:
            index = first + big
            data = {**data, "index": index, "itemBytes": sizes[big], "maxItemBytes": limit}
            over = f"an item of {sizes[big]} bytes among its {self.listing} (#{index}); at most {limit} are accepted"
            reason = f"the server listed {over}"
        elif self.count > bounds.max_items:
            over = f"{self.count} {self.listing}; at most {bounds.max_items} are accepted"
            reason = f"the server listed {over} (plugins/grant limits raise the bound)"
        else:
            over = f"{self.bytes} bytes of {self.listing}; at most {bounds.max_bytes} are accepted"
            reason = f"the server listed {over} (plugins/grant limits raise the bound)"
        raise HostError(
            ErrorKind.LISTING_TOO_LARGE,
            f"plugin {self.plugin_id}: {reason}",
            plugin=self.plugin_id,
            listing=self.listing,
            count=self.count,
            bytes=self.bytes,
            maxCount=bounds.max_items,
            maxBytes=bounds.max_bytes,
            reason=reason,
            **data,
        )
