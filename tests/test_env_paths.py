"""Env values that name files are grants, not refusals (issue 25, under-granting item 6).

The class: a server configured through an environment variable whose value names a file or a folder
(``KUBECONFIG=~/.kube/config``, ``AWS_CONFIG_FILE``, ``GOOGLE_APPLICATION_CREDENTIALS``, an ``.mcpb``
``user_config`` option of type ``file`` passed through ``env``). Such a value is handled like an argument
naming the same path: expanded, resolved, pinned by the digest, listed in ``launch.folders`` under
``$NAME``, and granted read-only (a file) unless declared writable. The env policy refuses only the
variables that make a runtime of the launch chain load or run other code (``LD_PRELOAD``,
``NODE_OPTIONS``, ``PYTHONSTARTUP`` ...; the table in ``sandbox/env_families.py``, rendered into
sandbox/README.md), with advice the user can follow; every other variable passes
(``PUPPETEER_SKIP_DOWNLOAD``, ``DOCKER_HOST``, ``XDG_CONFIG_HOME``).

Real processes throughout: hostd with a temporary ``HOME`` and the probe fixture (its ``run`` tool
tries file operations and answers the errno).
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError
from sandbox.env_families import REMOVE_ADVICE
from sandbox.environment import EnvPolicy, build_environment, env_family, env_policy_message
from tests.conftest import ROOT, hostd_with_home
from tests.platform_facts import need_layers
from tests.test_grant_folders import hidden

PROBE = ROOT / "fixtures" / "mcp-probe"

#: Run before the probe server: reads the file $KUBECONFIG names at start, as kubectl-based servers do,
#: and exits 3 (the start fails) when it cannot.
READ_AT_START = """\
import os, runpy, sys
with open(os.environ["KUBECONFIG"], encoding="utf-8") as fh:
    if "clusters:" not in fh.read():
        sys.exit(3)
