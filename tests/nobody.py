"""Running a driver as the unprivileged user nobody (65534) through setpriv: the one place that knows how.

CI runs as root; real users do not. The key isolation tests repeat their checks as nobody. The
driver runs under the system Python (nobody cannot enter /root, where this venv's interpreter may
live) with this checkout and the venv's site-packages on PYTHONPATH, in a work folder nobody owns.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
#: The setpriv prefix that drops to nobody with no supplementary group.
SETPRIV = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def skip_reason() -> str | None:
    """Why nobody's checks cannot run here (not root, no setpriv, another system Python), or None."""
    if not sys.platform.startswith("linux"):
        return "Linux only"
    if os.geteuid() != 0:
        return "needs root to switch to nobody"
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing"
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        return f"{SYSTEM_PYTHON} is {version}, this venv's packages are for {sys.version_info[:2]}"
    return None


@contextmanager
def nobody_folder() -> Iterator[Path]:
    """A fresh 0700 folder owned by nobody, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="hostd-nobody-"))
    os.chown(folder, NOBODY, NOBODY)
    folder.chmod(0o700)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def run_driver(driver: Path, work: Path, *args: str, timeout: float = 60) -> dict[str, Any]:
    """Run ``driver`` as nobody (``work`` as its HOME and first argument); its last stdout line as JSON.

    Fails the test (AssertionError with the stderr tail) when the driver exits non-zero.
    """
    site = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{site}", "LANG": "C.UTF-8", "HOME": str(work)}
    command = [*SETPRIV, SYSTEM_PYTHON, str(driver), str(work), *args]
    with trio.fail_after(timeout):
        done = await trio.run_process(command, env=env, capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result
