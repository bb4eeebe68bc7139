"""No cyclic garbage collection while hostctl loads, nor during a reading command (issue 28).

The class: *a short-lived command paying for a collector that finds next to nothing* (hostd/cli/_loading.py):
loading hostctl and building hostd's host make objects that live as long as the process, and the collector ran
~140 times over them in one ``hostctl list`` read directly, then once more over all of it at exit. Members:
hostctl's import (no collection from its first dependency on, and the collector as it was afterwards: on, or
still off when the importer had turned it off), and a whole reading command (no collection to its end).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hostd.storage.state import StateStore

#: Counts the collections once hostctl's dependencies load (from trio on: the one or two before come while
#: ``hostd`` and ``hostd.cli`` load, before hostctl's first line), and prints them, and whether the collector
#: runs, at exit (before the interpreter's own last collection).
COUNTING = (
    "import atexit, gc, sys\n"
    "{before}"
    "starts = []\n"
    "gc.callbacks.append(lambda phase, info: phase == 'start' and 'trio' in sys.modules and starts.append(1))\n"
    "atexit.register(lambda: print(len(starts), gc.isenabled()))\n"
)


def counted(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("before", "enabled"), [("", True), ("gc.disable()\n", False)])
def test_loading_hostctl_runs_no_collection(before: str, enabled: bool) -> None:
    done = counted(COUNTING.format(before=before) + "import hostd.cli.hostctl\n")
    assert (done.returncode, done.stdout) == (0, f"0 {enabled}\n")  # before: ~130 collections


def test_a_reading_command_runs_no_collection(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = StateStore(state)
    store.open()
    store.save({})
    store.close()
    run = (
        "import runpy\n"
        f"sys.argv = ['hostctl', 'list', '--json', '--state-dir', {str(state)!r}]\n"
        "runpy.run_module('hostd.cli.hostctl', run_name='__main__', alter_sys=True)\n"
    )
    done = counted(COUNTING.format(before="") + run)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == f"hostctl: read {state} directly (no hostd serves it; nothing started)"
    assert done.stdout == '{\n  "plugins": []\n}\n0 True\n'  # before: ~140 collections
