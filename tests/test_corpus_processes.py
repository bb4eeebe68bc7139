"""Failure corpus E (processes): docs/corpus.md, cases E1-E7.

Helpers (the ``healthy`` neighbour, pid and log filters) live in
``test_corpus_framing.py``. Tests that change hostd's own environment or kill
it start their own hostd.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import psutil
import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from sandbox.environment import trim_path
from tests.conftest import MakePlugin, ready, spawn_hostd
from tests.plugin_pids import host_pids
from tests.test_corpus_framing import (
    HOSTILE,
    MIB,
    assert_healthy,
    echo,
    enable_healthy,
    hostd_rss,
    logs,
    plugin_pids,
)
from tests.waiting import alive, exited


def logged_pids(hostd: HostdClient, prefix: str) -> list[int]:
    """Pids the hostile plugin printed on stderr as ``<prefix> <pid> in <pid namespace>``, as the host's pids
    (the plugin sees only its own namespace: tests/plugin_pids.py)."""
    found = []
    for note in logs(hostd, source="stderr"):
        match = re.fullmatch(re.escape(prefix) + r" (\d+) in (\S+)", note["message"])
        if match:
            found += host_pids(match.group(2), [int(match.group(1))])
    return found


# -- E1 stderr flood -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "line"), [("stderr-flood", "e" * 1023), ("stderr-flood-raw", "E" * 4096)], ids=["lines", "raw"]
)
async def test_e1_stderr_flood_bounded_tail_and_rate_limited_logs(
    hostd: HostdClient, make_plugin: MakePlugin, variant: str, line: str
) -> None:
    with trio.fail_after(40):
        await enable_healthy(hostd, make_plugin)
        baseline = hostd_rss(hostd)
        status = await ready(hostd, make_plugin(variant=variant))
        assert status["status"] == "ready"
        for text in ("one", "two", "three"):
            assert (await echo(hostd, text))["structuredContent"] == {"text": text, "length": len(text)}
        forwarded = len(logs(hostd, source="stderr"))
        # initialize, two tools/list pages, three calls: >= 6 x 256 = 1536 lines written. The bucket allows
        # 50 + 20/s, so forwarding them all would take over 70 s, past this test's 40 s guard.
        assert 0 < forwarded < 6 * 256
        assert hostd_rss(hostd) - baseline < 16 * MIB
        # The tail hostd keeps is bounded in lines and in bytes per line: crash it to see it.
        with pytest.raises(RpcError) as gone:
            await hostd.request("tools/call", {"name": f"{HOSTILE}.exit", "arguments": {"code": 7}})
        assert gone.value.kind == "PLUGIN_HOST_UNAVAILABLE"
        unhealthy = await hostd.wait_for(
            "plugins/statusChanged", lambda s: s["plugin_id"] == HOSTILE and s["status"] == "unhealthy", timeout=5
        )
        assert unhealthy["error"]["reason"] == "exited with code 7"
        assert unhealthy["error"]["stderrTail"] == [line] * 10
        await assert_healthy(hostd)


# -- E2 ignores stdin EOF and SIGTERM --------------------------------------------------


async def test_e2_stubborn_server_is_killed_reaped_and_reported(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        before = plugin_pids(hostd)
        await ready(hostd, make_plugin(variant="ignore-term"))
        tree = plugin_pids(hostd) - before
        assert tree
        status = await hostd.request("plugins/disable", {"id": HOSTILE})
        assert status["status"] == "stopped"
        assert status["last_exit"] == "sigkill, code -9"  # stdin EOF, then SIGTERM, were not enough
        assert [pid for pid in tree if psutil.pid_exists(pid)] == []  # killed and reaped, no zombie
        assert plugin_pids(hostd) == before
        await assert_healthy(hostd)


# -- E3 wrapper that does not forward signals ------------------------------------------


async def test_e3_wrapper_and_its_child_both_end(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        await enable_healthy(hostd, make_plugin)
        before = plugin_pids(hostd)
        status = await ready(hostd, make_plugin(variant="wrapper", args=["--inner", "ignore-term"]))
        assert status["status"] == "ready"
        assert (await echo(hostd, "through the wrapper"))["structuredContent"]["text"] == "through the wrapper"
        tree = plugin_pids(hostd) - before
        await hostd.wait_until(lambda: bool(logged_pids(hostd, "wrapper child pid")), timeout=5)
        children = logged_pids(hostd, "wrapper child pid")
        assert children[0] in tree
        assert len(tree) >= 3  # shim, wrapper, child
        status = await hostd.request("plugins/disable", {"id": HOSTILE})
        assert status["status"] == "stopped"
        assert [pid for pid in tree if alive(pid)] == []
        assert not alive(children[0])
        assert plugin_pids(hostd) == before
        await assert_healthy(hostd)


# -- E4 host killed with SIGKILL -------------------------------------------------------


async def test_e4_nothing_outlives_a_killed_host(tmp_path: Path, make_plugin: MakePlugin) -> None:
    with trio.fail_after(30):
        async with spawn_hostd(tmp_path) as hostd:
            await enable_healthy(hostd, make_plugin)
            await ready(hostd, make_plugin(variant="setsid-child"))
            wrapped = make_plugin("wrapped", variant="wrapper")
            await ready(hostd, wrapped)
            await hostd.wait_until(lambda: len(logged_pids(hostd, "child pid")) >= 2, timeout=5)
            escapees = logged_pids(hostd, "child pid")
            tree = plugin_pids(hostd)
            assert set(escapees) <= tree  # the setsid child and the double-forked grandchild
            assert len(tree) >= 9  # 3 shims, 3 servers, the wrapper's child, the two escapees
            hostd.process.kill()
            await hostd.process.wait()
            with trio.move_on_after(5):
                for pid in tree:
                    await exited(pid)
            assert [pid for pid in tree if alive(pid)] == []


# -- E5 command not found --------------------------------------------------------------


async def _assert_not_found(hostd: HostdClient, folder: Path, command: str, searched: str | None) -> None:
    info = await hostd.request("plugins/install", {"path": str(folder)})
    assert info["launch"]["kind"] == "COMMAND_NOT_FOUND"  # shown at install, before any approval
    assert repr(command) in info["launch"]["error"]
    await hostd.request("plugins/grant", {"id": HOSTILE, "permissions": info["permissions"]})
    with pytest.raises(RpcError) as failed:
        await hostd.request("plugins/enable", {"id": HOSTILE})
    assert failed.value.kind == "PLUGIN_START_FAILED"
    assert failed.value.data["launchError"] == "COMMAND_NOT_FOUND"
    reason = failed.value.data["reason"]
    assert repr(command) in reason
    if searched is not None:
        assert f"PATH={searched!r}" in reason
    # No retry storm: nothing is started, now or later (no retry is scheduled).
    starting = [s for s in hostd.seen("plugins/statusChanged") if s["plugin_id"] == HOSTILE]
    assert [s for s in starting if s["status"] in ("starting", "ready")] == []
    assert (await hostd.request("plugins/status", {"id": HOSTILE}))["next_retry_at"] is None
    with pytest.raises(RpcError) as again:
        await hostd.request("plugins/enable", {"id": HOSTILE})
    assert again.value.data["reason"] == reason


@pytest.mark.parametrize("command", ["definitely-not-installed-xyz", "./bin/missing-server"])
async def test_e5_command_not_found_fails_at_once(hostd: HostdClient, make_plugin: MakePlugin, command: str) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        folder = make_plugin(backend={"command": command, "args": []})
        searched = trim_path(plugin_environment()["PATH"]) if "/" not in command else None
        await _assert_not_found(hostd, folder, command, searched)
        await assert_healthy(hostd)


async def test_e5_npx_with_a_minimal_path_fails_at_once(tmp_path: Path, make_plugin: MakePlugin) -> None:
    minimal = tmp_path / "minimal-bin"
    minimal.mkdir()
    (minimal / "python3").symlink_to(sys.executable)  # the healthy plugin still finds python3
    env = dict(os.environ, PATH=str(minimal))
    # --no-login-path: with discovery on, the login shell's PATH would find npx (see test_lifecycle).
    with trio.fail_after(20):
        async with HostdClient.spawn(["--state-dir", str(tmp_path / "state"), "--no-login-path"], env=env) as hostd:
            await enable_healthy(hostd, make_plugin)
            folder = make_plugin(backend={"command": "npx", "args": ["-y", "some-mcp-server"]})
            await _assert_not_found(hostd, folder, "npx", str(minimal))
            await assert_healthy(hostd)


# -- E6 secrets ------------------------------------------------------------------------

SECRETS = {"HOSTD_TEST_SECRET": "s3cr3t-value", "OPENAI_API_KEY": "sk-test-0123456789abcdef"}
PROXY = {
    "HTTPS_PROXY": "http://proxy.invalid:3128",
    "https_proxy": "http://proxy.invalid:3128",
    "NO_PROXY": "localhost",
}
#: The user's TLS trust settings: paths, not secrets; they always pass (a TLS-inspecting proxy needs them).
TRUST = {
    "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/certs/ca-certificates.crt",
}


@pytest.mark.parametrize("pass_proxy", [False, True], ids=["default", "pass-proxy-env"])
async def test_e6_secrets_never_reach_a_plugin(tmp_path: Path, make_plugin: MakePlugin, pass_proxy: bool) -> None:
    env = {**plugin_environment(), **SECRETS, **PROXY, **TRUST}
    args = ["--state-dir", str(tmp_path / "state"), *(["--pass-proxy-env"] if pass_proxy else [])]
    with trio.fail_after(20):
        async with HostdClient.spawn(args, env=env) as hostd:
            await enable_healthy(hostd, make_plugin)
            await ready(hostd, make_plugin())
            seen = await hostd.request("tools/call", {"name": f"{HOSTILE}.environment", "arguments": {}})
            names = set(seen["structuredContent"]["names"])
            assert names.isdisjoint(SECRETS)
            if pass_proxy:
                assert set(PROXY) <= names
            else:
                assert names.isdisjoint(PROXY)
            assert set(TRUST) <= names
            assert "PATH" in names
            await assert_healthy(hostd)


# -- E7 graceful but slow exit ---------------------------------------------------------


async def test_e7_slow_exit_gets_its_grace(hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path) -> None:
    # The stubborn counterpart (still killed) is test_e2_stubborn_server_is_killed_reaped_and_reported.
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        before = plugin_pids(hostd)
        folder = make_plugin(variant="slow-exit", backend={"env": {"ECHO_MARKER_DIR": str(tmp_path / "shared")}})
        await ready(hostd, folder)
        status = await hostd.request("plugins/disable", {"id": HOSTILE})
        assert status["status"] == "stopped"
        assert status["last_exit"] == "stdin-eof, code 0"  # it exited by itself, after its 1 s flush
        marker = tmp_path / "shared" / "exited.marker"
        assert marker.exists()
        assert int(marker.read_text()) > 0
        assert plugin_pids(hostd) == before
        await assert_healthy(hostd)
