"""Install-time preparation: a launch that names a package runs from an environment of its own.

The fault class this module closes: *a plugin whose launch fetches code at run
time* (``npx -y pkg@ver``, ``uvx --from pkg==ver cmd``, ``uv run --with pkg``).
Such a start needs the network and a package cache, so it fails under
``--sandbox strict`` (after a DNS timeout), in a fresh home (no ``~/.npm``), or
behind a firewall, and what runs can change between two starts (a dependency
range resolved again). Members handled here: npx (``-y``/``--yes``,
``--package``/``-p``, scoped and unscoped names, pinned or not), uvx and ``uv
tool run`` (``--from``, ``--with``, ``--python``, ``pkg==ver`` and
``pkg@ver``), ``pipx run`` (``--spec``; prepared with uv, as uvx), ``uv run
--with`` (a ``python``/script/console-script command), each also after uv's own
flags (``uv -q run``).

The package spec grammar: text from a config's ``args``, a bundle's
``mcp_config`` or a registry ``server.json`` reaches npm or uv only as
validated operands (:func:`npm_spec`, :func:`python_spec`): a registry name
plus an exact version (npm ``name@1.2.3``, Python ``name==1.2.3``, also
``name[extra]`` and uvx's ``name@1.2.3``), or a bare name (``name@latest``),
which the preparation resolves and shows (``Prepared.resolved``,
:attr:`PackageLaunch.unpinned`). Paths, URLs, ``git+``/``file:``/``github:``
sources, ``npm:`` aliases, tarballs and wheels, ``user/repo`` shorthand,
ranges, markers and any word starting with ``-`` are refused
(``spec-unsupported``, naming the word, the tool and field it came from, and
the supported forms); so are a program that is not a plain name
(:func:`program_name`) and a ``--python`` that is not a version
(:func:`python_request`: ``3.12``, never a path). An option of these tools
that would change what is installed is refused as ``unsupported``.

``plugins/prepare {id}`` (:meth:`hostd.host.Host.prepare`) calls
:func:`prepare`: it installs exactly the named packages into
``<state>/prepared/<id>/<key>/`` (npm: ``npm install --prefix``; Python:
``uv venv`` + ``uv pip install``), each with a cache of its own under
``<state>/prepared/<id>/cache`` (never the user's ``~/.npm`` or uv cache, never
a folder a plugin can write), and writes a marker (:data:`MARKER`) last. A
folder without the marker is a preparation that did not finish (cancelled,
failed, hostd killed): it is never used, and the next preparation deletes it.
At run time :func:`find_prepared` finds the marker and the launch becomes the
environment's entry point (``node <root>/node_modules/<pkg>/<bin>``, or
``<root>/venv/bin/<script>``): no network, no package tool, no shared cache.

The installers run without a shell, with a trimmed environment
(:func:`installer_environment`: ``PATH``, ``HOME``, locale, proxy and CA
variables, the registry and the cache), npm with ``--ignore-scripts`` (a
package's install scripts never run), and their output is bounded
(:data:`OUTPUT_BOUND`). A registry mirror set once for the host
(:class:`Registries`) applies to every preparation.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

import trio

__all__ = [
    "MARKER",
    "NPM_FORMS",
    "PYTHON_FORMS",
    "PackageLaunch",
    "PrepareError",
    "Prepared",
    "Registries",
    "Spec",
    "find_prepared",
    "npm_spec",
    "parse_package_launch",
    "prepare",
    "program_name",
    "python_request",
    "python_spec",
]

#: Written last into a prepared environment; its absence means "not prepared".
MARKER = "hostd-prepared.json"
#: Bytes of an installer's output kept (the first and last parts); the rest is dropped.
OUTPUT_BOUND = 64 * 1024
#: Seconds one installer may run before it is ended (a stuck registry connection).
INSTALL_TIMEOUT = 600.0

Manager = Literal["npm", "uv"]
#: ``progress(step, total, message)``: one call per step of a preparation.
Progress = Callable[[int, int, str], Awaitable[None]]


class PrepareError(Exception):
    """A preparation failed; nothing of it is used.

    ``reason``: ``"unsupported"`` (a launch form this module cannot prepare),
    ``"spec-unsupported"`` (a package, program or ``--python`` word outside the
    grammar of :func:`npm_spec` / :func:`python_spec`: a path, URL, option,
    alias, range...; the message names the word, where it came from and the
    supported forms),
    ``"tool-missing"`` (no npm / node / uv on the ``PATH``),
    ``"unreachable"`` (the registry or index cannot be reached: refused,
    no such host, timed out), ``"not-found"`` (the registry has no such
    package or version), ``"failed"`` (the installer failed otherwise),
    ``"no-entry"`` (installed, but no program to run was found).
    ``output``: the installer's last lines (bounded).
    """

    def __init__(self, reason: str, message: str, *, output: Sequence[str] = (), registry: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.output = list(output)
        self.registry = registry


@dataclass(frozen=True)
class Registries:
    """The package registry mirrors of the host (``hostd serve --npm-registry / --python-index``).

    ``None``: the tool's own default (``https://registry.npmjs.org/``, PyPI),
    or whatever hostd's own environment says (``npm_config_registry``,
    ``UV_INDEX_URL``: :meth:`from_environment`).
    """

    npm: str | None = None
    python: str | None = None

    @classmethod
    def from_environment(
        cls, npm: str | None, python: str | None, environ: Mapping[str, str] = os.environ
    ) -> Registries:
        """The flags' values, else ``npm_config_registry`` / ``UV_INDEX_URL`` (``PIP_INDEX_URL``) of ``environ``."""
        env_npm = environ.get("npm_config_registry") or environ.get("NPM_CONFIG_REGISTRY")
        env_python = environ.get("UV_INDEX_URL") or environ.get("PIP_INDEX_URL")
        return cls(npm=npm or env_npm or None, python=python or env_python or None)


