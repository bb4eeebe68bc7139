"""The examples of ``docs/protocol.md``, captured from a live hostd (``python -m docgen.docs --examples``).

:func:`capture` starts a real ``hostd serve`` (this interpreter, a temporary state
directory) with the ``fixtures/mcp-echo`` plugin, drives it through
:class:`hostd.cli.client.HostdClient` and returns each example block, keyed by the
name of its ``<!-- example:NAME:begin -->`` marker, as the Markdown the document
holds. Every line is a line hostd wrote or read, normalised only where a value
depends on the machine or the moment (class: anything that is not the same on
two runs or two machines):

- paths: this checkout → ``/path/to/hostd``, this interpreter's folder →
  ``/path/to/venv/bin``, its real file → ``/usr/bin/python3``, the temporary
  folder → ``/tmp/hostd-docs``;
- ``sha256:<64 hex>`` → ``sha256:<digest-N>``, numbered by first appearance (equal
  digests keep equal names, so the approve example still echoes the install's);
- ISO times → ``<time>``; the elapsed time in a timeout message → ``<elapsed>``.

``isolation`` lists are kept as this machine reports them; :func:`mask` hides them
(they depend on the kernel and the user) when ``tests/test_docs.py`` compares.

Some values are shortened for reading, with ``…`` (a list or an object cut after the
members that matter); which ones is fixed here, never edited by hand. Requires a
source checkout (the fixture) and Linux. Raises ``RuntimeError`` when hostd does
not answer as the scenario expects (a changed behaviour: read the message).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import trio

from hostd.cli.client import HostdClient, RpcError
from hostd.control import models as p
from hostd.wire.framing import PARENT_FRAME_LIMIT as PARENT_LIMIT
from sandbox import cgroups

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "fixtures" / "mcp-echo"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
_ELAPSED = re.compile(r"within \d+(?:\.\d+)? s \(timeout")
_PID = re.compile(r"\(pid \d+\)")
_ISOLATION = re.compile(r'"isolation":\[[^\]]*\]')
#: ``launch.accounting``: which cgroup (path included) or the watchdog, as the machine that ran hostd has it.
_ACCOUNTING = re.compile(r'"accounting":\{[^{}]*\}')
#: Fields of a ``PluginStatus`` kept when a notification is shortened.
STATUS_KEEP = ("plugin_id", "status", "tools_count", "error", "restarts", "last_exit", "next_retry_at", "pinned")
#: Fields of a ``PluginInfo`` kept when it is shortened.
INFO_KEEP = ("id", "name", "version", "path", "permissions", "granted", "enabled", "status", "tools", "launch")


def mask(text: str) -> str:
    """``text`` with every ``"isolation":[…]`` list and ``"accounting":{…}`` object emptied (machine-dependent)."""
    return _ACCOUNTING.sub('"accounting":{…}', _ISOLATION.sub('"isolation":[…]', text))


def _short(value: Any, keep: Sequence[str] | None = None, *, items: int | None = None) -> str:
    """Compact JSON of ``value`` keeping only ``keep`` (then ``…``), or the first ``items`` of a list."""
    if isinstance(value, dict) and keep is not None:
        inner = ",".join(f"{_json(k)}:{_json(value[k])}" for k in keep if k in value)
        return "{" + inner + (",…" if set(value) - set(keep) else "") + "}"
    if isinstance(value, list) and items is not None and len(value) > items:
        return "[" + ",".join(_json(v) for v in value[:items]) + ",…]"
    return _json(value)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def short_info(info: dict[str, Any], *, tools: int = 2) -> str:
    """A ``PluginInfo`` shortened: its first tools and the launch's ``digest`` and ``approved``."""
    parts = []
    for key in INFO_KEEP:
        if key not in info:
            continue
        if key == "tools":
            parts.append(f'"tools":{_short(info[key], items=tools)}')
        elif key == "launch" and isinstance(info[key], dict) and "digest" in info[key]:
            parts.append(f'"launch":{_short(info[key], ("digest", "approved"))}')
        else:
            parts.append(f"{_json(key)}:{_json(info[key])}")
    return "{" + ",".join(parts) + ",…}"


