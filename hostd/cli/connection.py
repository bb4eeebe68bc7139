"""The hostd a hostctl command drives: starting and stopping it, failures, progress on stderr, waiting for
its restore, and the install steps several commands and the demo share (install, prepare, grant, approve, enable).
"""

from __future__ import annotations

import math
import os
import socket
import struct
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar, cast

import trio
from rich.console import Console
from rich.text import Text

from hostd import __version__
from hostd.cli.client import HostdClient, RequestHandler, RpcError, plugin_environment
from hostd.cli.render import (
    SHOWN_LIVE,
    cli_words,
    describe_launch,
    error_details,
    make_console,
    next_step,
    print_json,
    say,
    terminal_safe,
)
from hostd.control.core import PROTOCOL_VERSION
from hostd.control.rendezvous import socket_address, socket_path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: Generous client-side bounds: hostd enforces the manifest's own timeouts first.
ENABLE_TIMEOUT = 900.0
REQUEST_TIMEOUT = 60.0
CALL_TIMEOUT = 600.0


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
            message = cli_words(exc.message, exc.data)  # hostd's advice names methods: as hostctl's commands
            return cls(exc.kind or str(exc.code), message, error_details(exc.data, exc.message))
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


HOSTD_FAILURES = (RpcError, EOFError, trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError)


# -- talking to hostd ------------------------------------------------------------


class TracingClient(HostdClient):
    """A :class:`HostdClient` that also remembers how many notifications had
    arrived when each response did, so a trace can show them in wire order.

    ``attached``: it talks to a hostd that was already serving the state folder (through its control
    socket), which restores the enabled plugins itself; False: to a hostd this command started with
    ``--no-restore``, where nothing starts a plugin but a command that needs it.
    """

    def __init__(self, process: trio.Process, *, attached: bool = False) -> None:
        super().__init__(process)
        self.answered_after: dict[int | str, int] = {}
        self.attached = attached

    def _route(self, message: dict[str, Any]) -> None:
        rid = message.get("id")
        if "method" not in message and isinstance(rid, int | str):
            self.answered_after[rid] = len(self.notifications)
        super()._route(message)


#: What answers a reading command without a hostd (:func:`hostd.cli.direct.reader`): given the state folder, a
#: client to use, or ``None`` when a hostd must answer.
Reader = Callable[[str], Awaitable[AbstractAsyncContextManager[TracingClient] | None]]

_INITIALIZE = {"clientInfo": {"name": "hostctl", "version": __version__}, "protocolVersion": PROTOCOL_VERSION}


