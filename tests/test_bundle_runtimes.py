"""MCPB ``compatibility.runtimes``: ranges in both syntaxes, checked at install against the launch's runtime."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError
from hostd.install import bundle, runtimes
from hostd.wire.errors import HostError
from tests.conftest import ECHO
from tests.test_bundle import build, mcpb_manifest, node_bundle

# The class: a range in the syntax its ecosystem writes (PEP 440 for python, with npm ranges accepted too;
# npm semver for node), a version inside or outside it, a pre-release counting as its release.
CASES: list[tuple[runtimes.Runtime, str, str, bool]] = [
    ("python", ">=3.10", "3.9.18", False),
    ("python", ">=3.10", "3.10.0", True),
    ("python", ">=3.10", "3.13.0rc1", True),
    ("python", ">=3.8,<4.0", "3.12.1", True),
    ("python", ">=3.8,<4.0", "4.0.0", False),
    ("python", "~=3.11", "3.11.9", True),
    ("python", "~=3.11", "4.0.0", False),
    ("python", "==3.12.*", "3.12.4", True),
    ("python", "==3.12.*", "3.11.4", False),
    ("python", "^3.10", "3.11.2", True),
    ("python", "^3.10", "3.9.0", False),
    ("python", ">=3.8 <4", "3.13.0rc1", True),
    ("python", "3.x", "2.7.18", False),
    ("node", ">=18.0.0", "18.0.0", True),
    ("node", ">=18.0.0", "17.9.1", False),
    ("node", ">=18", "22.3.0", True),
    ("node", "^18", "18.19.1", True),
    ("node", "^18", "20.1.0", False),
    ("node", "18.x", "18.2.0", True),
    ("node", "18.x", "19.0.0", False),
    ("node", "~18.2", "18.2.9", True),
    ("node", "~18.2", "18.3.0", False),
    ("node", ">=18 <21", "20.20.2", True),
    ("node", ">=18 <21", "21.0.0", False),
    ("node", "18 || 20", "20.1.0", True),
    ("node", "18 || 20", "19.1.0", False),
    ("node", ">=18", "23.0.0-nightly20240101", True),
]


@pytest.mark.parametrize(("runtime", "spec", "version", "inside"), CASES)
def test_ranges(runtime: runtimes.Runtime, spec: str, version: str, inside: bool) -> None:
    assert runtimes.satisfies(runtime, version, spec) is inside


def test_manifest_ranges_are_validated(tmp_path: Path) -> None:
    folder = tmp_path / "b"
    compat = {"runtimes": {"python": "newest", "node": ">=3.8,<4.0"}}
    mcpb = bundle.McpbManifest.model_validate(mcpb_manifest(compatibility=compat))
    with pytest.raises(HostError) as refused:
        bundle.plugin_manifest(mcpb, folder, sha256="", signature="unsigned", source="")
    assert refused.value.data["errors"] == [
        {
            "field": "compatibility.runtimes.python",
            "message": "'newest' is not a PEP 440 specifier (>=3.10) or an npm range",
        },
        {"field": "compatibility.runtimes.node", "message": "'>=3.8,<4.0' is not an npm semver range"},
    ]
    assert runtimes.range_problem("ruby", ">=3") == "unknown runtime 'ruby' (MCPB defines 'python' and 'node')"
    assert runtimes.range_problem("node", " ") == "an empty range"
    good = bundle.McpbManifest.model_validate(mcpb_manifest(compatibility={"runtimes": {"node": "^20"}}))
    document = bundle.plugin_manifest(good, folder, sha256="", signature="unsigned", source="")
    assert document["origin"]["runtimes"] == {"node": "^20"}


def node_version() -> tuple[str, str]:
    """The node the launch finds (PATH), as the test sees it: (real path, version without 'v')."""
    found = shutil.which("node")
    assert found is not None
    printed = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    return os.path.realpath(found), printed.removeprefix("v")


def python_bundle(tmp_path: Path, spec: str) -> Path:
    config = {"command": "python3", "args": ["${__dirname}/server/server.py"]}
    return build(
        tmp_path / "py.mcpb",
        mcpb_manifest(
            name="py-echo",
            server={"type": "python", "entry_point": "server/server.py", "mcp_config": config},
            compatibility={"runtimes": {"python": spec}},
        ),
        {"server/server.py": (ECHO / "server.py").read_bytes()},
    )


async def refusal(client: HostdClient, path: Path) -> dict[str, Any]:
    with pytest.raises(RpcError) as refused:
        await client.request("plugins/install", {"path": str(path)})
    assert refused.value.kind == "PACKAGE_INVALID"
    data = dict(refused.value.data)
    assert data.pop("errors") == [
        {"field": f"compatibility.runtimes.{data['runtime']}", "message": refused.value.message}
    ]
    data.pop("kind", None)
    return {"message": refused.value.message, **data}


async def test_install_checks_the_launch_runtime(tmp_path: Path, hostd: HostdClient) -> None:
    node, version = node_version()
    major = int(version.split(".")[0])
    fits = node_bundle(tmp_path, compatibility={"runtimes": {"node": f"^{major}"}})
    info = await hostd.request("plugins/install", {"path": str(fits)})
    assert info["origin"]["runtimes"] == {"node": f"^{major}"}
    assert info["origin"]["runtimeVersions"] == {"node": version}
    listed = await hostd.request("plugins/list", {})
    assert listed["plugins"][0]["origin"]["runtimeVersions"] == {"node": version}
    await hostd.request("plugins/uninstall", {"id": "node-echo"})

    for spec in (f">={major + 1}", f"{major - 1}.x", f"<{major}.0.0"):
        too_new = node_bundle(tmp_path, compatibility={"runtimes": {"node": spec}})
        assert await refusal(hostd, too_new) == {
            "message": f"the bundle needs node {spec}; {node} is node {version}",
            "reason": "runtime-unsupported",
            "runtime": "node",
            "required": spec,
            "found": version,
            "executable": node,
        }
        assert os.listdir(tmp_path / "state" / "bundles") == []  # nothing of it is kept
        assert (await hostd.request("plugins/list", {}))["plugins"] == []

    python = os.path.realpath(sys.executable)  # the launch's python3 (conftest: this interpreter first on PATH)
    here = ".".join(str(part) for part in sys.version_info[:3])
    info = await hostd.request("plugins/install", {"path": str(python_bundle(tmp_path, ">=3.10,<4"))})
    assert info["origin"]["runtimeVersions"] == {"python": here}
    await hostd.request("plugins/uninstall", {"id": "py-echo"})
    assert await refusal(hostd, python_bundle(tmp_path, "<3.10")) == {
        "message": f"the bundle needs python <3.10; {python} is python {here}",
        "reason": "runtime-unsupported",
        "runtime": "python",
        "required": "<3.10",
        "found": here,
        "executable": python,
    }
    # A runtime the launch does not run (a node server naming python) is not held against it.
    both = node_bundle(tmp_path, compatibility={"runtimes": {"node": f">={major}", "python": "<3"}})
    info = await hostd.request("plugins/install", {"path": str(both)})
    assert info["origin"]["runtimeVersions"] == {"node": version}


async def test_install_never_runs_the_bundles_own_files(tmp_path: Path, hostd: HostdClient) -> None:
    """A security review found install ran the bundle's own ``${__dirname}/bin/node`` (a shell script) to ask its
    version: the plugin's code, outside the sandbox, before any approval. A runtime inside the plugin's folder
    is now reported with no version and never run; a range hostd cannot check cheaply is refused first."""
    marker = tmp_path / "ran"
    script = f"#!/bin/sh\necho ran > {marker}\necho v99.0.0\n".encode()
    config = {"command": "${__dirname}/bin/node", "args": []}
    manifest = mcpb_manifest(
        name="own-node",
        server={"type": "binary", "entry_point": "bin/node", "mcp_config": config},
        compatibility={"runtimes": {"node": ">=1"}},
    )
    path = tmp_path / "own.mcpb"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        executable = zipfile.ZipInfo("bin/node")
        executable.create_system = 3  # unix: the mode is in the high 16 bits
        executable.external_attr = 0o100755 << 16
        archive.writestr(executable, script)
    info = await hostd.request("plugins/install", {"path": str(path)})
    assert info["origin"]["runtimes"] == {"node": ">=1"}
    assert info["origin"].get("runtimeVersions", {}) == {}
    assert not marker.exists()

    spec = "1" + " " * 40_000 + "x"  # node-semver's parser is quadratic in the length (26 s for this one)
    with pytest.raises(RpcError) as refused:
        await hostd.request(
            "plugins/install", {"path": str(node_bundle(tmp_path, compatibility={"runtimes": {"node": spec}}))}
        )
    assert refused.value.kind == "PACKAGE_INVALID"
    assert refused.value.data["errors"] == [
        {"field": "compatibility.runtimes.node", "message": "a range of 40002 characters (at most 256)"}
    ]