@dataclass(frozen=True)
class PackageLaunch:
    """What a launch asks to fetch and run.

    ``manager``: ``"npm"`` or ``"uv"``. ``packages``: the requested specs as
    written, the one that provides the program first (``"@scope/x@1.2.3"``,
    ``"mcp-server-time==2026.10.19"``). ``program``: npm: the bin to run
    (``""``: the package's own); uv: the command (a console script, ``python``
    or a ``.py`` file). ``args``: the server's arguments. ``python``: ``uvx
    --python``'s value as a plain version (``"3.12"``), else ``None``.
    :func:`parse_package_launch` builds it from validated operands only
    (:func:`npm_spec`, :func:`python_spec`): ``name@1.2.3`` / ``name==1.2.3``,
    or a bare name (unpinned, see :attr:`unpinned`).
    """

    manager: Manager
    packages: tuple[str, ...]
    program: str
    args: tuple[str, ...]
    python: str | None = None

    @property
    def key(self) -> str:
        """16 hex digits naming the environment: the same request finds the same folder."""
        blob = json.dumps([self.manager, list(self.packages), self.program, self.python])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def unpinned(self) -> tuple[str, ...]:
        """The names of the requested packages without an exact version (resolved at preparation, then shown)."""
        if self.manager == "npm":
            return tuple(spec for spec in self.packages if spec.find("@", 1) < 0)
        return tuple(spec.split("[", 1)[0] for spec in self.packages if "==" not in spec)


@dataclass(frozen=True)
class Prepared:
    """A finished preparation (its marker), as :func:`find_prepared` reads it.

    ``root``: the environment folder. ``resolved``: package name -> exact
    version installed (the requested ones; an unpinned request is shown
    here). ``lockfile``: ``"sha256:<hex>"`` of the lock (``package-lock.json``,
    or ``uv pip freeze`` output kept as ``requirements.lock``). ``entry``: the
    argument vector prefix that runs the server (absolute paths).
    """

    manager: Manager
    packages: tuple[str, ...]
    root: str
    resolved: dict[str, str]
    lockfile: str
    entry: tuple[str, ...]
    registry: str | None = None

    def record(self) -> dict[str, str]:
        """What ``launch.prepared`` shows and ``Launch.digest`` covers (flat strings)."""
        return {
            "manager": self.manager,
            "packages": " ".join(self.packages),
            "resolved": " ".join(
                f"{k}@{v}" if self.manager == "npm" else f"{k}=={v}" for k, v in self.resolved.items()
            ),
            "lockfile": self.lockfile,
            "root": self.root,
        }


# -- the package spec grammar ---------------------------------------------------------------
#
# The fault class: *a word of package text reaching an installer as something other than a
# registry package of a known version*. Config ``args``, a bundle's ``mcp_config``, a registry
# entry's arguments and the values of ``--package``/``--from``/``--with`` are attacker text; as an
# installer operand a word could be an option (``--ignore-scripts=false`` re-enables install
# scripts, ``--registry=``/``--index-url=`` swaps the source), a path (``./x.tgz``, ``/abs``,
# ``file:../x``), a URL (``https://.../x.tgz``, ``git+https://...``, ``pkg @ https://...``), a
# hosted-git shorthand (``user/repo``, ``github:user/repo``), an alias (``npm:other@1``) or a range
# (``pkg@>=1``, ``pkg>=1``). Every operand passes :func:`npm_spec` or :func:`python_spec`, which
# accept only a registry name and an exact version (or no version: resolved at preparation and
# shown in ``Prepared.resolved``) and refuse everything else with ``spec-unsupported``.

#: The npm forms hostd installs, named in every refusal.
NPM_FORMS = "npm: name or name@1.2.3 (name: lowercase, optionally @scope/name; name@latest is unpinned)"
#: The Python forms hostd installs, named in every refusal.
PYTHON_FORMS = "python: name or name==1.2.3 (also name[extra]==1.2.3 and uvx's name@1.2.3)"
#: The ``--python`` values hostd accepts (a version request, never a path).
PYTHON_REQUEST_FORMS = "a Python version: 3.12, 3.12.4, python3.12 or cpython3.12"
#: A program a package provides (``npx -p pkg PROG``, ``uvx --from pkg PROG``): a plain name.
PROGRAM_FORMS = "a plain program name (letters, digits, . _ + -; no /, not starting with -)"

_NPM_PART = r"[a-z0-9][a-z0-9._~-]*"
_NPM_NAME = re.compile(rf"(?:@{_NPM_PART}/)?{_NPM_PART}")
_NPM_MAX_NAME = 214
# semver.org's exact version (no leading zeros, optional pre-release and build).
_NUMBER = r"(?:0|[1-9]\d*)"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD = r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
_SEMVER = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?{_BUILD}")
_PY_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_PY_EXTRAS = re.compile(r"\[([^\]]*)\]")
# PEP 440, one exact public version with an optional local label; no wildcard, no spaces, no "v".
_PY_VERSION = re.compile(
    r"(?:\d+!)?\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?", re.I
)
_PY_REQUEST = re.compile(r"(?:c?python[-@]?)?(3(?:\.(?:0|[1-9]\d*)){0,2})", re.I)
_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*")
_MAX_WORD = 256
#: Archive endings an installer reads as a file to unpack (npm: .tgz/.tar.gz/.tar; pip/uv: sdists and wheels).
_ARCHIVES = (".tgz", ".tar.gz", ".tar", ".tar.bz2", ".tar.xz", ".tbz", ".zip", ".whl", ".egg")


class Spec(NamedTuple):
    """One validated package operand (:func:`npm_spec`, :func:`python_spec`).

    ``name``: the registry name as written (npm: with its ``@scope/``). ``version``: the exact
    version, or ``None`` (unpinned: the registry's latest, resolved at preparation and shown).
    ``extras``: Python extras, sorted. ``text``: the operand handed to the installer
    (``name@1.2.3`` / ``name[extra]==1.2.3``, or the bare name).
    """

    name: str
    version: str | None
    extras: tuple[str, ...]
    text: str