@asynccontextmanager
async def open_hostd(
    state_dir: str | None = None, *, ask_grants: RequestHandler | None = None, reader: Reader | None = None
) -> AsyncIterator[TracingClient]:
    """An initialized hostd on ``state_dir`` (a temporary state folder unless given); says on stderr which.

    The hostd already serving ``state_dir`` when one listens on its control socket
    (:mod:`hostd.control.attach`; this command's session ends at exit, that hostd goes on);
    else a ``hostd serve --no-restore`` of this command's own, which starts no plugin
    until a command needs one (``plugins/enable``), and is sent ``shutdown`` and
    ``exit`` and waited for at exit. Two hostds never serve one folder: a second
    one's ``initialize`` is answered ``STATE_LOCKED`` (its lock, hostd/storage/state.py).

    ``ask_grants``: answers hostd's ``grants/request`` (a file a tool call names; ``capabilities.grants`` is
    declared) in a hostd of this command's own; ``None``, or a session on another's socket (whose requests
    go to its parent): not declared, such a call fails with ``ACCESS_NOT_GRANTED``.

    ``reader``: given to a command that only reads (``list``, ``status``, ``logs``, ``tools``): when no hostd
    serves the folder, what it returns for the folder, if anything, answers instead of a hostd of this command's
    own (:func:`hostd.cli.direct.reader`: the folder read in this process, the same answers, no hostd started,
    no lock taken; ``None`` where only a hostd may handle the folder).
    """
    with tempfile.TemporaryDirectory(prefix="hostctl-") as scratch:
        if state_dir is not None:
            connected = await _connect(Path(state_dir))
            if connected is not None:
                sock, pid = connected
                print(f"hostctl: using the hostd already serving {state_dir} (pid {pid})", file=sys.stderr)
                async with _attached(sock) as client:
                    yield client
                return
            reading = await reader(state_dir) if reader is not None else None
            if reading is not None:
                print(f"hostctl: read {state_dir} directly (no hostd serves it; nothing started)", file=sys.stderr)
                try:
                    async with reading as client:
                        yield client
                except BaseExceptionGroup as group:  # the host's nursery wraps what the command raised
                    leaves = _leaves(group)
                    if len(leaves) == 1 and not isinstance(leaves[0], trio.Cancelled):
                        raise leaves[0] from None
                    raise
                return
        state = state_dir if state_dir is not None else os.path.join(scratch, "state")
        # The same handler answers file grants and network destinations (issue 26) in the terminal.
        asks: dict[str, Any] = {"capabilities": {"grants": {}, "network": {}}} if ask_grants is not None else {}
        initialize = {**_INITIALIZE, **asks}
        spawn = TracingClient.spawn(
            ["--state-dir", state, "--log-level", "error", "--no-restore", "--no-control-socket"],
            env=plugin_environment(),
            initialize=initialize,
        )
        if state_dir is not None:
            print(
                f"hostctl: started a hostd for {state_dir} (it starts only the plugins this command uses)",
                file=sys.stderr,
            )
        try:
            async with spawn as client:
                assert isinstance(client, TracingClient)
                client.on_request = ask_grants
                yield client
        except BaseExceptionGroup as group:
            # HostdClient.spawn runs the body inside a nursery, which wraps what
            # the body raised; hand a lone exception back unwrapped.
            leaves = _leaves(group)
            if len(leaves) == 1 and not isinstance(leaves[0], trio.Cancelled):
                raise leaves[0] from None
            raise


async def _connect(state_dir: Path) -> tuple[trio.socket.SocketType, str] | None:
    """A connection to the control socket of the hostd serving ``state_dir`` and that hostd's pid (``?``
    where the platform does not say), or None when none listens (no socket file, or a dead hostd's)."""
    path = socket_path(state_dir)
    if not path.exists():
        return None
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket_address(path) as address:
            await sock.connect(address)
    except OSError:
        sock.close()
        return None
    option = getattr(socket, "SO_PEERCRED", None)
    pid = "?"
    if option is not None:
        pid = str(struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))[0])
    return sock, pid


