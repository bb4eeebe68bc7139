"""Imported first by hostctl (hostd/cli/hostctl.py) for its side effect: no garbage collection while hostctl loads.

The class (issue 28): *a short-lived command paying for a collector that finds next to nothing*. Loading
hostctl, and for a reading command hostd's host (pydantic's models and their schemas), makes some 10^5 objects
that live as long as the process; CPython's cyclic collector ran ~140 times over them during one ``hostctl
list`` read directly (~90 ms of its ~750 ms of CPU here, the one at exit included) and freed ~3,000
objects. :func:`loaded` turns it back on, as it was before this module, once hostctl is loaded;
:func:`hostd.cli.hostctl.main` turns it off again for a reading command (bounded: one state folder), to its
end. Imported by nothing else: importing it is what turns the collector off.
"""

from __future__ import annotations

import gc

#: Whether the collector ran when this module was imported (a process that turned it off keeps it off).
WAS_ENABLED = gc.isenabled()
gc.disable()


def loaded() -> None:
    """hostctl is loaded: what its modules made is frozen (``gc.freeze``: no later collection walks it; modules
    live as long as the process anyway: the first collection after loading walked it all, 30 ms here), and the
    collector runs again if it ran before this module was imported."""
    gc.freeze()
    if WAS_ENABLED:
        gc.enable()