class Recorder:
    """One hostd session: sends requests, returns the transcript lines each produced."""

    def __init__(self, client: HostdClient, normalise: Callable[[str], str]) -> None:
        assert client.transcript is not None
        self.client = client
        self.transcript = client.transcript
        self.pos = 0
        self.normalise = normalise
        self._ids = 0

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        id: int | str | None = None,
        render: Callable[[dict[str, Any]], str | None] | None = None,
        expect_error: bool = False,
    ) -> tuple[list[str], Any]:
        """Send one request; wait for its response. Returns (lines, result or error object).

        ``lines``: the request, every line hostd wrote after it up to and including the
        response. ``render(message)`` may replace a received line's text (``None``: drop it).
        """
        rid = id if id is not None else self.next_id()
        start = len(self.transcript)
        response = await self.client.start(method, params, id=rid)
        try:
            with trio.fail_after(60):
                outcome: Any = await response()
            if expect_error:
                raise RuntimeError(f"{method} {params!r}: expected an error, got {outcome!r}")
        except RpcError as exc:
            if not expect_error:
                raise RuntimeError(f"{method} {params!r}: unexpected error {exc}") from None
            outcome = {"code": exc.code, "message": exc.message, "data": exc.data}
        return self._lines(start, rid, render), outcome

    def _lines(
        self, start: int, rid: int | str | None, render: Callable[[dict[str, Any]], str | None] | None
    ) -> list[str]:
        lines: list[str] = []
        for direction, raw in self.transcript[start:]:
            text = raw.decode("utf-8", "replace")
            message = orjson.loads(raw) if direction == "←" else None
            if message is not None and render is not None:
                rendered = render(message)
                if rendered is None:
                    continue
                text = rendered
            lines.append(f"{direction} {self.normalise(text)}")
            if message is not None and "method" not in message and message.get("id") == rid:
                break
        return lines

    async def raw(self, data: bytes, shown: str) -> list[str]:
        """Write ``data`` (one line, as it is) and wait for the one answer hostd sends with ``id: null``.

        Returns ``→ shown`` (the line as the block shows it) and the answer.
        """
        before = len(self.client.stray)
        start = len(self.transcript)
        await self.client.send_raw(data)
        with trio.fail_after(60):
            while len(self.client.stray) == before:
                await self.client._changed.wait()
        answer = next(raw for d, raw in self.transcript[start:] if d == "←")
        return [f"→ {shown}", f"← {self.normalise(answer.decode())}"]

    async def send(self, message: dict[str, Any]) -> str:
        """Send one notification or raw message; return its line."""
        data = orjson.dumps(message)
        await self.client.send_raw(data + b"\n")
        return f"→ {self.normalise(data.decode())}"


@contextlib.asynccontextmanager
async def _recording(
    args: list[str], env: dict[str, str], normalise: Callable[[str], str], *, handshake: bool = True
) -> AsyncIterator[tuple[HostdClient, Recorder]]:
    """A hostd session spawned with ``args`` and ``env`` (stderr discarded), recorded from here on:
    the client and its :class:`Recorder`."""
    async with HostdClient.spawn(args, env=env, handshake=handshake, stderr=subprocess.DEVNULL) as client:
        client.transcript = []
        yield client, Recorder(client, normalise)


def status_render(full: bool = False) -> Callable[[dict[str, Any]], str | None]:
    """Render ``plugins/statusChanged`` shortened (unless ``full``), results as they are, drop ``plugins/log``."""

    def render(message: dict[str, Any]) -> str | None:
        if message.get("method") == "plugins/log":
            return None
        if message.get("method") == "plugins/statusChanged" and not full:
            return _json({**message, "params": None}).replace("null}", _short(message["params"], STATUS_KEEP) + "}")
        if (
            "result" in message
            and isinstance(message["result"], dict)
            and "plugin_id" in message["result"]
            and not full
        ):
            return _json({**message, "result": None}).replace("null}", _short(message["result"], STATUS_KEEP) + "}")
        return _json(message)

    return render


def info_render(message: dict[str, Any]) -> str | None:
    """Render a ``PluginInfo`` result shortened."""
    result = message.get("result")
    if isinstance(result, dict) and "launch" in result:
        return _json({**message, "result": None}).replace("null}", short_info(result) + "}")
    if isinstance(result, dict) and "plugins" in result:
        inner = "[" + ",".join(short_info(i) for i in result["plugins"]) + "]"
        return _json({**message, "result": None}).replace("null}", '{"plugins":' + inner + "}}")
    return _json(message)


