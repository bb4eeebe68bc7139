"""The control channel's method router and its sans-IO core, without processes.

The class of defect the router closes: *"no such method" inferred from an exception*. Before, the host's
``handle`` raised ``KeyError(method)`` for an unknown method and the channel answered ``METHOD_NOT_FOUND`` for any
``KeyError`` whose one argument equalled the method, so a handler's own ``KeyError`` of that value was reported
as a missing method. Now the answer is a lookup in an explicit table (:mod:`hostd.control.router`); these tests
check the table itself, the channel over in-memory streams (a method outside the table never reaches the host;
a ``KeyError`` inside a served method is ``INTERNAL_ERROR``), and the core's classification of messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import trio
import trio.testing

from hostd.control import core
from hostd.control.router import CONTROL_ROUTES, MethodRouter, Route
from hostd.control.server import ControlServer
from hostd.host.service import Host
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.framing import PARENT_FRAME_LIMIT, LineDecoder, Message


def test_the_control_methods_are_routed_before_any_host() -> None:
    router = MethodRouter()
    assert router.route("initialize") is Route.INITIALIZE
    assert router.route("ping") is Route.PING
    assert router.route("shutdown") is Route.SHUTDOWN
    assert router.route("rpc.discover") is Route.DISCOVER
    assert router.route("tools/call") is None
    assert router.methods() == frozenset(CONTROL_ROUTES) == {"initialize", "ping", "shutdown", "rpc.discover"}


def test_the_hosts_methods_route_to_the_host_and_nothing_else_does() -> None:
    router = MethodRouter(Host.METHODS)
    assert router.route("tools/call") is Route.HOST
    assert router.route("plugins/install") is Route.HOST
    assert router.route("ping") is Route.PING
    # Near misses are not found: case, a trailing slash, a prefix, the empty name.
    for method in ("Tools/call", "tools/call/", "tools", "", "plugins/list ", "exit", "$/cancelRequest"):
        assert router.route(method) is None, method
    assert router.methods() == frozenset(Host.METHODS) | frozenset(CONTROL_ROUTES)


@pytest.mark.parametrize("method", sorted(CONTROL_ROUTES))
def test_a_host_table_cannot_take_a_control_method(method: str) -> None:
    with pytest.raises(ValueError, match="the control channel serves it"):
        MethodRouter(["tools/list", method])


class _Host:
    """A host that serves ``x/ok`` and ``x/keyerror`` (a handler whose own ``KeyError`` names its method)."""

    METHODS: ClassVar[dict[str, object]] = {"x/ok": None, "x/keyerror": None}

    def __init__(self) -> None:
        self.handled: list[str] = []

    async def handle(self, method: str, params: Any, ctx: Any) -> Any:
        self.handled.append(method)
        if method == "x/keyerror":
            raise KeyError(method)
        return {"method": method}

    async def shutdown(self, *, fast: bool) -> None:
        return None


async def _exchange(tmp_path: Path, host: _Host, requests: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """``initialize``, then ``requests`` over in-memory streams; every reply by id."""

    async def factory(options: Any, notify: Any, nursery: Any) -> _Host:
        return host

    to_host, host_in = trio.testing.memory_stream_one_way_pair()
    host_out, from_host = trio.testing.memory_stream_one_way_pair()
    server = ControlServer(host_in, host_out, factory, state_dir=str(tmp_path / "s"), handle_signals=False)
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize"}, *requests]
    replies: dict[Any, dict[str, Any]] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.serve)
        await to_host.send_all(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        decoder = LineDecoder(PARENT_FRAME_LIMIT)
        with trio.fail_after(10):
            while len(replies) < len(lines):
                for event in decoder.feed(await from_host.receive_some()):
                    if isinstance(event, Message):
                        replies[event.value["id"]] = event.value
        await to_host.send_all(b'{"jsonrpc":"2.0","method":"exit"}\n')
    return replies


async def test_method_not_found_is_a_lookup_and_a_handlers_keyerror_is_internal(tmp_path: Path) -> None:
    host = _Host()
    replies = await _exchange(
        tmp_path,
        host,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "x/ok"},
            {"jsonrpc": "2.0", "id": 2, "method": "x/missing"},
            {"jsonrpc": "2.0", "id": 3, "method": "x/keyerror"},
            {"jsonrpc": "2.0", "id": 4, "method": "ping"},
        ],
    )
    assert replies[1]["result"] == {"method": "x/ok"}
    assert replies[2]["error"]["code"] == -32601
    assert replies[2]["error"]["message"] == "no method 'x/missing'"
    assert replies[2]["error"]["data"]["kind"] == "METHOD_NOT_FOUND"
    assert replies[3]["error"]["data"]["kind"] == "INTERNAL_ERROR"
    assert replies[3]["error"]["message"] == "internal error: KeyError('x/keyerror')"
    assert replies[4]["result"] == {}
    # A method outside the table never reaches the host.
    assert sorted(host.handled) == ["x/keyerror", "x/ok"]


# -- the core: what a message is ---------------------------------------------------------


def test_classify_tells_each_kind_of_message_apart() -> None:
    request = core.classify({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, 40)
    assert request == core.IncomingRequest(7, "tools/list", {}, 40)
    note = core.classify({"jsonrpc": "2.0", "method": "exit", "params": None}, 30)
    assert note == core.IncomingNotification("exit", {})
    answer = core.classify({"jsonrpc": "2.0", "id": "hostd-1", "result": 1}, 30)
    assert answer == core.ParentAnswer({"jsonrpc": "2.0", "id": "hostd-1", "result": 1}, 30)


@pytest.mark.parametrize(
    ("message", "rid", "text"),
    [
        ([1, 2], None, "not a JSON-RPC 2.0 message"),
        ({"jsonrpc": "1.0", "id": 3, "method": "ping"}, 3, "not a JSON-RPC 2.0 message"),
        ({"jsonrpc": "2.0", "id": True, "method": 5}, None, '"method" must be a string'),
        ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4, '"method" must be a string'),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None, '"id" must be an integer or a string'),
        ({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": 3}, 6, '"params" must be an object or an array'),
    ],
)
def test_classify_refuses_malformed_messages(message: Any, rid: Any, text: str) -> None:
    refusal = core.classify(message, 10)
    assert isinstance(refusal, core.Refusal)
    assert refusal.rid == rid
    assert refusal.error.kind is ErrorKind.INVALID_REQUEST
    assert text in refusal.error.message


def test_classify_holds_params_to_the_depth_bound_but_not_tool_arguments() -> None:
    deep: Any = 0
    for _ in range(200):
        deep = [deep]
    refusal = core.classify({"jsonrpc": "2.0", "id": 1, "method": "plugins/list", "params": {"x": deep}}, 10)
    assert isinstance(refusal, core.Refusal) and refusal.error.kind is ErrorKind.INVALID_PARAMS
    assert refusal.error.data["errors"][0]["field"].startswith("x.0.0.")
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a.b", "arguments": {"x": deep}}}
    assert isinstance(core.classify(call, 10), core.IncomingRequest)


def test_overload_takes_a_first_request_whatever_its_size() -> None:
    assert core.overload(0, 0, 10**9, 1, 1) is None
    assert core.overload(1, 10, 10, 2, 20) is None
    refused = core.overload(2, 10, 10, 2, 1000)
    assert isinstance(refused, HostError) and refused.kind is ErrorKind.HOST_OVERLOADED
    assert refused.data["inFlight"] == 2 and refused.data["maxInFlight"] == 2
    assert core.overload(1, 500, 501, 10, 1000) is not None
