"""MCP features beyond tools, in one place: resources, prompts, completion, logging
(server features, served to the parent as control methods) and sampling, elicitation,
roots (client features, answered by the parent).

Theory of operation
-------------------

**Server features.** Each control method names a plugin and follows the MCP method
of the same name (``docs/protocol.md``). The handler checks that the plugin is
``ready`` and that its server *declared* the capability the method needs (MCP
"Capability negotiation"); otherwise the answer is ``CAPABILITY_NOT_SUPPORTED``
naming it, and nothing is sent to the server. The request goes to the server
through :func:`plugin_request`, the one function that knows how the link sends a
raw request (so re-pointing it at another link API is one edit). The answer is
forwarded as the server's JSON; what can hold large payloads (``resources/read``,
``prompts/get``) is held to the result bound and the parent's ``contentLimits``
like a tool result. Prompts carry host names ``<plugin>.<name>`` like tools.

**Client features.** The parent says in ``initialize.params.capabilities`` which
client features it serves. A plugin is offered, in its ``initialize``, exactly the
features the parent serves *and* the user granted it (the reserved permissions
``mcp.sampling``, ``mcp.elicitation``, ``mcp.roots``, declared in the manifest and
granted with ``plugins/grant``): :meth:`PluginFeatures.client_capabilities`. A
server's request for one of them becomes a hostd->parent request naming the
plugin (:meth:`hostd.control.server.ControlServer.request_parent`), bounded in time by
the plugin's tool timeout; the parent's answer goes back to the server as is
(``roots/list``: only roots inside the folders the plugin was granted). The class
of bug guarded against: *a server reaching a client feature it was not offered*
(not granted, not served by the parent, a sub-feature such as sampling with
tools or URL-mode elicitation that was not advertised): every such request is
refused with an error before the parent sees it. hostd never opens or fetches
the URL of a URL-mode elicitation; the parent does, with the user's consent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import orjson
import trio

from hostd.control import models as p
from hostd.control.server import RequestContext
from hostd.mcp.link import MAX_LIST_PAGES, LinkClosed, PluginLink, ReplyTooLarge
from hostd.mcp.session import PluginRequestError
from hostd.wire.content import ContentLimits, bound_content
from hostd.wire.errors import ErrorKind, HostError

if TYPE_CHECKING:
    from hostd.host.service import Host, InstalledPlugin

log = logging.getLogger("hostd.mcp.client_features")

#: Client feature -> the reserved permission that lets a plugin use it.
CLIENT_FEATURE_PERMISSIONS = {"sampling": "mcp.sampling", "elicitation": "mcp.elicitation", "roots": "mcp.roots"}
#: Permissions hostd itself gives meaning to: optional (enable does not need them), never in knownPermissions.
RESERVED_PERMISSIONS = frozenset(CLIENT_FEATURE_PERMISSIONS.values())

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]


# -- the one place that sends a raw request over the link -------------------------------------

#: Rounds of ``resultType: "input_required"`` one request may take (the SDKs' cap).
MAX_INPUT_ROUNDS = 10
_STATE_ONLY_DELAY = 0.05

InputAnswer = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


async def plugin_request(
    link: PluginLink,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    on_progress: ProgressFn | None = None,
    answer: InputAnswer | None = None,
) -> dict[str, Any]:
    """Send MCP request ``method`` with ``params`` to the plugin; return the raw, complete result.

    A modern server may answer ``resultType: "input_required"`` with
    ``inputRequests`` (``{key: {method, params}}``: sampling, elicitation,
    roots) and an opaque ``requestState``: each input request is answered by
    ``answer(method, params)`` (concurrently), and the request is sent again
    (a new id) with ``inputResponses`` and the unmodified ``requestState``;
    at most ``MAX_INPUT_ROUNDS`` rounds, then ``MCP_UPSTREAM_ERROR``. A round
    with only ``requestState`` is retried after 50 ms. Without ``answer`` an
    ``input_required`` result is ``CAPABILITY_NOT_SUPPORTED``.

    Raises :class:`PluginRequestError` (the server's JSON-RPC error),
    :class:`LinkClosed`, :class:`ReplyTooLarge`, and the :class:`HostError`
    ``answer`` raises. Cancelling the caller sends ``notifications/cancelled``
    for the round in flight.
    """
    result = await link.request(method, params, on_progress=on_progress)
    rounds = 0
    while result.get("resultType") == "input_required":
        if answer is None:
            raise HostError(
                ErrorKind.CAPABILITY_NOT_SUPPORTED,
                f"plugin {link.plugin_id} asked for input during {method}, which hostd cannot route",
                plugin=link.plugin_id,
                capability="inputRequests",
            )
        rounds += 1
        if rounds > MAX_INPUT_ROUNDS:
            raise HostError(
                ErrorKind.MCP_UPSTREAM_ERROR,
                f"plugin {link.plugin_id} still asked for input after {MAX_INPUT_ROUNDS} rounds of {method}; "
                "hostd gave up (the server never completed the request)",
                plugin=link.plugin_id,
                rounds=MAX_INPUT_ROUNDS,
            )
        retry = {**(params or {}), **await _next_round(link.plugin_id, result, answer)}
        result = await link.request(method, retry, on_progress=on_progress)
    return result


async def _next_round(plugin_id: str, result: dict[str, Any], answer: InputAnswer) -> dict[str, Any]:
    """What the retry of an ``input_required`` result adds to the request's params:
    ``inputResponses`` (every input request answered) and ``requestState`` exactly as sent.
    A result with only ``requestState`` is retried after 50 ms (the SDK's first backoff step)."""
    requests = result.get("inputRequests")
    state = result.get("requestState")
    extra: dict[str, Any] = {}
    if isinstance(requests, dict) and requests:
        extra["inputResponses"] = await _answer_all(plugin_id, requests, answer)
    else:
        await trio.sleep(_STATE_ONLY_DELAY)
    if state is not None:
        extra["requestState"] = state
    return extra


async def _answer_all(plugin_id: str, requests: dict[str, Any], answer: InputAnswer) -> dict[str, Any]:
    """``{key: answer(method, params)}`` for every input request, concurrently; the first error wins."""
    responses: dict[str, Any] = {}
    failure: list[HostError] = []

    async def one(key: str, request: Any, cancel: trio.CancelScope) -> None:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            failure.append(
                HostError(ErrorKind.MCP_UPSTREAM_ERROR, f"plugin {plugin_id}: input request {key!r} has no method")
            )
            cancel.cancel()
            return
        try:
            responses[key] = await answer(request["method"], request.get("params") or {})
        except HostError as error:
            failure.append(error)
            cancel.cancel()

    async with trio.open_nursery() as nursery:
        for key, request in requests.items():
            nursery.start_soon(one, key, request, nursery.cancel_scope)
    if failure:
        raise failure[0]
    return responses


def offered_features(capabilities: dict[str, Any]) -> set[str]:
    """The client feature names (:data:`hostd.install.manifest.ClientFeature`) in a client
    capabilities object as offered to a plugin: each offered feature (``sampling``,
    ``elicitation``, ``roots``) and each of its sub-features as ``<feature>.<sub>``
    (``sampling.tools``, ``elicitation.form``, ``elicitation.url``). An ``elicitation``
    object naming no mode means form mode (MCP: an empty ``elicitation`` is form-only).
    Used for the expected tool set: a tool declared with ``needs`` is expected exactly
    when every name in it is here."""
    names: set[str] = set()
    for feature in CLIENT_FEATURE_PERMISSIONS:
        value = capabilities.get(feature)
        if value is None:
            continue
        names.add(feature)
        subs = [k for k in value if isinstance(k, str)] if isinstance(value, dict) else []
        if feature == "elicitation" and not subs:
            subs = ["form"]
        names.update(f"{feature}.{sub}" for sub in subs)
    return names


# -- per plugin: client capabilities, server requests, notifications --------------------------


class PluginFeatures:
    """One plugin's side of the client features and notifications (held by its supervisor).

    ``host`` gives the parent's capabilities, its request function and the
    plugin's grants, read at each use (a grant applies from the next start for
    the capability advertised, at once for a refusal).
    """

    def __init__(self, host: Host, plugin_id: str) -> None:
        self._host = host
        self.plugin_id = plugin_id
        #: The MCP log level the parent set with plugins/setLogLevel (a modern era sends it per request).
        self.log_level: str | None = None

    def _plugin(self) -> InstalledPlugin:
        return self._host._plugin(self.plugin_id)

    def client_capabilities(self) -> dict[str, Any]:
        """The client capabilities offered to the plugin: served by the parent AND granted (JSON)."""
        served = self._host.options.client_capabilities
        granted = self._plugin().granted
        return {
            feature: dict(served[feature])
            for feature, permission in CLIENT_FEATURE_PERMISSIONS.items()
            if feature in served and permission in granted
        }

    async def on_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer a server->client request by asking the parent; raise :class:`HostError` to refuse.

        ``sampling/createMessage`` -> parent ``sampling/createMessage {plugin, params}``;
        ``elicitation/create`` -> ``elicitation/create {plugin, params}``; ``roots/list`` ->
        ``roots/list {plugin}``, filtered. A feature not offered: ``CAPABILITY_NOT_SUPPORTED``;
        another method: ``METHOD_NOT_FOUND``; the parent's error, silence past the tool
        timeout, or a cancel: ``PARENT_REQUEST_FAILED`` (and ``$/cancelRequest`` to the parent).
        """
        offered = self.client_capabilities()
        feature = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation", "roots/list": "roots"}
        name = feature.get(method)
        if name is None:
            raise HostError(ErrorKind.METHOD_NOT_FOUND, f"hostd does not serve {method}", plugin=self.plugin_id)
        if name not in offered:
            raise self._not_offered(name)
        if name == "sampling" and (params.get("tools") or params.get("toolChoice")) and "tools" not in offered[name]:
            raise self._not_offered("sampling.tools")
        if name == "elicitation":
            mode = params.get("mode", "form")
            if mode not in offered[name]:
                raise self._not_offered(f"elicitation.{mode}")
        request_parent = self._host.options.request_parent
        if request_parent is None:
            raise self._not_offered(name)
        timeout = self._plugin().manifest.backend.tool_timeout_seconds
        if name == "roots":
            answer = await request_parent(method, {"plugin": self.plugin_id}, timeout)
            return self._granted_roots(answer)
        answer = await request_parent(method, {"plugin": self.plugin_id, "params": params}, timeout)
        if not isinstance(answer, dict):
            raise HostError(ErrorKind.PARENT_REQUEST_FAILED, f"the parent's {method} result is not an object")
        return answer

    async def complete_call(
        self,
        link: PluginLink,
        tool: Any,
        arguments: dict[str, Any],
        on_progress: ProgressFn,
        first: tuple[dict[str, Any], int, bytes],
    ) -> tuple[dict[str, Any], int, bytes]:
        """The final ``tools/call`` response once a modern server's ``input_required`` rounds are done.

        ``first`` is the first ``(response, size, frame)`` (:meth:`PluginLink.call_tool`); while its
        result is ``resultType: "input_required"``, each input request is answered by
        :meth:`on_request` and the call is sent again (a new id) with ``inputResponses`` and the
        unmodified ``requestState``. At most ``MAX_INPUT_ROUNDS`` rounds, then ``MCP_UPSTREAM_ERROR``
        naming the tool. The parent sees one ``tools/call``: progress of every round goes to
        ``on_progress``; cancelling it cancels the round in flight.
        """
        reply, size, raw = first
        rounds = 0
        while True:
            result = reply.get("result")
            if not isinstance(result, dict) or result.get("resultType") != "input_required":
                return reply, size, raw
            rounds += 1
            if rounds > MAX_INPUT_ROUNDS:
                raise HostError(
                    ErrorKind.MCP_UPSTREAM_ERROR,
                    f"{tool.name} still asked for input after {MAX_INPUT_ROUNDS} rounds; hostd gave up "
                    "(the server never completed the call)",
                    plugin=self.plugin_id,
                    tool=tool.name,
                    rounds=MAX_INPUT_ROUNDS,
                )
            extra = await _next_round(self.plugin_id, result, self.on_request)
            reply, size, raw = await link.call_tool(tool.remote_name, arguments, on_progress, extra)

    async def call_as_task(
        self, link: PluginLink, tool: Any, arguments: dict[str, Any], on_progress: ProgressFn
    ) -> tuple[dict[str, Any], int, bytes]:
        """Call a tool whose ``execution.taskSupport`` is ``required`` as a task (MCP 2025-11-25 "Tasks").

        ``tools/call`` with ``task: {}`` creates it (``{task: {taskId, status, pollInterval?}}``);
        ``tasks/get`` is polled every ``pollInterval`` (clamped to 0.05-5 s), each change of
        ``statusMessage`` reported to ``on_progress`` (progress = polls so far); once the task is
        no longer ``working``, ``tasks/result`` (which blocks until the task ends and delivers the
        server's queued requests, answered by :meth:`on_request`) gives the ``tools/call`` result.
        Returns ``(response, size, b"")`` as :meth:`PluginLink.call_tool` does (a JSON-RPC error of
        ``tasks/result`` as the response's ``error``). Cancelling the caller (the parent's cancel,
        the call's timeout) sends ``tasks/cancel`` (shielded, at most 2 s). A server that does not
        declare ``tasks.requests.tools.call`` gets ``CAPABILITY_NOT_SUPPORTED``.
        """
        declared = link.server_capabilities.get("tasks")
        requests = declared.get("requests") if isinstance(declared, dict) else None
        tools = requests.get("tools") if isinstance(requests, dict) else None
        if not isinstance(tools, dict) or not isinstance(tools.get("call"), dict):
            raise HostError(
                ErrorKind.CAPABILITY_NOT_SUPPORTED,
                f"{tool.name} must be called as a task, and plugin {self.plugin_id}'s server does not declare "
                "tasks.requests.tools.call",
                plugin=self.plugin_id,
                tool=tool.name,
                capability="tasks.requests.tools.call",
            )
        reply, size, raw = await link.call_tool(tool.remote_name, arguments, on_progress, {"task": {}})
        created = reply.get("result")
        task = created.get("task") if isinstance(created, dict) else None
        if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
            return reply, size, raw  # an error, or the server answered at once
        task_id = task["taskId"]
        finished = False
        try:
            polls, said = 0, None
            while task.get("status") == "working":
                interval = task.get("pollInterval")
                seconds = interval / 1000 if isinstance(interval, int | float) and not isinstance(interval, bool) else 1
                await trio.sleep(min(5.0, max(0.05, seconds)))
                task = {**task, **await link.request("tasks/get", {"taskId": task_id})}
                polls += 1
                message = task.get("statusMessage")
                if isinstance(message, str) and message != said:
                    said = message
                    await on_progress(polls, None, message)
            try:
                final = await link.request("tasks/result", {"taskId": task_id})
            except PluginRequestError as exc:
                finished = True
                return {"jsonrpc": "2.0", "error": exc.wire()}, len(orjson.dumps(exc.wire())), b""
            finished = True
        finally:
            if not finished and not link.done.is_set():
                with trio.CancelScope(shield=True), trio.move_on_after(2):
                    try:
                        await link.request("tasks/cancel", {"taskId": task_id})
                    except (PluginRequestError, LinkClosed, ReplyTooLarge) as exc:
                        log.info("plugin %s: tasks/cancel of %s: %s", self.plugin_id, task_id, exc)
        return {"jsonrpc": "2.0", "result": final}, len(orjson.dumps(final)), b""

    def _not_offered(self, capability: str) -> HostError:
        return HostError(
            ErrorKind.CAPABILITY_NOT_SUPPORTED,
            f"{capability} was not offered to plugin {self.plugin_id} (the parent does not serve it, or the user "
            f"did not grant {CLIENT_FEATURE_PERMISSIONS.get(capability.split('.', maxsplit=1)[0], capability)})",
            plugin=self.plugin_id,
            capability=capability,
        )

    def _granted_roots(self, answer: Any) -> dict[str, Any]:
        """The parent's ``roots/list`` answer cut to ``file://`` roots inside the plugin's granted folders."""
        roots = answer.get("roots") if isinstance(answer, dict) else None
        if not isinstance(roots, list):
            raise HostError(ErrorKind.PARENT_REQUEST_FAILED, "the parent's roots/list result has no 'roots' array")
        launch = self._plugin().launch
        folders = [real for _, real in launch.folders] if launch is not None else []
        kept = [root for root in roots if isinstance(root, dict) and _inside_any(root.get("uri"), folders)]
        return {"roots": kept}

    async def on_ready(self, link: PluginLink) -> None:
        """Re-apply what the parent set for this plugin to a new instance: the log level of
        ``plugins/setLogLevel`` (modern: in the envelope; legacy: ``logging/setLevel`` when the
        server declares ``logging``; a failure is logged, the plugin keeps running)."""
        level = self.log_level
        if level is None:
            return
        if link.era == "modern":
            link.session.set_log_level(level)
        elif isinstance(link.server_capabilities.get("logging"), dict):
            try:
                await link.request("logging/setLevel", {"level": level})
            except (PluginRequestError, LinkClosed, ReplyTooLarge) as exc:
                log.info("plugin %s: logging/setLevel %s after a start: %s", self.plugin_id, level, exc)

    async def on_notification(self, method: str, params: dict[str, Any]) -> None:
        """Forward the server's resource and prompt notifications (raw) to the parent, naming the plugin."""
        notify = self._host.notify
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str):
                await notify("resources/updated", {"plugin": self.plugin_id, "uri": uri})
        elif method == "notifications/resources/list_changed":
            await notify("resources/listChanged", {"plugin": self.plugin_id})
        elif method == "notifications/prompts/list_changed":
            await notify("prompts/listChanged", {"plugin": self.plugin_id})


def _inside_any(uri: Any, folders: list[str]) -> bool:
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return False
    path = os.path.realpath(unquote(urlparse(uri).path))
    return any(path == folder or path.startswith(folder.rstrip("/") + "/") for folder in folders)


# -- server features as control methods ------------------------------------------------------


def _ready(host: Host, plugin_id: str, capability: str, *members: str) -> tuple[InstalledPlugin, PluginLink]:
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
    plugin: InstalledPlugin,
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


def _bounded(host: Host, plugin_id: str, method: str, result: dict[str, Any]) -> dict[str, Any]:
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


async def resources_list(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/list {plugin, cursor?}`` -> the server's ``{resources, nextCursor?}``."""
    args = p.parse_params(p.PluginPageParams, params)
    plugin, link = _ready(host, args.plugin, "resources")
    return _bounded(
        host, args.plugin, "resources/list", await _ask(plugin, link, "resources/list", _cursor(args.cursor))
    )


async def resource_templates_list(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/templates/list {plugin, cursor?}`` -> the server's ``{resourceTemplates, nextCursor?}``."""
    args = p.parse_params(p.PluginPageParams, params)
    plugin, link = _ready(host, args.plugin, "resources")
    result = await _ask(plugin, link, "resources/templates/list", _cursor(args.cursor))
    return _bounded(host, args.plugin, "resources/templates/list", result)


async def resources_read(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
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


async def resources_subscribe(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/subscribe {plugin, uri}`` -> ``{}``; updates arrive as ``resources/updated``."""
    args = p.parse_params(p.ResourceParams, params)
    plugin, link = _ready(host, args.plugin, "resources", "subscribe")
    await _ask(plugin, link, "resources/subscribe", {"uri": args.uri})
    return {}


async def resources_unsubscribe(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``resources/unsubscribe {plugin, uri}`` -> ``{}``."""
    args = p.parse_params(p.ResourceParams, params)
    plugin, link = _ready(host, args.plugin, "resources", "subscribe")
    await _ask(plugin, link, "resources/unsubscribe", {"uri": args.uri})
    return {}


def _host_prompt(plugin_id: str, prompt: Any) -> dict[str, Any]:
    if not isinstance(prompt, dict) or not isinstance(prompt.get("name"), str):
        raise HostError(ErrorKind.MCP_UPSTREAM_ERROR, f"plugin {plugin_id} listed a prompt without a name")
    return {**prompt, "name": f"{plugin_id}.{prompt['name']}", "plugin": plugin_id}


async def prompts_list(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``prompts/list {plugin?, cursor?}`` -> ``{prompts, nextCursor?}`` with host names ``<plugin>.<name>``.

    With ``plugin``: that plugin's page (``CAPABILITY_NOT_SUPPORTED`` if its server
    has no prompts). Without: every page of every ready plugin that declares
    prompts, in plugin id order (``cursor`` needs ``plugin``).
    """
    args = p.parse_params(p.PromptsListParams, params)
    if args.plugin is not None:
        plugin, link = _ready(host, args.plugin, "prompts")
        result = await _ask(plugin, link, "prompts/list", _cursor(args.cursor))
        prompts = result.get("prompts")
        if not isinstance(prompts, list):
            raise HostError(ErrorKind.MCP_UPSTREAM_ERROR, "prompts/list: the result has no 'prompts' array")
        return _bounded(
            host, args.plugin, "prompts/list", {**result, "prompts": [_host_prompt(args.plugin, x) for x in prompts]}
        )
    if args.cursor is not None:
        raise HostError(ErrorKind.INVALID_PARAMS, "a cursor needs the plugin it came from", field="cursor")
    everything: list[dict[str, Any]] = []
    for plugin_id in sorted(host.plugins):
        plugin = host.plugins[plugin_id]
        running = plugin.supervisor.link
        if running is None or running.server_capabilities.get("prompts") is None:
            continue
        link = running
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = await _ask(plugin, link, "prompts/list", _cursor(cursor))
            prompts = page.get("prompts")
            if not isinstance(prompts, list):
                raise HostError(ErrorKind.MCP_UPSTREAM_ERROR, "prompts/list: the result has no 'prompts' array")
            everything.extend(_host_prompt(plugin_id, x) for x in prompts)
            cursor = page.get("nextCursor") if isinstance(page.get("nextCursor"), str) else None
            if cursor is None:
                break
    return {"prompts": everything}


def _split(host: Host, name: str) -> tuple[str, str]:
    plugin_id, dot, remote = name.partition(".")
    if not dot or not remote:
        raise HostError(ErrorKind.INVALID_PARAMS, f"{name!r} is not a host name '<plugin>.<name>'", field="name")
    host._plugin(plugin_id)
    return plugin_id, remote


async def prompts_get(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
    """``prompts/get {name, arguments?}`` (``name``: ``<plugin>.<prompt>``) -> the server's
    ``{description?, messages}``, bounded like a tool result."""
    args = p.parse_params(p.PromptsGetParams, params)
    plugin_id, remote = _split(host, args.name)
    plugin, link = _ready(host, plugin_id, "prompts")
    request: dict[str, Any] = {"name": remote}
    if args.arguments is not None:
        request["arguments"] = args.arguments
    return _bounded(host, plugin_id, "prompts/get", await _ask(plugin, link, "prompts/get", request, ctx))


async def completion_complete(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
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


async def set_log_level(host: Host, params: Any, ctx: RequestContext) -> dict[str, Any]:
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


#: Control methods served here, registered in ``hostd.host.service.Host.METHODS``.
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
