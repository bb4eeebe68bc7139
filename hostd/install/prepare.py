"""Install-time preparation: a launch that names a package runs from an environment of its own.

The fault class this module closes: *a plugin whose launch fetches code at run
time* (``npx -y pkg@ver``, ``uvx --from pkg==ver cmd``, ``uv run --with pkg``,
``deno run -A npm:pkg@ver``).
Such a start needs the network and a package cache, so it fails under
``--sandbox strict`` (after a DNS timeout), in a fresh home (no ``~/.npm``), or
behind a firewall, and what runs can change between two starts (a dependency
range resolved again). Members handled here: npx (``-y``/``--yes``,
``--package``/``-p``, scoped and unscoped names, pinned or not), uvx and ``uv
tool run`` (``--from``, ``--with``, ``--python``, ``pkg==ver`` and
``pkg@ver``), ``pipx run`` (``--spec``; prepared with uv, as uvx), ``uv run
--with`` (a ``python``/script/console-script command), each also after uv's own
flags (``uv -q run``), deno's ``npm:`` and ``jsr:`` modules (``deno run
[permission flags] npm:name@1.2.3[/sub]`` or ``jsr:@scope/name@1.2.3``, ``deno``
alone, ``deno x`` and ``dx``; any other deno option of such a launch, a URL
module or an inexact version is refused; a local script is no package launch).

The package spec grammar: text from a config's ``args``, a bundle's
``mcp_config`` or a registry ``server.json`` reaches npm or uv only as
validated operands after ``--`` (:func:`npm_spec`, :func:`python_spec`): a
registry name plus an exact version (npm ``name@1.2.3``, Python ``name==1.2.3``,
also ``name[extra]`` and uvx's ``name@1.2.3``), or a bare name (``name@latest``),
which the preparation resolves and shows (``Prepared.resolved``,
:attr:`PackageLaunch.unpinned`). Paths, URLs, ``git+``/``file:``/``github:``
sources, ``npm:`` aliases, tarballs and wheels, ``user/repo`` shorthand,
ranges, markers and any word starting with ``-`` are refused
(``spec-unsupported``, naming the word, the tool and field it came from, and
the supported forms); so are a program that is not a plain name
(:func:`program_name`) and a ``--python`` that is not a version
(:func:`python_request`: ``3.12``, never a path). An option of these tools
that would change what is installed is refused as ``unsupported``.

``plugins/prepare {id}`` (:func:`hostd.host.setup_methods.prepare`) calls
:func:`prepare`: it installs exactly the named packages into
``<state>/prepared/<id>/<key>/`` (npm: ``npm install --prefix``; Python:
``uv venv`` + ``uv pip install``; deno: ``deno install --entrypoint
--no-config --lock`` with ``DENO_DIR`` inside the environment), each with a
cache of its own under ``<state>/prepared/<id>/cache`` or in the environment
(never the user's ``~/.npm``, uv or deno cache, never a folder a plugin can
write), and writes a marker (:data:`MARKER`) last. A
folder without the marker is a preparation that did not finish (cancelled,
failed, hostd killed): it is never used, and the next preparation deletes it.
At run time :func:`find_prepared` finds the marker and the launch becomes the
environment's entry point (``node <root>/node_modules/<pkg>/<bin>``,
``<root>/venv/bin/<script>``, or ``deno run --no-config --cached-only --frozen
--lock=<root>/deno.lock [flags] <module>`` with ``DENO_DIR=<root>/deno``, which
:attr:`Prepared.env` carries): no network, no package tool, no shared cache.

The installers run without a shell, with a trimmed environment
(:func:`installer_environment`: ``PATH``, ``HOME``, locale, proxy and CA
variables, the registry and the cache; deno gets no ``HOME``), npm with
``--ignore-scripts`` and deno without ``--allow-scripts`` (a package's install
scripts never run), and their output is bounded
(:data:`OUTPUT_BOUND`). A registry mirror set once for the host
(:class:`Registries`) applies to every preparation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import trio

from sandbox.environment import EnvPolicy
from sandbox.launch import LaunchError, resolve_launch
from sandbox.policy import IsolationPolicy, runtime_read_paths
from sandbox.process import SandboxedProcess, spawn
from sandbox.watchdog import watch

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
#: Bytes an installer may allocate beneath the folders it may write (environment, caches, HOME, TMPDIR).
INSTALL_DISK_BYTES = 4 * 1024**3

Manager = Literal["npm", "uv", "deno"]
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

    ``None``: the tool's own default (``https://registry.npmjs.org/``, PyPI,
    ``https://jsr.io/``), or whatever hostd's own environment says
    (``npm_config_registry``, ``UV_INDEX_URL``, ``JSR_URL``: :meth:`from_environment`).
    """

    npm: str | None = None
    python: str | None = None
    jsr: str | None = None

    @classmethod
    def from_environment(
        cls, npm: str | None, python: str | None, environ: Mapping[str, str] = os.environ
    ) -> Registries:
        """The flags' values, else ``npm_config_registry`` / ``UV_INDEX_URL`` (``PIP_INDEX_URL``) of ``environ``.

        JSR (deno's ``jsr:`` modules) has no flag: ``JSR_URL`` of ``environ``, as deno reads it."""
        env_npm = environ.get("npm_config_registry") or environ.get("NPM_CONFIG_REGISTRY")
        env_python = environ.get("UV_INDEX_URL") or environ.get("PIP_INDEX_URL")
        return cls(npm=npm or env_npm or None, python=python or env_python or None, jsr=environ.get("JSR_URL") or None)


