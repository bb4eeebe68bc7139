"""``hostctl``: the parent side of hostd on the command line, for people and scripts.

Every command starts a real ``hostd serve`` through :class:`hostd.client.HostdClient`
(with :func:`hostd.client.plugin_environment`, so a manifest's bare ``python3``
is this interpreter), drives it over the control protocol exactly as an
embedding application would, and shuts it down cleanly before exiting.

``hostctl call PLUGIN_DIR TOOL [JSON_ARGS]``
    install, grant every declared permission, approve the launch shown by
    install (printed to stderr: the user running the command approves it),
    enable, call one tool, print its text content (``--json``: the whole result).
``hostctl status [PLUGIN_DIR ...]``
    install and enable each folder; print one row per plugin.
``hostctl demo [--no-real]``
    walk the bundled echo fixture (and the catalog's ``server-everything``)
    through the whole lifecycle, printing every exchange.

Exit codes: 0 success, 1 a failure reported by hostd (or hostd gone), 2 usage.

Everything printed that a plugin or a manifest controls (launch arguments,
server info, tool names and results, error messages, stderr tails, config
names) goes through :func:`terminal_safe` first: a control character or a
bidirectional override reaches the terminal as a visible escape, never as a
command (issue 10: an escape sequence in an argument could hide what is
being approved).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
import unicodedata
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import trio

from hostd import __version__
from hostd.client import HostdClient, Notification, RpcError, plugin_environment
from hostd.control import PROTOCOL_VERSION
from hostd.state import default_state_dir

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

ROOT = Path(__file__).resolve().parent.parent
ECHO_PLUGIN = ROOT / "fixtures" / "mcp-echo"
REAL_PLUGIN = ROOT / "manifests" / "server-everything"

#: Generous client-side bounds: hostd enforces the manifest's own timeouts first.
ENABLE_TIMEOUT = 900.0
REQUEST_TIMEOUT = 60.0
CALL_TIMEOUT = 600.0

#: Substrings of tool names the demo never picks as its "one more" call.
_UNSAFE_TOOL_WORDS = ("long", "sleep", "sampl", "elicit", "trigger", "notif", "exit", "crash", "env")


# Format characters that reorder or hide text on a terminal (bidi embeddings, overrides
# and isolates, zero-width marks); control characters (Cc: C0, DEL, C1) are found by category.
_HIDING_FORMATS = frozenset(
    "\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff"
)


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character and bidi/zero-width format character escaped.

    Each becomes ``\\uXXXX`` (a valid JSON escape too, so ``--json`` output stays
    JSON). ``\\n`` and ``\\t`` are kept unless ``one_line``: then a value cannot
    start a line of its own (a forged "approving the launch" line, say).
    """
    kept = "" if one_line else "\n\t"
    if text.isprintable() and not any(c in _HIDING_FORMATS for c in text):
        return text
    return "".join(
        f"\\u{ord(c):04x}" if c not in kept and (c in _HIDING_FORMATS or unicodedata.category(c) == "Cc") else c
        for c in text
    )


class Failure(Exception):
    """A failure to report as ``error: <kind>: <message>`` (exit 1)."""

    def __init__(self, kind: str, message: str, details: Sequence[str] = ()) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.details = list(details)

    @classmethod
    def from_exception(cls, exc: BaseException) -> Failure:
        """Turn an :class:`RpcError`, a dead hostd or a client-side timeout into a Failure."""
        if isinstance(exc, Failure):
            return exc
        if isinstance(exc, RpcError):
            return cls(exc.kind or str(exc.code), exc.message, error_details(exc.data, exc.message))
        if isinstance(exc, trio.TooSlowError):
            return cls("TIMEOUT", "hostd did not answer in time")
        if isinstance(exc, EOFError | trio.BrokenResourceError | trio.ClosedResourceError):
            return cls("HOSTD_UNAVAILABLE", f"hostd exited unexpectedly ({exc or type(exc).__name__})")
        return cls(type(exc).__name__, str(exc))

    def lines(self) -> list[str]:
        """The report: ``error: KIND: message`` then indented details."""
        return [
            terminal_safe(f"error: {self.kind}: {self.message}", one_line=True),
            *(f"  {terminal_safe(line, one_line=True)}" for line in self.details),
        ]


_HOSTD_FAILURES = (RpcError, EOFError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError)


