"""A plugin's network allowlist (issue 26): the manifest field ``network``, shown in ``launch.network``, covered by
the approval digest, granted and revoked by the parent (``plugins/grant networkHosts``) and by hostctl.

The class: *an allowlist entry the user did not see, or saw in another spelling than the one enforced*. Members:
a manifest entry outside the grammar (refused at install, naming the field), a granted entry outside it (refused
with every bad entry named, nothing changed), two spellings of one host (one canonical entry shown), a grant
that changes what the plugin may reach (a new digest: approve again), a revoked grant (the old digest again),
and a plugin without a ``network`` field (no allowlist: today's network, its digest unchanged).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import RpcError
from tests.conftest import ROOT, run_hostctl, spawn_hostd

PROBE = ROOT / "fixtures" / "mcp-probe"


def networked_probe(tmp_path: Path, network: dict[str, Any] | None, name: str = "mcp-probe") -> Path:
    """fixtures/mcp-probe copied, with ``network`` as its manifest's field (None: no field)."""
    folder = tmp_path / "plugins" / name
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["id"], manifest["contributes"]["tools"] = name, [f"{name}.run"]
    if network is not None:
        manifest["network"] = network
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def test_allowlist_is_shown_covered_by_the_digest_granted_and_revoked(tmp_path: Path) -> None:
    folder = networked_probe(tmp_path, {"hosts": ["API.Example.com.", "*.pypi.org", "[::1]:8200"]})
    async with spawn_hostd(tmp_path) as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        assert info["launch"]["network"] == {"hosts": ["*.pypi.org", "[::1]:8200", "api.example.com"], "private": []}
        assert "networkHosts" not in info
        first = info["launch"]["digest"]
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": first})

        info = await hostd.request(
            "plugins/grant",
            {"id": "mcp-probe", "permissions": [], "networkHosts": ["Vault.test:8200", "127.0.0.1:9000"]},
        )
        assert info["networkHosts"] == ["127.0.0.1:9000", "vault.test:8200"]
        assert info["launch"]["network"]["hosts"] == [
            "*.pypi.org",
            "127.0.0.1:9000",
            "[::1]:8200",
            "api.example.com",
            "vault.test:8200",
        ]
        assert info["launch"]["digest"] != first
        assert info["launch"]["approved"] is False  # a host granted is something new to approve

        with pytest.raises(RpcError) as refused:
            await hostd.request(
                "plugins/grant",
                {"id": "mcp-probe", "permissions": [], "networkHosts": ["ok.example.com", "127.1", "https://x.org"]},
            )
        assert refused.value.kind == "INVALID_PARAMS"
        assert [bad["entry"] for bad in refused.value.data["networkHosts"]] == ["127.1", "https://x.org"]
        assert "four decimal parts" in refused.value.data["networkHosts"][0]["reason"]
        [listed] = (await hostd.request("plugins/list", {}))["plugins"]
        assert listed["networkHosts"] == ["127.0.0.1:9000", "vault.test:8200"]  # nothing changed

        info = await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": [], "networkHosts": []})
        assert "networkHosts" not in info
        assert info["launch"]["network"]["hosts"] == ["*.pypi.org", "[::1]:8200", "api.example.com"]
        assert info["launch"]["digest"] == first
        assert info["launch"]["approved"] is True  # revoked: exactly the launch approved before

        info = await hostd.request(
            "plugins/grant", {"id": "mcp-probe", "permissions": [], "networkHosts": ["x.example.org"]}
        )
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert stored["plugins"]["mcp-probe"]["networkHosts"] == ["x.example.org"]


async def test_bad_manifest_entries_are_refused_and_no_field_means_no_allowlist(tmp_path: Path) -> None:
    bad = networked_probe(tmp_path, {"hosts": ["ok.example.com", "*.com", "0x7f.0.0.1:80"], "private": ["a b"]})
    plain = networked_probe(tmp_path, None, name="plain")
    async with spawn_hostd(tmp_path) as hostd:
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/install", {"path": str(bad)})
        info = await hostd.request("plugins/install", {"path": str(plain)})
    assert refused.value.kind == "MANIFEST_INVALID"
    errors = {e["field"]: e["message"] for e in refused.value.data["errors"]}
    assert sorted(errors) == ["network.hosts.1", "network.hosts.2", "network.private.0"]
    assert "two labels" in errors["network.hosts.1"]
    assert "four decimal parts" in errors["network.hosts.2"]
    assert "network" not in info["launch"]
    assert info["launch"]["capabilities"]["network"] == {"access": "all", "tcpPorts": []}


async def test_where_the_allowlist_is_not_enforced_the_launch_says_so(tmp_path: Path) -> None:
    """Under --sandbox basic (as on a kernel without unprivileged namespaces) the plugin keeps the level's
    network; the approval still shows its hosts and says they are not enforced, and why."""
    folder = networked_probe(tmp_path, {"hosts": ["api.example.com"]})
    async with spawn_hostd(tmp_path, "--sandbox", "basic") as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
    assert "netproxy" not in info["launch"]["isolation"]
    assert info["launch"]["network"] == {"hosts": ["api.example.com"], "private": []}
    assert info["launch"]["capabilities"]["network"] == {
        "access": "all",
        "tcpPorts": [],
        "hosts": ["api.example.com"],
        "filtering": "not enforced: --sandbox basic applies no network isolation",
    }


async def test_hostctl_grants_and_revokes_hosts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    folder = networked_probe(tmp_path, {"hosts": ["api.example.com"]})
    env = {**os.environ, "HOSTD_SECRETS": "file"}

    async def hostctl(*args: str) -> subprocess.CompletedProcess[str]:
        return await run_hostctl(state, *args, env=env)

    assert (await hostctl("install", str(folder))).returncode == 0
    added = await hostctl("grant", "mcp-probe", "--host", "Files.Example.org:8443", "--host", "10.0.0.7")
    assert added.returncode == 0, added.stderr
    assert "mcp-probe: network hosts granted: 10.0.0.7, files.example.org:8443" in added.stdout
    revoked = await hostctl("grant", "mcp-probe", "--revoke-host", "FILES.example.org.:8443")
    assert revoked.returncode == 0, revoked.stderr
    assert "mcp-probe: network hosts granted: 10.0.0.7" in revoked.stdout
