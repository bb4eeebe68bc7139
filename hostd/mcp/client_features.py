"""MCP features beyond tools: the client features (sampling, elicitation, roots, answered by
the parent) and the one function that sends a raw request to a plugin's server. The server
features served to the parent as control methods (resources, prompts, completion, logging)
are in :mod:`hostd.host.feature_methods`; both are described here.

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
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import orjson
import trio

from hostd.control.core import Notify, ParentRequest
from hostd.mcp.link import LinkClosed, PluginLink, ReplyTooLarge
from hostd.mcp.permissions import CLIENT_FEATURE_PERMISSIONS
from hostd.mcp.session import PluginRequestError
from hostd.wire.errors import ErrorKind, HostError

log = logging.getLogger("hostd.mcp.client_features")

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


# -- what the client features read of the host ------------------------------------------------


class FeatureParent(Protocol):
    """What one plugin's client features read of the host, at each use (a grant applies from the next start
    for the capability advertised, at once for a refusal). The host's is
    :class:`hostd.host.feature_methods.PluginFeatureParent`; nothing here reaches into the host itself.
    """

    def served_capabilities(self) -> dict[str, Any]:
        """The client features the parent serves (``initialize.params.capabilities``, parsed), as JSON."""
        ...

    def request_parent(self) -> ParentRequest | None:
        """The hostd->parent request function, or ``None`` before the control channel set one."""
        ...

    def granted(self) -> Collection[str]:
        """The permissions the user granted the plugin (``plugins/grant``)."""
        ...

    def tool_timeout(self) -> float:
        """The plugin's tool timeout, in seconds (manifest ``backend.tool_timeout_seconds``)."""
        ...

    def granted_folders(self) -> list[str]:
        """The real paths of the folders granted to the plugin's current launch (empty without a launch)."""
        ...

    @property
    def notify(self) -> Notify:
        """Sends a notification to the parent."""
        ...


# -- per plugin: client capabilities, server requests, notifications --------------------------


class PluginFeatures:
    """One plugin's side of the client features and notifications (held by its supervisor).

    ``parent`` (:class:`FeatureParent`) gives the parent's capabilities, its request function and
    the plugin's grants, read at each use (a grant applies from the next start for
    the capability advertised, at once for a refusal).
    """

    def __init__(self, parent: FeatureParent, plugin_id: str) -> None:
        self._parent = parent
        self.plugin_id = plugin_id
        #: The MCP log level the parent set with plugins/setLogLevel (a modern era sends it per request).
        self.log_level: str | None = None

    def client_capabilities(self) -> dict[str, Any]:
        """The client capabilities offered to the plugin: served by the parent AND granted (JSON)."""
        served = self._parent.served_capabilities()
        granted = self._parent.granted()
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
        request_parent = self._parent.request_parent()
        if request_parent is None:
            raise self._not_offered(name)
        timeout = self._parent.tool_timeout()
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
        folders = self._parent.granted_folders()
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
        notify = self._parent.notify
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
