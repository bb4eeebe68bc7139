"""Tool search: what ``hostd mcp`` costs a model's context with and without ``--tool-search`` (issue 27), in one
process, no I/O.

The tools are fixtures/mcp-catalog's (200 per service: ``<service>_<verb>_<noun>``, a one-sentence description,
two to five string properties; loaded from the fixture by path), under hostd's names (``catalog.<tool>``) and as
the gateway lists them (:func:`hostd.gateway.tools.mcp_tool`). Reported per catalog size: the bytes of the
``tools/list`` result as the gateway writes it, all tools vs ``search_tools`` + ``call_tool``; the tokens of each,
estimated without a tokenizer as bytes / 4 (about right for JSON and English with the common BPE vocabularies;
an estimate, not a count); the bytes of one ``search_tools`` answer (5 tools); the time to build the index and
the median time of one search. Real servers' descriptions are longer than the catalog's (a paragraph, not a
sentence): their full listing costs more, the tool-search listing the same.
"""

from __future__ import annotations

import importlib.util
import math
import statistics
import time
from pathlib import Path
from typing import Any

from hostd.gateway import search
from hostd.gateway.tools import mcp_tool
from hostd.wire.framing import encode

CATALOG = Path(__file__).resolve().parent.parent / "fixtures" / "mcp-catalog" / "server.py"
#: Services of the catalog per row (200 tools each).
SIZES = (1, 2, 5)
QUERIES = (
    "export the shop dashboard",
    "create an invoice in the crm",
    "tracking_number",
    "send an email with a subject to a recipient",
    "share a playlist",
)


def _catalog(services: int) -> list[dict[str, Any]]:
    spec = importlib.util.spec_from_file_location("mcp_catalog", CATALOG)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tools: list[dict[str, Any]] = module.catalog(services)
    return [mcp_tool({**tool, "name": f"catalog.{tool['name']}"}) for tool in tools]


def _tokens(size: int) -> int:
    return math.ceil(size / 4)


def _row(services: int, passes: int) -> dict[str, Any]:
    tools = _catalog(services)
    full = len(encode({"tools": tools}))
    listed = len(encode({"tools": [search.SEARCH_TOOL, search.CALL_TOOL]}))
    started = time.perf_counter()
    index = search.ToolIndex(tools)
    build = time.perf_counter() - started
    timings = []
    answer = 0
    for _ in range(passes):
        for query in QUERIES:
            started = time.perf_counter()
            found = index.search(query, search.DEFAULT_LIMIT)
            timings.append(time.perf_counter() - started)
            keys = ("name", "description", "inputSchema")
            answer = max(answer, len(encode({"tools": [{k: m.tool[k] for k in keys} for m in found]})))
    return {
        "tools": len(tools),
        "full_listing_bytes": full,
        "full_listing_tokens": _tokens(full),
        "search_listing_bytes": listed,
        "search_listing_tokens": _tokens(listed),
        "search_answer_bytes": answer,
        "search_answer_tokens": _tokens(answer),
        "index_build_ms": build * 1000,
        "search_ms": statistics.median(timings) * 1000,
    }


def run(quick: bool) -> dict[str, Any]:
    """One row per catalog size (:data:`SIZES` services of 200 tools); ``quick``: 3 passes of the queries, else 20."""
    return {"token_estimate": "bytes / 4", "rows": [_row(services, 3 if quick else 20) for services in SIZES]}


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows for the result of :func:`run`."""
    rows = [
        "| tools | tools/list, all tools | tools/list, --tool-search | one search answer (5 tools) | index build "
        "| one search |",
        "|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        rows.append(
            f"| {row['tools']:,} | {row['full_listing_bytes']:,} B (~{row['full_listing_tokens']:,} tokens) "
            f"| {row['search_listing_bytes']:,} B (~{row['search_listing_tokens']:,} tokens) "
            f"| {row['search_answer_bytes']:,} B (~{row['search_answer_tokens']:,} tokens) "
            f"| {row['index_build_ms']:,.1f} ms | {row['search_ms']:,.2f} ms |"
        )
    return rows
