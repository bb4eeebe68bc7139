"""Receiving a plugin's namespace listener (issue 26; the shim's side is ``sandbox/_shim_net.py``).

Before a ``netproxy`` launch is spawned, hostd opens a :class:`Handoff`: a pathname Unix socket in a fresh folder
only hostd's user can open (``0700``, :func:`tempfile.mkdtemp`). The shim, once inside the plugin's network
namespace, connects to it and sends the sockets it opened there (``SCM_RIGHTS``, one kind letter per descriptor:
``L`` the proxy's loopback listener, ``D`` a DNS socket, ``T`` a transparent listener; ``sandbox/_shim_net.py``).
:meth:`Handoff.receive` returns them as :class:`Received`, checked, for :mod:`hostd.net.proxy`.
The shim's connection lands in the socket's backlog, so hostd may accept it after ``spawn`` returned.
"""

from __future__ import annotations

import array
import contextlib
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from sandbox.launch import Launch
    from sandbox.policy import IsolationPolicy
    from sandbox.process import SandboxedProcess

__all__ = ["HANDOFF_SECONDS", "MAX_DESCRIPTORS", "Handoff", "HandoffError", "Received", "spawn_handing_off"]

#: Seconds the shim has to hand its network namespace's sockets over after the tree started (``netproxy``).
HANDOFF_SECONDS = 10.0

#: The most descriptors one handoff carries (1 proxy listener, 3 DNS sockets, 16 transparent listeners, and room).
MAX_DESCRIPTORS = 32


class HandoffError(Exception):
    """The shim did not hand a listener over (in time, or what it sent was no listening TCP socket)."""


@dataclass
class Received:
    """What the shim handed over: the proxy's ``listener``, the ``dns`` UDP sockets (bound to port 53 of the
    namespace's name servers) and the ``transparent`` listeners (``0.0.0.0:<port>``); the caller owns them all.
    ``transparent_off``: see below (the message's kind letters were followed by ``NUL`` and this reason)."""

    listener: trio.SocketListener
    dns: list[trio.socket.SocketType] = field(default_factory=list)
    transparent: list[trio.SocketListener] = field(default_factory=list)
    #: Why the shim could not set transparent mode up (it sent the proxy listener alone), or None.
    transparent_off: str | None = None


class Handoff:
    """A private Unix socket waiting for one listener. Create with :meth:`open`; always :meth:`close`."""

    def __init__(self, folder: str, sock: trio.socket.SocketType) -> None:
        self.folder = folder
        self.path = os.path.join(folder, "proxy.sock")
        self._sock = sock

    @classmethod
    async def open(cls) -> Handoff:
        """A new folder (``0700``) with a listening Unix socket ``proxy.sock`` in it. Raises ``OSError``."""
        folder = tempfile.mkdtemp(prefix="hostd-net-")
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.bind(os.path.join(folder, "proxy.sock"))
            sock.listen(1)
        except BaseException:
            sock.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return cls(folder, sock)

    async def receive(self, timeout: float) -> Received:
        """Accept the shim's connection and take the sockets it sends, within ``timeout`` seconds.

        Raises :class:`HandoffError` when nothing comes, the kinds and descriptors differ in number, the first is
        no proxy listener (``L``), or a descriptor is not what its kind says (a listening TCP socket for ``L``
        and ``T``, a UDP socket for ``D``); every received descriptor is closed then.
        """
        with trio.move_on_after(timeout):
            conn, _ = await self._sock.accept()
            with conn:
                size = socket.CMSG_SPACE(array.array("i", [0]).itemsize * MAX_DESCRIPTORS)
                message, ancdata, _, _ = await conn.recvmsg(MAX_DESCRIPTORS + 256, size)
            data, nul, reason = message.partition(b"\0")
            fds: list[int] = []
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds += array.array("i", payload[:usable]).tolist()
            raws: list[socket.socket] = []
            try:
                if not data.startswith(b"L") or len(fds) != len(data) or data.strip(b"LDT"):
                    raise HandoffError(f"the shim sent {data!r} with {len(fds)} descriptors, not its listeners")
                raws = [socket.socket(fileno=fd) for fd in fds]
                fds = []
                received = _checked(data, raws)
            except BaseException:
                for fd in fds:
                    os.close(fd)
                for raw in raws:
                    raw.close()
                raise
            if nul:
                received.transparent_off = reason.decode("utf-8", "replace") or "no reason given"
            return received
        raise HandoffError(f"the shim handed no listener over within {timeout:g} s")

    def close(self) -> None:
        """Close the Unix socket and remove its folder (idempotent)."""
        self._sock.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder)


def _checked(kinds: bytes, raws: list[socket.socket]) -> Received:
    """``raws`` as :class:`Received` once each is what its kind letter says; raises :class:`HandoffError`."""
    listeners: list[trio.SocketListener] = []
    dns: list[trio.socket.SocketType] = []
    for kind, raw in zip(kinds, raws, strict=True):
        if raw.family not in (socket.AF_INET, socket.AF_INET6):
            raise HandoffError("the shim sent a descriptor that is no IP socket")
        if kind == ord("D"):
            if raw.type != socket.SOCK_DGRAM:
                raise HandoffError("the shim sent a DNS socket that is no UDP socket")
            dns.append(trio.socket.from_stdlib_socket(raw))
            continue
        if raw.type != socket.SOCK_STREAM:
            raise HandoffError("the shim sent a descriptor that is no TCP socket")
        try:
            listeners.append(trio.SocketListener(trio.socket.from_stdlib_socket(raw)))
        except ValueError as exc:  # not listening
            raise HandoffError(f"the shim sent a TCP socket that does not listen: {exc}") from None
    return Received(listeners[0], dns, listeners[1:])


async def spawn_handing_off(launch: Launch, limits: IsolationPolicy) -> tuple[SandboxedProcess, Received | None]:
    """Spawn ``launch`` (:func:`sandbox.process.spawn`, a cgroup bounded by ``limits`` where one is usable); with
    the ``netproxy`` layer, also take the sockets the shim opens in the tree's network namespace (:class:`Received`,
    the caller's to serve or close) within :data:`HANDOFF_SECONDS`; without it, ``None``. The one start path of
    a plugin (hostd/plugins/instance.py) and of an installer run (hostd/install/installers.py).

    Raises ``sandbox.launch.LaunchError`` from the spawn, and :class:`HandoffError` when the shim hands nothing
    usable over (the tree is stopped first, shielded). Cancellation: the Unix socket is closed and its folder
    removed either way; a tree already spawned is the caller's (as a spawn's is).
    """
    from sandbox.process import spawn  # noqa: PLC0415 (a start's; not on a reader's path)

    handoff = await Handoff.open() if "netproxy" in launch.isolation else None
    try:
        process = await spawn(launch, limits=limits, proxy_socket=handoff.path if handoff is not None else None)
        if handoff is None:
            return process, None
        try:
            return process, await handoff.receive(HANDOFF_SECONDS)
        except HandoffError:
            with trio.CancelScope(shield=True):
                await process.stop(grace=0)
            raise
    finally:
        if handoff is not None:
            handoff.close()
