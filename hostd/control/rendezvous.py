"""Where the control socket of the hostd serving a state folder is, and the address that reaches it.

Apart from :mod:`hostd.control.attach` (the sessions served on it, with the control server and its imports):
hostctl asks this of every command, a reading one that then reads the folder itself too (issue 28), and
needs none of the rest.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

#: The socket's file name in the state folder.
SOCKET_NAME = "control.sock"
#: The longest path a ``sockaddr_un`` holds (108 bytes with the terminating NUL).
_SUN_PATH_BYTES = 107


def socket_path(state_dir: Path) -> Path:
    """Where the hostd serving ``state_dir`` listens (whether or not one does)."""
    return state_dir / SOCKET_NAME


@contextlib.contextmanager
def socket_address(path: Path) -> Iterator[str]:
    """An address for ``bind``/``connect`` that names ``path``: the path itself when it fits a
    ``sockaddr_un``, else ``/proc/self/fd/<fd>/<name>`` through a descriptor of its folder (Linux), kept
    open for the body. Raises ``OSError`` (``ENAMETOOLONG``) when neither fits or the folder cannot be opened.
    """
    text = os.fsencode(path)
    if len(text) <= _SUN_PATH_BYTES:
        yield os.fsdecode(text)
        return
    if not sys.platform.startswith("linux"):
        raise OSError(36, f"the socket path is longer than {_SUN_PATH_BYTES} bytes", str(path))
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)
