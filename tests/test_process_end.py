"""How ``python -m hostd`` ends: :func:`hostd.cli.hostd.end_process`, Python's own exit without its teardown (issue 28).

The class of fault: a fast exit that skips something of Python's own exit that someone sees: a non-daemon thread's
last write, an ``atexit`` function (``logging.shutdown``: hostd's last log lines), a buffered ``print`` on stdout or
stderr, or the status 120 of a flush that fails. Each test runs one real child twice, ending through
``end_process`` and through ``sys.exit``, and asserts that the two are seen alike, with the exact values.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import GENEROUS

ROOT = Path(__file__).resolve().parent.parent

#: A child that leaves each thing to its exit: a non-daemon thread still blocked on stdin, which then prints (buffered);
#: an ``atexit`` function that prints; a log line of a handler on stderr; an unflushed ``print`` of its own.
CHILD = """
import atexit, logging, sys, threading
from hostd.cli.hostd import end_process

def late() -> None:
    sys.stdin.readline()  # blocks until the test, having read 'ready', writes a line
    print("thread done")

atexit.register(lambda: print("atexit ran"))
logging.basicConfig(stream=sys.stderr, format="%(message)s", level=logging.INFO)
threading.Thread(target=late, daemon=False).start()
print("main done")
sys.stderr.write("ready\\n")
sys.stderr.flush()
logging.getLogger("t").info("the last log line")
if sys.argv[1] == "end_process":
    end_process(3)
sys.exit(3)
"""


#: A child whose stdout, block-buffered, is flushed only at its end.
CHILD_PRINTS = """
import sys
from hostd.cli.hostd import end_process
print("main done")
if sys.argv[1] == "end_process":
    end_process(0)
sys.exit(0)
"""


def _spawn(child: str, way: str, stdout: int) -> subprocess.Popen[bytes]:
    # Block-buffered standard streams, as a hostd's are (PYTHONUNBUFFERED would write each print at once).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", child, way], stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, env=env
    )


def _first_line(fd: int) -> bytes:
    """The first line on ``fd``, read a byte at a time: nothing after it is taken from the pipe (a buffered
    ``readline`` may read ahead what ``communicate``, which reads the descriptor itself, then never sees)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line


@pytest.mark.parametrize("way", ["end_process", "sys.exit"])
def test_the_end_joins_threads_runs_atexit_and_flushes(way: str) -> None:
    child = _spawn(CHILD, way, subprocess.PIPE)
    assert child.stderr is not None and child.stdin is not None
    assert _first_line(child.stderr.fileno()) == b"ready\n"  # main is at its end; the thread still waits on stdin
    out, err = child.communicate(b"go\n", timeout=GENEROUS)
    assert (child.returncode, out, err) == (3, b"main done\nthread done\natexit ran\n", b"the last log line\n")


@pytest.mark.parametrize("way", ["end_process", "sys.exit"])
def test_a_stdout_that_cannot_be_flushed_is_status_120(way: str) -> None:
    read, write = os.pipe()
    os.close(read)  # nobody reads: the flush at the end fails (EPIPE; Python ignores SIGPIPE)
    try:
        child = _spawn(CHILD_PRINTS, way, write)
    finally:
        os.close(write)
    child.communicate(timeout=GENEROUS)
    assert child.returncode == 120
