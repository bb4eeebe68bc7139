"""A plugin's pids, as it reports them from inside its pid namespace, turned into the host's pids.

A plugin with its own ``/proc`` (the ``private-proc`` layer, issue 25) sees only its pid namespace:
it cannot learn the pids the host knows it by. The host still sees it from outside: every process's
``/proc/<pid>/status`` on the host lists in ``NSpid`` its pid in each pid namespace from the host's
down, and ``/proc/<pid>/ns/pid`` names its namespace. So a fixture reports its pids as it sees them
plus its namespace (``os.readlink("/proc/self/ns/pid")``, e.g. ``pid:[4026532291]``), and
:func:`host_pids` finds the host's pids with one walk of the host's ``/proc``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def host_pids(namespace: str | None, pids: Iterable[int]) -> list[int]:
    """``pids`` of pid namespace ``namespace`` (its ``/proc/<pid>/ns/pid`` link) as the host's pids, in order.

    Unchanged when ``namespace`` is ours or unknown (``None`` or empty: a system without ``/proc``).
    Every process must be alive; raises AssertionError naming the pids not found.
    """
    wanted = list(pids)
    if not namespace or namespace == os.readlink("/proc/self/ns/pid"):
        return wanted
    found: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                continue
            with open(f"/proc/{name}/status", encoding="utf-8") as fh:
                nspid = next((line.split()[1:] for line in fh if line.startswith("NSpid:")), [])
        except OSError:
            continue  # gone, or not ours to read
        if nspid:
            found[int(nspid[-1])] = int(name)
    missing = [pid for pid in wanted if pid not in found]
    assert missing == [], f"no process of {namespace} has the pid {missing} there"
    return [found[pid] for pid in wanted]