def _shown(word: str) -> str:
    return repr(word if len(word) <= 80 else word[:77] + "...")


def _refuse(word: str, where: str, why: str, forms: str) -> PrepareError:
    return PrepareError("spec-unsupported", f"{where} {_shown(word)} is {why}; supported: {forms}")


def _common_refusal(word: str) -> str | None:
    """Why ``word`` is not a registry package at all (an option, URL, path, source, archive), else ``None``."""
    lowered = word.lower()
    if not word:
        return "empty"
    if len(word) > _MAX_WORD:
        return f"longer than {_MAX_WORD} characters"
    if word.startswith("-"):
        return "an option, not a package"
    if "://" in word or lowered.startswith(("git+", "git@", "http:", "https:")) or re.search(r"\s@\s", word):
        return "a URL or git source, not a registry package"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in word):
        return "not one word (spaces or control characters)"
    scheme = re.match(r"([a-z][a-z0-9+.-]*):", lowered)
    if scheme is not None and not re.fullmatch(r"[a-z]", scheme.group(1)):
        what = "an alias of another package" if scheme.group(1) == "npm" else f"a {scheme.group(1)}: source"
        return f"{what}, not a registry package"
    if word.startswith((".", "/", "~", "\\")) or re.match(r"[A-Za-z]:[\\/]", word) or "\\" in word:
        return "a path, not a registry package"
    # The name part, before a version: npm reads "x.tgz@1.0.0" as a file too.
    at = lowered.find("@", 1)
    name = re.split(r"==|\[", lowered if at < 0 else lowered[:at], maxsplit=1)[0]
    if lowered.endswith(_ARCHIVES) or name.endswith(_ARCHIVES):
        return "an archive file, not a registry package"
    return None


def npm_spec(word: str, where: str) -> Spec:
    """``word`` as an npm operand: ``name`` or ``name@<exact semver>`` (``name@latest``: unpinned).

    ``where`` names the tool and field the word came from (``"npx --package"``), for the message.
    The name follows npm's rules for new packages: optional ``@scope/``, lowercase letters,
    digits and ``- . _ ~``, not starting with ``.`` or ``_``, at most 214 characters, not
    ``node_modules``/``favicon.ico``. Raises :class:`PrepareError` (``"spec-unsupported"``; the
    message names the word, ``where`` and :data:`NPM_FORMS`) for anything else: an option, a path,
    a URL, ``git+``/``file:``/``github:`` sources, ``npm:`` aliases, tarballs, ``user/repo``
    shorthand, a range or a tag other than ``latest``. Pure.
    """
    why = _common_refusal(word)
    if why is None:
        at = word.find("@", 1)
        name, version = (word, None) if at < 0 else (word[:at], word[at + 1 :])
        if "/" in name and not name.startswith("@"):
            why = "a hosted-git shorthand (user/repo) or a path, not a registry package"
        elif not _NPM_NAME.fullmatch(name) or len(name) > _NPM_MAX_NAME:
            why = "not an npm package name"
        elif name.rsplit("/", 1)[-1] in ("node_modules", "favicon.ico"):
            why = "a name npm reserves"
        elif version is not None and version != "latest" and not _SEMVER.fullmatch(version):
            why = f"not an exact version ({version!r} is a range, a tag or malformed)"
        else:
            pinned = None if version in (None, "latest") else version
            return Spec(name, pinned, (), name if pinned is None else f"{name}@{pinned}")
    raise _refuse(word, where, why, NPM_FORMS)


def python_spec(word: str, where: str) -> Spec:
    """``word`` as a Python operand: ``name``, ``name[extras]``, ``name==<exact version>`` or uvx's ``name@ver``.

    ``where`` names the tool and field (``"uvx --with"``). ``name@latest`` is unpinned. No
    markers, URLs (``name @ https://...``), paths, archives, ``===``, wildcards (``==1.*``) or
    ranges (``>=``, ``~=``, ``!=``, ``<``, ``,``). The version is also parsed by
    :class:`packaging.version.Version`. Raises :class:`PrepareError` (``"spec-unsupported"``;
    the message names the word, ``where`` and :data:`PYTHON_FORMS`). Pure.
    """
    shape = _common_refusal(word) or _python_shape(word)
    if isinstance(shape, Spec):
        return shape
    raise _refuse(word, where, shape, PYTHON_FORMS)


def _python_shape(word: str) -> Spec | str:
    """The :class:`Spec` of ``word`` (already free of options, URLs, paths), or why it is refused."""
    # Loaded at the first Python operand, not at hostd's start (~10-90 ms of imports).
    from packaging.requirements import InvalidRequirement, Requirement  # noqa: PLC0415
    from packaging.version import InvalidVersion, Version  # noqa: PLC0415

    if ";" in word:
        return "a requirement with an environment marker"
    if "===" in word:
        return "an arbitrary-equality (===) requirement, not an exact version"
    outside = re.sub(r"\[[^\]]*\]", "", word, count=1)  # the extras may hold commas
    if re.search(r"[<>~]|!=|==.*==", outside):
        return "a version range, not an exact version"
    if "," in outside:
        return "a list or a range, not one package of one version"
    match = re.fullmatch(r"([^\[\]=@]+)(\[[^\]]*\])?(?:(==|@)(.*))?", word)
    if match is None:
        return "not a Python package name"
    name, extras_text, operator, version = match.groups()
    if not _PY_NAME.fullmatch(name):
        return "not a Python package name"
    extras: tuple[str, ...] = ()
    if extras_text is not None:
        found = _PY_EXTRAS.fullmatch(extras_text)
        names = [e.strip() for e in found.group(1).split(",")] if found else []
        if not names or not all(_PY_NAME.fullmatch(e) for e in names):
            return "not a Python package name (malformed extras)"
        extras = tuple(sorted(set(names)))
    pinned: str | None = None
    if operator is not None:
        if operator == "@" and version == "latest":
            pinned = None
        elif version.endswith(".*") or "*" in version:
            return "a wildcard version, not an exact version"
        elif not _PY_VERSION.fullmatch(version):
            return f"not an exact version ({version!r})"
        else:
            try:
                Version(version)
            except InvalidVersion:
                return f"not an exact version ({version!r})"
            pinned = version
    head = name + (f"[{','.join(extras)}]" if extras else "")
    text = head if pinned is None else f"{head}=={pinned}"
    try:  # the installers' own grammar (PEP 508) reads the operand as exactly this request
        read = Requirement(text)
    except InvalidRequirement:
        return "not a Python requirement"
    exact = "" if pinned is None else f"=={pinned}"
    if read.url is not None or read.marker is not None or str(read.specifier) != exact:
        return "not one package of one version"
    return Spec(name, pinned, extras, text)


