"""The package spec grammar and which launches name a package (:mod:`hostd.install.prepare`'s front end).

What lives here: :class:`PackageLaunch` (what a launch asks to fetch and run), :class:`PrepareError` (every
refusal and failure of a preparation, raised first by the grammar), the grammar of package operands
(:func:`npm_spec`, :func:`python_spec`, :func:`python_request`, :func:`program_name`) and the parsers of
npx, uvx / ``uv tool run``, ``pipx run``, ``uv run --with`` and deno's ``npm:``/``jsr:`` launches
(:func:`parse_package_launch`). Pure: no I/O, nothing spawned. It imports nothing of hostd; the installers
(:mod:`hostd.install.installers`, :mod:`hostd.install.ecosystems`) and the orchestration
(:mod:`hostd.install.prepare`, which re-exports the names others import) build on it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

__all__ = [
    "NPM_FORMS",
    "PROGRAM_FORMS",
    "PYTHON_FORMS",
    "PYTHON_REQUEST_FORMS",
    "Manager",
    "PackageLaunch",
    "PrepareError",
    "Spec",
    "npm_spec",
    "parse_package_launch",
    "program_name",
    "python_request",
    "python_spec",
]

Manager = Literal["npm", "uv", "deno"]


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
    ``"no-entry"`` (installed, but no program to run was found),
    ``"host-refused"`` (an installer tried to reach a host that is not one of the
    registries in use; hostd's proxy refused it: the message names the host and
    the registries, :mod:`hostd.install.installer_network`).
    ``output``: the installer's last lines (bounded).
    """

    def __init__(self, reason: str, message: str, *, output: Sequence[str] = (), registry: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.output = list(output)
        self.registry = registry


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


def requested_package(launch: PackageLaunch) -> tuple[str, str | None]:
    """``(name, exact version or None)`` of the package that provides ``launch``'s program (its first spec).

    npm ``@scope/x@1.2.3`` -> ``("@scope/x", "1.2.3")``; uv ``x[extra]==1.2.3`` -> ``("x", "1.2.3")``;
    deno ``npm:x@1.2.3/sub`` -> ``("npm:x", "1.2.3")``; a spec with no exact version -> ``(name, None)``
    (the preparation resolves it: ``Prepared.resolved``). Pure; the specs were validated when the
    launch was parsed (:func:`parse_package_launch`).
    """
    spec = launch.packages[0]
    if launch.manager == "deno":
        return _deno_package(spec if _MODULE_SCHEME.match(spec) else "npm:" + spec)
    if launch.manager == "uv":
        name, _, version = spec.partition("==")
        return name.split("[", 1)[0].strip(), (version.strip() if _is_pinned("uv", spec) else None)
    at = spec.find("@", 1)
    if at < 0:
        return spec, None
    return spec[:at], (spec[at + 1 :] if _is_pinned("npm", spec) else None)


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
