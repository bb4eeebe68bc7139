"""The sidecar build (packaging/build_sidecar.py) runs the same end-to-end flow as ``python -m hostd``.

The class of bug: a frozen build that starts but cannot do the work: a module imported by name
missing (hostd.host.service), the supervisor shim not found or not runnable (it is the same executable,
started as ``<exe> -I -S <bundled shim.py>``), its layer modules missing, package metadata or data
files missing (opentelemetry's context, jsonschema's specifications). Members checked: the
TypeScript client's whole Node flow (install .. shutdown, with the shim's reported layers equal to
the launch's, a malformed line, a crash) and the example app against the built executable; the shim
entry point refusing any file but the bundled shim; ``doctor``'s kernel probe (which runs the shim).

``.ci/run`` builds the sidecar before pytest; elsewhere the module is skipped until it is built.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_typescript_client import PACKAGE, REPO, compiled_node, run_example_app, run_node_tests, written_tests

sys.path.insert(0, str(REPO / "packaging"))
from build_sidecar import target_triple  # type: ignore[import-not-found]

sys.path.pop(0)

NAME = f"hostd-{target_triple()}"
SIDECAR = REPO / "dist" / NAME / NAME

pytestmark = pytest.mark.sidecar


@pytest.fixture(scope="module")
def sidecar() -> Path:
    if not SIDECAR.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{SIDECAR} is not built: .ci/run runs packaging/build_sidecar.py before pytest")
        pytest.skip(f"{SIDECAR} is not built (python packaging/build_sidecar.py)")
    return SIDECAR


def test_sidecar_is_named_for_tauri(sidecar: Path) -> None:
    assert sidecar.name == sidecar.parent.name == NAME
    assert (sidecar.parent / "_internal" / "sandbox" / "shim.py").is_file()
    assert os.access(sidecar, os.X_OK)


def test_node_flow_through_the_sidecar(sidecar: Path) -> None:
    node = compiled_node()
    stdout = run_node_tests(node, ["dist/test/e2e.test.js", "dist/test/tauri.test.js"], [str(sidecar)])
    written = written_tests(PACKAGE / "test" / "e2e.test.ts", PACKAGE / "test" / "tauri.test.ts")
    assert written >= 6
    assert f"# pass {written}\n" in stdout, stdout[-3000:]


def test_example_app_through_the_sidecar(sidecar: Path, tmp_path: Path) -> None:
    run_example_app(tmp_path, [str(sidecar)])


@pytest.mark.parametrize(
    "target",
    ["/etc/passwd", "{repo}/sandbox/shim.py", "{bundle}/sandbox/../sandbox/_landlock.py"],
    ids=["foreign-file", "source-shim", "layer-module"],
)
def test_shim_entry_runs_only_the_bundled_shim(sidecar: Path, target: str) -> None:
    path = target.format(repo=REPO, bundle=sidecar.parent / "_internal")
    done = subprocess.run(
        [str(sidecar), "-I", "-S", path, "3", "4"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2
    assert done.stderr == f"hostd sidecar: only the bundled shim runs this way, not {path!r}\n"


def test_doctor_probes_through_the_bundled_shim(sidecar: Path) -> None:
    done = subprocess.run([str(sidecar), "doctor"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    shim_row = next(line for line in done.stdout.splitlines() if line.startswith("shim "))
    assert shim_row.split()[1] == "yes"
