"""The tool methods of the control protocol: ``tools/list``, ``tools/call`` (the parent's way into a plugin's
tool: registry lookup, withheld or disabled tools, the permission, the arguments against ``inputSchema``)
and ``tools/setEnabled``.

Written against :class:`ToolHost`, the small lookup interface they need of the host (its plugins, the tool
registry, notifications, :meth:`ToolHost.change`), so this module does not import the host.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from hostd.control import models as p
from hostd.control.core import InitializeOptions, Notify, RequestContext
from hostd.host.call_grants import GrantHost, reach, users_home
from hostd.host.pages import page_of
from hostd.host.records import InstalledPlugin
from hostd.mcp.tools import validate_arguments
from hostd.plugins.registry import ToolRegistry
from hostd.wire.errors import ErrorKind, HostError


class ToolHost(GrantHost, Protocol):
    """What the tool methods need of the host (:class:`hostd.host.service.Host` is one); a call's files are
    granted through :class:`~hostd.host.call_grants.GrantHost`."""

    @property
    def options(self) -> InitializeOptions: ...

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def plugins(self) -> Mapping[str, InstalledPlugin]: ...

    @property
    def notify(self) -> Notify: ...

    def change(self) -> AbstractAsyncContextManager[None]:
        """Apply the body's changes to memory and the state document together, or to neither."""
        ...

    def _plugin(self, plugin_id: str) -> InstalledPlugin:
        """The installed plugin ``plugin_id``; raises :class:`HostError` ``PLUGIN_NOT_FOUND``."""
        ...


