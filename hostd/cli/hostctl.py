"""``hostctl``: the parent side of hostd on the command line, for people and scripts.

Every command starts a real ``hostd serve`` through :class:`hostd.cli.client.HostdClient`
(with :func:`hostd.cli.client.plugin_environment`, so a manifest's bare ``python3``
is this interpreter) on ONE state folder, the user's (``platformdirs``; ``--state-dir``
overrides it, for every command alike), drives it over the control protocol exactly
as an embedding application would, and shuts it down cleanly before exiting. That
hostd starts the plugins the state has enabled again; every command waits for that
restore to settle (:func:`settle`) before it looks at or uses a plugin.

``list``, ``install DIR``, ``import CONFIG``, ``grant ID [PERM...|--all]``,
``approve ID [--yes]``, ``enable ID|ID.TOOL`` (an npx/uvx plugin's packages installed first),
``disable ID|ID.TOOL``, ``restart ID``,
``status [ID...]``, ``tools [ID]``, ``call PLUGIN TOOL [JSON_ARGS]``, ``logs ID``,
``uninstall ID``: the lifecycle, one verb per step, each printing a table (``rich``) or,
with ``--json``, the protocol's JSON result, and naming the next command to run.
``approve`` shows the whole launch and asks (``--yes``: does not ask; without a
terminal and without ``--yes`` it refuses). ``call`` takes an id or a folder; a folder
not yet installed is installed, granted, approved (the launch printed to stderr: the
person running ``call`` approves it) and enabled; an installed plugin is never
installed again. Long waits (install, enable, restart, the restore) show progress on
stderr (:func:`with_progress`).
``hostctl demo [--no-real]``
    walk the bundled echo fixture (and the catalog's ``server-everything``)
    through the whole lifecycle, printing every exchange (a temporary state folder).

Exit codes: 0 success, 1 a failure reported by hostd (or hostd gone), 2 usage; a non-zero
exit always prints ``error: KIND: message`` on stderr, then ``next: <hostctl command>`` when
hostctl has a verb that fixes it (:data:`NEXT_COMMANDS`; hostd's own message may name a
protocol method instead).

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
import re
import shlex
import sys
import tempfile
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

import trio
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from hostd import __version__
from hostd.cli.client import HostdClient, Notification, RpcError, plugin_environment
from hostd.control.server import PROTOCOL_VERSION
from hostd.mcp.client_features import RESERVED_PERMISSIONS
from hostd.storage.secrets import SecretStore
from hostd.storage.state import default_state_dir

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

ROOT = Path(__file__).resolve().parents[2]
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


#: The hostctl command that fixes an error kind, filled from the error's ``data`` (``{plugin}``, ``{tool}``)
#: and the plugin's ``{folder}``. The class: hostd's messages name the protocol method that fixes them
#: ("enable it with tools/setEnabled", "prepare it first (plugins/prepare)", "plugins/approve"), which a
#: hostctl user cannot run; every kind whose fix hostctl has a verb for is in this one table, and a failure
#: of that kind ends with ``next: <command>`` (:func:`next_command`). ``PLUGIN_START_FAILED`` is here only
#: when the launch cannot be resolved (``data.launchError``: the manifest is fixed, then installed again)
#: or the restart policy gave up ("use plugins/restart").
NEXT_COMMANDS: dict[str, str] = {
    "GAVE_UP": "hostctl restart {plugin}",
    "TOOL_DISABLED": "hostctl enable {tool}",
    "PERMISSION_NOT_GRANTED": "hostctl grant {plugin} --all, then hostctl enable {plugin}",
    "MCP_TRUST_APPROVAL_REQUIRED": "hostctl approve {plugin}, then hostctl enable {plugin}",
    "MANIFEST_CHANGED": "hostctl approve {plugin}, then hostctl enable {plugin}",
    "TOOL_DEFINITION_CHANGED": "hostctl approve {plugin}",
    "PLUGIN_NOT_PREPARED": "hostctl enable {plugin} (it installs the packages), then hostctl approve {plugin}",
    "LAUNCH_UNRESOLVED": "fix the command in the manifest in {folder}, then hostctl install {folder}",
}


def next_command(kind: str, data: Mapping[str, Any], folder: str | None = None) -> str | None:
    """The hostctl command (from :data:`NEXT_COMMANDS`) that fixes an error of ``kind`` with ``data``,
    or ``None`` when hostctl has no verb for it or the data does not name what it needs."""
    if kind == "PLUGIN_START_FAILED" and data.get("launchError"):
        kind = "LAUNCH_UNRESOLVED"
    elif kind == "PLUGIN_START_FAILED" and "plugins/restart" in f"{data.get('message', '')} {data.get('reason', '')}":
        kind = "GAVE_UP"
    template = NEXT_COMMANDS.get(kind)
    if template is None:
        return None
    values = {"plugin": data.get("plugin"), "tool": data.get("tool"), "folder": folder}
    if any(values[name] is None for name in ("plugin", "tool", "folder") if "{" + name + "}" in template):
        return None
    return template.format(**{k: shlex.quote(str(v)) for k, v in values.items() if v is not None})


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
    # Each line once: a stderr line the progress display already showed live is not repeated here.
    tail = [line for line in data.get("stderrTail") or [] if str(line) not in _SHOWN_LIVE]
    if tail:
        lines.append("stderr tail:")
        lines.extend(f"  {line}" for line in tail)
    return lines


#: The plugin log lines this hostctl process has already printed live (:func:`with_progress`).
#: The class: one plugin line reaching the user twice (live while starting, then again in an
#: error's ``stderr tail:``); every printer of plugin lines checks here first.
_SHOWN_LIVE: set[str] = set()


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
    lines += _preparation_lines(launch.get("prepare"))
    return lines


def _preparation_lines(prepare: object) -> list[str]:
    """What preparation installs (``launch.prepare``): every package, its exact version, the registry,
    which versions were resolved because the config pinned none, and whether a build may run."""
    if not isinstance(prepare, Mapping):
        return []
    manager = prepare.get("manager", "?")
    unpinned = [str(name) for name in prepare.get("unpinned") or []]
    if prepare.get("state") != "prepared":
        lines = [f"installs ({manager}, not yet prepared): {' '.join(map(str, prepare.get('packages') or []))}"]
    else:
        resolved = prepare.get("resolved") or {}
        exact = " ".join(
            f"{name}@{version}" if manager != "uv" else f"{name}=={version}" for name, version in resolved.items()
        )
        lines = [f"installed ({manager}, from {prepare.get('registry') or 'its default registry'}): {exact}"]
        lines.append(f"source builds: {'allowed' if prepare.get('build') else 'refused (wheels only)'}")
    if unpinned:
        lines.append(f"resolved by the registry (the config pinned no version): {', '.join(unpinned)}")
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

    async def install() -> dict[str, Any]:
        installed: dict[str, Any] = await client.request(
            "plugins/install", {"path": str(folder)}, timeout=ENABLE_TIMEOUT
        )
        return installed

    info = await with_progress(client, f"installing {folder}", install)
    plugin_id = info["id"]
    info = await prepare_if_needed(client, info)  # npx, uvx: install the packages first
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
    status = await _enable(client, plugin_id)
    return info, status


async def resolve_tool(client: HostdClient, plugin_id: str, tool: str) -> str:
    """The host name of ``tool`` in ``plugin_id``: accepts the remote name, the
    host name (``<plugin>.<remote>``) or the provider-safe function name."""
    # Disabled tools too: calling one must be hostd's TOOL_DISABLED, not "no such tool".
    listing = await client.request("tools/list", {"plugin": plugin_id, "includeDisabled": True})
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


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; trailing blanks trimmed; cells made
    terminal-safe (:func:`terminal_safe`, one line each). Used by the demo's transcript."""
    table = [list(header), *([terminal_safe(cell, one_line=True) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


# -- output for people --------------------------------------------------------------


def _console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr) that never interprets markup in what it prints.

    Not a terminal: no colours, no animation, and a wide line so that tables are not
    folded into a pipe or a log file.
    """
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(
        file=stream,
        width=None if terminal else 200,
        markup=False,
        highlight=False,
        emoji=False,
        soft_wrap=False,
    )


def _safe(value: Any) -> Text:
    """A table cell: ``value`` as text, every control or hiding character escaped (one line)."""
    return Text(terminal_safe("" if value is None else str(value), one_line=True))


def print_table(console: Console, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A readable table: ``header`` (none when every name is empty) then one row per item,
    every cell terminal-safe. Not on a terminal: plain text without trailing blanks."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold", show_header=any(header))
    for name in header:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(_safe(cell) for cell in row))
    if console.is_terminal:
        console.print(table)
        return
    with console.capture() as captured:
        console.print(table)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
    console.file.flush()


def say(console: Console, text: str, *, style: str | None = None) -> None:
    """One line for people (terminal-safe; ``\\n`` keeps separate lines)."""
    console.print(Text(terminal_safe(text), style=style or ""))


def print_json(value: Any) -> None:
    """``--json``: the protocol's JSON, indented; control characters escaped (still valid JSON)."""
    print(terminal_safe(json.dumps(value, indent=2, ensure_ascii=False)))


def show(opts: Options, result: Any, human: Callable[[Console], None]) -> int:
    """Print ``result`` as the protocol's JSON (``--json``), else let ``human`` print it on
    stdout for people; return :data:`EXIT_OK`."""
    if opts.as_json:
        print_json(result)
    else:
        human(_console())
    return EXIT_OK


#: How the user reached this state folder: ``hostctl``, or ``hostctl --state-dir DIR`` when they named one
#: (set once by :func:`main`). Every printed ``next:`` command goes through :func:`as_typed`: a hint run word
#: for word must act on the same plugins (without it, the hint went to the default folder: PLUGIN_NOT_FOUND).
_TYPED = "hostctl"


def as_typed(command: str) -> str:
    """``command`` (one or more ``hostctl VERB ...`` joined by prose) with each ``hostctl`` as the user typed
    it: ``hostctl --state-dir DIR VERB ...`` when this run was given ``--state-dir``."""
    return re.sub(r"(?<![\w-])hostctl(?= [a-z])", lambda _: _TYPED, command)


def next_step(console: Console, text: str, command: str) -> None:
    """``next: <what>: <command>`` on its own line, for the user to run (``command`` :func:`as_typed`)."""
    console.print(
        Text.assemble(("next: ", "bold"), terminal_safe(text, one_line=True) + ": ", (as_typed(command), "bold"))
    )


# -- progress ------------------------------------------------------------------------

T = TypeVar("T")

#: How often a wait that is not on a terminal says it is still waiting, in seconds.
HEARTBEAT = 5.0


async def with_progress(
    client: HostdClient, message: str, work: Callable[[], Awaitable[T]], *, plugins: Iterable[str] | None = None
) -> T:
    """Await ``work()`` while showing on stderr that something is going on (no silent waits).

    On a terminal: a spinner with ``message`` and the seconds elapsed, and each
    ``plugins/log`` line of ``plugins`` (all plugins when ``None``) printed above it
    as it arrives (an ``npx`` first fetch, a server's own start-up lines). Elsewhere:
    ``hostctl: <message> …`` once, the same log lines, and a ``still <message>`` line
    every :data:`HEARTBEAT` seconds. Returns what ``work`` returned; its exception
    propagates unchanged; cancellation cancels ``work``.
    """
    console = _console(stderr=True)
    wanted = None if plugins is None else set(plugins)
    started = trio.current_time()
    status = console.status(Text(message)) if console.is_terminal else None
    if status is not None:
        status.start()
    else:
        say(console, f"hostctl: {message} …")

    index = len(client.notifications)

    def show_new_lines() -> None:
        nonlocal index
        for note in client.notifications[index:]:
            plugin = note.params.get("plugin")
            if note.method == "plugins/log" and (wanted is None or plugin in wanted):
                message = str(note.params.get("message"))
                line = terminal_safe(f"  {plugin or 'hostd'} | {message}", one_line=True)
                say(console, line, style="dim")
                _SHOWN_LIVE.add(message)
        index = len(client.notifications)

    async def follow() -> None:
        beat = started
        while True:
            with trio.move_on_after(0.25 if status is not None else HEARTBEAT):
                try:
                    await _more_notifications(client, index)
                except EOFError:
                    return
            show_new_lines()
            now = trio.current_time()
            if status is not None:
                status.update(Text(f"{message} ({now - started:.0f} s)"))
            elif now - beat >= HEARTBEAT:
                say(console, f"hostctl: still {message} ({now - started:.0f} s)")
                beat = now

    failure: Exception | None = None
    result: T | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            try:
                result = await work()
            except Exception as exc:  # re-raised below, outside the nursery (not wrapped in a group)
                failure = exc
            nursery.cancel_scope.cancel()
        show_new_lines()  # the lines that arrived with the answer: live, before any error repeats them
    finally:
        if status is not None:
            status.stop()
    if failure is not None:
        raise failure
    say(console, f"hostctl: {message}: done in {trio.current_time() - started:.1f} s")
    return result  # type: ignore[return-value]


async def _more_notifications(client: HostdClient, count: int) -> None:
    """Return once hostd has sent more than ``count`` notifications; ``EOFError`` when it is gone."""
    await client.wait_until(lambda: len(client.notifications) > count, timeout=math.inf)


# -- waiting for hostd's restore --------------------------------------------------------


def _restoring(info: Mapping[str, Any]) -> bool:
    """Whether hostd is still bringing back this enabled plugin: ``starting``, or enabled and
    not yet begun (restore starts at most 4 at a time). An enabled plugin ends ``ready``,
    ``unhealthy`` or ``error`` (a refused or failed restore says why in its status)."""
    return bool(info.get("enabled")) and info.get("status") in ("starting", "stopped")


async def settle(client: HostdClient, only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """``plugins/list`` once hostd has finished restoring the enabled plugins (those in ``only``).

    Every hostctl command starts a hostd on the state folder, and that hostd starts
    every plugin the state has enabled, in the background, right after ``initialize``.
    A command that looks at or uses a plugin must wait for that first: installing the
    folder again while its restore runs is ``PLUGIN_STATE_CONFLICT``, and a status read
    then says ``starting``. Waits on hostd's notifications (with the progress display),
    at most ``ENABLE_TIMEOUT`` seconds (``trio.TooSlowError``).
    """
    wanted = None if only is None else set(only)

    async def listing() -> list[dict[str, Any]]:
        plugins: list[dict[str, Any]] = (await client.request("plugins/list", {}))["plugins"]
        return plugins

    plugins = await listing()
    pending = [p["id"] for p in plugins if _restoring(p) and (wanted is None or p["id"] in wanted)]
    if not pending:
        return plugins

    async def wait() -> list[dict[str, Any]]:
        with trio.fail_after(ENABLE_TIMEOUT):
            while True:
                seen = len(client.notifications)
                current = await listing()
                if not any(_restoring(p) and (wanted is None or p["id"] in wanted) for p in current):
                    return current
                await _more_notifications(client, seen)

    settled = await with_progress(client, f"waiting for hostd to start {', '.join(pending)}", wait, plugins=pending)
    err = _console(stderr=True)
    for info in settled:
        if info["id"] in pending and info.get("status") == "error":
            # Its lines were shown once above; say why they come back at every command.
            say(err, f"hostctl: {info['id']} failed to start again (it is enabled: each hostctl command starts it)")
            next_step(err, "see why, or stop trying", f"hostctl status {info['id']} / hostctl disable {info['id']}")
    return settled


# -- the commands ----------------------------------------------------------------------


@dataclass
class Options:
    """What every command gets: the state folder, ``--json``, ``--yes``."""

    state_dir: str
    as_json: bool = False
    yes: bool = False


def _find(plugins: Iterable[Mapping[str, Any]], plugin_id: str) -> dict[str, Any]:
    for info in plugins:
        if info["id"] == plugin_id:
            return dict(info)
    known = ", ".join(p["id"] for p in plugins) or "none"
    raise Failure("PLUGIN_NOT_FOUND", f"no installed plugin {plugin_id!r} (installed: {known})")


def _is_folder_argument(target: str) -> bool:
    """A plugin folder (a path) rather than a plugin id (``[a-z0-9-]``, never a ``/``)."""
    return os.sep in target or target.startswith(".") or os.path.isdir(target)


def check_not_foreign(folder: str | Path, state_dir: str | Path) -> None:
    """Refuse a plugin folder that hostd generated for ANOTHER state folder.

    The class: hostd writes into the folders it generates (``<state>/imported/<id>``:
    the first enable of an imported plugin records its tools in ``plugin.json``;
    uninstall deletes the folder). Such a folder belongs to its state folder; a hostd
    on another state folder installing it would rewrite or delete files it does not
    own (found: a first ``call`` with a temporary state rewrote ``plugin.json`` inside
    the user's state). So hostctl installs one only from its own state folder, and
    says which ``--state-dir`` to use. Raises :class:`Failure` (``FOREIGN_STATE``).
    """
    real = Path(os.path.realpath(folder))
    parent = real.parent
    if parent.name != "imported":
        return
    owner = parent.parent
    if not any((owner / name).exists() for name in ("state.json", "state.lock")):
        return
    if os.path.realpath(owner) == os.path.realpath(state_dir):
        return
    raise Failure(
        "FOREIGN_STATE",
        f"{real} was generated by an import into the state folder {owner}; hostctl does not let another "
        "state folder install (and rewrite) it",
        [f"to use it, run the command with --state-dir {owner}"],
    )


def _launch_details(info: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The whole launch, as (label, value) rows for the approval prompt."""
    launch = info.get("launch")
    if not isinstance(launch, Mapping):
        return [("launch", "unknown")]
    if "digest" not in launch:
        return [("launch", f"cannot be resolved ({launch.get('kind')}): {launch.get('error')}")]
    rows = [
        ("command", shlex.join([str(launch.get("command")), *map(str, launch.get("args") or [])])),
        ("executable", str(launch.get("executable"))),
    ]
    for index, arg in enumerate(launch.get("args") or []):
        rows.append((f"argument {index + 1}", str(arg)))
    chain = launch.get("runtime") or []
    if chain:
        rows.append(("runs", " -> ".join(map(str, chain))))
    rows.append(("in folder", str(launch.get("cwd"))))
    for path, digest in (launch.get("files") or {}).items():
        rows.append(("file", f"{path}  {digest}"))
    for arg, target in (launch.get("folders") or {}).items():
        rows.append(("folder", f"{arg} -> {target}"))
    for key, value in (launch.get("env") or {}).items():
        rows.append(("env", f"{key}={value}" if value is not None else f"{key}=(secret, not shown)"))
    rows.append(("environment", ", ".join(launch.get("envKeys") or []) or "empty"))
    rows.append(("isolation", ", ".join(launch.get("isolation") or []) or "none"))
    rows.append(("permissions", ", ".join(info.get("permissions") or []) or "none"))
    rows.append(("tools", ", ".join(info.get("tools") or []) or "recorded at the first start"))
    rows.append(("digest", str(launch.get("digest"))))
    return rows


def _show_info(console: Console, info: Mapping[str, Any]) -> None:
    say(console, f"{info['id']} {info['version']} ({info['name']})", style="bold")
    rows = [("folder", info["path"]), ("status", f"{info['status']}{', enabled' if info.get('enabled') else ''}")]
    rows.append(("granted", ", ".join(info.get("granted") or []) or "nothing"))
    launch = info.get("launch") or {}
    if isinstance(launch, Mapping) and "digest" in launch:
        rows.append(("approved", "yes" if launch.get("approved") else "no"))
    print_table(console, ["", ""], [*rows, *_launch_details(info)])


def next_action(info: Mapping[str, Any]) -> tuple[str, str]:
    """``(what, command)``: the step that brings the plugin ``info`` (a ``PluginInfo``) closer to
    running, and the hostctl command for it. A launch that cannot be resolved comes first."""
    plugin_id = info["id"]
    launch = info.get("launch") or {}
    # The reserved permissions (mcp.sampling...) are optional: granting one lets the plugin ask the person or
    # the model something, a choice of its own, never a step to start it.
    missing = sorted(set(info.get("permissions") or []) - set(info.get("granted") or []) - RESERVED_PERMISSIONS)
    if isinstance(launch, Mapping) and "error" in launch:
        # First: nothing granted or approved can start a launch that cannot be resolved.
        fix = next_command("LAUNCH_UNRESOLVED", {"plugin": plugin_id}, str(info["path"])) or ""
        what, _, command = fix.partition(", then ")
        return f"its launch cannot run ({launch.get('kind', '?')}): {what}", command
    if isinstance(launch, Mapping) and "digest" in launch and not launch.get("approved"):
        return "review and approve its launch", f"hostctl approve {plugin_id}"
    if missing:
        return f"grant {', '.join(missing)}", f"hostctl grant {plugin_id} --all"
    if not info.get("enabled"):
        return "start it", f"hostctl enable {plugin_id}"
    return "see its tools", f"hostctl tools {plugin_id}"


def _next_for(console: Console, info: Mapping[str, Any]) -> None:
    """Print :func:`next_action` for ``info`` as a ``next:`` line."""
    next_step(console, *next_action(info))


def _status_row(status: Mapping[str, Any], enabled: bool | None = None, disabled: int = 0) -> list[str]:
    """One STATUS_HEADER row; TOOLS is ``enabled/total``: ``disabled`` of its ``tools_count`` are tools
    the user disabled (:func:`disabled_tools`)."""
    server = " ".join(str(status[k]) for k in ("server_name", "server_version") if status.get(k))
    error = status.get("error")
    reason = (error.get("reason") or error.get("message")) if isinstance(error, Mapping) else error
    return [
        str(status["plugin_id"]),
        str(status.get("status", "?")),
        "-" if enabled is None else ("yes" if enabled else "no"),
        f"{max(int(status.get('tools_count') or 0) - disabled, 0)}/{int(status.get('tools_count') or 0)}",
        server or "-",
        str(status.get("protocol_version") or "-"),
        str(reason or ""),
    ]


async def disabled_tools(client: HostdClient, plugin_id: str | None = None) -> dict[str, int]:
    """``{plugin id: number of its registered tools the user disabled}`` (of ``plugin_id``, or all)."""
    params: dict[str, Any] = {"includeDisabled": True, **({"plugin": plugin_id} if plugin_id else {})}
    counts: dict[str, int] = {}
    for tool in (await client.request("tools/list", params))["tools"]:
        if not tool.get("enabled", True):
            owner = str(tool.get("plugin") or str(tool["name"]).partition(".")[0])
            counts[owner] = counts.get(owner, 0) + 1
    return counts


STATUS_HEADER = ["PLUGIN", "STATUS", "ENABLED", "TOOLS", "SERVER", "PROTOCOL", "ERROR"]


async def cmd_list(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl list``: every installed plugin (after restore settled)."""
    plugins = await settle(client)
    if opts.as_json:
        print_json({"plugins": plugins})
        return EXIT_OK
    out = _console()
    if not plugins:
        say(out, f"no plugins installed in {opts.state_dir}")
        next_step(out, "install one", "hostctl install PLUGIN_DIR  (or hostctl import CONFIG)")
        return EXIT_OK
    rows = []
    for info in plugins:
        launch = info.get("launch") or {}
        approved = "yes" if launch.get("approved") else ("unresolved" if "error" in launch else "no")
        rows.append(
            [
                info["id"],
                info["version"],
                info["status"],
                "yes" if info["enabled"] else "no",
                approved,
                f"{len(info['granted'])}/{len(info['permissions'])}",
                info["path"],
            ]
        )
    print_table(out, ["PLUGIN", "VERSION", "STATUS", "ENABLED", "APPROVED", "GRANTED", "FOLDER"], rows)
    return EXIT_OK


async def cmd_install(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl install PLUGIN_DIR``: install (nothing runs); show what would run and what is next."""
    check_not_foreign(args.plugin_dir, opts.state_dir)
    await settle(client)
    folder = os.path.abspath(os.path.expanduser(args.plugin_dir))

    async def install() -> dict[str, Any]:
        info: dict[str, Any] = await client.request("plugins/install", {"path": folder}, timeout=ENABLE_TIMEOUT)
        return info

    info = await with_progress(client, f"installing {folder}", install)
    info = await prepare_if_needed(client, info)

    def human(out: Console) -> None:
        _show_info(out, info)
        _next_for(out, info)

    return show(opts, info, human)


async def prepare_if_needed(client: HostdClient, info: dict[str, Any]) -> dict[str, Any]:
    """``plugins/prepare`` a just-installed plugin whose launch names a package (npx, uvx), with progress;
    its new ``PluginInfo`` (the launch to approve runs the prepared environment). Others: ``info`` as is."""
    if ((info.get("launch") or {}).get("prepare") or {}).get("state") != "needed":
        return info

    async def run() -> dict[str, Any]:
        prepared: dict[str, Any] = await client.request("plugins/prepare", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
        return prepared

    return await with_progress(client, f"installing the packages of {info['id']}", run)


async def cmd_import(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl import CONFIG``: install every server of an mcpServers config; say what to run next."""
    try:
        text = Path(args.config).read_text(encoding="utf-8")
    except OSError as exc:
        raise Failure("CANNOT_READ", f"cannot read {args.config}: {exc.strerror}") from None
    await settle(client)
    try:
        result = await client.request("plugins/import", {"config": text}, timeout=ENABLE_TIMEOUT)
    except RpcError as exc:
        entries = exc.data.get("entries") or []
        if entries and not opts.as_json:
            _import_table(_console(stderr=True), entries)
        raise
    for entry in result["entries"]:  # npx/uvx servers: install their packages now, never at their start
        if entry.get("outcome") in ("installed", "updated") and "plugin" in entry:
            entry["plugin"] = await prepare_if_needed(client, entry["plugin"])
    if opts.as_json:
        print_json(result)
        return EXIT_OK
    ids = [e["id"] for e in result["entries"] if e.get("id")]
    kept_secrets = any("in the secret store" in n for e in result["entries"] for n in e.get("notes") or [])
    out = _console()
    _import_table(out, result["entries"])
    installed = [e["id"] for e in result["entries"] if e.get("outcome") in ("installed", "updated")]
    say(out, f"state folder: {opts.state_dir}")
    if kept_secrets:
        say(out, f"secret store: {_secret_store_place(opts.state_dir)}")
    if not installed:
        say(out, "nothing new was installed")
    # Every entry not yet running gets its next step, installed now or earlier (a second import
    # of the same config leaves them "unchanged", and still unapproved).
    plugins = {p["id"]: p for p in (await client.request("plugins/list", {}))["plugins"]}
    pending = [
        plugins[i] for i in ids if i in plugins and not (plugins[i]["enabled"] and plugins[i]["status"] == "ready")
    ]
    for info in pending:
        what, command = next_action(info)
        next_step(out, f"{info['id']}: {what}", command)
    if any(next_action(info)[1].startswith("hostctl approve") for info in pending):
        say(
            out,
            "then start each with hostctl enable ID (an imported plugin's tools are pinned at that first start: "
            "a later change to them is withheld until you approve again)",
        )
    return EXIT_OK


def _secret_store_place(state_dir: str) -> str:
    """Where hostd keeps this state folder's secret values: the OS keyring, or the 0600 file."""
    try:
        store = SecretStore(Path(state_dir))
    except Exception:
        return "unknown (the secret store cannot be opened)"
    if store.backend == "keyring":
        return f"the OS keyring (the names only in {store.path})"
    return f"{store.path} (mode 0600, readable by you only)"


def _import_table(console: Console, entries: Sequence[Mapping[str, Any]]) -> None:
    rows = [
        [
            e.get("name"),
            e.get("outcome"),
            e.get("id") or "-",
            "; ".join([*([e["message"]] if e.get("message") else []), *(e.get("notes") or [])]),
        ]
        for e in entries
    ]
    print_table(console, ["NAME", "OUTCOME", "PLUGIN", "NOTES"], rows)


async def cmd_grant(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl grant ID [PERMISSION ...] [--all]``: replace the granted permissions."""
    info = _find(await settle(client), args.id)
    permissions = list(info["permissions"]) if args.all else list(args.permissions)
    if not args.all and not permissions:
        raise Failure(
            "USAGE",
            f"name the permissions to grant, or --all (it declares: {', '.join(info['permissions']) or 'none'})",
        )
    info = await client.request("plugins/grant", {"id": args.id, "permissions": permissions})

    def human(out: Console) -> None:
        say(out, f"{args.id}: granted {', '.join(info['granted']) or 'nothing'}")
        _next_for(out, info)

    return show(opts, info, human)


async def cmd_approve(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl approve ID [--yes]``: show the whole launch, ask, approve its digest."""
    info = _find(await settle(client), args.id)
    launch = info.get("launch") or {}
    err = _console(stderr=True)
    if "digest" not in launch:
        raise Failure(
            str(launch.get("kind") or "LAUNCH_UNRESOLVED"),
            f"the launch of {args.id} cannot be resolved: {launch.get('error', 'unknown')}",
            [f"next: {as_typed(str(next_command('LAUNCH_UNRESOLVED', {'plugin': args.id}, str(info['path']))))}"],
        )
    say(err, f"{args.id} would run:", style="bold")
    print_table(err, ["", ""], _launch_details(info))
    if not opts.yes:
        if not sys.stdin.isatty():
            raise Failure("NOT_APPROVED", "approving needs a yes: run it in a terminal, or pass --yes")
        answer = await trio.to_thread.run_sync(_ask, f"Approve this launch of {args.id}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise Failure("NOT_APPROVED", f"the launch of {args.id} was not approved")
    info = await client.request("plugins/approve", {"id": args.id, "digest": launch["digest"]})

    def human(out: Console) -> None:
        say(out, f"{args.id}: approved {launch['digest']}")
        _next_for(out, info)

    return show(opts, info, human)


def _ask(prompt: str) -> str:
    print(prompt, end="", file=sys.stderr, flush=True)
    try:
        return sys.stdin.readline()
    except OSError:
        return ""


async def _set_tool(client: HostdClient, opts: Options, name: str, enabled: bool) -> int:
    await settle(client, [name.partition(".")[0]])
    result = await client.request("tools/setEnabled", {"name": name, "enabled": enabled})
    if opts.as_json:
        print_json(result)
    else:
        say(_console(), f"tool {result['name']}: {'enabled' if enabled else 'disabled'} (the plugin keeps running)")
    return EXIT_OK


async def _enable(client: HostdClient, plugin_id: str) -> dict[str, Any]:
    """``plugins/enable`` with the progress display -> ``PluginStatus``; raises :class:`RpcError`."""

    async def enable() -> dict[str, Any]:
        status: dict[str, Any] = await client.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
        return status

    # A refusal the user can fix gets its hostctl command from NEXT_COMMANDS (run_command).
    return await with_progress(client, f"starting {plugin_id}", enable, plugins=[plugin_id])


async def cmd_enable(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl enable ID`` (start it, and at every later hostctl command) or ``enable ID.TOOL``."""
    if "." in args.id:
        return await _set_tool(client, opts, args.id, True)
    plugins = await settle(client, [args.id])
    info = await prepare_if_needed(client, _find(plugins, args.id))  # npx, uvx: the packages first
    if info["status"] == "ready" and info["enabled"]:
        status = await client.request("plugins/status", {"id": args.id})
    elif info["status"] == "error" and info["enabled"]:
        # This command's hostd has just started it (restore) and it failed: starting it again
        # now would only print the same lines twice. Report that start's error.
        status = await client.request("plugins/status", {"id": args.id})
        error = status.get("error") if isinstance(status.get("error"), Mapping) else {}
        kind = str(error.get("kind") or "PLUGIN_START_FAILED")
        details = error_details(error, str(error.get("message", "")))
        fix = next_command(kind, error, str(info["path"]))
        raise Failure(
            kind,
            str(error.get("message") or f"{args.id} failed to start"),
            [*details, *([f"next: {as_typed(fix)}"] if fix else [])],
        )
    else:
        status = await _enable(client, args.id)
    if opts.as_json:
        print_json(status)
        return EXIT_OK
    out = _console()
    hidden = (await disabled_tools(client, args.id)).get(args.id, 0)
    print_table(out, STATUS_HEADER, [_status_row(status, True, hidden)])
    next_step(out, "see its tools", f"hostctl tools {args.id}")
    return EXIT_OK


async def cmd_disable(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl disable ID`` (stop it; not started again) or ``disable ID.TOOL``."""
    if "." in args.id:
        return await _set_tool(client, opts, args.id, False)
    await settle(client, [args.id])
    status = await client.request("plugins/disable", {"id": args.id}, timeout=ENABLE_TIMEOUT)
    if opts.as_json:
        print_json(status)
    else:
        say(_console(), f"{args.id}: {status['status']}, disabled")
    return EXIT_OK


async def cmd_restart(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl restart ID``: stop and start an enabled plugin."""
    info = _find(await settle(client, [args.id]), args.id)
    if not info["enabled"]:  # hostd's answer says "enable it instead": name the command
        raise Failure(
            "PLUGIN_STATE_CONFLICT",
            f"{args.id} is not enabled: there is nothing to restart",
            [f"next: {as_typed(f'hostctl enable {args.id}')}"],
        )

    async def restart() -> dict[str, Any]:
        status: dict[str, Any] = await client.request("plugins/restart", {"id": args.id}, timeout=ENABLE_TIMEOUT)
        return status

    status = await with_progress(client, f"restarting {args.id}", restart, plugins=[args.id])
    if opts.as_json:
        print_json(status)
    else:
        hidden = (await disabled_tools(client, args.id)).get(args.id, 0)
        print_table(_console(), STATUS_HEADER, [_status_row(status, True, hidden)])
    return EXIT_OK


async def cmd_status(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl status [ID ...]``: each plugin's status once restore settled.

    Exit 1 when an enabled plugin is not ``ready`` (each one's reason on stderr).
    """
    plugins = await settle(client, args.ids or None)
    chosen = [_find(plugins, i) for i in args.ids] if args.ids else plugins
    statuses = [await client.request("plugins/status", {"id": info["id"]}) for info in chosen]
    enabled = {info["id"]: bool(info["enabled"]) for info in chosen}
    infos = {info["id"]: info for info in chosen}
    broken = [s for s in statuses if enabled[s["plugin_id"]] and s["status"] != "ready"]
    if opts.as_json:
        print_json({"plugins": statuses})
    else:
        out = _console()
        hidden = await disabled_tools(client) if statuses else {}
        if not statuses:
            say(out, f"no plugins installed in {opts.state_dir}")
        else:
            print_table(
                out,
                STATUS_HEADER,
                [_status_row(s, enabled[s["plugin_id"]], hidden.get(s["plugin_id"], 0)) for s in statuses],
            )
    err = _console(stderr=True)
    for status in broken:
        row = _status_row(status)
        say(err, f"error: {row[0]} is enabled but {row[1]}{': ' + row[-1] if row[-1] else ''}")
        error = status.get("error")
        if isinstance(error, Mapping):
            fix = next_command(str(error.get("kind")), error, str(infos[status["plugin_id"]]["path"]))
            if fix is not None:
                say(err, f"  next: {as_typed(fix)}")
    return EXIT_FAILED if broken else EXIT_OK


async def cmd_tools(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl tools [ID]``: the tools of the running plugins, disabled ones included."""
    await settle(client, [args.id] if args.id else None)
    params: dict[str, Any] = {"includeDisabled": True}
    if args.id:
        params["plugin"] = args.id
    listing = await client.request("tools/list", params)
    if opts.as_json:
        print_json(listing)
        return EXIT_OK
    out = _console()
    tools = listing["tools"]
    if not tools:
        say(out, "no tools: only running plugins have tools")
        next_step(out, "start a plugin", "hostctl enable ID")
        return EXIT_OK
    rows = [
        [
            t["name"],
            "yes" if t.get("enabled", True) else "no",
            t.get("permission") or "-",
            _shorten((t.get("description") or "").split("\n")[0], 70),
        ]
        for t in tools
    ]
    print_table(out, ["TOOL", "ENABLED", "PERMISSION", "DESCRIPTION"], rows)
    return EXIT_OK


async def ensure_ready(client: HostdClient, target: str, opts: Options) -> str:
    """The id of a ready plugin for ``target`` (a plugin id, or a plugin folder).

    Waits for hostd's restore first and never reinstalls an installed plugin (a
    restored plugin raced the reinstall: ``PLUGIN_STATE_CONFLICT``). A folder not yet
    installed is installed, every declared permission granted and the shown launch
    approved (printed on stderr: the person running ``call`` on a folder approves it),
    then enabled. An installed plugin that is not ready is enabled as it is: a missing
    grant or approval is reported with the command that gives it.
    """
    plugins = await settle(client)
    if _is_folder_argument(target):
        check_not_foreign(target, opts.state_dir)
        folder = os.path.abspath(os.path.expanduser(target))
        found = [p for p in plugins if p["path"] in (folder, os.path.realpath(folder))]
        if not found:
            info, _ = await prepare(client, folder)
            return str(info["id"])
        info = found[0]
    else:
        info = _find(plugins, target)
    plugin_id = str(info["id"])
    if info["status"] == "ready":
        return plugin_id
    await prepare_if_needed(client, info)  # npx, uvx: the packages first (its approval then names them)
    await _enable(client, plugin_id)
    return plugin_id


async def cmd_call(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl call PLUGIN TOOL [JSON_ARGS]``: print the tool's text (``--json``: the whole result)."""
    plugin_id = await ensure_ready(client, args.plugin, opts)
    name = await resolve_tool(client, plugin_id, args.tool)
    params: dict[str, Any] = {"name": name, "arguments": args.arguments}
    if args.timeout is not None:
        params["timeoutMs"] = max(1, math.ceil(args.timeout * 1000))
    bound = args.timeout + 10 if args.timeout is not None else CALL_TIMEOUT
    result: dict[str, Any] = await client.request("tools/call", params, timeout=bound)
    if opts.as_json:
        print_json(result)
    else:
        print(terminal_safe(content_text(result)))
    return EXIT_OK


async def cmd_logs(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl logs ID``: the plugin's recent log lines (those of this hostd: its restore included)."""
    info = _find(await settle(client, [args.id]), args.id)
    result = await client.request("plugins/logs", {"id": args.id, "limit": args.limit})
    if opts.as_json:
        print_json(result)
        return EXIT_OK
    out = _console()
    if not result["lines"]:
        # True in every state: the lines are kept in the state folder across hostd processes (one per hostctl
        # command), bounded, from the plugin's install on; an empty answer means it never wrote one.
        if info["enabled"]:
            say(
                out,
                f"{args.id}: no log lines: it has written nothing to stderr and sent no MCP log message since it "
                f"was installed ({info['status']})",
            )
        else:
            say(out, f"{args.id}: no log lines: it has not written any since it was installed (it is not enabled)")
            next_step(out, "see its start-up lines", f"hostctl enable {args.id}")
        return EXIT_OK
    for line in result["lines"]:
        text = f"{line['time']} {line['source']:<6} {line['level']:<7} {line['message']}"
        say(out, terminal_safe(text, one_line=True))  # one line each: a message cannot forge the next
    if result["dropped"]:
        say(out, f"({result['dropped']} older lines dropped)")
    return EXIT_OK


async def cmd_uninstall(client: HostdClient, opts: Options, args: argparse.Namespace) -> int:
    """``hostctl uninstall ID``: stop it and forget it (its data folder is kept)."""
    await settle(client, [args.id])
    await client.request("plugins/uninstall", {"id": args.id}, timeout=ENABLE_TIMEOUT)
    if opts.as_json:
        print_json(None)
    else:
        say(_console(), f"{args.id}: uninstalled")
    return EXIT_OK


Command = Callable[[HostdClient, Options, argparse.Namespace], Awaitable[int]]

COMMANDS: dict[str, Command] = {
    "list": cmd_list,
    "install": cmd_install,
    "import": cmd_import,
    "grant": cmd_grant,
    "approve": cmd_approve,
    "enable": cmd_enable,
    "disable": cmd_disable,
    "restart": cmd_restart,
    "status": cmd_status,
    "tools": cmd_tools,
    "call": cmd_call,
    "logs": cmd_logs,
    "uninstall": cmd_uninstall,
}


async def run_command(command: Command, opts: Options, args: argparse.Namespace) -> int:
    """Start hostd on ``opts.state_dir``, run ``command``, shut hostd down; report a failure
    as ``error: KIND: message`` on stderr (exit 1): a non-zero exit always says why."""
    try:
        async with open_hostd(opts.state_dir) as client:
            try:
                return await command(client, opts, args)
            except RpcError as exc:
                raise await _with_next_step(client, exc) from None
    except (Failure, *_HOSTD_FAILURES) as exc:
        failure = Failure.from_exception(exc)
        print("\n".join(failure.lines()), file=sys.stderr)
        return EXIT_USAGE if failure.kind == "USAGE" else EXIT_FAILED


async def _with_next_step(client: HostdClient, exc: RpcError) -> Failure:
    """``exc`` as a :class:`Failure` ending with ``next: <hostctl command>`` when :data:`NEXT_COMMANDS`
    has one for it (the plugin's folder is asked of hostd, which is still running)."""
    failure = Failure.from_exception(exc)
    plugin = exc.data.get("plugin")
    folder: str | None = None
    if isinstance(plugin, str):
        with trio.move_on_after(REQUEST_TIMEOUT):
            try:
                listed = await client.request("plugins/list", {})
                folder = next((str(p["path"]) for p in listed["plugins"] if p["id"] == plugin), None)
            except _HOSTD_FAILURES:
                folder = None
    command = next_command(failure.kind, exc.data, folder)
    if command is not None:
        failure.details.append(f"next: {as_typed(command)}")
    return failure


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
    """The argparse parser of ``hostctl``: one subcommand per verb (:data:`COMMANDS`) and ``demo``.

    ``--state-dir`` and ``--json`` are accepted before or after the verb.
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="hostd's state folder (default: the user's, from platformdirs, the same for every command)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the protocol's JSON result"
    )
    parser = argparse.ArgumentParser(
        prog="hostctl",
        description="Manage the MCP plugins of a hostd state folder: each command starts a hostd on the folder "
        "(which starts the enabled plugins again), does its work over the control protocol, and shuts it down.",
        epilog="Every command but demo takes --state-dir DIR (default: the user's state folder, "
        f"{default_state_dir()}) and --json (print the protocol's JSON result). Exit codes: 0 done, 1 failed "
        "(the reason on stderr), 2 usage.",
    )
    parser.add_argument("--version", action="version", version=f"hostctl {__version__}")
    parser.add_argument("--state-dir", metavar="DIR", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", default=False, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def verb(name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
        return commands.add_parser(name, parents=[common], help=summary, description=description or summary)

    verb("list", "list the installed plugins")
    verb("install", "install a plugin folder (nothing runs yet)").add_argument(
        "plugin_dir", metavar="PLUGIN_DIR", help="a folder holding plugin.yaml or plugin.json"
    )
    verb(
        "import",
        "install the servers of an mcpServers config (Claude Desktop, Cursor, VS Code...)",
        "Install every server of CONFIG (mcpServers / servers JSON, comments allowed) as a plugin; all or nothing.",
    ).add_argument("config", metavar="CONFIG", help="the config file")
    grant = verb("grant", "grant permissions a plugin declares (replaces what was granted)")
    grant.add_argument("id", metavar="ID")
    grant.add_argument("permissions", metavar="PERMISSION", nargs="*")
    grant.add_argument("--all", action="store_true", help="every permission the plugin declares")
    approve = verb("approve", "show a plugin's whole launch and approve it")
    approve.add_argument("id", metavar="ID")
    approve.add_argument("--yes", "-y", action="store_true", help="approve without asking")
    verb("enable", "start a plugin (and at every later command), or enable one tool (ID.TOOL)").add_argument(
        "id", metavar="ID|ID.TOOL"
    )
    verb("disable", "stop a plugin for good, or hide one tool (ID.TOOL) without stopping it").add_argument(
        "id", metavar="ID|ID.TOOL"
    )
    verb("restart", "restart an enabled plugin").add_argument("id", metavar="ID")
    verb("status", "the status of the plugins (exit 1 when an enabled one is not ready)").add_argument(
        "ids", metavar="ID", nargs="*"
    )
    verb("tools", "list the tools of the running plugins (disabled ones too)").add_argument(
        "id", metavar="ID", nargs="?"
    )
    call = verb(
        "call",
        "call one tool of a plugin (an id, or a folder: installed, approved and enabled on first use)",
        "Call TOOL of PLUGIN and print the result's text. PLUGIN is an installed plugin's id, or a plugin folder: "
        "one not installed yet is installed, every permission it declares granted, its launch (shown on stderr) "
        "approved and enabled.",
    )
    call.add_argument("plugin", metavar="PLUGIN", help="a plugin id, or a plugin folder")
    call.add_argument("tool", metavar="TOOL", help="the tool: remote name (echo) or host name (mcp-echo.echo)")
    call.add_argument("json_args", metavar="JSON_ARGS", nargs="?", default="{}", help="arguments as a JSON object")
    call.add_argument("--timeout", type=float, metavar="S", help="tool timeout in seconds (default: the manifest's)")
    logs = verb("logs", "a plugin's recent log lines (stderr and MCP log messages, redacted)")
    logs.add_argument("id", metavar="ID")
    logs.add_argument("--limit", type=int, default=200, metavar="N", help="at most N lines (1-1000, default 200)")
    verb("uninstall", "stop and forget a plugin").add_argument("id", metavar="ID")

    demo = commands.add_parser(
        "demo",
        help="walk the bundled echo plugin (and a real MCP server) through the whole lifecycle",
        description="install -> grant -> approve -> enable -> tools/list -> call -> cancel -> restart -> disable, "
        f"on {_relative(ECHO_PLUGIN)} and, unless --no-real, {_relative(REAL_PLUGIN)}, with a temporary state "
        "folder.",
    )
    demo.add_argument("--no-real", action="store_true", help="skip the real third-party server")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hostctl`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command == "call":
            try:
                args.arguments = json.loads(args.json_args)
            except ValueError as exc:
                parser.error(f"JSON_ARGS is not valid JSON: {exc}")
            if not isinstance(args.arguments, dict):
                parser.error("JSON_ARGS must be a JSON object")
            if args.timeout is not None and not (args.timeout > 0 and math.isfinite(args.timeout)):
                parser.error("--timeout must be a positive number of seconds")
        if args.command == "logs" and not 1 <= args.limit <= 1000:
            parser.error("--limit must be between 1 and 1000")
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK

    try:
        if args.command == "demo":
            return trio.run(lambda: run_demo(real=not args.no_real))
        state_dir = args.state_dir if args.state_dir is not None else str(default_state_dir())
        if args.state_dir is not None:
            global _TYPED  # noqa: PLW0603 - one value per process, set before any output
            _TYPED = f"hostctl --state-dir {shlex.quote(args.state_dir)}"
        opts = Options(state_dir=state_dir, as_json=args.json, yes=getattr(args, "yes", False))
        return trio.run(run_command, COMMANDS[args.command], opts, args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `hostctl list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
