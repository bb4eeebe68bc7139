"""Runtime requirements of a bundle (MCPB ``compatibility.runtimes``), checked against what runs the server.

Theory of operation
-------------------
An MCPB manifest may say which versions of its runtime it needs:
``{"python": ">=3.8,<4.0", "node": ">=16.0.0"}`` (MANIFEST.md,
"Compatibility"; only ``python`` and ``node`` are defined). The syntax is
not specified beyond examples, so each range is read in the syntax its
ecosystem uses:

* ``python``: a PEP 440 specifier set (``>=3.10``, ``>=3.8,<4.0``,
  ``~=3.11``, ``==3.12.*``; :mod:`packaging.specifiers`); a value that is
  not PEP 440 but an npm range (``^3.10``, ``>=3.8 <4``, ``3.x``) is read
  as one, since bundle authors write both;
* ``node``: an npm semver range (``>=18.0.0``, ``>=18``, ``^18``,
  ``18.x``, ``~18.2``, ``>=18 <21``, ``18 || 20``; the ``node-semver``
  package, node-semver's rules).

A pre-release interpreter (``3.13.0rc1``, ``v23.0.0-nightly``) satisfies a
range its release would satisfy: the user runs it on purpose.

:func:`check` takes the launch's runtime chain (``Launch.runtime``: the
real paths of what runs, the executable first, then each ``#!``
interpreter, and the Python a ``uv``/``uvx`` runner runs; hostd's launch
resolution, sandbox/policy.py ``runtime_chain``), finds in it the program of
each required runtime by its name (``node``, ``nodejs``; ``python``,
``python3``, ``python3.12``...), asks that program its version (``node
--version``; ``python -c`` printing ``sys.version_info``), and compares. A
runtime the launch does not run is not checked (``found`` is ``None``): a
bundle's range cannot be held against a program that does not run it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["RUNTIMES", "Found", "RuntimeMismatch", "answer_of", "check", "range_problem", "satisfies"]

Runtime = Literal["python", "node"]
RUNTIMES: Final[tuple[Runtime, ...]] = ("python", "node")
VERSION_TIMEOUT: Final = 5.0
"""Seconds a runtime has to print its version (a cold start on a slow disk)."""
VERSION_BYTES: Final = 256
"""Most bytes of a runtime's answer read; the rest is never read (it is killed)."""
MAX_RANGE: Final = 256
"""Longest range accepted (node-semver's parser is quadratic in the length: 40,000 spaces took 26 s)."""

_NAMES: Final[dict[Runtime, re.Pattern[str]]] = {
    "python": re.compile(r"python(3(\.\d+)?)?"),
    "node": re.compile(r"node(js)?"),
}
_ASK: Final[dict[Runtime, tuple[str, ...]]] = {
    "node": ("--version",),
    "python": ("-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"),
}
_VERSION: Final = re.compile(r"v?(\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.+-]*)?)")


@dataclass(frozen=True)
class Found:
    """A runtime of the launch: its name, the required range, the program and the version it reported."""

    runtime: Runtime
    required: str
    executable: str | None
    version: str | None


class RuntimeMismatch(Exception):
    """The launch's runtime does not satisfy the bundle's range (or cannot tell its version)."""

    def __init__(self, found: Found, message: str) -> None:
        super().__init__(message)
        self.found = found


def _semver(version: str, spec: str) -> bool | None:
    import nodesemver  # noqa: PLC0415 - only bundles with runtimes pay for it

    if nodesemver.valid_range(spec, loose=False) is None:
        return None
    return bool(nodesemver.satisfies(version, spec, loose=False, include_prerelease=True))


def _pep440(version: str, spec: str) -> bool | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet  # noqa: PLC0415
    from packaging.version import InvalidVersion, Version  # noqa: PLC0415

    try:
        specifiers = SpecifierSet(spec)
    except InvalidSpecifier:
        return None
    try:
        return specifiers.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def satisfies(runtime: Runtime, version: str, spec: str) -> bool | None:
    """Whether ``version`` (``3.11.2``, ``18.19.1``) is in ``spec``; ``None`` when ``spec`` is no range.

    ``python``: PEP 440, else an npm range; ``node``: an npm range (see the module docstring).
    """
    if runtime == "python":
        answer = _pep440(version, spec)
        if answer is not None:
            return answer
        # A pre-release as PEP 440 writes it (3.13.0rc1) is 3.13.0-rc1 to semver.
        return _semver(re.sub(r"^(\d+\.\d+\.\d+)([a-z].*)$", r"\1-\2", version), spec)
    return _semver(version, spec)


