"""Build the hostd sidecar: a PyInstaller one-folder build in ``dist/hostd-<target-triple>/``.

Usage: ``python packaging/build_sidecar.py [--dist DIR]`` (needs ``pip install -e '.[sidecar]'``).

The folder holds the executable ``hostd-<target-triple>`` (Tauri's ``externalBin`` name, e.g.
``hostd-x86_64-unknown-linux-gnu``) and ``_internal/`` (the Python runtime and every dependency).
One executable serves both hostd and the per-plugin supervisor shim (``packaging/sidecar_main.py``);
the shim and its layer modules travel as files under ``_internal/sandbox/``, because the shim is run
by path and loads its layers by path. One folder, not one file: a one-file build unpacks itself on
every start and runs as two processes (SIGKILL to the outer one leaves hostd running).

Prints the folder's path on the last line. Exit status: PyInstaller's.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
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
        "--log-level=WARN",
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
    done = subprocess.run(command, cwd=REPO, check=False)
    if done.returncode == 0:
        print(args.dist / name)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
