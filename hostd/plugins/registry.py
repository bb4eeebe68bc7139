"""The tool registry: every ready plugin's tools, swapped in and out atomically.

A plugin's tools are registered as one set when it becomes ``ready`` and
removed as one set when it stops, crashes or changes its list. Lookups see
either the whole old set or the whole new one, never a mix. ``revision``
increases on every change (it is sent as ``tools/listChanged {revision}``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hostd.mcp.tools import RegisteredTool
from hostd.wire.errors import ErrorKind, HostError


@dataclass
class ToolRegistry:
    """Host tool name -> :class:`RegisteredTool`, grouped by plugin id."""

    revision: int = 0
    _by_name: dict[str, RegisteredTool] = field(default_factory=dict)
    _by_function: dict[str, RegisteredTool] = field(default_factory=dict)
    _by_plugin: dict[str, tuple[RegisteredTool, ...]] = field(default_factory=dict)

    def check_conflicts(self, plugin_id: str, tools: Sequence[RegisteredTool]) -> None:
        """Raise ``TOOL_CONFLICT`` if another plugin owns one of these ``function_name`` values.

        Host names (``<plugin id>.<tool>``) never clash across plugins: a plugin id has no dot and
        ids are unique. A ``function_name`` can: when a host name is over 64 characters its function
        name is a 55-character prefix plus a hash, and another plugin whose id is that prefix can
        name a tool after the hash (tests/test_tools.py shows one).
        """
        _refuse_clashes(
            plugin_id,
            [
                tool.name
                for tool in tools
                if (other := self._by_name.get(tool.name) or self._by_function.get(tool.function_name)) is not None
                and other.plugin != plugin_id
            ],
        )

    def register(self, plugin_id: str, tools: Sequence[RegisteredTool]) -> int:
        """Replace ``plugin_id``'s tools with ``tools`` as one step; return the new revision.

        Raises ``TOOL_CONFLICT`` (and changes nothing) on a clash with another plugin.
        """
        self.check_conflicts(plugin_id, tools)
        self._drop(plugin_id)
        for tool in tools:
            self._by_name[tool.name] = tool
            self._by_function[tool.function_name] = tool
        self._by_plugin[plugin_id] = tuple(tools)
        self.revision += 1
        return self.revision

    def unregister(self, plugin_id: str) -> bool:
        """Remove every tool of ``plugin_id``; return whether anything was removed."""
        if plugin_id not in self._by_plugin:
            return False
        self._drop(plugin_id)
        self.revision += 1
        return True

    def _drop(self, plugin_id: str) -> None:
        for tool in self._by_plugin.pop(plugin_id, ()):
            self._by_name.pop(tool.name, None)
            self._by_function.pop(tool.function_name, None)

    def lookup(self, name: str) -> RegisteredTool:
        """The tool by host name (``plugin.tool``) or ``function_name``; ``TOOL_NOT_FOUND`` otherwise."""
        tool = self._by_name.get(name) or self._by_function.get(name)
        if tool is None:
            raise HostError(ErrorKind.TOOL_NOT_FOUND, f"no registered tool named {name!r}", tool=name)
        return tool

    def tools(self, plugin_id: str | None = None) -> list[RegisteredTool]:
        """Registered tools, sorted by name; only ``plugin_id``'s when given."""
        if plugin_id is not None:
            return sorted(self._by_plugin.get(plugin_id, ()), key=lambda t: t.name)
        return sorted(self._by_name.values(), key=lambda t: t.name)

    def count(self, plugin_id: str) -> int:
        """How many tools ``plugin_id`` has registered."""
        return len(self._by_plugin.get(plugin_id, ()))


def _refuse_clashes(plugin_id: str, clashes: list[str]) -> None:
    if clashes:
        clashes = sorted(clashes)
        raise HostError(
            ErrorKind.TOOL_CONFLICT,
            f"tool names already registered by another plugin: {', '.join(clashes)}",
            plugin=plugin_id,
            tools=clashes,
        )