@dataclass(frozen=True)
class PackageLaunch:
    """What a launch asks to fetch and run.

    ``manager``: ``"npm"``, ``"uv"`` or ``"deno"``. ``packages``: the
    requested specs as written, the one that provides the program first
    (``"@scope/x@1.2.3"``, ``"mcp-server-time==2026.10.19"``,
    ``"npm:@scope/x@1.2.3"``). ``program``: npm: the bin to run (``""``: the
    package's own); uv: the command (a console script, ``python`` or a
    ``.py`` file); deno: the subcommand (``"run"`` or ``"x"``). ``args``: the
    server's arguments. ``python``: ``uvx --python``'s value as a plain
    version (``"3.12"``), else ``None``. ``flags``: deno: its permission flags
    as written (``("-A",)``), which run before the module; empty for npm and
    uv. :func:`parse_package_launch` builds it from validated operands only
    (:func:`npm_spec`, :func:`python_spec`, deno's :func:`_deno_package`):
    ``name@1.2.3`` / ``name==1.2.3``, or a bare name (unpinned, see :attr:`unpinned`).
    """

    manager: Manager
    packages: tuple[str, ...]
    program: str
    args: tuple[str, ...]
    python: str | None = None
    flags: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """16 hex digits naming the environment: the same request finds the same folder."""
        fields: list[object] = [self.manager, list(self.packages), self.program, self.python]
        if self.flags:  # deno's flags are part of the prepared entry: other flags, another environment
            fields.append(list(self.flags))
        blob = json.dumps(fields)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def unpinned(self) -> tuple[str, ...]:
        """The names of the requested packages without an exact version (resolved at preparation, then shown)."""
        if self.manager == "npm":
            return tuple(spec for spec in self.packages if spec.find("@", 1) < 0)
        if self.manager == "deno":
            return tuple(spec for spec in self.packages if not _is_pinned("deno", spec))
        return tuple(spec.split("[", 1)[0] for spec in self.packages if "==" not in spec)


