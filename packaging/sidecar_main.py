"""Entry point of the sidecar executable: ``hostd`` itself, and the supervisor shim.

hostd starts each plugin's shim as ``sys.executable -I -S <sandbox/shim.py> LIFELINE CONTROL``, or its
fork server as ``... shim.py --serve SOCK HOST_PID`` (and probes the kernel with ``... shim.py --probe``).
In the frozen build ``sys.executable`` is this
executable, so the same command line arrives here: when it names the bundled ``shim.py`` (and only
that file), the shim's own ``main`` runs in this process, exactly as ``python -I -S shim.py`` would
run it (the frozen interpreter reads no ``PYTHON*`` variable and no site-packages, as ``-I -S``
asks). Anything else is hostd's command line (``serve``, ``doctor``...).
"""

from __future__ import annotations

import os
import runpy
import sys


def _bundled_shim() -> str:
    base = getattr(sys, "_MEIPASS", os.path.dirname(os.path.abspath(__file__)))
    return os.path.realpath(os.path.join(base, "sandbox", "shim.py"))


def main() -> None:
    """Run the shim when asked for it, else hostd's CLI; exits with their status."""
    argv = sys.argv[1:]
    if len(argv) >= 3 and argv[:2] == ["-I", "-S"]:
        shim = _bundled_shim()
        if os.path.realpath(argv[2]) != shim:
            sys.stderr.write(f"hostd sidecar: only the bundled shim runs this way, not {argv[2]!r}\n")
            os._exit(2)
        sys.argv = [shim, *argv[3:]]
        runpy.run_path(shim, run_name="__main__")  # the shim ends the process itself (os._exit)
        os._exit(0)
    from hostd.cli.hostd import run  # noqa: PLC0415

    run()


if __name__ == "__main__":
    main()
