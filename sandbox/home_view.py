"""A plugin's private view of ``HOME``: its own writes persist there, the user's real ``HOME`` stays read-only.

Theory of operation (issue 25, under-granting item 5). Under ``landlock-fs`` nothing of the user's
``HOME`` is writable, so a server that keeps its config, cache or state under ``HOME``
(``~/.toolname``, ``~/.config/<tool>``, ``~/.cache/<tool>``, ``~/.local/share/<tool>``) failed at start
with ``EACCES`` - and a grant could not fix it before the folder existed. Landlock cannot redirect a
path and needs no root, so the redirection is the environment's: the plugin's ``HOME`` is a folder of
its own, ``<data folder>/home`` (:func:`home_path`), inside the data folder it may write, kept across
starts, upgrades and hostd restarts, removed at uninstall. ``XDG_CONFIG_HOME``, ``XDG_DATA_HOME`` and
``XDG_STATE_HOME`` are left unset, so their defaults (``~/.config``, ``~/.local/share``,
``~/.local/state``) land in the view too; ``XDG_CACHE_HOME`` is the plugin's cache folder.

Two kinds of entry of the view point at the real ``HOME`` instead, as symbolic links made anew before
every start (:func:`make_view`), so the sandbox's rules apply to the real paths they lead to:

- what the launch grants under the real ``HOME`` (a ``~/.kube/config`` an env value names, a folder an
  argument names, a ``plugins/grant``): the user's granted files stay the real ones, read-only or
  read-write as granted, also for a server that finds them itself through ``~``;
- :data:`RESERVED`: the files a runtime of the launch chain reads at start from ``HOME`` and would run
  code from (``.npmrc``'s ``script-shell``, Python's user site-packages ``.pth`` files, ``.gitconfig``'s
  ``core.fsmonitor``, shell startup files). The plugin cannot plant one of its own there for its next
  start: each start makes the entry a link to the real file again (which the plugin cannot write, and
  reads only when granted), so these files behave exactly as they did with the real ``HOME``.

Whatever the plugin left at such a name is moved aside to ``<name>.hostd-private`` (nothing it wrote is
deleted but an older copy moved aside before). Every change is made through directory descriptors opened
with ``O_NOFOLLOW``: a link the plugin planted in its view (``home`` itself, ``.config``, ``.local``) is
replaced, never followed, so hostd never writes outside the view on the plugin's word.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from sandbox.paths import ensure_private_dir, is_inside

__all__ = ["RESERVED", "HomeView", "home_path", "make_view", "plan_view"]

#: Entries of a private ``HOME`` that always lead to the real ``HOME``: ``(path relative to HOME, why)``.
RESERVED: tuple[tuple[str, str], ...] = (
    (".npmrc", "npm and npx read it at start: registry, script-shell (a program npm runs), node-options"),
    (".yarnrc", "yarn's configuration: the registry and the programs it runs"),
    (".yarnrc.yml", "yarn 2+'s configuration: plugins and the yarn release it runs"),
    (".node_modules", "node searches it for every require() a package does not resolve itself"),
    (".node_libraries", "node searches it for every require() a package does not resolve itself"),
    (".local/lib", "Python's user site-packages: every python imports its .pth files at start"),
    (".local/bin", "the user's programs; a PATH entry of the login shell may name it"),
    (".pydistutils.cfg", "setuptools' configuration of builds"),
    (".pip", "pip's old configuration folder: the index it installs from"),
    (".config/pip", "pip's configuration: the index it installs from"),
    (".config/uv", "uv's configuration: the index and the Python it runs"),
    (".gitconfig", "git's configuration: core.fsmonitor, core.sshCommand and other programs git runs"),
    (".config/git", "git's configuration (XDG place): the same programs"),
    (".ssh", "ssh's configuration: ProxyCommand and the keys"),
    (".bashrc", "bash reads it at start: commands"),
    (".bash_profile", "a login bash reads it at start: commands"),
    (".bash_login", "a login bash reads it at start: commands"),
    (".profile", "a login sh reads it at start: commands"),
    (".zshenv", "every zsh reads it at start: commands"),
    (".zshrc", "an interactive zsh reads it at start: commands"),
)

#: The view's folder inside the plugin's data folder.
HOME_FOLDER = "home"

#: Suffix of what the plugin left where an entry leading to the real HOME must stand.
ASIDE = ".hostd-private"


def home_path(data_dir: str) -> str:
    """The private ``HOME`` of the plugin whose data folder is ``data_dir``: ``<data_dir>/home``."""
    return os.path.join(data_dir, HOME_FOLDER)


@dataclass(frozen=True)
class HomeView:
    """What :func:`make_view` makes: the private ``path`` and its ``links`` into the ``real`` ``HOME``.

    ``links``: ``(path relative to HOME, absolute target in the real HOME)``, sorted, none inside another.
    """

    path: str
    real: str
    links: tuple[tuple[str, str], ...]


def plan_view(data_dir: str, real_home: str, granted: Iterable[str]) -> HomeView:
    """The view for a launch: :data:`RESERVED` plus every ``granted`` path (absolute, as named or real)
    that lies inside ``real_home`` (``real_home`` itself never), as links to the same path in it.

    A path inside another linked path is left out (its link leads there already). Pure: touches nothing.
    """
    real_home = os.path.normpath(real_home)
    wanted = {rel for rel, _ in RESERVED}
    for named in granted:
        path = os.path.normpath(named)
        if path != real_home and is_inside(path, real_home):
            wanted.add(os.path.relpath(path, real_home))
    links: list[tuple[str, str]] = []
    for rel in sorted(wanted, key=lambda r: (r.count("/"), r)):
        if not any(rel == kept or rel.startswith(kept + "/") for kept, _ in links):
            links.append((rel, os.path.join(real_home, rel)))
    return HomeView(home_path(data_dir), real_home, tuple(sorted(links)))


def make_view(view: HomeView) -> None:
    """Make ``view.path`` (a private folder, ``0700``) and each of its links, before every start (blocking).

    Intermediate folders are made real folders (a link or file in their place is moved aside); a link
    already right is kept; anything else at a link's name is moved aside to ``<name>.hostd-private``.
    Raises ``OSError`` when a folder or link cannot be made, :class:`~sandbox.paths.PathRefused` when the
    view's folder is not private (another user's, a shared folder).
    """
    ensure_private_dir(view.path)
    root = os.open(view.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for rel, target in view.links:
            *parents, name = rel.split("/")
            fd = os.dup(root)
            try:
                for part in parents:
                    child = _folder(fd, part)
                    os.close(fd)
                    fd = child
                _link(fd, name, target)
            finally:
                os.close(fd)
    finally:
        os.close(root)


def _folder(parent: int, name: str) -> int:
    """A descriptor of the real folder ``name`` in ``parent``, made (``0700``) if missing; never a link."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o700, dir_fd=parent)
    st = os.lstat(name, dir_fd=parent)
    if not stat.S_ISDIR(st.st_mode):
        _aside(parent, name)
        os.mkdir(name, 0o700, dir_fd=parent)
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)


def _link(parent: int, name: str, target: str) -> None:
    """``name`` in ``parent`` as a symbolic link to ``target`` (what stood there moved aside)."""
    try:
        if os.readlink(name, dir_fd=parent) == target:
            return
    except OSError:  # missing, or not a link: the plugin's own file or folder
        pass
    if _exists(parent, name):
        _aside(parent, name)
    os.symlink(target, name, dir_fd=parent)


def _exists(parent: int, name: str) -> bool:
    try:
        os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return False
    return True


def _aside(parent: int, name: str) -> None:
    """Move ``name`` in ``parent`` to ``name + ASIDE`` (an older one there removed; a link just removed)."""
    if stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode):
        os.unlink(name, dir_fd=parent)
        return
    old = name + ASIDE
    if _exists(parent, old):
        if stat.S_ISDIR(os.lstat(old, dir_fd=parent).st_mode):
            shutil.rmtree(old, dir_fd=parent)
        else:
            os.unlink(old, dir_fd=parent)
    os.rename(name, old, src_dir_fd=parent, dst_dir_fd=parent)
