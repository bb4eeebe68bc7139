"""MCP server features served to the parent as control methods: resources, prompts, completion, log level.

Each method names a plugin and follows the MCP method of the same name (``docs/protocol.md``); the theory of
operation is in :mod:`hostd.mcp.client_features`, which sends the requests (:func:`plugin_request`). The
methods are written against :class:`FeatureHost`, the small lookup interface they need of the host (its
plugins, its options, its result bound), so this module does not import the host that registers them in
``Host.METHODS``. :class:`PluginFeatureParent` is the host's side of one plugin's client features
(:class:`hostd.mcp.client_features.FeatureParent`).
"""

from __future__ import annotations

import logging
import secrets
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Protocol

import orjson
import trio

from hostd.control import models as p
from hostd.control.core import InitializeOptions, Notify, ParentRequest, RequestContext
from hostd.host.pages import cursor_key, page_of
from hostd.install.manifest import Manifest
from hostd.mcp.client_features import PluginFeatures, ProgressFn, plugin_request
from hostd.mcp.convert import name_invalid, name_refusal
from hostd.mcp.link import MAX_LIST_PAGES, LinkClosed, PluginLink, ReplyTooLarge
from hostd.mcp.listing import DEFAULT_MAX_ITEM_BYTES, ListingBounds, ListingCount
from hostd.mcp.session import PluginRequestError
from hostd.plugins.supervisor import PluginSupervisor
from hostd.wire.content import ContentLimits, bound_content
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.text import has_invisible
from sandbox.launch import Launch

log = logging.getLogger("hostd.host.feature_methods")

# -- what the feature methods read of the host ------------------------------------------------


class FeaturePlugin(Protocol):
    """One installed plugin as the feature methods see it (:class:`hostd.host.records.InstalledPlugin` is one)."""

    @property
    def manifest(self) -> Manifest: ...

    @property
    def supervisor(self) -> PluginSupervisor: ...

    @property
    def granted(self) -> set[str]: ...

    @property
    def launch(self) -> Launch | None: ...

    @property
    def limits(self) -> dict[str, Any]:
        """Limits the parent granted (``plugins/grant``): the listing bounds among them."""
        ...


class ResultBound(Protocol):
    """The host's settings as far as the feature methods read them."""

    @property
    def max_result_bytes(self) -> int: ...


class FeatureHost(Protocol):
    """The lookup the feature methods need of the host (:class:`hostd.host.service.Host` is one)."""

    @property
    def options(self) -> InitializeOptions: ...

    @property
    def settings(self) -> ResultBound: ...

    @property
    def plugins(self) -> Mapping[str, FeaturePlugin]: ...

    @property
    def notify(self) -> Notify: ...

    def _plugin(self, plugin_id: str) -> FeaturePlugin:
        """The installed plugin ``plugin_id``; raises :class:`HostError` ``PLUGIN_NOT_FOUND``."""
        ...


class PluginFeatureParent:
    """The host's side of one plugin's client features (:class:`hostd.mcp.client_features.FeatureParent`):
    each answer is read from the host at the time it is asked, so a grant or a new launch applies at once.
    Raises what :meth:`FeatureHost._plugin` raises once the plugin is uninstalled."""

    def __init__(self, host: FeatureHost, plugin_id: str) -> None:
        self._host = host
        self._plugin_id = plugin_id

    def served_capabilities(self) -> dict[str, Any]:
        return self._host.options.client_capabilities

    def request_parent(self) -> ParentRequest | None:
        return self._host.options.request_parent

    def granted(self) -> Collection[str]:
        return self._host._plugin(self._plugin_id).granted

    def tool_timeout(self) -> float:
        return self._host._plugin(self._plugin_id).manifest.backend.tool_timeout_seconds

    def granted_folders(self) -> list[str]:
        launch = self._host._plugin(self._plugin_id).launch
        return [real for _, real in launch.folders] if launch is not None else []

    @property
    def notify(self) -> Notify:
        return self._host.notify


# -- server features as control methods ------------------------------------------------------


