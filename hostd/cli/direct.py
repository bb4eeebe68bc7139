"""hostctl's reading commands without a hostd process: the state folder read in hostctl's own process (issue 28).

When no hostd serves the state folder (no live control socket), ``list``, ``status``, ``logs`` and ``tools`` used
to start a ``hostd serve --no-restore`` of their own (a second Python, hostd's imports again, a lock taken: about
1 s before the first answer, and a hostd starting meanwhile refused ``STATE_LOCKED``). Here the same
:class:`hostd.host.service.Host` that such a hostd builds is built in hostctl's process, with the same settings
(:func:`hostd.cli.hostd.host_settings` of ``serve --no-restore``'s arguments, the same ``PATH``:
:func:`hostd.cli.client.plugin_environment`), over a :class:`hostd.storage.state.ReadOnlyStateStore`, and
asked the same methods: the answers, and so every line printed, are the ones that hostd gives, its parsing
and validation included (an unknown id is the same ``PLUGIN_NOT_FOUND``, a document from a newer hostd the
same ``STATE_UNUSABLE``, a recorded start failure the same ``error`` with its reason). The login shell's
``PATH`` and the sandbox probe's answer are the ones a hostd kept in the folder (:mod:`hostd.storage.facts`)
where nothing they depend on changed since: then a read runs no process at all. Else the login shell
(:func:`sandbox.environment.login_shell_path`, as hostd looks it up) is run while hostd's host is imported, and
the probe when the first launch is resolved, as in hostd.

What it does not do, the class of fault it avoids being *a reader that changes what it reads*: it takes no lock
(a hostd starting at the same moment serves as usual), and writes, moves or removes nothing in the folder (no
orphan sweep, no log line, no record). Where hostd would change the folder before answering (a damaged file
it moves aside, a plugin it marks broken, anything ``hostd doctor`` reports as a problem), hostctl does not read
directly: :func:`readable` says so, and the command starts a hostd as before, which repairs and reports.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, cast

import orjson
import trio

from hostd import __version__
from hostd.cli.checkup import check_state_folder
from hostd.cli.client import Notification, RpcError, plugin_environment
from hostd.cli.connection import TracingClient
from hostd.control.core import PROTOCOL_VERSION, InitializeOptions, RequestContext, error_response
from hostd.storage import facts
from hostd.storage.state import ReadOnlyStateStore
from hostd.wire.errors import ErrorKind, HostError

#: The methods a reading command asks (and :func:`hostd.cli.hostctl._with_next_step`'s ``plugins/list``).
READING_METHODS = frozenset({"plugins/list", "plugins/status", "plugins/logs", "tools/list"})

#: ``hostd serve``'s arguments of the hostd a command would otherwise start (:func:`hostd.cli.connection.open_hostd`).
SERVE_ARGUMENTS = ["--log-level", "error", "--no-restore", "--no-control-socket"]


def readable(state_dir: Path) -> bool:
    """Whether ``state_dir`` can be read directly: a folder holding a state document in which ``hostd doctor``
    (:func:`hostd.cli.checkup.check_state_folder`, itself read-only) finds no problem. Otherwise a hostd of the
    command's own answers (it creates a missing folder, moves a damaged file aside, marks a plugin broken:
    what only the folder's owner does, under its lock). Blocking (small files)."""
    if not (state_dir / "state.json").is_file():
        return False
    return not any(line.startswith("problem:") for line in check_state_folder(state_dir))


async def reader(state_dir: str) -> AbstractAsyncContextManager[TracingClient] | None:
    """:func:`read_directly` on ``state_dir`` when it is :func:`readable` (checked in a worker thread), else
    ``None``: the reader :func:`hostd.cli.connection.open_hostd` takes."""
    if await trio.to_thread.run_sync(readable, Path(state_dir)):
        return read_directly(state_dir)
    return None