@dataclass(frozen=True)
class Prepared:
    """A finished preparation (its marker), as :func:`find_prepared` reads it.

    ``root``: the environment folder. ``resolved``: package name -> exact
    version installed (the requested ones; an unpinned request is shown
    here). ``lockfile``: ``"sha256:<hex>"`` of the lock (``package-lock.json``,
    or the installed distributions kept as ``requirements.lock``). ``entry``: the
    argument vector prefix that runs the server (absolute paths). ``registry``:
    where the packages came from. ``unpinned``: the requested specs that named no
    exact version (the installer resolved them; ``resolved`` says to what).
    ``build``: source builds were allowed (a build backend may have run, sandboxed).
    ``env``: variables the entry needs, set by the host over the manifest's (deno:
    ``DENO_DIR`` inside ``root``; empty for npm and uv).
    """

    manager: Manager
    packages: tuple[str, ...]
    root: str
    resolved: dict[str, str]
    lockfile: str
    entry: tuple[str, ...]
    registry: str | None = None
    unpinned: tuple[str, ...] = ()
    build: bool = False
    env: Mapping[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, str]:
        """What ``launch.prepared`` shows and ``Launch.digest`` covers (flat strings).

        ``manager``, ``packages``, ``resolved`` (``name@version`` / ``name==version``, space
        separated), ``lockfile``, ``root``, ``registry``, ``unpinned`` (space separated, may be
        empty) and ``build`` (``"allowed"`` or ``"refused"``): the approval names every package
        preparation installs, where from, and whether a build could run.
        """
        return {
            "manager": self.manager,
            "packages": " ".join(self.packages),
            "resolved": " ".join(f"{k}=={v}" if self.manager == "uv" else f"{k}@{v}" for k, v in self.resolved.items()),
            "lockfile": self.lockfile,
            "root": self.root,
            "registry": self.registry or "",
            "unpinned": " ".join(self.unpinned),
            "build": "allowed" if self.build else "refused",
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
    uv); ``uv run --with ...``; each after uv's own leading flags (``uv -q run``); ``deno run``
    (and ``deno`` alone) of an ``npm:`` or ``jsr:`` module, ``deno x`` and ``dx``
    (:func:`_parse_deno`). ``uv run`` without ``--with`` (a project or script with its own
    lock) and ``uv --directory DIR run ...`` without ``--with`` name no package: ``None``.
    Every package operand passes :func:`npm_spec` / :func:`python_spec`, every program
    :func:`program_name`, ``--python`` :func:`python_request`. Raises :class:`PrepareError`:
    ``"unsupported"`` for an option of these tools that would change what is installed and is
    not understood here (the message names it), ``"spec-unsupported"`` for an operand outside
    the grammar (the message names the word, where it came from and the supported forms), so
    nothing is prepared wrongly. Pure.
    """
    name = _program_name(command)
    if name == "deno":
        return _parse_deno(list(args))
    if name == "dx":
        return _parse_deno(["x", *args])
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


#: deno's flags accepted in a prepared launch: its permission flags and quiet output. They only narrow
#: deno's own sandbox (hostd's sandbox is the boundary) and change nothing fetched. A permission flag
#: takes its value with ``=`` only (``--allow-read=/x``); a word after it is the module.
_DENO_FLAGS = frozenset({"-A", "--allow-all", "-q", "--quiet", "--no-prompt"})
_DENO_PERMISSION = re.compile(
    r"(?:--(?:allow|deny)-(?:read|write|import|net|env|sys|run|ffi)|--ignore-(?:env|read)|-[RWINES])(?:=.*)?", re.S
)
#: deno options (of run and x) that take their value as the next word: skipped to find the module
#: (a local script's launch stays a local launch), refused for a package launch.
_DENO_VALUED = frozenset(
    {
        "-c",
        "--config",
        "--import-map",
        "--lock",
        "--cert",
        "--location",
        "--ext",
        "-L",
        "--log-level",
        "--seed",
        "--inspect-publish-uid",
        "--node-modules-linker",
        "--min-dep-age",
        "--preload",
        "--require",
        "--conditions",
        "-p",
        "--package",
    }
)
#: npm's package-name rules: lowercase, URL-safe, at most 214 characters, no leading ``.`` or ``_``.
_NPM_NAME = re.compile(r"(?:@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*")
#: JSR's: ``@scope/name``, lowercase letters, digits and ``-``, not starting with ``-``.
_JSR_NAME = re.compile(r"@[a-z0-9][a-z0-9-]{0,39}/[a-z0-9][a-z0-9-]{0,57}")
#: An exact semver version (a range, a tag or ``latest`` is not one).
_EXACT_VERSION = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
_SUBPATH = re.compile(r"(?:/[A-Za-z0-9._@+-]+)+")


def _parse_deno(words: list[str]) -> PackageLaunch | None:
    """``deno [run|x] [flags] <module> [server args]``: a launch of an ``npm:`` / ``jsr:`` module, or ``None``.

    The fault class: deno fetches an ``npm:``/``jsr:`` module and its unpinned dependencies at the
    first start (with network, after approval). Members: ``deno run``, ``deno`` alone (deno 2 runs
    a module given first), ``deno x`` and ``dx`` (deno's npx; a bare ``name@version`` there is an
    npm package). ``None`` for other subcommands and for a local module (a file in the plugin
    folder, as before). Raises :class:`PrepareError` (``"unsupported"``) for a remote URL module,
    for any deno option of a package launch other than a permission flag (``--config``,
    ``--import-map``, ``--lock``, ``--reload``, ``--cert``, ``--node-modules-dir``, ``--``...: they
    change what is fetched or from where), and for a package name or version that is not exact.
    """
    if words and words[0] in ("run", "x"):
        sub, words = words[0], words[1:]
    elif words and (words[0].startswith("-") or _MODULE_SCHEME.match(words[0])):
        sub = "run"  # deno 2: `deno [flags] <module>` runs the module
    else:
        return None  # deno serve / task / install / a file...: no package this module prepares
    flags: list[str] = []
    refused: str | None = None
    i = 0
    while i < len(words) and words[i].startswith("-"):
        word = words[i]
        i += 1
        if word in _DENO_FLAGS or _DENO_PERMISSION.fullmatch(word):
            flags.append(word)
        elif sub == "x" and word in ("-y", "--yes"):
            pass  # the prepared entry confirms by itself
        else:
            refused = refused or word
            if word in _DENO_VALUED:
                i += 1  # its value is the next word, not the module
    if i >= len(words):
        return None
    module, rest = words[i], tuple(words[i + 1 :])
    scheme = _MODULE_SCHEME.match(module)
    if sub == "run" and (scheme is None or scheme.group(1).lower() == "file"):
        return None  # a local script: the plugin's own file, not a package
    if scheme is not None and scheme.group(1) not in ("npm", "jsr"):
        raise PrepareError(
            "unsupported",
            f"deno module {module!r} is not an npm: or jsr: package (a remote module is fetched at start)",
        )
    if refused is not None:
        raise PrepareError("unsupported", f"deno option {refused!r} cannot be prepared")
    _deno_package(module if scheme is not None else "npm:" + module)
    return PackageLaunch("deno", (module,), sub, rest, flags=tuple(flags))


_MODULE_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def _deno_package(spec: str) -> tuple[str, str | None]:
    """``npm:name@1.2.3/sub`` / ``jsr:@scope/name@1.2.3/sub`` -> (``npm:name`` / ``jsr:@scope/name``, version or None).

    Raises :class:`PrepareError` (``"unsupported"``) for a name that breaks npm's or JSR's rules, a
    version that is not exact (a range, a tag), or a subpath with an empty or ``.``/``..`` part."""
    registry, _, rest = spec.partition(":")
    pattern = _NPM_NAME if registry == "npm" else _JSR_NAME
    name = pattern.match(rest)
    if name is None or (registry == "npm" and len(name.group(0)) > 214):
        raise PrepareError("unsupported", f"deno module {spec!r}: not a valid {registry} package name")
    after = rest[name.end() :]
    version: str | None = None
    if after.startswith("@"):
        found = _EXACT_VERSION.match(after, 1)
        if found is None or (found.end() < len(after) and after[found.end()] != "/"):
            raise PrepareError(
                "unsupported",
                f"deno module {spec!r}: the version is not exact (write {registry}:{name.group(0)}@1.2.3, "
                f"or {registry}:{name.group(0)} to take the latest at preparation)",
            )
        version = found.group(0)
        after = after[found.end() :]
    if after and (not _SUBPATH.fullmatch(after) or any(part in ("", ".", "..") for part in after[1:].split("/"))):
        raise PrepareError("unsupported", f"deno module {spec!r}: {after!r} is not a subpath of the package")
    return f"{registry}:{name.group(0)}", version


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
            unpinned=tuple(str(w) for w in data.get("unpinned", ())),
            build=data.get("build") is True,
            env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# -- running the installers -------------------------------------------------------------------

#: What an installer keeps of hostd's environment: finding programs, locale, and what a real network
#: needs (proxy, CA). Nothing else passes; ``HOME`` is replaced by an empty folder of the plugin's own
#: (:func:`installer_home`), so no ``~/.npmrc``, ``pip.conf``, ``uv.toml`` or ``.gitconfig`` of the user
#: is read: registry mirrors and CA settings come from hostd's own options.
_INSTALLER_ENV = (
    "PATH",
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


@dataclass(frozen=True)
class InstallerSandbox:
    """Where one preparation's installer runs may write, and what else they may read.

    The fault class this closes: *package text that makes an installer run code of the package's
    choice on the host* (an install script turned back on, a ``.pth`` file started by the new
    environment's interpreter, a build backend of a source distribution, an interpreter inside the
    package's folder probed by ``uv venv``). Each member is also closed at its own root (no option
    from package text, wheels only, no interpreter of the new environment started, ``--python`` a
    version hostd resolves); this is the layer under all of them: every installer run (npm, uv, deno,
    the bytecode compile) is a sandboxed process tree (:func:`sandbox.process.spawn`: the shim,
    Landlock, seccomp, user and pid namespaces, rlimits, the tree kill) that may write only
    ``writable`` (the environment folder being filled, the plugin's installer caches, its private
    ``HOME`` and ``TMPDIR``), read the system and runtime folders plus ``readable``, and reach the
    network (registries). ``state_dir``: hostd's state folder (no rule may cover it).
    """

    state_dir: Path
    base: Path
    writable: tuple[str, ...]
    readable: tuple[str, ...] = ()

    @property
    def home(self) -> Path:
        """The installer's ``HOME``: an empty folder of the plugin's own, made anew for each preparation."""
        return self.base / "home"

    @property
    def tmpdir(self) -> Path:
        """The installer's ``TMPDIR``."""
        return self.base / "tmp"

    @property
    def cwd(self) -> Path:
        """The working folder: empty, read-only (no installer finds a project file of anyone's there)."""
        return self.base / "work"

    def policy(self) -> IsolationPolicy:
        """The installer's :class:`~sandbox.policy.IsolationPolicy` (network allowed: the registries)."""
        state = os.path.realpath(self.state_dir)
        return IsolationPolicy(
            landlock=True,
            network="allow",
            seccomp=True,
            max_disk_bytes=INSTALL_DISK_BYTES,
            extra_read_paths=tuple(self.readable),
            extra_write_paths=tuple(os.path.realpath(p) for p in self.writable),
            protected_paths=(state, os.path.realpath(Path.home())),
            # What plugins may write at run time: no link there may redirect an installer's rule.
            writable_paths=(os.path.join(state, "data"), os.path.join(state, "tmp")),
        )


