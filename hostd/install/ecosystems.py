"""The per-ecosystem installers of a preparation: npm, uv (Python) and deno, and what they produce.

What lives here: :class:`Registries` (where packages come from), :class:`Prepared` (a finished
preparation: its entry, what was resolved, the lockfile digest), ``_Job`` (one installer's inputs),
``_prepare_npm`` / ``_prepare_uv`` / ``_prepare_deno`` (``_INSTALLERS``, by manager) and their helpers: the
entry points, the metadata-read ``freeze``, the sandboxed bytecode ``compile``, the bundled JavaScript helpers
of a Python package. Each installer runs through :mod:`hostd.install.installers`; :func:`hostd.install.prepare.prepare`
picks one and writes the marker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import trio

from hostd.install.installer_network import RegistryHosts, registry_hosts
from hostd.install.installers import (
    InstallerSandbox,
    _failure,
    _run,
    _runtime_paths,
    _tool,
    find_installer,
    installer_environment,
)
from hostd.install.packages import Manager, PackageLaunch, PrepareError, _deno_package

__all__ = ["DENO_CACHE", "DENO_LOCK", "Prepared", "Progress", "Registries", "bundled_js_helpers", "installer_hosts"]

#: ``progress(step, total, message)``: one call per step of a preparation.
Progress = Callable[[int, int, str], Awaitable[None]]


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


#: Where packages come from when hostd names no mirror (each tool's own default).
NPM_REGISTRY = "https://registry.npmjs.org/"
PYTHON_INDEX = "https://pypi.org/simple"
JSR_REGISTRY = "https://jsr.io/"


def installer_hosts(launch: PackageLaunch, registries: Registries) -> RegistryHosts:
    """The registries the installer of ``launch`` may reach, its whole allowlist (hostd/install/installer_network.py):
    npm: the npm registry; uv: the Python index (PyPI: with its files' host); deno: the npm registry, and JSR
    first for a ``jsr:`` module. Raises :class:`PrepareError` for a registry URL that cannot be used."""
    npm = registries.npm or NPM_REGISTRY
    if launch.manager == "npm":
        return registry_hosts("npm", [npm])
    if launch.manager == "uv":
        return registry_hosts("uv", [registries.python or PYTHON_INDEX])
    jsr = launch.packages[0].startswith("jsr:")
    return registry_hosts("deno", [registries.jsr or JSR_REGISTRY, npm] if jsr else [npm])


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
    registry = registries.npm or NPM_REGISTRY
    hosts = installer_hosts(launch, registries)
    env = _npm_environment(sandbox.base, registry, path, environ)
    (root / "package.json").write_text('{"name": "hostd-prepared", "private": true}\n')
    await progress(2, 4, f"npm install {' '.join(launch.packages)} from {registry}")
    argv = [npm, "install", "--prefix", str(root), "--ignore-scripts", "--no-save", "--package-lock=true"]
    # The packages are operands after "--": no word of package text is ever read as an npm option.
    argv += ["--omit=dev", "--no-audit", "--no-fund", "--", *launch.packages]
    code, output = await _run(sandbox, argv, env, hosts)
    what = f"npm install {' '.join(launch.packages)}"
    if code != 0:
        raise _failure(what, code, output, registry, sandbox, hosts=hosts)
    await progress(3, 4, f"recording what was installed{sandbox.reached()}")
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
    registry = registries.python or PYTHON_INDEX
    hosts = installer_hosts(launch, registries)
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
    code, output = await _run(sandbox, [*argv, "--", *launch.packages], env, hosts)
    if code != 0:
        if not allow_build and any(_NEEDS_BUILD.search(line) for line in output):
            raise PrepareError(
                "source-build-required",
                f"{what}: a package has no wheel for this machine and would have to be built from source; "
                "hostd builds only when the approval allows it (plugins/prepare {allowBuild: true})",
                output=output[-20:],
                registry=registry,
            )
        raise _failure(what, code, output, registry, sandbox, hosts=hosts)
    await progress(3, 4, f"recording what was installed{sandbox.reached()}")
    freeze = await trio.to_thread.run_sync(_freeze, venv)
    helpers = await trio.to_thread.run_sync(bundled_js_helpers, venv)
    npm = find_installer("npm", path)
    for helper in helpers:
        if isinstance(npm, str):
            break  # without npm the package falls back by itself
        await trio.to_thread.run_sync(_helper_dependencies, helper)
        npm_registry = registries.npm or NPM_REGISTRY
        npm_hosts = registry_hosts("npm", [npm_registry])
        await progress(3, 4, f"npm install in {helper.relative_to(root)} (a JavaScript helper of the package)")
        argv = [npm.executable, "install", "--prefix", str(helper), "--ignore-scripts", "--omit=dev"]
        argv += ["--no-audit", "--no-fund", "--package-lock=true"]
        env = _npm_environment(sandbox.base, npm_registry, path, environ)
        code, output = await _run(sandbox, argv, env, npm_hosts)
        if code != 0:
            what = f"npm install in {helper.relative_to(root)}"
            raise _failure(what, code, output, npm_registry, sandbox, hosts=npm_hosts)
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
    registry = (registries.npm or NPM_REGISTRY) if spec.startswith("npm:") else (registries.jsr or JSR_REGISTRY)
    hosts = installer_hosts(launch, registries)
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
    code, output = await _run(sandbox, argv, env, hosts)
    if code != 0:
        raise _failure(what, code, output, registry, sandbox, hosts=hosts)
    await progress(3, 4, f"recording what was installed{sandbox.reached()}")
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
