"""Pipe reads and writes with the fewest trio scheduler rounds: the call path's I/O.

Theory of operation
-------------------

trio's ``FdStream.receive_some`` and ``send_all`` each begin with a
checkpoint: the task yields to the scheduler once before it touches the fd.
On hostd's hot path (the parent's stdin, a plugin's stdin and stdout, the
parent's stdout) that is a scheduler round per message in each direction,
plus a ``read`` that fails with ``EAGAIN`` when the task then finds nothing
there. A ``tools/call`` crossed about nine such rounds; most of hostd's time
per call was spent in trio's run loop, not in hostd.

- :func:`receive_ready` parks in ``wait_readable`` first and reads once the
  fd is readable: one round per read, never a failed ``read``. It is still a
  checkpoint (cancellable, and a peer that floods the pipe cannot keep the
  reading task from yielding).
- :func:`write_now` writes what the pipe takes right now, without awaiting:
  the caller keeps what did not fit and hands it to a task that may wait
  (:meth:`hostd.control.server.Outbox`, :meth:`hostd.mcp.transport.stdio.StdioLink._write`). It
  is only correct while no other writer is between its own writes to the
  same fd; each caller keeps that invariant with its own lock or queue.

Both take any trio stream; only a ``trio.lowlevel.FdStream`` (every pipe of
hostd's: ``hostd serve``'s stdio, each plugin's) gets the fast path, others
(in-memory streams in tests) use the stream's own methods. The fd number is
read from the stream on every call, never kept: a closed stream answers -1,
and a read or write on -1 fails (``EBADF``) instead of reaching an fd that
was reused.
"""

from __future__ import annotations

import errno
import os

import trio

__all__ = ["receive_ready", "write_now"]


async def receive_ready(stream: trio.abc.ReceiveStream, max_bytes: int) -> bytes | bytearray:
    """One read of at most ``max_bytes`` bytes; ``b""`` at EOF.

    Raises ``trio.ClosedResourceError`` when the stream was closed (here or
    while waiting) and ``trio.BrokenResourceError`` for any other failed read,
    as ``receive_some`` does. Cancellation while waiting raises ``Cancelled``
    and reads nothing.
    """
    if not isinstance(stream, trio.lowlevel.FdStream):
        return await stream.receive_some(max_bytes)
    while True:
        fd = stream.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("the pipe was closed")
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(stream.fileno(), max_bytes)
        except BlockingIOError:
            continue  # readable was a false alarm (another reader took it): wait again
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("the pipe was closed") from None
            raise trio.BrokenResourceError from exc


def write_now(stream: trio.abc.SendStream, data: bytes | memoryview) -> int | None:
    """Write as much of ``data`` as the pipe takes without waiting; return how many bytes that was.

    ``None``: this stream has no fast path (not an fd), nothing was written;
    ``0``: the pipe is full (or ``data`` is empty). Raises
    ``trio.BrokenResourceError`` when the reader is gone (``EPIPE``) or the
    write fails otherwise, ``trio.ClosedResourceError`` when the stream was
    closed. Never awaits, never yields to another task.
    """
    if not isinstance(stream, trio.lowlevel.FdStream):
        return None
    if not data:
        return 0
    try:
        return os.write(stream.fileno(), data)
    except BlockingIOError:
        return 0
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise trio.ClosedResourceError("the pipe was closed") from None
        raise trio.BrokenResourceError from exc
