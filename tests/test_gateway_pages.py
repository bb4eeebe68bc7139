"""``hostd mcp``: the resources and templates of every plugin, in hostd's pages (issue 27).

The class: *a listing the gateway assembles over every plugin answered in one piece*, so its size grows with the
plugins' and can pass a client's line bound. Members: ``resources/list`` and ``resources/templates/list``. Two
real plugins (the echo fixture's ``many-resources``, 12 items of 100 KiB each: about 2.5 MB a listing) behind
the gateway, driven by the SDK's ``ClientSession``: the listing comes in pages of at most 1 MiB of items (ten of
these), following ``nextCursor`` reaches every entry exactly once in plugin order, and a cursor hostd did not
make is refused (``INVALID_PARAMS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tests.conftest import MakePlugin, ready, spawn_hostd
from tests.test_gateway import gateway
from tests.test_listing_features import args


async def test_resources_and_templates_of_every_plugin_come_in_pages(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path) as hostd:
        for plugin_id in ("res-a", "res-b"):
            folder = make_plugin(plugin_id, variant="many-resources", args=args(12, 100 * 1024, 2))
            assert (await ready(hostd, folder))["status"] == "ready"
    async with gateway(tmp_path) as client:
        await client.initialize()
        walked: list[list[tuple[Any, str]]] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await client.list_resources(params=params)
            walked.append([((r.meta or {}).get("hostd/plugin"), str(r.uri)) for r in page.resources])
            cursor = page.next_cursor
            if cursor is None:
                break
        every = [(plugin, f"mem://r{i:04d}") for plugin in ("res-a", "res-b") for i in range(12)]
        assert walked == [every[:10], every[10:20], every[20:]]
        templates: list[str] = []
        cursor = None
        pages = 0
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            listed = await client.list_resource_templates(params=params)
            templates.extend(t.uri_template for t in listed.resource_templates)
            pages += 1
            cursor = listed.next_cursor
            if cursor is None:
                break
        assert (pages, templates) == (3, [f"mem://t{i:04d}/{{x}}" for _ in range(2) for i in range(12)])
        with pytest.raises(Exception) as refused:  # the SDK's MCPError
            await client.list_resources(params=types.PaginatedRequestParams(cursor="page-1"))
        error = getattr(refused.value, "error", None)
        assert error is not None and (error.code, error.data["kind"], error.data["field"]) == (
            -32602,
            "INVALID_PARAMS",
            "cursor",
        )
