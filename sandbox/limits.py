"""hostd's own descriptor limit, and the one its plugins get back.

hostd holds a few descriptors per running plugin (sandbox/README.md, "Descriptors"). A soft
``RLIMIT_NOFILE`` of 1024 (Linux's default) or 256 (macOS's) would cap the number of plugins for no reason
the user chose, so ``hostd serve`` raises its soft limit to the hard one at start (:func:`raise_nofile_limit`).
Only hostd runs with the raised limit: a program that uses ``select()`` fails on a descriptor past 1024
(``FD_SETSIZE``), so every plugin gets back the soft limit hostd started with (:func:`plugin_nofile_soft`,
applied by the shim under the ``"rlimits"`` layer), as systemd does for its services. Importing this module
costs nothing on hostd's start path (``resource`` only).
"""

from __future__ import annotations

import resource
import sys

__all__ = ["plugin_nofile_soft", "raise_nofile_limit"]

#: The soft limit before :func:`raise_nofile_limit` raised it (``None``: never raised in this process).
_before: int | None = None
#: macOS refuses a soft limit above ``OPEN_MAX`` even when the hard limit is unlimited.
_DARWIN_OPEN_MAX = 10240
#: What an unlimited hard limit raises the soft one to elsewhere.
_UNLIMITED_TARGET = 1 << 20


def raise_nofile_limit() -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit; returns ``(soft before, soft after)``.

    An unlimited hard limit raises the soft one to 2**20 (macOS: ``OPEN_MAX``, 10240). A limit the kernel
    refuses leaves it as it was (``after == before``); nothing is raised. Idempotent: a second call keeps the
    first call's "before" for :func:`plugin_nofile_soft`.
    """
    global _before  # noqa: PLW0603 - one value per process, read by every later spawn
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if _before is None:
        _before = soft
    target = _UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if sys.platform == "darwin":
        target = min(target, _DARWIN_OPEN_MAX)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return soft, soft
    return soft, target


def plugin_nofile_soft() -> int | None:
    """The soft ``RLIMIT_NOFILE`` a plugin gets: hostd's own from before :func:`raise_nofile_limit`, or
    ``None`` when it never raised it (the plugin inherits hostd's, as before)."""
    return _before