async def tools_list(host: ToolHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``tools/list {plugin?, includeDisabled?, cursor?}`` -> ``{tools: [HostTool], revision, nextCursor?}``: one
    page (hostd/host/pages.py), sorted by name; ``INVALID_PARAMS`` for a cursor hostd did not make."""
    args = p.parse_params(p.ToolsListParams, params)
    if args.plugin is not None:
        host._plugin(args.plugin)
    listed = [
        (tool, enabled)
        for tool in host.registry.tools(args.plugin)
        if (enabled := not _tool_disabled(host, tool.plugin, tool.remote_name)) or args.include_disabled
    ]
    tools, next_cursor = page_of(
        listed, lambda entry: entry[0].name, lambda entry: entry[0].to_model(enabled=entry[1]).wire(), args.cursor
    )
    result: dict[str, Any] = {"tools": tools, "revision": host.registry.revision}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


def _tool_disabled(host: ToolHost, plugin_id: str, remote_name: str) -> bool:
    plugin = host.plugins.get(plugin_id)
    return plugin is not None and remote_name in plugin.disabled_tools


async def tools_set_enabled(host: ToolHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``tools/setEnabled {name, enabled}`` -> ``ToolEnabledResult``: hide a tool (or show it again).

    ``name``: a registered tool's host name or ``function_name``, or ``<plugin>.<tool>``
    for a tool of a stopped plugin that its manifest declares or its pins record. The
    choice is written to the state (``STATE_WRITE_FAILED``: nothing changed) and the plugin
    keeps running; a disabled tool is left out of ``tools/list`` and a call to it gets
    ``TOOL_DISABLED``. A change bumps the registry revision and sends ``tools/listChanged``.
    ``TOOL_NOT_FOUND`` when no plugin has such a tool.
    """
    args = p.parse_params(p.ToolSetEnabledParams, params)
    plugin, remote = _tool_owner(host, args.name)
    host_name = f"{plugin.manifest.id}.{remote}"
    changed = (remote in plugin.disabled_tools) == args.enabled
    if changed:
        async with host.change():
            if args.enabled:
                plugin.disabled_tools = plugin.disabled_tools - {remote}
            else:
                plugin.disabled_tools = plugin.disabled_tools | {remote}
        host.registry.revision += 1
        await host.notify("tools/listChanged", {"revision": host.registry.revision})
    return p.ToolEnabledResult(
        name=host_name, plugin=plugin.manifest.id, enabled=args.enabled, revision=host.registry.revision
    ).wire()


def _known_tools(plugin: InstalledPlugin) -> set[str]:
    """The MCP names of the tools ``plugin`` may have while it is not running: declared in its manifest,
    pinned at approval, or disabled by the user."""
    declared = {t.removeprefix(f"{plugin.manifest.id}.") for t in plugin.manifest.contributes.tool_names}
    return declared | set(plugin.supervisor.pinned or {}) | plugin.disabled_tools


def _tool_owner(host: ToolHost, name: str) -> tuple[InstalledPlugin, str]:
    """The plugin and MCP name of the tool ``name`` (registered, or known to a stopped plugin)."""
    with contextlib.suppress(HostError):
        tool = host.registry.lookup(name)
        return host._plugin(tool.plugin), tool.remote_name
    plugin_id, dot, remote = name.partition(".")
    plugin = host.plugins.get(plugin_id)
    if dot and plugin is not None and remote in _known_tools(plugin):
        return plugin, remote
    raise HostError(ErrorKind.TOOL_NOT_FOUND, f"no tool named {name!r}", tool=name)


def _not_ready(host: ToolHost, name: str) -> HostError | None:
    """``PLUGIN_NOT_READY`` when ``name`` (``<plugin id>.<tool>``) is a tool of an installed plugin that is not
    ready, else ``None`` (the caller answers ``TOOL_NOT_FOUND``).

    The class (issue 28): a tool that is back in a few seconds answered like a name no plugin has, so the
    parent (or a model) cannot tell a restart from a mistake. A plugin that lists the tools it may have
    (declared, pinned, disabled) must list ``name``; one that discovers them is taken at its word.
    ``data``: ``{plugin, tool, state, nextRetryAt, transient}``; transient while the plugin is enabled and
    starting, unhealthy or waiting for a restart.
    """
    plugin_id, dot, remote = name.partition(".")
    plugin = host.plugins.get(plugin_id)
    if not dot or plugin is None:
        return None
    status = plugin.supervisor.status()
    state = status["status"]
    if state == "ready":
        return None
    known = _known_tools(plugin)
    if known and remote not in known:
        return None
    retry = status.get("next_retry_at")
    transient = plugin.enabled and (state in ("starting", "authorizing", "unhealthy") or retry is not None)
    if transient:
        due = f" (next attempt at {retry})" if retry else ""
        advice = f"plugin {plugin_id} is {state}{due}: its tools are back when it is ready; retry then"
    elif not plugin.enabled:
        advice = f"plugin {plugin_id} is not enabled: enable it (plugins/enable) to call its tools"
    else:
        reason = (status.get("error") or {}).get("message") or state
        advice = f"plugin {plugin_id} failed ({reason}) and is not restarting: restart it (plugins/restart)"
    return HostError(
        ErrorKind.PLUGIN_NOT_READY,
        f"{name}: {advice}",
        plugin=plugin_id,
        tool=name,
        state=state,
        nextRetryAt=retry,
        transient=transient,
    )


async def tools_call(host: ToolHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``tools/call {name, arguments, timeoutMs?}`` -> ``{content, structuredContent?}``.

    Before the call is sent, the local files it names are made reachable or refused
    (:func:`hostd.host.call_grants.reach`: ``ACCESS_NOT_GRANTED``, a restart of the plugin).
    """
    args = p.parse_params(p.ToolsCallParams, params)
    try:
        tool = host.registry.lookup(args.name)
    except HostError as missing:
        for candidate in host.plugins.values():
            withheld = candidate.supervisor.withheld_error(args.name)
            if withheld is not None:
                raise withheld from None
        raise _not_ready(host, args.name) or missing from None
    plugin = host._plugin(tool.plugin)
    if tool.remote_name in plugin.disabled_tools:
        raise HostError(
            ErrorKind.TOOL_DISABLED,
            f"{tool.name} is disabled; enable it with tools/setEnabled",
            plugin=tool.plugin,
            tool=tool.name,
        )
    if tool.permission is not None and tool.permission not in plugin.granted:
        raise HostError(
            ErrorKind.PERMISSION_NOT_GRANTED,
            f"{tool.name} needs the permission {tool.permission!r}, which is not granted",
            plugin=tool.plugin,
            tool=tool.name,
            permissions=[tool.permission],
        )
    validate_arguments(tool, args.arguments)
    # Files and folders the arguments name that the sandbox does not cover: asked for and granted (the plugin
    # restarted) or refused with ACCESS_NOT_GRANTED, before the server sees the call (hostd/host/call_grants.py).
    if await reach(host, plugin, tool, args.arguments):
        tool = host.registry.lookup(args.name)
    # The user's "~/x" is the user's ~/x, also for a server whose HOME is its private view and that expands
    # "~" itself (sandbox/home_view.py): written out under the real HOME before the call is sent.
    arguments = users_home(plugin, args.arguments)

    async def progress(value: float, total: float | None, message: str | None) -> None:
        note = p.ProgressParams(requestId=ctx.id, progress=value, total=total, message=message)
        await ctx.notify("$/progress", note.wire())

    timeout = args.timeout_ms / 1000 if args.timeout_ms is not None else None
    return await plugin.supervisor.call(
        tool,
        arguments,
        timeout=timeout,
        report_progress=progress,
        content_limits=host.options.content_limits,
    )
