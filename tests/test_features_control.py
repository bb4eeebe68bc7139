"""The control channel's side of the client features, sans plugin: hostd->parent requests
(routing by hostd's own ids, errors, timeouts, the bound, the cancel) and the coalescing key of
the notifications the features add. A ControlServer on in-memory streams, driven directly.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio
import trio.testing

from hostd.control.core import MAX_PARENT_REQUESTS, parse_client_capabilities
from hostd.control.server import ControlServer
from hostd.wire.errors import HostError


def server(budget: int = 16 * 1024 * 1024) -> ControlServer:
    send, _ = trio.testing.memory_stream_pair()
    receive, _ = trio.testing.memory_stream_pair()

    async def no_host(*_: Any) -> Any:
        raise AssertionError("not used")

    return ControlServer(receive, send, no_host, handle_signals=False, max_outbox_bytes=budget)


def written(control: ControlServer) -> list[dict[str, Any]]:
    """Every message waiting in the outbox, parsed, in order (taken: the outbox is emptied)."""
    entries = control._outbox.take(1 << 30, trio.current_time())
    control._outbox.written(entries)
    return [orjson.loads(line) for entry in entries for line in entry.data.splitlines()]


async def test_a_parent_answer_is_routed_by_hostds_own_id() -> None:
    control = server()
    answers: list[Any] = []

    async def ask(method: str, value: int) -> None:
        answers.append(await control.request_parent(method, {"plugin": "p", "n": value}, 10))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "sampling/createMessage", 1)
        nursery.start_soon(ask, "roots/list", 2)
        await trio.testing.wait_all_tasks_blocked()
        sent = {m["method"]: m for m in written(control)}
        # Own ids, one each, whatever order the two tasks ran in.
        assert sorted(m["id"] for m in sent.values()) == ["hostd-1", "hostd-2"]
        assert {m["params"]["n"] for m in sent.values()} == {1, 2}
        roots, sampling = sent["roots/list"]["id"], sent["sampling/createMessage"]["id"]
        # Answered out of order; a response to no request of hostd's (the parent's own id space) is dropped.
        control._dispatch({"jsonrpc": "2.0", "id": 1, "result": {"stray": True}}, 30)
        control._dispatch({"jsonrpc": "2.0", "id": roots, "result": {"roots": []}}, 30)
        await trio.testing.wait_all_tasks_blocked()
        control._dispatch({"jsonrpc": "2.0", "id": sampling, "result": {"model": "m"}}, 30)
    assert answers == [{"roots": []}, {"model": "m"}]
    assert written(control) == []  # answered in time: no $/cancelRequest


@pytest.mark.parametrize("how", ["error", "timeout", "cancelled", "too-large"])
async def test_a_parent_request_that_fails_raises_and_a_pending_one_is_cancelled(how: str) -> None:
    control = server()
    failure: list[HostError] = []

    async def ask() -> None:
        try:
            await control.request_parent(
                "elicitation/create", {"plugin": "p", "params": {}}, 0.2 if how == "timeout" else 60
            )
        except HostError as error:
            failure.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        [request] = written(control)
        if how == "error":
            control._dispatch({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -1, "message": "no"}}, 40)
        elif how == "too-large":
            control._dispatch({"jsonrpc": "2.0", "id": request["id"], "result": {}}, 9 * 1024 * 1024)
        elif how == "cancelled":
            nursery.cancel_scope.cancel()
    after = written(control)
    if how == "cancelled":
        assert failure == []
    else:
        [error] = failure
        assert error.kind.name == "PARENT_REQUEST_FAILED"
        assert error.data["method"] == "elicitation/create"
        if how == "error":
            assert error.data["upstream"] == {"code": -1, "message": "no"}
        if how == "too-large":
            assert error.data["upstream"]["code"] == -32600
    answered = how in ("error", "too-large")
    assert after == (
        [] if answered else [{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request["id"]}}]
    )


async def test_parent_requests_are_bounded() -> None:
    control = server()
    async with trio.open_nursery() as nursery:
        for _ in range(MAX_PARENT_REQUESTS):
            nursery.start_soon(control.request_parent, "roots/list", {"plugin": "p"}, 60)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(HostError) as refused:
            await control.request_parent("roots/list", {"plugin": "p"}, 60)
        assert refused.value.kind.name == "HOST_OVERLOADED"
        assert len(written(control)) == MAX_PARENT_REQUESTS  # the refused one was never sent
        nursery.cancel_scope.cancel()


async def test_coalescing_over_budget_never_merges_two_resources_or_two_plugins() -> None:
    control = server(budget=2048)
    control._outbox.put_reply(b'{"jsonrpc":"2.0","id":1,"result":"' + b"r" * 3000 + b'"}\n')  # over budget
    notes = [
        ("resources/updated", {"plugin": "p", "uri": "a://1"}),
        ("resources/updated", {"plugin": "p", "uri": "a://2"}),
        ("resources/updated", {"plugin": "q", "uri": "a://1"}),
        ("resources/updated", {"plugin": "p", "uri": "a://1"}),  # the same resource again: coalesced
        ("resources/listChanged", {"plugin": "p"}),
        ("prompts/listChanged", {"plugin": "p"}),
        ("prompts/listChanged", {"plugin": "q"}),
        ("prompts/listChanged", {"plugin": "p"}),  # coalesced
    ]
    for method, params in notes:
        await control.notify(method, params)
    sent = [(m["method"], m.get("params")) for m in written(control) if "method" in m]
    assert sent == [notes[0], notes[1], notes[2], notes[4], notes[5], notes[6]]


def test_the_parents_capabilities_are_cut_to_what_hostd_knows() -> None:
    assert parse_client_capabilities(None) == {}
    given = {
        "sampling": {"tools": {}, "context": {}},
        "elicitation": {},
        "roots": {"listChanged": True},
        "experimental": {"x": {}},
    }
    assert parse_client_capabilities(given) == {"sampling": {"tools": {}}, "elicitation": {"form": {}}, "roots": {}}
    bad: Any
    for bad in ([], {"sampling": True}, {"elicitation": {"url": 1}}):
        with pytest.raises(ValueError):
            parse_client_capabilities(bad)
