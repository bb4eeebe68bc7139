"""Build the hostd sidecar: a PyInstaller one-folder build in ``dist/hostd-<target-triple>/``.

Usage: ``python packaging/build_sidecar.py [--dist DIR]`` (needs ``pip install -e '.[sidecar]'``).

The folder holds the executable ``hostd-<target-triple>`` (Tauri's ``externalBin`` name, e.g.
``hostd-x86_64-unknown-linux-gnu``) and ``_internal/`` (the Python runtime and every dependency).
One executable serves both hostd and the per-plugin supervisor shim (``packaging/sidecar_main.py``);
the shim and its layer modules travel as files under ``_internal/sandbox/``, because the shim is run
by path and loads its layers by path. One folder, not one file: a one-file build unpacks itself on
every start and runs as two processes (SIGKILL to the outer one leaves hostd running).

Says what it is doing while it does it: one line per phase of PyInstaller's (analysing imports,
hooks, shared libraries, the archive, the executable, the folder) with the seconds since the start,
PyInstaller's warnings except those known to be harmless (:data:`HARMLESS`, explained in
docs/sidecar.md "Build output"), and where PyInstaller's whole log went
(``build/sidecar/pyinstaller.log``). Prints the folder's path on the last line. Exit status:
PyInstaller's (its last lines are printed when it fails).
"""

from __future__ import annotations

import argparse
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def target_triple() -> str:
    """The Rust target triple of this machine, as Tauri names sidecars (``x86_64-unknown-linux-gnu``)."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    system = platform.system()
    if system == "Linux":
        libc = "musl" if "musl" in (platform.libc_ver()[0] or "").lower() else "gnu"
        return f"{machine}-unknown-linux-{libc}"
    if system == "Darwin":
        return f"{machine}-apple-darwin"
    if system == "Windows":
        return f"{machine}-pc-windows-msvc"
    raise SystemExit(f"no target triple for {system}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_sidecar.py", description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=REPO / "dist", help="where the folder goes (default dist/)")
    args = parser.parse_args(argv)
    name = f"hostd-{target_triple()}"
    work = REPO / "build" / "sidecar"
    sandbox = REPO / "sandbox"
    command = [
        sys.executable,
        "-m",
        "PyInstaller",
        "--noconfirm",
        "--clean",
        "--log-level=INFO",  # the phases are read from it (PHASES); the whole log goes to a file
        "--onedir",
        "--console",
        "--name",
        name,
        "--distpath",
        str(args.dist),
        "--workpath",
        str(work),
        "--specpath",
        str(work),
        "--paths",
        str(REPO),
        # hostd.host.service is imported by name (off the start path); the rest of both packages with it.
        "--collect-submodules",
        "hostd",
        "--collect-submodules",
        "sandbox",
        "--collect-data",
        "jsonschema_specifications",
        "--copy-metadata",
        "opentelemetry-api",
        "--copy-metadata",
        "hostd",
        # Nothing at run time needs them; their runtime hooks cost about 0.3 s at every start.
        "--exclude-module",
        "pkg_resources",
        "--exclude-module",
        "setuptools",
        # The shim, and its parts and the layer modules it loads by path.
        *(
            arg
            for f in ("shim.py", "_shim_init.py", "_shim_probe.py", "_shim_serve.py", "_landlock.py", "_seccomp.py")
            for arg in ("--add-data", f"{sandbox / f}:sandbox")
        ),
        str(REPO / "packaging" / "sidecar_main.py"),
    ]
    if (args.dist / name).exists():
        shutil.rmtree(args.dist / name)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "pyinstaller.log"
    say(f"building {args.dist / name}/ with PyInstaller (one folder; about 1.5 minutes on two busy cores)")
    say(f"PyInstaller's whole log: {log}")
    started = time.monotonic()
    with (
        subprocess.Popen(
            command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        ) as process,
        log.open("w", encoding="utf-8") as kept,
    ):
        assert process.stdout is not None
        tail = report(process.stdout, kept, started)
        returncode = process.wait()
    if returncode != 0:
        say(f"PyInstaller failed (exit status {returncode}); its last lines:")
        print("".join(tail), end="", file=sys.stderr)
        return returncode
    say(f"done in {time.monotonic() - started:.0f} s")
    print(args.dist / name)
    return returncode


#: PyInstaller's INFO messages that start a phase worth naming, and what to say (the first of each).
PHASES: tuple[tuple[str, str], ...] = (
    ("Analyzing modules for base_library.zip", "analysing the standard library"),
    ("sidecar_main.py", "analysing hostd's imports (packaging/sidecar_main.py and everything it imports)"),
    ("Analyzing hidden import", "analysing the modules loaded by name (all of hostd and sandbox)"),
    ("Processing module hooks", "running PyInstaller's hooks for the packages found"),
    ("Looking for dynamic libraries", "finding the shared libraries the modules load"),
    ("Building PYZ", "compressing the Python modules into the archive"),
    ("Building PKG", "building the bootloader's package"),
    ("Building EXE", "building the executable"),
    ("Building COLLECT", "collecting the folder (runtime, dependencies, the shim's files)"),
)

#: PyInstaller warnings known to be harmless for this build, and why (docs/sidecar.md "Build output").
#: Each is matched against the text after ``WARNING:``; any other warning is printed.
HARMLESS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r'^Hidden import "pycparser\.(lextab|yacctab)" not found!$'),
        "cffi's hook names pycparser's generated parser tables, which pycparser no longer ships (it builds "
        "them when needed); hostd never parses C at run time",
    ),
    (
        re.compile(r'^Hidden import "setuptools\._distutils" not found!$'),
        "a hook names setuptools, which this build leaves out on purpose (--exclude-module setuptools)",
    ),
    (
        re.compile(r"^Library (ole32|shell32|kernel32|user32|advapi32) required via ctypes not found$"),
        "Windows libraries a dependency loads with ctypes on Windows only; the code path never runs elsewhere",
    ),
)


def say(line: str) -> None:
    """One progress line on stderr (the last line of stdout stays the folder's path)."""
    print(f"build_sidecar: {line}", file=sys.stderr, flush=True)


def report(lines: Iterable[str], kept: object, started: float) -> list[str]:
    """Copy PyInstaller's output to ``kept`` (a text file) while naming each phase as it starts
    (:data:`PHASES`) and printing each warning that is not in :data:`HARMLESS`. Returns the last 40
    lines (shown when the build fails)."""
    write = getattr(kept, "write")  # noqa: B009 - a text file
    seen: set[str] = set()
    harmless = 0
    tail: list[str] = []
    for line in lines:
        write(line)
        tail = [*tail[-39:], line]
        for key, what in PHASES:
            if key in line and key not in seen and " INFO: " in line:
                seen.add(key)
                say(f"{time.monotonic() - started:5.0f} s  {what}")
        warning = line.partition(" WARNING: ")[2].strip()
        if warning:
            if any(pattern.search(warning) for pattern, _why in HARMLESS):
                harmless += 1
            else:
                say(f"PyInstaller warning: {warning}")
    if harmless:
        say(f'{harmless} known harmless PyInstaller warnings left out (docs/sidecar.md, "Build output")')
    return tail


if __name__ == "__main__":
    raise SystemExit(main())
