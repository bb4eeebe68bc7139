"""HOME writes land in a private view (issue 25, under-granting item 5; sandbox/home_view.py).

The class: a server that keeps its own config, cache or state under ``HOME`` - ``~/.toolname``,
``~/.config/<tool>``, ``~/.cache/<tool>``, ``~/.local/share/<tool>``, ``~/.local/state/<tool>`` - and
creates it at start. Under the default profile the real ``HOME`` is not writable (Landlock), so such a
server failed with ``EACCES`` before it served anything. Now its ``HOME`` is ``<data>/home``: its writes
persist there across restarts, the user's real ``HOME`` is untouched, the files the launch grants
under the real ``HOME`` are reached through ``~`` as the real ones, a runtime's startup files
(``~/.npmrc``, ``~/.local/lib``) cannot be planted, and uninstall removes the view.

Real processes: hostd with a temporary ``HOME`` and the probe fixture, whose ``first.py`` creates
``~/.fixture-config`` at start. What it proves for an unprivileged user: nothing here needs root (the
view is folders and symbolic links; Landlock needs none); the tests run as whoever runs the suite.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient
from sandbox.home_view import ASIDE, RESERVED, HomeView, make_view, plan_view
from tests.conftest import ROOT, hostd_with_home
from tests.nobody import nobody_folder, run_driver, skip_reason
from tests.platform_facts import need_layers

PROBE = ROOT / "fixtures" / "mcp-probe"

#: Run before the probe server: creates ~/.fixture-config at start and counts its starts in a file there,
#: and a folder of its own in ~/.config, ~/.cache, ~/.local/share and ~/.local/state; exits 3 (the start
#: fails) when it cannot.
CONFIG_AT_START = """\
import os, runpy, sys
folder = os.path.expanduser("~/.fixture-config")
try:
    os.makedirs(folder, exist_ok=True)
    for place in (".config", ".cache", ".local/share", ".local/state"):
        os.makedirs(os.path.expanduser(f"~/{place}/tool"), exist_ok=True)
    path = os.path.join(folder, "starts")
    count = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as fh:
        fh.write(str(count + 1))
except OSError as exc:
    print(f"fixture-config: {exc}", file=sys.stderr)
    sys.exit(3)
