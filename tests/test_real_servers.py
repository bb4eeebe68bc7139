"""Real third-party MCP servers of the bundled catalog (``manifests/``), driven through a real hostd.

Before hostd enables a server, the test asks the registry for its exact pin (metadata only, as
``manifests/prepare.sh`` does, with a throwaway cache in the temporary folder); the packages themselves
are fetched by hostd's own ``plugins/prepare`` into the plugin's environment, nowhere else (issue 28: the
suite writes nothing outside the repository and the temporary folder). A server the registry does not
serve (no npm/uv, no registry) is skipped with the reason; once it is served, anything that goes wrong
through hostd is a failure. The catalog folders are installed as they are, unmodified.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install.manifest import load_manifest
from hostd.mcp.permissions import RESERVED_PERMISSIONS
from tests.conftest import ROOT, run_quietly
from tests.platform_facts import platform_offers

pytestmark = pytest.mark.real_server

MANIFESTS = ROOT / "manifests"
EVERYTHING = MANIFESTS / "server-everything"
TIME = MANIFESTS / "mcp-server-time"
CATALOG = (EVERYTHING, TIME)

#: The tools @modelcontextprotocol/server-everything 2026.8.31 lists to a client that
#: advertises no capability (hostd): its 12 fixed tools plus simulate-research-query.
EVERYTHING_TOOLS = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "simulate-research-query",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
]
TIME_TOOLS = ["convert_time", "get_current_time"]

#: Seconds allowed for asking the registry for one pin (metadata only).
SERVED_TIMEOUT = 120.0
#: Seconds the test waits for plugins/enable (the manifests allow 120 s for a start).
ENABLE_TIMEOUT = 150.0


def manifest_of(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    return data


def npm_spec(folder: Path) -> str:
    """The ``name@version`` that the manifest hands to npx."""
    args: list[str] = manifest_of(folder)["backend"]["args"]
    return next(a for a in args if a.startswith("@") and "@" in a[1:])


def uv_spec(folder: Path) -> str:
    """The ``name==version`` that the manifest hands to ``uvx --from``."""
    args: list[str] = manifest_of(folder)["backend"]["args"]
    return args[args.index("--from") + 1]


def served_or_skip(what: str, command: Sequence[str], *, requirement: str = "", expect: str | None = None) -> None:
    """Run ``command`` (a registry query through a package client, caches in the temporary folder; with
    ``requirement``, the path of a requirements file holding it is its last argument); skip the test with
    the client's words when the registry does not serve ``what`` (or its answer is not ``expect``)."""
    env = plugin_environment()
    if shutil.which(command[0], path=env["PATH"]) is None:
        pytest.skip(f"{what}: {command[0]} is not on PATH")
    with tempfile.TemporaryDirectory(prefix="hostd-registry-") as scratch:
        env |= {
            "npm_config_cache": f"{scratch}/npm",
            "UV_CACHE_DIR": f"{scratch}/uv",
            "npm_config_update_notifier": "false",
        }
        if requirement:
            (Path(scratch) / "requirements.in").write_text(requirement + "\n")
            command = [*command, f"{scratch}/requirements.in"]
        run = functools.partial(run_quietly, command, env=env, timeout=SERVED_TIMEOUT)
        try:
            done = trio.run(run)
        except trio.TooSlowError:
            pytest.skip(f"the registry did not answer for {what} within {SERVED_TIMEOUT:g} s: {shlex.join(command)}")
    if done.returncode != 0 or (expect is not None and done.stdout.strip() != expect):
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        said = " | ".join(lines if len(lines) <= 6 else [*lines[:4], "...", *lines[-1:]])
        pytest.skip(f"the registry does not serve {what} ({shlex.join(command)} exited {done.returncode}): {said}")


@pytest.fixture(scope="session")
def everything_served() -> str:
    """server-everything's pin, served by the npm registry (hostd's plugins/prepare fetches it)."""
    spec = npm_spec(EVERYTHING)
    served_or_skip(spec, ["npm", "view", spec, "version"], expect=spec.rsplit("@", 1)[1])
    return spec


