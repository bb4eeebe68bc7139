"""Protocol eras (manifest ``backend.protocol``): a server that speaks only 2026-07-28, one that speaks only
2025-11-25, and an SDK 2.x server that speaks both, each started by hostd under ``auto``, ``legacy`` and pins.

The class of bug: hostd assumed one era (always ``initialize``, ``ping``, unsolicited list changes), so a
modern-only server could not start, and an era decision keyed to one error code would misjudge servers
that answer an unknown ``server/discover`` with another code. Every member below failed on the code
before the era negotiation (a modern-only server failed its start on ``initialize``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import FIXTURES, ready, spawn_hostd

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ENVELOPE = ("io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities")


def era_plugin(
    tmp_path: Path,
    speaks: str,
    *,
    protocol: str | None = None,
    args: list[str] | None = None,
    name: str = "mcp-era",
    startup_timeout: float = 20,
) -> Path:
    """A copy of fixtures/mcp-era speaking only ``speaks``, with ``backend.protocol`` = ``protocol``."""
    folder = tmp_path / f"{name}-{speaks}-{protocol or 'default'}"
    folder.mkdir()
    shutil.copy(FIXTURES / "mcp-era" / "server.py", folder / "server.py")
    backend: dict[str, Any] = {
        "type": "mcp",
        "transport": "stdio",
        "command": "python3",
        "args": ["server.py", "--speaks", speaks, *(args or [])],
        "startup_timeout_seconds": startup_timeout,
    }
    if protocol is not None:
        backend["protocol"] = protocol
    manifest = {
        "id": name,
        "name": "Era fixture",
        "version": "1.0.0",
        "contributes": {"tools": [f"{name}.echo", f"{name}.change", f"{name}.seen"]},
        "backend": backend,
    }
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


def sdk_plugin(tmp_path: Path, protocol: str | None) -> Path:
    folder = tmp_path / f"mcp-sdk-{protocol or 'default'}"
    shutil.copytree(FIXTURES / "mcp-sdk", folder)
    manifest = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["startup_timeout_seconds"] = 60
    if protocol is not None:
        manifest["backend"]["protocol"] = protocol
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def seen(hostd: HostdClient, plugin: str = "mcp-era") -> dict[str, Any]:
    result = await hostd.request("tools/call", {"name": f"{plugin}.seen", "arguments": {}})
    return dict(result["structuredContent"])


async def echo(hostd: HostdClient, plugin: str = "mcp-era") -> str:
    result = await hostd.request("tools/call", {"name": f"{plugin}.echo", "arguments": {"text": "héllo"}})
    return str(result["content"][0]["text"])


async def start_fails(hostd: HostdClient, folder: Path) -> RpcError:
    with pytest.raises(RpcError) as failed:
        await ready(hostd, folder)
    assert failed.value.kind == "PLUGIN_START_FAILED"
    return failed.value


async def test_a_server_that_speaks_only_2026_07_28_starts_and_serves_calls(hostd: HostdClient, tmp_path: Path) -> None:
    with trio.fail_after(60):
        status = await ready(hostd, era_plugin(tmp_path, MODERN))
        assert (status["status"], status["era"], status["protocol_version"]) == ("ready", "modern", MODERN)
        assert (status["server_name"], status["server_version"]) == ("mcp-era", "1.0.0")
        assert await echo(hostd) == "héllo"
        record = await seen(hostd)
    assert record["methods"][:2] == ["server/discover", "tools/list"]
    assert "initialize" not in record["methods"]
    assert "ping" not in record["methods"]
    # Every request carried the per-request envelope at the negotiated version, with hostd's identity.
    for meta in record["metas"]:
        assert meta["io.modelcontextprotocol/protocolVersion"] == MODERN
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "hostd"


async def listening(hostd: HostdClient) -> None:
    """Until the plugin has received ``subscriptions/listen`` (each check is one tool call, no sleep)."""
    while "subscriptions/listen" not in (await seen(hostd))["methods"]:
        pass


async def test_modern_list_changes_arrive_on_subscriptions_listen_which_a_restart_reopens(
    hostd: HostdClient, tmp_path: Path
) -> None:
    with trio.fail_after(60):
        await ready(hostd, era_plugin(tmp_path, MODERN))
        for _round in range(2):  # the first instance, then the one after plugins/restart
            await listening(hostd)
            before = len(hostd.seen("tools/listChanged"))
            await hostd.request("tools/call", {"name": "mcp-era.change", "arguments": {}})
            await hostd.wait_until(lambda before=before: len(hostd.seen("tools/listChanged")) > before)  # type: ignore[misc]
            # The changed definition was discovered (and is held back until approved: the trust gate).
            status = await hostd.request("plugins/status", {"id": "mcp-era"})
            assert status["withheld"] == ["mcp-era.echo"]
            status = await hostd.request("plugins/restart", {"id": "mcp-era"})
            assert status["era"] == "modern"


@pytest.mark.parametrize("code", [-32601, -32600, -32602, -32603, -32000])
async def test_auto_falls_back_to_initialize_whatever_error_discover_gets(
    hostd: HostdClient, tmp_path: Path, code: int
) -> None:
    with trio.fail_after(60):
        status = await ready(hostd, era_plugin(tmp_path, LEGACY, args=["--discover-error", str(code)]))
        assert (status["era"], status["protocol_version"]) == ("legacy", LEGACY)
        assert await echo(hostd) == "héllo"
        record = await seen(hostd)
    assert record["methods"][:4] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]


async def test_the_era_auto_found_is_remembered_for_the_same_launch(hostd: HostdClient, tmp_path: Path) -> None:
    log = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(60):
        await ready(hostd, era_plugin(tmp_path, LEGACY, args=["--record", str(log)]))
        await hostd.request("plugins/restart", {"id": "mcp-era"})
        assert await echo(hostd) == "héllo"
    methods = [json.loads(line).get("method") for line in log.read_text().splitlines()]
    # The second instance went straight to initialize: the probe that said "legacy" is not repeated.
    assert [m for m in methods if m in ("server/discover", "initialize")] == [
        "server/discover",
        "initialize",
        "initialize",
    ]


@pytest.mark.parametrize(
    ("speaks", "protocol", "reason", "offered"),
    [
        (MODERN, "legacy", "backend.protocol is 'legacy' but the server offers 2026-07-28", [MODERN]),
        (MODERN, LEGACY, f"backend.protocol pins {LEGACY} but the server offers 2026-07-28", [MODERN]),
        (LEGACY, MODERN, f"backend.protocol pins {MODERN} but the server offers {LEGACY}", [LEGACY]),
        (LEGACY, "2025-06-18", f"backend.protocol pins 2025-06-18 but the server offers {LEGACY}", [LEGACY]),
    ],
)
async def test_a_pin_the_server_does_not_speak_fails_the_start_naming_what_it_offers(
    hostd: HostdClient, tmp_path: Path, speaks: str, protocol: str, reason: str, offered: list[str]
) -> None:
    with trio.fail_after(60):
        failure = await start_fails(hostd, era_plugin(tmp_path, speaks, protocol=protocol))
    assert failure.data["reason"] == reason
    assert failure.data["offered"] == offered


@pytest.mark.parametrize(("speaks", "era"), [(MODERN, "modern"), (LEGACY, "legacy")])
async def test_a_pin_the_server_speaks_starts_in_its_era(
    hostd: HostdClient, tmp_path: Path, speaks: str, era: str
) -> None:
    with trio.fail_after(60):
        status = await ready(hostd, era_plugin(tmp_path, speaks, protocol=speaks))
        assert (status["era"], status["protocol_version"]) == (era, speaks)
        assert await echo(hostd) == "héllo"


async def test_a_modern_server_that_sends_a_request_gets_method_not_found(hostd: HostdClient, tmp_path: Path) -> None:
    with trio.fail_after(60):
        await ready(hostd, era_plugin(tmp_path, MODERN, args=["--variant", "server-requests"]))
        assert await echo(hostd) == "after asking"
        record = await seen(hostd)
    assert record["answers"] == [{"code": -32601, "message": "hostd does not serve sampling/createMessage"}]


async def test_modern_liveness_uses_discover_not_ping(tmp_path: Path) -> None:
    async with spawn_hostd(tmp_path, "--ping-interval", "0.05") as hostd:
        with trio.fail_after(60):
            await ready(hostd, era_plugin(tmp_path, MODERN))
            while (await seen(hostd))["methods"].count("server/discover") < 3:
                pass
            record = await seen(hostd)
            status = await hostd.request("plugins/status", {"id": "mcp-era"})
    assert "ping" not in record["methods"]
    assert status["status"] == "ready"


@pytest.mark.parametrize(("protocol", "era", "version"), [(None, "modern", MODERN), ("legacy", "legacy", LEGACY)])
async def test_an_sdk_server_is_reached_in_both_eras(
    hostd: HostdClient, tmp_path: Path, protocol: str | None, era: str, version: str
) -> None:
    with trio.fail_after(120):
        status = await ready(hostd, sdk_plugin(tmp_path, protocol))
        assert (status["era"], status["protocol_version"], status["server_name"]) == (era, version, "mcp-sdk")
        assert await echo(hostd, "mcp-sdk") == "héllo"


async def test_a_modern_server_too_slow_for_the_probe_is_probed_again_when_it_refuses_initialize(
    hostd: HostdClient, tmp_path: Path
) -> None:
    # The probe waits half the start timeout (4 s); the server answers its first discover after 5 s,
    # then refuses the initialize that followed with -32022 naming 2026-07-28: hostd probes again.
    folder = era_plugin(tmp_path, MODERN, args=["--variant", "slow-discover"], startup_timeout=8)
    with trio.fail_after(60):
        status = await ready(hostd, folder)
        assert (status["era"], status["protocol_version"]) == ("modern", MODERN)
        record = await seen(hostd)
    assert record["methods"][:4] == ["server/discover", "notifications/cancelled", "initialize", "server/discover"]


async def test_a_result_that_is_not_complete_is_never_taken_for_one(hostd: HostdClient, tmp_path: Path) -> None:
    with trio.fail_after(60):
        await ready(hostd, era_plugin(tmp_path, MODERN, args=["--variant", "input-required"]))
        with pytest.raises(RpcError) as refused:
            await echo(hostd)
        # A complete result (resultType absent or "complete") still is one.
        assert (await seen(hostd))["methods"][-1] == "tools/call"
    # hostd.mcp.client_features serves input_required rounds: this parent serves no roots, so the round is refused.
    assert refused.value.kind == "CAPABILITY_NOT_SUPPORTED"
    assert refused.value.data["capability"] == "roots"