class _SocketChannel:
    """What :class:`HostdClient` drives, over a control socket instead of a child's pipes: ``stdin`` and
    ``stdout`` are the one socket stream; ``wait`` returns when hostd closes it (after ``exit``);
    ``returncode`` is 0 then; ``kill`` closes the stream."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stdin = stream
        self.stdout = stream
        self.returncode: int | None = None
        self.closed: trio.Event | None = None

    async def wait(self) -> int:
        assert self.closed is not None
        await self.closed.wait()
        self.returncode = 0
        return 0

    def kill(self) -> None:
        self.returncode = -1


@asynccontextmanager
async def _attached(sock: trio.socket.SocketType) -> AsyncIterator[TracingClient]:
    """An initialized session on a connected control socket; ended (``shutdown``, ``exit``) at exit."""
    stream = trio.SocketStream(sock)
    channel = _SocketChannel(stream)
    client = TracingClient(cast(trio.Process, channel), attached=True)
    channel.closed = client.closed
    try:
        async with trio.open_nursery() as nursery:
            client._nursery = nursery
            nursery.start_soon(client._reader)
            try:
                await client.request("initialize", _INITIALIZE)
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await client.close(timeout=REQUEST_TIMEOUT)
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1 and not isinstance(leaves[0], trio.Cancelled):
            raise leaves[0] from None
        raise
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


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
    status = await enable_plugin(client, plugin_id)
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


def show(opts: Options, result: Any, human: Callable[[Console], None]) -> int:
    """Print ``result`` as the protocol's JSON (``--json``), else let ``human`` print it on
    stdout for people; return :data:`EXIT_OK`."""
    if opts.as_json:
        print_json(result)
    else:
        human(make_console())
    return EXIT_OK


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
    console = make_console(stderr=True)
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
                SHOWN_LIVE.add(message)
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
    """Whether hostd is still bringing back this enabled plugin: ``starting``. An enabled plugin ends
    ``ready``, ``unhealthy`` or ``error`` (a refused or failed restore says why in its status); one
    still queued (restore starts at most 4 at a time) or never started (a hostd serving with
    ``--no-restore``) is ``stopped``, which is not waited for: nothing may ever start it."""
    return bool(info.get("enabled")) and info.get("status") == "starting"


async def settle(client: HostdClient, only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """``plugins/list`` once hostd has finished restoring the enabled plugins (those in ``only``).

    A hostd this command started (``--no-restore``) restores nothing: its listing is
    returned at once, and no plugin is started. A hostd that was already serving the
    folder (``client.attached``) starts every enabled plugin in the background after
    its own ``initialize``; a command that looks at or uses a plugin waits for that
    first: installing the folder again while its restore runs is ``PLUGIN_STATE_CONFLICT``,
    and a status read then says ``starting``. Waits on hostd's notifications (with the
    progress display), at most ``ENABLE_TIMEOUT`` seconds (``trio.TooSlowError``).
    """
    wanted = None if only is None else set(only)

    async def listing() -> list[dict[str, Any]]:
        plugins: list[dict[str, Any]] = (await client.request("plugins/list", {}))["plugins"]
        return plugins

    plugins = await listing()
    if not getattr(client, "attached", True):
        return plugins
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
    err = make_console(stderr=True)
    for info in settled:
        if info["id"] in pending and info.get("status") == "error":
            # Its lines were shown once above; say why they come back at every command.
            say(err, f"hostctl: {info['id']} failed to start again (it is enabled: each hostctl command starts it)")
            next_step(err, "see why, or stop trying", f"hostctl status {info['id']} / hostctl disable {info['id']}")
    return settled


# -- what the commands share ---------------------------------------------------------


@dataclass
class Options:
    """What every command gets: the state folder, ``--json``, ``--yes``."""

    state_dir: str
    as_json: bool = False
    yes: bool = False


def find_plugin(plugins: Iterable[Mapping[str, Any]], plugin_id: str) -> dict[str, Any]:
    """The ``PluginInfo`` of ``plugin_id`` among ``plugins``; raises :class:`Failure` (``PLUGIN_NOT_FOUND``)."""
    for info in plugins:
        if info["id"] == plugin_id:
            return dict(info)
    known = ", ".join(p["id"] for p in plugins) or "none"
    raise Failure("PLUGIN_NOT_FOUND", f"no installed plugin {plugin_id!r} (installed: {known})")


def is_folder_argument(target: str) -> bool:
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


async def disabled_tools(client: HostdClient, plugin_id: str | None = None) -> dict[str, int]:
    """``{plugin id: number of its registered tools the user disabled}`` (of ``plugin_id``, or all)."""
    params: dict[str, Any] = {"includeDisabled": True, **({"plugin": plugin_id} if plugin_id else {})}
    counts: dict[str, int] = {}
    for tool in (await client.request("tools/list", params))["tools"]:
        if not tool.get("enabled", True):
            owner = str(tool.get("plugin") or str(tool["name"]).partition(".")[0])
            counts[owner] = counts.get(owner, 0) + 1
    return counts


async def prepare_if_needed(client: HostdClient, info: dict[str, Any]) -> dict[str, Any]:
    """``plugins/prepare`` a just-installed plugin whose launch names a package (npx, uvx), with progress;
    its new ``PluginInfo`` (the launch to approve runs the prepared environment). Others: ``info`` as is."""
    if ((info.get("launch") or {}).get("prepare") or {}).get("state") != "needed":
        return info

    async def run() -> dict[str, Any]:
        prepared: dict[str, Any] = await client.request("plugins/prepare", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
        return prepared

    return await with_progress(client, f"installing the packages of {info['id']}", run)


async def enable_plugin(client: HostdClient, plugin_id: str) -> dict[str, Any]:
    """``plugins/enable`` with the progress display -> ``PluginStatus``; raises :class:`RpcError`."""

    async def enable() -> dict[str, Any]:
        status: dict[str, Any] = await client.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
        return status

    # A refusal the user can fix gets its hostctl command from NEXT_COMMANDS (run_command).
    return await with_progress(client, f"starting {plugin_id}", enable, plugins=[plugin_id])
