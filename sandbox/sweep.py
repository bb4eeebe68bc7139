"""The per-instance token and the sweeps that kill by it.

Every plugin process carries ``HOSTD_SANDBOX_TOKEN`` (:data:`TOKEN_VAR`) in
its environment, a token naming the hostd process that issued it
(:func:`_new_token`). Here: the token's format, reading it back from
``/proc``, and the sweeps built on it: :func:`sweep_leftovers` (everything
carrying one token, or any token) and :func:`sweep_orphans` (what a hostd
that is gone left behind). :mod:`sandbox.process` uses them to end a tree.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import Callable

__all__ = ["TOKEN_VAR", "sweep_leftovers", "sweep_orphans"]

#: The environment variable that carries the per-instance token.
TOKEN_VAR = "HOSTD_SANDBOX_TOKEN"
_TOKEN_PREFIX = "hs1."
#: Seconds a sweep waits for SIGKILLed processes to become zombies.
_DEATH_WAIT = 2.0


def _proc_read(pid: int | str, name: str) -> bytes | None:
    """``/proc/<pid>/<name>`` (proc(5)) as bytes, or None when it cannot be read (the process is gone)."""
    try:
        with open(f"/proc/{pid}/{name}", "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` from field 3 (the state letter) on, or None when it cannot be read.

    They start after the last ``)``: the command name before them may hold spaces and parens."""
    data = _proc_read(pid, "stat")
    return None if data is None else data[data.rfind(b")") + 2 :].split()


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None."""
    fields = _stat_fields(pid)
    return fields[19].decode() if fields is not None and len(fields) > 19 else None


def _pid_namespace(pid: int | str) -> int | None:
    """The inode of ``/proc/<pid>/ns/pid`` (the pid namespace the process lives in), or None."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _new_token() -> str:
    """``hs1.<host pid>.<host start ticks>.<16 hex>-<host pid namespace inode>``: names the issuing host.

    A pid means something only inside its pid namespace, so the token also
    records the issuer's namespace (``/proc/self/ns/pid``): a sweep leaves
    alone every token issued in a namespace other than its own (issue 31,
    class 4). The start time comes from ``/proc/self`` (always this process,
    even when ``/proc`` was mounted by another pid namespace).
    """
    fields = _stat_fields("self")
    ticks = fields[19].decode() if fields is not None and len(fields) > 19 else "0"
    namespace = _pid_namespace("self") or 0
    # Still four dot-separated parts with the pid and start time first: a hostd of before the
    # namespace was recorded reads it as before and leaves this hostd's live plugins alone.
    return f"{_TOKEN_PREFIX}{os.getpid()}.{ticks}.{secrets.token_hex(8)}-{namespace}"


def _read_tokens(pid: int) -> str | None:
    data = _proc_read(pid, "environ")
    if data is None:
        return None
    needle = (TOKEN_VAR + "=").encode()
    for item in data.split(b"\0"):
        if item.startswith(needle):
            return item[len(needle) :].decode("utf-8", "replace")
    return None


def _pids_with_token(token: str | None) -> list[int]:
    """Pids of live processes of this user whose environment carries the token.

    ``token=None`` matches any ``HOSTD_SANDBOX_TOKEN``. Reads
    ``/proc/<pid>/environ``; processes we may not read are skipped. Our own
    pid is never listed.
    """
    return [pid for pid, value in _token_carriers() if token is None or value == token]


def _token_carriers() -> list[tuple[int, str]]:
    """``(pid, token)`` for every readable process of this user carrying a token, except ourselves.

    "Of this user": the process's real and effective uids (``/proc/<pid>/status``)
    both equal our effective uid, root included: a hostd run as root never
    lists (so never signals) another user's processes (issue 31, class 4).
    The owner of ``/proc/<pid>`` is not used: it reads root for any process
    that is not dumpable.
    """
    me = os.getpid()
    uid = os.geteuid()
    found: list[tuple[int, str]] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        value = _read_tokens(int(name))
        if value is not None and _uids(int(name)) == (uid, uid):
            found.append((int(name), value))
    return found


