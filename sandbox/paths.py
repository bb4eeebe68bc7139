"""Paths a sandbox rule may name: resolved once, checked, never redirected by a plugin.

Theory of operation. A Landlock rule binds to the inode a path names *at the
moment the rule is added*. If any component of that path is a symlink, or a
folder that a plugin (or anyone but the user) can replace, the plugin can
point the rule somewhere else before its next start: the fault class this
module closes. Members of the class seen or tried: a plugin swaps its own
``TMPDIR`` for a link to ``/`` and exits, and the restart grants ``/``; a
folder named in the approved arguments is replaced by a link after approval;
an interpreter path ``X/bin/python`` whose ``X`` is a link or ``..`` walk
widens a runtime rule to ``/etc``; a link planted in another plugin's
writable folder and named by this plugin's rule.

The rules, enforced in two places:

1. hostd (:func:`check_rule_path`): every rule path is resolved to its real
   path by walking it one component at a time with ``lstat``. Each symlink
   met on the way must be owned by root or by the user and must not lie in
   a folder some plugin may write; the real path must not cover (be, or be
   an ancestor of) a protected path (the state folder, the user's home, other plugins'
   folders), nor lie inside a fenced one (:func:`check_fences`: hostd's own
   tree and other plugins' folders, in both directions). Violations raise
   :class:`PathRefused` naming the path, the link and why.
2. the shim (``_landlock.open_no_follow``): it opens each real path with no
   symlink followed anywhere, so a swap between (1) and the spawn makes the
   start fail instead of widening the rule.

Folders hostd creates for a plugin (its data folder and ``TMPDIR``) are
checked at every start by :func:`ensure_private_dir`: a real folder (not a
link), owned by the user, mode ``0700``. They never nest inside each other,
so no writable folder of a plugin can be swapped by that plugin.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable

__all__ = [
    "PathRefused",
    "check_fences",
    "check_rule_path",
    "covers",
    "ensure_private_dir",
    "is_inside",
]

_MAX_LINKS = 40  # as the kernel's own limit on symlinks followed in one lookup


class PathRefused(Exception):
    """A path cannot become a sandbox rule (or a host-created folder is not safe).

    ``path``: the path as asked; ``reason``: one sentence naming what is
    wrong (the link, the plugin-writable folder, the protected path).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def is_inside(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or beneath it (both absolute and normalised)."""
    if folder == "/":
        return True
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def covers(path: str, protected: str) -> bool:
    """True when a rule on ``path`` would reach ``protected`` (``path`` is it or one of its ancestors)."""
    return is_inside(protected, path)


def _resolve(path: str, writable: tuple[str, ...], euid: int) -> str:
    """Walk ``path`` component by component; return its real path (or raise :class:`PathRefused`).

    Components that do not exist end the walk: the rest is appended as it is
    (a rule on a missing path grants nothing; the shim skips it).
    """
    pending = [part for part in path.split("/") if part]
    current = "/"
    links = 0
    while pending:
        part = pending.pop(0)
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current) or "/"
            continue
        candidate = os.path.join(current, part)
        try:
            st = os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            return os.path.normpath(os.path.join(candidate, *pending))
        if not stat.S_ISLNK(st.st_mode):
            current = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise PathRefused(path, f"more than {_MAX_LINKS} symbolic links")
        for root in writable:
            if is_inside(candidate, root):
                raise PathRefused(
                    path, f"resolves through the link {candidate}, inside {root}, which a plugin can write"
                )
        if st.st_uid not in (0, euid):
            raise PathRefused(path, f"resolves through the link {candidate}, owned by uid {st.st_uid}, not the user")
        target = os.readlink(candidate)
        if target.startswith("/"):
            current = "/"
        pending = [p for p in target.split("/") if p] + pending
    return current


def check_rule_path(
    path: str,
    *,
    writable: Iterable[str] = (),
    protected: Iterable[str] = (),
) -> str:
    """The real path a rule on ``path`` may bind to; raise :class:`PathRefused` otherwise.

    ``path``: absolute. ``writable``: real paths of folders some plugin may
    write (its own data folder and ``TMPDIR``, other plugins' grants...): a
    link met beneath one of them could be swapped, so it is refused. A rule
    *beneath* such a folder is allowed: the shim opens its real path with no
    link followed, so the most a swap can do is fail the start. ``protected``:
    real paths no rule may cover: the result must not be one of them nor an
    ancestor of one. The result is also never ``/``.

    Raises :class:`PathRefused` for a relative path, a symlink met in a
    plugin-writable folder or owned by another user, or a result that
    covers a protected path. Runs ``lstat`` per component (a few microseconds each); blocking.
    """
    if not os.path.isabs(path):
        raise PathRefused(path, "is not an absolute path")
    writable = tuple(writable)
    real = _resolve(path, writable, os.geteuid())
    if real == "/":
        raise PathRefused(path, "would cover the whole filesystem")
    for guarded in protected:
        if covers(real, guarded):
            what = "is" if real == guarded else "contains"
            raise PathRefused(path, f"{what} {guarded}, which no plugin may reach")
    return real


def check_fences(path: str, real: str, fences: Iterable[str], allowed: Iterable[str] = ()) -> None:
    """Raise :class:`PathRefused` when the real path ``real`` of a rule lies inside a fenced folder.

    The class this closes (issue 25): a rule that does not *cover* hostd's
    own tree but lies *inside* it, reached by any route: ``..`` out of a
    bundle (``${__dirname}/../../secrets``), an absolute path into
    ``<state>/credentials``, a symlink the user owns that points into the
    state folder (``real`` is resolved, so the route does not matter), another
    plugin's data folder or prepared environment. ``fences``: real paths no
    rule may lie inside (the state folder, other plugins' folders); covering
    them is :func:`check_rule_path`'s ``protected``. ``allowed``: real paths
    inside a fence this rule may still be or lie in (the plugin's own data
    folder and ``TMPDIR``; for a read rule also its own folder and prepared
    environment). ``path`` is the rule as asked, for the message. Pure.
    """
    allowed = tuple(allowed)
    if any(is_inside(real, own) for own in allowed):
        return
    for fence in fences:
        if is_inside(real, fence):
            raise PathRefused(path, f"lies inside {fence}, which no plugin may reach (hostd's own or another plugin's)")


def ensure_private_dir(path: str) -> str:
    """Create ``path`` (mode ``0700``, parents too) if missing; check it is safe; return it.

    Safe means: a real folder, not a symlink, owned by this user, mode
    exactly ``0700`` (tightened when it is ours and looser). A symlink or a
    non-folder in its place (planted by a plugin in an earlier run) is
    removed and the folder recreated. Raises :class:`PathRefused` when the
    folder belongs to another user or is shared (sticky or world-writable,
    like ``/tmp``: never changed), ``OSError`` when it cannot be created.
    """
    with contextlib.suppress(FileExistsError):
        os.makedirs(path, mode=0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)  # a link or a file: never follow it, replace it
        os.mkdir(path, 0o700)
        st = os.lstat(path)
    if st.st_uid != os.geteuid():
        raise PathRefused(path, f"is owned by uid {st.st_uid}, not by this user")
    if st.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
        # A shared folder such as /tmp: never ours to tighten, never private.
        raise PathRefused(path, f"is a shared folder (mode {stat.S_IMODE(st.st_mode):o}), not a private one")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)  # a real folder (checked above): no link to follow
    return path


def write_private_file(path: str, value: str) -> None:
    """Write ``value`` (UTF-8) as a new file ``path`` readable by its owner only (``0600``), blocking.

    For a secret handed to a plugin as a file (the ``${secret:NAME:file}`` channel): its folder is the
    plugin's TMPDIR, which the plugin writes, so nothing found there is trusted. The folder is opened with
    ``O_NOFOLLOW`` (a link in its place is refused, ``OSError`` ``ELOOP``/``ENOTDIR``), whatever stands at
    the name is unlinked (never followed), and the file is created with ``O_EXCL | O_NOFOLLOW``: a link the
    plugin planted there between the unlink and the create makes it fail (``EEXIST``) rather than write
    through it. Raises ``OSError``.
    """
    folder, name = os.path.split(path)
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dir_fd)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, value.encode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)
