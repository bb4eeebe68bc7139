"""What a hostd learnt about the machine by running a process, kept in its state folder for hostctl's readers.

A reading command of hostctl (``list``, ``status``, ``tools``, ``logs``: hostd/cli/direct.py) answers as a hostd
would, and a hostd asks two processes before it can resolve a launch (and so say whether a plugin's approval
still holds): the user's login shell (``$SHELL -l -c``, for its ``PATH``:
:func:`sandbox.environment.login_shell_path`) and the sandbox probe (``python -I -S sandbox/shim.py --probe``:
:func:`sandbox.probe.probe`). Each read ran both: ~0.1-0.2 s of a read's time, more with a slow profile
(issue 28). A hostd, which runs them anyway, keeps their answers in ``<state>/facts.json`` (:func:`keep`), each
under a *key*: a digest of what the answer depends on, as far as it can be seen without running the process
again (:func:`login_path_key`, :func:`probe_key`). A reader computes the keys afresh and takes an answer only
when its key matches (:func:`read`); else it runs the process itself, as before.

The classes of fault this module is written against:

- *An answer used after what it depends on changed.* The keys cover hostd's version, the user, the shell
  and each start-up file a login shell reads (its path, size, modification time and inode), the environment
  the shell gets (but the variables that change at every ``cd``); for the probe the interpreter, the kernel,
  the namespaces and the sysctls that decide whether an unprivileged user may use them, and what this process
  may do (``/proc/self/status``: seccomp, no_new_privs, capabilities). What a start-up file sources in turn
  (an ``nvm.sh``) is not seen: such a change shows in a read only after the next hostd runs (every hostctl
  command that is not a read starts one, which writes the file again).
- *A cache trusted.* The file is read as untrusted input: bounded in size, every field checked for its type
  and shape (a ``PATH`` of absolute entries only, the probe's answer only with the fields and types the shim
  writes); anything else, a damaged or foreign file included, is ignored as if absent (the reader then runs
  the process). A reader never writes it: only the hostd that owns the folder does, with
  :func:`hostd.storage.state.write_atomically`, ``0600``.

Only the standard library and orjson: read before hostd's host is imported.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from hostd import __version__
from hostd.storage.state import FACTS_FILE as FACTS_FILE  # noqa: PLC0414 (re-exported: readers say facts.FACTS_FILE)
from hostd.storage.state import write_atomically

#: The file's format version; another is ignored.
FACTS_VERSION = 1
#: Larger files are not read (a few KiB in practice).
MAX_BYTES = 256 * 1024
#: A ``PATH`` longer than this is not taken from the file.
MAX_PATH_CHARS = 64 * 1024

#: Variables that change without changing what a login shell sets up (left out of its key).
VOLATILE_VARIABLES = frozenset({"PWD", "OLDPWD", "_", "SHLVL"})
#: The start-up files of the common shells, per user (relative to ``$HOME``, or ``$ZDOTDIR`` for zsh's).
USER_FILES = (".profile", ".bash_profile", ".bash_login", ".bashrc", ".bash_logout", ".config/fish/config.fish")
ZSH_USER_FILES = (".zshenv", ".zprofile", ".zshrc", ".zlogin")
SYSTEM_FILES = (
    "/etc/profile",
    "/etc/environment",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zshenv",
    "/etc/zprofile",
    "/etc/zshrc",
    "/etc/zlogin",
    "/etc/zsh/zshenv",
    "/etc/zsh/zprofile",
    "/etc/zsh/zshrc",
    "/etc/zsh/zlogin",
    "/etc/fish/config.fish",
    "/etc/paths",
)
#: Folders whose every file a login shell may read (``/etc/profile.d/*.sh``, macOS' ``/etc/paths.d``...).
SYSTEM_FOLDERS = ("/etc/profile.d", "/etc/paths.d", "/etc/fish/conf.d")
#: What decides whether this user may use namespaces, Landlock and seccomp (read whole; absent files count too).
PROBE_FILES = (
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/user/max_pid_namespaces",
    "/proc/sys/user/max_net_namespaces",
    "/proc/sys/user/max_mnt_namespaces",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_unconfined",
    "/proc/sys/kernel/unprivileged_userns_apparmor_policy",
    "/proc/sys/kernel/seccomp/actions_avail",
    "/proc/sys/kernel/yama/ptrace_scope",
    "/proc/self/uid_map",
    "/proc/self/attr/current",
)
#: The files of sandbox/ whose code the probe runs (``python -I -S shim.py --probe`` loads the others by path).
SHIM_FILES = ("shim.py", "_shim_probe.py", "_landlock.py", "_seccomp.py", "_shim_init.py")
#: The lines of ``/proc/self/status`` that say what this process may do.
STATUS_FIELDS = ("Uid:", "Gid:", "CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:")
#: The fields of the shim's probe answer (sandbox/shim.py ``--probe``) that are ``[available, detail]``.
PROBE_PAIRS = ("subreaper", "landlock", "netns", "pidns", "private-proc", "seccomp", "seccomp-net")
#: The longest text in a probe answer taken from the file.
MAX_DETAIL_CHARS = 2000

log = logging.getLogger("hostd.storage.facts")


@dataclass(frozen=True)
class Facts:
    """What :func:`read` found usable: ``login_path`` (one item: the ``PATH``, or ``None`` when the shell gave
    none; ``None`` when not usable) and ``probe`` (the shim's answer, for :func:`sandbox.probe.adopt`; ``None``
    when not usable)."""

    login_path: tuple[str | None] | None = None
    probe: dict[str, Any] | None = None


def _stat(path: str) -> list[int] | None:
    """``[size, mtime ns, inode, mode]`` of ``path`` (links followed), or None when it cannot be seen."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode]


