"""``hostctl demo``: the bundled echo fixture (and the catalog's ``server-everything``) walked through the
whole lifecycle with a temporary state folder, every exchange printed as a transcript (:class:`Trace`).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import trio

from hostd import __version__
from hostd.cli.client import Notification, RpcError
from hostd.cli.connection import (
    ENABLE_TIMEOUT,
    EXIT_FAILED,
    EXIT_OK,
    HOSTD_FAILURES,
    REQUEST_TIMEOUT,
    Failure,
    TracingClient,
    open_hostd,
)
from hostd.cli.render import (
    as_typed,
    content_text,
    describe_launch,
    error_details,
    format_table,
    shorten,
    terminal_safe,
    tool_count_note,
)

# -- hostctl demo ------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
ECHO_PLUGIN = ROOT / "fixtures" / "mcp-echo"
REAL_PLUGIN = ROOT / "manifests" / "server-everything"

#: Substrings of tool names the demo never picks as its "one more" call.
_UNSAFE_TOOL_WORDS = ("long", "sleep", "sampl", "elicit", "trigger", "notif", "exit", "crash", "env")


def _display_params(value: Any) -> Any:
    """Params as shown in a trace: digests abbreviated, everything else as sent."""
    if isinstance(value, Mapping):
        return {k: _display_params(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_display_params(v) for v in value]
    if isinstance(value, str) and value.startswith("sha256:") and len(value) > 24:
        return value[:19] + "…"
    return value


def summarise_status(status: Mapping[str, Any]) -> str:
    """``ready, 7 tools, mcp-echo 1.0.0, protocol 2025-11-25`` (plus restarts and errors)."""
    parts = [str(status.get("status")), f"{status.get('tools_count', 0)} tools"]
    server = " ".join(str(status[k]) for k in ("server_name", "server_version") if status.get(k))
    if server and status.get("status") != "stopped":
        parts.append(server)
        if status.get("protocol_version"):
            parts.append(f"protocol {status['protocol_version']}")
    if status.get("restarts"):
        parts.append(f"restarts {status['restarts']}")
    error = status.get("error")
    if isinstance(error, Mapping):
        parts.append(f"error: {error.get('reason') or error.get('message')}")
    return ", ".join(parts)


def summarise_notification(note: Notification) -> str:
    """One ``<=`` line (without the arrow) for a notification from hostd."""
    params = note.params
    if note.method == "plugins/statusChanged":
        text = str(params.get("status"))
        error = params.get("error")
        if isinstance(error, Mapping):
            text += f": {error.get('reason') or error.get('message')}"
        return text
    if note.method == "tools/listChanged":
        return f"revision {params.get('revision')}"
    if note.method == "plugins/log":
        return shorten(f"{params.get('plugin')} {params.get('source')} {params.get('level')}: {params.get('message')}")
    if note.method == "$/progress":
        total = f"/{params['total']}" if params.get("total") is not None else ""
        message = f" {params['message']}" if params.get("message") else ""
        return f"request {params.get('requestId')}: {params.get('progress')}{total}{message}"
    return shorten(params)


def summarise_result(method: str, result: Any) -> list[str]:
    """The ``<-`` line (without the arrow) and indented detail lines for a result."""
    if method == "plugins/install":
        permissions = ", ".join(result.get("permissions") or []) or "none"
        head = (
            f"installed {result['id']} {result['version']} ({result['name']}), {len(result.get('tools') or [])} tools"
        )
        return [f"{head}, permissions {permissions}", *describe_launch(result)]
    if method == "plugins/prepare":  # a PluginInfo: what was installed, not whether it runs (it does not yet)
        prepare = (result.get("launch") or {}).get("prepare") or {}
        resolved = prepare.get("resolved") or {}
        packages = ", ".join(f"{name} {version}" for name, version in resolved.items()) or ", ".join(
            prepare.get("packages") or []
        )
        return [f"{prepare.get('state', '?')} with {prepare.get('manager', '?')}: {packages or 'nothing'}"]
    if method == "plugins/grant":
        return [f"granted {', '.join(result.get('granted') or []) or 'nothing'}"]
    if method == "plugins/approve":
        digest = (result.get("launch") or {}).get("digest", "?")
        return [f"approved {_display_params(digest)}"]
    if method.startswith("plugins/") and isinstance(result, Mapping) and "status" in result:
        return [summarise_status(result)]
    if method == "tools/list":
        tools = result["tools"]
        rows = [
            [t["name"], t.get("permission") or "-", shorten((t.get("description") or "").split("\n")[0], 60)]
            for t in tools
        ]
        table = format_table(["TOOL", "PERMISSION", "DESCRIPTION"], rows).splitlines()
        return [f"{len(tools)} tools, revision {result.get('revision')}", *table]
    if method == "tools/call":
        lines = content_text({"content": result.get("content")}).splitlines() or ["(no content)"]
        lines = [shorten(line) for line in lines[:5]]
        if "structuredContent" in result:
            lines.append(f"structuredContent {shorten(result['structuredContent'])}")
        return lines
    return [shorten(result) if result is not None else "null"]


class Trace:
    """Prints a readable transcript of the exchanges with one hostd.

    ``->`` a request or notification sent, ``<-`` its answer, ``<=`` a
    notification received (in the order it arrived relative to the answers).
    """

    def __init__(self, client: TracingClient, out: TextIO = sys.stdout) -> None:
        self.client = client
        self.out = out
        self._shown = 0
        self._sent: dict[int | str, float] = {}

    def say(self, line: str = "") -> None:
        """Print one line now."""
        print(terminal_safe(line), file=self.out, flush=True)

    def notifications(self, upto: int | None = None) -> None:
        """Print the notifications received since the last call (up to index ``upto``)."""
        end = len(self.client.notifications) if upto is None else upto
        for note in self.client.notifications[self._shown : end]:
            self.say(f"<= {note.method} {summarise_notification(note)}")
        self._shown = max(self._shown, end)

    async def send(self, method: str, params: Any) -> Callable[[], Any]:
        """Print ``-> method params`` and send the request; return its response awaitable."""
        self.notifications()
        self.say(f"-> {method} {json.dumps(_display_params(params), ensure_ascii=False)}")
        response: Callable[[], Any] = await self.client.start(method, params)
        self._sent[response.request_id] = trio.current_time()  # type: ignore[attr-defined]
        return response

    async def answer(self, method: str, response: Callable[[], Any], *, timeout: float = REQUEST_TIMEOUT) -> Any:
        """Await ``response``; print its notifications and ``<- summary`` (or the error); return the result."""
        rid = response.request_id  # type: ignore[attr-defined]
        started = self._sent.pop(rid, trio.current_time())
        try:
            with trio.fail_after(timeout):
                result = await response()
        except RpcError as exc:
            self.notifications(self.client.answered_after.get(rid))
            self.say(f"<- error {exc.code} {exc.kind}: {exc.message}  ({trio.current_time() - started:.2f} s)")
            for line in error_details(exc.data, exc.message):
                self.say(f"   {line}")
            raise
        self.notifications(self.client.answered_after.get(rid))
        head, *rest = summarise_result(method, result)
        self.say(f"<- {head}  ({trio.current_time() - started:.2f} s)")
        for line in rest:
            self.say(f"   {line}")
        return result

    async def request(self, method: str, params: Any, *, timeout: float = REQUEST_TIMEOUT) -> Any:
        """Send, await and print one request; return its result (raises :class:`RpcError`)."""
        return await self.answer(method, await self.send(method, params), timeout=timeout)

    async def notify(self, method: str, params: Any) -> None:
        """Print ``-> method params`` and send a notification."""
        self.notifications()
        self.say(f"-> {method} {json.dumps(params, ensure_ascii=False)}")
        await self.client.notify(method, params)


async def _walk_to_ready(trace: Trace, folder: Path) -> dict[str, Any]:
    info = await trace.request("plugins/install", {"path": str(folder)})
    plugin_id = info["id"]
    if ((info.get("launch") or {}).get("prepare") or {}).get("state") == "needed":  # npx, uvx: install it first
        info = await trace.request("plugins/prepare", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    await trace.request("plugins/grant", {"id": plugin_id, "permissions": info["permissions"]})
    digest = (info.get("launch") or {}).get("digest")
    if digest is not None:
        await trace.request("plugins/approve", {"id": plugin_id, "digest": digest})
    status = await trace.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    note = tool_count_note(info, status)  # why the count at install and the one at ready differ, where they do
    if note is not None:
        trace.say(f"   ({note})")
    return dict(info)


async def demo_echo(trace: Trace, folder: Path = ECHO_PLUGIN) -> None:
    """The echo part: the whole lifecycle of the bundled fixture, cancellation included."""
    info = await _walk_to_ready(trace, folder)
    plugin_id = info["id"]
    await trace.request("tools/list", {"plugin": plugin_id})
    called = await trace.request("tools/call", {"name": f"{plugin_id}.echo", "arguments": {"text": "hello from hostd"}})
    if content_text(called) != "hello from hostd":
        raise Failure("DEMO", f"echo answered {content_text(called)!r}")

    sleep = {"name": f"{plugin_id}.sleep", "arguments": {"seconds": 30}}
    response = await trace.send("tools/call", sleep)
    rid = response.request_id  # type: ignore[attr-defined]
    trace.say(f"   (request id {rid}; cancelling it in 0.5 s)")
    await trio.sleep(0.5)
    await trace.notify("$/cancelRequest", {"id": rid})
    try:
        result = await trace.answer("tools/call", response, timeout=5)
    except RpcError as exc:
        if exc.code != -32800:
            raise
    else:
        raise Failure("DEMO", f"the cancelled call answered {shorten(result)}")

    restarted = await trace.request("plugins/restart", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    if restarted.get("status") != "ready":
        raise Failure("DEMO", f"restart left {plugin_id} {restarted.get('status')}")
    await trace.request("tools/call", {"name": f"{plugin_id}.echo", "arguments": {"text": "hello again"}})
    await trace.request("plugins/disable", {"id": plugin_id})


def example_arguments(tool: Mapping[str, Any], text: str = "hello from hostd") -> dict[str, Any] | None:
    """Arguments for ``tool`` built from its ``inputSchema``'s required properties
    (strings get ``text``, numbers 2, 3, ...); ``None`` when one cannot be guessed."""
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    number = 2
    for name in schema.get("required") or []:
        kind = (properties.get(name) or {}).get("type")
        if kind == "string":
            arguments[name] = text
        elif kind in ("number", "integer"):
            arguments[name] = number
            number += 1
        elif kind == "boolean":
            arguments[name] = True
        else:
            return None
    return arguments


def _pick_second_tool(tools: Sequence[Mapping[str, Any]], plugin_id: str) -> Mapping[str, Any] | None:
    by_remote = {str(t["name"]).removeprefix(f"{plugin_id}."): t for t in tools}
    for preferred in ("get-sum", "add", "get-tiny-image", "getTinyImage"):
        if preferred in by_remote and example_arguments(by_remote[preferred]) is not None:
            return by_remote[preferred]
    for remote, tool in by_remote.items():
        if remote == "echo" or any(word in remote.lower() for word in _UNSAFE_TOOL_WORDS):
            continue
        if example_arguments(tool) is not None:
            return tool
    return None


async def demo_real(trace: Trace, folder: Path = REAL_PLUGIN) -> str:
    """The real-server part; returns a one-line outcome (never raises for hostd errors)."""
    if not folder.is_dir():
        trace.say(f"skipped: no plugin folder at {folder} (the real server is not in the catalog here)")
        return f"skipped (no {folder.name} folder)"
    plugin_id: str | None = None
    try:
        trace.say("(the first start may download the server; later starts use the cache)")
        info = await _walk_to_ready(trace, folder)
        plugin_id = info["id"]
        listing = await trace.request("tools/list", {"plugin": plugin_id})
        tools = listing["tools"]
        echo = next((t for t in tools if t["name"] == f"{plugin_id}.echo"), None)
        if echo is None:
            raise Failure("DEMO", f"{plugin_id} has no echo tool")
        calls = [echo]
        second = _pick_second_tool(tools, plugin_id)
        if second is not None:
            calls.append(second)
        for tool in calls:
            arguments = example_arguments(tool) or {}
            await trace.request("tools/call", {"name": tool["name"], "arguments": arguments})
        await trace.request("plugins/disable", {"id": plugin_id})
    except (Failure, *HOSTD_FAILURES) as exc:
        failure = Failure.from_exception(exc)
        trace.say(f"real server FAILED: {failure.kind}: {failure.message}")
        if plugin_id is not None:
            with trio.move_on_after(15):
                try:
                    await trace.client.request("plugins/disable", {"id": plugin_id})
                except HOSTD_FAILURES:
                    pass
        return f"failed ({failure.kind})"
    return "ok"


async def run_demo(*, real: bool, out: TextIO = sys.stdout) -> int:
    """``hostctl demo``: 0 when the echo part succeeded (whatever the real server did), else 1."""
    echo_ok = False
    real_outcome = "not run (--no-real)" if not real else "not run"
    exit_code: int | None = None
    try:
        async with open_hostd() as client:
            trace = Trace(client, out)
            trace.say(f"hostd {__version__} started (pid {client.process.pid}), initialized by hostctl")
            trace.say()
            trace.say(f"== echo fixture: {relative_path(ECHO_PLUGIN)}")
            try:
                await demo_echo(trace)
                echo_ok = True
            except (Failure, *HOSTD_FAILURES) as exc:
                failure = Failure.from_exception(exc)
                trace.say(f"echo part FAILED: {failure.kind}: {failure.message}")
            if real and echo_ok:
                trace.say()
                trace.say(f"== real server: {relative_path(REAL_PLUGIN)}")
                real_outcome = await demo_real(trace)
            trace.say()
            trace.say("== shutdown")
            trace.notifications()
            trace.say("-> shutdown")
            trace.say("-> exit")
            exit_code = await client.close()
            trace.notifications()
    except HOSTD_FAILURES as exc:
        print("\n".join(Failure.from_exception(exc).lines()), file=sys.stderr)
        return EXIT_FAILED
    print(f"hostd exited with code {exit_code}", file=out)
    print(file=out)
    print(f"demo: echo fixture {'ok' if echo_ok else 'FAILED'}; real server {real_outcome}", file=out)
    if echo_ok:
        # The demo's state folder was its own, temporary: nothing of it is left, and the user's is untouched.
        print("(the demo used a temporary state folder of its own, now removed; yours is untouched)", file=out)
        command = as_typed(f"hostctl install {shlex.quote(relative_path(ECHO_PLUGIN))}")
        print(f"next: install the echo fixture in your state folder: {command}", file=out)
    return EXIT_OK if echo_ok and exit_code == 0 else EXIT_FAILED


def relative_path(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it, else as it is."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