def python_request(word: str, where: str) -> str:
    """``--python``'s value as a plain version (``"3.12"``); :data:`PYTHON_REQUEST_FORMS` only.

    ``python3.12``, ``cpython3.12``, ``cpython-3.12`` and ``3.12.4`` are accepted (Python 3 only);
    a path (``./bin/python``, ``/usr/bin/python3``), a range (``>=3.11``), an implementation
    (``pypy``) or anything else raises :class:`PrepareError` (``"spec-unsupported"``). Pure.
    """
    match = _PY_REQUEST.fullmatch(word)
    if match is None:
        why = "an option" if word.startswith("-") else "a path" if ("/" in word or "\\" in word) else "not a version"
        raise _refuse(word, where, why, PYTHON_REQUEST_FORMS)
    return match.group(1)


def program_name(word: str, where: str, *, script: bool = False) -> str:
    """``word`` if it is a plain program name (:data:`PROGRAM_FORMS`); with ``script``, also a ``.py`` file.

    Raises :class:`PrepareError` (``"spec-unsupported"``) for a path, an option or anything else.
    ``script``: ``uv run``'s command may be the plugin's own ``server.py`` (run by the prepared
    environment's ``python``; it is never an installer operand). Pure.
    """
    if _PROGRAM.fullmatch(word) and len(word) <= _NPM_MAX_NAME:
        return word
    # A script is named by a path (relative to the plugin's folder, or absolute); never an option or URL.
    local = _common_refusal(word) in (None, "a path, not a registry package")
    if script and word.endswith(".py") and not word.startswith("-") and local:
        return word
    forms = PROGRAM_FORMS + (" or a .py script" if script else "")
    why = "an option, not a program" if word.startswith("-") else "not a plain program name"
    raise _refuse(word, where, why, forms)


def _python_list(values: Sequence[str], where: str) -> list[str]:
    """``--with`` values (each may be a comma-separated list, as uv reads it) as validated operands."""
    return [python_spec(s.strip(), where).text for value in values for s in value.split(",")]


# -- which launches name a package --------------------------------------------------------

_NPX_FLAGS = frozenset({"-y", "--yes", "-q", "--quiet", "--no-install", "--prefer-offline", "--prefer-online"})
_UVX_FLAGS = frozenset({"-q", "--quiet", "--isolated", "--no-cache", "--offline", "--refresh", "-n", "--no-progress"})
_UV_RUN_FLAGS = frozenset({"--no-project", "--isolated", "-q", "--quiet", "--no-cache", "--offline", "--no-progress"})
#: uv's own options before its subcommand (``uv -q run``): none changes what is installed.
_UV_GLOBAL_FLAGS = frozenset({"-q", "--quiet", "-v", "--verbose", "--no-cache", "--offline", "-n", "--no-progress"})
#: uv options that move the working folder: a prepared program runs in the plugin's folder instead.
_UV_FOLDERS = ("--directory", "--project")
_PIPX_FLAGS = frozenset({"-q", "--quiet", "-v", "--verbose", "--no-cache"})


def _program_name(path: str) -> str:
    name = os.path.basename(path)
    return name[:-4] if name.lower().endswith(".exe") else name


def parse_package_launch(command: str, args: Sequence[str]) -> PackageLaunch | None:
    """The package ``command`` + ``args`` fetch and run, or ``None`` when they name none.

    Recognised: ``npx``; ``uvx``, ``uv tool run``/``uv tool x`` and ``pipx run`` (prepared with
    uv); ``uv run --with ...``; each after uv's own leading flags (``uv -q run``). ``uv run``
    without ``--with`` (a project or script with its own lock) and ``uv --directory DIR run
    ...`` without ``--with`` name no package: ``None``. Every package operand passes
    :func:`npm_spec` / :func:`python_spec`, every program :func:`program_name`, ``--python``
    :func:`python_request`. Raises :class:`PrepareError`: ``"unsupported"`` for an option of
    these tools that would change what is installed and is not understood here (the message
    names it), ``"spec-unsupported"`` for an operand outside the grammar (the message names the
    word, where it came from and the supported forms), so nothing is prepared wrongly. Pure.
    """
    name = _program_name(command)
    if name == "npx":
        return _parse_npx(list(args))
    if name == "uvx":
        return _parse_uvx(list(args), "uvx")
    if name == "pipx":
        return _parse_pipx(list(args))
    if name == "uv":
        return _parse_uv(list(args))
    return None


def _value(words: list[str], index: int, option: str) -> tuple[str, int]:
    """The value of ``option`` at ``words[index]`` (``--opt=v`` or ``--opt v``) and the next index."""
    word = words[index]
    if word.startswith(option + "="):
        return word.split("=", 1)[1], index + 1
    if index + 1 >= len(words):
        raise PrepareError("unsupported", f"{option} has no value")
    return words[index + 1], index + 2


