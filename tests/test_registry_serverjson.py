"""MCP Registry server.json entries: npm, pypi, mcpb (with fileSha256) and remote, mapped to manifests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import HostdClient, RpcError
from hostd.install import serverjson
from hostd.install.packages import parse_package_launch
from hostd.wire.errors import HostError
from tests.conftest import hostd_with_home
from tests.test_real_catalog import ENABLE_TIMEOUT, MEMORY, registry_answers_or_skip
from tests.test_real_servers import TIME, manifest_of, npm_spec, uv_spec

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
MEMORY_VERSION = manifest_of(MEMORY)["version"]
TIME_VERSION = manifest_of(TIME)["version"]


def entry(packages: list[dict[str, Any]] | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "$schema": SCHEMA,
        "name": "io.github.modelcontextprotocol/server-memory",
        "description": "Knowledge graph memory.",
        "version": MEMORY_VERSION,
        "repository": {"url": "https://github.com/modelcontextprotocol/servers", "source": "github"},
        "packages": packages if packages is not None else [],
        **fields,
    }


def npm_memory(**extra: Any) -> dict[str, Any]:
    return {
        "registryType": "npm",
        "registryBaseUrl": "https://registry.npmjs.org",
        "identifier": "@modelcontextprotocol/server-memory",
        "version": MEMORY_VERSION,
        "transport": {"type": "stdio"},
        **extra,
    }


def pypi_time() -> dict[str, Any]:
    return {
        "registryType": "pypi",
        "identifier": "mcp-server-time",
        "version": TIME_VERSION,
        "transport": {"type": "stdio"},
        "packageArguments": [{"type": "named", "name": "--local-timezone", "value": "UTC"}],
    }


def test_npm_entry_becomes_a_pinned_npx_launch_with_settings() -> None:
    variables = [
        {"name": "MEMORY_FILE_PATH", "description": "Where the graph is kept", "default": "/tmp/m.jsonl"},
        {"name": "API_TOKEN", "description": "A token", "isSecret": True, "isRequired": True},
        {"name": "FIXED", "value": "1"},
    ]
    arguments = [
        {"type": "positional", "valueHint": "root_dir", "isRequired": True},
        {"type": "named", "name": "--verbose"},
    ]
    plan = serverjson.plan(entry([npm_memory(environmentVariables=variables, packageArguments=arguments)]))
    assert plan.notes == ["optional argument --verbose left out"]
    assert plan.manifest == {
        "id": "server-memory",
        "name": "io.github.modelcontextprotocol/server-memory",
        "version": MEMORY_VERSION,
        "description": "Knowledge graph memory.",
        "permissions": [],
        "contributes": {"tools": [], "discover": True},
        "origin": {"kind": "registry", "source": "io.github.modelcontextprotocol/server-memory"},
        "backend": {
            "type": "mcp",
            "transport": "stdio",
            "command": "npx",
            "args": ["-y", f"@modelcontextprotocol/server-memory@{MEMORY_VERSION}", "${user_config.root_dir}"],
            "env": {
                "MEMORY_FILE_PATH": "${user_config.MEMORY_FILE_PATH}",
                "API_TOKEN": "${secret:API_TOKEN}",
                "FIXED": "1",
            },
            "startup_timeout_seconds": 120,
            "tool_timeout_seconds": 60,
            "stdout_noise": "drop",
        },
        "user_config": {
            "root_dir": {"type": "string", "title": "root_dir", "description": "", "required": True},
            "MEMORY_FILE_PATH": {
                "type": "string",
                "title": "MEMORY_FILE_PATH",
                "description": "Where the graph is kept",
                "default": "/tmp/m.jsonl",
            },
            "API_TOKEN": {
                "type": "string",
                "title": "API_TOKEN",
                "description": "A token",
                "required": True,
                "sensitive": True,
            },
        },
    }


def test_pypi_entry_becomes_a_pinned_uvx_launch() -> None:
    plan = serverjson.plan(entry([pypi_time()], name="io.github.modelcontextprotocol/mcp-server-time"))
    assert plan.manifest is not None
    assert plan.manifest["id"] == "mcp-server-time"
    backend = plan.manifest["backend"]
    assert (backend["command"], backend["args"]) == (
        "uvx",
        [f"mcp-server-time=={TIME_VERSION}", "--local-timezone", "UTC"],
    )
    assert f"mcp-server-time=={TIME_VERSION}" == uv_spec(TIME)  # the catalog's reviewed pin
    assert f"@modelcontextprotocol/server-memory@{MEMORY_VERSION}" == npm_spec(MEMORY)


# The class: a launch that does not name exactly one version of one package a hostd runs.
NOT_EXACT = {
    "caret": ("npm", "^1.2.3"),
    "tilde": ("npm", "~1.2"),
    "latest": ("npm", "latest"),
    "range": ("pypi", ">=1.0"),
    "wildcard": ("pypi", "1.*"),
    "none": ("npm", None),
}


@pytest.mark.parametrize("case", sorted(NOT_EXACT))
def test_inexact_versions_are_refused(case: str) -> None:
    kind, version = NOT_EXACT[case]
    package: dict[str, Any] = {"registryType": kind, "identifier": "x", "transport": {"type": "stdio"}}
    if version is not None:
        package["version"] = version
    with pytest.raises(HostError) as refused:
        serverjson.plan(entry([package]))
    assert refused.value.data["errors"] == [{"field": "packages.0.version", "message": "must be an exact version"}]


def test_unsupported_entries_say_why() -> None:
    def errors(value: Any, index: int = 0) -> list[dict[str, Any]]:
        with pytest.raises(HostError) as refused:
            serverjson.plan(value, index)
        assert refused.value.kind.name == "PACKAGE_INVALID"
        errors: list[dict[str, Any]] = refused.value.data["errors"]
        return errors

    oci = {"registryType": "oci", "identifier": "docker.io/x/y:1.0", "transport": {"type": "stdio"}}
    assert errors(entry([oci])) == [{"field": "packages.0.registryType", "message": "not supported"}]
    http = npm_memory(transport={"type": "streamable-http", "url": "http://localhost:8080/mcp"})
    assert errors(entry([http])) == [{"field": "packages.0.transport.type", "message": "only 'stdio' is supported"}]
    mcpb = {"registryType": "mcpb", "identifier": "https://example.invalid/x.mcpb", "transport": {"type": "stdio"}}
    assert errors(entry([mcpb])) == [{"field": "packages.0.fileSha256", "message": "required for mcpb"}]
    mirror = npm_memory(registryBaseUrl="https://npm.example.invalid")
    assert errors(entry([mirror])) == [
        {"field": "packages.0.registryBaseUrl", "message": "only https://registry.npmjs.org is supported"}
    ]
    assert errors(entry([npm_memory()]), 3) == [{"field": "packages", "message": "no index 3"}]
    assert errors(entry([])) == [{"field": "packages", "message": "empty"}]
    missing = entry([npm_memory()])
    del missing["name"], missing["version"]
    assert [e["field"] for e in errors(missing)] == ["name", "version"]
    assert errors("{not json")[0]["message"].startswith("serverJson is not JSON")


async def test_remote_entry_is_recorded_and_refused_clearly(tmp_path: Path, hostd: HostdClient) -> None:
    remote = {
        "type": "streamable-http",
        "url": "https://mcp.example.invalid/mcp",
        "headers": [{"name": "Authorization", "isSecret": True, "isRequired": True, "description": "Bearer token"}],
    }
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"serverJson": entry(None, name="io.example/remote", remotes=[remote])})
    assert refused.value.kind == "PACKAGE_INVALID"
    assert "this hostd runs only stdio servers" in refused.value.message
    recorded = json.loads((tmp_path / "state" / "registry" / "remote" / "plugin.json").read_text())
    assert recorded["backend"] == {
        "type": "mcp",
        "transport": "streamable-http",
        "url": "https://mcp.example.invalid/mcp",
        "headers": {"Authorization": "${secret:Authorization}"},
    }
    assert recorded["user_config"]["Authorization"]["sensitive"] is True


async def _prepare_and_enable(client: HostdClient, info: dict[str, Any]) -> dict[str, Any]:
    """prepare (install the pinned package) -> approve -> enable, which pins the tools found (one approval,
    one spawn); the PluginStatus."""
    plugin_id = info["id"]
    info = await client.request("plugins/prepare", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    assert info["launch"]["prepare"]["state"] == "prepared"
    await client.request("plugins/approve", {"id": plugin_id, "digest": info["launch"]["digest"]})
    status: dict[str, Any] = await client.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
    assert status["status"] == "ready", status
    return status


@pytest.mark.real_server
async def test_npm_entry_runs_server_memory(tmp_path: Path) -> None:
    registry_answers_or_skip(MEMORY)
    home = tmp_path / "home"
    home.mkdir()
    variables = [{"name": "MEMORY_FILE_PATH", "description": "the graph file", "isRequired": True}]
    async with hostd_with_home(tmp_path, home) as client:
        info = await client.request(
            "plugins/install", {"serverJson": entry([npm_memory(environmentVariables=variables)])}
        )
        with pytest.raises(RpcError) as required:
            await client.request("plugins/enable", {"id": "server-memory"})
        assert required.value.data["missing"] == ["MEMORY_FILE_PATH"]
        graph_file = tmp_path / "state" / "data" / "server-memory" / "graph.jsonl"
        info = await client.request(
            "plugins/configure", {"id": "server-memory", "values": {"MEMORY_FILE_PATH": str(graph_file)}}
        )
        assert info["launch"]["env"]["MEMORY_FILE_PATH"] == str(graph_file)
        status = await _prepare_and_enable(client, info)
        assert "server-memory.read_graph" in status["pinned"]
        entity = {"name": "Ada", "entityType": "person", "observations": ["registry"]}
        await client.request(
            "tools/call", {"name": "server-memory.create_entities", "arguments": {"entities": [entity]}}
        )
        graph = await client.request("tools/call", {"name": "server-memory.read_graph", "arguments": {}})
        assert graph["structuredContent"] == {"entities": [entity], "relations": []}
        await client.request("plugins/disable", {"id": "server-memory"})
    assert json.loads(graph_file.read_text().splitlines()[0]) == {"type": "entity", **entity}


@pytest.mark.real_server
async def test_pypi_entry_runs_mcp_server_time_and_a_newer_entry_replaces_it_in_error(tmp_path: Path) -> None:
    """A pypi entry becomes a pinned uvx launch, prepared once, that runs ``mcp-server-time``.

    Issue 28: a registry entry's plugin whose start failed runs nothing; installing a newer entry for it
    replaces it as it is, its grants kept and its launch to approve again (as a folder, a bundle and a config
    imported again do); installing while it runs is still refused. One prepared package serves both entries
    (the same ``mcp-server-time``; only the entry's version and its ``--local-timezone`` change)."""
    registry_answers_or_skip(TIME)
    home = tmp_path / "home"
    home.mkdir()
    name = "io.github.modelcontextprotocol/mcp-server-time"

    def time_entry(version: str, timezone: str) -> dict[str, Any]:
        package = {
            **pypi_time(),
            "packageArguments": [{"type": "named", "name": "--local-timezone", "value": timezone}],
        }
        return entry([package], name=name, version=version)

    async with hostd_with_home(tmp_path, home) as client:
        # The server exits at start on a time zone that does not exist.
        info = await client.request("plugins/install", {"serverJson": time_entry("1.0.0", "Nowhere/Atlantis")})
        assert (info["id"], info["version"]) == ("mcp-server-time", "1.0.0")
        assert info["launch"]["args"] == [f"mcp-server-time=={TIME_VERSION}", "--local-timezone", "Nowhere/Atlantis"]
        info = await client.request("plugins/prepare", {"id": "mcp-server-time"}, timeout=ENABLE_TIMEOUT)
        await client.request("plugins/approve", {"id": "mcp-server-time", "digest": info["launch"]["digest"]})
        with pytest.raises(RpcError) as failed:
            await client.request("plugins/enable", {"id": "mcp-server-time"}, timeout=ENABLE_TIMEOUT)
        assert failed.value.kind == "PLUGIN_START_FAILED"
        assert (await client.request("plugins/status", {"id": "mcp-server-time"}))["status"] == "error"

        fixed = await client.request("plugins/install", {"serverJson": time_entry("1.0.1", "UTC")})
        assert (fixed["id"], fixed["version"], fixed["status"], fixed["enabled"]) == (
            "mcp-server-time",
            "1.0.1",
            "stopped",
            False,
        )
        # The same package, still prepared: the environment's program, with the newer entry's arguments.
        environment = Path(info["launch"]["prepare"]["root"])
        assert (fixed["launch"]["prepare"]["root"], fixed["launch"]["approved"]) == (str(environment), False)
        assert fixed["launch"]["args"] == [str(environment / "venv/bin/mcp-server-time"), "--local-timezone", "UTC"]
        await client.request("plugins/approve", {"id": "mcp-server-time", "digest": fixed["launch"]["digest"]})
        status = await client.request("plugins/enable", {"id": "mcp-server-time"}, timeout=ENABLE_TIMEOUT)
        assert (status["status"], status["pinned"]) == (
            "ready",
            ["mcp-server-time.convert_time", "mcp-server-time.get_current_time"],
        )
        now = await client.request(
            "tools/call", {"name": "mcp-server-time.get_current_time", "arguments": {"timezone": "UTC"}}
        )
        assert now["structuredContent"]["timezone"] == "UTC"
        with pytest.raises(RpcError) as running:
            await client.request("plugins/install", {"serverJson": time_entry("1.0.2", "UTC")})
        assert (running.value.kind, running.value.message) == (
            "PLUGIN_STATE_CONFLICT",
            "plugin 'mcp-server-time' is ready; disable it before reinstalling",
        )
        assert (await client.request("plugins/status", {"id": "mcp-server-time"}))["status"] == "ready"
        await client.request("plugins/disable", {"id": "mcp-server-time"})


# -- registry text never chooses what is installed or from where (issue 23) -------------------------

#: identifier -> registryType: not a bare registry name (a path, URL, source, alias, option, a version).
HOSTILE_IDENTIFIERS = {
    "./x.tgz": "npm",
    "/abs/pkg": "npm",
    "file:../x": "npm",
    "git+https://example.invalid/x.git": "npm",
    "https://example.invalid/x.tgz": "npm",
    "github:u/r": "npm",
    "u/r": "npm",
    "npm:other": "npm",
    "--registry=http://127.0.0.1:9/": "npm",
    "x@1.0.0": "npm",
    "X": "npm",
    "x @ https://example.invalid/x.whl": "pypi",
    "./x": "pypi",
    "-e": "pypi",
    "x==1.0.0": "pypi",
    "x[cli]": "pypi",
    "x.whl": "pypi",
}


@pytest.mark.parametrize("identifier", sorted(HOSTILE_IDENTIFIERS))
def test_an_identifier_is_a_bare_registry_name(identifier: str) -> None:
    kind = HOSTILE_IDENTIFIERS[identifier]
    package = {"registryType": kind, "identifier": identifier, "version": "1.0.0", "transport": {"type": "stdio"}}
    with pytest.raises(HostError) as refused:
        serverjson.plan(entry([package]))
    assert refused.value.kind.name == "PACKAGE_INVALID"
    forms = "npm: name or name@1.2.3" if kind == "npm" else "python: name or name==1.2.3"
    [error] = refused.value.data["errors"]
    assert error["field"] == "packages.0.identifier"
    assert error["message"].startswith("must be a registry package name (" + forms)
    assert repr(identifier)[:20] in refused.value.message


@pytest.mark.parametrize("version", ["01.2.3", "1.2.3 ", "1.2.3 || 2.0.0", "next", "v1.2.3", "1.2.3@x"])
def test_an_npm_version_is_one_exact_semver(version: str) -> None:
    with pytest.raises(HostError) as refused:
        serverjson.plan(entry([npm_memory(version=version)]))
    assert refused.value.data["errors"] == [{"field": "packages.0.version", "message": "must be an exact version"}]


def _named(name: str, value: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "named", "name": name, **({"value": value} if value is not None else {}), **extra}


def _positional(value: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "positional", **({"value": value} if value is not None else {}), **extra}


#: (registryType, runtimeArguments): each would be an option of npx/uvx before the package, or the package.
HOSTILE_RUNTIME = {
    "npm-registry-named": ("npm", [_named("--registry", "http://127.0.0.1:9/")]),
    "npm-registry-word": ("npm", [_positional("--registry=http://127.0.0.1:9/")]),
    "npm-scripts-on": ("npm", [_positional("--ignore-scripts=false")]),
    "npm-foreground-scripts": ("npm", [_positional("--foreground-scripts")]),
    "npm-other-package": ("npm", [_named("-p", "evil@1.0.0")]),
    "npm-package-word": ("npm", [_positional("evil@1.0.0")]),
    "npm-user-chosen": ("npm", [_positional(valueHint="flag", isRequired=True)]),
    "npm-secret-flag": ("npm", [_positional("-y", isSecret=True)]),
    "npm-flag-with-a-value": ("npm", [_named("-q", "--registry=http://127.0.0.1:9/")]),
    "pypi-index": ("pypi", [_positional("--index-url=http://127.0.0.1:9/simple")]),
    "pypi-from-path": ("pypi", [_named("--from", "./x")]),
    "pypi-with": ("pypi", [_named("--with", "evil")]),
    "pypi-python-path": ("pypi", [_named("--python", "/usr/bin/python3")]),
    "pypi-python-user": ("pypi", [_named("--python", isRequired=True)]),
    "pypi-package-word": ("pypi", [_positional("evil==1.0")]),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_RUNTIME))
