"""Aggregate bounds of a plugin's listings and the pages of the parent-facing ``tools/list`` (issue 29).

The class: every input is bounded per item, but a *sum* of items was not: one plugin listing many legal
tools made hostd hold (and the parent's ``tools/list`` carry) any amount. Members tried here, each with a
real hostd and a real fixture server (``fixtures/mcp-echo`` variant ``many-tools``, ``--count`` tools of
``--description-bytes`` characters): too many tools (the count bound), too many bytes of tools (the bytes
bound, with hostd's peak RSS measured), a parent-set bound (``plugins/grant`` ``limits.maxTools``) and a
legal listing larger than the parent's line bound (paged, every tool reachable).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from hostd.wire.framing import PARENT_FRAME_LIMIT
from tests.conftest import MakePlugin, ready
from tests.test_corpus_framing import HOSTILE, assert_healthy, enable_healthy

MIB = 1024 * 1024
#: The documented defaults (docs/protocol.md, LISTING_TOO_LARGE): 1024 tools, 16 MiB of tools.
MAX_TOOLS = 1024
MAX_LISTING_BYTES = 16 * MIB


def peak_rss(hostd: HostdClient) -> int:
    """hostd's peak resident memory so far (``VmHWM`` of /proc/PID/status), in bytes."""
    status = Path(f"/proc/{hostd.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def many(make_plugin: MakePlugin, count: int, description_bytes: int, pages: int) -> Path:
    names = [f"t{i:04d}" for i in range(count)]
    args = ["--count", str(count), "--description-bytes", str(description_bytes), "--pages", str(pages)]
    return make_plugin(variant="many-tools", tools=names, args=args, backend={"startup_timeout_seconds": 60})


async def refused(hostd: HostdClient, folder: Path) -> RpcError:
    with pytest.raises(RpcError) as failed:
        await ready(hostd, folder)
    return failed.value


async def test_too_many_tools_are_refused_at_discovery_naming_what_was_sent_and_the_bound(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(60):
        await enable_healthy(hostd, make_plugin)
        error = await refused(hostd, many(make_plugin, 1600, 64, 4))  # pages of 400 tools
        assert error.kind == "LISTING_TOO_LARGE"
        # Refused at the page that crossed the bound: 3 pages, 1200 tools.
        assert error.data["plugin"] == HOSTILE
        assert error.data["listing"] == "tools"
        assert error.data["count"] == 1200
        assert error.data["maxCount"] == MAX_TOOLS
        assert error.data["maxBytes"] == MAX_LISTING_BYTES
        assert "1200 tools" in error.message and "1024" in error.message
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "error"
        assert status["tools_count"] == 0
        await assert_healthy(hostd)


async def test_too_many_bytes_of_tools_are_refused_and_hostd_memory_stays_bounded(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    # 1,600 legal tools of ~110 KB each (~176 MB in all, in 16 pages of ~11 MB): hostd grew to ~590 MiB.
    with trio.fail_after(120):
        await enable_healthy(hostd, make_plugin)
        error = await refused(hostd, many(make_plugin, 1600, 110_000, 16))
        assert error.kind == "LISTING_TOO_LARGE"
        assert error.data["listing"] == "tools"
        assert error.data["count"] == 200  # the second page crossed 16 MiB
        assert MAX_LISTING_BYTES < error.data["bytes"] < 2 * 11_200_000
        assert error.data["maxBytes"] == MAX_LISTING_BYTES
        # What hostd held: at most two pages and their parse, never the listing.
        assert peak_rss(hostd) < 200 * MIB, peak_rss(hostd)  # measured: 100 MiB (before: ~590 MiB)
        await assert_healthy(hostd)


async def test_the_parent_raises_a_plugins_bound_with_plugins_grant(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(60):
        folder = many(make_plugin, 1600, 64, 4)
        info = await hostd.request("plugins/install", {"path": str(folder)})
        limits = {"maxTools": 2000}
        await hostd.request("plugins/grant", {"id": HOSTILE, "permissions": info["permissions"], "limits": limits})
        await hostd.request("plugins/approve", {"id": HOSTILE, "digest": info["launch"]["digest"]})
        status = await hostd.request("plugins/enable", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert status["tools_count"] == 1600
        shown = next(i for i in (await hostd.request("plugins/list"))["plugins"] if i["id"] == HOSTILE)
        assert shown["limits"]["maxTools"] == 2000
        tools = (await hostd.request("tools/list", {"plugin": HOSTILE}))["tools"]
        assert [t["name"] for t in tools] == [f"{HOSTILE}.t{i:04d}" for i in range(1600)]


async def raw_page(hostd: HostdClient, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """One ``tools/list`` answer as sent, without the client's paging, and the bytes of its result."""
    response = await hostd.start("tools/list", params)
    result: dict[str, Any] = await response()
    return result, len(orjson.dumps(result))


async def test_a_listing_over_the_parents_line_bound_is_paged_and_every_tool_listed(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    # 90 tools of 100 KiB: ~9.2 MB of tools, over the 8 MiB (8,388,608-byte) line bound of the Python and TS clients.
    with trio.fail_after(60):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, many(make_plugin, 90, 100 * 1024, 4))
        assert status["status"] == "ready"
        expected = [f"{HOSTILE}.t{i:04d}" for i in range(90)]
        # The client pages through: every tool, in name order, one revision.
        listing = await hostd.request("tools/list", {"plugin": HOSTILE})
        assert [t["name"] for t in listing["tools"]] == expected
        assert "nextCursor" not in listing
        everything = await hostd.request("tools/list", {})
        assert [t["name"] for t in everything["tools"] if t["plugin"] == HOSTILE] == expected
        # Page by page as sent: each well under the line bound, the cursor passed back, nothing twice.
        names: list[str] = []
        cursor = None
        pages = 0
        while True:
            page, size = await raw_page(hostd, {"plugin": HOSTILE, "cursor": cursor})
            pages += 1
            assert size < PARENT_FRAME_LIMIT // 4, size
            names += [t["name"] for t in page["tools"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert names == expected
        assert pages == 9  # ten tools of ~103 KB a page: 1 MiB each
        with pytest.raises(RpcError) as bad:
            await hostd.request("tools/list", {"cursor": "not a cursor"})
        assert bad.value.kind == "INVALID_PARAMS"
        assert bad.value.data["field"] == "cursor"
        await assert_healthy(hostd)


async def test_every_plugins_prompts_are_paged_and_each_plugins_walk_bounded(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    """The same class for prompts: ``prompts/list`` without ``plugin`` gathered every page of every plugin into
    one answer. Now each plugin's walk is bounded and the answer is paged by hostd; a plugin refused is named
    in ``failed`` and hides no other plugin's prompts (before, its error was the whole answer)."""
    with trio.fail_after(60):
        args = ["--count", "90", "--description-bytes", str(100 * 1024), "--pages", "3"]
        assert (await ready(hostd, make_plugin("prompts-a", variant="many-prompts", args=args)))["status"] == "ready"
        listing = await hostd.request("prompts/list", {})  # the client follows nextCursor
        assert [x["name"] for x in listing["prompts"]] == [f"prompts-a.p{i:04d}" for i in range(90)]
        first, size = await raw_page_of(hostd, "prompts/list", {"cursor": None})
        assert len(first["prompts"]) == 10 and size < 2 * MIB
        too_many = ["--count", "1100", "--description-bytes", "8", "--pages", "2"]
        assert (await ready(hostd, make_plugin("prompts-b", variant="many-prompts", args=too_many)))[
            "status"
        ] == "ready"
        listing = await hostd.request("prompts/list", {})
        assert [x["name"] for x in listing["prompts"]] == [f"prompts-a.p{i:04d}" for i in range(90)]
        assert listing["failed"] == [
            {
                "plugin": "prompts-b",
                "kind": "LISTING_TOO_LARGE",
                "message": "plugin prompts-b: the server listed 1100 prompts; at most 1024 are accepted "
                "(plugins/grant limits raise the bound)",
            }
        ]
        with pytest.raises(RpcError) as refused:  # asked by name, the plugin's refusal is the answer
            await hostd.request("prompts/list", {"plugin": "prompts-b"})
        assert refused.value.kind == "LISTING_TOO_LARGE"
        assert (refused.value.data["plugin"], refused.value.data["listing"]) == ("prompts-b", "prompts")
        assert (refused.value.data["count"], refused.value.data["maxCount"]) == (1100, MAX_TOOLS)


async def test_a_prompt_name_outside_the_allowlist_is_refused_by_name(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(30):
        assert (await ready(hostd, make_plugin(variant="invisible-prompt")))["status"] == "ready"
        everyone = await hostd.request("prompts/list", {})
        assert everyone["prompts"] == []
        message = (
            f"plugin {HOSTILE}: prompt #1: the prompt name 'ask\\u2060' contains U+2060 at 3; "
            "only A-Z, a-z, 0-9, '_', '-' and '.' are allowed"
        )
        assert everyone["failed"] == [{"plugin": HOSTILE, "kind": "NAME_INVALID", "message": message}]
        with pytest.raises(RpcError) as refused:
            await hostd.request("prompts/list", {"plugin": HOSTILE})
        error = refused.value
        assert (error.kind, error.code) == ("NAME_INVALID", -32059)
        named = {k: error.data[k] for k in ("plugin", "what", "index", "name", "character", "position", "rule")}
        assert named == {
            "plugin": HOSTILE,
            "what": "prompt",
            "index": 1,
            "name": "ask\\u2060",
            "character": "U+2060",
            "position": 3,
            "rule": "1 to 128 characters, each one of A-Z, a-z, 0-9, '_', '-' and '.'",
        }
        assert error.message == (
            f"plugin {HOSTILE}: prompt #1: the prompt name 'ask\\u2060' contains U+2060 at 3; "
            "only A-Z, a-z, 0-9, '_', '-' and '.' are allowed"
        )


async def raw_page_of(hostd: HostdClient, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """One answer of ``method`` as sent, without the client's paging, and the bytes of its result."""
    response = await hostd.start(method, params)
    result: dict[str, Any] = await response()
    return result, len(orjson.dumps(result))
