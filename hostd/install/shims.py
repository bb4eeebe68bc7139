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
(``$VOLTA_HOME/tools/user/platform.json``) to ``tools/image/node/X/bin/<command>``; mise
(``MISE_<TOOL>_VERSION``, then ``[tools]`` of ``mise.toml`` and its kin or ``.tool-versions`` in
the plugin folder or above, then the global ``~/.config/mise/config.toml``) to
``~/.local/share/mise/installs/<tool>/X/bin/<command>``, where ``X`` may be a prefix (``20``: the
newest installed ``20.*``) as mise reads it. A version named ``system``, one not installed, and a
version that is no folder name resolve to nothing: the launch then names the shim, and
:attr:`Shim.message` says what it is, why hostd did not follow it (:attr:`Shim.reason`) and how
to name the real program instead.

nvm has no shims: its ``node`` is on ``PATH`` only in a shell that sourced ``nvm.sh`` (an
interactive one; a login shell's ``PATH`` lacks it). :func:`nvm_program` is asked when a bare
``node``/``npm``/``npx`` is on no ``PATH`` hostd knows and nvm is installed: it resolves nvm's
``default`` alias (through ``lts/*`` and other aliases, a partial version ``20`` to the newest
installed ``v20.*``) to ``$NVM_DIR/versions/node/vX/bin/<command>``.

The class of input: every file read here may be written by someone else than the user (a plugin
folder's ``mise.toml``, ``.tool-versions`` or ``.python-version`` comes with the plugin). Each
read is bounded (:data:`READ_BOUND`, :data:`TOML_BOUND`); a version or alias is accepted only as
one path component (no ``/``, not ``.`` or ``..``), and the version folder it names is resolved
(links followed) and must still lie directly in the manager's own ``versions``/``installs``
folder, so no version file can point hostd at a program elsewhere; each refusal says why
(:attr:`Shim.reason`). Blocking (reads files); nothing is ever run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NVM_COMMANDS", "READ_BOUND", "TOML_BOUND", "Shim", "find_shim", "nvm_program", "resolve_shim"]

#: Bytes read of a shim script or a version file.
READ_BOUND = 4096
#: Bytes read of a mise TOML configuration (it may hold tasks and settings besides ``[tools]``); a larger one is
#: not read.
TOML_BOUND = 65536
#: The commands nvm puts on ``PATH`` (its ``versions/node/vX/bin``).
NVM_COMMANDS = frozenset({"node", "npm", "npx", "corepack"})

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
#: mise's tool (its ``installs`` folder's name) for a command, and the names a configuration may give it.
_MISE_TOOLS: dict[str, str] = {
    **dict.fromkeys(("python", "python3", "pip", "pip3"), "python"),
    **dict.fromkeys(("node", "npm", "npx", "corepack"), "node"),
    **dict.fromkeys(("ruby", "gem", "bundle"), "ruby"),
    **dict.fromkeys(("deno",), "deno"),
    **dict.fromkeys(("bun", "bunx"), "bun"),
}
_MISE_KEYS: dict[str, tuple[str, ...]] = {"node": ("node", "nodejs", "core:node"), "python": ("python", "core:python")}
#: mise's local configuration files in one folder, the one that wins first (mise's ``LOCAL_CONFIG_FILENAMES``);
#: ``.tool-versions`` is asdf's format, the others TOML with a ``[tools]`` table.
_MISE_LOCAL = (
    "mise.local.toml",
    ".mise.local.toml",
    "mise.toml",
    ".mise.toml",
    "mise/config.toml",
    ".mise/config.toml",
    ".config/mise.toml",
    ".config/mise/config.toml",
    ".tool-versions",
)
#: A version as nvm and mise match it: ``20``, ``v20.1``, ``20.1.0``.
_NUMERIC = re.compile(r"v?\d+(\.\d+){0,2}")
_SCRIPT_EXEC = re.compile(r"\b(pyenv|rbenv|nodenv|asdf|mise|rtx)\b[\"']?\s+(?:exec|x)\b")


@dataclass(frozen=True)
class Shim:
    """A launch command that is a version manager's shim.

    ``manager``: ``pyenv``, ``rbenv``, ``nodenv``, ``asdf``, ``mise``, ``volta`` or ``nvm``. ``command``:
    as the manifest names it (``python3``). ``path``: the shim as found on ``PATH``; for nvm, which
    has none, its ``nvm.sh``. ``real``: the program the manager would pick, when :func:`resolve_shim`
    (or :func:`nvm_program`) found it (hostd then runs that), else ``None``. ``version`` and
    ``source``: the version picked and the file or variable it came from. ``reason``: when ``real``
    is ``None``, why (the version named and where, and what is wrong with it), for people.
    """

    manager: str
    command: str
    path: str
    real: str | None = None
    version: str | None = None
    source: str | None = None
    reason: str | None = None

    @property
    def message(self) -> str:
        """What the approval shows: that it is a shim, and what hostd runs instead (or why not, and the fix)."""
        if self.manager == "nvm":
            said = (
                f"`{self.command}` is on no PATH hostd has: nvm ({self.path}) puts it there only in a shell that "
                "loaded nvm"
            )
        else:
            said = f"`{self.command}` is a {self.manager} shim ({self.path}); hostd runs it without the shell's setup"
        if self.real is not None:
            return f"{said}, so it runs {self.real} ({self.manager} version {self.version}, from {self.source})"
        if self.reason is not None:
            return f"{said}, and {self.reason}: {self.remedy()}"
        return f"{said}: {self.remedy()}"

    def remedy(self) -> str:
        """The PATH fix: which real program to name, and how to find it."""
        if self.manager == "nvm":
            return (
                "name the real program as the command: the path `nvm which default` prints in your shell "
                "(or put its folder on hostd's PATH, or choose an installed version with `nvm alias default VERSION`)"
            )
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


#: What a manager's look-up gives: ``(the program, the version folder's name, where the version was named)``, or,
#: for people, why there is none.
_Found = tuple[str, str, str] | str

#: Versions that mean "the newest installed" to mise (``latest``) and nvm (``node``, ``stable``).
_NEWEST = frozenset({"latest", "node", "stable"})
#: Alias files nvm follows from ``default`` (``default`` -> ``lts/*`` -> ``lts/iron`` -> ``v20.11.0``).
_ALIAS_DEPTH = 8


def resolve_shim(shim: Shim, folder: str, environ: Mapping[str, str]) -> Shim:
    """``shim`` with ``real``, ``version`` and ``source`` filled when the manager's choice is readable.

    ``folder``: where the program runs (the plugin folder: a local version file there or above
    it counts, as in the shell). ``environ``: hostd's environment (``HOME``, the manager's root
    and version variables). When the choice cannot be read safely, is ``system``, names a version
    that is not installed or a folder that leads out of the manager's own, the result has no
    ``real`` and says why in ``reason``. Blocking (reads a few small files).
    """
    home = environ.get("HOME") or os.path.expanduser("~")
    found: _Found
    if shim.manager in _ENV_MANAGERS:
        found = _env_manager(shim, folder, environ, home)
    elif shim.manager == "asdf":
        found = _asdf(shim, folder, environ, home)
    elif shim.manager == "volta":
        found = _volta(shim, environ, home)
    elif shim.manager == "mise":
        found = _mise(shim, folder, environ, home)
    else:
        found = f"hostd does not read {shim.manager}'s choice"
    if isinstance(found, str):
        return Shim(shim.manager, shim.command, shim.path, reason=found)
    real, version, source = found
    return Shim(shim.manager, shim.command, shim.path, real, version, source)


def nvm_program(command: str, environ: Mapping[str, str]) -> Shim | None:
    """nvm's ``command`` (one of :data:`NVM_COMMANDS`) for a launch that found it on no ``PATH``, or ``None``.

    ``None`` when ``command`` is not nvm's or nvm is not installed (no ``$NVM_DIR/nvm.sh``;
    ``NVM_DIR`` defaults to ``~/.nvm``). Otherwise a :class:`Shim` of manager ``nvm`` whose ``path``
    is ``nvm.sh`` and whose ``real`` is ``$NVM_DIR/versions/node/vX/bin/<command>`` for the version
    nvm's ``default`` alias names (what a new interactive shell runs; followed through other alias
    files, a partial version or ``node``/``stable`` to the newest installed match), or no ``real``
    and a ``reason``. Never runs nvm (a shell function). Blocking (reads a few small files).
    """
    if command not in NVM_COMMANDS:
        return None
    home = environ.get("HOME") or os.path.expanduser("~")
    nvm_dir = environ.get("NVM_DIR") or os.path.join(home, ".nvm")
    script = os.path.join(nvm_dir, "nvm.sh")
    if not os.path.isfile(script):
        return None
    found = _nvm(nvm_dir, command)
    if isinstance(found, str):
        return Shim("nvm", command, script, reason=found)
    real, version, source = found
    return Shim("nvm", command, script, real, version, source)


def _env_manager(shim: Shim, folder: str, environ: Mapping[str, str], home: str) -> _Found:
    root_var, default_root, version_var, local_file = _ENV_MANAGERS[shim.manager]
    root = environ.get(root_var) or os.path.join(home, default_root)
    if environ.get(version_var):
        text, source = environ[version_var], version_var
    else:
        source = _upward(folder, local_file) or os.path.join(root, "version")
        read = _read(source)
        if read is None:
            return f"no version is set ({version_var}, {local_file} in {folder} or above, {source})"
        text = read
    # The file may name several versions (one per line, or separated by spaces or ':'): the first that has the
    # program.
    return _pick(os.path.join(root, "versions"), [(v, source) for v in _words(text.replace(":", " "))], shim.command)


def _asdf(shim: Shim, folder: str, environ: Mapping[str, str], home: str) -> _Found:
    tool = _ASDF_TOOLS.get(shim.command)
    if tool is None:
        return f"hostd does not know which asdf plugin provides `{shim.command}`"
    data = environ.get("ASDF_DATA_DIR") or os.path.join(home, ".asdf")
    variable = f"ASDF_{tool.upper()}_VERSION"
    choices = [(v, variable) for v in _words(environ.get(variable, ""))]
    places = (_upward(folder, ".tool-versions"), os.path.join(home, ".tool-versions"))
    for path in places if not choices else ():
        for line in ((_read(path) if path else None) or "").splitlines():
            words = _words(line)
            if words and words[0] == tool and path:
                choices = [(v, path) for v in words[1:]]
                break
        if choices:
            break
    root = os.path.join(data, "installs", tool)
    return _pick(root, choices, shim.command) or f"no version of {tool} is set ({variable}, .tool-versions)"


def _volta(shim: Shim, environ: Mapping[str, str], home: str) -> _Found:
    if shim.command not in ("node", "npm", "npx"):
        return f"hostd reads volta's choice of node only, not of `{shim.command}`"
    root = environ.get("VOLTA_HOME") or os.path.join(home, ".volta")
    source = os.path.join(root, "tools", "user", "platform.json")
    try:
        version = json.loads(_read(source) or "")["node"]["runtime"]
    except (ValueError, KeyError, TypeError):
        return f"{source} names no node runtime"
    if not isinstance(version, str):
        return f"{source} names no node runtime"
    return _installed(os.path.join(root, "tools", "image", "node"), version, source, shim.command)


def _mise(shim: Shim, folder: str, environ: Mapping[str, str], home: str) -> _Found:
    tool = _MISE_TOOLS.get(shim.command)
    if tool is None:
        return f"hostd does not know which mise tool provides `{shim.command}`"
    data = environ.get("MISE_DATA_DIR") or os.path.join(
        environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share"), "mise"
    )
    config = environ.get("MISE_CONFIG_DIR") or os.path.join(
        environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"), "mise"
    )
    global_config = environ.get("MISE_GLOBAL_CONFIG_FILE") or os.path.join(config, "config.toml")
    variable = f"MISE_{tool.upper()}_VERSION"
    if environ.get(variable):
        choices: list[tuple[str, str]] | str = [(v, variable) for v in _words(environ[variable])]
    else:
        places = [os.path.join(place, name) for place in _folders_up(folder) for name in _MISE_LOCAL]
        choices = _mise_choice(tool, [*places, global_config])
    if isinstance(choices, str):
        return choices
    root = os.path.join(data, "installs", tool)
    return _pick(root, choices, shim.command, newest=True) or (
        f"no mise configuration names a version of {tool} ({variable}, mise.toml or .tool-versions in {folder} "
        f"or above, {global_config})"
    )


def _mise_choice(tool: str, places: Iterable[str]) -> list[tuple[str, str]] | str:
    """The versions of ``tool`` the first of ``places`` (configuration files, the one that wins first) that names
    it gives, each with the file; ``[]`` when none does; a reason when the file that would decide cannot be read."""
    keys = _MISE_KEYS.get(tool, (tool,))
    for path in places:
        if not os.path.isfile(path):
            continue
        if os.path.basename(path) == ".tool-versions":
            for line in (_read(path) or "").splitlines():
                words = _words(line)
                if words and words[0] in keys:
                    return [(v, path) for v in words[1:]]
            continue
        try:
            with open(path, "rb") as file:
                raw = file.read(TOML_BOUND + 1)
        except OSError:
            continue
        if len(raw) > TOML_BOUND:
            return f"{path} is larger than {TOML_BOUND // 1024} KiB: hostd does not read it"
        import tomllib  # noqa: PLC0415 (only mise's files are TOML: hostd's start and hostctl's reads never parse one)

        try:
            tools = tomllib.loads(raw.decode("utf-8")).get("tools", {})
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            return f"{path} is not TOML hostd can read ({exc})"
        for key in keys if isinstance(tools, dict) else ():
            if key in tools:
                versions = _toml_versions(tools[key])
                if versions is None:
                    return f"{path}: tools.{key} is no version, list of versions or table with a version"
                return [(v, path) for v in versions]
    return []


def _toml_versions(value: object) -> list[str] | None:
    """A ``[tools]`` entry's versions: ``"20"``, ``["20", "18"]``, ``{version = "20"}`` or a list of such tables."""
    items = value if isinstance(value, list) else [value]
    versions: list[str] = []
    for item in items:
        version = item.get("version") if isinstance(item, dict) else item
        if not isinstance(version, str):
            return None
        versions.extend(_words(version))
    return versions


def _nvm(nvm_dir: str, command: str) -> _Found:
    """nvm's ``default`` alias followed to an installed version (nvm's own ``nvm_resolve_alias``)."""
    aliases = os.path.join(nvm_dir, "alias")
    source = os.path.join(aliases, "default")
    for _ in range(_ALIAS_DEPTH):
        text = _read(source)
        if text is None:
            return f"{source} does not exist (nvm has no default version)"
        words = _words(text)
        target = words[0] if words else ""
        if target in _NEWEST or _NUMERIC.fullmatch(target) or target == "system":
            return _pick(os.path.join(nvm_dir, "versions", "node"), [(target, source)], command, newest=True)
        parts = target.split("/")
        if not (all(_component(p) for p in parts) and (len(parts) == 1 or (len(parts) == 2 and parts[0] == "lts"))):
            return f"{source} names `{target}`, which is neither a version nor an nvm alias: hostd does not follow it"
        source = os.path.join(aliases, *parts)
    return f"{source}: nvm aliases nested more than {_ALIAS_DEPTH} deep: hostd does not follow them"


def _pick(root: str, choices: list[tuple[str, str]], command: str, *, newest: bool = False) -> _Found:
    """The first of ``choices`` (``(version, where it was named)``) installed in ``root``; else the first one's
    reason; ``""`` when there is no choice. ``newest``: a prefix (``20``) or ``latest`` picks the newest match."""
    reasons: list[str] = []
    for version, source in choices:
        found = _installed(root, version, source, command, newest=newest)
        if not isinstance(found, str):
            return found
        reasons.append(found)
    return reasons[0] if reasons else ""


def _installed(root: str, version: str, source: str, command: str, *, newest: bool = False) -> _Found:
    """``root/version/bin/command`` when it is an executable and the version folder, links followed, lies directly
    in ``root``; else why not. The program inside the folder is the manager's own install and may be a link (a
    ``python3`` -> ``python3.12``, a system interpreter the user registered): only which folder is the version
    file's to choose, so only the folder is held to ``root``."""
    named = f"{source} names `{version}`"
    if version == "system":
        return f"{named}, the program after the manager's shims on PATH, which hostd does not guess"
    if not _component(version):
        return f"{named}, which is not one folder name in {root}: hostd does not follow it"
    name = version
    if newest and not os.path.lexists(os.path.join(root, version)):
        name = _newest(root, "" if version in _NEWEST else version.removeprefix("prefix:")) or version
    folder = os.path.join(root, name)
    real_root, real_folder = os.path.realpath(root), os.path.realpath(folder)
    if os.path.lexists(folder) and os.path.dirname(real_folder) != real_root:
        return f"{named}, and {folder} leads to {real_folder}, outside {root}: hostd does not follow it"
    candidate = os.path.join(real_folder, "bin", command)
    if not _executable(candidate):
        return f"{named}, which is not installed ({os.path.join(folder, 'bin', command)} is no executable)"
    return candidate, os.path.basename(real_folder), source


def _newest(root: str, prefix: str) -> str | None:
    """The newest version folder in ``root`` (``1.2.3`` or ``v1.2.3``) that is ``prefix`` or starts with
    ``prefix.`` (any when ``prefix`` is empty), as mise and nvm match a partial version."""
    wanted = prefix.removeprefix("v")
    try:
        names = os.listdir(root)
    except OSError:
        return None
    best: tuple[tuple[int, ...], str] | None = None
    for name in names:
        bare = name.removeprefix("v")
        if not _NUMERIC.fullmatch(name) or (wanted and bare != wanted and not bare.startswith(wanted + ".")):
            continue
        key = tuple(int(part) for part in bare.split("."))
        if best is None or key > best[0]:
            best = (key, name)
    return best[1] if best is not None else None


def _folders_up(folder: str) -> list[str]:
    current = Path(os.path.abspath(folder))
    return [str(place) for place in (current, *current.parents)]


def _upward(folder: str, name: str) -> str | None:
    """The first ``name`` in ``folder`` or a folder above it, as the shell's manager looks for it."""
    for place in _folders_up(folder):
        candidate = os.path.join(place, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as file:
            return file.read(READ_BOUND).decode("utf-8", "replace")
    except OSError:
        return None


def _words(text: str) -> list[str]:
    """The words of a version file or variable, in order, comments (``#`` to the end of a line) left out."""
    return [word for line in text.splitlines() for word in line.split("#", 1)[0].split()]


def _component(word: str) -> bool:
    return bool(word) and "/" not in word and "\0" not in word and word not in (".", "..")


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