def _content(path: str) -> str | None:
    """The first 4 KiB of ``path`` as text, or None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).decode("utf-8", "replace")
    except (OSError, ValueError):
        return None


def _digest(what: str, parts: Mapping[str, Any]) -> str:
    blob = orjson.dumps({"what": what, "hostd": __version__, **parts}, option=orjson.OPT_SORT_KEYS)
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def login_path_key(env: Mapping[str, str], shell: str | None = None) -> str:
    """The key of the login shell's ``PATH`` for a shell started with ``env`` (``shell``: the program,
    default ``env["SHELL"]`` as :func:`sandbox.environment.login_shell_path` picks it): a ``sha256:`` digest of
    hostd's version, the user, the shell program's identity, the start-up files of the common shells (each one's
    size, mtime, inode, or its absence; every file of ``/etc/profile.d`` and the like) and ``env`` (its
    :data:`VOLATILE_VARIABLES` left out; the digest only: the values never reach the file). Blocking (a few
    dozen ``stat`` calls)."""
    program = shell or env.get("SHELL") or "/bin/sh"
    home = env.get("HOME") or os.path.expanduser("~")
    zdotdir = env.get("ZDOTDIR") or home
    files = [os.path.join(home, name) for name in USER_FILES]
    files += [os.path.join(zdotdir, name) for name in ZSH_USER_FILES]
    files += list(SYSTEM_FILES)
    for folder in SYSTEM_FOLDERS:
        try:
            files += sorted(os.path.join(folder, name) for name in os.listdir(folder))
        except OSError:
            files.append(folder)
    return _digest(
        "login-path",
        {
            "uid": os.getuid(),
            "shell": [program, _stat(program)],
            "files": [[path, _stat(path)] for path in files],
            "env": sorted([k, v] for k, v in env.items() if k not in VOLATILE_VARIABLES),
        },
    )


def probe_key() -> str:
    """The key of the sandbox probe's answer in this process: a ``sha256:`` digest of hostd's version, the
    interpreter that runs the probe (path and identity), the probe's code (:data:`SHIM_FILES`' content, so a
    copy of the same code in another folder shares it), the kernel (``uname``), the user and the namespaces
    this process is in, :data:`PROBE_FILES` and :data:`STATUS_FIELDS` of ``/proc/self/status``. Blocking (small
    reads, ~80 KB hashed)."""
    shim_digest = hashlib.sha256()
    folder = Path(__file__).resolve().parents[2] / "sandbox"
    for name in SHIM_FILES:
        try:
            shim_digest.update((folder / name).read_bytes())
        except OSError:
            shim_digest.update(b"\0absent\0")
    namespaces: dict[str, str | None] = {}
    for name in ("user", "pid", "net", "mnt", "cgroup"):
        try:
            namespaces[name] = os.readlink(f"/proc/self/ns/{name}")
        except OSError:
            namespaces[name] = None
    status = _content("/proc/self/status") or ""
    return _digest(
        "probe",
        {
            "python": [sys.executable, _stat(sys.executable), sys.version],
            "shim": shim_digest.hexdigest(),
            "uname": list(os.uname()),
            "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
            "namespaces": namespaces,
            "files": {path: _content(path) for path in PROBE_FILES},
            "status": [line for line in status.splitlines() if line.startswith(STATUS_FIELDS)],
        },
    )


def _entry(document: Mapping[str, Any], name: str, key: str) -> Mapping[str, Any] | None:
    entry = document.get(name)
    if isinstance(entry, dict) and entry.get("key") == key:
        return entry
    return None


def _login_path_of(entry: Mapping[str, Any] | None) -> tuple[str | None] | None:
    """``(PATH or None,)`` from an entry, or None when it is not one hostd writes: a string of absolute
    entries (no empty one, no NUL or newline), at most :data:`MAX_PATH_CHARS`, or ``null``."""
    if entry is None or "path" not in entry:
        return None
    value = entry["path"]
    if value is None:
        return (None,)
    if not isinstance(value, str) or not value or len(value) > MAX_PATH_CHARS or "\0" in value or "\n" in value:
        return None
    if not all(part.startswith("/") for part in value.split(":")):
        return None
    return (value,)


def valid_probe_answer(answer: object) -> bool:
    """Whether ``answer`` has the shape of the shim's ``--probe`` answer without an ``error``: only the
    fields it writes (``linux``: bool; ``landlock_abi``: int 0-1000; each of :data:`PROBE_PAIRS`:
    ``[bool, str]``), texts at most :data:`MAX_DETAIL_CHARS`, every pair present."""
    if not isinstance(answer, dict) or set(answer) - {"linux", "landlock_abi", *PROBE_PAIRS}:
        return False
    if not isinstance(answer.get("linux", True), bool):
        return False
    abi = answer.get("landlock_abi", 0)
    if not isinstance(abi, int) or isinstance(abi, bool) or not 0 <= abi <= 1000:
        return False
    for name in PROBE_PAIRS:
        pair = answer.get(name)
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], bool)):
            return False
        if not isinstance(pair[1], str) or len(pair[1]) > MAX_DETAIL_CHARS:
            return False
    return True


def load(state_dir: Path) -> dict[str, Any]:
    """The document in ``state_dir``'s :data:`FACTS_FILE`, or ``{}`` when there is none that can be used (absent,
    unreadable, larger than :data:`MAX_BYTES`, not JSON, not an object, another :data:`FACTS_VERSION`, a link).
    Blocking; never raises."""
    try:
        fd = os.open(state_dir / FACTS_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError:
        return {}
    if len(data) > MAX_BYTES:
        return {}
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(document, dict) or document.get("version") != FACTS_VERSION:
        return {}
    return document


def read(state_dir: Path, env: Mapping[str, str]) -> Facts:
    """What of ``state_dir``'s facts holds now for a reader whose login shell would get ``env``: each answer
    whose key equals the one computed now (:func:`login_path_key`, :func:`probe_key`) and whose value has the
    shape hostd writes. Blocking (small reads); never raises."""
    document = load(state_dir)
    if not document:
        return Facts()
    login = _login_path_of(_entry(document, "loginPath", login_path_key(env)))
    probed = _entry(document, "probe", probe_key())
    answer = probed.get("answer") if probed is not None else None
    return Facts(login_path=login, probe=answer if valid_probe_answer(answer) else None)


def keep(
    state_dir: Path,
    login_path: tuple[str, str | None] | None = None,
    probe: tuple[str, dict[str, Any]] | None = None,
) -> None:
    """Keep in ``state_dir``'s :data:`FACTS_FILE` ``login_path`` as ``(key, PATH or None)`` and ``probe`` as
    ``(key, the shim's answer)``; an entry given as None stays as the file has it, and so does the probe's when
    :func:`valid_probe_answer` refuses the answer (a failed probe is not kept). Written atomically, ``0600``,
    only when the content changes. Only the hostd that owns the folder calls it. Blocking; a failed write is
    logged (a reader then runs the processes itself), never raised."""
    before = load(state_dir)
    document: dict[str, Any] = {**before, "version": FACTS_VERSION}
    if login_path is not None:
        document["loginPath"] = {"key": login_path[0], "path": login_path[1]}
    if probe is not None and valid_probe_answer(probe[1]):
        document["probe"] = {"key": probe[0], "answer": probe[1]}
    if document == before:
        return
    try:
        write_atomically(state_dir / FACTS_FILE, orjson.dumps(document, option=orjson.OPT_SORT_KEYS))
    except OSError as exc:
        log.info("could not keep %s for hostctl's reading commands: %s", FACTS_FILE, exc.strerror)
