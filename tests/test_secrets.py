"""Secrets: kept in the secret store, referenced from manifests, injected only at spawn, shown nowhere."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install.importer import IMPORTED_NETWORK_NOTE
from hostd.install.manifest import UserConfigOption
from hostd.storage import secrets
from hostd.wire.errors import HostError
from sandbox.launch import Launch
from tests.conftest import FIXTURES

SERVER_JS = FIXTURES / "mcp-node" / "server.js"

# The class: a secret value reaching any place that is shown, logged or written in plain text.
# Members checked below: plugin.json, state.json, settings, every other file of the state folder
# but the store, hostd's log (debug level), every answer (install/import/list/configure, errors).
TOKEN = "ghp_SECRETVALUE0123456789abcdef"
PASSWORD = "hunter2-but-longer-0123"
ACCOUNT = "acct-4242-private"


def test_split_secrets_marks_secret_names_and_marked_ones() -> None:
    env = {"GITHUB_TOKEN": TOKEN, "DB_PASSWORD": PASSWORD, "API_BASE": "https://x", "PLAIN": "p", "EMPTY_KEY": ""}
    kept, moved = secrets.split_secrets(env, marked={"PLAIN"})
    assert kept == {
        "GITHUB_TOKEN": "${secret:GITHUB_TOKEN}",
        "DB_PASSWORD": "${secret:DB_PASSWORD}",
        "API_BASE": "https://x",
        "PLAIN": "${secret:PLAIN}",
        "EMPTY_KEY": "",
    }
    assert moved == {"GITHUB_TOKEN": TOKEN, "DB_PASSWORD": PASSWORD, "PLAIN": "p"}
    again, none = secrets.split_secrets(kept)
    assert (again, none) == (kept, {})  # a reference is never taken for a value


def _launch(args: list[str], env: dict[str, str]) -> Launch:
    return Launch(command="x", executable="/bin/x", args=tuple(args), cwd="/", env=env, isolation=(), manifest_env=env)


def test_inject_fills_env_and_args_and_names_what_is_missing() -> None:
    launch = _launch(["--token=${secret:T}", "${secret:T}", "plain"], {"A": "${secret:P}", "B": "b"})
    values = {"T": TOKEN, "P": PASSWORD}
    filled = secrets.inject(launch, values.get, "demo")
    assert filled.args == (f"--token={TOKEN}", TOKEN, "plain")
    assert dict(filled.env) == {"A": PASSWORD, "B": "b"}
    assert launch.digest != filled.digest and "${secret:T}" in launch.args  # the original is untouched
    with pytest.raises(HostError) as missing:
        secrets.inject(launch, {"T": TOKEN}.get, "demo")
    assert missing.value.kind.name == "CONFIG_REQUIRED"
    assert missing.value.data == {"plugin": "demo", "missing": ["P"]}
    assert TOKEN not in missing.value.message
    unchanged = _launch(["a"], {"B": "b"})
    assert secrets.inject(unchanged, lambda name: None, "demo") is unchanged


def test_file_store_is_0600_apart_from_state_and_forgets_on_drop(tmp_path: Path) -> None:
    store = secrets.SecretStore(tmp_path, backend="file")
    assert store.backend == "file"
    store.set("a", "TOKEN", TOKEN)
    store.set("b", "X", "y")
    assert store.get("a", "TOKEN") == TOKEN and store.get("a", "NOPE") is None
    assert store.path == tmp_path / "secrets" / "secrets.json"
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.folder.stat().st_mode) == 0o700
    store.drop("a")
    assert store.names("a") == [] and store.names("b") == ["X"]
    assert TOKEN.encode() not in store.path.read_bytes()
    store.path.write_bytes(b"{damaged")  # a damaged store is read as empty (enable then names what is missing)
    assert store.names("b") == [] and store.get("b", "X") is None
    store.set("b", "X", "z")
    assert store.get("b", "X") == "z"


def test_apply_settings_expands_arrays_into_arguments_without_a_shell() -> None:
    options = {
        "dirs": UserConfigOption(type="directory", multiple=True, required=True),
        "depth": UserConfigOption(type="number", default=3),
        "name": UserConfigOption(type="string", default="${HOME}/n"),
        "key": UserConfigOption(type="string", sensitive=True, required=True),
        "opt": UserConfigOption(type="string"),
    }
    applied = secrets.apply_settings(
        "${HOME}/bin/s",
        args=["${user_config.dirs}", "--depth=${user_config.depth}", "${user_config.opt}", "$(rm -rf ~); ${nope}"],
        env={"NAME": "${user_config.name}", "KEY": "${secret:key}"},
        options=options,
        settings={"dirs": ["/a b", "~/c"]},
        secret_names=set(),
        home="/home/ada",
    )
    assert applied.command == "/home/ada/bin/s"
    assert applied.args == ["/a b", "~/c", "--depth=3", "$(rm -rf ~); ${nope}"]  # opt unset: dropped
    assert applied.env == {"NAME": "/home/ada/n", "KEY": "${secret:key}"}
    assert applied.write == ["/a b", str(Path("~/c").expanduser())]
    assert applied.missing == ["key"]
    kept = secrets.apply_settings(
        "${HOME}/s",
        args=["${user_config.undeclared}", "--k=${user_config.key}", "${user_config.key}"],
        env={},
        options=options,
        settings={},
        secret_names={"key"},
        home="/home/ada",
        expand_host_variables=False,  # a hand-written manifest: its words are its own
    )
    assert (kept.command, kept.args) == (
        "${HOME}/s",
        ["${user_config.undeclared}", "--k=${secret:key}", "${secret:key}"],
    )
    assert kept.missing == ["dirs"]
    assert (
        secrets.check_value("depth", UserConfigOption(type="number", max=5), 7) == "depth: 7 is above the maximum 5.0"
    )
    assert (
        secrets.check_value("d", options["dirs"], ["rel"])
        == "d: a directory must be an absolute path (or start with '~/')"
    )
    assert secrets.check_value("n", options["name"], ["a"]) == "n: a single value is expected, not a list"


def _files_without(state: Path, secret: str, *, except_: Path) -> list[Path]:
    return [f for f in state.rglob("*") if f.is_file() and f != except_ and secret.encode() in f.read_bytes()]


async def test_import_moves_secret_env_into_the_store_and_injects_it_at_spawn(tmp_path: Path) -> None:
    config = {
        "mcpServers": {
            "gh": {
                "command": "node",
                "args": [str(SERVER_JS)],
                "env": {"GITHUB_TOKEN": TOKEN, "DB_PASSWORD": PASSWORD, "GREETING": "hello", "ACCOUNT": ACCOUNT},
            }
        }
    }
    state = tmp_path / "state"
    log_path = tmp_path / "hostd.log"
    answers: list[Any] = []
    with log_path.open("wb") as log:
        async with HostdClient.spawn(
            ["--state-dir", str(state), "--log-level", "debug"], env=plugin_environment(), stderr=log.fileno()
        ) as client:
            result = await client.request("plugins/import", {"config": json.dumps(config), "secretEnv": ["ACCOUNT"]})
            answers.append(result)
            entry = result["entries"][0]
            assert entry["notes"] == [
                "kept ACCOUNT, DB_PASSWORD, GITHUB_TOKEN in the secret store",
                IMPORTED_NETWORK_NOTE,
            ]
            info = entry["plugin"]
            assert info["launch"]["env"] == {
                "ACCOUNT": "${secret:ACCOUNT}",  # marked: its name does not look secret, the reference is shown
                "DB_PASSWORD": None,
                "GITHUB_TOKEN": None,
                "GREETING": "hello",
            }
            assert [(c["name"], c["sensitive"], c["set"]) for c in info["userConfig"]] == [
                ("ACCOUNT", True, True),
                ("DB_PASSWORD", True, True),
                ("GITHUB_TOKEN", True, True),
            ]
            manifest = json.loads((state / "imported" / "gh" / "plugin.json").read_text())
            assert manifest["backend"]["env"] == {
                "GITHUB_TOKEN": "${secret:GITHUB_TOKEN}",
                "DB_PASSWORD": "${secret:DB_PASSWORD}",
                "GREETING": "hello",
                "ACCOUNT": "${secret:ACCOUNT}",
            }
            # The same config again: the secrets are compared as references, so nothing changed.
            again = await client.request("plugins/import", {"config": json.dumps(config), "secretEnv": ["ACCOUNT"]})
            answers.append(again)
            assert [(e["outcome"], e["id"]) for e in again["entries"]] == [("unchanged", "gh")]
            assert again["entries"][0]["plugin"]["launch"]["digest"] == info["launch"]["digest"]
            await client.request("plugins/approve", {"id": "gh", "digest": info["launch"]["digest"]})
            enabled = await client.request("plugins/enable", {"id": "gh"})  # one approval, one spawn
            assert enabled["status"] == "ready"
            call = {"name": "gh.env", "arguments": {"name": "GITHUB_TOKEN"}}
            assert (await client.request("tools/call", call))["content"][0]["text"] == TOKEN
            # The server printing its own token: what hostd relays (plugins/log) is masked.
            await client.request("tools/call", {"name": "gh.log", "arguments": {"text": f"using {TOKEN}!"}})
            logged = await client.wait_for("plugins/log", lambda n: "using" in n["message"])
            assert logged["message"] == "using [REDACTED]!"

            # A rotated token is a configure away: no new approval (the launch holds the reference).
            digest = info["launch"]["digest"]
            info = await client.request("plugins/configure", {"id": "gh", "values": {"GITHUB_TOKEN": "ghp_rotated"}})
            answers.append(info)
            assert info["launch"]["digest"] == digest
            await client.request("plugins/restart", {"id": "gh"})
            assert (await client.request("tools/call", call))["content"][0]["text"] == "ghp_rotated"

            # Unset: enable names the secret, never a value.
            await client.request("plugins/configure", {"id": "gh", "values": {"DB_PASSWORD": None}})
            await client.request("plugins/disable", {"id": "gh"})
            with pytest.raises(RpcError) as missing:
                await client.request("plugins/enable", {"id": "gh"})
            assert missing.value.kind == "CONFIG_REQUIRED"
            assert missing.value.data["missing"] == ["DB_PASSWORD"]
            answers.append(await client.request("plugins/list", {}))
            await client.request("plugins/uninstall", {"id": "gh"})
            answers.append([n.params for n in client.notifications])  # logs, status changes
    store = state / "secrets" / "secrets.json"
    # Uninstall keeps them aside for that install only, like its data (issue 25): keyed <id>#<install id>.
    [kept] = (state / "kept" / "gh").iterdir()
    assert list(json.loads(store.read_text())["plugins"]) == [f"gh#{kept.name}"]
    for secret in (TOKEN, PASSWORD, "ghp_rotated", ACCOUNT):
        assert secret not in json.dumps(answers)
        assert _files_without(state, secret, except_=store) == []
        assert secret.encode() not in log_path.read_bytes()


async def test_a_handwritten_manifest_refers_to_a_secret(tmp_path: Path, make_plugin: Any, hostd: HostdClient) -> None:
    folder = make_plugin("ref", backend={"env": {"SERVICE_TOKEN": "${secret:SERVICE_TOKEN}"}})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    assert [(c["name"], c["required"], c["set"]) for c in info["userConfig"]] == [("SERVICE_TOKEN", True, False)]
    await hostd.request("plugins/grant", {"id": "ref", "permissions": info["permissions"]})
    await hostd.request("plugins/approve", {"id": "ref", "digest": info["launch"]["digest"]})
    with pytest.raises(RpcError) as missing:
        await hostd.request("plugins/enable", {"id": "ref"})
    assert (missing.value.kind, missing.value.data["missing"]) == ("CONFIG_REQUIRED", ["SERVICE_TOKEN"])
    with pytest.raises(RpcError) as wrong:
        await hostd.request("plugins/configure", {"id": "ref", "values": {"SERVICE_TOKEN": 5}})
    assert wrong.value.data["errors"] == [{"field": "SERVICE_TOKEN", "message": "SERVICE_TOKEN: a secret is a string"}]
    await hostd.request("plugins/configure", {"id": "ref", "values": {"SERVICE_TOKEN": TOKEN}})
    assert (await hostd.request("plugins/enable", {"id": "ref"}))["status"] == "ready"
    names = await hostd.request("tools/call", {"name": "ref.environment", "arguments": {}})
    assert "SERVICE_TOKEN" in names["structuredContent"]["names"]
    await hostd.request("plugins/disable", {"id": "ref"})
    assert TOKEN not in (folder / "plugin.yaml").read_text()
    assert TOKEN not in (tmp_path / "state" / "state.json").read_text()


async def test_a_secret_with_a_nul_is_refused_where_it_enters(make_plugin: Any, hostd: HostdClient) -> None:
    """The class (issue 31): text that cannot reach a process (a NUL ends a C string: execve refuses an
    argument or variable holding one) is refused where it enters, naming the field, not when a plugin starts.
    A secret the manifest refers to and a ``user_config`` option go through the same check."""
    folder = make_plugin("nul", backend={"env": {"SERVICE_TOKEN": "${secret:SERVICE_TOKEN}"}})
    info = await hostd.request("plugins/install", {"path": str(folder)})
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/configure", {"id": "nul", "values": {"SERVICE_TOKEN": "abc\u0000def"}})
    assert (refused.value.kind, refused.value.data["errors"]) == (
        "INVALID_PARAMS",
        [{"field": "SERVICE_TOKEN", "message": "SERVICE_TOKEN: must not contain a NUL character"}],
    )
    assert [(c["name"], c["set"]) for c in (await hostd.request("plugins/list", {}))["plugins"][0]["userConfig"]] == [
        ("SERVICE_TOKEN", False)
    ]
    assert info["id"] == "nul"
