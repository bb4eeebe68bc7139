"""Resources, resource templates and prompts of every ready plugin, as one MCP server serves them.

The host serves these per plugin (``resources/list {plugin}``..., :mod:`hostd.host.feature_methods`); an MCP
client names no plugin, so the gateway gathers them:

- ``prompts/list`` is the host's own listing of every plugin's prompts (host names ``<plugin>.<prompt>``, hostd's
  pages); ``prompts/get`` is the host's, by that name.
- ``resources/list`` and ``resources/templates/list``: every page of every ready plugin whose server declares
  ``resources``, in plugin id order, each entry marked with its plugin in ``_meta["hostd/plugin"]``. URIs are the
  servers' own (a URI is an address a client may have stored or a model may quote): :class:`ResourceRoutes`
  remembers which plugin listed each URI, and matches a URI no listing named against the plugins' templates
  (RFC 6570 expressions, each variable matching at least one character), so ``resources/read {uri}`` reaches its
  plugin. A URI two plugins both list goes to the first in plugin id order.
- One plugin's failure (stopped meanwhile, too slow, an invalid page) leaves its entries out and is logged: the
  other plugins' are still served.
- The gathered listing is answered in hostd's pages (:mod:`hostd.host.pages`, as the control protocol pages its
  listings: ``cursor`` in, ``nextCursor`` out, at most :data:`~hostd.host.pages.PAGE_BYTES` of items a page), so
  many plugins' resources never make one answer larger than a client's line bound. Entries are in plugin id
  order, each plugin's by URI (template); the cursor names the last entry's ``<plugin>\n<uri>``, so the next page
  starts after it and a change between pages loses no entry that stayed listed. Each page gathers the listing
  again (the host keeps each plugin's walk). A cursor hostd did not make is ``INVALID_PARAMS``
  (``data.field: "cursor"``); a URI a plugin lists twice is listed once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from hostd.control.core import RequestContext
from hostd.host.pages import page_of
from hostd.wire.errors import ErrorKind, HostError

log = logging.getLogger("hostd.gateway.features")

#: The ``_meta`` key naming the plugin a listed resource or template comes from.
PLUGIN_META_KEY = "hostd/plugin"
#: Pages read of one plugin's listing at most (each page is bounded by the host).
MAX_PAGES = 32
_EXPRESSION = re.compile(r"\{[^{}]*\}")


class GatewayHost(Protocol):
    """What the gateway's feature methods need of the host (:class:`hostd.host.service.Host` is one): every
    plugin, and the control methods by name."""

    @property
    def plugins(self) -> Mapping[str, Any]: ...

    async def handle(self, method: str, params: Any, ctx: RequestContext) -> Any:
        """Serve one control method."""
        ...


def template_pattern(template: str) -> re.Pattern[str]:
    """The URIs an RFC 6570 ``uriTemplate`` expands to, as a pattern: literal text as itself, each ``{...}``
    expression one or more characters (``{+x}`` / ``{#x}`` any, others no ``/``)."""
    parts: list[str] = []
    last = 0
    for match in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[last : match.start()]))
        parts.append(".+" if match.group(0)[1:2] in ("+", "#") else "[^/]+")
        last = match.end()
    parts.append(re.escape(template[last:]))
    return re.compile("".join(parts))


@dataclass
class ResourceRoutes:
    """Which plugin serves a resource URI: from the latest listings and the plugins' templates."""

    uris: dict[str, str] = field(default_factory=dict)
    templates: dict[str, list[re.Pattern[str]]] = field(default_factory=dict)

    def plugin_of(self, uri: str, serving: list[str]) -> str:
        """The plugin to read ``uri`` of: the one that listed it, else the first (plugin id order) whose template
        matches it, else the only plugin ``serving`` resources. ``INVALID_PARAMS`` (``data.uri``) when none."""
        listed = self.uris.get(uri)
        if listed is not None and listed in serving:
            return listed
        for plugin_id in serving:
            if any(pattern.fullmatch(uri) for pattern in self.templates.get(plugin_id, [])):
                return plugin_id
        if len(serving) == 1:
            return serving[0]
        raise HostError(
            ErrorKind.INVALID_PARAMS,
            f"no plugin listed the resource {uri[:200]!r} and no template of theirs matches it; list resources first",
            uri=uri[:2048],
        )


def serving(host: GatewayHost, capability: str) -> list[str]:
    """The ids of the ready plugins whose server declares ``capability``, sorted."""
    out = []
    for plugin_id in sorted(host.plugins):
        link = host.plugins[plugin_id].supervisor.link
        if link is not None and link.server_capabilities.get(capability) is not None:
            out.append(plugin_id)
    return out


async def _every_page(host: GatewayHost, plugin_id: str, method: str, key: str, ctx: RequestContext) -> list[Any]:
    """Every entry of ``key`` in ``plugin_id``'s ``method`` pages (at most :data:`MAX_PAGES`)."""
    entries: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        request: dict[str, Any] = {"plugin": plugin_id}
        if cursor is not None:
            request["cursor"] = cursor
        page = await host.handle(method, request, ctx)
        items = page.get(key)
        if not isinstance(items, list):
            raise HostError(ErrorKind.MCP_UPSTREAM_ERROR, f"{method}: the result has no {key!r} array")
        entries.extend(item for item in items if isinstance(item, dict))
        cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
        if cursor is None:
            break
    return entries


def _marked(entry: dict[str, Any], plugin_id: str) -> dict[str, Any]:
    meta = entry.get("_meta")
    return {**entry, "_meta": {**(meta if isinstance(meta, dict) else {}), PLUGIN_META_KEY: plugin_id}}


