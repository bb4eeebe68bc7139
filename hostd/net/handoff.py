"""Receiving a plugin's namespace listener (issue 26; the shim's side is ``sandbox/_shim_net.py``).

Before a ``netproxy`` launch is spawned, hostd opens a :class:`Handoff`: a pathname Unix socket in a fresh folder
only hostd's user can open (``0700``, :func:`tempfile.mkdtemp`). The shim, once inside the plugin's network
namespace, connects to it and sends the loopback listener it opened there (``SCM_RIGHTS``, one byte ``L``).
:meth:`Handoff.receive` returns that listener as a :class:`trio.SocketListener` for :mod:`hostd.net.proxy`.
The shim's connection lands in the socket's backlog, so hostd may accept it after ``spawn`` returned.
"""

from __future__ import annotations

import array
import contextlib
import os
import shutil
import socket
import tempfile

import trio

__all__ = ["Handoff", "HandoffError"]


class HandoffError(Exception):
    """The shim did not hand a listener over (in time, or what it sent was no listening TCP socket)."""


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

    async def receive(self, timeout: float) -> trio.SocketListener:
        """Accept the shim's connection and take the listener it sends, within ``timeout`` seconds.

        Raises :class:`HandoffError` when nothing comes, the message carries no descriptor, or the descriptor
        is not a listening TCP socket (each received descriptor is closed but the one returned).
        """
        with trio.move_on_after(timeout):
            conn, _ = await self._sock.accept()
            with conn:
                data, ancdata, _, _ = await conn.recvmsg(1, socket.CMSG_SPACE(array.array("i", [0]).itemsize * 4))
            fds: list[int] = []
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds += array.array("i", payload[:usable]).tolist()
            if data != b"L" or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise HandoffError(f"the shim sent {data!r} with {len(fds)} descriptors, not one listener")
            raw = socket.socket(fileno=fds[0])
            if raw.family not in (socket.AF_INET, socket.AF_INET6) or raw.type != socket.SOCK_STREAM:
                raw.close()
                raise HandoffError("the shim sent a descriptor that is no TCP socket")
            try:
                return trio.SocketListener(trio.socket.from_stdlib_socket(raw))
            except ValueError as exc:  # not listening
                raw.close()
                raise HandoffError(f"the shim sent a TCP socket that does not listen: {exc}") from None
        raise HandoffError(f"the shim handed no listener over within {timeout:g} s")

    def close(self) -> None:
        """Close the Unix socket and remove its folder (idempotent)."""
        self._sock.close()
        with contextlib.suppress(OSError):
            shutil.rmtree(self.folder)