def _remove_installer_folders(sandbox: InstallerSandbox) -> None:
    """Delete the installer's ``HOME``, ``TMPDIR`` and working folder (scratch of one preparation). Blocking."""
    for folder in (sandbox.home, sandbox.tmpdir, sandbox.cwd):
        shutil.rmtree(folder, ignore_errors=True)


def _installer_folders(sandbox: InstallerSandbox) -> None:
    """A fresh empty ``HOME``, ``TMPDIR`` and working folder (mode 0700) for one preparation. Blocking."""
    for folder in (sandbox.home, sandbox.tmpdir, sandbox.cwd):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(mode=0o700, parents=True)


async def _run(sandbox: InstallerSandbox, argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, list[str]]:
    """Run ``argv`` as a sandboxed process tree; return its exit code and its output's lines, bounded.

    ``argv[0]`` is an absolute program hostd found itself (never package text); ``env``: the
    variables the installer needs besides the allowlist (registry, cache folders); ``HOME`` and
    ``TMPDIR`` are the sandbox's. No shell, stdin closed, the working folder empty. stdout and
    stderr are read together; at most :data:`OUTPUT_BOUND` bytes are kept (the first 8 KiB and
    the last rest). Bounded in time (:data:`INSTALL_TIMEOUT`, then :class:`trio.TooSlowError`)
    and in disk (:data:`INSTALL_DISK_BYTES` beneath the folders it may write: a
    :class:`PrepareError` ``"failed"``). Raises :class:`PrepareError` ``"sandbox"`` when the
    sandbox cannot be set up (a layer the kernel offers fails, a rule path is refused): the
    installer never runs outside it. Cancellation ends the whole tree (shielded) and propagates.
    """
    policy = sandbox.policy()
    host_env = {**env, "HOME": str(sandbox.home)}
    try:
        launch = await trio.to_thread.run_sync(
            lambda: resolve_launch(
                argv[0],
                list(argv[1:]),
                sandbox.cwd,
                {},
                EnvPolicy(pass_proxy=True),
                host_env=host_env,
                tmpdir=str(sandbox.tmpdir),
                isolation_policy=policy,
                host_vars={k: v for k, v in env.items() if k not in _INSTALLER_ENV},
            )
        )
        process = await spawn(launch)
    except LaunchError as exc:
        raise PrepareError("sandbox", f"cannot start {os.path.basename(argv[0])} in the sandbox: {exc}") from None
    output = _BoundedOutput()
    hit: list[str] = []
    try:
        with trio.fail_after(INSTALL_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_disk, process, policy, [*sandbox.writable, str(sandbox.tmpdir)], hit)
                async with trio.open_nursery() as readers:
                    readers.start_soon(output.drain, process.stdout)
                    readers.start_soon(output.drain, process.stderr)
                    await process.stdin.aclose()
                code = await process.wait()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await process.stop(grace=0.5)
    if hit:
        raise PrepareError("failed", f"{os.path.basename(argv[0])}: {hit[0]}", output=output.lines()[-20:])
    return code, output.lines()


async def _watch_disk(process: SandboxedProcess, policy: IsolationPolicy, paths: list[str], hit: list[str]) -> None:
    """Kill ``process``'s tree when the folders it may write pass the policy's disk bound (``hit`` says why)."""
    found = await watch(process, policy, disk_paths=paths)
    hit.append(found.message)
    process.kill_now()


class _BoundedOutput:
    """An installer's stdout and stderr, kept to :data:`OUTPUT_BOUND` bytes (the head and the tail)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = False

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to its end, keeping the first 8 KiB and the last bytes of it."""
        async with stream:
            while chunk := await stream.receive_some(65536):
                if len(self.head) < 8192:
                    take = 8192 - len(self.head)
                    self.head += chunk[:take]
                    chunk = chunk[take:]
                self.tail += chunk
                if len(self.tail) > OUTPUT_BOUND - 8192:
                    del self.tail[: len(self.tail) - (OUTPUT_BOUND - 8192)]
                    self.dropped = True

    def lines(self) -> list[str]:
        """The kept output as non-empty lines (``"..."`` where bytes were dropped)."""
        lines = self.head.decode(errors="replace").splitlines()
        if self.dropped:
            lines.append("...")
        lines += self.tail.decode(errors="replace").splitlines()
        return [line.rstrip() for line in lines if line.strip()]