def _ready(host: FeatureHost, plugin_id: str, capability: str, *members: str) -> tuple[FeaturePlugin, PluginLink]:
    """The plugin and its link, if it is ``ready`` and its server declared ``capability`` (and ``members``)."""
    plugin = host._plugin(plugin_id)
    link = plugin.supervisor.link
    if link is None:
        raise HostError(
            ErrorKind.PLUGIN_HOST_UNAVAILABLE,
            f"plugin {plugin_id} is {plugin.supervisor.state.value}",
            plugin=plugin_id,
        )
    declared = link.server_capabilities.get(capability)
    missing = capability if declared is None else next((m for m in members if not declared.get(m)), None)
    if missing is not None:
        name = capability if missing == capability else f"{capability}.{missing}"
        raise HostError(
            ErrorKind.CAPABILITY_NOT_SUPPORTED,
            f"plugin {plugin_id}'s server does not declare the {name} capability",
            plugin=plugin_id,
            capability=name,
        )
    return plugin, link


async def _ask(
    plugin: FeaturePlugin,
    link: PluginLink,
    method: str,
    params: dict[str, Any],
    ctx: RequestContext | None = None,
) -> dict[str, Any]:
    """:func:`plugin_request` within the plugin's tool timeout, its failures as :class:`HostError`."""
    plugin_id = plugin.manifest.id
    timeout = plugin.manifest.backend.tool_timeout_seconds
    on_progress: ProgressFn | None = None
    if ctx is not None:
        rid, notify = ctx.id, ctx.notify

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            note = p.ProgressParams(requestId=rid, progress=progress, total=total, message=message)
            await notify("$/progress", note.wire())

    features = plugin.supervisor.features
    answer = features.on_request if isinstance(features, PluginFeatures) else None
    result: dict[str, Any] | None = None
    with trio.move_on_after(timeout):
        try:
            result = await plugin_request(link, method, params, on_progress=on_progress, answer=answer)
        except LinkClosed:
            raise HostError(
                ErrorKind.PLUGIN_HOST_UNAVAILABLE,
                f"plugin {plugin_id} {link.failure or 'stopped'} during {method}",
                plugin=plugin_id,
            ) from None
        except ReplyTooLarge as over:
            raise HostError(
                ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
                f"{method} of plugin {plugin_id} answered with {over.size} bytes, over the {over.limit}-byte frame "
                "bound; the plugin goes on serving",
                plugin=plugin_id,
                size=over.size,
                limit=over.limit,
                bound="frame",
            ) from None
        except PluginRequestError as exc:
            raise HostError(
                ErrorKind.MCP_UPSTREAM_ERROR,
                f"{method} failed: {exc.message[:500]}",
                plugin=plugin_id,
                upstream=exc.wire(),
            ) from None
    if result is None:
        raise HostError(
            ErrorKind.TOOL_TIMEOUT,
            f"plugin {plugin_id} did not answer {method} within {timeout:g} s; it was sent notifications/cancelled",
            plugin=plugin_id,
            timeoutSeconds=timeout,
        )
    return result


def _bounded(host: FeatureHost, plugin_id: str, method: str, result: dict[str, Any]) -> dict[str, Any]:
    """``result`` held to the result bound (``MCP_TOOL_RESULT_TOO_LARGE``), as a tool result is."""
    size = len(orjson.dumps(result))
    limit = host.settings.max_result_bytes
    if size > limit:
        raise HostError(
            ErrorKind.MCP_TOOL_RESULT_TOO_LARGE,
            f"{method} of plugin {plugin_id} returned {size} bytes, over the {limit}-byte result bound",
            plugin=plugin_id,
            size=size,
            limit=limit,
        )
    return result


def _bounded_contents(contents: list[Any], limits: ContentLimits) -> list[Any]:
    """Resource ``contents`` with blobs over ``contentLimits.maxBlobBytes`` replaced by text markers."""
    wrapped = [{"type": "resource", "resource": item} for item in contents]
    bounded = bound_content(wrapped, limits)
    if bounded is None:
        return contents
    out = []
    for original, item in zip(contents, bounded, strict=True):
        if item.get("type") == "resource":
            out.append(original)
        else:  # a marker: keep the uri so the parent knows which one was left out
            uri = original.get("uri") if isinstance(original, dict) else None
            out.append({"uri": uri, "mimeType": "text/plain", "text": item["text"], "_meta": item["_meta"]})
    return out


def _cursor(cursor: str | None) -> dict[str, Any]:
    return {"cursor": cursor} if cursor is not None else {}