@pytest.fixture(scope="session")
def time_served() -> str:
    """mcp-server-time's pin, resolvable from the Python index (hostd's plugins/prepare fetches it)."""
    spec = uv_spec(TIME)
    uv = Path(sys.executable).parent / "uv"
    served_or_skip(spec, [str(uv), "pip", "compile", "--quiet", "--no-header"], requirement=spec)
    return spec


async def call(client: HostdClient, name: str, arguments: dict[str, Any]) -> Any:
    return await client.request("tools/call", {"name": name, "arguments": arguments})


async def enable(client: HostdClient, folder: Path) -> dict[str, Any]:
    """install -> grant -> approve -> enable (conftest's ``ready``, with room for a slow start)."""
    info = await client.request("plugins/install", {"path": str(folder)})
    assert info["status"] == "stopped"
    # Only reserved permissions (client features, optional): enabled here with none granted.
    assert set(info["permissions"]) <= RESERVED_PERMISSIONS
    info = await client.request("plugins/prepare", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
    assert info["launch"]["cwd"] == str(folder)
    await client.request("plugins/grant", {"id": info["id"], "permissions": []})
    await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    status: dict[str, Any] = await client.request("plugins/enable", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
    assert status["status"] == "ready", status
    return status


async def disable(client: HostdClient, plugin_id: str) -> None:
    status = await client.request("plugins/disable", {"id": plugin_id})
    assert status["status"] == "stopped"
    assert status["tools_count"] == 0
    # Closing stdin is enough: the real server exits by itself, no signal needed.
    assert status["last_exit"] == "stdin-eof, code 0"
    assert (await client.request("tools/list", {"plugin": plugin_id}))["tools"] == []


# -- the catalog itself ---------------------------------------------------------------------


def test_catalog_manifests_are_valid_and_pinned() -> None:
    prepare = (MANIFESTS / "prepare.sh").read_text()
    readme = (MANIFESTS / "README.md").read_text()
    for folder in CATALOG:
        manifest, _digest = load_manifest(folder)
        assert manifest.id == folder.name
        # server-everything asks for the client features (reserved permissions) its conditional tools need.
        reserved = ["mcp.sampling", "mcp.elicitation", "mcp.roots"] if folder == EVERYTHING else []
        assert manifest.permissions == reserved
        if manifest.backend.command == "npx":
            spec = npm_spec(folder)
            assert spec.rsplit("@", 1)[1] == manifest.version
        else:
            assert manifest.backend.command == "uvx"
            spec = uv_spec(folder)
            assert spec.split("==", 1)[1] == manifest.version
        # prepare.sh fetches exactly what the manifest runs; the README names the same pin.
        assert f'"{spec}"' in prepare
        assert spec in readme
    everything, _digest = load_manifest(EVERYTHING)
    assert sorted(everything.contributes.expected_tools(())) == [f"server-everything.{t}" for t in EVERYTHING_TOOLS]
    assert sorted(manifest_of(TIME)["contributes"]["tools"]) == [f"mcp-server-time.{t}" for t in TIME_TOOLS]


# -- @modelcontextprotocol/server-everything (npm, npx) ---------------------------------------


async def test_server_everything(hostd: HostdClient, everything_served: str) -> None:
    status = await enable(hostd, EVERYTHING)
    assert status["server_name"] == "mcp-servers/everything"
    assert status["server_version"] == "2.0.0"
    # Issue 25: the real npm server (node) runs with its own /proc wherever the kernel offers one.
    assert ("private-proc" in status["isolation"]) == platform_offers("private-proc")[0]
    assert status["tools_count"] == len(EVERYTHING_TOOLS)

    listing = await hostd.request("tools/list", {"plugin": "server-everything"})
    assert sorted(t["name"] for t in listing["tools"]) == [f"server-everything.{t}" for t in EVERYTHING_TOOLS]
    get_sum = next(t for t in listing["tools"] if t["name"] == "server-everything.get-sum")
    assert get_sum["function_name"] == "server-everything_get-sum"
    assert get_sum["inputSchema"]["required"] == ["a", "b"]
    assert "permission" not in get_sum

    echo = await call(hostd, "server-everything.echo", {"message": "héllo, wörld ✓"})
    assert echo == {"content": [{"type": "text", "text": "Echo: héllo, wörld ✓"}]}

    total = await call(hostd, "server-everything.get-sum", {"a": 19, "b": 23})
    assert total == {"content": [{"type": "text", "text": "The sum of 19 and 23 is 42."}]}
    # JavaScript numbers, exactly as the server computes and prints them.
    total = await call(hostd, "server-everything.get-sum", {"a": 0.1, "b": 0.2})
    assert total == {"content": [{"type": "text", "text": "The sum of 0.1 and 0.2 is 0.30000000000000004."}]}

    weather = await call(hostd, "server-everything.get-structured-content", {"location": "Chicago"})
    expected = {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    assert weather["structuredContent"] == expected
    assert [json.loads(c["text"]) for c in weather["content"]] == [expected]

    # hostd checks arguments against the server's (draft-07) inputSchema before calling.
    with pytest.raises(RpcError) as invalid:
        await call(hostd, "server-everything.get-sum", {"a": "19", "b": 23})
    assert invalid.value.kind == "INVALID_ARGUMENTS"
    assert invalid.value.data["pointer"] == "/a"

    # Progress from the real server reaches the parent under the parent's request id.
    response = await hostd.start(
        "tools/call",
        {"name": "server-everything.trigger-long-running-operation", "arguments": {"duration": 0.6, "steps": 3}},
    )
    with trio.fail_after(30):
        done = await response()
    assert done == {
        "content": [{"type": "text", "text": "Long running operation completed. Duration: 0.6 seconds, Steps: 3."}]
    }
    rid = response.request_id  # type: ignore[attr-defined]
    progress = [n for n in hostd.seen("$/progress") if n["requestId"] == rid]
    assert progress == [{"requestId": rid, "progress": i, "total": 3} for i in (1, 2, 3)]

    await disable(hostd, "server-everything")


async def test_server_everything_sees_only_the_trimmed_environment(hostd: HostdClient, everything_served: str) -> None:
    await enable(hostd, EVERYTHING)
    shown = await call(hostd, "server-everything.get-env", {})
    env = json.loads(shown["content"][0]["text"])
    # The manifest's env reached the server through npx; the test process's own variables did not.
    assert env["npm_config_prefer_offline"] == "true"
    # HOME is its private view (issue 25; sandbox/home_view.py), the one its capability set lists.
    [listed] = [p for p in (await hostd.request("plugins/list", {}))["plugins"] if p["id"] == "server-everything"]
    folders = listed["launch"]["capabilities"]["folders"]
    assert [f["path"] for f in folders if f["why"] == "private home"] == [env["HOME"]]
    assert env["HOME"].endswith("/data/server-everything/home") and env["HOME"] != os.environ["HOME"]
    assert "HOSTD_SANDBOX_TOKEN" in env
    assert "PYTEST_CURRENT_TEST" in os.environ
    assert not [name for name in env if name.startswith("PYTEST") or "SECRET" in name]
    restarted = await hostd.request("plugins/restart", {"id": "server-everything"}, timeout=ENABLE_TIMEOUT)
    assert restarted["status"] == "ready"
    assert restarted["restarts"] == 1
    echo = await call(hostd, "server-everything.echo", {"message": "again"})
    assert echo == {"content": [{"type": "text", "text": "Echo: again"}]}
    await disable(hostd, "server-everything")


# -- mcp-server-time (PyPI, uvx) ------------------------------------------------------------

TOKYO = timezone(timedelta(hours=9))  # Asia/Tokyo: UTC+9, no DST
KOLKATA = timezone(timedelta(hours=5, minutes=30))  # Asia/Kolkata: UTC+5:30, no DST
KATHMANDU = timezone(timedelta(hours=5, minutes=45))  # Asia/Kathmandu: UTC+5:45, no DST


def time_result(zone_name: str, moment: datetime) -> dict[str, Any]:
    return {
        "timezone": zone_name,
        "datetime": moment.isoformat(timespec="seconds"),
        "day_of_week": moment.strftime("%A"),
        "is_dst": False,
    }


async def convert(
    client: HostdClient, source: tuple[str, timezone], hhmm: str, target: tuple[str, timezone]
) -> tuple[dict[str, Any], date]:
    """Call convert_time; return its structured result and the day it was taken on.

    The server puts the time on today's date in the source zone: the day is read
    before and after the call so a call across midnight is still checked exactly.
    """
    before = datetime.now(source[1]).date()
    result = await call(
        client,
        "mcp-server-time.convert_time",
        {"source_timezone": source[0], "time": hhmm, "target_timezone": target[0]},
    )
    after = datetime.now(source[1]).date()
    structured = result["structuredContent"]
    assert [json.loads(c["text"]) for c in result["content"]] == [structured]
    day = date.fromisoformat(structured["source"]["datetime"][:10])
    assert day in (before, after)
    return structured, day


async def test_mcp_server_time(hostd: HostdClient, time_served: str) -> None:
    status = await enable(hostd, TIME)
    assert status["server_name"] == "mcp-time"
    assert status["server_version"] == "2026.10.19"  # the pinned release, read from its metadata
    assert status["tools_count"] == 2

    listing = await hostd.request("tools/list", {"plugin": "mcp-server-time"})
    assert sorted(t["name"] for t in listing["tools"]) == [f"mcp-server-time.{t}" for t in TIME_TOOLS]
    current = next(t for t in listing["tools"] if t["name"] == "mcp-server-time.get_current_time")
    assert current["inputSchema"]["required"] == ["timezone"]
    # --local-timezone UTC is what the descriptions offer as the local zone.
    assert "Use 'UTC' as local timezone" in current["inputSchema"]["properties"]["timezone"]["description"]

    # 03:00 in Tokyo is 23:30 of the day before in Kolkata.
    converted, day = await convert(hostd, ("Asia/Tokyo", TOKYO), "03:00", ("Asia/Kolkata", KOLKATA))
    source = datetime(day.year, day.month, day.day, 3, 0, tzinfo=TOKYO)
    assert converted == {
        "source": time_result("Asia/Tokyo", source),
        "target": time_result("Asia/Kolkata", source.astimezone(KOLKATA)),
        "time_difference": "-3.5h",
    }
    assert converted["target"]["datetime"] == f"{day - timedelta(days=1)}T23:30:00+05:30"

    converted, day = await convert(hostd, ("UTC", UTC), "12:00", ("Asia/Kathmandu", KATHMANDU))
    source = datetime(day.year, day.month, day.day, 12, 0, tzinfo=UTC)
    assert converted == {
        "source": time_result("UTC", source),
        "target": time_result("Asia/Kathmandu", source.astimezone(KATHMANDU)),
        "time_difference": "+5.75h",
    }
    assert converted["target"]["datetime"] == f"{day}T17:45:00+05:45"

    before = datetime.now(UTC).replace(microsecond=0)
    now = await call(hostd, "mcp-server-time.get_current_time", {"timezone": "UTC"})
    after = datetime.now(UTC)
    structured = now["structuredContent"]
    assert set(structured) == {"timezone", "datetime", "day_of_week", "is_dst"}
    moment = datetime.fromisoformat(structured["datetime"])
    assert moment.utcoffset() == timedelta(0)
    assert before <= moment <= after
    assert structured == time_result("UTC", moment)
    assert [json.loads(c["text"]) for c in now["content"]] == [structured]

    # The server's own failure arrives as MCP_TOOL_CALL_FAILED with its text.
    with pytest.raises(RpcError) as unknown:
        await call(hostd, "mcp-server-time.get_current_time", {"timezone": "Mars/Olympus"})
    assert unknown.value.kind == "MCP_TOOL_CALL_FAILED"
    [text] = [c["text"] for c in unknown.value.data["content"]]
    assert "No time zone found with key Mars/Olympus" in text
    # Arguments that break the inputSchema never reach the server.
    with pytest.raises(RpcError) as missing:
        await call(hostd, "mcp-server-time.convert_time", {"source_timezone": "UTC", "time": "12:00"})
    assert missing.value.kind == "INVALID_ARGUMENTS"

    assert (await hostd.request("plugins/status", {"id": "mcp-server-time"}))["status"] == "ready"
    await disable(hostd, "mcp-server-time")
