"""Aggregate bounds and hostd's pages for every parent-facing listing besides ``tools/list`` (issue 29).

The class: a listing hostd forwards or assembles for the parent grows with what a plugin lists. Before,
``resources/list`` and ``resources/templates/list`` forwarded the server's page as it came: any number of
items, held only to the 4 MiB result bound (a page over it lost the whole listing, a server whose pages are
small listed without end), and ``prompts/list`` with ``plugin`` did the same. Members tried here, each with a
real hostd and the echo fixture (``many-resources``, ``many-prompts``): too many resources (the count bound),
too many resource templates, one item larger than hostd's item bound, a lower bound the parent set
(``plugins/grant`` ``limits.maxListingMb``), and legal listings larger than a page (paged by hostd, every
item reachable, each page far under the parent's line bound, the Python client following ``nextCursor``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin, ready

MIB = 1024 * 1024
#: The documented defaults (docs/protocol.md, LISTING_TOO_LARGE): 1024 items, 16 MiB, 128 KiB an item.
MAX_ITEMS = 1024
MAX_LISTING_BYTES = 16 * MIB
MAX_ITEM_BYTES = 128 * 1024


def args(count: int, description_bytes: int, pages: int) -> list[str]:
    return ["--count", str(count), "--description-bytes", str(description_bytes), "--pages", str(pages)]


async def raw(hostd: HostdClient, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """One answer of ``method`` as sent, without the client's paging, and the bytes of its result."""
    response = await hostd.start(method, params)
    result: dict[str, Any] = await response()
    return result, len(orjson.dumps(result))


async def pages(hostd: HostdClient, method: str, params: dict[str, Any], member: str) -> list[list[str]]:
    """Every page of ``method`` as sent, walked by hand: the ``name`` of each page's items; each page's
    result is asserted under 2 MiB (hostd's pages hold at most 1 MiB of items)."""
    walked: list[list[str]] = []
    cursor = None
    while True:
        page, size = await raw(hostd, method, {**params, "cursor": cursor})
        assert size < 2 * MIB, size
        walked.append([item["name"] for item in page[member]])
        cursor = page.get("nextCursor")
        if cursor is None:
            return walked


