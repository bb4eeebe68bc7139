"""Blocking work runs off the event loop: ``ping`` is answered while it runs (issue 11).

The class: a request whose work touches the file system or runs a process (launch resolution with
its first ``probe()`` and file hashing, reading and writing manifests, the files of an import).
On the event loop, it would hold up every other request: ``ping``, other plugins' calls. Each
member is held in the middle by a thread event (the real function runs once released), and the test
sends ``ping`` through a real control channel meanwhile: it is answered only if the loop is free.
Members: ``resolve_launch`` (install), ``load_manifest`` (install), ``_read_imported`` and
``_write_manifest`` (import). No timing: the ``fail_after`` bounds only turn a hang into a failure.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
import trio
import trio.testing

import hostd.host.install_methods
import hostd.host.launch
import hostd.host.service
from hostd.control.core import InitializeOptions, Notify
from hostd.control.server import ControlServer
from hostd.host.service import Host, HostSettings
from tests.conftest import ECHO, MakePlugin


class Parent:
    """The parent's end of an in-memory control channel: send requests, collect responses by id."""

    def __init__(self, stream: trio.StapledStream[Any, Any]) -> None:
        self.stream = stream
        self.responses: dict[Any, dict[str, Any]] = {}
        self.changed = trio.Event()

    async def read(self) -> None:
        pending = b""
        while data := await self.stream.receive_some(65536):
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                message = orjson.loads(line)
                if "id" in message and "method" not in message:
                    self.responses[message["id"]] = message
            self.changed.set()
            self.changed = trio.Event()

    async def request(self, rid: int, method: str, params: Any = None) -> None:
        await self.stream.send_all(
            orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + b"\n"
        )

    async def response(self, rid: int) -> dict[str, Any]:
        while rid not in self.responses:
            await self.changed.wait()
        return self.responses[rid]


def _held(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, name: str
) -> tuple[threading.Event, threading.Event, list[bool]]:
    """Replace ``<module>.<name>`` by the same function that first waits for ``release``
    (in whatever thread it runs). Also returns whether each call was released by the test (True)
    or gave up waiting (False): on the event loop nothing else runs, so the test never gets to
    answer ``ping`` and release it."""
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []
    real: Callable[..., Any] = getattr(module, name)

    def held(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        released.append(release.wait(20))  # bounded: on the event loop it would hang the test itself
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, held)
    return entered, release, released


@pytest.mark.parametrize(
    ("module", "name", "method"),
    [
        (hostd.host.launch, "resolve_launch", "plugins/install"),
        (hostd.host.install_methods, "load_manifest", "plugins/install"),
        (hostd.host.install_methods, "_read_imported", "plugins/import"),
        (hostd.host.install_methods, "_write_manifest", "plugins/import"),
    ],
)
async def test_ping_is_answered_while_blocking_work_runs(
    tmp_path: Path,
    make_plugin: MakePlugin,
    monkeypatch: pytest.MonkeyPatch,
    module: ModuleType,
    name: str,
    method: str,
) -> None:
    if method == "plugins/install":
        params: dict[str, Any] = {"path": str(make_plugin())}
    else:
        server = {"command": "python3", "args": [str(ECHO / "server.py")]}
        params = {"config": json.dumps({"mcpServers": {"echo": server}})}

    async def host_factory(options: InitializeOptions, notify: Notify, nursery: trio.Nursery) -> Host:
        return await Host.create(options, notify, nursery, HostSettings(login_path=False))

    ours, theirs = trio.testing.memory_stream_pair()
    control = ControlServer(theirs, theirs, host_factory, handle_signals=False)
    parent = Parent(ours)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(control.serve)
            nursery.start_soon(parent.read)
            await parent.request(1, "initialize", {"stateDir": str(tmp_path / "state")})
            assert "result" in await parent.response(1)
            await parent.request(2, "plugins/list", {})  # the host is built: restore and probe are done
            assert (await parent.response(2))["result"] == {"plugins": []}

            entered, release, released = _held(monkeypatch, module, name)
            await parent.request(3, method, params)
            assert await trio.to_thread.run_sync(entered.wait, 30)  # the work is held in the middle
            await parent.request(4, "ping", {})
            assert await parent.response(4) == {"jsonrpc": "2.0", "id": 4, "result": {}}
            release.set()
            done = await parent.response(3)
            assert "result" in done, done
            assert released[0] is True  # ping was answered while the work was held
            await parent.request(5, "shutdown")
            await parent.response(5)
            await ours.send_all(b'{"jsonrpc": "2.0", "method": "exit"}\n')
            nursery.cancel_scope.cancel()