def _option(word: str, long: str, short: str = "") -> str:
    """The spelling of option ``long`` (or its ``short`` alias) that ``word`` starts, for ``_value``; "" if none.

    One rule for every option of npx, uvx and uv run: ``--opt``, ``--opt=v`` or the short alias."""
    if word == long or word.startswith(long + "="):
        return long
    return short if short and word == short else ""


def _options(
    words: list[str], tool: str, flags: frozenset[str], valued: dict[str, str], *, end_mark: bool, operand: str
) -> tuple[dict[str, list[str]], int]:
    """The leading options of ``words`` (one launcher's arguments) and the index of its first operand.

    ``valued`` maps each option that takes a value (``--opt v`` / ``--opt=v``) to its short alias
    (``""``: none); the result maps it to its values, in order. ``flags`` are the options without a
    value that change nothing installed. ``end_mark``: ``--`` ends the options (npx, uv run).
    Raises :class:`PrepareError` (``"unsupported"``) naming ``tool`` for any other option, or when
    no ``operand`` (what the launcher runs) follows them."""
    found: dict[str, list[str]] = {long: [] for long in valued}
    i = 0
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if end_mark and word == "--":
            i += 1
            break
        for long, short in valued.items():
            if spelling := _option(word, long, short):
                value, i = _value(words, i, spelling)
                found[long].append(value)
                break
        else:
            if word not in flags:
                if any(_option(word, folder) for folder in _UV_FOLDERS):
                    raise PrepareError(
                        "unsupported",
                        f"{tool} option {word.split('=', 1)[0]!r} cannot be prepared: a prepared program runs in "
                        "the plugin's folder; name the script by its absolute path instead",
                    )
                raise PrepareError("unsupported", f"{tool} option {word!r} cannot be prepared")
            i += 1
    if i >= len(words):
        raise PrepareError("unsupported", f"{tool} names no {operand}")
    return found, i


def _parse_npx(words: list[str]) -> PackageLaunch:
    found, i = _options(words, "npx", _NPX_FLAGS, {"--package": "-p"}, end_mark=True, operand="package")
    packages = tuple(npm_spec(value, "npx --package").text for value in found["--package"])
    first, rest = words[i], tuple(words[i + 1 :])
    if packages:  # npx -p pkg bin args: the bin comes from the packages
        return PackageLaunch("npm", packages, program_name(first, "npx command"), rest)
    return PackageLaunch("npm", (npm_spec(first, "npx package").text,), "", rest)


def _parse_uvx(words: list[str], tool: str) -> PackageLaunch:
    valued = {"--from": "", "--with": "-w", "--python": "-p"}
    found, i = _options(words, tool, _UVX_FLAGS, valued, end_mark=False, operand="package")
    target, rest = words[i], tuple(words[i + 1 :])
    withs = _python_list(found["--with"], f"{tool} --with")
    python = _last(found["--python"])
    request = python_request(python, f"{tool} --python") if python is not None else None
    source = _last(found["--from"])
    if source is None:
        # uvx pkg==1.0 / pkg@1.0 / pkg[extra]==1.0: the command is the package's name.
        spec = python_spec(target, f"{tool} package")
        return PackageLaunch("uv", (spec.text, *withs), spec.name, rest, request)
    spec = python_spec(source, f"{tool} --from")
    return PackageLaunch("uv", (spec.text, *withs), program_name(target, f"{tool} command"), rest, request)


def _parse_pipx(words: list[str]) -> PackageLaunch | None:
    """``pipx run [--spec SPEC] [--python V] app args``: the same request as ``uvx [--from SPEC] app args``."""
    if not words or words[0] != "run":
        if words and words[0].startswith("-"):
            raise PrepareError("unsupported", f"pipx option {words[0]!r} cannot be prepared")
        return None  # pipx install/list...: not a launch that runs a package
    valued = {"--spec": "", "--python": ""}
    found, i = _options(words[1:], "pipx run", _PIPX_FLAGS, valued, end_mark=False, operand="package")
    i += 1
    target, rest = words[i], tuple(words[i + 1 :])
    python = _last(found["--python"])
    request = python_request(python, "pipx run --python") if python is not None else None
    source = _last(found["--spec"])
    if source is None:
        spec = python_spec(target, "pipx run package")
        return PackageLaunch("uv", (spec.text,), spec.name, rest, request)
    spec = python_spec(source, "pipx run --spec")
    return PackageLaunch("uv", (spec.text,), program_name(target, "pipx run command"), rest, request)


def _parse_uv(words: list[str]) -> PackageLaunch | None:
    """``uv [flags] [--directory D|--project D] run ...`` / ``uv [flags] tool run|x ...``."""
    i, folder = 0, None
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        if spelling := next((f for f in _UV_FOLDERS if _option(word, f)), ""):
            folder, i = spelling, _value(words, i, spelling)[1]
        elif word in _UV_GLOBAL_FLAGS:
            i += 1
        else:
            raise PrepareError("unsupported", f"uv option {word!r} before the subcommand cannot be prepared")
    sub = words[i:]
    launch: PackageLaunch | None
    if len(sub) >= 2 and sub[0] == "tool" and sub[1] in ("run", "x"):
        launch = _parse_uvx(sub[2:], "uv tool run")
    elif sub[:1] == ["run"]:
        launch = _parse_uv_run(sub[1:])
    else:
        return None
    if launch is not None and folder is not None:
        raise PrepareError(
            "unsupported",
            f"uv option {folder!r} cannot be prepared: a prepared program runs in the plugin's folder; "
            "name the script by its absolute path instead",
        )
    return launch


def _parse_uv_run(words: list[str]) -> PackageLaunch | None:
    if not any(w == "-w" or w.startswith("--with") for w in words):
        return None  # uv run of a project or a script: its own lock, not a named package
    valued = {"--with": "-w", "--python": "-p"}
    found, i = _options(words, "uv run", _UV_RUN_FLAGS, valued, end_mark=True, operand="command")
    if not found["--with"]:
        return None  # "--with" is the script's own argument (uv run server.py --with x)
    withs = tuple(_python_list(found["--with"], "uv run --with"))
    python = _last(found["--python"])
    request = python_request(python, "uv run --python") if python is not None else None
    command = program_name(words[i], "uv run command", script=True)
    return PackageLaunch("uv", withs, command, tuple(words[i + 1 :]), request)