#: Words of npm's and uv's output that say the registry was not reached.
_UNREACHABLE = re.compile(
    r"ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|ECONNRESET|EHOSTUNREACH|ENETUNREACH|"
    r"[Cc]onnection refused|dns error|[Ff]ailed to connect|timed out|[Nn]etwork is unreachable|"
    r"tcp connect error|error sending request|certificate|_CERT_|UnknownIssuer"
)
_NOT_FOUND = re.compile(
    r"E404|ETARGET|No matching version|not found in the package registry|No solution found|"
    r"package '[^']*' does not exist|Could not find npm package|Could not find version|Could not find package"
)


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


def _uv_entry(root: Path, launch: PackageLaunch, python: str) -> tuple[str, ...]:
    """The argv prefix that runs the environment's program: its ``python`` (checked to still be ``python``,
    the interpreter hostd chose, so no link written during preparation redirects what runs), then the script."""
    venv_bin = root / "venv" / "bin"
    if os.path.realpath(venv_bin / "python") != os.path.realpath(python):
        raise PrepareError("failed", f"{venv_bin / 'python'} no longer leads to {python}: the environment is not used")
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
    allow_build: bool = False,
) -> Prepared:
    """Install ``launch``'s packages for ``plugin_id`` (see the module docstring) and return the result.

    ``path``: the ``PATH`` the package tools are looked up on (npm, node, uv, deno) and the
    installers run with. ``progress`` is awaited once per step (4 steps). ``prune``: delete the
    plugin's other environments afterwards (``False`` while an instance may still run from one).
    ``allow_build``: a Python package with no wheel for this machine may be built from its source
    distribution (its build backend runs, in the installer's sandbox); without it such a package
    is refused (``PrepareError`` ``"source-build-required"``). Reuses a finished environment for
    the same request (no network then). Every installer runs in the sandbox of
    :class:`InstallerSandbox`. Raises :class:`PrepareError`. Cancellation ends the installer and
    deletes the unfinished folder (shielded), so nothing half-installed is ever found.
    """
    found = await trio.to_thread.run_sync(find_prepared, state_dir, plugin_id, launch)
    total = 4
    if found is not None and (found.build or not allow_build):
        await progress(total, total, f"already prepared: {found.record()['resolved']}")
        return found
    base = plugin_root(state_dir, plugin_id)
    root = base / launch.key
    sandbox = InstallerSandbox(state_dir, base, (str(root), str(base / "cache"), str(base / "home")))
    try:
        await progress(1, total, f"preparing {' '.join(launch.packages)} ({launch.manager}, sandboxed)")
        await trio.to_thread.run_sync(_fresh_folder, root, sandbox)
        install = _INSTALLERS[launch.manager]
        prepared = await install(_Job(sandbox, root, launch, registries, path, progress, environ, allow_build))
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
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_remove_installer_folders, sandbox)
    await progress(total, total, f"prepared {prepared.record()['resolved']}")
    if prune:
        await trio.to_thread.run_sync(_remove_others, base, launch.key)
    return prepared


def _fresh_folder(root: Path, sandbox: InstallerSandbox) -> None:
    """An empty ``root`` (a leftover of an unfinished preparation is deleted), parents ``0700``, and
    the sandbox's fresh ``HOME``, ``TMPDIR`` and working folder."""
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.mkdir(mode=0o755)
    (root.parent / "cache").mkdir(mode=0o700, exist_ok=True)
    _installer_folders(sandbox)


def _write_marker(root: Path, prepared: Prepared) -> None:
    data = {
        "manager": prepared.manager,
        "packages": list(prepared.packages),
        "resolved": prepared.resolved,
        "lockfile": prepared.lockfile,
        "entry": list(prepared.entry),
        "registry": prepared.registry,
        "unpinned": list(prepared.unpinned),
        "build": prepared.build,
        "env": dict(prepared.env),
    }
    partial = root / (MARKER + ".partial")
    partial.write_text(json.dumps(data, indent=1))
    os.replace(partial, root / MARKER)


def _remove_others(base: Path, keep: str) -> None:
    """Delete this plugin's environments other than ``keep`` (an earlier version's) and the installer's
    private folders; keep the caches."""
    for entry in base.iterdir():
        if entry.name not in (keep, "cache") and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


InstallerName = Literal["uv", "npm", "node", "deno"]


@dataclass(frozen=True)
class Installer:
    """A package tool :func:`find_installer` chose: its ``name``, absolute ``executable`` (not resolved: a
    link stays the link, as its runtime finds itself through it) and ``source``, where it was found (words
    for ``hostd doctor``)."""

    name: InstallerName
    executable: str
    source: str