def error_details(data: Mapping[str, Any], message: str = "") -> list[str]:
    """Extra lines for an error's ``data``: manifest field errors (those not
    already in ``message``), the upstream error, then the stderr tail."""
    lines: list[str] = []
    for item in data.get("errors") or []:
        if isinstance(item, Mapping):
            text = f"{item['field']}: {item.get('message', '')}" if item.get("field") else str(item.get("message", ""))
            if text and text not in message:
                lines.append(text)
    upstream = data.get("upstream")
    if isinstance(upstream, Mapping):
        lines.append(f"upstream error {upstream.get('code')}: {upstream.get('message')}")
    tail = data.get("stderrTail") or []
    if tail:
        lines.append("stderr tail:")
        lines.extend(f"  {line}" for line in tail)
    return lines


# -- talking to hostd ------------------------------------------------------------


class TracingClient(HostdClient):
    """A :class:`HostdClient` that also remembers how many notifications had
    arrived when each response did, so a trace can show them in wire order."""

    def __init__(self, process: trio.Process) -> None:
        super().__init__(process)
        self.answered_after: dict[int | str, int] = {}

    def _route(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if "method" not in message and isinstance(rid, int | str):
            self.answered_after[rid] = len(self.notifications)
        super()._route(message)


@asynccontextmanager
async def open_hostd(state_dir: str | None = None) -> AsyncIterator[TracingClient]:
    """Start an initialized ``hostd serve`` (a temporary state folder unless
    ``state_dir``); on exit it is sent ``shutdown`` and ``exit`` and waited for."""
    with tempfile.TemporaryDirectory(prefix="hostctl-") as scratch:
        state = state_dir if state_dir is not None else os.path.join(scratch, "state")
        initialize = {
            "clientInfo": {"name": "hostctl", "version": __version__},
            "protocolVersion": PROTOCOL_VERSION,
        }
        spawn = TracingClient.spawn(
            ["--state-dir", state, "--log-level", "error"], env=plugin_environment(), initialize=initialize
        )
        try:
            async with spawn as client:
                assert isinstance(client, TracingClient)
                yield client
        except BaseExceptionGroup as group:
            # HostdClient.spawn runs the body inside a nursery, which wraps what
            # the body raised; hand a lone exception back unwrapped.
            leaves = _leaves(group)
            if len(leaves) == 1 and not isinstance(leaves[0], trio.Cancelled):
                raise leaves[0] from None
            raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def describe_launch(info: Mapping[str, Any]) -> list[str]:
    """Human lines for ``PluginInfo.launch``: the command line, where and how it runs."""
    return [terminal_safe(line, one_line=True) for line in _launch_lines(info)]


def _launch_lines(info: Mapping[str, Any]) -> list[str]:
    launch = info.get("launch")
    if not isinstance(launch, Mapping):
        return ["launch: unknown"]
    if "digest" not in launch:
        return [f"launch: cannot be resolved: {launch.get('error', '?')}"]
    command = shlex.join([str(launch.get("command", "?")), *map(str, launch.get("args") or [])])
    lines = [f"launch: {command}"]
    executable = launch.get("executable")
    if executable and executable != launch.get("command"):
        lines[0] += f"   ({launch.get('command')} = {executable})"
    isolation = ", ".join(launch.get("isolation") or []) or "none"
    lines.append(f"in {launch.get('cwd')}")
    lines.append(f"isolation {isolation}; environment {', '.join(launch.get('envKeys') or []) or 'empty'}")
    return lines


async def prepare(
    client: HostdClient,
    folder: str | Path,
    *,
    notice: TextIO | None = sys.stderr,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """install -> prepare (npx, uvx) -> grant every declared permission -> approve the shown launch -> enable.

    The launch being approved is printed to ``notice`` first. Returns
    ``(PluginInfo, PluginStatus)``; raises :class:`RpcError` on failure.
    """
    info: dict[str, Any] = await client.request("plugins/install", {"path": str(folder)}, timeout=REQUEST_TIMEOUT)
    plugin_id = info["id"]
    if ((info.get("launch") or {}).get("prepare") or {}).get("state") == "needed":  # npx, uvx: install it first
        info = await client.request("plugins/prepare", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    await client.request("plugins/grant", {"id": plugin_id, "permissions": info["permissions"]})
    launch = info.get("launch") or {}
    if "digest" in launch:  # otherwise enable reports why the launch cannot be resolved
        if notice is not None:
            lines = describe_launch(info)
            shown = terminal_safe(str(plugin_id), one_line=True)
            print(f"hostctl: approving the launch of {shown}: {lines[0].removeprefix('launch: ')}", file=notice)
            for line in lines[1:]:
                print(f"  {line}", file=notice)
        info = await client.request("plugins/approve", {"id": plugin_id, "digest": launch["digest"]})
    status: dict[str, Any] = await client.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    return info, status


async def resolve_tool(client: HostdClient, plugin_id: str, tool: str) -> str:
    """The host name of ``tool`` in ``plugin_id``: accepts the remote name, the
    host name (``<plugin>.<remote>``) or the provider-safe function name."""
    listing = await client.request("tools/list", {"plugin": plugin_id})
    tools: list[dict[str, Any]] = listing["tools"]
    for candidate in tools:
        if candidate["name"] in (tool, f"{plugin_id}.{tool}") or candidate.get("function_name") == tool:
            return str(candidate["name"])
    names = ", ".join(t["name"].removeprefix(f"{plugin_id}.") for t in tools)
    raise Failure("TOOL_NOT_FOUND", f"plugin {plugin_id} has no tool {tool!r} (it has: {names})")


def content_text(result: Mapping[str, Any]) -> str:
    """A tool result's content as text: text items verbatim, others as a short tag."""
    parts: list[str] = []
    for item in result.get("content") or []:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {item.get('mimeType', '?')}, {len(str(item.get('data', '')))} base64 chars]")
        elif kind == "resource":
            resource = item.get("resource") or {}
            parts.append(f"[resource {resource.get('uri', '?')}]")
        elif kind == "resource_link":
            parts.append(f"[link {item.get('uri', '?')}]")
        else:
            parts.append(f"[{kind}]")
    if not parts and "structuredContent" in result:
        return json.dumps(result["structuredContent"], ensure_ascii=False)
    return "\n".join(parts)


# -- hostctl call ------------------------------------------------------------------


async def run_call(
    folder: str, tool: str, arguments: dict[str, Any], *, timeout: float | None, state_dir: str | None, as_json: bool
) -> int:
    """``hostctl call``: print the tool's result; ``error: KIND: message`` and 1 on failure."""
    try:
        async with open_hostd(state_dir) as client:
            info, _ = await prepare(client, folder)
            name = await resolve_tool(client, info["id"], tool)
            params: dict[str, Any] = {"name": name, "arguments": arguments}
            if timeout is not None:
                params["timeoutMs"] = max(1, math.ceil(timeout * 1000))
            bound = timeout + 10 if timeout is not None else CALL_TIMEOUT
            result: dict[str, Any] = await client.request("tools/call", params, timeout=bound)
    except (Failure, *_HOSTD_FAILURES) as exc:
        print("\n".join(Failure.from_exception(exc).lines()), file=sys.stderr)
        return EXIT_FAILED
    if as_json:
        print(terminal_safe(json.dumps(result, indent=2, ensure_ascii=False)))
    else:
        print(terminal_safe(content_text(result)))
    return EXIT_OK


# -- hostctl status ----------------------------------------------------------------


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks trimmed; cells made
    terminal-safe (:func:`terminal_safe`, one line each)."""
    table = [list(header), *([terminal_safe(cell, one_line=True) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def _status_row(plugin_id: str, status: Mapping[str, Any]) -> list[str]:
    server = " ".join(str(status[k]) for k in ("server_name", "server_version") if status.get(k))
    error = status.get("error")
    reason = error.get("reason") or error.get("message") if isinstance(error, Mapping) else error
    return [
        plugin_id,
        str(status.get("status", "?")),
        str(status.get("tools_count", 0)),
        server or "-",
        str(status.get("protocol_version") or "-"),
        str(reason or ""),
    ]


async def run_status(folders: Sequence[str], *, state_dir: str | None) -> int:
    """``hostctl status``: install and enable each folder; print one row per plugin."""
    failed = False
    rows: list[list[str]] = []
    errors: dict[str, str] = {}  # plugin id (or folder name when install failed) -> error
    try:
        async with open_hostd(state_dir) as client:
            for folder in folders:
                try:
                    await prepare(client, folder)
                except RpcError as exc:
                    failed = True
                    errors[str(exc.data.get("plugin") or Path(folder).name)] = f"{exc.kind}: {exc.message}"
            listing = await client.request("plugins/list", {})
            for info in listing["plugins"]:
                status = await client.request("plugins/status", {"id": info["id"]})
                failed = failed or status.get("status") != "ready"
                row = _status_row(info["id"], status)
                error = errors.pop(info["id"], "")
                row[-1] = row[-1] or error
                rows.append(row)
    except _HOSTD_FAILURES as exc:
        print("\n".join(Failure.from_exception(exc).lines()), file=sys.stderr)
        return EXIT_FAILED
    rows.extend([name, "not installed", "0", "-", "-", error] for name, error in errors.items())
    if not rows:
        print(f"hostd {__version__}: no plugins")
        return EXIT_OK
    rows.sort(key=lambda row: row[0])
    print(format_table(["PLUGIN", "STATUS", "TOOLS", "SERVER", "PROTOCOL", "ERROR"], rows))
    return EXIT_FAILED if failed else EXIT_OK


# -- hostctl import ----------------------------------------------------------------


async def run_import(config_file: str, *, state_dir: str) -> int:
    """``hostctl import FILE``: install every server of an mcpServers config into ``state_dir``."""
    try:
        text = Path(config_file).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot read {config_file}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    try:
        async with open_hostd(state_dir) as client:
            try:
                result = await client.request("plugins/import", {"config": text})
            except RpcError as exc:
                print(terminal_safe(f"error: {exc.kind}: {exc.message}", one_line=True), file=sys.stderr)
                entries = exc.data.get("entries", [])
                if entries:
                    print(_import_table(entries), file=sys.stderr)
                return EXIT_FAILED
    except _HOSTD_FAILURES as exc:
        print("\n".join(Failure.from_exception(exc).lines()), file=sys.stderr)
        return EXIT_FAILED
    print(_import_table(result["entries"]))
    print(f"state: {state_dir}; approve and enable each plugin from your app (its tools are recorded at first enable)")
    return EXIT_OK


def _import_table(entries: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            str(e.get("name")),
            str(e.get("outcome")),
            str(e.get("id") or "-"),
            "; ".join([*([e["message"]] if e.get("message") else []), *e.get("notes", [])]) or "",
        ]
        for e in entries
    ]
    return format_table(["NAME", "OUTCOME", "PLUGIN", "NOTES"], rows)


# -- hostctl demo ------------------------------------------------------------------


def _shorten(value: Any, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
        return _shorten(f"{params.get('plugin')} {params.get('source')} {params.get('level')}: {params.get('message')}")
    if note.method == "$/progress":
        total = f"/{params['total']}" if params.get("total") is not None else ""
        message = f" {params['message']}" if params.get("message") else ""
        return f"request {params.get('requestId')}: {params.get('progress')}{total}{message}"
    return _shorten(params)


def summarise_result(method: str, result: Any) -> list[str]:
    """The ``<-`` line (without the arrow) and indented detail lines for a result."""
    if method == "plugins/install":
        permissions = ", ".join(result.get("permissions") or []) or "none"
        head = (
            f"installed {result['id']} {result['version']} ({result['name']}), {len(result.get('tools') or [])} tools"
        )
        return [f"{head}, permissions {permissions}", *describe_launch(result)]
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
            [t["name"], t.get("permission") or "-", _shorten((t.get("description") or "").split("\n")[0], 60)]
            for t in tools
        ]
        table = format_table(["TOOL", "PERMISSION", "DESCRIPTION"], rows).splitlines()
        return [f"{len(tools)} tools, revision {result.get('revision')}", *table]
    if method == "tools/call":
        lines = content_text({"content": result.get("content")}).splitlines() or ["(no content)"]
        lines = [_shorten(line) for line in lines[:5]]
        if "structuredContent" in result:
            lines.append(f"structuredContent {_shorten(result['structuredContent'])}")
        return lines
    return [_shorten(result) if result is not None else "null"]


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
    await trace.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
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
        raise Failure("DEMO", f"the cancelled call answered {_shorten(result)}")

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
    except (Failure, *_HOSTD_FAILURES) as exc:
        failure = Failure.from_exception(exc)
        trace.say(f"real server FAILED: {failure.kind}: {failure.message}")
        if plugin_id is not None:
            with trio.move_on_after(15):
                try:
                    await trace.client.request("plugins/disable", {"id": plugin_id})
                except _HOSTD_FAILURES:
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
            trace.say(f"== echo fixture: {_relative(ECHO_PLUGIN)}")
            try:
                await demo_echo(trace)
                echo_ok = True
            except (Failure, *_HOSTD_FAILURES) as exc:
                failure = Failure.from_exception(exc)
                trace.say(f"echo part FAILED: {failure.kind}: {failure.message}")
            if real and echo_ok:
                trace.say()
                trace.say(f"== real server: {_relative(REAL_PLUGIN)}")
                real_outcome = await demo_real(trace)
            trace.say()
            trace.say("== shutdown")
            trace.notifications()
            trace.say("-> shutdown")
            trace.say("-> exit")
            exit_code = await client.close()
            trace.notifications()
    except _HOSTD_FAILURES as exc:
        print("\n".join(Failure.from_exception(exc).lines()), file=sys.stderr)
        return EXIT_FAILED
    print(f"hostd exited with code {exit_code}", file=out)
    print(file=out)
    print(f"demo: echo fixture {'ok' if echo_ok else 'FAILED'}; real server {real_outcome}", file=out)
    return EXIT_OK if echo_ok and exit_code == 0 else EXIT_FAILED


def _relative(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# -- command line ----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``hostctl`` (subcommands ``call``, ``status``, ``demo``)."""
    parser = argparse.ArgumentParser(
        prog="hostctl",
        description="Drive a hostd (MCP plugin host daemon) from the command line: each command starts its own "
        "hostd, talks the control protocol to it, and shuts it down.",
    )
    parser.add_argument("--version", action="version", version=f"hostctl {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    call = commands.add_parser(
        "call",
        help="install, approve and enable a plugin folder, then call one tool",
        description="Install PLUGIN_DIR, grant every permission it declares, approve its launch (shown on stderr), "
        "enable it, call TOOL and print the result's text.",
    )
    call.add_argument("plugin_dir", metavar="PLUGIN_DIR", help="a folder holding plugin.yaml or plugin.json")
    call.add_argument("tool", metavar="TOOL", help="the tool: remote name (echo) or host name (mcp-echo.echo)")
    call.add_argument("json_args", metavar="JSON_ARGS", nargs="?", default="{}", help="arguments as a JSON object")
    call.add_argument("--timeout", type=float, metavar="S", help="tool timeout in seconds (default: the manifest's)")
    call.add_argument("--state-dir", metavar="DIR", help="hostd state folder (default: a temporary one)")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")

    status = commands.add_parser(
        "status",
        help="install and enable plugin folders, print their status",
        description="Install, approve and enable each PLUGIN_DIR, then print one row per plugin.",
    )
    status.add_argument("plugin_dirs", metavar="PLUGIN_DIR", nargs="*", help="plugin folders")
    status.add_argument("--state-dir", metavar="DIR", help="hostd state folder (default: a temporary one)")

    demo = commands.add_parser(
        "demo",
        help="walk the bundled echo plugin (and a real MCP server) through the whole lifecycle",
        description="install -> grant -> approve -> enable -> tools/list -> call -> cancel -> restart -> disable, "
        f"on {_relative(ECHO_PLUGIN)} and, unless --no-real, {_relative(REAL_PLUGIN)}.",
    )
    demo.add_argument("--no-real", action="store_true", help="skip the real third-party server")

    importer = commands.add_parser(
        "import",
        help="install the servers of an mcpServers config (Claude Desktop, Cursor, VS Code...)",
        description="Install every server of CONFIG (mcpServers / servers JSON, comments allowed) as a plugin in "
        "hostd's state folder; all or nothing.",
    )
    importer.add_argument("config", metavar="CONFIG", help="the config file")
    importer.add_argument("--state-dir", metavar="DIR", help="hostd state folder (default: the user's state folder)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hostctl`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "call":
            try:
                arguments = json.loads(args.json_args)
            except ValueError as exc:
                parser.error(f"JSON_ARGS is not valid JSON: {exc}")
            if not isinstance(arguments, dict):
                parser.error("JSON_ARGS must be a JSON object")
            if args.timeout is not None and not (args.timeout > 0 and math.isfinite(args.timeout)):
                parser.error("--timeout must be a positive number of seconds")
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK

    try:
        if args.command == "call":
            return trio.run(
                lambda: run_call(
                    args.plugin_dir,
                    args.tool,
                    arguments,
                    timeout=args.timeout,
                    state_dir=args.state_dir,
                    as_json=args.json,
                )
            )
        if args.command == "import":
            state_dir = args.state_dir if args.state_dir is not None else str(default_state_dir())
            return trio.run(lambda: run_import(args.config, state_dir=state_dir))
        if args.command == "status":
            return trio.run(lambda: run_status(args.plugin_dirs, state_dir=args.state_dir))
        return trio.run(lambda: run_demo(real=not args.no_real))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
