"""Waiting on other processes in tests: on their exit (a pidfd) or on a state only they change.

One place for the waits the tests share, so none of them sleeps for a fixed time: ``exited``
wakes when the kernel says the process is gone; ``until`` polls a condition another process
changes (a file it writes, a pipe it fills) where no event exists to wait on.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable

import psutil
import trio

#: The grace, in seconds, for a stop step that is expected to END the process (stdin EOF that the
#: plugin honours, SIGTERM that it honours). A stop returns as soon as the process exits, so a long
#: grace costs nothing when the step works; a short one (0.1 s) turns a busy machine's scheduling
#: delay into the next step's name, a flaky assertion. (Steps expected to FAIL keep short graces.)
GENEROUS = 5.0


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def exited(pid: int) -> None:
    """Return once process ``pid`` (any process, not only a child) has exited: its pidfd turns readable."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
    # The pidfd turns readable a few instructions before /proc shows the process as a zombie.
    while alive(pid):
        await trio.lowlevel.checkpoint()


async def until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``condition`` (a state of another process: a file, a pipe) until it holds.

    Raises ``trio.TooSlowError`` after ``timeout`` seconds.
    """
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.02)


async def until_answered(question: Callable[[], Awaitable[bool]], timeout: float = 60.0) -> None:
    """Ask ``question`` (a request to another process about its own state, e.g. a fixture's ``seen`` tool)
    until it answers True: :func:`until` for a state only that process can report, with no event to wait on.

    Raises ``trio.TooSlowError`` after ``timeout`` seconds.
    """
    with trio.fail_after(timeout):
        while not await question():
            await trio.sleep(0.02)