def find_installer(name: InstallerName, path: str) -> Installer | str:
    """The installer hostd runs for ``name``, or why there is none (a sentence naming every place looked at).

    ``path`` is the ``PATH`` (``os.pathsep``-separated) the launch's commands are found on. The
    installers come with hostd, so that a user without a uv of their own can prepare Python packages:

    - ``uv``: the ``uv`` next to hostd's own interpreter (``Path(sys.executable).parent / "uv"``: the
      runtime dependency's binary in hostd's environment), else the ``uv`` package's
      ``uv.find_uv_bin()`` (its other install layouts), else the first on ``path``;
    - ``npm``: the npm that came with the ``node`` found on ``path`` (``npm`` beside ``node``, beside
      its real path, in its prefix's ``bin``, or the prefix's ``lib/node_modules/npm/bin/npm-cli.js``),
      so the npm matches the node that will run the package; else the first ``npm`` on ``path``;
    - ``node`` and ``deno``: the first on ``path``.

    A candidate must be a regular file (after links) with execute permission. Blocking (a few
    ``stat`` calls); runs nothing. Source: issue 23 ("the installers hostd needs come with it").
    """
    import sys  # noqa: PLC0415 - kept in this function's area of the module (issue 23 works in parallel)

    looked: list[str] = []

    def usable(candidate: str) -> bool:
        looked.append(candidate)
        return os.path.isfile(candidate) and os.access(candidate, os.X_OK)

    if name == "uv":
        own = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "uv")
        if usable(own):
            return Installer("uv", own, "next to hostd's Python")
        try:
            from uv import find_uv_bin  # noqa: PLC0415 - the uv wheel's own finder, when importable

            packaged: str | None = os.path.abspath(find_uv_bin())
        except (ImportError, FileNotFoundError):  # uv.UvNotFound is a FileNotFoundError
            packaged = None
        if packaged is not None and usable(packaged):
            return Installer("uv", packaged, "the uv package of hostd's Python")
    if name == "npm":
        node = shutil.which("node", path=path)
        if node is not None:
            node = os.path.abspath(node)
            real = os.path.realpath(node)
            prefix = os.path.dirname(os.path.dirname(real))
            beside = [
                os.path.join(os.path.dirname(node), "npm"),
                os.path.join(os.path.dirname(real), "npm"),
                os.path.join(prefix, "bin", "npm"),
                os.path.join(prefix, "lib", "node_modules", "npm", "bin", "npm-cli.js"),
            ]
            for candidate in dict.fromkeys(beside):
                if usable(candidate):
                    return Installer("npm", candidate, f"with node {node}")
    found = shutil.which(name, path=path)
    if found is not None:
        return Installer(name, os.path.abspath(found), "PATH")
    places = "".join(f"{place}, " for place in looked)
    return f"{name} not found ({places}PATH={path})"


def _tool(name: InstallerName, path: str, launch: PackageLaunch) -> str:
    """The executable of installer ``name`` (:func:`find_installer`); ``PrepareError`` ``tool-missing`` when none."""
    found = find_installer(name, path)
    if isinstance(found, str):
        raise PrepareError("tool-missing", f"cannot prepare {' '.join(launch.packages)}: {found}")
    return found.executable


