"""Modules hostd loads at the first request that needs them, not on the start path.

The class of module loaded here: one that a plugin of some kind, or a request other
than the start and ``plugins/list``, needs, and that costs start-up time or resident
memory every hostd would pay (``hostd.mcp.transport.http`` pulls httpx2 and the OAuth
client for remote plugins only). ``tests/test_startup_imports.py`` keeps the start
path free of them.

An import here can fail where the start path's could not (a broken or partial
install, a dependency removed after hostd started): the failure is a
:class:`HostError` naming the module and what needed it, never a bare
``ImportError`` escaping a request handler.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import trio

from hostd.wire.errors import ErrorKind, HostError

#: Builds the error of a failed import from its message and data (``HostError(kind, message, **data)``).
ErrorFactory = Callable[..., HostError]


def _internal_error(message: str, **data: Any) -> HostError:
    return HostError(ErrorKind.INTERNAL_ERROR, message, **data)


def _loaded(module: str) -> ModuleType | None:
    """``module`` if it is imported *and its body has finished*, else ``None``.

    The class of defect this guards: a module taken from ``sys.modules`` while another thread still runs its
    body. The import system puts a module there before running it (``__spec__._initializing`` is true until
    the body ends), so a lookup alone can return a module without the names defined further down. Such a
    module goes through ``__import__``, which waits on the module's import lock for the other thread.
    """
    loaded = sys.modules.get(module)
    if loaded is None or getattr(getattr(loaded, "__spec__", None), "_initializing", False):
        return None
    return loaded


def load(module: str, needed_for: str, error: ErrorFactory = _internal_error) -> ModuleType:
    """Import ``module`` (as ``import module`` does) or return the loaded one; a module another thread is still
    importing is waited for (:func:`_loaded`).

    ``needed_for`` says what needs it, for the message ("the remote plugin
    notes"). Runs the import in the calling thread: a handler on the event
    loop uses :func:`load_async`.

    Raises:
        HostError: built by ``error(message, module=module)`` (default:
            ``INTERNAL_ERROR`` with that message and ``data = {"module":
            module}``) when the import raises anything (``ImportError``, or an
            error of the module's own code). ``message``: "hostd could not load
            <module> (needed for <needed_for>): <exception type>: <exception
            text>". A plugin start passes its own factory
            (``PLUGIN_START_FAILED`` naming the plugin, the message as
            ``data.reason``).
    """
    loaded = _loaded(module)
    if loaded is not None:
        return loaded
    try:
        # Parents first, each one whole, before the module itself. The class: a thread that names a submodule
        # first takes its import lock and runs it, and when it imports a sibling another thread is still
        # running (that thread importing the package), each waits for a lock the other holds; Python breaks
        # the cycle by handing one of them a "partially initialized module" (a remote plugin's start loads
        # the MCP SDK and jsonschema in a worker while the event loop checks tool schemas). A thread that
        # imports the package first waits for it whole, holding nothing.
        # The import statement's machinery, not importlib.import_module: the same import, but
        # ``-X importtime`` reports the module itself too (tests/test_startup_imports.py reads it).
        parts = module.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if _loaded(parent) is None:
                __import__(parent)
        __import__(module)
    except Exception as exc:  # any failure of the import is reported, with its type
        reason = f"{type(exc).__name__}: {exc}"
        raise error(f"hostd could not load {module} (needed for {needed_for}): {reason}", module=module) from None
    return sys.modules[module]


async def load_async(module: str, needed_for: str, error: ErrorFactory = _internal_error) -> ModuleType:
    """:func:`load` from the event loop: a module not loaded yet is imported in a worker thread, so
    its import time (``hostd.mcp.transport.http`` with httpx2: ~20 ms) stalls neither the parent's
    requests nor other plugins.

    Raises what :func:`load` raises. Cancellation while the worker imports abandons the wait; the
    import finishes in its thread and the next call finds the module loaded.
    """
    loaded = _loaded(module)
    if loaded is not None:
        return loaded
    result: ModuleType = await trio.to_thread.run_sync(lambda: load(module, needed_for, error), abandon_on_cancel=True)
    return result