def block(lines: Sequence[str]) -> str:
    """A fenced ``jsonc`` block of ``lines``."""
    return "```jsonc\n" + "\n".join(lines) + "\n```\n"


class Normaliser:
    """Path, digest and time placeholders (see the module docstring)."""

    def __init__(self, tmp: Path) -> None:
        bin_dir = os.path.dirname(sys.executable)
        pairs = [
            (os.path.realpath(sys.executable), "/usr/bin/python3"),
            (bin_dir, "/path/to/venv/bin"),
            (str(REPO), "/path/to/hostd"),
            (str(tmp), "/tmp/hostd-docs"),
            (os.path.realpath(tmp), "/tmp/hostd-docs"),
        ]
        for folder in set(cgroups.detect().folders.values()):  # launch.accounting names hostd's own cgroup
            parts = folder.split("/")
            if len(parts) > 5 and folder.startswith("/sys/fs/cgroup/"):
                pairs.append((folder, "/".join(parts[:5]) + "/<hostd's cgroup>"))
        self.pairs = sorted(pairs, key=lambda pair: -len(pair[0]))
        self.digests: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        for old, new in self.pairs:
            text = text.replace(old, new)
        text = _DIGEST.sub(self._digest, text)
        text = _TIME.sub("<time>", text)
        return _ELAPSED.sub("within <elapsed> s (timeout", text)

    def _digest(self, match: re.Match[str]) -> str:
        name = self.digests.setdefault(match.group(0), f"sha256:<digest-{len(self.digests) + 1}>")
        return name


def _variant(
    tmp: Path, plugin_id: str, variant: str | None, permissions: Sequence[str] = ("echo.use", "echo.inspect")
) -> Path:
    """A plugin folder whose manifest runs the echo fixture (``--variant``), as ``plugin_id``."""
    folder = tmp / plugin_id
    folder.mkdir()
    tools = ["echo", "fail", "sleep", "large", "environment", "exit", "seen"]
    shutil.copyfile(FIXTURE / "server.py", folder / "server.py")  # another plugin's folder is out of reach
    args = ["server.py", *(["--variant", variant] if variant else [])]
    manifest = {
        "id": plugin_id,
        "name": f"{plugin_id} (fixture)",
        "version": "1.0.0",
        "permissions": list(permissions),
        "contributes": {"tools": [f"{plugin_id}.{t}" for t in tools]},
        "backend": {"type": "mcp", "transport": "stdio", "command": "python3", "args": args},
    }
    (folder / "plugin.json").write_text(orjson.dumps(manifest).decode(), encoding="utf-8")
    return folder


def _environment(tmp: Path) -> dict[str, str]:
    """hostd's environment: fixed, so ``envKeys`` and the fixture's ``environment`` are the same on every machine."""
    return {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(tmp / "home"),
        "LANG": "C.UTF-8",
    }


async def _session_main(tmp: Path, out: dict[str, str]) -> list[str]:
    """The main session; returns the lines of its ``exit`` for the ``exit`` block.

    Its parts, in order, are the ``_main_*`` functions below; each fills ``out`` with its examples.
    """
    norm = Normaliser(tmp)
    env = _environment(tmp)
    (tmp / "home").mkdir()
    args = ["--state-dir", str(tmp / "state"), "--no-login-path"]
    async with _recording(args, env, norm, handshake=False) as (client, r):
        await _main_handshake(r, out)
        digest = await _main_install(tmp, r, norm, out)
        plugin = {"id": "mcp-echo"}
        grant, enable_errors = await _main_enable(r, out, plugin, digest)
        await _main_tools(r, out)
        await _main_cancel(r, out)
        await _main_restart(r, out, plugin, grant)
        await _main_broken(tmp, r, norm, out, enable_errors)

        await _import(tmp, r, out)
        await r.call("plugins/uninstall", {"id": "echo-server"})
        lines, _ = await r.call("plugins/uninstall", {"id": "broken-echo"}, render=status_render())
        out["uninstall"] = block(lines)
        for plugin_id in ("schema-echo", "extra-echo"):  # so that shutdown stops one plugin: a fixed order
            await r.call("plugins/uninstall", {"id": plugin_id})
        await r.call("plugins/enable", plugin)
        shutdown, _ = await r.call("shutdown", None, render=status_render())
        lines, _ = await r.call("ping", {}, expect_error=True)
        out["shutdown"] = block(shutdown + lines)
        exit_line = await r.send({"jsonrpc": "2.0", "method": "exit"})
        with trio.fail_after(30):
            code = await client.process.wait()
        if code != 0:
            raise RuntimeError(f"hostd exited with {code} after shutdown and exit")
        return [exit_line, "// hostd exits with code 0 (a shutdown came first)"]