def _uids(pid: int) -> tuple[int, int] | None:
    """The real and effective uid of a process (``/proc/<pid>/status`` ``Uid:``), or None when unreadable."""
    data = _proc_read(pid, "status")
    if data is None:
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"Uid:"):
            words = line.split()
            if len(words) >= 3 and words[1].isdigit() and words[2].isdigit():
                return int(words[1]), int(words[2])
    return None


def _kill_all(pids_of_pass: Callable[[], list[int]]) -> int:
    """SIGSTOP + SIGKILL what each pass lists until a pass lists nothing; then wait for the deaths."""
    killed: set[int] = set()
    for _ in range(50):
        pids = [pid for pid in pids_of_pass() if not _is_zombie(pid)]
        if not pids:
            break
        _signal_all(set(pids), signal.SIGSTOP)
        _signal_all(set(pids), signal.SIGKILL)
        killed.update(pids)
        time.sleep(0.002)
    # SIGKILL is asynchronous, and a dying process stops showing its environment before it is a
    # zombie: wait (bounded) until every signalled process is a zombie or gone.
    deadline = time.monotonic() + _DEATH_WAIT
    pending = set(killed)
    while pending and time.monotonic() < deadline:
        pending = {pid for pid in pending if not _is_zombie(pid)}
        if pending:
            time.sleep(0.002)
    return len(killed)


def sweep_leftovers(token: str | None = None) -> int:
    """Kill (SIGSTOP, then SIGKILL) every process carrying ``HOSTD_SANDBOX_TOKEN``.

    ``token``: kill only processes whose ``HOSTD_SANDBOX_TOKEN`` equals it;
    ``None`` kills every process of this user that carries any token, which
    includes the plugins of this and of any other running hostd of the same
    user (at startup prefer :func:`sweep_orphans`). Repeats until a pass finds
    nothing (a forking process cannot outrun it: its children inherit the
    token). The calling process is never killed; zombies are skipped (they
    are dead). Returns once every signalled process is dead (a zombie or
    gone), or after 2 s for one stuck in the kernel. Blocking (about 12 microseconds per process on the system):
    call it from a thread in async code. Returns the number of distinct
    processes signalled. Never raises for vanished processes.
    """
    return _kill_all(lambda: _pids_with_token(token))


_TOKEN_SHAPE = re.compile(r"hs1\.([0-9]{1,10})\.([0-9]{1,20})\.[0-9a-f]{16}-([0-9]{1,20})")


def _orphaned(token: str, namespace: int) -> bool:
    """Whether ``token`` was issued in pid namespace ``namespace`` (ours) by a host process now gone.

    Only a token of the current shape issued in our own pid namespace can be
    judged: its pid names a process we can look up. A token of unknown shape
    (an older hostd's, or any process that sets the variable), or one issued
    in another pid namespace (a hostd in a sandboxed app or a container that
    shares this user's processes: its pid means nothing here) is not ours to
    judge, so it is never an orphan. The issuer is alive when the process at
    that pid has the recorded start time and namespace.
    """
    shape = _TOKEN_SHAPE.fullmatch(token)
    if shape is None or int(shape[3]) != namespace:
        return False
    pid = int(shape[1])
    return not (_start_ticks(pid) == shape[2] and _pid_namespace(pid) == namespace)


def _own_proc() -> bool:
    """Whether ``/proc`` shows our own pid namespace (``/proc/self`` is our pid), so its pids are ours."""
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False


def sweep_orphans() -> int:
    """Kill every token carrier of this user whose issuing host process, in our pid namespace, is gone.

    A token names the hostd process that issued it (pid, start time and pid
    namespace), so this ends what a crashed or killed hostd (or a killed
    shim) left behind without touching plugins of a hostd that is still
    running. Left alone (issue 31, class 4): tokens issued in another pid
    namespace, tokens of unknown shape, processes of other users (root or
    not), and everything when ``/proc`` belongs to another pid namespace.
    Blocking, like :func:`sweep_leftovers`; returns the number of processes
    signalled.
    """
    namespace = _pid_namespace("self")
    if namespace is None or not _own_proc():
        return 0
    return _kill_all(lambda: [pid for pid, value in _token_carriers() if _orphaned(value, namespace)])


def _is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[:1] in ([b"Z"], [b"X"])


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
