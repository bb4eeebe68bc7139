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
(:class:`Registries`) applies to every preparation. Each installer run reaches only the
registries in use, through hostd's proxy in a network namespace of its own
(:mod:`hostd.install.installer_network`: which hosts, what a refusal says, where it cannot be).

Where each part lives: the grammar and the launch parsers in :mod:`hostd.install.packages`, the
installer sandbox and its bounded runner in :mod:`hostd.install.installers`, the npm / uv / deno
installers and :class:`Prepared` in :mod:`hostd.install.ecosystems`; this module is the orchestration
(:func:`prepare`, :func:`find_prepared`, the marker).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import trio

from hostd.install.ecosystems import _INSTALLERS, Prepared, Progress, Registries, _Job, installer_hosts
from hostd.install.installer_network import InstallerNetwork, network_words
from hostd.install.installers import INSTALL_TIMEOUT, InstallerSandbox, _installer_folders, _remove_installer_folders
from hostd.install.packages import PackageLaunch, PrepareError

__all__ = ["MARKER", "find_prepared", "prepare"]

#: Written last into a prepared environment; its absence means "not prepared".
MARKER = "hostd-prepared.json"


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
    log: Callable[[str], Awaitable[None]] | None = None,
) -> Prepared:
    """Install ``launch``'s packages for ``plugin_id`` (see the module docstring) and return the result.

    ``path``: the ``PATH`` the package tools are looked up on (npm, node, uv, deno) and the
    installers run with. ``progress`` is awaited once per step (4 steps). ``prune``: delete the
    plugin's other environments afterwards (``False`` while an instance may still run from one).
    ``allow_build``: a Python package with no wheel for this machine may be built from its source
    distribution (its build backend runs, in the installer's sandbox); without it such a package
    is refused (``PrepareError`` ``"source-build-required"``). Reuses a finished environment for
    the same request (no network then). Every installer runs in the sandbox of
    :class:`InstallerSandbox`, reaching only the registries in use through hostd's proxy
    (:mod:`hostd.install.installer_network`; the first progress line says so, or why the network is not
    filtered here); ``log`` is awaited with each line of what that proxy refused (hostd: the plugin's
    ``plugins/log``). Raises :class:`PrepareError` (``"host-refused"``: an installer tried to reach a
    host that is not a registry in use, named in the message). Cancellation ends the installer and
    deletes the unfinished folder (shielded), so nothing half-installed is ever found.
    """
    found = await trio.to_thread.run_sync(find_prepared, state_dir, plugin_id, launch)
    total = 4
    if found is not None and (found.build or not allow_build):
        await progress(total, total, f"already prepared: {found.record()['resolved']}")
        return found
    base = plugin_root(state_dir, plugin_id)
    root = base / launch.key
    writable = (str(root), str(base / "cache"), str(base / "home"))
    sandbox = InstallerSandbox(state_dir, base, writable, network=InstallerNetwork(log))
    hosts = installer_hosts(launch, registries)
    proxied = await trio.to_thread.run_sync(sandbox.proxied, hosts, environ)
    words = network_words(hosts, proxied, environ)
    try:
        await progress(1, total, f"preparing {' '.join(launch.packages)} ({launch.manager}, sandboxed; {words})")
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
