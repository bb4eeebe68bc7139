"""Private state belongs to an install, not a name (issue 25, over-granting 3).

The class (hostd/host/installs.py): a plugin's data folder or secrets handed to whoever next uses the
same plugin id. Members tried with a real hostd and real plugin processes:

- after an uninstall, a plugin of the same id from another origin (another folder: another author)
  does not read the first one's data, even when its parent asks for ``adoptData``; the first one's
  data is kept aside, not lost, and its own origin gets it back with ``adoptData``;
- a bundle of the same name from another bundle file, installed over a stopped install, does not get
  the first one's secret;
- a ``state.json`` written before installs had identities (no ``install`` in the record) loads
  without loss: the data folder is the current install's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import ready, spawn_hostd
from tests.test_bundle import call_text
from tests.test_sandbox_pinning import probe_plugin, run
from tests.test_secret_arguments import _bundle

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe fixture's data folder rules")


def _author(tmp_path: Path, name: str) -> Path:
    """The probe fixture as ``mcp-probe``, published by ``name`` (its own folder: its own origin)."""
    (tmp_path / name).mkdir()
    folder = probe_plugin(tmp_path / name)
    return folder


async def _enable(hostd: HostdClient, folder: Path, *, adopt: bool = False) -> None:
    info = await hostd.request("plugins/install", {"path": str(folder), **({"adoptData": True} if adopt else {})})
    await hostd.request("plugins/grant", {"id": info["id"], "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    assert (await hostd.request("plugins/enable", {"id": info["id"]}))["status"] == "ready"


async def test_another_origin_of_the_same_id_never_gets_the_first_ones_data(tmp_path: Path) -> None:
    diary = Path(os.path.realpath(tmp_path)) / "state" / "data" / "mcp-probe" / "diary"
    first, second = _author(tmp_path, "author-a"), _author(tmp_path, "author-b")
    async with spawn_hostd(tmp_path) as hostd:
        await _enable(hostd, first)
        assert await run(hostd, ["write", str(diary), "written by A"]) == ["ok"]
        await hostd.request("plugins/uninstall", {"id": "mcp-probe"})

        await _enable(hostd, second, adopt=True)  # the parent asks, but the origin is another one
        assert await run(hostd, ["read", str(diary)]) == ["ENOENT"]
        await hostd.request("plugins/uninstall", {"id": "mcp-probe"})
        [kept] = (Path(os.path.realpath(tmp_path)) / "state" / "kept" / "mcp-probe").iterdir()
        assert (kept / "data" / "diary").read_text() == "written by A"  # kept aside, not lost

        await _enable(hostd, first)  # the same origin, but the parent did not ask: an empty data folder
        assert await run(hostd, ["read", str(diary)]) == ["ENOENT"]
        await hostd.request("plugins/uninstall", {"id": "mcp-probe"})
        await _enable(hostd, first, adopt=True)  # the same origin, and the parent asks
        assert await run(hostd, ["read", str(diary)]) == ["written by A"]


async def test_a_bundle_of_the_same_name_from_another_file_does_not_get_the_secret(tmp_path: Path) -> None:
    async with spawn_hostd(tmp_path) as hostd:
        for author in ("a", "b"):
            (tmp_path / author).mkdir()
        env = {"API_KEY": "${user_config.api_key}"}
        first = _bundle(tmp_path / "a", "same-name", [], env)
        second = _bundle(tmp_path / "b", "same-name", [], env)
        await hostd.request("plugins/install", {"path": str(first)})
        await hostd.request("plugins/configure", {"id": "same-name", "values": {"api_key": "sk-A-0123456789"}})
        info = await hostd.request("plugins/install", {"path": str(second)})
        assert [(c["name"], c["set"]) for c in info["userConfig"]] == [("api_key", False)]
        await hostd.request("plugins/approve", {"id": "same-name", "digest": info["launch"]["digest"]})
        with pytest.raises(RpcError) as missing:
            await hostd.request("plugins/enable", {"id": "same-name"})
        assert missing.value.kind == "CONFIG_REQUIRED"
        # The same file again (an update of the same origin) keeps what the user set.
        await hostd.request("plugins/configure", {"id": "same-name", "values": {"api_key": "sk-B-0123456789"}})
        info = await hostd.request("plugins/install", {"path": str(second)})
        await hostd.request("plugins/approve", {"id": "same-name", "digest": info["launch"]["digest"]})
        assert (await hostd.request("plugins/enable", {"id": "same-name"}))["status"] == "ready"
        assert await call_text(hostd, "same-name.env", {"name": "API_KEY"}) == "sk-B-0123456789"


async def test_a_state_folder_from_before_install_identities_loads_without_loss(tmp_path: Path) -> None:
    diary = Path(os.path.realpath(tmp_path)) / "state" / "data" / "mcp-probe" / "diary"
    folder = _author(tmp_path, "author-a")
    async with spawn_hostd(tmp_path) as hostd:
        await ready(hostd, folder)
        assert await run(hostd, ["write", str(diary), "older"]) == ["ok"]
    document = tmp_path / "state" / "state.json"
    stored = json.loads(document.read_text())
    stored["plugins"]["mcp-probe"].pop("install")  # as an older hostd wrote it
    document.write_text(json.dumps(stored))
    async with spawn_hostd(tmp_path) as hostd:
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
        assert await run(hostd, ["read", str(diary)]) == ["older"]
        await hostd.request("plugins/uninstall", {"id": "mcp-probe"})
        await _enable(hostd, folder, adopt=True)
        assert await run(hostd, ["read", str(diary)]) == ["older"]


def _secrets_file(tmp_path: Path) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads((tmp_path / "state" / "secrets" / "secrets.json").read_text())
    return stored


def _install_id(tmp_path: Path, plugin_id: str) -> str:
    record = json.loads((tmp_path / "state" / "state.json").read_text())["plugins"][plugin_id]
    install_id: str = record["install"]["id"]
    return install_id


async def _enable_bundle(hostd: HostdClient, path: Path, *, adopt: bool = False) -> dict[str, Any]:
    info: dict[str, Any] = await hostd.request("plugins/install", {"path": str(path), "adoptData": adopt})
    await hostd.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    return info


async def test_secrets_belong_to_the_install_and_are_kept_aside_at_uninstall_like_its_data(tmp_path: Path) -> None:
    """Secrets are keyed ``<id>#<install id>``; uninstall keeps them for that install only: another origin of
    the same id never gets them (adoptData or not), the same origin gets them back with adoptData."""
    for author in ("a", "b"):
        (tmp_path / author).mkdir()
    env = {"API_KEY": "${user_config.api_key}"}
    first, second = (_bundle(tmp_path / a, "same-name", [], env) for a in ("a", "b"))
    async with spawn_hostd(tmp_path) as hostd:
        await _enable_bundle(hostd, first)
        await hostd.request("plugins/configure", {"id": "same-name", "values": {"api_key": "sk-A-0123456789"}})
        first_install = _install_id(tmp_path, "same-name")
        assert _secrets_file(tmp_path)["plugins"] == {f"same-name#{first_install}": {"api_key": "sk-A-0123456789"}}
        await hostd.request("plugins/uninstall", {"id": "same-name"})
        # Kept aside, for that install only (its data folder was empty: the identity is kept for the secrets).
        assert _secrets_file(tmp_path)["plugins"] == {f"same-name#{first_install}": {"api_key": "sk-A-0123456789"}}
        kept = tmp_path / "state" / "kept" / "same-name" / first_install / "install.json"
        assert json.loads(kept.read_text())["origin"] == f"mcpb:{first}"

        info = await _enable_bundle(hostd, second, adopt=True)  # another author's bundle, the parent asks
        assert [(c["name"], c["set"]) for c in info["userConfig"]] == [("api_key", False)]
        with pytest.raises(RpcError) as missing:
            await hostd.request("plugins/enable", {"id": "same-name"})
        assert (missing.value.kind, missing.value.data["missing"]) == ("CONFIG_REQUIRED", ["api_key"])
        await hostd.request("plugins/uninstall", {"id": "same-name"})

        info = await _enable_bundle(hostd, first, adopt=True)  # the first author's again, the parent asks
        assert [(c["name"], c["set"]) for c in info["userConfig"]] == [("api_key", True)]
        assert (await hostd.request("plugins/enable", {"id": "same-name"}))["status"] == "ready"
        assert await call_text(hostd, "same-name.env", {"name": "API_KEY"}) == "sk-A-0123456789"
        assert _secrets_file(tmp_path)["plugins"] == {
            f"same-name#{_install_id(tmp_path, 'same-name')}": {"api_key": "sk-A-0123456789"}
        }
        assert not kept.exists()


async def test_a_secrets_file_keyed_by_plugin_id_is_migrated_to_the_installs_without_loss(tmp_path: Path) -> None:
    """A store an older hostd wrote (``{plugin id: {NAME: value}}``): each id's secrets go to its install; an id
    no plugin has keeps its secrets under ``<id>#unclaimed``, which a later install of that id never gets."""
    (tmp_path / "a").mkdir()
    folder = _bundle(tmp_path / "a", "same-name", [], {"API_KEY": "${user_config.api_key}"})
    async with spawn_hostd(tmp_path) as hostd:
        await _enable_bundle(hostd, folder)
    older = {"backend": "file", "plugins": {"same-name": {"api_key": "sk-old"}, "gone": {"TOKEN": "t-gone"}}}
    (tmp_path / "state" / "secrets").mkdir(mode=0o700, exist_ok=True)
    (tmp_path / "state" / "secrets" / "secrets.json").write_text(json.dumps(older))
    document = tmp_path / "state" / "state.json"
    stored = json.loads(document.read_text())
    stored["plugins"]["same-name"].pop("install")  # as an older hostd wrote it
    document.write_text(json.dumps(stored))
    async with spawn_hostd(tmp_path) as hostd:
        assert (await hostd.request("plugins/enable", {"id": "same-name"}))["status"] == "ready"
        assert await call_text(hostd, "same-name.env", {"name": "API_KEY"}) == "sk-old"
        install_id = _install_id(tmp_path, "same-name")  # recorded now
        assert _secrets_file(tmp_path)["plugins"] == {
            f"same-name#{install_id}": {"api_key": "sk-old"},
            "gone#unclaimed": {"TOKEN": "t-gone"},
        }
    async with spawn_hostd(tmp_path) as hostd:  # again: the same install, the same secrets
        assert (await hostd.request("plugins/enable", {"id": "same-name"}))["status"] == "ready"
        assert await call_text(hostd, "same-name.env", {"name": "API_KEY"}) == "sk-old"
        assert _install_id(tmp_path, "same-name") == install_id