async def refusal(hostd: HostdClient, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as refused:
        await hostd.request(method, params)
    return refused.value


def walks(record: Path, method: str) -> list[Any]:
    """The ``cursor`` of each ``method`` request the server received (``--record``), in order."""
    received = [orjson.loads(line)["msg"] for line in record.read_bytes().splitlines()]
    return [(m.get("params") or {}).get("cursor") for m in received if m.get("method") == method]


async def test_resources_and_templates_are_paged_by_hostd_and_each_walk_bounded(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    with trio.fail_after(60):
        # 25 resources and 25 templates of 100 KiB (~2.6 MB each listing), 2 server pages (13 and 12 items).
        record = tmp_path / "shared" / "res-a.jsonl"
        big = make_plugin("res-a", variant="many-resources", args=[*args(25, 100 * 1024, 2), "--record", str(record)])
        assert (await ready(hostd, big))["status"] == "ready"
        listed = await hostd.request("resources/list", {"plugin": "res-a"})  # the client follows nextCursor
        assert [r["uri"] for r in listed["resources"]] == [f"mem://r{i:04d}" for i in range(25)]
        assert "nextCursor" not in listed
        templates = await hostd.request("resources/templates/list", {"plugin": "res-a"})
        uris = [t["uriTemplate"] for t in templates["resourceTemplates"]]
        assert uris == [f"mem://t{i:04d}/{{x}}" for i in range(25)]
        # By hand: hostd's pages of at most ten items (1 MiB), not the server's pages of 13 and 12.
        expected = [[f"r{i:04d}" for i in range(start, min(25, start + 10))] for start in range(0, 25, 10)]
        before = len(walks(record, "resources/list"))
        assert await pages(hostd, "resources/list", {"plugin": "res-a"}, "resources") == expected
        # The server was walked once for hostd's three pages (its two pages), not once a page.
        assert walks(record, "resources/list")[before:] == [None, "page-1"]
        walked = await pages(hostd, "resources/templates/list", {"plugin": "res-a"}, "resourceTemplates")
        assert walked == [[name.replace("r", "t") for name in page] for page in expected]
        bad = await refusal(hostd, "resources/list", {"plugin": "res-a", "cursor": "page-1"})  # the server's
        assert (bad.kind, bad.data["field"]) == ("INVALID_PARAMS", "cursor")

        # Too many: 1100 of each in two server pages; refused at the page that crossed the bound.
        many = make_plugin("res-b", variant="many-resources", args=args(1100, 8, 2))
        assert (await ready(hostd, many))["status"] == "ready"
        over = await refusal(hostd, "resources/list", {"plugin": "res-b"})
        assert over.kind == "LISTING_TOO_LARGE"
        assert over.code == -32050
        shown = {k: over.data[k] for k in ("plugin", "listing", "count", "maxCount", "maxBytes")}
        assert shown == {
            "plugin": "res-b",
            "listing": "resources",
            "count": 1100,
            "maxCount": MAX_ITEMS,
            "maxBytes": MAX_LISTING_BYTES,
        }
        assert over.message == (
            "plugin res-b: the server listed 1100 resources; at most 1024 are accepted "
            "(plugins/grant limits raise the bound)"
        )
        over = await refusal(hostd, "resources/templates/list", {"plugin": "res-b"})
        assert (over.kind, over.data["listing"], over.data["count"]) == ("LISTING_TOO_LARGE", "resourceTemplates", 1100)

        # One item over hostd's item bound (128 KiB, a tool's): the page cannot be cut under it.
        huge = make_plugin("res-c", variant="many-resources", args=args(3, 200_000, 1))
        assert (await ready(hostd, huge))["status"] == "ready"
        over = await refusal(hostd, "resources/list", {"plugin": "res-c"})
        assert over.kind == "LISTING_TOO_LARGE"
        assert (over.data["listing"], over.data["index"], over.data["maxItemBytes"]) == ("resources", 0, MAX_ITEM_BYTES)
        first = {"uri": "mem://r0000", "name": "r0000", "description": "x" * 200_000}  # its size: ASCII, no escapes
        assert over.data["itemBytes"] == len(orjson.dumps(first))
        # The refusals lose nothing: every plugin still serves, res-a's listing whole.
        assert len((await hostd.request("resources/list", {"plugin": "res-a"}))["resources"]) == 25
        for plugin in ("res-a", "res-b", "res-c"):
            assert (await hostd.request("plugins/status", {"id": plugin}))["status"] == "ready"

        # The parent sets a plugin's bound (plugins/grant limits.maxListingMb): res-a's first server page
        # (13 items of ~102 KB) is over 1 MiB.
        [info] = [i for i in (await hostd.request("plugins/list"))["plugins"] if i["id"] == "res-a"]
        limits = {"maxListingMb": 1}
        await hostd.request("plugins/grant", {"id": "res-a", "permissions": info["permissions"], "limits": limits})
        over = await refusal(hostd, "resources/list", {"plugin": "res-a"})
        assert (over.kind, over.data["listing"], over.data["maxBytes"]) == ("LISTING_TOO_LARGE", "resources", MIB)
        assert (over.data["count"], over.data["maxCount"]) == (13, MAX_ITEMS)
        assert over.message.startswith(f"plugin res-a: the server listed {over.data['bytes']} bytes of resources;")


async def test_one_plugins_prompts_are_paged_by_hostd_and_its_walk_bounded(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(60):
        folder = make_plugin("prompts-a", variant="many-prompts", args=args(25, 100 * 1024, 2))
        assert (await ready(hostd, folder))["status"] == "ready"
        listed = await hostd.request("prompts/list", {"plugin": "prompts-a"})
        assert [p["name"] for p in listed["prompts"]] == [f"prompts-a.p{i:04d}" for i in range(25)]
        walked = await pages(hostd, "prompts/list", {"plugin": "prompts-a"}, "prompts")
        assert walked == [[f"prompts-a.p{i:04d}" for i in range(s, min(25, s + 10))] for s in range(0, 25, 10)]
        folder = make_plugin("prompts-b", variant="many-prompts", args=args(1100, 8, 2))
        assert (await ready(hostd, folder))["status"] == "ready"
        over = await refusal(hostd, "prompts/list", {"plugin": "prompts-b"})
        assert (over.kind, over.data["plugin"], over.data["listing"]) == ("LISTING_TOO_LARGE", "prompts-b", "prompts")
        assert (over.data["count"], over.data["maxCount"]) == (1100, MAX_ITEMS)
