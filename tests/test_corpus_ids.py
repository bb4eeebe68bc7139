"""Failure corpus C (ids and server-initiated traffic): docs/corpus.md, cases C1-C5.

Helpers (the ``healthy`` neighbour, pid and log filters) live in
``test_corpus_framing.py``. Counts of what reached the server come from the
fixture's ``--record`` file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError
from tests.conftest import MakePlugin, ready
from tests.test_corpus_framing import (
    HOSTILE,
    assert_healthy,
    echo,
    enable_healthy,
    failed_start,
    logs,
    recorded,
)
from tests.waiting import until


def messages(record: Path, method: str) -> list[dict[str, Any]]:
    """Recorded entries ``{"t", "msg"}`` whose message is ``method``."""
    return [r for r in recorded(record) if r["msg"].get("method") == method]


def twice_answered(hostd: HostdClient) -> list[str]:
    """The orphans fixture's "answered ID twice" logs, sent after each duplicate answer."""
    return [n["message"] for n in logs(hostd, source="mcp") if n["message"].endswith(" twice")]


def walks(record: Path) -> int:
    """``tools/list`` walks the server saw: requests without a cursor."""
    return sum(1 for r in messages(record, "tools/list") if "cursor" not in (r["msg"].get("params") or {}))


# -- C1 orphan responses ---------------------------------------------------------------


async def test_c1_orphans_dropped_notification_delivered_no_duplicate(
    hostd: HostdClient, make_plugin: MakePlugin
) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        status = await ready(hostd, make_plugin(variant="orphans"))
        assert status["status"] == "ready"
        note = await hostd.wait_for("plugins/log", lambda n: n["plugin"] == HOSTILE and n["source"] == "mcp", timeout=5)
        assert note["message"] == "after orphans"
        first = await echo(hostd, "one")
        second = await echo(hostd, "two")  # sent while the duplicate of "one" may still be in flight
        assert first["structuredContent"] == {"text": "one", "length": 3}
        assert second["structuredContent"] == {"text": "two", "length": 3}
        # The fixture logs "answered ID twice" after each duplicate; hostd reads stdout in order, so once
        # both logs arrived both duplicates have been handled.
        await hostd.wait_until(lambda: len(twice_answered(hostd)) == 2, timeout=5)
        assert hostd.stray == []  # nothing reached the parent twice
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert status["restarts"] == 0
        await assert_healthy(hostd)


async def test_c1_each_orphan_is_logged(hostd: HostdClient, make_plugin: MakePlugin) -> None:
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="orphans"))
        await echo(hostd, "one")
        await hostd.wait_until(lambda: len(twice_answered(hostd)) == 1, timeout=5)
        warnings = [n["message"] for n in logs(hostd, level="warning")]
        assert len(warnings) == 3
        assert any("999" in m for m in warnings)
        assert any("nope" in m for m in warnings)
        await assert_healthy(hostd)


# -- C2 server-to-client requests ------------------------------------------------------


async def test_c2_server_requests_answered_at_once(hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="server-requests", args=["--record", str(record)]))
        result = await echo(hostd, "asks back")
        # The fixture records None for a request it got no answer to within 5 s: an answer is a dict.
        replies = result["structuredContent"]["replies"]
        assert replies["ping"] == {}
        # Features the parent does not serve are refused at once, naming the capability (hostd.mcp.client_features).
        assert (replies["roots/list"]["code"], replies["roots/list"]["data"]["capability"]) == (-32034, "roots")
        sampling = replies["sampling/createMessage"]
        assert (sampling["code"], sampling["data"]["capability"]) == (-32034, "sampling")
        assert result["structuredContent"]["text"] == "asks back"
        answers = [r["msg"] for r in recorded(record) if "method" not in r["msg"]]
        assert [a["id"] for a in answers] == ["s-1", "s-2", "s-3"]
        # hostd advertises only what it serves: none of roots, sampling, elicitation.
        initialize = messages(record, "initialize")[0]["msg"]
        capabilities = initialize["params"]["capabilities"]
        assert not {"roots", "sampling", "elicitation"} & set(capabilities)
        # A second call: numbering continues, same answers.
        again = await echo(hostd, "twice")
        assert again["structuredContent"]["replies"] == replies
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "ready"
        await assert_healthy(hostd)


