"""Which launches name a package (:func:`hostd.install.packages.parse_package_launch`), and which do not.

Every form users write in their ``mcpServers`` configs that fetches a package at run time must be
found (else it would start unprepared and fetch); an option that would change what is installed
and is not understood is refused rather than prepared wrongly; a launch naming no package is left
alone. No process runs here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.install.ecosystems import Registries, bundled_js_helpers
from hostd.install.packages import PackageLaunch, PrepareError, parse_package_launch


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (
            "npx",
            ["-y", "@modelcontextprotocol/server-memory@2026.8.31"],
            PackageLaunch("npm", ("@modelcontextprotocol/server-memory@2026.8.31",), "", ()),
        ),
        (
            "/usr/local/bin/npx",
            ["--yes", "@modelcontextprotocol/server-filesystem", "~/Desktop", "/tmp/x"],
            PackageLaunch("npm", ("@modelcontextprotocol/server-filesystem",), "", ("~/Desktop", "/tmp/x")),
        ),
        ("npx", ["mcp-remote@0.1.0", "--", "x"], PackageLaunch("npm", ("mcp-remote@0.1.0",), "", ("--", "x"))),
        (
            "npx",
            ["-y", "--package=@scope/tools@1.2.3", "-p", "extra@2.0.1", "tools-server", "stdio"],
            PackageLaunch("npm", ("@scope/tools@1.2.3", "extra@2.0.1"), "tools-server", ("stdio",)),
        ),
        (
            "uvx",
            ["--from", "mcp-server-time==2026.10.19", "mcp-server-time", "--local-timezone", "UTC"],
            PackageLaunch("uv", ("mcp-server-time==2026.10.19",), "mcp-server-time", ("--local-timezone", "UTC")),
        ),
        (
            "uvx",
            ["mcp-server-git==2026.10.19", "--repository", "~/src/repo"],
            PackageLaunch("uv", ("mcp-server-git==2026.10.19",), "mcp-server-git", ("--repository", "~/src/repo")),
        ),
        (
            "uvx",
            ["mcp-server-fetch@2026.10.24"],
            PackageLaunch("uv", ("mcp-server-fetch==2026.10.24",), "mcp-server-fetch", ()),
        ),
        ("uvx", ["mcp-server-fetch"], PackageLaunch("uv", ("mcp-server-fetch",), "mcp-server-fetch", ())),
        (
            "uvx",
            ["--python", "3.12", "--with", "httpx==0.28.1", "--from=pkg[cli]==1.0", "pkg-cli"],
            PackageLaunch("uv", ("pkg[cli]==1.0", "httpx==0.28.1"), "pkg-cli", (), "3.12"),
        ),
        (
            "uv",
            ["tool", "run", "--from", "mcp-server-git==2026.10.19", "mcp-server-git"],
            PackageLaunch("uv", ("mcp-server-git==2026.10.19",), "mcp-server-git", ()),
        ),
        (
            "uv",
            ["run", "--with", "mcp[cli]==1.9.0,httpx", "--no-project", "mcp", "run", "server.py"],
            PackageLaunch("uv", ("mcp[cli]==1.9.0", "httpx"), "mcp", ("run", "server.py")),
        ),
        (
            "uv",
            ["run", "--with", "fastmcp==2.3.0", "python", "server.py"],
            PackageLaunch("uv", ("fastmcp==2.3.0",), "python", ("server.py",)),
        ),
    ],
)
def test_launches_that_fetch_a_package_are_found(command: str, args: list[str], expected: PackageLaunch) -> None:
    assert parse_package_launch(command, args) == expected


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("python3", ["server.py"]),
        ("node", ["/srv/mcp/dist/index.js"]),
        ("/home/ada/.venv/bin/python", ["-m", "server"]),
        ("uv", ["run", "--directory", "/srv/proj", "server.py"]),  # a project: its own lock, not a package
        ("uv", ["run", "server.py"]),
        ("docker", ["run", "-i", "mcp/fetch"]),
    ],
)
def test_launches_that_name_no_package_are_left_alone(command: str, args: list[str]) -> None:
    assert parse_package_launch(command, args) is None


@pytest.mark.parametrize(
    ("command", "args", "said"),
    [
        ("npx", ["--registry", "http://x", "pkg"], "npx option '--registry' cannot be prepared"),
        ("npx", ["-y"], "npx names no package"),
        ("uvx", ["--index-url", "http://x", "pkg"], "uvx option '--index-url' cannot be prepared"),
        ("uvx", ["--from"], "--from has no value"),
        ("uv", ["run", "--with", "x", "--env-file", ".env", "s.py"], "uv run option '--env-file' cannot be prepared"),
    ],
)
def test_options_that_change_what_is_installed_are_refused(command: str, args: list[str], said: str) -> None:
    with pytest.raises(PrepareError) as refused:
        parse_package_launch(command, args)
    assert refused.value.reason == "unsupported"
    assert str(refused.value) == said


def test_the_same_request_names_the_same_environment() -> None:
    one = parse_package_launch("npx", ["-y", "pkg@1.0.0", "a"])
    same = parse_package_launch("npx", ["--yes", "pkg@1.0.0", "b"])  # other server arguments, same install
    other = parse_package_launch("npx", ["-y", "pkg@1.0.1"])
    assert one is not None and same is not None and other is not None
    assert one.key == same.key
    assert one.key != other.key
    assert len(one.key) == 16


def test_registries_come_from_the_flags_then_hostds_environment() -> None:
    environ = {"npm_config_registry": "https://npm.example/", "UV_INDEX_URL": "https://py.example/simple"}
    assert Registries.from_environment(None, None, environ) == Registries(
        "https://npm.example/", "https://py.example/simple"
    )
    assert Registries.from_environment("https://flag/", None, environ) == Registries(
        "https://flag/", "https://py.example/simple"
    )
    assert Registries.from_environment(None, None, {"PIP_INDEX_URL": "https://pip/"}) == Registries(
        None, "https://pip/"
    )
    assert Registries.from_environment(None, None, {}) == Registries(None, None)


def test_a_bundled_javascript_helper_without_its_modules_is_found(tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    helper = site / "readabilipy" / "javascript"
    helper.mkdir(parents=True)
    (helper / "package.json").write_text('{"dependencies": {"jsdom": ">=12.2.0"}}')
    done = site / "other" / "js"
    (done / "node_modules").mkdir(parents=True)
    (done / "package.json").write_text('{"dependencies": {"x": "1"}}')
    plain = site / "plain"
    plain.mkdir()
    (plain / "package.json").write_text('{"name": "no-deps"}')
    assert bundled_js_helpers(tmp_path / "venv") == [helper]


async def test_a_launch_that_cannot_be_prepared_never_starts(tmp_path: Path) -> None:
    """npx with its own --registry would fetch at start: refused at prepare and at enable, no network used."""
    from hostd.cli.client import HostdClient, RpcError, plugin_environment  # noqa: PLC0415

    config = {"mcpServers": {"own-registry": {"command": "npx", "args": ["--registry", "http://x/", "-y", "pkg"]}}}
    args = ["--state-dir", str(tmp_path / "state")]
    async with HostdClient.spawn(args, env={**plugin_environment(), "HOME": str(tmp_path)}) as hostd:
        imported = await hostd.request("plugins/import", {"config": config})
        plugin_id = imported["entries"][0]["plugin"]["id"]
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/prepare", {"id": plugin_id})
        assert refused.value.kind == "PREPARE_FAILED"
        assert refused.value.data["reason"] == "unsupported"
        assert refused.value.message == f"plugin {plugin_id}: npx option '--registry' cannot be prepared"
        with pytest.raises(RpcError) as not_started:
            await hostd.request("plugins/enable", {"id": plugin_id})
        assert not_started.value.kind == "PLUGIN_NOT_PREPARED"
        assert "npx option '--registry' cannot be prepared" in not_started.value.message
