"""Preparation's cost: the catalog's packages prepared by today's sandboxed installers and by a baseline.

Usage: ``python -m bench.prepare_cost [rounds] [--baseline REV]``. The baseline is ``prepare.py``
as it stood at git revision ``REV`` (default ``5e0f04b``: the installers ran on the host, unsandboxed),
loaded from ``git show`` into a module of its own, so both run side by side in one process, in
alternating order, each round in a fresh state folder (so each has a cold cache of its own, as a
first preparation does). Packages: the catalog's npm and Python servers (server-memory,
mcp-server-time). Prints JSON: per package and variant the median seconds, and the ratio
sandboxed / baseline (the issue's target: at most 1.2).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import trio

from hostd.cli.client import plugin_environment
from hostd.install import ecosystems, packages, prepare

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "server-memory (npm)": ("npx", ["-y", "@modelcontextprotocol/server-memory@2026.8.31"]),
    "mcp-server-time (uv)": ("uvx", ["mcp-server-time==2026.10.19"]),
}
#: Today's preparation as the three names a baseline's ``prepare.py`` has (split into modules by issue 24).
CURRENT = types.SimpleNamespace(
    parse_package_launch=packages.parse_package_launch, Registries=ecosystems.Registries, prepare=prepare.prepare
)


def _baseline(rev: str) -> types.ModuleType:
    """prepare.py at ``rev`` (in hostd/install/ since issue 24, hostd/ before), as module ``prepare_baseline``.

    Only that one file comes from ``rev``, so ``rev`` must predate issue 24's split of it (the default does):
    after the split, prepare.py imports the working tree's ``packages``, ``installers`` and ``ecosystems``
    and no longer has ``parse_package_launch`` or ``Registries`` (see :data:`CURRENT`).
    """
    # hostd/install/prepare.py since issue 24's moves, hostd/prepare.py before them.
    for where in ("hostd/install/prepare.py", "hostd/prepare.py"):
        command = ["git", "show", f"{rev}:{where}"]
        shown = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        if shown.returncode == 0:
            break
    shown.check_returncode()
    source = shown.stdout
    spec = importlib.util.spec_from_loader("prepare_baseline", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["prepare_baseline"] = module
    exec(compile(source, f"{rev}:{where}", "exec"), module.__dict__)
    return module


async def _once(module: types.ModuleType | types.SimpleNamespace, command: str, args: list[str]) -> float:
    async def progress(step: int, total: int, message: str) -> None:
        pass

    launch = module.parse_package_launch(command, args)
    with tempfile.TemporaryDirectory(prefix="hostd-bench-prepare-") as state:
        started = time.perf_counter()
        await module.prepare(
            Path(state),
            "bench",
            launch,
            registries=module.Registries(),
            path=plugin_environment()["PATH"],
            progress=progress,
            environ={**plugin_environment(), "HOME": state},
        )
        return time.perf_counter() - started


async def main(rounds: int, rev: str) -> dict[str, Any]:
    """Prepare each package ``rounds`` times per variant, alternating; the medians and the ratios."""
    variants: dict[str, types.ModuleType | types.SimpleNamespace] = {"sandboxed": CURRENT, "baseline": _baseline(rev)}
    seconds: dict[str, dict[str, list[float]]] = {name: {v: [] for v in variants} for name in PACKAGES}
    for index in range(rounds):
        order = list(variants) if index % 2 == 0 else list(reversed(variants))
        for name, (command, args) in PACKAGES.items():
            for variant in order:
                seconds[name][variant].append(await _once(variants[variant], command, args))
    result: dict[str, Any] = {"rounds": rounds, "baseline": rev, "packages": {}}
    for name, by_variant in seconds.items():
        medians = {v: statistics.median(s) for v, s in by_variant.items()}
        result["packages"][name] = {
            "median_s": {v: round(m, 3) for v, m in medians.items()},
            "ratio": round(medians["sandboxed"] / medians["baseline"], 3),
        }
    return result


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else 5
    baseline = sys.argv[sys.argv.index("--baseline") + 1] if "--baseline" in sys.argv else "5e0f04b"
    print(json.dumps(trio.run(main, count, baseline), indent=1))