sys.argv = ["server.py"]
runpy.run_path("server.py", run_name="__main__")
"""


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: relative path -> file content, ``"<dir>"`` or ``"-> target"``."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            found[rel] = f"-> {os.readlink(path)}"
        elif path.is_dir():
            found[rel] = "<dir>"
        else:
            found[rel] = path.read_text()
    return found


@pytest.fixture
def home(tmp_path: Path) -> Path:
    need_layers("landlock-fs")  # skips where the kernel has no Landlock, fails where the sandbox lost it
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("clusters: []\n")
    (home / ".config").mkdir()
    (home / ".config" / "other-tool").write_text("the user's own")
    return home


def config_plugin(tmp_path: Path) -> Path:
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    (folder / "first.py").write_text(CONFIG_AT_START)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["args"] = ["first.py"]
    manifest["backend"]["env"] = {"KUBECONFIG": "~/.kube/config"}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def run(hostd: HostdClient, *ops: list[Any]) -> list[Any]:
    result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": list(ops)}})
    outcomes: list[Any] = result["structuredContent"]["results"]
    return outcomes


async def test_a_server_that_creates_its_config_folder_in_home_works_and_the_real_home_is_untouched(
    tmp_path: Path, home: Path
) -> None:
    before = snapshot(home)
    view = tmp_path / "state" / "data" / "mcp-probe" / "home"
    async with hostd_with_home(tmp_path, home) as hostd:
        info = await hostd.request("plugins/install", {"path": str(config_plugin(tmp_path))})
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        assert (await hostd.request("plugins/enable", {"id": "mcp-probe"}))["status"] == "ready"
        private = str(view)
        assert await run(
            hostd,
            ["env", "HOME"],
            ["read", f"{private}/.fixture-config/starts"],
            ["write", f"{private}/.config/tool/settings.json", "{}"],
            ["write", f"{private}/.cache/tool/blob", "c"],
            ["write", f"{private}/.local/share/tool/db", "d"],
            ["write", f"{private}/.local/state/tool/log", "s"],
            ["read", f"{private}/.kube/config"],  # granted by $KUBECONFIG: the real file, through ~
            ["write", f"{private}/.kube/config", "x"],  # ... read-only as granted
            ["read", f"{private}/.config/other-tool"],  # never granted: not in the view
            ["write", f"{private}/.npmrc", "script-shell=/tmp/evil"],  # a runtime's startup file
            ["write", f"{private}/.local/lib/python3.11/site-packages/evil.pth", "import os"],
            ["write", str(home / ".fixture-config"), "x"],
        ) == [
            private,
            "1",
            "ok",
            "ok",
            "ok",
            "ok",
            "clusters: []\n",
            "EACCES",
            "ENOENT",
            "EACCES",  # .npmrc leads to the real HOME's, which the plugin cannot write
            "ENOENT",  # .local/lib leads to the real HOME's, missing there: nothing can be made under it
            "EACCES",
        ]
        await hostd.request("plugins/restart", {"id": "mcp-probe"})
        assert await run(hostd, ["read", f"{private}/.fixture-config/starts"]) == ["2"]  # persists
        assert (view / ".config" / "tool" / "settings.json").read_text() == "{}"
        await hostd.request("plugins/disable", {"id": "mcp-probe"})
        # A start remakes what leads to the real HOME: what the plugin left there is moved aside.
        (view / ".npmrc").unlink()
        (view / ".npmrc").write_text("script-shell=/tmp/evil")
        assert (await hostd.request("plugins/enable", {"id": "mcp-probe"}))["status"] == "ready"
        assert os.readlink(view / ".npmrc") == str(home / ".npmrc")
        assert (view / (".npmrc" + ASIDE)).read_text() == "script-shell=/tmp/evil"
        assert await run(hostd, ["read", f"{private}/.fixture-config/starts"]) == ["3"]
        assert snapshot(home) == before
        await hostd.request("plugins/uninstall", {"id": "mcp-probe"})
        assert not view.exists()
    assert snapshot(home) == before


def test_the_view_links_reserved_and_granted_paths_under_home_only(tmp_path: Path) -> None:
    real = tmp_path / "home"
    view = plan_view(
        str(tmp_path / "data"),
        str(real),
        [str(real / ".kube" / "config"), str(real / ".kube"), str(real), "/etc/hosts", str(real / "docs")],
    )
    assert view.path == str(tmp_path / "data" / "home")
    links = dict(view.links)
    assert links[".kube"] == str(real / ".kube")  # .kube/config lies inside: one link
    assert ".kube/config" not in links
    assert links["docs"] == str(real / "docs")
    assert "." not in links and "" not in links  # HOME itself is never linked
    assert {rel for rel, _ in RESERVED} <= set(links)
    assert all(target == str(real / rel) for rel, target in view.links)


def test_making_the_view_never_follows_a_link_the_plugin_planted(tmp_path: Path) -> None:
    """The plugin writes its view: hostd remakes it through O_NOFOLLOW descriptors, never writing elsewhere."""
    real, outside = tmp_path / "home", tmp_path / "outside"
    real.mkdir()
    outside.mkdir()
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    view = HomeView(str(data / "home"), str(real), ((".config/git", str(real / ".config/git")), (".npmrc", "/x")))
    # The view itself, and a folder on the way, replaced by links to a folder outside it.
    (data / "home").symlink_to(outside)
    make_view(view)
    assert (data / "home").is_dir() and not (data / "home").is_symlink()
    assert sorted(os.listdir(outside)) == []
    shutil.rmtree(data / "home" / ".config")
    (data / "home" / ".config").symlink_to(outside)
    make_view(view)
    assert not (data / "home" / ".config").is_symlink()
    assert os.readlink(data / "home" / ".config" / "git") == str(real / ".config/git")
    assert sorted(os.listdir(outside)) == []
    # A folder of the plugin's own where a link must stand: moved aside, kept.
    os.unlink(data / "home" / ".npmrc")
    (data / "home" / ".npmrc").mkdir()
    (data / "home" / ".npmrc" / "kept").write_text("mine")
    make_view(view)
    assert os.readlink(data / "home" / ".npmrc") == "/x"
    assert (data / "home" / (".npmrc" + ASIDE) / "kept").read_text() == "mine"
    assert sorted(os.listdir(real)) == []


async def test_the_private_home_works_for_an_unprivileged_user() -> None:
    """As nobody (CI runs as root; users do not): a server that creates ~/.fixture-config at start is ready,
    its HOME is the view the capability set lists, its writes land there, the real HOME gets none of them
    (Landlock applied without privilege; the view is folders and links nobody owns)."""
    need_layers("landlock-fs")
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with nobody_folder() as work:
        result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_home_view.py", work, timeout=120)
    view = str(work / "state" / "data" / "mcp-probe" / "home")
    assert result == {"status": "ready", "home": view, "view": [view], "starts": "1", "real": []}
