"""The control socket: a second way into the hostd that serves a state folder, for the user's own tools.

A hostd serving a state folder (an application's sidecar, a ``hostd serve`` in a terminal) listens on
``<state folder>/control.sock``, a Unix socket of mode 0600 in the 0700 folder, so that ``hostctl`` talks to
it instead of starting a second hostd (which the folder's lock would refuse: ``STATE_LOCKED``). Each
connection is a control session of its own (:class:`hostd.control.server.ControlServer` on the socket:
``initialize`` first, the same methods, the same errors) in front of the one host: the same plugins, the
same method table (:class:`hostd.control.router.MethodRouter`). What differs from the parent's session:

- ``shutdown`` and ``exit`` end the session only; the host and its plugins go on serving the parent.
- ``initialize`` may not name another state folder (``INVALID_PARAMS``): the session would unlock the
  parent's.
- Notifications (``plugins/log``, ``plugins/statusChanged``...) go to the parent and to every session
  (:class:`Fanout`); requests hostd makes of a client (sampling, elicitation) go to the parent only.
- Flow control: a plugin started from a session is paced by the parent's outbox, which outlives the session.

Who may connect: the socket's mode (0600) and folder (0700) keep other users out; on Linux the peer's uid
(``SO_PEERCRED``) must be hostd's own too (root excepted: it can open the file anyway). At most
:data:`MAX_SESSIONS` sessions at once; a further connection waits in the listen queue for a free one.

The path: a Unix socket's address holds at most 107 bytes; a longer state folder's socket is reached
through ``/proc/self/fd/<fd of the folder>/control.sock`` (Linux), see :func:`socket_address`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from hostd.control.core import InitializeOptions, Notify, RequestContext
from hostd.control.outbox import Outbox, set_current_outbox
from hostd.control.rendezvous import SOCKET_NAME, socket_address, socket_path
from hostd.control.server import ControlServer, HostApi
from hostd.storage.state import StateStore
from hostd.wire.errors import ErrorKind, HostError

log = logging.getLogger("hostd.control.attach")

#: Sessions served at once on the socket.
MAX_SESSIONS = 8


class Fanout:
    """The host's ``notify``: the parent's session's, then every attached session's (none at first)."""

    def __init__(self, primary: Notify) -> None:
        self.primary = primary
        self.sessions: set[Notify] = set()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send ``method`` to the parent and to each session (each returns at once: their outboxes queue it)."""
        await self.primary(method, params)
        for send in list(self.sessions):
            await send(method, params)


class _SharedHost:
    """The host as a session sees it: the same methods; ``shutdown`` leaves it running."""

    def __init__(self, host: HostApi, outbox: Outbox | None) -> None:
        self._host = host
        self._outbox = outbox

    @property
    def METHODS(self) -> Mapping[str, object]:
        """The host's own method table."""
        return self._host.METHODS

    async def handle(self, method: str, params: Any, ctx: RequestContext) -> Any:
        """Serve the request on the host; what it starts is paced by the parent's outbox."""
        if self._outbox is not None:
            set_current_outbox(self._outbox)  # this request's task and what it starts (plugin links)
        return await self._host.handle(method, params, ctx)

    async def shutdown(self, *, fast: bool) -> None:
        """A session's ``shutdown`` ends the session only: the host serves its parent on."""


class _Session(ControlServer):
    """A control session on one socket connection (see the module's notes)."""

    def _lock_state(self, options: InitializeOptions) -> StateStore:
        store = self._state_store
        assert store is not None
        if options.state_dir is not None and Path(options.state_dir).resolve() != store.directory.resolve():
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                f"this hostd serves the state folder {store.directory}, not {options.state_dir}",
                stateDir=str(store.directory),
            )
        return store


def _peer_uid(sock: trio.socket.SocketType) -> int | None:
    """The connecting process's uid (Linux ``SO_PEERCRED``); None where the platform does not say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return int(uid)


async def serve_control_socket(
    host: HostApi,
    store: StateStore,
    fanout: Fanout,
    outbox: Outbox | None,
    *,
    task_status: trio.TaskStatus[Path | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Listen on ``<store.directory>/control.sock`` and serve each connection as a session of ``host``.

    Start it with ``nursery.start``: it reports the socket's path once it listens, or None (logged as a
    warning) when it cannot (then hostctl starts its own hostd, which the lock refuses). We hold the folder's
    lock, so a socket file already there is a dead hostd's: it is replaced. Runs until cancelled (hostd
    stops), then removes the socket file; sessions still open are cancelled with it.
    """
    path = socket_path(store.directory)
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with socket_address(path) as address:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
            old_mask = os.umask(0o177)  # created 0600: no moment where another user could connect
            try:
                await listener.bind(address)
            finally:
                os.umask(old_mask)
        listener.listen(MAX_SESSIONS)
    except OSError as exc:
        listener.close()
        log.warning("no control socket at %s: %s", path, exc)
        task_status.started(None)
        return
    slots = trio.Semaphore(MAX_SESSIONS)
    shared = _SharedHost(host, outbox)
    try:
        async with trio.open_nursery() as nursery:
            task_status.started(path)
            while True:
                await slots.acquire()
                conn, _ = await listener.accept()
                nursery.start_soon(_serve_session, conn, shared, store, fanout, slots)
    finally:
        listener.close()
        with contextlib.suppress(OSError), socket_address(path) as address:
            os.unlink(address)


async def _serve_session(
    conn: trio.socket.SocketType,
    shared: _SharedHost,
    store: StateStore,
    fanout: Fanout,
    slots: trio.Semaphore,
) -> None:
    """One connection: refused (closed) when another user's, else a :class:`_Session` until it ends."""
    stream = trio.SocketStream(conn)
    try:
        uid = _peer_uid(conn)
        if uid is not None and uid not in (os.getuid(), 0):
            log.warning("control socket: refused a connection of uid %d", uid)
            return

        async def factory(_options: InitializeOptions, _notify: Notify, _nursery: trio.Nursery) -> HostApi:
            return shared

        session = _Session(
            stream, stream, factory, state_dir=str(store.directory), state_store=store, handle_signals=False
        )
        fanout.sessions.add(session.notify)
        try:
            await session.serve()
        finally:
            fanout.sessions.discard(session.notify)
    finally:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.aclose()
        slots.release()


__all__ = ["MAX_SESSIONS", "SOCKET_NAME", "Fanout", "serve_control_socket", "socket_address", "socket_path"]
