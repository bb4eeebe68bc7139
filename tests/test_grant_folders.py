"""``plugins/grant {id, folders: {read, write}}``: folders the parent grants to one plugin.

The class: a folder a server needs that neither its manifest nor its arguments name (a notes
folder, an output folder). The parent grants it per plugin; the grant is a sandbox rule like every
other (checked by ``sandbox.paths``: no home, no state folder, no link a plugin can write), shown
in ``launch.folders``, covered by the digest (a change voids the approval) and kept across
restarts of hostd. Members: read-only and read-write grants, ``~`` and absolute paths, revoking,
refused grants (the home, the state folder, relative and missing paths), and a start the sandbox
broke, whose ``data.hint`` names the path and the grant that would allow it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import ROOT, hostd_with_home
from tests.platform_facts import need_layers

PROBE = ROOT / "fixtures" / "mcp-probe"


def _need_landlock() -> None:
    need_layers("landlock-fs")  # skips where the kernel has no Landlock, fails where the sandbox lost it


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with ``docs/a.txt``, an empty ``out`` and ``other/b.txt``."""
    _need_landlock()
    home = tmp_path / "home"
    for name in ("docs", "out", "other"):
        (home / name).mkdir(parents=True)
    (home / "docs" / "a.txt").write_text("granted to read")
    (home / "other" / "b.txt").write_text("never granted")
    return home


def probe_plugin(tmp_path: Path, script: str | None = None) -> Path:
    """fixtures/mcp-probe copied outside the home; ``script``: run first (then the probe server)."""
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    if script is not None:
        (folder / "first.py").write_text(script)
        manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
        manifest["backend"]["args"] = ["first.py"]
        (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def approve_and_enable(hostd: HostdClient, info: dict[str, Any]) -> dict[str, Any]:
    await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
    status: dict[str, Any] = await hostd.request("plugins/enable", {"id": "mcp-probe"})
    return status


def hidden(ops: tuple[list[Any], ...]) -> list[list[Any]]:
    """``ops`` with each absolute path written ``@/path`` (fixtures/mcp-probe reads it as ``/path``): hidden from
    hostd's call-time grants (tests/test_call_grants.py), so what these tests see refused is the kernel's doing."""
    return [[f"@{a}" if isinstance(a, str) and a.startswith("/") else a for a in op] for op in ops]


async def run(hostd: HostdClient, *ops: list[Any]) -> list[Any]:
    result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": hidden(ops)}})
    outcomes: list[Any] = result["structuredContent"]["results"]
    return outcomes


async def grant(hostd: HostdClient, folders: dict[str, list[str]]) -> dict[str, Any]:
    info: dict[str, Any] = await hostd.request(
        "plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"], "folders": folders}
    )
    return info


def granted(info: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in info["launch"]["folders"].items() if k.startswith("grant.")}


async def test_granted_folders_are_this_plugins_to_read_or_write(tmp_path: Path, home: Path) -> None:
    docs, out, other = home / "docs", home / "out", home / "other"
    async with hostd_with_home(tmp_path, home) as hostd:
        info = await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path))})
        info = await grant(hostd, {})
        assert granted(info) == {}
        await approve_and_enable(hostd, info)
        ops = [["read", str(docs / "a.txt")], ["write", str(out / "x.txt"), "x"], ["read", str(other / "b.txt")]]
        assert await run(hostd, *ops) == ["EACCES", "EACCES", "EACCES"]
        await hostd.request("plugins/disable", {"id": "mcp-probe"})

        info = await grant(hostd, {"read": ["~/docs"], "write": [str(out)]})
        assert granted(info) == {"grant.read[0]": str(docs), "grant.write[0]": str(out)}
        assert info["launch"]["approved"] is False  # the grant is part of the launch: approve again
        with pytest.raises(RpcError) as unapproved:
            await hostd.request("plugins/enable", {"id": "mcp-probe"})
        assert unapproved.value.kind == "MCP_TRUST_APPROVAL_REQUIRED"
        assert granted(unapproved.value.data) == granted(info)

        assert (await approve_and_enable(hostd, info))["status"] == "ready"
        assert await run(
            hostd,
            ["read", str(docs / "a.txt")],
            ["write", str(docs / "new.txt"), "no"],
            ["write", str(out / "x.txt"), "written"],
            ["read", str(out / "x.txt")],
            ["read", str(other / "b.txt")],
        ) == ["granted to read", "EACCES", "ok", "written", "EACCES"]
        assert not (docs / "new.txt").exists()
        await hostd.request("plugins/disable", {"id": "mcp-probe"})

        # Revoked: {} replaces the grants.
        info = await grant(hostd, {})
        assert granted(info) == {}
        assert (await approve_and_enable(hostd, info))["status"] == "ready"
        assert await run(hostd, ["read", str(docs / "a.txt")]) == ["EACCES"]


