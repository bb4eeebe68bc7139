"""The ``netproxy`` layer's shim part: the only way out of a plugin's network namespace (issue 26).

``shim.py`` loads this file by path (as it loads the layer modules) when a spec asks for ``netproxy``, and calls
:func:`hand_off` right after it entered the plugin's user, network and pid namespaces (``pidns``), before it
forks: it opens a TCP listener on ``127.0.0.1:<port>`` *inside* the namespace and passes it (``SCM_RIGHTS``)
over the pathname Unix socket hostd listens on (a folder only hostd's user can open: ``0700``), then closes its
own copies. hostd's proxy accepts on that listener from then on; no byte passes through the shim. The listener
is open before the plugin runs, so a connection at start-up waits in its backlog rather than failing. The
plugin itself cannot open a Unix socket (``seccomp-net``) nor reach anything but its namespace's loopback.
Stdlib only.
"""

from __future__ import annotations

import array
import socket
import types
from typing import Any

#: ``shim.py`` itself, set by ``shim.load_sibling`` right after this file is loaded.
shim = types.ModuleType("shim")  # a placeholder until then


def hand_off(proxy: dict[str, Any]) -> None:
    """Listen on ``127.0.0.1:proxy["port"]`` in this (new) network namespace and send the listening socket to
    the Unix socket at ``proxy["socket"]``, with one byte ``b"L"``. Raises ``OSError`` (the launch then fails
    with ``error netproxy ...``: never a plugin with a route out and no proxy)."""
    port = int(proxy["port"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
            channel.settimeout(10.0)
            channel.connect(str(proxy["socket"]))
            fds = array.array("i", [listener.fileno()])
            channel.sendmsg([b"L"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())])
    finally:
        listener.close()
