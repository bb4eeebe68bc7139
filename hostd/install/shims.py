"""Version-manager shims: a launch's command that is a stand-in, and the real program behind it.

The class (issue 28, item 6): a version manager puts a *shim* first on the shell's ``PATH`` (pyenv,
rbenv, nodenv: ``~/.pyenv/shims/python3``, a shell script that execs ``pyenv exec``; asdf:
``~/.asdf/shims/node``, ``exec asdf exec``; mise: ``~/.local/share/mise/shims/node``, a link to
``mise``; volta: ``~/.volta/bin/node``, a link to ``volta-shim``). The shim picks the real program
from the shell's setup (``PYENV_ROOT``, ``PYENV_VERSION``, the manager's functions, a writable
cache); hostd runs a command without a shell and under a sandbox, so the shim fails, or runs another
version than the user's shell would, with an error that points anywhere but at the shim (a
"permission denied" on the manager's own files, so the hint offered write access to them).

:func:`find_shim` recognises a shim by the resolved executable's path and contents (never by
running it). :func:`resolve_shim` finds the real program where the manager's choice is a plain
file hostd can read without running anything: pyenv-style managers (``PYENV_VERSION``, then a
``.python-version`` in the plugin folder or above, then ``$PYENV_ROOT/version``) map to
``$PYENV_ROOT/versions/X/bin/<command>``; asdf (``ASDF_<TOOL>_VERSION``, ``.tool-versions`` in the
plugin folder or above, ``~/.tool-versions``) to ``~/.asdf/installs/<tool>/X/bin/<command>``; volta
(``$VOLTA_HOME/tools/user/platform.json``) to ``tools/image/node/X/bin/<command>``. A version named
``system``, one not installed, a version file that is not one, and mise (whose configuration is a
program of its own) resolve to ``None``: the launch then names the shim, and :attr:`Shim.message`
and :meth:`Shim.remedy` say what it is and how to name the real program instead.

Every file read here is bounded (:data:`READ_BOUND`) and its text is the user's own; a version
string is accepted only as one path component (no ``/``, not ``.`` or ``..``), so a version file
cannot point hostd outside the manager's ``versions`` folder. Blocking (reads files); pure
otherwise.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["READ_BOUND", "Shim", "find_shim", "resolve_shim"]

#: Bytes read of a shim script or a version file.
READ_BOUND = 4096

#: pyenv-style managers: the manager's name -> (its root variable, its default root under ``~``,
#: the version variable, the local version file).
_ENV_MANAGERS: dict[str, tuple[str, str, str, str]] = {
    "pyenv": ("PYENV_ROOT", ".pyenv", "PYENV_VERSION", ".python-version"),
    "rbenv": ("RBENV_ROOT", ".rbenv", "RBENV_VERSION", ".ruby-version"),
    "nodenv": ("NODENV_ROOT", ".nodenv", "NODENV_VERSION", ".node-version"),
}
#: asdf's plugin for a command.
_ASDF_TOOLS: dict[str, str] = {
    **dict.fromkeys(("python", "python3", "pip", "pip3", "uv", "uvx"), "python"),
    **dict.fromkeys(("node", "npm", "npx", "corepack"), "nodejs"),
    **dict.fromkeys(("ruby", "gem", "bundle"), "ruby"),
    **dict.fromkeys(("deno",), "deno"),
}
_SCRIPT_EXEC = re.compile(r"\b(pyenv|rbenv|nodenv|asdf|mise|rtx)\b[\"']?\s+(?:exec|x)\b")


@dataclass(frozen=True)
class Shim:
    """A launch command that is a version manager's shim.

    ``manager``: ``pyenv``, ``rbenv``, ``nodenv``, ``asdf``, ``mise`` or ``volta``. ``command``: as the
    manifest names it (``python3``). ``path``: the shim as found on ``PATH``. ``real``: the program
    the manager would pick, when :func:`resolve_shim` found it (hostd then runs that), else ``None``.
    ``version`` and ``source``: the version picked and the file or variable it came from.
    """

    manager: str
    command: str
    path: str
    real: str | None = None
    version: str | None = None
    source: str | None = None

    @property
    def message(self) -> str:
        """What the approval shows: that it is a shim, and what hostd runs instead (or that it cannot)."""
        said = f"`{self.command}` is a {self.manager} shim ({self.path}); hostd runs it without the shell's setup"
        if self.real is not None:
            return f"{said}, so it runs {self.real} ({self.manager} version {self.version}, from {self.source})"
        return f"{said}: {self.remedy()}"

    def remedy(self) -> str:
        """The PATH fix: which real program to name, and how to find it."""
        which = {"volta": f"volta which {self.command}", "asdf": f"asdf which {self.command}"}.get(
            self.manager, f"{self.manager} which {self.command}"
        )
        return (
            f"name the real program as the command: the path `{which}` prints in your shell "
            f"(or put its folder before {os.path.dirname(self.path)} on hostd's PATH)"
        )


def find_shim(command: str, executable: str) -> Shim | None:
    """The :class:`Shim` ``executable`` (``command`` as found on ``PATH``) is, or ``None`` for a real program.

    Recognised by path and contents, never by running it: a script whose first :data:`READ_BOUND`
    bytes exec ``pyenv``/``rbenv``/``nodenv``/``asdf``/``mise``, a file in a ``shims`` folder of
    such a manager, or a link to ``mise`` or ``volta-shim``. ``real`` is left unresolved
    (:func:`resolve_shim`). Blocking (reads the file).
    """
    real = os.path.realpath(executable)
    target = os.path.basename(real)
    if target == "volta-shim" or (target == "volta" and os.path.basename(executable) != "volta"):
        return Shim("volta", command, executable)
    if target in ("mise", "rtx") and os.path.basename(executable) not in ("mise", "rtx"):
        return Shim("mise", command, executable)
    try:
        with open(real, "rb") as file:
            head = file.read(READ_BOUND)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    found = _SCRIPT_EXEC.search(head.decode("utf-8", "replace"))
    if found is not None:
        return Shim("mise" if found.group(1) == "rtx" else found.group(1), command, executable)
    return None


def resolve_shim(shim: Shim, folder: str, environ: Mapping[str, str]) -> Shim:
    """``shim`` with ``real``, ``version`` and ``source`` filled when the manager's choice is readable.

    ``folder``: where the program runs (the plugin folder: a local version file there or above
    it counts, as in the shell). ``environ``: hostd's environment (``HOME``, the manager's root
    and version variables). Returns ``shim`` unchanged when the choice cannot be read safely, is
    ``system``, or names a version that is not installed. Blocking (reads a few small files).
    """
    home = environ.get("HOME") or os.path.expanduser("~")
    if shim.manager in _ENV_MANAGERS:
        found = _env_manager(shim, folder, environ, home)
    elif shim.manager == "asdf":
        found = _asdf(shim, folder, environ, home)
    elif shim.manager == "volta":
        found = _volta(shim, environ, home)
    else:
        found = None
    if found is None:
        return shim
    real, version, source = found
    return Shim(shim.manager, shim.command, shim.path, real, version, source)


def _env_manager(shim: Shim, folder: str, environ: Mapping[str, str], home: str) -> tuple[str, str, str] | None:
    root_var, default_root, version_var, local_file = _ENV_MANAGERS[shim.manager]
    root = environ.get(root_var) or os.path.join(home, default_root)
    choices: list[tuple[str, str]] = []
    if environ.get(version_var):
        choices.append((environ[version_var], version_var))
    else:
        local = _upward(folder, local_file)
        source = local or os.path.join(root, "version")
        text = _read(source)
        if text is not None:
            choices.append((text, source))
    for text, source in choices:
        # The file may name several versions (one per line or separated by spaces): the first that has the program.
        for version in _versions(text):
            candidate = os.path.join(root, "versions", version, "bin", shim.command)
            if _executable(candidate):
                return candidate, version, source
    return None


def _asdf(shim: Shim, folder: str, environ: Mapping[str, str], home: str) -> tuple[str, str, str] | None:
    tool = _ASDF_TOOLS.get(shim.command)
    if tool is None:
        return None
    data = environ.get("ASDF_DATA_DIR") or os.path.join(home, ".asdf")
    variable = f"ASDF_{tool.upper()}_VERSION"
    if environ.get(variable):
        sources = [(environ[variable], variable)]
    else:
        sources = []
        for path in (_upward(folder, ".tool-versions"), os.path.join(home, ".tool-versions")):
            text = _read(path) if path else None
            for line in (text or "").splitlines():
                words = line.split("#", 1)[0].split()
                if words and words[0] == tool and path:
                    sources.append((" ".join(words[1:]), path))
                    break
            if sources:
                break
    for text, source in sources:
        for version in _versions(text):
            candidate = os.path.join(data, "installs", tool, version, "bin", shim.command)
            if _executable(candidate):
                return candidate, version, source
    return None


def _volta(shim: Shim, environ: Mapping[str, str], home: str) -> tuple[str, str, str] | None:
    if shim.command not in ("node", "npm", "npx"):
        return None
    root = environ.get("VOLTA_HOME") or os.path.join(home, ".volta")
    source = os.path.join(root, "tools", "user", "platform.json")
    text = _read(source)
    try:
        version = json.loads(text or "")["node"]["runtime"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(version, str) or not _component(version):
        return None
    candidate = os.path.join(root, "tools", "image", "node", version, "bin", shim.command)
    return (candidate, version, source) if _executable(candidate) else None


def _upward(folder: str, name: str) -> str | None:
    """The first ``name`` in ``folder`` or a folder above it, as the shell's manager looks for it."""
    current = Path(os.path.abspath(folder))
    for place in (current, *current.parents):
        candidate = place / name
        if candidate.is_file():
            return str(candidate)
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return file.read(READ_BOUND).decode("utf-8", "replace")
    except OSError:
        return None


def _versions(text: str) -> list[str]:
    """The versions a version file or variable names, in order; ``system`` and anything that is not one
    path component are left out (a version is a folder name under the manager's root, never a path)."""
    words = [line.split("#", 1)[0] for line in text.splitlines()]
    return [w for line in words for w in line.replace(":", " ").split() if w != "system" and _component(w)]


def _component(word: str) -> bool:
    return bool(word) and "/" not in word and "\0" not in word and word not in (".", "..")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