def _last(values: list[str]) -> str | None:
    """The value of an option given ``values`` (the last one wins, as in uv); ``None`` when not given."""
    return values[-1] if values else None


# -- finding a finished preparation ---------------------------------------------------------


def plugin_root(state_dir: Path, plugin_id: str) -> Path:
    """``<state>/prepared/<id>``: every environment and the installer caches of one plugin."""
    return state_dir / "prepared" / plugin_id


def find_prepared(state_dir: Path, plugin_id: str, launch: PackageLaunch) -> Prepared | None:
    """The finished preparation of ``launch`` for ``plugin_id``, or ``None`` (never prepared, or unfinished).

    Blocking (reads the marker). A marker that cannot be read counts as none.
    """
    root = plugin_root(state_dir, plugin_id) / launch.key
    try:
        data = json.loads((root / MARKER).read_text())
        if data.get("packages") != list(launch.packages) or data.get("manager") != launch.manager:
            return None
        return Prepared(
            manager=launch.manager,
            packages=launch.packages,
            root=str(root),
            resolved={str(k): str(v) for k, v in data["resolved"].items()},
            lockfile=str(data["lockfile"]),
            entry=tuple(str(w) for w in data["entry"]),
            registry=data.get("registry"),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# -- running the installers -------------------------------------------------------------------

#: What an installer keeps of hostd's environment: finding programs, the user's home (npm reads
#: ``~/.npmrc``), locale, and what a real network needs (proxy, CA). Nothing else passes.
_INSTALLER_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
)


def installer_environment(base: Mapping[str, str], **extra: str) -> dict[str, str]:
    """The trimmed environment of an installer: :data:`_INSTALLER_ENV` of ``base``, plus ``extra``."""
    env = {k: base[k] for k in _INSTALLER_ENV if k in base}
    env.update(extra)
    return env