def range_problem(runtime: str, spec: str) -> str | None:
    """Why ``spec`` is not a range hostd can check for ``runtime`` (``None``: it is); for manifest validation."""
    if runtime not in RUNTIMES:
        return f"unknown runtime {runtime!r} (MCPB defines 'python' and 'node')"
    if not spec.strip():
        return "an empty range"
    if len(spec) > MAX_RANGE:
        return f"a range of {len(spec)} characters (at most {MAX_RANGE})"
    if satisfies(runtime, "0.0.0", spec) is None:
        syntax = "a PEP 440 specifier (>=3.10) or an npm range" if runtime == "python" else "an npm semver range"
        return f"{spec!r} is not {syntax}"
    return None


def _program(runtime: Runtime, chain: Sequence[str]) -> str | None:
    return next((path for path in chain if _NAMES[runtime].fullmatch(os.path.basename(path))), None)


def version_of(runtime: Runtime, executable: str, env: Mapping[str, str]) -> str:
    """The version ``executable`` reports (``18.19.1``, ``3.11.2``). Blocking: :func:`answer_of` bounds it.

    Raises ``OSError`` (it cannot run), ``subprocess.TimeoutExpired``, or
    ``ValueError`` (it printed no version).
    """
    code, text = answer_of([executable, *_ASK[runtime]], env)
    match = _VERSION.fullmatch(text)
    if code != 0 or match is None:
        raise ValueError(f"exit status {code}, printed {text[:80]!r}")
    return match.group(1)


def answer_of(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    """``(exit status, stdout stripped)`` of ``argv`` run with exactly ``env`` (callers pass PATH and HOME only).

    Blocking: runs it in a session of its own with stdin empty and stderr
    discarded, reads at most :data:`VERSION_BYTES` of its stdout for at most
    :data:`VERSION_TIMEOUT` seconds, then kills its process group (an answer
    that floods or never ends costs nothing more). Raises ``OSError`` (it
    cannot run) or ``subprocess.TimeoutExpired``.
    """
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=dict(env),
        start_new_session=True,
    )
    assert process.stdout is not None
    timer = threading.Timer(VERSION_TIMEOUT, _kill_group, (process.pid,))
    timer.start()
    try:
        data = b""
        while len(data) < VERSION_BYTES:
            chunk = os.read(process.stdout.fileno(), VERSION_BYTES - len(data))
            if not chunk:
                break
            data += chunk
        if not timer.is_alive():
            raise subprocess.TimeoutExpired(argv[0], VERSION_TIMEOUT)
        code = process.wait(timeout=VERSION_TIMEOUT)
    finally:
        timer.cancel()
        _kill_group(process.pid)
        process.stdout.close()
        process.wait()
    return code, data.decode("utf-8", "replace").strip()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _inside(path: str, folders: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(os.path.commonpath([real, os.path.realpath(f)]) == os.path.realpath(f) for f in folders)


def check(
    required: Mapping[str, str], chain: Sequence[str], env: Mapping[str, str], untrusted: Sequence[str] = ()
) -> list[Found]:
    """Check each of ``required`` (runtime -> range) against the launch's runtime ``chain``; return what was found.

    ``env``: the environment the runtime is asked its version in (``PATH``
    and ``HOME`` only). ``untrusted``: folders whose files are never run here
    (the plugin's own folder, the state folder): a runtime found there is the
    plugin's code, which runs only sandboxed and only once approved, so it is
    reported with no version instead of being asked. The class this keeps
    out: anything of the plugin run at install, outside the sandbox and
    before approval (``${__dirname}/bin/node``, a ``#!`` naming a file of the
    bundle, a folder's own ``./python3``). Raises :class:`RuntimeMismatch`
    for a range hostd cannot check, or the first runtime whose version is
    outside its range or cannot be read; its message names the runtime, the
    range, the program and the version. Blocking (runs each runtime once).
    """
    results: list[Found] = []
    for name, spec in required.items():
        runtime: Runtime = name  # type: ignore[assignment]  # checked just below
        problem = range_problem(name, spec)
        if problem is not None:
            raise RuntimeMismatch(Found(runtime, spec[:MAX_RANGE], None, None), f"compatibility.runtimes: {problem}")
        program = _program(runtime, chain)
        if program is None or _inside(program, untrusted):
            results.append(Found(runtime, spec, program, None))
            continue
        try:
            version = version_of(runtime, program, env)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            found = Found(runtime, spec, program, None)
            message = f"the bundle needs {runtime} {spec}; {program} did not tell its version ({exc})"
            raise RuntimeMismatch(found, message) from None
        found = Found(runtime, spec, program, version)
        if not satisfies(runtime, version, spec):
            raise RuntimeMismatch(found, f"the bundle needs {runtime} {spec}; {program} is {runtime} {version}")
        results.append(found)
    return results
