"""Flow control between plugins and the parent (issue 10): every queue bounded in bytes.

Each test runs a real hostd under a *hostile parent*: a parent whose reading of
hostd's stdout can be switched off (:class:`Parent`), beside a flooding plugin
(``fixtures/mcp-echo`` variant ``flood``) and a healthy one that must keep
serving. hostd's memory is read from ``/proc/<pid>/status``: ``VmHWM`` is the
peak resident set since start, so no sampling can miss a spike. Waits are on
conditions (a marker file the plugin writes, bytes sitting in a pipe), never
on the clock.
"""

from __future__ import annotations

import array
import fcntl
import os
import subprocess
import sys
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import trio
import trio.testing

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.control.core import cut_utf8
from hostd.control.outbox import PROGRESS_BURST, PROGRESS_MESSAGE_BYTES, PROGRESS_RATE, Outbox
from hostd.wire.framing import PARENT_FRAME_LIMIT, LineDecoder, Message
from tests.conftest import MakePlugin, ready
from tests.waiting import until

MIB = 1024 * 1024
#: docs/protocol.md "Flow control": twice the 16 MiB outbox + 8 MiB for each of the two plugins.
BOUND_KIB = (2 * 16 + 2 * 8) * 1024
FLOOD_TOOLS = ["echo", "fail", "sleep", "large", "environment", "exit", "seen", "progress-flood", "log-flood"]


def memory_kib(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak) of ``pid``, in KiB, from ``/proc/<pid>/status``."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0])
    return values


def pipe_inode(path: str) -> str | None:
    target = os.readlink(path)
    return target if target.startswith("pipe:") else None


