"""plugins/logs: a plugin's recent log lines on demand, from a bounded ring that outlives its instances."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from hostd.cli.client import RpcError
from hostd.host.service import LogRing
from hostd.storage.logstore import LOG_FILE_BYTES, LogFiles
from tests.conftest import ECHO_TOOLS, MakePlugin, ready, run_hostctl, spawn_hostd


def _messages(result: dict[str, Any], source: str) -> list[str]:
    return [line["message"] for line in result["lines"] if line["source"] == source]


async def test_logs_after_a_crash_show_the_stderr_of_each_instance(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="slow-start", args=["--delay", "0.05"])
    async with spawn_hostd(tmp_path) as client:
        await ready(client, folder)
        with pytest.raises(RpcError) as crashed:
            await client.request("tools/call", {"name": "mcp-echo.exit", "arguments": {"code": 3}})
        assert crashed.value.kind == "PLUGIN_HOST_UNAVAILABLE"
        # The restart policy starts it again: a second instance writes its own lines.
        await client.wait_until(
            lambda: len([s for s in client.seen("plugins/statusChanged") if s["status"] == "ready"]) >= 2, timeout=60
        )
        logs = await client.request("plugins/logs", {"id": "mcp-echo"})
        assert _messages(logs, "stderr").count("loading 1") == 2
        assert logs["dropped"] == 0
        assert all(line["time"].endswith("Z") for line in logs["lines"])
        # Oldest first, and exactly what plugins/log carried for the plugin.
        sent = [n for n in client.seen("plugins/log") if n["plugin"] == "mcp-echo"]
        assert [(x["level"], x["source"], x["message"]) for x in logs["lines"]] == [
            (n["level"], n["source"], n["message"]) for n in sent
        ]
        last = await client.request("plugins/logs", {"id": "mcp-echo", "limit": 1})
        assert last["lines"] == logs["lines"][-1:]


async def test_logs_of_a_start_that_failed(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="exit-at-start")
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as failed:
            await ready(client, folder)
        assert failed.value.kind == "PLUGIN_START_FAILED"
        logs = await client.request("plugins/logs", {"id": "mcp-echo"})
        assert "API key missing" in _messages(logs, "stderr")


async def test_logs_keep_mcp_log_messages_redacted(tmp_path: Path, make_plugin: MakePlugin) -> None:
    folder = make_plugin(variant="raw-replies", tools=[*ECHO_TOOLS, "raw"])
    async with spawn_hostd(tmp_path) as client:
        await ready(client, folder)
        log = json.dumps({"level": "warning", "logger": "t", "data": "connected with token=hunter2secret"})
        await client.request(
            "tools/call", {"name": "mcp-echo.raw", "arguments": {"result": '{"content":[]}', "log": log}}
        )
        logs = await client.request("plugins/logs", {"id": "mcp-echo"})
        mcp = [line for line in logs["lines"] if line["source"] == "mcp"]
        assert [(m["level"], m["message"]) for m in mcp] == [("warning", "connected with token=[REDACTED]")]


async def test_logs_of_unknown_plugins_and_bad_limits(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path) as client:
        with pytest.raises(RpcError) as missing:
            await client.request("plugins/logs", {"id": "nope"})
        assert missing.value.kind == "PLUGIN_NOT_FOUND"
        info = await client.request("plugins/install", {"path": str(make_plugin())})
        assert await client.request("plugins/logs", {"id": info["id"]}) == {"lines": [], "dropped": 0}
        for limit in (0, -1, 1001):
            with pytest.raises(RpcError) as bad:
                await client.request("plugins/logs", {"id": info["id"], "limit": limit})
            assert bad.value.kind == "INVALID_PARAMS"


def test_ring_is_bounded_by_lines_and_by_characters() -> None:
    by_lines = LogRing(max_lines=3, max_chars=1000)
    for i in range(5):
        by_lines.add("info", "stderr", f"line {i}")
    assert [line.message for line in by_lines.recent(10)] == ["line 2", "line 3", "line 4"]
    assert by_lines.dropped == 2
    by_chars = LogRing(max_lines=100, max_chars=10)
    for text in ("aaaa", "bbbb", "cccc"):
        by_chars.add("info", "stderr", text)
    assert [line.message for line in by_chars.recent(10)] == ["bbbb", "cccc"]
    assert by_chars.dropped == 1
    assert by_chars.recent(0) == []


# -- across hostd processes (hostd/storage/logstore.py) -------------------------------------------------------------
# Each hostctl command is a hostd of its own on the same state folder: what a plugin wrote while an earlier
# one ran it must still be there for `hostctl logs`, redacted, from a file that stays within its bound.


async def hostctl_json(state: Path, *args: str) -> Any:
    done = await run_hostctl(state, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


async def test_logs_of_an_earlier_command_are_shown_redacted(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    secret = "correct-horse-battery-staple-77"  # a manifest env value: redacted as such, no pattern names it
    env = {"ECHO_SAY_PASSPHRASE": secret}
    folder = make_plugin(variant="stderr-env", backend={"env": env})
    await hostctl_json(state, "install", str(folder))
    await hostctl_json(state, "grant", "mcp-echo", "--all")
    await hostctl_json(state, "approve", "mcp-echo", "--yes")
    assert (await hostctl_json(state, "enable", "mcp-echo"))["status"] == "ready"
    # The next hostd may start it again at restore before it is disabled (its lines then follow); the one
    # after that does not run it at all: whatever `logs` shows, an earlier hostd saw.
    await hostctl_json(state, "disable", "mcp-echo")
    logs = await hostctl_json(state, "logs", "mcp-echo")
    said = ["starting with these settings:", "passphrase: [REDACTED]"]
    stderr = [line["message"] for line in logs["lines"] if line["source"] == "stderr"]
    assert stderr in (said, said * 2)
    assert logs["dropped"] == 0
    human = await run_hostctl(state, "logs", "mcp-echo")
    assert "starting with these settings:" in human.stdout and "passphrase: [REDACTED]" in human.stdout
    file = state / "logs" / "mcp-echo.jsonl"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert stat.S_IMODE(file.parent.stat().st_mode) == 0o700
    assert secret.encode() not in file.read_bytes()
    for written in state.rglob("*"):  # the manifest holds it (the user wrote it there); nothing hostd wrote does
        if written.is_file() and written.parent != folder:
            assert secret.encode() not in written.read_bytes(), written
    await hostctl_json(state, "uninstall", "mcp-echo")
    assert not file.exists()


async def test_the_log_file_stays_within_its_bound(tmp_path: Path, make_plugin: MakePlugin) -> None:
    state = tmp_path / "state"
    folder = make_plugin(variant="flood", tools=[*ECHO_TOOLS, "progress-flood", "log-flood"])
    await hostctl_json(state, "install", str(folder))
    await hostctl_json(state, "grant", "mcp-echo", "--all")
    await hostctl_json(state, "approve", "mcp-echo", "--yes")
    await hostctl_json(state, "enable", "mcp-echo")
    pad = "x" * 4000
    calls = 4  # 50 lines of ~4 KiB each (the link's burst): 800 KiB in all, over the 512 KiB bound
    for _ in range(calls):
        called = await hostctl_json(state, "call", "mcp-echo", "log-flood", json.dumps({"count": 50, "bytes": 4000}))
        assert called["content"][0]["text"] == "sent 50"
        assert (state / "logs" / "mcp-echo.jsonl").stat().st_size <= LOG_FILE_BYTES
    logs = await hostctl_json(state, "logs", "mcp-echo", "--limit", "1000")
    mcp = [line["message"] for line in logs["lines"] if line["source"] == "mcp"]
    everything = [f"line {i} {pad}" for _ in range(calls) for i in range(1, 51)]
    assert 0 < len(mcp) < len(everything)
    assert mcp == everything[-len(mcp) :]  # the newest, in order, nothing torn
    assert logs["dropped"] > 0


async def test_log_files_compact_to_the_newest_lines(tmp_path: Path) -> None:
    files = LogFiles(tmp_path / "logs", max_bytes=4096)
    for i in range(200):
        files.add("p", {"time": "t", "level": "info", "source": "stderr", "message": f"line {i:03d}"})
        if i % 7 == 0:
            await files.flush()
            assert (tmp_path / "logs" / "p.jsonl").stat().st_size <= 4096
    lines, dropped = await files.read("p", 1000)
    assert [line["message"] for line in lines] == [f"line {i:03d}" for i in range(200 - len(lines), 200)]
    assert dropped == 200 - len(lines) > 0
    # A torn last record (a crash during a write) is skipped; the rest reads.
    with (tmp_path / "logs" / "p.jsonl").open("ab") as out:
        out.write(b'{"time": "t", "level": "in')
    assert (await files.read("p", 2))[0] == lines[-2:]
    await files.drop("p")
    assert await files.read("p", 10) == ([], 0)