async def _main_handshake(r: Recorder, out: dict[str, str]) -> None:
    """A request before ``initialize``, ``initialize``, ``ping`` and three error messages."""
    pre, _ = await r.call("plugins/list", {}, id=1, expect_error=True)
    r._ids = 0
    init, _ = await r.call(
        "initialize",
        {
            "clientInfo": {"name": "my-electron-app", "version": "2.4.0"},
            "protocolVersion": "0",
            "knownPermissions": ["echo.use", "echo.inspect", "notes.read"],
        },
    )
    p.InitializeResult.model_validate(orjson.loads(r.transcript[-1][1])["result"])
    out["initialize"] = block(init)
    out["before-initialize"] = block(pre + init)
    ping, _ = await r.call("ping", {})
    out["ping"] = block(ping)

    messages: list[str] = []
    for method, params in (("plugins/frobnicate", {}), ("plugins/install", {"folder": "/x"}), ("initialize", {})):
        lines, _ = await r.call(method, params, expect_error=True)
        messages += lines
    out["messages"] = block(messages)


async def _main_install(tmp: Path, r: Recorder, norm: Normaliser, out: dict[str, str]) -> str:
    """``plugins/install``: its errors and the echo fixture; returns the fixture's launch digest."""
    needs_more = _variant(tmp, "needs-more", None, ("echo.use", "calendar.write"))
    missing = _variant(tmp, "missing-cmd", None)
    document = orjson.loads((missing / "plugin.json").read_bytes())
    document["backend"]["command"] = "definitely-not-installed-xyz"
    (missing / "plugin.json").write_bytes(orjson.dumps(document))
    errors: list[str] = []
    for folder in (tmp / "nope", needs_more):
        lines, _ = await r.call("plugins/install", {"path": str(folder)}, expect_error=True)
        errors += lines
    errors.append("// a manifest whose command is not installed: the install succeeds, launch says why it cannot run")

    def missing_render(message: dict[str, Any]) -> str:
        result = message["result"]
        launch = dict(result["launch"])
        launch["error"] = norm(launch["error"])[:80] + "…"  # cut after the paths are placeholders
        return _json({**message, "result": None}).replace(
            "null}", "{" + f'"id":{_json(result["id"])},"status":"stopped","launch":{_json(launch)},…' + "}}"
        )

    lines, info = await r.call("plugins/install", {"path": str(missing)}, render=missing_render)
    p.PluginInfo.model_validate(info)
    out["install-errors"] = block(errors + lines)

    lines, info = await r.call("plugins/install", {"path": str(FIXTURE)})
    p.PluginInfo.model_validate(info)
    out["install"] = block(lines)
    digest: str = info["launch"]["digest"]
    return digest


async def _main_enable(
    r: Recorder, out: dict[str, str], plugin: dict[str, str], digest: str
) -> tuple[list[str], list[str]]:
    """``plugins/grant``, ``approve``, ``enable``, ``status``, ``list``; returns the grant and enable-error lines."""
    enable_errors = ["// before plugins/grant:"]
    lines, _ = await r.call("plugins/enable", plugin, expect_error=True)
    enable_errors += lines
    grant: list[str] = []
    lines, _ = await r.call(
        "plugins/grant", {**plugin, "permissions": ["echo.use", "echo.inspect"]}, render=info_render
    )
    grant += lines
    lines, _ = await r.call("plugins/grant", {**plugin, "permissions": ["notes.read"]}, expect_error=True)
    grant += lines
    enable_errors.append("// granted, not approved yet:")
    lines, _ = await r.call("plugins/enable", plugin, expect_error=True)
    enable_errors += lines

    lines, _ = await r.call("plugins/approve", {**plugin, "digest": "sha256:" + "0" * 64}, expect_error=True)
    approve = list(lines)
    lines, info = await r.call("plugins/approve", {**plugin, "digest": digest})
    p.PluginInfo.model_validate(info)
    out["approve"] = block(approve + lines)

    lines, status = await r.call("plugins/enable", plugin, render=status_render(full=True))
    p.PluginStatus.model_validate(status)
    out["enable"] = block(lines)
    out["status-changed"] = block([lines[1]])
    out["list-changed"] = block([line for line in lines if "tools/listChanged" in line])
    lines, status = await r.call("plugins/status", plugin)
    p.PluginStatus.model_validate(status)
    out["status"] = block(lines)
    lines, listing = await r.call("plugins/list", {}, render=info_render)
    p.PluginsListResult.model_validate(listing)
    out["list"] = block(lines)
    return grant, enable_errors