async def _walk(plugin_id: str, plugin: FeaturePlugin, link: PluginLink, method: str, member: str) -> list[Any]:
    """Every item of the server's listing ``method`` (its ``member`` array), page after page, the walk held to
    the plugin's listing bounds (hostd/mcp/listing.py: ``LISTING_TOO_LARGE`` at the page that crossed one, an
    item over 128 KiB included) and to ``MAX_LIST_PAGES`` pages (``MCP_UPSTREAM_ERROR`` past them, or for a
    page without the array). hostd holds at most the bounds plus one page. Raises what :func:`_ask` raises."""
    counted = ListingCount(
        plugin_id, member, ListingBounds.of_limits(plugin.limits), max_item_bytes=DEFAULT_MAX_ITEM_BYTES
    )
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await _ask(plugin, link, method, _cursor(cursor))
        items = page.get(member)
        if not isinstance(items, list):
            raise HostError(
                ErrorKind.MCP_UPSTREAM_ERROR, f"{method}: the result has no '{member}' array", plugin=plugin_id
            )
        counted.add(items)
        found.extend(items)
        cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
        if cursor is None:
            return found
    raise HostError(
        ErrorKind.MCP_UPSTREAM_ERROR,
        f"plugin {plugin_id}: {method} gave a nextCursor on {MAX_LIST_PAGES} pages: the listing never ends",
        plugin=plugin_id,
    )


def _described_invisibly(item: Any) -> bool:
    """Whether a listed item's ``description`` (or, for a prompt, one of its ``arguments``' descriptions) holds
    a character a person cannot see (hostd/wire/text.py: tag characters, the word joiner, bidi controls...)."""
    if not isinstance(item, dict):
        return False
    texts = [item.get("description")]
    arguments = item.get("arguments")
    if isinstance(arguments, list):
        texts += [argument.get("description") for argument in arguments if isinstance(argument, dict)]
    return any(isinstance(text, str) and has_invisible(text) for text in texts)


def _flagged(item: Any) -> Any:
    """``item`` with ``invisibleCharacters: true`` added when :func:`_described_invisibly`, as a tool's is in
    ``tools/list``, so an app can warn (issue 29, found item 7); else ``item`` as it came."""
    return {**item, "invisibleCharacters": True} if _described_invisibly(item) else item


#: The listing of each parent's walk in progress, kept from its first page to its last: per owner (a plugin's
#: link, or the host for every plugin's prompts) and member, ``(token, items, failed)``. One per owner and member:
#: a new walk (no ``cursor``) replaces it, the last page drops it, a restart (a new link) forgets it; so
#: hostd holds at most each listing's bounds (hostd/mcp/listing.py) once more while a walk is under way.
_WALKS: weakref.WeakKeyDictionary[object, dict[str, tuple[str, list[Any], list[dict[str, str]]]]] = (
    weakref.WeakKeyDictionary()
)
#: What a walk gathers: the items, and the plugins it left out (``failed``: ``{plugin, kind, message}``).
Walked = tuple[list[Any], list[dict[str, str]]]


async def _listing(
    owner: object, member: str, cursor: str | None, walk: Callable[[], Awaitable[Walked]]
) -> dict[str, Any]:
    """``{member: one page, nextCursor?, failed?}``: hostd's page (hostd/host/pages.py) of the listing ``walk``
    gathers, in its order, each item :func:`_flagged`, and on every page the plugins the walk left out
    (``failed``, when there are any); ``INVALID_PARAMS`` for a cursor hostd did not make.

    The server is walked once for a parent's walk, not once a page (a walk of N pages cost N walks of the
    server): the first page (no ``cursor``) walks it and keeps the items under a new token, which every
    cursor of that walk carries (``<token>:<position>``); a cursor whose items are no longer kept (another
    walk replaced them, the plugin restarted) walks the server again and goes on from its position.
    """
    kept = _WALKS.setdefault(owner, {})
    token = cursor_key(cursor).partition(":")[0] if cursor is not None else secrets.token_hex(6)
    held = kept.get(member)
    if cursor is None or held is None or held[0] != token:
        items, failed = await walk()
        held = kept[member] = (token, items, failed)
    _, items, failed = held
    keyed = [(f"{token}:{index:08d}", item) for index, item in enumerate(items)]
    page, next_cursor = page_of(keyed, lambda entry: entry[0], lambda entry: _flagged(entry[1]), cursor)
    answer: dict[str, Any] = {member: page}
    if failed:
        answer["failed"] = failed
    if next_cursor is not None:
        answer["nextCursor"] = next_cursor
    elif kept.get(member) is not None and kept[member][0] == token:
        del kept[member]
    return answer