class DirectClient(TracingClient):
    """What the commands drive, as they drive a hostd's :class:`hostd.cli.connection.TracingClient`: :meth:`start`
    asks the in-process host instead of writing to a hostd's stdin. Results and errors go through JSON as on the wire
    (``orjson``, as hostd encodes them). ``attached`` is False: like a ``--no-restore`` hostd, nothing here starts
    a plugin. Only :data:`READING_METHODS` are served; another is a ``METHOD_NOT_FOUND`` (a command that
    writes must not come here)."""

    def __init__(self, handle: Callable[[str, Any, RequestContext], Any]) -> None:
        # No process: the parts of HostdClient a command reads, set as HostdClient sets them.
        self._handle = handle
        self.on_request = None
        self.requests: list[tuple[Any, str, dict[str, Any]]] = []
        self.notifications: list[Notification] = []
        self.stray: list[Any] = []
        self.closed = trio.Event()
        self.transcript = None
        self._changed = trio.Event()
        self._count = 0
        self.attached = False
        self.answered_after: dict[int | str, int] = {}

    def keep(self, method: str, params: dict[str, Any]) -> None:
        """A notification of the host, kept in :attr:`notifications` (as a hostd's would arrive)."""
        self.notifications.append(Notification(method, orjson.loads(orjson.dumps(params))))
        self._wake()

    async def start(self, method: str, params: Any = None, *, id: int | str | None = None) -> Callable[[], Any]:
        """Answer the request now; return what awaits its result (raises :class:`RpcError` for an error)."""
        self._count += 1
        rid = id if id is not None else self._count
        reply = await self._answer_directly(rid, method, params)
        self.answered_after[rid] = len(self.notifications)
        wire: dict[str, Any] = orjson.loads(orjson.dumps(reply))

        async def response() -> Any:
            if "error" in wire:
                raise RpcError(wire["error"])
            return wire.get("result")

        return response

    async def _answer_directly(self, rid: int | str, method: str, params: Any) -> dict[str, Any]:
        """The JSON-RPC response a hostd would send (hostd/control/server.py ``_run_request``, for the host's
        methods): the result, or the :class:`HostError` as its error object."""
        try:
            if method not in READING_METHODS:
                raise HostError(ErrorKind.METHOD_NOT_FOUND, f"no method {method!r} (hostctl reads the folder)")
            ctx = RequestContext(id=rid, method=method, notify=self._notify)
            result = await self._handle(method, params, ctx)
        except HostError as error:
            return error_response(rid, error)
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        self.keep(method, params)

    async def close(self, timeout: float = 15.0) -> int | None:
        """Nothing to stop: no process."""
        self.closed.set()
        return 0


@asynccontextmanager
async def read_directly(state_dir: str) -> AsyncIterator[TracingClient]:
    """A :class:`DirectClient` over ``state_dir``, whose host is built as a ``hostd serve --no-restore`` builds
    its own (:func:`hostd.cli.hostd.host_settings`), but reading only (``HostSettings.read_only``).

    Raises :class:`hostd.cli.client.RpcError` ``STATE_UNUSABLE`` when the document cannot be used (a hostd
    answers every request with it). Cancellation ends the host's tasks (the login shell's ``PATH`` lookup).
    """
    from hostd.cli import hostd as serve  # noqa: PLC0415 (its parser and settings: with the host, not before)

    # The heavy part (hostd's host, as in hostd after initialize) imported while the login shell says its PATH.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")  # as hostd serve does: see hostd/cli/hostd.py
    env = plugin_environment()
    # What a hostd learnt by running the login shell and the sandbox probe, where it still holds: then neither runs.
    kept = await trio.to_thread.run_sync(facts.read, Path(state_dir), env)
    found: list[str | None] = list(kept.login_path) if kept.login_path is not None else []
    async with trio.open_nursery() as early:
        if kept.login_path is None:
            early.start_soon(_look_up_login_path, env, found)
        service = await trio.to_thread.run_sync(importlib.import_module, "hostd.host.service")
    if kept.probe is not None:
        from sandbox.probe import adopt  # noqa: PLC0415 (imported with the host, above)

        adopt(kept.probe)
    _configure_logging()
    args = serve.serve_arguments(["serve", "--state-dir", state_dir, *SERVE_ARGUMENTS])
    settings = dataclasses.replace(serve.host_settings(service, args, serve.trust_roots_of(args)), read_only=True)
    store = ReadOnlyStateStore(Path(state_dir))
    options = InitializeOptions(
        client_name="hostctl",
        client_version=__version__,
        protocol_version=PROTOCOL_VERSION,
        known_permissions=None,
        state_dir=state_dir,
        state_store=store,
    )
    async with trio.open_nursery() as nursery:
        client: DirectClient | None = None

        async def notify(method: str, params: dict[str, Any]) -> None:
            if client is not None:
                client.keep(method, params)

        with _environment(env):
            try:
                host = await service.Host.create(options, notify, nursery, settings, login_path=(found[0],))
            except HostError as error:  # STATE_UNUSABLE: hostd answers every request with it, and so do we
                raise RpcError(error.to_error_object()) from None
            client = DirectClient(cast(Callable[[str, Any, RequestContext], Any], host.handle))
            try:
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await host.shutdown(fast=True)
                nursery.cancel_scope.cancel()


async def _look_up_login_path(env: dict[str, str], found: list[str | None]) -> None:
    """Append the login shell's ``PATH`` to ``found`` (:func:`sandbox.environment.login_shell_path`, in a
    worker thread), the shell started with ``env`` as hostd's would be."""
    from sandbox.environment import login_shell_path  # noqa: PLC0415

    found.append(await trio.to_thread.run_sync(lambda: login_shell_path(env=env)))


def _configure_logging() -> None:
    """hostd's own log lines as that hostd prints them on hostctl's stderr (``--log-level error``)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.ERROR, format="hostd %(levelname)s %(name)s: %(message)s")


class _environment:
    """``os.environ`` as ``env`` within the block (the ``PATH`` the command's own hostd would run with), then
    back as it was: a bare ``command`` of a manifest resolves to the same program."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._saved: dict[str, str] = {}

    def __enter__(self) -> None:
        self._saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self._env)

    def __exit__(self, *exc: object) -> None:
        os.environ.clear()
        os.environ.update(self._saved)