def _npm_environment(base: Path, registry: str, path: str, environ: Mapping[str, str]) -> dict[str, str]:
    """npm's trimmed environment: the plugin's own cache under ``base``, the registry, short retries,
    and install scripts off (as a setting too: no package text reaches npm as an option)."""
    return installer_environment(
        {**environ, "PATH": path},
        npm_config_cache=str(base / "cache" / "npm"),
        npm_config_registry=registry,
        npm_config_ignore_scripts="true",
        npm_config_userconfig=str(base / "home" / ".npmrc"),
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


#: A dependency of a bundled JavaScript helper that npm may fetch: a registry range (``^1.2.3``,
#: ``~2``, ``>=1 <3``, ``1.x``, ``*``). Package text: no URL, git source, path, tarball or alias.
_NPM_RANGE = re.compile(r"^[0-9A-Za-z.*^~<>=|+\- ]{1,64}$")


def _helper_dependencies(folder: Path) -> list[str]:
    """The ``dependencies`` of a bundled helper's ``package.json``, each checked as ``name`` + registry range.

    Raises :class:`PrepareError` ``"spec-unsupported"`` naming the dependency for any other form.
    """
    meta = json.loads((folder / "package.json").read_text())
    deps = meta.get("dependencies") if isinstance(meta, dict) else None
    if not isinstance(deps, dict):
        return []
    for name, spec in deps.items():
        if not isinstance(spec, str) or not _NPM_RANGE.match(spec) or not _NPM_DEPENDENCY_NAME.match(str(name)):
            raise PrepareError(
                "spec-unsupported",
                f"{folder / 'package.json'}: dependency {str(name)[:80]!r}: {str(spec)[:80]!r} is not a registry "
                "package with a version range (URLs, git sources, paths, tarballs and aliases are not fetched)",
            )
    return sorted(deps)


#: The name of a bundled helper's dependency: optional ``@scope/``, lowercase URL-safe characters.
_NPM_DEPENDENCY_NAME = re.compile(r"^(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]{0,213}$")


class _Job(NamedTuple):
    """What one installer (:func:`_prepare_npm`, :func:`_prepare_uv`, :func:`_prepare_deno`) needs: the
    sandbox its runs use, the empty environment folder ``root`` it fills, the request, where packages
    come from, the ``PATH`` the tools are found on, the progress callback, the caller's environment
    and whether source builds are allowed.
    """

    sandbox: InstallerSandbox
    root: Path
    launch: PackageLaunch
    registries: Registries
    path: str
    progress: Progress
    environ: Mapping[str, str]
    allow_build: bool = False


async def _prepare_npm(job: _Job) -> Prepared:
    sandbox, root, launch, registries, path, progress, environ, _ = job
    npm = _tool("npm", path, launch)
    node = _tool("node", path, launch)
    registry = registries.npm or "https://registry.npmjs.org/"
    env = _npm_environment(sandbox.base, registry, path, environ)
    (root / "package.json").write_text('{"name": "hostd-prepared", "private": true}\n')
    await progress(2, 4, f"npm install {' '.join(launch.packages)} from {registry}")
    argv = [npm, "install", "--prefix", str(root), "--ignore-scripts", "--no-save", "--package-lock=true"]
    # The packages are operands after "--": no word of package text is ever read as an npm option.
    argv += ["--omit=dev", "--no-audit", "--no-fund", "--", *launch.packages]
    code, output = await _run(sandbox, argv, env)
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
    return Prepared(
        "npm", launch.packages, str(root), resolved, _sha256(lock), entry, registry, _unpinned(launch), False
    )


def _interpreter(launch: PackageLaunch, path: str) -> str:
    """The Python interpreter the environment is made from: found by hostd on ``path``, never a path of package text.

    ``launch.python`` (a version request such as ``"3.12"``) asks for ``python3.12``; without one,
    ``python3``. Raises :class:`PrepareError` ``"tool-missing"`` naming what was looked for.
    """
    request = launch.python
    names = ["python3", "python"]
    if request is not None:
        version = re.fullmatch(r"(?:c?python)?(\d+(?:\.\d+){0,2})", request.strip())
        if version is None:
            raise PrepareError(
                "spec-unsupported",
                f"--python {request[:80]!r}: only a version request (3.12, 3.12.4) is accepted, never a path",
            )
        parts = version.group(1).split(".")
        names = [f"python{'.'.join(parts[:2])}"] if len(parts) >= 2 else [f"python{parts[0]}"]
    for name in names:
        found = shutil.which(name, path=path)
        if found is not None:
            return os.path.abspath(found)
    raise PrepareError(
        "tool-missing",
        f"cannot prepare {' '.join(launch.packages)}: no {' or '.join(names)} on PATH={path} "
        "(hostd makes the environment from an interpreter it finds itself)",
    )


async def _prepare_uv(job: _Job) -> Prepared:
    sandbox, root, launch, registries, path, progress, environ, allow_build = job
    uv = _tool("uv", path, launch)
    python = _interpreter(launch, path)
    registry = registries.python or "https://pypi.org/simple"
    extra = {
        "UV_CACHE_DIR": str(sandbox.base / "cache" / "uv"),
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_NO_PROGRESS": "1",
        "UV_NO_CONFIG": "1",
        "UV_HTTP_TIMEOUT": "30",
        "UV_HTTP_RETRIES": "1",
    }
    if registries.python is not None:
        extra["UV_INDEX_URL"] = registries.python
    env = installer_environment({**environ, "PATH": path}, **extra)
    # The interpreter (and its installation) must be readable in the installer's sandbox.
    sandbox = dataclasses.replace(sandbox, readable=(*sandbox.readable, *_runtime_paths(python, path)))
    venv = root / "venv"
    what = f"uv pip install {' '.join(launch.packages)}"
    code, output = await _run(sandbox, [uv, "venv", "--quiet", "--no-config", "--python", python, str(venv)], env)
    if code != 0:
        raise PrepareError(
            "failed", f"uv venv for {' '.join(launch.packages)} exited {code}: " + " | ".join(output[-3:])
        )
    await progress(2, 4, f"{what} from {registry}")
    # Wheels only unless the approval allows a build; no bytecode compiled by uv (it would start the new
    # environment's interpreter, which processes the packages' .pth files); packages after "--".
    argv = [uv, "pip", "install", "--no-config", "--python", str(venv / "bin" / "python")]
    argv += [] if allow_build else ["--no-build"]
    code, output = await _run(sandbox, [*argv, "--", *launch.packages], env)
    if code != 0:
        if not allow_build and any(_NEEDS_BUILD.search(line) for line in output):
            raise PrepareError(
                "source-build-required",
                f"{what}: a package has no wheel for this machine and would have to be built from source; "
                "hostd builds only when the approval allows it (plugins/prepare {allowBuild: true})",
                output=output[-20:],
                registry=registry,
            )
        raise _failure(what, code, output, registry)
    await progress(3, 4, "recording what was installed")
    freeze = await trio.to_thread.run_sync(_freeze, venv)
    helpers = await trio.to_thread.run_sync(bundled_js_helpers, venv)
    npm = find_installer("npm", path)
    for helper in helpers:
        if isinstance(npm, str):
            break  # without npm the package falls back by itself
        await trio.to_thread.run_sync(_helper_dependencies, helper)
        npm_registry = registries.npm or "https://registry.npmjs.org/"
        await progress(3, 4, f"npm install in {helper.relative_to(root)} (a JavaScript helper of the package)")
        argv = [npm.executable, "install", "--prefix", str(helper), "--ignore-scripts", "--omit=dev"]
        argv += ["--no-audit", "--no-fund", "--package-lock=true"]
        code, output = await _run(sandbox, argv, _npm_environment(sandbox.base, npm_registry, path, environ))
        if code != 0:
            raise _failure(f"npm install in {helper.relative_to(root)}", code, output, npm_registry)
        lock = helper / "package-lock.json"
        if lock.is_file():
            freeze += f"# npm {helper.relative_to(root)} {_sha256(lock)}\n"
    await _compile(sandbox, python, venv)
    (root / "requirements.lock").write_text(freeze)
    versions = _freeze_versions(freeze)
    resolved = {
        _requested_name(spec): versions[_requested_name(spec)]
        for spec in launch.packages
        if _requested_name(spec) in versions
    }
    entry = _uv_entry(root, launch, python)
    return Prepared(
        "uv",
        launch.packages,
        str(root),
        resolved,
        _sha256(root / "requirements.lock"),
        entry,
        registry,
        _unpinned(launch),
        allow_build,
    )


#: uv's words for "this needs a source build, and builds are off".
_NEEDS_BUILD = re.compile(r"building from source is disabled|--no-build|no usable wheels|has no wheels", re.IGNORECASE)


def _runtime_paths(program: str, path: str) -> list[str]:
    """The folders ``program``'s runtime needs to read (its prefix, its ``#!`` interpreters)."""
    return runtime_read_paths(program, path, os.path.realpath(Path.home()))


def _freeze(venv: Path) -> str:
    """``name==version`` of every distribution in ``venv``, sorted, read from its metadata files.

    What ``uv pip freeze`` prints, without starting the environment's interpreter (which would
    process the packages' ``.pth`` files). Blocking.
    """
    found: dict[str, str] = {}
    for meta in venv.glob("lib/python*/site-packages/*.dist-info/METADATA"):
        name = version = None
        with open(meta, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    break  # the headers end at the first blank line
                key, _, value = line.partition(":")
                if key == "Name":
                    name = value.strip()
                elif key == "Version":
                    version = value.strip()
        if name and version:
            found[name] = version
    return "".join(f"{name}=={found[name]}\n" for name in sorted(found, key=str.lower))


async def _compile(sandbox: InstallerSandbox, python: str, venv: Path) -> None:
    """Compile the environment's bytecode with the base interpreter in isolated mode, sandboxed.

    ``-I -S``: no site processing, so no ``.pth`` file of a package runs; the compiler reads the
    sources and writes ``__pycache__`` only. A failure is not fatal (the plugin then compiles in
    memory at each start), so it is not raised.
    """
    for lib in sorted(venv.glob("lib/python*/site-packages")):
        await _run(sandbox, [python, "-I", "-S", "-m", "compileall", "-q", "-j", "1", str(lib)], {})


def _unpinned(launch: PackageLaunch) -> tuple[str, ...]:
    """The requested packages that name no exact version (resolved by the installer, shown in the approval)."""
    return launch.unpinned


def _is_pinned(manager: Manager, spec: str) -> bool:
    """Whether ``spec`` names an exact version (``pkg==1.0``; ``pkg@1.2.3``; deno's ``npm:pkg@1.2.3/sub``)."""
    if manager == "uv":
        return "==" in spec and not any(c in spec.split("==", 1)[1] for c in "*,<>!~")
    if manager == "deno" and spec.startswith(("npm:", "jsr:")):
        spec = spec[4:]
    at = spec.find("@", 1)
    if at < 0:
        return False
    version = spec[at + 1 :].split("/", 1)[0] if manager == "deno" else spec[at + 1 :]
    return _EXACT_SEMVER.fullmatch(version) is not None


#: An exact npm version (semver 2.0: ``1.2.3``, ``1.2.3-rc.1``, ``1.2.3+build``).
_EXACT_SEMVER = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")


#: The lockfile of a deno environment (``<root>/deno.lock``) and its module cache (``DENO_DIR``).
DENO_LOCK = "deno.lock"
DENO_CACHE = "deno"


async def _prepare_deno(job: _Job) -> Prepared:
    """``deno install --entrypoint`` of the launch's module into ``<root>/deno`` (``DENO_DIR``), locked.

    The fetch runs with ``--no-config`` (no ``deno.json``, import map or ``.npmrc`` of the plugin
    folder), no ``HOME`` (no user configuration), the registry of :class:`Registries` and no
    lifecycle scripts (deno runs none without ``--allow-scripts``, which is never passed). The
    entry runs ``deno run`` (or ``deno x -y``) with ``--cached-only --frozen --lock`` (nothing
    fetched, nothing resolved again) and ``--no-config``; an npm module also with ``--no-remote``
    (a jsr: module is itself remote: it is read from the cache). ``Prepared.env`` carries
    ``DENO_DIR`` (deno only reads it: its analysis caches fail to open in the read-only folder
    and deno goes on without them) and the registries (``NPM_CONFIG_REGISTRY``, ``JSR_URL``: the
    cache is kept per registry).
    """
    sandbox, root, launch, registries, path, progress, environ, _ = job
    deno = _tool("deno", path, launch)
    module = launch.packages[0]
    spec = module if module.startswith(("npm:", "jsr:")) else "npm:" + module
    name, _version = _deno_package(spec)
    if spec.startswith("npm:"):
        registry = registries.npm or "https://registry.npmjs.org/"
    else:
        registry = registries.jsr or "https://jsr.io/"
    # The cache is kept per registry (a folder per npm host, the URL of each jsr file): the run
    # looks the module up where the preparation fetched it from.
    run_env = {"DENO_DIR": str(root / DENO_CACHE), "DENO_NO_UPDATE_CHECK": "1"}
    if registries.npm is not None:
        run_env["NPM_CONFIG_REGISTRY"] = registries.npm
    if registries.jsr is not None:
        run_env["JSR_URL"] = registries.jsr
    # HOME is the sandbox's empty one: no ~/.npmrc, no user deno configuration.
    env = installer_environment({**environ, "PATH": path}, **run_env, NO_COLOR="1", DENO_NO_PROMPT="1")
    lock = root / DENO_LOCK
    what = f"deno install --entrypoint {spec}"
    await progress(2, 4, f"{what} from {registry}")
    argv = [deno, "install", "--entrypoint", "--no-config", f"--lock={lock}", spec]
    code, output = await _run(sandbox, argv, env)
    if code != 0:
        raise _failure(what, code, output, registry)
    await progress(3, 4, "recording what was installed")
    specifiers = json.loads(lock.read_text())["specifiers"]
    versions = [str(v) for k, v in specifiers.items() if re.fullmatch(re.escape(name) + r"@[^/]+", k)]
    if not versions:
        raise PrepareError("no-entry", f"{what}: {lock} records no version of {name}")
    resolved = {name: versions[0].split("_", 1)[0]}  # "2026.8.31_zod@4.6.7": its peers follow the "_"
    entry = [deno, launch.program] + (["-y"] if launch.program == "x" else [])
    entry += ["--no-config", "--cached-only", "--frozen", f"--lock={lock}"]
    if spec.startswith("npm:"):
        entry.append("--no-remote")
    entry += [*launch.flags, module]
    return Prepared(
        "deno",
        launch.packages,
        str(root),
        resolved,
        _sha256(lock),
        tuple(entry),
        registry,
        _unpinned(launch),
        False,
        run_env,
    )


_INSTALLERS: dict[str, Callable[[_Job], Awaitable[Prepared]]] = {
    "npm": _prepare_npm,
    "uv": _prepare_uv,
    "deno": _prepare_deno,
}