async def resources_list(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/list {plugin, cursor?}`` -> ``{resources, nextCursor?}``: the server's whole listing walked
    and bounded (:func:`_walk`), answered in hostd's pages of at most 1 MiB (``cursor``: the previous page's
    ``nextCursor``), so an answer always fits the parent's line bound (issue 29)."""
    args = p.parse_params(p.PluginPageParams, params)
    plugin, link = _ready(host, args.plugin, "resources")

    async def walk() -> Walked:
        return await _walk(args.plugin, plugin, link, "resources/list", "resources"), []

    return await _listing(link, "resources", args.cursor, walk)


async def resource_templates_list(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/templates/list {plugin, cursor?}`` -> ``{resourceTemplates, nextCursor?}``, walked, bounded
    and paged by hostd as :func:`resources_list` is."""
    args = p.parse_params(p.PluginPageParams, params)
    plugin, link = _ready(host, args.plugin, "resources")

    async def walk() -> Walked:
        return await _walk(args.plugin, plugin, link, "resources/templates/list", "resourceTemplates"), []

    return await _listing(link, "resourceTemplates", args.cursor, walk)


async def resources_read(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/read {plugin, uri}`` -> ``{contents}``, bounded like a tool result.

    A ``resource_link`` a tool returned is read this way (its ``uri``, the tool's plugin).
    """
    args = p.parse_params(p.ResourceParams, params)
    plugin, link = _ready(host, args.plugin, "resources")
    result = await _ask(plugin, link, "resources/read", {"uri": args.uri}, ctx)
    contents = result.get("contents")
    if not isinstance(contents, list):
        raise HostError(ErrorKind.MCP_UPSTREAM_ERROR, "resources/read: the result has no 'contents' array")
    result = {**result, "contents": _bounded_contents(contents, host.options.content_limits)}
    return _bounded(host, args.plugin, "resources/read", result)


async def resources_subscribe(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/subscribe {plugin, uri}`` -> ``{}``; updates arrive as ``resources/updated``."""
    args = p.parse_params(p.ResourceParams, params)
    plugin, link = _ready(host, args.plugin, "resources", "subscribe")
    await _ask(plugin, link, "resources/subscribe", {"uri": args.uri})
    return {}


async def resources_unsubscribe(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/unsubscribe {plugin, uri}`` -> ``{}``."""
    args = p.parse_params(p.ResourceParams, params)
    plugin, link = _ready(host, args.plugin, "resources", "subscribe")
    await _ask(plugin, link, "resources/unsubscribe", {"uri": args.uri})
    return {}


def _host_prompts(plugin_id: str, prompts: list[Any]) -> list[dict[str, Any]]:
    """A plugin's prompts with their host names ``<plugin>.<name>`` and ``plugin``; ``MCP_UPSTREAM_ERROR`` for
    one that is not an object, ``NAME_INVALID`` (the first, by index) for a name that is not MCP's 1 to 128
    characters of ``[A-Za-z0-9_.-]`` (issue 29: names are an allowlist; :func:`name_refusal`)."""
    hosted: list[dict[str, Any]] = []
    for index, prompt in enumerate(prompts):
        if not isinstance(prompt, dict):
            raise HostError(
                ErrorKind.MCP_UPSTREAM_ERROR, f"plugin {plugin_id} listed a prompt that is not an object (#{index})"
            )
        refusal = name_refusal("prompt", prompt.get("name"))
        if refusal is not None:
            raise name_invalid(plugin_id, index, refusal, f"plugin {plugin_id}: prompt #{index}: {refusal.message}")
        hosted.append({**prompt, "name": f"{plugin_id}.{prompt['name']}", "plugin": plugin_id})
    return hosted


async def prompts_list(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``prompts/list {plugin?, cursor?}`` -> ``{prompts, nextCursor?}`` with host names ``<plugin>.<name>``.

    With ``plugin``: that plugin's prompts (``CAPABILITY_NOT_SUPPORTED`` if its server has no prompts); without:
    those of every ready plugin that declares prompts, in plugin id order, a plugin whose listing failed left
    out and named in ``failed`` (``{plugin, kind, message}``). Each plugin's listing is walked and
    held to its listing bounds (:func:`_walk`: ``LISTING_TOO_LARGE``, hostd/mcp/listing.py) and answered in
    pages of hostd's own (hostd/host/pages.py: each server's order; ``cursor`` the ``nextCursor`` of the
    previous page, a position), so an answer always fits the parent's line bound (issue 29).
    """
    args = p.parse_params(p.PromptsListParams, params)
    if args.plugin is not None:
        plugin_id = args.plugin
        plugin, link = _ready(host, plugin_id, "prompts")

        async def walk_one() -> Walked:
            return _host_prompts(plugin_id, await _walk(plugin_id, plugin, link, "prompts/list", "prompts")), []

        return await _listing(link, "prompts", args.cursor, walk_one)

    async def walk_all() -> Walked:
        # One plugin's refusal (LISTING_TOO_LARGE, NAME_INVALID, an upstream error, a timeout) leaves that
        # plugin out, named in `failed`: it never hides another plugin's prompts (issue 29).
        everything: list[dict[str, Any]] = []
        failed: list[dict[str, str]] = []
        for each in sorted(host.plugins):
            installed = host.plugins[each]
            running = installed.supervisor.link
            if running is None or running.server_capabilities.get("prompts") is None:
                continue
            try:
                found = await _walk(each, installed, running, "prompts/list", "prompts")
                everything.extend(_host_prompts(each, found))
            except HostError as error:
                failed.append({"plugin": each, "kind": error.kind.name, "message": error.message})
        return everything, failed

    return await _listing(host, "prompts", args.cursor, walk_all)


def _split(host: FeatureHost, name: str) -> tuple[str, str]:
    plugin_id, dot, remote = name.partition(".")
    if not dot or not remote:
        raise HostError(ErrorKind.INVALID_PARAMS, f"{name!r} is not a host name '<plugin>.<name>'", field="name")
    host._plugin(plugin_id)
    return plugin_id, remote


async def prompts_get(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``prompts/get {name, arguments?}`` (``name``: ``<plugin>.<prompt>``) -> the server's
    ``{description?, messages}``, bounded like a tool result."""
    args = p.parse_params(p.PromptsGetParams, params)
    plugin_id, remote = _split(host, args.name)
    plugin, link = _ready(host, plugin_id, "prompts")
    request: dict[str, Any] = {"name": remote}
    if args.arguments is not None:
        request["arguments"] = args.arguments
    return _bounded(host, plugin_id, "prompts/get", await _ask(plugin, link, "prompts/get", request, ctx))


async def completion_complete(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``completion/complete {plugin, ref, argument, context?}`` -> the server's ``{completion}``.

    A ``ref/prompt`` may name the prompt by its host name; it is sent as the server's name.
    """
    args = p.parse_params(p.CompleteParams, params)
    plugin, link = _ready(host, args.plugin, "completions")
    ref = dict(args.ref)
    if ref.get("type") == "ref/prompt" and isinstance(ref.get("name"), str):
        ref["name"] = ref["name"].removeprefix(f"{args.plugin}.")
    request: dict[str, Any] = {"ref": ref, "argument": args.argument}
    if args.context is not None:
        request["context"] = args.context
    return _bounded(host, args.plugin, "completion/complete", await _ask(plugin, link, "completion/complete", request))


async def set_log_level(host: FeatureHost, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``plugins/setLogLevel {id, level}`` -> ``{}``: the server's MCP log messages from ``level`` up;
    they keep arriving as ``plugins/log``. Legacy era: ``logging/setLevel`` (needs the ``logging``
    capability); modern era: the level rides in every request's ``_meta`` (the session's envelope)."""
    args = p.parse_params(p.SetLogLevelParams, params)
    plugin = host._plugin(args.id)
    running = plugin.supervisor.link
    if running is not None and running.era == "modern":
        # 2026-07-28 has no logging/setLevel: the level travels in every request's _meta.
        running.session.set_log_level(args.level)
    else:
        plugin, link = _ready(host, args.id, "logging")
        await _ask(plugin, link, "logging/setLevel", {"level": args.level})
    features = plugin.supervisor.features
    if isinstance(features, PluginFeatures):
        features.log_level = args.level
    return {}


#: Control methods served here, registered in ``Host.METHODS``.
METHODS = {
    "resources/list": resources_list,
    "resources/templates/list": resource_templates_list,
    "resources/read": resources_read,
    "resources/subscribe": resources_subscribe,
    "resources/unsubscribe": resources_unsubscribe,
    "prompts/list": prompts_list,
    "prompts/get": prompts_get,
    "completion/complete": completion_complete,
    "plugins/setLogLevel": set_log_level,
}