def _paged(entries: list[tuple[str, dict[str, Any]]], member: str, params: dict[str, Any]) -> dict[str, Any]:
    """``{member: the page at params' cursor, nextCursor?}`` of ``entries`` (``(plugin, entry)`` with its address
    under ``address``), keyed ``<plugin>\n<address>`` (see the module text)."""
    address = "uriTemplate" if member == "resourceTemplates" else "uri"
    keyed: dict[str, dict[str, Any]] = {}
    for plugin_id, entry in entries:
        keyed.setdefault(f"{plugin_id}\n{entry[address]}", _marked(entry, plugin_id))
    items = sorted(keyed.items())
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise HostError(ErrorKind.INVALID_PARAMS, "cursor: a string (a nextCursor of this listing)", field="cursor")
    page, next_cursor = page_of(items, lambda item: item[0], lambda item: item[1], cursor)
    result: dict[str, Any] = {member: page}
    if next_cursor is not None:
        result["nextCursor"] = next_cursor
    return result


async def resources_list(
    host: GatewayHost, routes: ResourceRoutes, params: dict[str, Any], ctx: RequestContext
) -> dict[str, Any]:
    """``resources/list {cursor?}`` -> ``{resources, nextCursor?}``: one page (hostd's) of every ready plugin's
    resources, each marked with its plugin; every URI listed is remembered in ``routes``. ``INVALID_PARAMS`` for a
    cursor hostd did not make."""
    out: list[tuple[str, dict[str, Any]]] = []
    for plugin_id, entries in await _gathered(host, "resources/list", "resources", ctx):
        for entry in entries:
            if isinstance(entry.get("uri"), str):
                routes.uris.setdefault(entry["uri"], plugin_id)
                out.append((plugin_id, entry))
    return _paged(out, "resources", params)


async def _gathered(
    host: GatewayHost, method: str, key: str, ctx: RequestContext
) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(plugin id, every entry of its whole listing)`` for each ready plugin serving resources; a plugin whose
    ``method`` fails is left out and logged (one plugin's error never hides the others' entries)."""
    gathered: list[tuple[str, list[dict[str, Any]]]] = []
    for plugin_id in serving(host, "resources"):
        try:
            gathered.append((plugin_id, await _every_page(host, plugin_id, method, key, ctx)))
        except HostError as error:
            log.warning("%s of plugin %s left out: %s", method, plugin_id, error.message)
    return gathered


async def resource_templates_list(
    host: GatewayHost, routes: ResourceRoutes, params: dict[str, Any], ctx: RequestContext
) -> dict[str, Any]:
    """``resources/templates/list {cursor?}`` -> ``{resourceTemplates, nextCursor?}``: one page (hostd's) of every
    ready plugin's templates, each marked with its plugin; their patterns kept in ``routes``. ``INVALID_PARAMS``
    for a cursor hostd did not make."""
    out: list[tuple[str, dict[str, Any]]] = []
    for plugin_id, entries in await _gathered(host, "resources/templates/list", "resourceTemplates", ctx):
        listed = [entry for entry in entries if isinstance(entry.get("uriTemplate"), str)]
        routes.templates[plugin_id] = [template_pattern(entry["uriTemplate"]) for entry in listed]
        out.extend((plugin_id, entry) for entry in listed)
    return _paged(out, "resourceTemplates", params)


async def resources_read(
    host: GatewayHost, routes: ResourceRoutes, params: dict[str, Any], ctx: RequestContext
) -> dict[str, Any]:
    """``resources/read {uri}`` -> the plugin's ``{contents}`` (the host's ``resources/read``: bounded, blobs over
    the content limits replaced by markers). The plugin: :meth:`ResourceRoutes.plugin_of`."""
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise HostError(ErrorKind.INVALID_PARAMS, "resources/read needs uri (a string)")
    plugins = serving(host, "resources")
    if not routes.templates and len(plugins) > 1:
        await resource_templates_list(host, routes, {}, ctx)  # a URI a template names, before any listing
    plugin_id = routes.plugin_of(uri, plugins)
    result: dict[str, Any] = await host.handle("resources/read", {"plugin": plugin_id, "uri": uri}, ctx)
    return result


async def prompts_list(host: GatewayHost, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
    """``prompts/list {cursor?}`` -> the host's page of every plugin's prompts (host names), as MCP ``Prompt``s."""
    request: dict[str, Any] = {}
    if isinstance(params.get("cursor"), str):
        request["cursor"] = params["cursor"]
    page = await host.handle("prompts/list", request, ctx)
    prompts = [{k: v for k, v in prompt.items() if k != "plugin"} for prompt in page["prompts"]]
    result: dict[str, Any] = {"prompts": prompts}
    if page.get("nextCursor") is not None:
        result["nextCursor"] = page["nextCursor"]
    return result


async def prompts_get(host: GatewayHost, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
    """``prompts/get {name, arguments?}`` (``name``: ``<plugin>.<prompt>``) -> the host's answer."""
    request: dict[str, Any] = {"name": params.get("name")}
    if params.get("arguments") is not None:
        request["arguments"] = params["arguments"]
    result: dict[str, Any] = await host.handle("prompts/get", request, ctx)
    return result


__all__ = [
    "PLUGIN_META_KEY",
    "ResourceRoutes",
    "prompts_get",
    "prompts_list",
    "resource_templates_list",
    "resources_list",
    "resources_read",
    "template_pattern",
]