async def test_folder_grants_are_kept_across_restarts_of_hostd(tmp_path: Path, home: Path) -> None:
    async with hostd_with_home(tmp_path, home) as hostd:
        await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path))})
        info = await grant(hostd, {"read": [str(home / "docs")]})
        await approve_and_enable(hostd, info)
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert stored["plugins"]["mcp-probe"]["folders"] == {"read": [str(home / "docs")]}
    async with hostd_with_home(tmp_path, home) as hostd:
        await hostd.wait_for("plugins/statusChanged", lambda n: n["status"] == "ready")
        [listed] = (await hostd.request("plugins/list", {}))["plugins"]
        assert granted(listed) == {"grant.read[0]": str(home / "docs")}
        assert listed["launch"]["approved"] is True
        assert await run(hostd, ["read", str(home / "docs" / "a.txt")]) == ["granted to read"]


@pytest.mark.parametrize(
    ("folders", "said"),
    [
        ({"write": ["~"]}, "home"),
        ({"read": ["{home}"]}, "home"),
        ({"write": ["{state}"]}, "state"),
        ({"read": ["docs"]}, "is not an absolute or ~ path"),
        ({"read": ["~/missing"]}, "does not exist"),
    ],
)
async def test_a_folder_the_sandbox_refuses_is_not_granted(
    tmp_path: Path, home: Path, folders: dict[str, list[str]], said: str
) -> None:
    folders = {k: [p.format(home=home, state=tmp_path / "state") for p in v] for k, v in folders.items()}
    async with hostd_with_home(tmp_path, home) as hostd:
        await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path))})
        before = await grant(hostd, {"read": [str(home / "docs")]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": before["launch"]["digest"]})
        with pytest.raises(RpcError) as refused:
            await grant(hostd, folders)
        assert refused.value.kind == "INVALID_PARAMS"
        assert said in refused.value.message
        # Nothing of the request was applied: the earlier grant and its approval stand.
        [after] = (await hostd.request("plugins/list", {}))["plugins"]
        assert granted(after) == {"grant.read[0]": str(home / "docs")}
        assert after["launch"]["approved"] is True


#: Reads a file at start, as a server reading its configuration does; then serves as the probe.
READS_AT_START = """\
import runpy, sys
try:
    open({path!r}).read()
except OSError as exc:
    print(f"PermissionError: [Errno {{exc.errno}}] {{exc.strerror}}: {path!r}", file=sys.stderr)
    sys.exit(1)
runpy.run_path("server.py", run_name="__main__")
"""


async def test_a_start_the_sandbox_broke_hints_the_folder_grant(tmp_path: Path, home: Path) -> None:
    needed = home / "docs" / "a.txt"
    async with hostd_with_home(tmp_path, home) as hostd:
        folder = probe_plugin(tmp_path, READS_AT_START.format(path=str(needed)))
        await hostd.request("plugins/install", {"path": str(folder)})
        info = await grant(hostd, {})
        with pytest.raises(RpcError) as failed:
            await approve_and_enable(hostd, info)
        assert failed.value.kind == "PLUGIN_START_FAILED"
        hint = failed.value.data["hint"]
        assert hint.startswith(f"the sandbox refused {needed}: ")
        grant_request = json.dumps({"id": "mcp-probe", "folders": {"write": [str(needed)]}}, separators=(",", ":"))
        assert f"plugins/grant {grant_request}" in hint
        # The grant the hint names (read is enough here) lets it start.
        info = await grant(hostd, {"read": [os.path.dirname(needed)]})
        assert (await approve_and_enable(hostd, info))["status"] == "ready"
