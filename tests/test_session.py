"""The sans-IO MCP client core (hostd.mcp.session): routing, strict envelopes, orphans, eras, with plain calls.

Classes of bug covered, several members each:
- a message routed to the wrong place: a response, a progress notification, a cancellation, a server's
  request, a subscription's notification (each uses the one id space and routing table);
- a message that is not a well-formed JSON-RPC envelope resolving a request (it must be Invalid);
- a late or unknown answer resolving something or going uncounted (it must be an Orphan).
"""

from __future__ import annotations

from typing import Any

import pytest

from hostd.mcp.session import (
    ClientSession,
    Invalid,
    Orphan,
    Progress,
    Reply,
    ServerCancelled,
    ServerNotification,
    ServerRequest,
)

INFO = {"name": "hostd", "version": "0"}
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SUB_KEY = "io.modelcontextprotocol/subscriptionId"


def session() -> ClientSession:
    return ClientSession(INFO, {})


def test_one_id_space_for_every_request_and_replies_route_by_id() -> None:
    s = session()
    first, m1 = s.start_request("tools/list", context="list")
    second, m2 = s.start_request("tools/call", {"name": "x", "arguments": {}}, context="call", progress=True)
    third, _ = s.start_request("ping", context="ping")
    assert (first, second, third) == (1, 2, 3)
    assert m1 == {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert m2["params"] == {"name": "x", "arguments": {}, "_meta": {"progressToken": 2}}
    # Out of order: each answer reaches its own request, once.
    event = s.receive({"jsonrpc": "2.0", "id": 2, "result": {"content": []}}, 40, b"raw")
    assert isinstance(event, Reply)
    assert (event.request_id, event.method, event.context, event.size, event.raw) == (
        2,
        "tools/call",
        "call",
        40,
        b"raw",
    )
    event = s.receive({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}})
    assert isinstance(event, Reply)
    assert event.context == "list"
    assert s.pending() == [(3, "ping")]


def test_progress_routes_by_the_token_which_is_the_request_id() -> None:
    s = session()
    rid, _ = s.start_request("tools/call", {"name": "x"}, context="call", progress=True)
    event = s.receive(
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": rid, "progress": 1, "total": 4, "message": "m" * 5000},
        }
    )
    assert isinstance(event, Progress)
    assert (event.context, event.progress, event.total, event.message) == ("call", 1, 4, "m" * 4096)
    # Progress for a token in flight nowhere, or with a non-number, is not progress of any request.
    for params in ({"progressToken": 99, "progress": 1}, {"progressToken": rid, "progress": True}):
        other = s.receive({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        assert isinstance(other, ServerNotification)


def test_a_cancelled_request_is_forgotten_and_its_late_answer_is_an_orphan() -> None:
    s = session()
    rid, _ = s.start_request("tools/call", context="call")
    assert s.cancel(rid) == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": rid, "reason": "cancelled by the host"},
    }
    assert s.cancel(rid) is None  # once
    late = s.receive({"jsonrpc": "2.0", "id": rid, "result": {}})
    assert late == Orphan(rid, False)
    # Unknown ids, a duplicate answer, an error with a null id: orphans too, counted.
    rid2, _ = s.start_request("ping")
    s.receive({"jsonrpc": "2.0", "id": rid2, "result": {}})
    assert s.receive({"jsonrpc": "2.0", "id": rid2, "result": {}}) == Orphan(rid2, False)
    assert s.receive({"jsonrpc": "2.0", "id": "nobody", "result": {}}) == Orphan("nobody", False)
    assert s.receive({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}) == Orphan(
        None, True
    )
    assert s.orphans == 4


@pytest.mark.parametrize(
    "value",
    [
        {"jsonrpc": "2.0", "id": 1, "result": {}, "level": "info"},  # a log line that carries an id
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "1.0", "id": 1, "result": {}},
        {"id": 1, "result": {}},
        {"jsonrpc": "2.0", "id": True, "result": {}},
        {"jsonrpc": "2.0", "id": 1.5, "result": {}},
        {"jsonrpc": "2.0", "id": [1], "error": {"code": 1, "message": "x"}},
        {"jsonrpc": "2.0", "method": 5},
        {"jsonrpc": "2.0", "method": "x", "params": [1]},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"},
        [1, 2],
        "text",
    ],
)
def test_a_malformed_envelope_never_resolves_a_request(value: Any) -> None:
    s = session()
    s.start_request("tools/call", context="call")
    assert isinstance(s.receive(value), Invalid)
    assert s.pending() == [(1, "call")]
    assert s.orphans == 0


def test_server_requests_and_their_cancellation_are_events() -> None:
    s = session()
    assert s.receive({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"}) == ServerRequest("s1", "roots/list", None)
    assert s.receive(
        {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"maxTokens": 1}}
    ) == ServerRequest(7, "sampling/createMessage", {"maxTokens": 1})
    assert s.receive(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s1"}}
    ) == ServerCancelled("s1")
    assert s.reply(7, {"ok": 1}) == {"jsonrpc": "2.0", "id": 7, "result": {"ok": 1}}
    assert s.reply_error("s1", -32601, "no", {"why": 1}) == {
        "jsonrpc": "2.0",
        "id": "s1",
        "error": {"code": -32601, "message": "no", "data": {"why": 1}},
    }


def test_modern_envelope_on_every_request_without_touching_the_callers_params() -> None:
    s = session()
    s.adopt_modern("2026-07-28", {"tools": {}}, {"name": "srv"})
    params = {"name": "x", "_meta": {"custom": 1}}
    _rid, message = s.start_request("tools/call", params, progress=True)
    meta = message["params"]["_meta"]
    assert meta[VERSION_KEY] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert meta["io.modelcontextprotocol/clientInfo"] == INFO
    assert (meta["custom"], meta["progressToken"]) == (1, 1)
    assert params == {"name": "x", "_meta": {"custom": 1}}
    _rid, bare = s.start_request("tools/list")
    assert bare["params"]["_meta"][VERSION_KEY] == "2026-07-28"
    s.adopt_legacy("2025-11-25", {}, {})
    _rid, legacy = s.start_request("tools/list")
    assert "params" not in legacy


def test_subscription_notifications_are_demultiplexed_by_the_listen_request() -> None:
    s = session()
    s.adopt_modern("2026-07-28", {}, {})
    tools, _ = s.start_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, context="T", listen=True
    )
    res, _ = s.start_request(
        "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["a"]}}, context="R", listen=True
    )
    call, _ = s.start_request("tools/call", context="C")

    def note(sid: Any, method: str = "notifications/tools/list_changed") -> Any:
        return s.receive({"jsonrpc": "2.0", "method": method, "params": {"_meta": {SUB_KEY: sid}}})

    assert note(tools).listener == "T"
    assert note(res, "notifications/resources/updated").listener == "R"
    # Tagged with an id that is not an open listen stream (a plain request, a closed stream, made up): stale.
    for sid in (call, 999, "x"):
        event = note(sid)
        assert (event.stale, event.listener) == (True, None)
    s.cancel(tools)
    assert note(tools).stale
    # Untagged (legacy style) notifications are plain.
    plain = s.receive({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    assert plain == ServerNotification("notifications/tools/list_changed", None)