# -- C3 cancellation reaches the server ------------------------------------------------


async def test_c3_cancel_reaches_the_server(hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(args=["--record", str(record)]))
        response = await hostd.start(
            "tools/call", {"name": f"{HOSTILE}.sleep", "arguments": {"seconds": 60, "steps": 600}}
        )
        rid = response.request_id  # type: ignore[attr-defined]
        await hostd.wait_for("$/progress", lambda n: n["requestId"] == rid)  # the call runs in the plugin
        await hostd.notify("$/cancelRequest", {"id": rid})
        with trio.fail_after(0.5), pytest.raises(RpcError) as cancelled:
            await response()
        assert cancelled.value.code == -32800
        call_id = next(r["msg"]["id"] for r in messages(record, "tools/call"))
        await until(lambda: bool(messages(record, "notifications/cancelled")), timeout=2)
        cancels = messages(record, "notifications/cancelled")
        assert len(cancels) == 1
        assert cancels[0]["msg"]["params"]["requestId"] == call_id
        assert hostd.stray == []
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert (await echo(hostd, "after cancel"))["structuredContent"]["text"] == "after cancel"
        await assert_healthy(hostd)


# -- C4 list_changed storm and feedback loop -------------------------------------------


async def test_c4a_list_changed_storm_costs_at_most_three_walks(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="list-changed-storm", args=["--record", str(record)]))
        assert walks(record) == 1
        result = await echo(hostd, "storm")  # 200 notifications in one write, then the answer
        assert result["structuredContent"] == {"text": "storm", "length": 5}
        await hostd.wait_for("plugins/log", lambda n: n["plugin"] == HOSTILE and n["message"] == "tools/list walk 2")
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert status["tools_count"] == 7
        assert (await echo(hostd, "calm"))["structuredContent"] == {"text": "calm", "length": 4}
        await assert_healthy(hostd)
        # An upper bound holds at any moment: whenever it is read, the storm cost at most 3 walks.
        assert 1 <= walks(record) - 1 <= 3


async def test_c4b_list_changed_feedback_loop_is_detected(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path
) -> None:
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        await ready(hostd, make_plugin(variant="list-changed-loop", args=["--record", str(record)]))
        warning = await hostd.wait_for(
            "plugins/log",
            lambda n: n["plugin"] == HOSTILE and n["level"] == "warning" and "loop" in n["message"],
            timeout=4,
        )
        assert "feedback loop" in warning["message"]
        # The warning is sent after the last walk ended and the refresher returned: no walk is in flight.
        stopped_at = walks(record)
        assert 2 <= stopped_at <= 6
        status = await hostd.request("plugins/status", {"id": HOSTILE})
        assert status["status"] == "ready"
        assert (await echo(hostd, "usable"))["structuredContent"] == {"text": "usable", "length": 6}
        await assert_healthy(hostd)
        assert walks(record) == stopped_at  # auto-refresh stopped


# -- C5 cursor that never ends ---------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "why"),
    [
        pytest.param("cursor-same", "'again'", id="cursor-same"),
        pytest.param("cursor-empty", "''", id="cursor-empty"),
        pytest.param("cursor-random", "duplicate", id="cursor-random"),
    ],
)
async def test_c5_endless_cursor_fails_enable_after_two_requests(
    hostd: HostdClient, make_plugin: MakePlugin, tmp_path: Path, variant: str, why: str
) -> None:
    # Documented choice: hostd fails the enable (it never registers a listing it had to cut short).
    record = tmp_path / "shared" / "record.jsonl"
    with trio.fail_after(20):
        await enable_healthy(hostd, make_plugin)
        error = await failed_start(hostd, make_plugin(variant=variant, args=["--record", str(record)]))
        assert error.data["plugin"] == HOSTILE
        assert HOSTILE in error.message  # the plugin id, here also the server's name
        assert why in error.data["reason"]
        assert len(messages(record, "tools/list")) == 2
        assert (await hostd.request("plugins/status", {"id": HOSTILE}))["status"] == "error"
        await assert_healthy(hostd)