sys.argv = ["server.py"]
runpy.run_path("server.py", run_name="__main__")
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with ``.kube/config`` (and a neighbour never granted) and ``.aws/config``."""
    need_layers("landlock-fs")  # skips where the kernel has no Landlock, fails where the sandbox lost it
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nclusters: []\n")
    (home / ".kube" / "other").write_text("not named by any variable")
    (home / ".aws").mkdir()
    (home / ".aws" / "config").write_text("[default]\nregion = eu-west-1\n")
    return home


def probe_plugin(tmp_path: Path, env: dict[str, str], *, read_at_start: bool = True) -> Path:
    """fixtures/mcp-probe copied outside the home, with ``env``; configured only through it."""
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["env"] = env
    if read_at_start:
        (folder / "first.py").write_text(READ_AT_START)
        manifest["backend"]["args"] = ["first.py"]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def run(hostd: HostdClient, plugin: str, *ops: list[Any]) -> list[Any]:
    """The probe's ``ops``, paths hidden from call-time grants: what is refused here is the kernel's doing."""
    result = await hostd.request("tools/call", {"name": f"{plugin}.run", "arguments": {"ops": hidden(ops)}})
    outcomes: list[Any] = result["structuredContent"]["results"]
    return outcomes


async def enable(hostd: HostdClient, plugin: str, info: dict[str, Any]) -> dict[str, Any]:
    await hostd.request("plugins/grant", {"id": plugin, "permissions": ["probe.run"]})
    await hostd.request("plugins/approve", {"id": plugin, "digest": info["launch"]["digest"]})
    status: dict[str, Any] = await hostd.request("plugins/enable", {"id": plugin})
    return status


async def test_a_server_configured_only_by_env_paths_starts_and_reads_them_read_only(
    tmp_path: Path, home: Path
) -> None:
    kube, aws = home / ".kube" / "config", home / ".aws" / "config"
    env = {"KUBECONFIG": "~/.kube/config", "AWS_CONFIG_FILE": "${HOME}/.aws/config", "PUPPETEER_SKIP_DOWNLOAD": "1"}
    async with hostd_with_home(tmp_path, home) as hostd:
        info = await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path, env))})
        assert "error" not in info["launch"], info["launch"]
        assert info["launch"]["folders"] == {"$KUBECONFIG": str(kube), "$AWS_CONFIG_FILE": str(aws)}
        assert info["launch"]["env"] == env  # as the manifest wrote them: what the user approves
        assert (await enable(hostd, "mcp-probe", info))["status"] == "ready"  # read the file at start
        assert await run(
            hostd,
            "mcp-probe",
            ["env", "KUBECONFIG"],
            ["env", "AWS_CONFIG_FILE"],
            ["env", "PUPPETEER_SKIP_DOWNLOAD"],
            ["read", str(kube)],
            ["read", str(aws)],
            ["write", str(kube), "replaced"],
            ["write", str(home / ".kube" / "new"), "planted"],
            ["read", str(home / ".kube" / "other")],
        ) == [
            str(kube),  # expanded: no shell runs, the server does not expand ~
            str(aws),
            "1",
            "apiVersion: v1\nclusters: []\n",
            "[default]\nregion = eu-west-1\n",
            "EACCES",  # read-only: not declared writable
            "EACCES",
            "EACCES",  # the file, not its folder
        ]
    assert kube.read_text() == "apiVersion: v1\nclusters: []\n"
    assert not (home / ".kube" / "new").exists()


async def test_an_env_path_declared_writable_is_writable(tmp_path: Path, home: Path) -> None:
    kube = home / ".kube" / "config"
    folder = probe_plugin(tmp_path, {"KUBECONFIG": "~/.kube/config"})
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["sandbox"] = {"write": ["~/.kube/config"]}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    async with hostd_with_home(tmp_path, home) as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        assert info["launch"]["folders"] == {"$KUBECONFIG": str(kube), "sandbox.write[0]": str(kube)}
        assert (await enable(hostd, "mcp-probe", info))["status"] == "ready"
        assert await run(hostd, "mcp-probe", ["write", str(kube), "clusters: [a]\n"]) == ["ok"]
    assert kube.read_text() == "clusters: [a]\n"


@pytest.mark.parametrize("name", ["LD_PRELOAD", "NODE_OPTIONS", "PYTHONSTARTUP", "BASH_ENV", "GIT_CONFIG_GLOBAL"])
async def test_a_variable_that_makes_a_runtime_run_code_is_refused_with_advice_a_user_can_follow(
    tmp_path: Path, home: Path, name: str
) -> None:
    value = str(home / ".kube" / "config")
    async with hostd_with_home(tmp_path, home) as hostd:
        info = await hostd.request("plugins/install", {"path": str(probe_plugin(tmp_path, {name: value}))})
        family = env_family(name)
        assert family is not None
        expected = f"command 'python3': {env_policy_message(name, family)}"
        assert info["launch"] == {"kind": "ENV_POLICY", "error": expected}
        assert f"{family.why}; {REMOVE_ADVICE}" in info["launch"]["error"]
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": "mcp-probe"})
        assert refused.value.data["launchError"] == "ENV_POLICY"


def test_every_refusal_gives_advice_a_user_can_follow() -> None:
    """No family's advice names a setting users cannot make (an internal field of hostd's policy)."""
    from sandbox.env_families import ENV_FAMILIES  # noqa: PLC0415

    internal = ("extra_write_paths", "allow_loader_vars", "extra_passthrough", "IsolationPolicy")
    assert len(ENV_FAMILIES) > 20
    assert [f.label for f in ENV_FAMILIES if not f.advice.startswith(REMOVE_ADVICE)] == []
    assert [f.label for f in ENV_FAMILIES if any(word in f.advice for word in internal)] == []


@pytest.mark.parametrize(
    "name",
    [
        "KUBECONFIG",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DOCKER_HOST",
        "DOCKER_CONFIG",
        "PUPPETEER_SKIP_DOWNLOAD",
        "PUPPETEER_SKIP_CHROMIUM_DOWNLOAD",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "CURL_HOME",
        "NETRC",
        "GNUPGHOME",
        "KRB5_CONFIG",
        "CLOUDSDK_CONFIG",
    ],
)
def test_variables_that_only_configure_the_plugins_own_code_pass(name: str) -> None:
    assert env_family(name) is None
    env = build_environment({"PATH": "/usr/bin"}, {name: "/srv/x"}, EnvPolicy(), tmpdir="/t")
    assert env[name] == "/srv/x"


def bundle_with_a_file_option(path: Path) -> Path:
    """A python ``.mcpb`` whose ``user_config`` option of type ``file`` reaches the server as KUBECONFIG."""
    manifest = {
        "manifest_version": "0.3",
        "name": "kube-probe",
        "version": "1.0.0",
        "description": "The probe fixture, configured by a kubeconfig file.",
        "author": {"name": "hostd tests"},
        "server": {
            "type": "python",
            "entry_point": "server/first.py",
            "mcp_config": {
                "command": "python3",
                "args": ["${__dirname}/server/first.py"],
                "env": {"KUBECONFIG": "${user_config.kubeconfig}"},
            },
        },
        "tools": [{"name": "run"}],
        "user_config": {
            "kubeconfig": {"type": "file", "title": "Kubeconfig", "description": "k", "required": True},
        },
    }
    beside = "runpy.run_path(os.path.dirname(__file__) + '/server.py'"
    first = READ_AT_START.replace('runpy.run_path("server.py"', beside)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        archive.writestr("server/first.py", first)
        # A bundle declares no hostd permissions: its tool carries none.
        server = (PROBE / "server.py").read_text().replace('"_meta": {"hostd/permission": "probe.run"},', "")
        archive.writestr("server/server.py", server)
    return path


async def test_a_bundle_whose_file_option_is_passed_through_env_can_be_enabled(tmp_path: Path, home: Path) -> None:
    kube = home / ".kube" / "config"
    bundle = bundle_with_a_file_option(tmp_path / "kube-probe.mcpb")
    async with hostd_with_home(tmp_path, home) as hostd:
        await hostd.request("plugins/install", {"path": str(bundle)})
        info = await hostd.request("plugins/configure", {"id": "kube-probe", "values": {"kubeconfig": str(kube)}})
        assert info["launch"]["env"] == {"KUBECONFIG": str(kube)}
        # The option of type file is a read grant of its own (sandbox.read), the variable names it too.
        assert info["launch"]["folders"] == {"$KUBECONFIG": str(kube), "sandbox.read[0]": str(kube)}
        await hostd.request("plugins/approve", {"id": "kube-probe", "digest": info["launch"]["digest"]})
        assert (await hostd.request("plugins/enable", {"id": "kube-probe"}))["status"] == "ready"
        assert await run(hostd, "kube-probe", ["read", str(kube)], ["write", str(kube), "x"]) == [
            "apiVersion: v1\nclusters: []\n",
            "EACCES",
        ]
    assert os.path.exists(kube)


# -- the one table of refused variables, in the docs, generated from the code's ---------------------


def test_the_docs_table_of_refused_variables_is_the_codes() -> None:
    from docgen import env_table  # noqa: PLC0415

    text = env_table.ENV_DOC.read_text(encoding="utf-8")
    assert env_table.replace_block(text) == text, "stale: regenerate with python -m docgen.docs"
    from sandbox.env_families import ENV_FAMILIES  # noqa: PLC0415

    rows = text.split(env_table.BEGIN, 1)[1].split(env_table.END, 1)[0].strip().splitlines()
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows[2 : 2 + len(ENV_FAMILIES)]] == [
        family.label for family in ENV_FAMILIES
    ]


def test_a_stale_docs_table_is_reported_and_rewritten(tmp_path: Path) -> None:
    from docgen import env_table  # noqa: PLC0415

    copy = tmp_path / "README.md"
    fresh = env_table.ENV_DOC.read_text(encoding="utf-8")
    copy.write_text(fresh.replace("| dynamic loader |", "| dynamic linker |"))
    assert env_table.sync(copy, check=True) is False
    assert env_table.sync(copy, check=False) is False
    assert copy.read_text(encoding="utf-8") == fresh
    assert env_table.sync(copy, check=True) is True
    copy.write_text("no markers here")
    with pytest.raises(ValueError, match="env-families:begin"):
        env_table.sync(copy, check=True)


async def test_a_claude_desktop_config_with_an_env_path_imports_and_starts(tmp_path: Path, home: Path) -> None:
    """The config a user already has: ``KUBECONFIG=~/.kube/config`` and ``PUPPETEER_SKIP_DOWNLOAD`` in an
    ``mcpServers`` entry. Imported, shown, approved once, started: the server reads the file at start."""
    from tests.conftest import ECHO  # noqa: PLC0415

    server = tmp_path / "srv" / "server.py"
    server.parent.mkdir()
    reads = 'import os\nassert "clusters:" in open(os.environ["KUBECONFIG"]).read()\n'
    server.write_text(reads + (ECHO / "server.py").read_text())
    env = {"KUBECONFIG": "~/.kube/config", "PUPPETEER_SKIP_DOWNLOAD": "true"}
    config = {"mcpServers": {"kube": {"command": "python3", "args": [str(server)], "env": env}}}
    async with hostd_with_home(tmp_path, home) as hostd:
        result = await hostd.request("plugins/import", {"config": json.dumps(config)})
        [entry] = result["entries"]
        assert (entry["id"], entry["outcome"]) == ("kube", "installed")
        launch = entry["plugin"]["launch"]
        assert "error" not in launch, launch["error"]
        assert launch["env"] == env
        assert launch["folders"]["$KUBECONFIG"] == str(home / ".kube" / "config")
        await hostd.request("plugins/approve", {"id": "kube", "digest": launch["digest"]})
        assert (await hostd.request("plugins/enable", {"id": "kube"}))["status"] == "ready"


def test_an_imported_server_that_writes_the_file_its_env_names_gets_its_folder_declared_writable() -> None:
    """server-memory writes MEMORY_FILE_PATH by design: its folder is declared (sandbox.write), so the file,
    read-only once it exists when only an env value names it, stays writable at every later start."""
    from hostd.install.importer import plan_import  # noqa: PLC0415

    memory = ["-y", "@modelcontextprotocol/server-memory"]
    config = {
        "mcpServers": {
            "mine": {"command": "npx", "args": memory, "env": {"MEMORY_FILE_PATH": "~/memory/graph.jsonl"}},
            "default": {"command": "npx", "args": memory},
            "kube": {"command": "npx", "args": ["-y", "mcp-server-kubernetes"], "env": {"KUBECONFIG": "~/.kube/c"}},
        }
    }
    mine, default, kube = plan_import(config)
    assert mine.manifest is not None and default.manifest is not None and kube.manifest is not None
    assert mine.manifest["sandbox"] == {"write": ["~/memory"]}
    assert "declared writable, where it keeps its data: ~/memory" in mine.notes
    assert "sandbox" not in default.manifest  # ${data}/memory.jsonl: its data folder, writable anyway
    assert "sandbox" not in kube.manifest  # KUBECONFIG: read-only, as granted
