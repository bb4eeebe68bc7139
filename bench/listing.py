"""Listing: the parent's ``tools/list`` of 500 plugins' tools, page by page (issue 29), in one process, no I/O.

500 plugins of 20 tools each (10,000 tools of a ~2 KiB description and a small schema, ~24 MB as JSON) in
hostd's :class:`~hostd.plugins.registry.ToolRegistry`; the real handler (:func:`hostd.host.tool_methods.tools_list`)
walks every page as a client that follows ``nextCursor`` does. Reported: the pages, the largest page in bytes
(each must stay far under the 8 MiB line bound), the time of a whole walk and of the first page (the median of
several passes). Every page rebuilds the sorted list and looks its cursor up (a bisection), so a walk of
N pages costs N sorts of the registry: the number to watch as plugins grow.

Then, end to end (:func:`walk_resources`): a real hostd and one echo plugin (variant ``many-resources``)
listing 1,000 resources of a 15,000-character description (~15 MB, in 8 pages of the server's); the parent's
``resources/list`` walked page by page through hostd's Python client. hostd walks the server once for the
parent's walk (it keeps the items from the first page to the last): the whole walk and the first page are
reported, with the server's ``resources/list`` requests counted (``--record``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import orjson
import trio
import yaml

from bench.common import echo_copy, open_hostd, ready
from hostd.control.core import InitializeOptions
from hostd.host import tool_methods
from hostd.mcp.convert import convert_tools
from hostd.plugins.registry import ToolRegistry

PLUGINS = 500
TOOLS_PER_PLUGIN = 20


class _Host:
    """The little of :class:`hostd.host.tool_methods.ToolHost` that ``tools/list`` reads."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry
        self.plugins: dict[str, Any] = {}
        self.options = InitializeOptions("bench", "0", "2025-11-25", None, None)

    def _plugin(self, plugin_id: str) -> Any:
        raise AssertionError("the bench lists every plugin")


def _registry(plugins: int) -> ToolRegistry:
    registry = ToolRegistry()
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    filler = ("lorem ipsum dolor sit amet " * 80)[:2048]
    for p in range(plugins):
        plugin_id = f"plugin-{p:03d}"
        raw = [{"name": f"t{i:02d}", "description": filler, "inputSchema": schema} for i in range(TOOLS_PER_PLUGIN)]
        contributes = [f"{plugin_id}.t{i:02d}" for i in range(TOOLS_PER_PLUGIN)]
        registry.register(plugin_id, convert_tools(plugin_id, raw, permissions=[], contributes=contributes))
    return registry


async def _walk(host: _Host) -> tuple[int, int, int, float]:
    """One walk: (pages, tools, largest page in bytes, seconds of the first page)."""
    cursor: str | None = None
    pages = tools = largest = 0
    first = 0.0
    while True:
        started = time.perf_counter()
        page = await tool_methods.tools_list(host, {"cursor": cursor}, None)  # type: ignore[arg-type]
        if pages == 0:
            first = time.perf_counter() - started
        pages += 1
        tools += len(page["tools"])
        largest = max(largest, len(orjson.dumps(page)))
        cursor = page.get("nextCursor")
        if cursor is None:
            return pages, tools, largest, first


RESOURCES = 1000
RESOURCE_DESCRIPTION = 15_000
SERVER_PAGES = 8


async def walk_resources(scratch: Path, passes: int) -> dict[str, Any]:
    """``passes`` walks of one plugin's ``resources/list`` through a real hostd (module docstring): the pages,
    the median whole walk and first page in ms, and the server's ``resources/list`` requests per walk."""
    folder = echo_copy(scratch, "resources-bench")
    shared = scratch / "shared"  # granted to the plugin for its record (never the state or a plugin folder)
    shared.mkdir()
    record = shared / "record.jsonl"
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text(encoding="utf-8"))
    counts = ["--count", str(RESOURCES), "--description-bytes", str(RESOURCE_DESCRIPTION)]
    pages_args = ["--pages", str(SERVER_PAGES), "--record", str(record)]
    manifest["backend"]["args"] = ["server.py", "--variant", "many-resources", *counts, *pages_args]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    walks: list[float] = []
    firsts: list[float] = []
    pages = 0
    async with open_hostd(scratch / "state", "--allow-write", str(shared)) as hostd:
        await ready(hostd, folder)
        for _ in range(passes):
            cursor: str | None = None
            pages = 0
            started = time.perf_counter()
            while True:
                response = await hostd.start("resources/list", {"plugin": "resources-bench", "cursor": cursor})
                page = await response()
                if pages == 0:
                    firsts.append(time.perf_counter() - started)
                pages += 1
                cursor = page.get("nextCursor")
                if cursor is None:
                    break
            walks.append(time.perf_counter() - started)
    received = [orjson.loads(line)["msg"] for line in record.read_bytes().splitlines()]
    requests = sum(1 for message in received if message.get("method") == "resources/list")
    return {
        "resources": RESOURCES,
        "pages": pages,
        "walk_ms": statistics.median(walks) * 1000,
        "first_page_ms": statistics.median(firsts) * 1000,
        "server_requests_per_walk": requests / passes,
    }


def run(quick: bool, scratch: Path | None = None) -> dict[str, Any]:
    """Build the registry, walk it ``3`` (quick) or ``10`` times; the medians and the page facts; with
    ``scratch`` (a folder of the bench's), also :func:`walk_resources` (``resources``: 3 or 5 passes)."""
    host = _Host(_registry(PLUGINS))
    walks: list[float] = []
    firsts: list[float] = []
    facts: tuple[int, int, int, float] = (0, 0, 0, 0.0)
    for _ in range(3 if quick else 10):
        started = time.perf_counter()
        facts = trio.run(_walk, host)
        walks.append(time.perf_counter() - started)
        firsts.append(facts[3])
    pages, tools, largest, _ = facts
    result: dict[str, Any] = {
        "plugins": PLUGINS,
        "tools": tools,
        "pages": pages,
        "largest_page_bytes": largest,
        "walk_ms": statistics.median(walks) * 1000,
        "first_page_ms": statistics.median(firsts) * 1000,
    }
    if scratch is not None:
        result["resources"] = trio.run(walk_resources, scratch, 3 if quick else 5)
    return result


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows for the result of :func:`run`."""
    rows = [
        "| plugins | tools | pages | largest page | whole walk | first page |",
        "|---|---|---|---|---|---|",
        f"| {result['plugins']} | {result['tools']:,} | {result['pages']} | {result['largest_page_bytes']:,} B "
        f"| {result['walk_ms']:,.0f} ms | {result['first_page_ms']:,.1f} ms |",
    ]
    resources = result.get("resources")
    if resources is not None:
        rows += [
            "",
            "| resources (one plugin, real hostd) | pages | whole walk | first page | server requests a walk |",
            "|---|---|---|---|---|",
            f"| {resources['resources']:,} | {resources['pages']} | {resources['walk_ms']:,.0f} ms "
            f"| {resources['first_page_ms']:,.0f} ms | {resources['server_requests_per_walk']:g} |",
        ]
    return rows