async def _main_tools(r: Recorder, out: dict[str, str]) -> None:
    """``tools/list`` and ``tools/call``: results, progress and errors."""

    def tools_render(message: dict[str, Any]) -> str:
        result = message["result"]
        tools = ",".join(_json(t) for t in result["tools"][:2])
        return _json({**message, "result": None}).replace(
            "null}", "{" + f'"tools":[{tools},…],"revision":{result["revision"]}' + "}}"
        )

    lines, tools = await r.call("tools/list", {"plugin": "mcp-echo"}, render=tools_render)
    p.ToolsListResult.model_validate(tools)
    tools_list = list(lines)
    lines, _ = await r.call("tools/list", {"plugin": "nope"}, expect_error=True)
    out["tools-list"] = block(tools_list + lines)

    calls: list[str] = []
    lines, result = await r.call("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "hello"}})
    p.ToolsCallResult.model_validate(result)
    calls += [*lines, "// by function_name:"]
    lines, _ = await r.call("tools/call", {"name": "mcp-echo_echo", "arguments": {"text": "hi"}})
    calls += [*lines, "// with progress:"]
    lines, _ = await r.call("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 0.4, "steps": 2}})
    calls += lines
    out["progress"] = block(lines)
    out["tools-call"] = block(calls)

    failures: list[str] = []
    failing: list[tuple[dict[str, Any], str | None]] = [
        ({"name": "mcp-echo.echo", "arguments": {"text": 42}}, None),
        ({"name": "mcp-echo.nope", "arguments": {}}, None),
        ({"name": "mcp-echo.fail", "arguments": {"message": "disk is full"}}, "// the tool's isError result:"),
        (
            {"name": "mcp-echo.fail", "arguments": {"message": "no such note", "code": -32002}},
            "// the plugin's JSON-RPC error (code -32002 from the plugin, not hostd's):",
        ),
        ({"name": "mcp-echo.sleep", "arguments": {"seconds": 5, "steps": 1}, "timeoutMs": 500}, None),
        ({"name": "mcp-echo.large", "arguments": {"bytes": 4200000}}, None),
    ]
    for params, note in failing:
        if note:
            failures.append(note)
        lines, _ = await r.call("tools/call", params, expect_error=True)
        failures += lines
    out["tools-call-errors"] = block(failures)


async def _main_cancel(r: Recorder, out: dict[str, str]) -> None:
    """A ``tools/call`` cancelled by ``$/cancelRequest``, then what the plugin saw and its environment."""
    client = r.client
    # Cancel once the plugin is running the call (its first $/progress), so that hostd has an MCP
    # request to cancel: a $/cancelRequest that arrives first never reaches the plugin at all.
    start = len(r.transcript)
    pending = await client.start(
        "tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 600}}, id="call-42"
    )
    await client.wait_for("$/progress", lambda n: n.get("requestId") == "call-42")
    await r.client.notify("$/cancelRequest", {"id": "call-42"})
    try:
        await pending()
        raise RuntimeError("the cancelled call was answered with a result")
    except RpcError:
        pass

    def no_progress(message: dict[str, Any]) -> str | None:
        return None if message.get("method") == "$/progress" else _json(message)

    cancel = r._lines(start, "call-42", no_progress)
    cancel.insert(1, "// … its $/progress notifications, then:")
    out["cancel"] = block(cancel)
    lines, _ = await r.call("tools/call", {"name": "mcp-echo.seen", "arguments": {}})
    out["cancel-seen"] = block(lines)
    lines, _ = await r.call("tools/call", {"name": "mcp-echo.environment", "arguments": {}})
    out["environment"] = block(lines)


async def _main_restart(r: Recorder, out: dict[str, str], plugin: dict[str, str], grant: list[str]) -> None:
    """A grant revoked from the running plugin, ``plugins/restart``, a crash and ``plugins/disable``."""
    client = r.client
    grant.append("// later, revoking echo.inspect from the running plugin:")
    lines, _ = await r.call("plugins/grant", {**plugin, "permissions": ["echo.use"]}, render=info_render)
    grant += lines
    lines, _ = await r.call("tools/call", {"name": "mcp-echo.environment", "arguments": {}}, expect_error=True)
    grant += lines
    out["grant"] = block(grant)
    await r.call("plugins/grant", {**plugin, "permissions": ["echo.use", "echo.inspect"]})

    lines, _ = await r.call("plugins/restart", plugin, render=status_render())
    restart = list(lines)

    # A crash: the response and the supervisor's notifications come from different tasks, so
    # their order is not fixed; the block shows the response, then the notifications in order.
    rid = r.next_id()
    start = len(r.transcript)
    changes = len(client.seen("tools/listChanged"))
    answer = await client.start("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 3}}, id=rid)
    try:
        await answer()
    except RpcError:
        pass
    await client.wait_for("plugins/statusChanged", lambda s: s["status"] == "ready" and s["restarts"] == 2)
    # then the tools unregistered at the crash and registered again once ready: two tools/listChanged
    await client.wait_for("tools/listChanged", lambda _: len(client.seen("tools/listChanged")) >= changes + 2)
    crash_lines = r._lines(start, None, status_render())
    request = crash_lines[0]
    reply = next(line for line in crash_lines if line.startswith(f'← {{"jsonrpc":"2.0","id":{rid},'))
    notes = [line for line in crash_lines[1:] if line != reply]
    out["crash"] = block([request, reply, "// and, from the plugin's supervisor:", *notes])

    disable: list[str] = []
    lines, _ = await r.call("plugins/disable", plugin, render=status_render())
    disable += [*lines, "// again: already stopped, no notifications"]
    lines, _ = await r.call("plugins/disable", plugin, render=status_render())
    out["disable"] = block(disable + lines)
    restart.append("// after plugins/disable:")
    lines, _ = await r.call("plugins/restart", plugin, expect_error=True)
    out["restart"] = block(restart + lines)


async def _main_broken(tmp: Path, r: Recorder, norm: Normaliser, out: dict[str, str], enable_errors: list[str]) -> None:
    """Plugins that fail at ``plugins/enable`` (and one with an extra tool), and a ``plugins/log`` notification."""
    client = r.client
    broken: list[str] = []
    for plugin_id, variant, comment in (
        (
            "broken-echo",
            "exit-at-start",
            '// a plugin whose server exits at start (it writes "API key missing" to stderr first):',
        ),
        ("schema-echo", "bad-schema", "// a plugin whose declared tool has an invalid inputSchema:"),
        ("extra-echo", "extra-tool", None),
    ):
        folder = _variant(tmp, plugin_id, variant)
        _, info = await r.call("plugins/install", {"path": str(folder)})
        if "digest" not in info["launch"]:
            raise RuntimeError(f"{plugin_id}: {info['launch']}")
        await r.call("plugins/grant", {"id": plugin_id, "permissions": ["echo.use", "echo.inspect"]})
        await r.call("plugins/approve", {"id": plugin_id, "digest": info["launch"]["digest"]})
        lines, _ = await r.call("plugins/enable", {"id": plugin_id}, expect_error=True, render=status_render())
        if comment is None:
            out["enable-extra"] = block(lines)
        else:
            broken += [comment, *lines]
        if plugin_id == "broken-echo":
            log = await client.wait_for("plugins/log", lambda n: n.get("plugin") == "broken-echo")
            out["log"] = block([f"← {norm(_json({'jsonrpc': '2.0', 'method': 'plugins/log', 'params': log}))}"])
            p.LogParams.model_validate(log)
            failed = next(line for line in lines if '"status":"error"' in line)
            out["status-changed"] = out["status-changed"].replace("\n```", "\n" + failed + "\n```", 1)
    out["enable-errors"] = block(enable_errors + broken)


async def _import(tmp: Path, r: Recorder, out: dict[str, str]) -> None:
    """``plugins/import``: an invalid config, a Claude Desktop config as text, its first enable, the same again."""
    copy = tmp / "echo-copy"  # not a plugin folder: an imported plugin may not reach another plugin's
    copy.mkdir()
    shutil.copyfile(FIXTURE / "server.py", copy / "server.py")
    lines = ["// one invalid entry: nothing is imported"]
    bad = {"mcpServers": {"ok": {"command": "python3"}, "broken": {"args": ["x"]}}}
    more, _ = await r.call("plugins/import", {"config": bad}, expect_error=True)
    lines += [*more, "// a Claude Desktop config, as text (comments and a trailing comma included):"]
    text = (
        '{\n  // Claude Desktop style\n  "mcpServers": {\n'
        f'    "Echo Server": {{"command": "python3", "args": [{_json(str(copy / "server.py"))}]}},\n'
        '    "weather": {"url": "https://example.invalid/mcp"},\n  }\n}'
    )

    def import_render(message: dict[str, Any]) -> str:
        entries = message["result"]["entries"]
        parts = []
        for entry in entries:
            if "plugin" in entry:
                rest = {k: v for k, v in entry.items() if k != "plugin"}
                parts.append(_json(rest)[:-1] + f',"plugin":{short_info(entry["plugin"])}}}')
            else:
                parts.append(_json(entry))
        return _json({**message, "result": None}).replace("null}", '{"entries":[' + ",".join(parts) + "]}}")

    more, result = await r.call("plugins/import", {"config": text}, render=import_render)
    p.ImportResult.model_validate(result)
    lines += more
    digest = result["entries"][0]["plugin"]["launch"]["digest"]
    more, _ = await r.call("plugins/approve", {"id": "echo-server", "digest": digest}, render=info_render)
    lines += [*more, "// one approval, one spawn: the first enable pins the tools it finds and serves them"]
    more, _ = await r.call("plugins/enable", {"id": "echo-server"}, render=status_render())
    lines += [*more, "// the same config again: nothing new"]
    more, _ = await r.call("plugins/import", {"config": text}, render=import_render)
    out["import"] = block(lines + more)
    manifest = (tmp / "state" / "imported" / "echo-server" / "plugin.json").read_text(encoding="utf-8")
    out["import-manifest"] = "```json\n" + r.normalise(manifest).rstrip("\n") + "\n```\n"


async def _session_exit(tmp: Path, out: dict[str, str], first: list[str]) -> None:
    norm = Normaliser(tmp)
    args = ["--state-dir", str(tmp / "state-exit"), "--no-login-path"]
    async with _recording(args, _environment(tmp), norm, handshake=False) as (client, r):
        lines, _ = await r.call("initialize", {"clientInfo": {"name": "app", "version": "1"}})
        lines.append(await r.send({"jsonrpc": "2.0", "method": "exit"}))
        with trio.fail_after(30):
            code = await client.process.wait()
        if code != 1:
            raise RuntimeError(f"hostd exited with {code} after exit without shutdown")
        out["exit"] = block(
            [
                *first,
                "",
                "// another session: initialize, then exit without shutdown",
                *lines,
                "// hostd exits with code 1",
            ]
        )


async def _session_framing(tmp: Path, out: dict[str, str]) -> None:
    """Bad lines from the parent: each answered with ``id: null``, and the channel keeps serving."""
    norm = Normaliser(tmp)
    args = ["--state-dir", str(tmp / "state-framing"), "--no-login-path"]
    async with _recording(args, _environment(tmp), norm) as (_, r):
        r._ids = 2  # initialize was 1
        lines: list[str] = []
        unclosed = '{"jsonrpc": "2.0", "id": 7, "method": "ping"'
        lines += await r.raw(unclosed.encode() + b"\n", unclosed + "          // no closing brace")
        head = b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"'
        pad = PARENT_LIMIT + 70 - len(head) - len(b'"}}')
        big = head + b"x" * pad + b'"}}\n'
        shown = head.decode() + 'xxxxxxxx…"}}   // ' + f"{len(big) - 1} bytes on one line: 8 MiB + 70"
        lines += await r.raw(big, shown)
        batch = '[{"jsonrpc":"2.0","id":8,"method":"ping"}]'
        lines += await r.raw(batch.encode() + b"\n", batch)
        lines.append("// and the channel keeps serving:")
        ping, _ = await r.call("ping", {})
        out["framing"] = block(lines + ping)


async def _session_development(tmp: Path, out: dict[str, str]) -> None:
    """``--trust development``: an unapproved launch starts (with a warning on stderr)."""
    norm = Normaliser(tmp)
    args = ["--state-dir", str(tmp / "state-dev"), "--no-login-path", "--trust", "development"]
    async with _recording(args, _environment(tmp), norm) as (_, r):
        r._ids = 1  # initialize was 1
        lines, _ = await r.call("plugins/install", {"path": str(FIXTURE)}, render=info_render)
        more, _ = await r.call(
            "plugins/grant", {"id": "mcp-echo", "permissions": ["echo.use", "echo.inspect"]}, render=info_render
        )
        lines += more
        more, _ = await r.call("plugins/enable", {"id": "mcp-echo"}, render=status_render())
        out["development"] = block(lines + more)


async def _session_locked(tmp: Path, out: dict[str, str]) -> None:
    """A state directory another hostd holds: exit code 75, from the command line and from ``initialize``."""
    norm = Normaliser(tmp)
    locked = tmp / "locked"
    env = _environment(tmp)
    async with HostdClient.spawn(["--state-dir", str(locked), "--no-login-path"], env=env, stderr=subprocess.DEVNULL):
        command = [sys.executable, "-m", "hostd", "serve", "--state-dir", str(locked), "--no-login-path"]
        done = await trio.run_process(
            command, env=env, stdin=b"", capture_stdout=True, capture_stderr=True, check=False
        )
        if done.returncode != 75:
            raise RuntimeError(f"a second hostd on a locked state directory exited with {done.returncode}")
        stderr = _PID.sub("(pid <pid>)", norm(done.stderr.decode().strip()))
        out["locked-cli"] = (
            "```console\n"
            f"$ hostd serve --state-dir {norm(str(locked))}   # while another hostd holds it\n"
            f"{stderr}\n$ echo $?\n75\n```\n"
        )
        args = ["--state-dir", str(tmp / "state-other"), "--no-login-path"]
        unpid = lambda text: _PID.sub("(pid <pid>)", norm(text))  # noqa: E731
        async with _recording(args, env, unpid, handshake=False) as (client, r):
            params = {"clientInfo": {"name": "app", "version": "1"}, "stateDir": str(locked)}
            lines, _ = await r.call("initialize", params, expect_error=True)
            with trio.fail_after(30):
                code = await client.process.wait()
            if code != 75:
                raise RuntimeError(f"hostd exited with {code} after initialize named a locked state directory")
            out["locked"] = block([*lines, "// hostd exits with code 75"])


async def _session_restore(tmp: Path, out: dict[str, str]) -> None:
    """The next session on the main session's state directory: the stored plugins come back.

    The background enable races the first ``plugins/list`` (its status may already be
    ``starting``), so that answer is shown without ``status`` and the notifications after it,
    in the order hostd sent them, once the restore is done.
    """
    norm = Normaliser(tmp)
    args = ["--state-dir", str(tmp / "state"), "--no-login-path"]
    async with _recording(args, _environment(tmp), norm, handshake=False) as (client, r):
        lines, _ = await r.call("initialize", {"clientInfo": {"name": "hostctl", "version": "0"}})
        lines.append("// at once: the stored plugins are installed again (not started yet)")

        def unsettled(message: dict[str, Any]) -> str | None:
            if "method" in message:
                return None
            plugins = [{k: v for k, v in info.items() if k != "status"} for info in message["result"]["plugins"]]
            return info_render({**message, "result": {"plugins": plugins}})

        more, _ = await r.call("plugins/list", {}, render=unsettled)
        lines += more
        await client.wait_for(
            "plugins/statusChanged", lambda s: s["plugin_id"] == "mcp-echo" and s["status"] == "ready"
        )
        await client.wait_for("tools/listChanged")
        lines.append("// then, in the background, the enabled one is enabled again:")
        for note in client.notifications:
            shown = _short(note.params, STATUS_KEEP if note.method == "plugins/statusChanged" else None)
            text = _json({"jsonrpc": "2.0", "method": note.method, "params": None}).replace("null}", shown + "}")
            lines.append(f"← {norm(text)}")
        more, _ = await r.call("plugins/list", {}, render=info_render)
        out["restore"] = block(lines + more)


async def _capture(tmp: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    first = await _session_main(tmp, out)
    await _session_exit(tmp, out, first)
    await _session_restore(tmp, out)
    await _session_framing(tmp, out)
    await _session_development(tmp, out)
    await _session_locked(tmp, out)
    return out


def capture() -> dict[str, str]:
    """Run the scenarios against a live hostd; return ``{block name: Markdown}`` (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="hostd-docs-"))
    try:
        return trio.run(_capture, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