def queued_bytes(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` is an end of (``FIONREAD`` works on either end)."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def fullest_plugin_pipe(hostd_pid: int, ours: set[str]) -> int:
    """The most bytes waiting in any pipe hostd holds, other than its stdin and stdout (``ours``)."""
    most = 0
    folder = Path(f"/proc/{hostd_pid}/fd")
    for entry in folder.iterdir():
        try:
            inode = pipe_inode(str(entry))
            if inode is None or inode in ours:
                continue
            fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            most = max(most, queued_bytes(fd))
        finally:
            os.close(fd)
    return most


class Parent:
    """A parent application whose reading of hostd's stdout can be stopped and resumed.

    It is a :class:`HostdClient` with its own reader: while :attr:`reading` is
    clear, nothing is read, so hostd's stdout pipe fills up and stays full.
    """

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.client = HostdClient(process)
        self.reading = trio.Event()
        self.reading.set()
        self.bytes_read = 0
        #: hostd's stderr (its log), line by line.
        self.log: list[str] = []

    def stop_reading(self) -> None:
        self.reading = trio.Event()

    def resume_reading(self) -> None:
        self.reading.set()

    async def read(self) -> None:
        client = self.client
        assert self.process.stdout is not None
        decoder = LineDecoder(PARENT_FRAME_LIMIT)
        try:
            while True:
                await self.reading.wait()
                data = await self.process.stdout.receive_some(65536)
                if not data:
                    return
                self.bytes_read += len(data)
                for event in decoder.feed(data):
                    assert isinstance(event, Message) and isinstance(event.value, dict), event
                    client._route(event.value)
        finally:
            client._finish()

    async def read_log(self) -> None:
        assert self.process.stderr is not None
        pending = b""
        while data := await self.process.stderr.receive_some(65536):
            *lines, pending = (pending + data).split(b"\n")
            self.log.extend(line.decode(errors="replace") for line in lines)

    def own_pipes(self) -> set[str]:
        """The inodes of hostd's stdin and stdout pipes."""
        assert self.process.stdin is not None and self.process.stdout is not None
        fds = [self.process.stdin.fileno(), self.process.stdout.fileno()]  # type: ignore[attr-defined]
        return {inode for fd in fds if (inode := pipe_inode(f"/proc/self/fd/{fd}")) is not None}


@asynccontextmanager
async def hostile_parent(tmp_path: Path, *args: str) -> AsyncIterator[Parent]:
    """A running, initialized hostd whose parent can stop reading; ``shutdown``/``exit`` at the end."""
    # As tests.conftest.spawn_hostd: plugins may write markers and records under tmp_path/shared only.
    command = [sys.executable, "-m", "hostd", "serve", "--state-dir", str(tmp_path / "state")]
    command += ["--allow-write", str(shared(tmp_path)), *args]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=plugin_environment()
    )
    parent = Parent(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parent.read)
            nursery.start_soon(parent.read_log)
            await parent.client.request("initialize", {"clientInfo": {"name": "hostile", "version": "0"}})
            try:
                yield parent
            finally:
                with trio.CancelScope(shield=True):
                    parent.resume_reading()
                    await parent.client.close()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


def shared(tmp_path: Path) -> Path:
    """The folder plugins may write (markers, records)."""
    folder = tmp_path / "shared"
    folder.mkdir(exist_ok=True)
    return folder


async def two_plugins(parent: Parent, make_plugin: MakePlugin, **healthy: Any) -> None:
    """``flood`` (the flooding variant) and ``mcp-echo`` (healthy), both ready."""
    # A generous tool timeout: a flood under a loaded machine must not end as TOOL_TIMEOUT.
    await ready(parent.client, make_plugin("flood", "flood", tools=FLOOD_TOOLS, backend={"tool_timeout_seconds": 120}))
    await ready(parent.client, make_plugin("mcp-echo", **healthy))


def progress_of(client: HostdClient, rid: object) -> list[dict[str, Any]]:
    return [n for n in client.seen("$/progress") if n["requestId"] == rid]


# -- $/progress ------------------------------------------------------------------------


async def test_huge_progress_while_the_parent_does_not_read_keeps_memory_flat(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # Issue 10: 600 progress reports with 1.9 MB messages took hostd from 75 MiB to 2.26 GiB.
    # 120 of them are 228 MB: far over the documented bound if they are queued, nothing if coalesced.
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await two_plugins(parent, make_plugin)
        pid = client.process.pid
        before = memory_kib(pid)["VmRSS"]
        marker = shared(tmp_path) / "flood.done"
        parent.stop_reading()
        started = trio.current_time()
        flood = await client.start(
            "tools/call",
            {"name": "flood.progress-flood", "arguments": {"count": 120, "bytes": 1_900_000, "marker": str(marker)}},
        )
        echo = await client.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "still here"}})
        await until(marker.exists)  # the plugin wrote all 120 (the last one at most a pipe-full unread)
        peak = memory_kib(pid)["VmHWM"]
        assert peak - before < BOUND_KIB, f"hostd grew by {(peak - before) // 1024} MiB"
        parent.resume_reading()
        with trio.fail_after(60):
            assert (await flood())["content"] == [{"type": "text", "text": "sent 120"}]
            assert (await echo())["structuredContent"] == {"text": "still here", "length": 10}
        notes = progress_of(client, flood.request_id)  # type: ignore[attr-defined]
        assert notes[-1]["progress"] == 120  # the latest value wins
        assert len(notes) <= PROGRESS_BURST + PROGRESS_RATE * (trio.current_time() - started) + 1
        for note in notes:
            message = note["message"]
            assert len(message.encode()) <= PROGRESS_MESSAGE_BYTES
            assert message.endswith("…") and message.startswith(f"{note['progress']} xxx")
        assert parent.bytes_read < 4 * MIB  # not 228 MB


async def test_progress_is_rate_limited_per_request_and_the_latest_value_wins(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # Issue 10: 100k progress notifications reached the parent at 18,500/s.
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await two_plugins(parent, make_plugin)
        started = trio.current_time()
        flood = await client.start("tools/call", {"name": "flood.progress-flood", "arguments": {"count": 20000}})
        echo = await client.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "beside"}})
        with trio.fail_after(60):
            assert (await echo())["structuredContent"]["text"] == "beside"
            assert (await flood())["content"][0]["text"] == "sent 20000"
        elapsed = trio.current_time() - started
        notes = progress_of(client, flood.request_id)  # type: ignore[attr-defined]
        values = [n["progress"] for n in notes]
        assert values == sorted(set(values))
        assert values[-1] == 20000  # the last report is never lost: it is written before the response
        assert notes[-1] == {"requestId": flood.request_id, "progress": 20000, "total": 20000, "message": "20000 "}  # type: ignore[attr-defined]
        # An upper bound that only loosens when the machine is slow (elapsed grows): the
        # burst, the rate over the elapsed time, and the final value flushed with the response.
        assert len(notes) <= PROGRESS_BURST + PROGRESS_RATE * elapsed + 1, (len(notes), elapsed)


# -- plugins/log ---------------------------------------------------------------------------


async def test_log_flood_while_the_parent_does_not_read_is_dropped_with_a_count(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # A 1 MiB outbox: its log share is 64 KiB, less than one burst of the link's log rate limit.
    async with hostile_parent(tmp_path, "--max-outbox-bytes", str(MIB)) as parent:
        client = parent.client
        await two_plugins(parent, make_plugin)
        marker = shared(tmp_path) / "logs.done"
        parent.stop_reading()
        flood = await client.start(
            "tools/call", {"name": "flood.log-flood", "arguments": {"count": 400, "bytes": 3000, "marker": str(marker)}}
        )
        await until(marker.exists)
        echo = await client.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "after"}})
        parent.resume_reading()
        with trio.fail_after(60):
            assert (await flood())["content"][0]["text"] == "sent 400"
            assert (await echo())["structuredContent"]["text"] == "after"
            report = await client.wait_for("plugins/log", lambda n: n["plugin"] == "flood" and "dropped" in n)
        assert report["level"] == "warning" and report["source"] == "host"
        assert report["dropped"] >= 1
        assert f"{report['dropped']} plugins/log notifications dropped" in report["message"]
        lines = [n["message"] for n in client.seen("plugins/log") if n["plugin"] == "flood" and n["source"] == "mcp"]
        numbers = [int(line.split()[1]) for line in lines]
        assert numbers == sorted(numbers) and numbers[0] == 1  # what was kept arrives in order
        # What the log share let through plus what it dropped is what the link's limiter passed.
        assert len(lines) + report["dropped"] <= 400
        assert (await client.request("plugins/status", {"id": "flood"}))["status"] == "ready"


# -- responses ----------------------------------------------------------------------------


async def test_responses_are_never_dropped_and_the_plugin_waits_while_the_parent_does_not_read(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # 250 answers of 250 kB (62.5 MB) against a 16 MiB outbox: hostd stops reading the plugin's
    # stdout (the plugin waits on its full pipe) instead of holding them all.
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await two_plugins(parent, make_plugin)
        pid = client.process.pid
        ours = parent.own_pipes()
        before = memory_kib(pid)["VmRSS"]
        parent.stop_reading()
        calls = [
            await client.start("tools/call", {"name": "flood.large", "arguments": {"bytes": 250_000}})
            for _ in range(250)
        ]
        # hostd says it stopped reading the plugin's stdout; the answers pile up in that pipe.
        await until(lambda: any("plugin flood: stdout paused" in line for line in parent.log))
        await until(lambda: fullest_plugin_pipe(pid, ours) >= 32 * 1024)
        peak = memory_kib(pid)["VmHWM"]
        assert peak - before < BOUND_KIB, f"hostd grew by {(peak - before) // 1024} MiB"
        echo = await client.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "healthy"}})
        parent.resume_reading()
        with trio.fail_after(120):
            for call in calls:
                assert (await call())["content"] == [{"type": "text", "text": "x" * 250_000}]
            assert (await echo())["structuredContent"]["text"] == "healthy"
        assert (await client.request("plugins/status", {"id": "flood"}))["status"] == "ready"


# -- the reader ---------------------------------------------------------------------------


@pytest.mark.parametrize("ending", ["exit", "shutdown-exit"])
async def test_cancel_shutdown_and_exit_get_through_while_the_parent_does_not_read(
    tmp_path: Path, make_plugin: MakePlugin, ending: str
) -> None:
    # Issue 10: the reader stopped after ~7,500 unread responses (it awaited a full queue),
    # so the parent's writes blocked and even $/cancelRequest or exit could not get through.
    record = shared(tmp_path) / "healthy.jsonl"
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await two_plugins(parent, make_plugin, args=["--record", str(record)], backend={"tool_timeout_seconds": 120})
        parent.stop_reading()
        await client.start("tools/call", {"name": "flood.progress-flood", "arguments": {"count": 100_000}})
        slow = await client.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 0}})
        with trio.fail_after(60):
            await client.send_raw(
                b"".join(orjson.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}) + b"\n" for i in range(8000))
            )
            await client.notify("$/cancelRequest", {"id": slow.request_id})  # type: ignore[attr-defined]

        def cancelled() -> bool:
            lines = record.read_text().splitlines() if record.exists() else []
            return any(orjson.loads(line)["msg"].get("method") == "notifications/cancelled" for line in lines)

        await until(cancelled)  # the cancel reached the plugin, with nobody reading hostd's answers
        with trio.fail_after(60):
            if ending == "shutdown-exit":
                await client.start("shutdown", None)
            await client.notify("exit", None)
            code = await client.process.wait()
        assert code == (0 if ending == "shutdown-exit" else 1)


@pytest.mark.parametrize("filler", ["answers", "pings"])
async def test_a_cancel_reaches_the_plugin_behind_unread_replies_and_a_ping_is_answered_later(
    tmp_path: Path, make_plugin: MakePlugin, filler: str
) -> None:
    # Issue 29: with the parent not reading hostd's stdout (the outbox full of answers, or of the
    # replies the reader makes itself: pings), a $/cancelRequest it wrote did not reach the plugin
    # until it read again. The class: anything the reader must act on at once (a cancel, exit) queued
    # behind replies nobody reads. The record is the plugin's own, written when the cancel arrives.
    record = shared(tmp_path) / "healthy.jsonl"
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await two_plugins(parent, make_plugin, args=["--record", str(record)], backend={"tool_timeout_seconds": 120})
        assert client.process.stdout is not None
        stdout_fd = client.process.stdout.fileno()  # type: ignore[attr-defined]
        slow = await client.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 0}})
        rid = slow.request_id  # type: ignore[attr-defined]
        cancel = orjson.dumps({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": rid}}) + b"\n"
        count = 60_000
        parent.stop_reading()
        async with trio.open_nursery() as nursery:
            if filler == "answers":  # 100 answers of 250 kB: 25 MB, over the 16 MiB outbox
                calls = [
                    await client.start("tools/call", {"name": "flood.large", "arguments": {"bytes": 250_000}})
                    for _ in range(100)
                ]
                await until(lambda: any("plugin flood: stdout paused" in line for line in parent.log))
                await until(lambda: queued_bytes(stdout_fd) >= 32 * 1024)  # hostd's stdout pipe is full, unread
                nursery.start_soon(client.send_raw, cancel)
            else:  # 60,000 pings: 2.2 MB of replies the reader makes itself, over its 1 MiB share, then the cancel
                pings = (
                    orjson.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}) + b"\n" for i in range(count)
                )
                nursery.start_soon(client.send_raw, b"".join(pings) + cancel)

            def cancelled() -> bool:
                lines = record.read_text().splitlines() if record.exists() else []
                return any(orjson.loads(line)["msg"].get("method") == "notifications/cancelled" for line in lines)

            await until(cancelled)  # the cancel reached the plugin while nobody reads hostd's answers
            assert queued_bytes(stdout_fd) >= 32 * 1024  # still unread
            parent.resume_reading()
        with trio.fail_after(120):
            assert await client.request("ping", {}) == {}
            with pytest.raises(RpcError) as ended:
                await slow()
            assert ended.value.kind == "REQUEST_CANCELLED"
            if filler == "answers":
                for call in calls:
                    assert (await call())["content"] == [{"type": "text", "text": "x" * 250_000}]
            else:
                while len(client.stray) < count:
                    await client._changed.wait()
                assert [m["id"] for m in client.stray] == [f"p{i}" for i in range(count)]


async def test_a_request_parked_behind_unread_replies_and_cancelled_never_reaches_the_plugin(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    # A request read while the reader's replies are over their share waits (parked, in order); a
    # $/cancelRequest for it arrives before its turn: it is answered -32800 and the plugin never sees it.
    record = shared(tmp_path) / "healthy.jsonl"
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await ready(client, make_plugin(args=["--record", str(record)]))
        assert client.process.stdout is not None
        stdout_fd = client.process.stdout.fileno()  # type: ignore[attr-defined]
        count = 40_000  # 1.5 MB of replies: over the reader's 1 MiB share, far from the 16 MiB parking bound
        pings = b"".join(
            orjson.dumps({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"}) + b"\n" for i in range(count)
        )
        parent.stop_reading()
        with trio.fail_after(60):  # the old reader stopped reading stdin here: these writes blocked
            await client.send_raw(pings)
            await until(lambda: queued_bytes(stdout_fd) >= 32 * 1024)
            sleep = {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 0}}
            parked = await client.start("tools/call", sleep)
            await client.notify("$/cancelRequest", {"id": parked.request_id})  # type: ignore[attr-defined]
            marker = await client.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "after"}})
        parent.resume_reading()
        with trio.fail_after(120):
            with pytest.raises(RpcError) as cancelled:
                await parked()
            assert cancelled.value.kind == "REQUEST_CANCELLED"
            assert (await marker())["structuredContent"]["text"] == "after"
        messages = [orjson.loads(line)["msg"] for line in record.read_text().splitlines()]
        called = [m["params"]["name"] for m in messages if m.get("method") == "tools/call"]
        assert called == ["echo"]


async def test_beyond_the_in_flight_limit_requests_get_host_overloaded_at_once(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    async with hostile_parent(tmp_path) as parent:
        client = parent.client
        await ready(client, make_plugin())
        limit = 256
        sleeps = [
            await client.start("tools/call", {"name": "mcp-echo.sleep", "arguments": {"seconds": 60, "steps": 0}})
            for _ in range(limit)
        ]
        refused = [
            await client.start("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "x"}}) for _ in range(3)
        ]
        with trio.fail_after(30):
            for response in refused:
                with pytest.raises(RpcError) as error:
                    await response()
                assert error.value.code == -32033
                assert error.value.kind == "HOST_OVERLOADED"
                assert error.value.data["inFlight"] == limit
                assert error.value.data["maxInFlight"] == limit
            # Not counted: ping, and the methods that end things.
            assert await client.request("ping", {}) == {}
            await client.notify("$/cancelRequest", {"id": sleeps[0].request_id})  # type: ignore[attr-defined]
            with pytest.raises(RpcError) as cancelled:
                await sleeps[0]()
            assert cancelled.value.kind == "REQUEST_CANCELLED"
            # One slot is free again; nothing else changed.
            echoed = await client.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "again"}})
            assert echoed["structuredContent"]["text"] == "again"
            assert (await client.request("plugins/status", {"id": "mcp-echo"}))["status"] == "ready"


async def test_a_parent_that_writes_without_reading_is_paused_by_its_own_pipe_and_loses_no_answer(
    tmp_path: Path,
) -> None:
    # The one case where hostd stops reading stdin (docs/protocol.md "Flow control"): more than
    # 1/16 of the outbox of the reader's own replies unread, and then the outbox's worth of requests
    # parked. With a 1 MiB outbox, 60,000 pings (2.6 MB of requests, 2.2 MB of answers) get there.
    async with hostile_parent(tmp_path, "--max-outbox-bytes", str(MIB)) as parent:
        client = parent.client
        pid = client.process.pid
        before = memory_kib(pid)["VmRSS"]
        assert client.process.stdin is not None
        stdin_fd = client.process.stdin.fileno()  # type: ignore[attr-defined]
        count = 60_000
        pings = b"".join(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + b"\n" for i in range(count))
        parent.stop_reading()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_raw, pings)
            # hostd says it stopped reading stdin; the pings pile up in that pipe.
            await until(lambda: any("stdin paused" in line for line in parent.log))
            await until(lambda: queued_bytes(stdin_fd) >= 32 * 1024)
            assert memory_kib(pid)["VmHWM"] - before < BOUND_KIB
            parent.resume_reading()
        with trio.fail_after(60):
            while len(client.stray) < count:
                await client._changed.wait()
        assert [m["id"] for m in client.stray] == list(range(count))  # every one answered, in order
        assert await client.request("ping", {}) == {}


# -- the outbox's policy, unit by unit ------------------------------------------------------


def _frames(outbox: Outbox, now: float = 0.0) -> list[dict[str, Any]]:
    entries = outbox.take(1 << 30, now)
    outbox.written(entries)
    return [orjson.loads(entry.data) for entry in entries]


def _progress(rid: int, value: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "method": "$/progress", "params": {"requestId": rid, "progress": value}})


def test_outbox_progress_latest_value_wins_and_is_written_before_the_response() -> None:
    outbox = Outbox(1 << 20, progress_rate=10, progress_burst=2)

    def values(now: float) -> list[object]:
        return [f.get("params", {}).get("progress", "response") for f in _frames(outbox, now)]

    outbox.put_progress(7, _progress(7, 1), now=0.0)
    assert values(0.0) == [1]
    outbox.put_progress(7, _progress(7, 2), now=0.0)
    outbox.put_progress(7, _progress(7, 3), now=0.0)  # 2 is still waiting: replaced in place
    assert values(0.0) == [3]
    outbox.put_progress(7, _progress(7, 4), now=0.0)  # the burst is spent: held
    outbox.put_progress(7, _progress(7, 5), now=0.0)  # replaces the held one
    assert outbox.next_due() == pytest.approx(0.1)
    assert values(0.05) == []
    assert values(0.1) == [5]
    outbox.put_progress(7, _progress(7, 6), now=0.11)  # no token: held
    outbox.put_progress(7, _progress(7, 7), now=0.12)
    outbox.end_progress(7)  # the response is ready: the held value goes first
    outbox.put_reply(b'{"jsonrpc":"2.0","id":7,"result":{}}\n')
    assert values(0.13) == [7, "response"]
    assert outbox.bytes == 0 and outbox.next_due() is None


def test_outbox_drops_logs_over_their_share_and_counts_them_per_plugin() -> None:
    outbox = Outbox(16 * 1024)  # a 1 KiB log share
    line = b"x" * 300
    admitted = [outbox.put_log("a", line) for _ in range(5)]
    assert admitted == [True, True, True, False, False]
    assert outbox.put_log("b", line) is False
    assert outbox.take_drop_counts() == {}  # no room yet: keep counting
    outbox.written(outbox.take(1 << 30, 0.0))
    assert outbox.take_drop_counts() == {"a": 2, "b": 1}
    assert outbox.take_drop_counts() == {}
    assert outbox.dropped_logs_total == 3


def test_outbox_coalesces_state_only_over_budget_and_never_drops_replies() -> None:
    outbox = Outbox(2048)
    outbox.put_state(("s", "p"), b"1" * 10)
    outbox.put_state(("s", "p"), b"2" * 10)  # under budget: both kept, in order
    for _ in range(5):
        outbox.put_reply(b"r" * 1000)  # over budget: still admitted
    assert outbox.over_budget
    outbox.put_state(("s", "p"), b"3" * 10)  # replaces "2", the one still waiting, where it waits
    outbox.put_state(("s", "p"), b"4" * 10)  # and again
    outbox.put_state(("s", "q"), b"5" * 10)  # another plugin: its own entry
    data = [entry.data[:1] for entry in outbox.take(1 << 30, 0.0)]
    assert data == [b"1", b"4", b"r", b"r", b"r", b"r", b"r", b"5"]


async def test_outbox_pauses_sources_over_budget_until_three_quarters() -> None:
    outbox = Outbox(4096)
    outbox.put_reply(b"x" * 2000)
    outbox.put_reply(b"y" * 2500)
    assert outbox.over_budget
    resumed = trio.Event()

    async def source() -> None:
        await outbox.wait_room()
        resumed.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(source)
        first = outbox.take(2000, 0.0)
        outbox.written(first)  # 2500 left: below three quarters of the budget (3072)
        await resumed.wait()
    assert outbox.bytes == 2500


def test_cut_utf8_bounds_bytes_on_a_character_boundary() -> None:
    assert cut_utf8("short", 10) == "short"
    cut = cut_utf8("é" * 1000, 1024)
    assert len(cut.encode()) <= 1024 and cut.endswith("…") and set(cut[:-1]) == {"é"}


async def test_the_in_flight_bound_counts_bytes_too(tmp_path: Path) -> None:
    # In process: the control channel over in-memory streams, a host whose requests never end.
    from hostd.control.server import ControlServer  # noqa: PLC0415

    class Stuck:
        METHODS: ClassVar[dict[str, object]] = {"x/y": None}

        async def handle(self, method: str, params: Any, ctx: Any) -> Any:
            await trio.sleep_forever()

        async def shutdown(self, *, fast: bool) -> None:
            return None

    async def factory(options: Any, notify: Any, nursery: Any) -> Stuck:
        return Stuck()

    to_host, host_in = trio.testing.memory_stream_one_way_pair()
    host_out, from_host = trio.testing.memory_stream_one_way_pair()
    server = ControlServer(
        host_in, host_out, factory, state_dir=str(tmp_path / "s"), handle_signals=False, max_inflight_bytes=1000
    )

    def request(rid: int, pad: int) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "x/y", "params": {"pad": "p" * pad}}) + b"\n"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve)
        await to_host.send_all(orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize"}) + b"\n")
        await to_host.send_all(request(1, 400) + request(2, 400) + request(3, 400) + request(4, 10))
        decoder = LineDecoder(PARENT_FRAME_LIMIT)
        replies: list[dict[str, Any]] = []
        with trio.fail_after(10):
            while len(replies) < 2:
                replies += [e.value for e in decoder.feed(await from_host.receive_some()) if isinstance(e, Message)]
        assert replies[0]["id"] == 0 and "result" in replies[0]
        refused = replies[1]
        assert refused["id"] == 3  # 1 and 2 (2 x 450 bytes) are in flight; 3 would pass 1000; 4 fits
        assert refused["error"]["data"]["kind"] == "HOST_OVERLOADED"
        assert refused["error"]["data"]["maxInFlightBytes"] == 1000
        assert refused["error"]["data"]["inFlight"] == 2
        await to_host.send_all(b'{"jsonrpc":"2.0","method":"exit"}\n')
