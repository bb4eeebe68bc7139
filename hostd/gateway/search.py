"""Tool search (``hostd mcp --tool-search``): a client is listed two tools, not hundreds, and finds the others by
asking. Sans-IO, no model.

A client with 500 tools behind it spends tens of thousands of tokens of its model's context on the listing alone
(bench/tool_search.py measures it). Under ``--tool-search`` the gateway lists a fixed set instead:

- :data:`SEARCH_TOOL` ``search_tools {query, limit?}``: the tools that best match ``query``, ranked by BM25
  (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009; ``k1`` 1.2, ``b``
  0.75) over each tool's name, description and input schema property names, each with its full definition
  (name, description, ``inputSchema``) so the model can call it next;
- :data:`CALL_TOOL` ``call_tool {name, arguments}``: calls a tool by its name, as ``tools/call`` would (a client
  that learned a name may also call it directly).

The names carry no dot, so no plugin's tool (``<plugin>.<tool>``) can take them. Terms: lower-case runs of
letters and digits, split at ``_``, ``-``, ``.``, ``/`` and camelCase humps, English stop words left out; a name's
terms count :data:`NAME_WEIGHT` times, a property name's :data:`PROPERTY_WEIGHT` times (a field-weighted BM25:
the name says most about what a tool does). The index is built once per registry revision
(:class:`ToolIndex`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: BM25's term-frequency saturation and length normalisation.
K1, B = 1.2, 0.75
#: How many times a term of the tool's name and of a property name count, against once for the description.
NAME_WEIGHT, PROPERTY_WEIGHT = 3, 2
#: ``search_tools``' default and largest ``limit``.
DEFAULT_LIMIT, MAX_LIMIT = 5, 50
#: Characters of a query read at most.
MAX_QUERY_CHARS = 1000
#: Schema levels whose property names are read (nested objects' properties count too).
MAX_SCHEMA_DEPTH = 4

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "with",
    ]
)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

SEARCH_TOOL_NAME = "search_tools"
CALL_TOOL_NAME = "call_tool"

SEARCH_TOOL: dict[str, Any] = {
    "name": SEARCH_TOOL_NAME,
    "description": (
        "Find the tools for a task among every tool hostd serves. Describe the task in words; the best matches "
        "come back with their names, descriptions and input schemas. Then run one with call_tool."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what the tool should do, in words"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
        },
        "required": ["query"],
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
}
CALL_TOOL: dict[str, Any] = {
    "name": CALL_TOOL_NAME,
    "description": "Run a tool that search_tools found: its name and its arguments (as its inputSchema says).",
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the tool's name, as search_tools gave it"},
            "arguments": {"type": "object", "description": "the tool's arguments"},
        },
        "required": ["name"],
    },
}


def terms(text: str) -> list[str]:
    """The search terms of ``text``: lower-case words split at camelCase humps and punctuation, no stop words."""
    return [word.lower() for word in _WORDS.findall(text) if word.lower() not in STOP_WORDS]


def _property_names(schema: Any, depth: int = 0) -> Iterable[str]:
    if not isinstance(schema, Mapping) or depth >= MAX_SCHEMA_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, inner in properties.items():
            if isinstance(name, str):
                yield name
                yield from _property_names(inner, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _property_names(items, depth + 1)


def document(tool: Mapping[str, Any]) -> Counter[str]:
    """The weighted term counts of one MCP ``Tool`` (``name``, ``description``, ``inputSchema``)."""
    counts: Counter[str] = Counter()
    name = tool.get("name")
    description = tool.get("description")
    for term in terms(name if isinstance(name, str) else ""):
        counts[term] += NAME_WEIGHT
    for term in terms(description if isinstance(description, str) else ""):
        counts[term] += 1
    for prop in _property_names(tool.get("inputSchema")):
        for term in terms(prop):
            counts[term] += PROPERTY_WEIGHT
    return counts


@dataclass(frozen=True)
class Match:
    """One search result: the tool (its MCP definition) and its BM25 score."""

    tool: dict[str, Any]
    score: float


class ToolIndex:
    """A BM25 index over ``tools`` (MCP ``Tool`` objects), built at once; :meth:`search` ranks them.

    ``revision``: the registry revision it was built from (the caller rebuilds when it changes).
    """

    def __init__(self, tools: list[dict[str, Any]], revision: int = 0) -> None:
        self.revision = revision
        self.tools = tools
        self._docs = [document(tool) for tool in tools]
        self._lengths = [sum(doc.values()) for doc in self._docs]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        count = len(tools)
        #: BM25's idf, kept positive (the "+1" form): a term in every tool still counts a little.
        self._idf = {term: math.log(1 + (count - n + 0.5) / (n + 0.5)) for term, n in frequency.items()}

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> list[Match]:
        """The ``limit`` best tools for ``query`` (at most :data:`MAX_QUERY_CHARS` read), best first; ties in
        name order; tools that share no term with the query are left out."""
        wanted = set(terms(query[:MAX_QUERY_CHARS]))
        scored: list[Match] = []
        for tool, doc, length in zip(self.tools, self._docs, self._lengths, strict=True):
            score = 0.0
            for term in wanted & doc.keys():
                tf = doc[term]
                norm = K1 * (1 - B + B * length / self._average) if self._average else K1
                score += self._idf[term] * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                scored.append(Match(tool, score))
        scored.sort(key=lambda match: (-match.score, str(match.tool.get("name"))))
        return scored[: max(1, min(limit, MAX_LIMIT))]


__all__ = [
    "CALL_TOOL",
    "CALL_TOOL_NAME",
    "SEARCH_TOOL",
    "SEARCH_TOOL_NAME",
    "Match",
    "ToolIndex",
    "document",
    "terms",
]
