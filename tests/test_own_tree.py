"""hostd's own tree is out of reach, in both directions (issue 25, over-granting 1).

The class (sandbox/paths.py ``check_fences``, sandbox/policy.py ``fence_rules``): a rule that lies
*inside* hostd's state folder or another plugin's folder, by whatever route names it. Members tried
here, each with a real hostd and the hostile probe fixture: an argument naming ``<state>/credentials``,
``<state>/secrets`` and ``<state>/state.json``; an env value naming the secrets file; a symlink the user
owns that points into the state folder; another plugin's data folder and prepared environment. And
the bundle member: ``..`` that leaves a bundle's folder (``${__dirname}/../../secrets`` in an env value,
in an argument, in ``--x=`` and as a bare relative path) is refused at install as ``PACKAGE_INVALID``
naming the field. What still works: the plugin's own data folder, named in its own arguments.

As root, Landlock is what denies; the refusals here happen at resolution (``PATH_REFUSED``) for any
user, so they prove the same for an unprivileged one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import ready, spawn_hostd
from tests.platform_facts import need_layers
from tests.test_bundle import NODE, build, mcpb_manifest
from tests.test_sandbox_pinning import probe_plugin, run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Landlock is Linux only")


def _with_env(folder: Path, env: dict[str, str]) -> Path:
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["env"] = env
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def test_rules_inside_the_state_folder_or_another_plugins_are_refused(tmp_path: Path) -> None:
    need_layers("landlock-fs")
    state = Path(os.path.realpath(tmp_path)) / "state"
    async with spawn_hostd(tmp_path) as hostd:
        # Another plugin, running: its data folder exists; and its own data folder, named in its arguments, works.
        own = state / "data" / "probe-a"
        status = await ready(hostd, probe_plugin(tmp_path, "probe-a", args=[str(own / "notes")]))
        assert status["status"] == "ready"
        assert await run(hostd, ["write", str(own / "notes"), "mine"], plugin="probe-a") == ["ok"]
        assert await run(hostd, ["read", str(own / "notes")], plugin="probe-a") == ["mine"]
        (state / "credentials").mkdir(exist_ok=True)
        (state / "secrets").mkdir(mode=0o700, exist_ok=True)  # as the first stored secret makes it
        (state / "prepared" / "probe-a").mkdir(parents=True)
        route = tmp_path / "route"
        route.symlink_to(state / "secrets")
        members: dict[str, tuple[list[str], dict[str, str], str]] = {
            "credentials": ([str(state / "credentials")], {}, str(state / "credentials")),
            "secrets": ([str(state / "secrets")], {}, str(state / "secrets")),
            "state-json": ([str(state / "state.json")], {}, str(state / "state.json")),
            "env-secrets": ([], {"STORE": str(state / "secrets" / "secrets.json")}, str(state / "secrets")),
            "symlink": ([str(route)], {}, str(state / "secrets")),  # named by where it leads
            "other-data": ([str(own)], {}, str(own)),
            "other-prepared": ([str(state / "prepared" / "probe-a")], {}, str(state / "prepared" / "probe-a")),
        }
        for name, (args, env, shown) in members.items():
            folder = _with_env(probe_plugin(tmp_path, f"probe-{name}", args=args), env)
            info = await hostd.request("plugins/install", {"path": str(folder)})
            assert info["launch"].get("kind") == "PATH_REFUSED", (name, info["launch"])
            assert f"{shown}: lies inside {state}, which no plugin may reach" in info["launch"]["error"], name
            await hostd.request("plugins/uninstall", {"id": f"probe-{name}"})
        # The running plugin still reaches only its own: not the secrets file, not another's folder.
        assert await run(hostd, ["read", str(state / "state.json")], plugin="probe-a") == ["EACCES"]


@pytest.mark.parametrize(
    ("where", "config", "field"),
    [
        (
            "env",
            {"command": "node", "args": ["${__dirname}/server/index.js"], "env": {"S": "${__dirname}/../../secrets"}},
            "server.mcp_config.env.S",
        ),
        (
            "arg",
            {"command": "node", "args": ["${__dirname}/server/index.js", "${__dirname}/../data/x"]},
            "server.mcp_config.args.1",
        ),
        (
            "option",
            {"command": "node", "args": ["${__dirname}/server/index.js", "--root=${__dirname}/a/../../../c"]},
            "server.mcp_config.args.1",
        ),
        (
            "relative",
            {"command": "node", "args": ["${__dirname}/server/index.js", "server/../../../state.json"]},
            "server.mcp_config.args.1",
        ),
    ],
)
async def test_dot_dot_out_of_a_bundle_is_refused_at_install(
    tmp_path: Path, hostd: HostdClient, where: str, config: dict[str, Any], field: str
) -> None:
    path = build(
        tmp_path / f"{where}.mcpb",
        mcpb_manifest(server={"type": "node", "entry_point": "server/index.js", "mcp_config": config}),
        {"server/index.js": (NODE / "server.js").read_bytes()},
    )
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"path": str(path)})
    assert refused.value.kind == "PACKAGE_INVALID"
    [error] = refused.value.data["errors"]
    assert error["field"] == field
    assert "leaves the bundle folder" in error["message"]
    assert os.listdir(tmp_path / "state" / "bundles") == []