def test_runtime_arguments_cannot_change_what_is_installed(case: str) -> None:
    kind, runtime = HOSTILE_RUNTIME[case]
    package = npm_memory(runtimeArguments=runtime) if kind == "npm" else {**pypi_time(), "runtimeArguments": runtime}
    with pytest.raises(HostError) as refused:
        serverjson.plan(entry([package]))
    assert refused.value.kind.name == "PACKAGE_INVALID"
    [error] = refused.value.data["errors"]
    assert error["field"] == "packages.0.runtimeArguments.0"
    expected = "must be a Python version (3.12)" if case == "pypi-python-path" else "not an allowed runtime argument"
    assert error["message"] == expected


def test_allowed_runtime_arguments_and_hostile_package_arguments_stay_in_their_place() -> None:
    hostile = [_positional("--ignore-scripts=false"), _named("--from", "./x"), _positional("evil@1.0.0")]
    npm = npm_memory(runtimeArguments=[_positional("--yes"), _named("-q")], packageArguments=hostile)
    plan = serverjson.plan(entry([npm]))
    assert plan.manifest is not None
    spec = f"@modelcontextprotocol/server-memory@{MEMORY_VERSION}"
    server_args = ["--ignore-scripts=false", "--from", "./x", "evil@1.0.0"]
    assert plan.manifest["backend"]["args"] == ["-y", "-q", spec, *server_args]
    launch = parse_package_launch("npx", plan.manifest["backend"]["args"])
    assert launch is not None and launch.packages == (spec,)
    assert launch.args == tuple(server_args)
    pypi = {**pypi_time(), "runtimeArguments": [_named("--python", "python3.12")], "packageArguments": hostile}
    plan = serverjson.plan(entry([pypi], name="io.github.modelcontextprotocol/mcp-server-time"))
    assert plan.manifest is not None
    args = plan.manifest["backend"]["args"]
    assert args == ["--python", "3.12", f"mcp-server-time=={TIME_VERSION}", *server_args]
    launch = parse_package_launch("uvx", args)
    assert launch is not None and launch.packages == (f"mcp-server-time=={TIME_VERSION}",)
    assert launch.python == "3.12"


async def test_install_refuses_a_hostile_runtime_argument(tmp_path: Path, hostd: HostdClient) -> None:
    package = npm_memory(runtimeArguments=[_positional("--ignore-scripts=false")])
    with pytest.raises(RpcError) as refused:
        await hostd.request("plugins/install", {"serverJson": entry([package])})
    assert refused.value.kind == "PACKAGE_INVALID"
    assert refused.value.data["errors"] == [
        {"field": "packages.0.runtimeArguments.0", "message": "not an allowed runtime argument"}
    ]
    assert "'--ignore-scripts=false' is not supported" in refused.value.message
    assert (await hostd.request("plugins/list", {}))["plugins"] == []