async def _run(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> tuple[int, list[str]]:
    """Run ``argv`` (no shell, stdin closed); return its exit code and its output's lines, bounded.

    stdout and stderr are read together; at most :data:`OUTPUT_BOUND` bytes are
    kept (the first 8 KiB and the last rest). Cancellation ends the process
    (SIGKILL; npm's and uv's children die with their pipes) and waits for it.
    """
    head = bytearray()
    tail = bytearray()
    dropped = False
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        with trio.fail_after(INSTALL_TIMEOUT):
            async with process.stdout:
                while chunk := await process.stdout.receive_some(65536):
                    if len(head) < 8192:
                        take = 8192 - len(head)
                        head += chunk[:take]
                        chunk = chunk[take:]
                    tail += chunk
                    if len(tail) > OUTPUT_BOUND - 8192:
                        del tail[: len(tail) - (OUTPUT_BOUND - 8192)]
                        dropped = True
            code = await process.wait()
    except BaseException:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                try:
                    os.killpg(process.pid, 9)
                except ProcessLookupError:
                    process.kill()
            await process.wait()
        raise
    lines = head.decode(errors="replace").splitlines()
    if dropped:
        lines.append("...")
    lines += tail.decode(errors="replace").splitlines()
    return code, [line.rstrip() for line in lines if line.strip()]


#: Words of npm's and uv's output that say the registry was not reached.
_UNREACHABLE = re.compile(
    r"ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|ECONNRESET|EHOSTUNREACH|ENETUNREACH|"
    r"[Cc]onnection refused|dns error|[Ff]ailed to connect|timed out|[Nn]etwork is unreachable|"
    r"tcp connect error|error sending request|certificate|_CERT_|UnknownIssuer"
)
_NOT_FOUND = re.compile(r"E404|ETARGET|No matching version|not found in the package registry|No solution found")


def _failure(what: str, code: int, output: list[str], registry: str) -> PrepareError:
    """A precise :class:`PrepareError` from an installer's exit and output."""
    # The most telling line: npm's "request to URL failed, reason: ...", else uv's innermost cause (the last).
    hits = [line for line in output if _UNREACHABLE.search(line)]
    cause = next((line for line in hits if "reason:" in line), hits[-1] if hits else None)
    if cause is not None:
        said = cause.strip().removeprefix("npm error ").removeprefix("cause: ")
        return PrepareError(
            "unreachable", f"{what}: cannot reach {registry}: {said}", output=output[-20:], registry=registry
        )
    # npm says "npm error code ETARGET" first, then the sentence ("No matching version found for ...").
    hits = [line for line in output if _NOT_FOUND.search(line)]
    cause = next((line for line in hits if not re.search(r"error (?:code|errno) ", line)), hits[0] if hits else None)
    if cause is not None:
        return PrepareError(
            "not-found",
            f"{what}: {registry} does not serve it: {cause.strip().removeprefix('npm error ')}",
            output=output[-20:],
            registry=registry,
        )
    # npm ends with "A complete log of this run can be found in ...": the cause is an earlier line.
    telling = [line for line in output if "error" in line.lower() and "complete log" not in line]
    last = telling[-1] if telling else output[-1] if output else "no output"
    return PrepareError(
        "failed", f"{what}: the installer exited {code}: {last}", output=output[-20:], registry=registry
    )


def _sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _npm_name(spec: str) -> str:
    """``@scope/x@1.2`` -> ``@scope/x``; ``x@^1`` -> ``x``; ``x`` -> ``x``."""
    at = spec.find("@", 1)
    return spec if at < 0 else spec[:at]


def _npm_entry(root: Path, launch: PackageLaunch, node: str) -> tuple[str, ...]:
    """The argv prefix that runs the package's bin (``node <real script>``, or the bin itself)."""
    package = _npm_name(launch.packages[0])
    meta = json.loads((root / "node_modules" / package / "package.json").read_text())
    bins = meta.get("bin") or {}
    if isinstance(bins, str):
        bins = {package.rsplit("/", 1)[-1]: bins}
    wanted = launch.program or package.rsplit("/", 1)[-1]
    if wanted not in bins and not launch.program and len(bins) == 1:
        wanted = next(iter(bins))
    if wanted not in bins:
        # npx -p a -p b prog: the bin may come from any of the packages.
        link = root / "node_modules" / ".bin" / wanted
        if not link.exists():
            raise PrepareError("no-entry", f"{package} has no program {wanted!r} (bins: {', '.join(sorted(bins))})")
        script = os.path.realpath(link)
    else:
        script = os.path.realpath(root / "node_modules" / package / bins[wanted])
    with open(script, "rb") as fh:
        first = fh.readline(200)
    if script.endswith((".js", ".mjs", ".cjs")) or (first.startswith(b"#!") and b"node" in first):
        return (node, script)
    return (script,)


def _uv_entry(root: Path, launch: PackageLaunch) -> tuple[str, ...]:
    venv_bin = root / "venv" / "bin"
    program = launch.program
    if program in ("python", "python3"):
        return (str(venv_bin / "python"),)
    if program.endswith(".py"):
        return (str(venv_bin / "python"), program)
    script = venv_bin / program
    if not script.is_file():
        raise PrepareError("no-entry", f"{launch.packages[0]} installed no program {program!r} in {venv_bin}")
    # Run by the venv's python, not by its #! line: for a long folder name uv writes a /bin/sh
    # trampoline (still valid Python) whose exec of the interpreter is no part of the runtime chain.
    return (str(venv_bin / "python"), str(script))


def _freeze_versions(freeze: str) -> dict[str, str]:
    """``uv pip freeze`` text -> normalised name -> version."""
    found: dict[str, str] = {}
    for line in freeze.splitlines():
        if "==" in line:
            name, version = line.split("==", 1)
            found[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return found


def _requested_name(spec: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\[=<>!~@ ;]", spec.strip(), maxsplit=1)[0]).lower()


async def prepare(
    state_dir: Path,
    plugin_id: str,
    launch: PackageLaunch,
    *,
    registries: Registries,
    path: str,
    progress: Progress,
    environ: Mapping[str, str] = os.environ,
    prune: bool = True,
) -> Prepared:
    """Install ``launch``'s packages for ``plugin_id`` (see the module docstring) and return the result.

    ``path``: the ``PATH`` the package tools are looked up on (npm, node, uv).
    ``progress`` is awaited once per step (4 steps). ``prune``: delete the
    plugin's other environments afterwards (``False`` while an instance may
    still run from one). Reuses a finished
    environment for the same request (no network then). Raises
    :class:`PrepareError`. Cancellation ends the installer and deletes the
    unfinished folder (shielded), so nothing half-installed is ever found.
    """
    found = await trio.to_thread.run_sync(find_prepared, state_dir, plugin_id, launch)
    total = 4
    if found is not None:
        await progress(total, total, f"already prepared: {found.record()['resolved']}")
        return found
    base = plugin_root(state_dir, plugin_id)
    root = base / launch.key
    try:
        await progress(1, total, f"preparing {' '.join(launch.packages)} ({launch.manager})")
        await trio.to_thread.run_sync(_fresh_folder, root)
        install = _prepare_npm if launch.manager == "npm" else _prepare_uv
        prepared = await install(_Job(base, root, launch, registries, path, progress, environ))
        await trio.to_thread.run_sync(_write_marker, root, prepared)
    except trio.TooSlowError:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, root, True)
        raise PrepareError(
            "failed", f"preparing {' '.join(launch.packages)}: an installer did not finish within {INSTALL_TIMEOUT:g} s"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # What the installer left is not what it should be (no package.json, no version...).
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, root, True)
        raise PrepareError("failed", f"preparing {' '.join(launch.packages)}: {type(exc).__name__}: {exc}") from None
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(shutil.rmtree, root, True)
        raise
    await progress(total, total, f"prepared {prepared.record()['resolved']}")
    if prune:
        await trio.to_thread.run_sync(_remove_others, base, launch.key)
    return prepared


def _fresh_folder(root: Path) -> None:
    """An empty ``root`` (a leftover of an unfinished preparation is deleted), parents ``0700``."""
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.mkdir(mode=0o755)


def _write_marker(root: Path, prepared: Prepared) -> None:
    data = {
        "manager": prepared.manager,
        "packages": list(prepared.packages),
        "resolved": prepared.resolved,
        "lockfile": prepared.lockfile,
        "entry": list(prepared.entry),
        "registry": prepared.registry,
    }
    partial = root / (MARKER + ".partial")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, root / MARKER)


def _remove_others(base: Path, keep: str) -> None:
    """Delete this plugin's environments other than ``keep`` (an earlier version's); keep the caches."""
    for entry in base.iterdir():
        if entry.name not in (keep, "cache") and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


def _tool(name: str, path: str, launch: PackageLaunch) -> str:
    found = shutil.which(name, path=path)
    if found is None:
        raise PrepareError(
            "tool-missing", f"cannot prepare {' '.join(launch.packages)}: {name} not found on PATH={path}"
        )
    return os.path.abspath(found)


def _npm_environment(base: Path, registry: str, path: str, environ: Mapping[str, str]) -> dict[str, str]:
    """npm's trimmed environment: the plugin's own cache under ``base``, the registry, short retries."""
    return installer_environment(
        {**environ, "PATH": path},
        npm_config_cache=str(base / "cache" / "npm"),
        npm_config_registry=registry,
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
        # A registry that refuses or does not answer fails in seconds, not after npm's minute of retries.
        npm_config_fetch_retries="1",
        npm_config_fetch_retry_mintimeout="1000",
        npm_config_fetch_retry_maxtimeout="5000",
        npm_config_fetch_timeout="60000",
    )


def bundled_js_helpers(venv: Path) -> list[Path]:
    """Folders of a Python environment holding a JavaScript helper whose npm dependencies are not installed.

    A member of the "fetches packages at run time" class inside a Python package: readabilipy (used by
    mcp-server-fetch) ships ``javascript/package.json`` and runs ``npm install`` there at its first
    use, which a prepared, read-only environment refuses (and which needs the network). Such a folder
    has a ``package.json`` with ``dependencies`` and no ``node_modules`` beside it. Blocking.
    """
    found: list[Path] = []
    for lib in sorted(venv.glob("lib/python*/site-packages")):
        for folder, dirs, files in os.walk(lib):
            dirs[:] = [d for d in dirs if d not in ("node_modules", "__pycache__")]
            if "package.json" not in files or "node_modules" in os.listdir(folder):
                continue
            try:
                meta = json.loads((Path(folder) / "package.json").read_text())
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("dependencies"):
                found.append(Path(folder))
    return found


class _Job(NamedTuple):
    """What one installer (:func:`_prepare_npm`, :func:`_prepare_uv`) needs: the plugin's folder
    ``base``, the empty environment folder ``root`` it fills, the request, where packages come
    from, the ``PATH`` the tools are found on, the progress callback and the caller's environment.
    """

    base: Path
    root: Path
    launch: PackageLaunch
    registries: Registries
    path: str
    progress: Progress
    environ: Mapping[str, str]


async def _prepare_npm(job: _Job) -> Prepared:
    base, root, launch, registries, path, progress, environ = job
    npm = _tool("npm", path, launch)
    node = _tool("node", path, launch)
    registry = registries.npm or "https://registry.npmjs.org/"
    env = _npm_environment(base, registry, path, environ)
    (root / "package.json").write_text('{"name": "hostd-prepared", "private": true}\n')
    await progress(2, 4, f"npm install {' '.join(launch.packages)} from {registry}")
    argv = [npm, "install", "--prefix", str(root), "--ignore-scripts", "--no-save", "--package-lock=true"]
    argv += ["--omit=dev", "--no-audit", "--no-fund", *launch.packages]
    code, output = await _run(argv, env, str(root))
    what = f"npm install {' '.join(launch.packages)}"
    if code != 0:
        raise _failure(what, code, output, registry)
    await progress(3, 4, "recording what was installed")
    # --no-save keeps package.json as written; the lock still records every installed package.
    resolved: dict[str, str] = {}
    for spec in launch.packages:
        name = _npm_name(spec)
        meta = json.loads((root / "node_modules" / name / "package.json").read_text())
        resolved[name] = str(meta["version"])
    lock = root / "node_modules" / ".package-lock.json"
    if not lock.is_file():
        lock = root / "package-lock.json"
    entry = _npm_entry(root, launch, node)
    return Prepared("npm", launch.packages, str(root), resolved, _sha256(lock), entry, registry)


async def _prepare_uv(job: _Job) -> Prepared:
    base, root, launch, registries, path, progress, environ = job
    uv = _tool("uv", path, launch)
    registry = registries.python or "https://pypi.org/simple"
    extra = {
        "UV_CACHE_DIR": str(base / "cache" / "uv"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        "UV_HTTP_TIMEOUT": "30",
        "UV_HTTP_RETRIES": "1",
    }
    if registries.python is not None:
        extra["UV_INDEX_URL"] = registries.python
    env = installer_environment({**environ, "PATH": path}, **extra)
    venv = root / "venv"
    what = f"uv pip install {' '.join(launch.packages)}"
    argv = [uv, "venv", "--quiet", str(venv)]
    if launch.python is not None:
        argv += ["--python", launch.python]
    code, output = await _run(argv, env, str(root))
    if code != 0:
        raise PrepareError(
            "failed", f"uv venv for {' '.join(launch.packages)} exited {code}: " + " | ".join(output[-3:])
        )
    await progress(2, 4, f"{what} from {registry}")
    python = str(venv / "bin" / "python")
    code, output = await _run(
        [uv, "pip", "install", "--python", python, "--compile-bytecode", *launch.packages], env, str(root)
    )
    if code != 0:
        raise _failure(what, code, output, registry)
    await progress(3, 4, "recording what was installed")
    code, output = await _run([uv, "pip", "freeze", "--python", python], env, str(root))
    if code != 0:
        raise PrepareError("failed", f"uv pip freeze exited {code}: " + " | ".join(output[-3:]))
    freeze = "\n".join(output) + "\n"
    helpers = await trio.to_thread.run_sync(bundled_js_helpers, venv)
    npm = shutil.which("npm", path=path)
    for helper in helpers:
        if npm is None:
            break  # without npm the package falls back by itself
        npm_registry = registries.npm or "https://registry.npmjs.org/"
        await progress(3, 4, f"npm install in {helper.relative_to(root)} (a JavaScript helper of the package)")
        argv = [npm, "install", "--ignore-scripts", "--omit=dev", "--no-audit", "--no-fund", "--package-lock=true"]
        code, output = await _run(argv, _npm_environment(base, npm_registry, path, environ), str(helper))
        if code != 0:
            raise _failure(f"npm install in {helper.relative_to(root)}", code, output, npm_registry)
        lock = helper / "package-lock.json"
        if lock.is_file():
            freeze += f"# npm {helper.relative_to(root)} {_sha256(lock)}\n"
    (root / "requirements.lock").write_text(freeze)
    versions = _freeze_versions(freeze)
    resolved = {
        _requested_name(spec): versions[_requested_name(spec)]
        for spec in launch.packages
        if _requested_name(spec) in versions
    }
    entry = _uv_entry(root, launch)
    return Prepared("uv", launch.packages, str(root), resolved, _sha256(root / "requirements.lock"), entry, registry)
