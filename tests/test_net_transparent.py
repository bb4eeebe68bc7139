"""Clients that ignore the proxy variables still reach exactly the allowlisted hosts (issue 26, transparent mode).

One real plugin (fixtures/mcp-probe with ``network: {hosts: ["api.test:<port>", "api.test:<tls port>"],
private: ["api.test"]}``) under the default level, and one hostd run with ``--resolve api.test=127.0.0.1`` (its
proxy resolves that name so; nothing else does). Inside the plugin's network namespace the name server of
``/etc/resolv.conf`` is hostd's fake-address DNS and ports 80, 443 and the allowlist's ports are hostd's
listeners (sandbox/netns.py). From inside, with no proxy in sight: a raw Python socket (``create_connection``,
glibc's resolver), Node 20's built-in ``fetch`` and ``https.get`` (TLS end to end, certificate checked by Node
for ``api.test``) reach the loopback upstream and get its exact bytes, while the proxy keeps serving ``urllib``
through ``HTTP_PROXY``; a name the allowlist does not cover gets ``NXDOMAIN`` (Python ``gaierror EAI_NONAME``,
Node ``ENOTFOUND``) and a refusal line to the parent; a listed name on a port nobody listens on is
``ECONNREFUSED``; a loopback IP literal on a listened port is reset (it is no address hostd's DNS gave). With a
parent that declares ``capabilities.network``, every name gets an address and the parent is asked at connect time,
once per destination, as for ``CONNECT``. What this proves for an unprivileged user: tests/test_net_enforce.py's
nobody test repeats the raw-socket client as nobody.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
import yaml

from hostd.cli.client import HostdClient, plugin_environment
from hostd.cli.hostd import resolve_pin
from hostd.net.allowlist import Allowlist
from hostd.net.dns import FakeNames
from hostd.net.proxy import PluginProxy, ProxyLimits, _Bucket, pinned_resolver
from hostd.net.transparent import serve_dns
from tests.conftest import ROOT, spawn_hostd
from tests.http_upstream import upstream
from tests.platform_facts import need_layers
from tests.tls import server_context

PROBE = ROOT / "fixtures" / "mcp-probe"


async def serve_plain_and_tls(nursery: trio.Nursery, context: ssl.SSLContext) -> tuple[int, int]:
    """:func:`tests.http_upstream.upstream` on two loopback ports, the second behind TLS; the ports."""

    async def over_tls(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, context, server_side=True)
        try:
            await upstream(tls)  # type: ignore[arg-type]
        except (trio.BrokenResourceError, ssl.SSLError):
            pass

    plain = await trio.open_tcp_listeners(0, host="127.0.0.1")
    secure = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, upstream, plain)
    await nursery.start(trio.serve_listeners, over_tls, secure)
    return plain[0].socket.getsockname()[1], secure[0].socket.getsockname()[1]


def probe_with(tmp_path: Path, network: dict[str, list[str]]) -> Path:
    folder = tmp_path / "plugins" / "mcp-probe"
    shutil.copytree(PROBE, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = network
    manifest["backend"]["tool_timeout_seconds"] = 60
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


def answer(path: str) -> str:
    """The upstream's exact bytes for ``GET path`` (tests/http_upstream.py)."""
    body = f"hello {path}"
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"


async def test_proxy_unaware_clients_reach_the_allowlisted_name_and_nothing_else(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    need_layers("netns", "pidns")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    (tmp_path / "shared").mkdir()  # granted to the plugin by spawn_hostd: where it reads the certificate
    context, cafile = server_context(tmp_path / "shared", "api.test")
    port, tls_port = await serve_plain_and_tls(nursery, context)
    other = port + 1 if port < 65535 else port - 1
    folder = probe_with(tmp_path, {"hosts": [f"api.test:{port}", f"api.test:{tls_port}"], "private": ["api.test"]})
    async with spawn_hostd(tmp_path, "--resolve", "api.test=127.0.0.1") as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        status = await hostd.request("plugins/enable", {"id": "mcp-probe"})
        assert {"netns", "netproxy", "seccomp-net"} <= set(status["isolation"])
        ops = [
            ["raw", "api.test", port, "/raw"],
            ["node", "fetch", f"http://api.test:{port}/fetch"],
            ["node", "https", f"https://api.test:{tls_port}/https", str(cafile)],
            ["fetch", f"http://api.test:{port}/proxied"],
            ["raw", "other.test", port, "/none"],
            ["node", "fetch", f"http://other.test:{port}/"],
            ["raw", "api.test", other, "/none"],
            ["raw", "127.0.0.1", port, "/none"],
        ]
        result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": ops}})
        assert result["structuredContent"]["results"] == [
            answer("/raw"),
            "200 hello /fetch",
            "200 hello /https",
            "200 hello /proxied",
            "gaierror EAI_NONAME",
            "ENOTFOUND",
            "ECONNREFUSED",
            "ECONNRESET",
        ]
        logged = await hostd.wait_for(
            "plugins/log", lambda n: n["source"] == "host" and "refused other.test" in n["message"]
        )
        assert logged["message"] == (
            "network: refused other.test (NXDOMAIN): other.test is not in the plugin's allowlist on any port"
            " (to let it through: hostctl grant mcp-probe --host other.test:PORT)"
        )
        logged = await hostd.wait_for("plugins/log", lambda n: "refused 127.0.0.1" in n["message"])
        assert logged["message"] == (
            f"network: refused 127.0.0.1:{port} (403): 127.0.0.1:{port} is no address hostd's DNS gave this plugin"
            " (an IP literal)"
        )


async def test_with_a_parent_to_ask_every_name_resolves_and_the_connection_asks(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    need_layers("netns", "pidns")
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, upstream, listeners)
    port = listeners[0].socket.getsockname()[1]
    folder = probe_with(tmp_path, {"hosts": [f"api.test:{port}"], "private": ["asked.test", "denied.test"]})
    initialize = {"clientInfo": {"name": "asking-parent", "version": "0"}, "capabilities": {"network": {}}}
    pins = ["--resolve", "asked.test=127.0.0.1", "--resolve", "denied.test=127.0.0.1"]
    answers = {"asked.test": "once", "denied.test": "no"}
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state"), *pins], env=plugin_environment(), initialize=initialize
    ) as hostd:

        async def on_request(method: str, params: dict[str, Any]) -> Any:
            return {"grant": answers[params["host"]]}

        hostd.on_request = on_request
        info = await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/grant", {"id": "mcp-probe", "permissions": ["probe.run"]})
        await hostd.request("plugins/approve", {"id": "mcp-probe", "digest": info["launch"]["digest"]})
        await hostd.request("plugins/enable", {"id": "mcp-probe"})
        ops = [
            ["raw", "asked.test", port, "/asked"],
            ["raw", "denied.test", port, "/none"],
            ["raw", "asked.test", port, "/again"],
        ]
        result = await hostd.request("tools/call", {"name": "mcp-probe.run", "arguments": {"ops": ops}})
        assert result["structuredContent"]["results"] == [answer("/asked"), "ECONNRESET", answer("/again")]
        asked = [(p["host"], p["port"]) for _, method, p in hostd.requests if method == "network/request"]
        assert asked == [("asked.test", port), ("denied.test", port)]  # at connect time, once each; never at DNS
        logged = await hostd.wait_for("plugins/log", lambda n: "refused denied.test" in n["message"])
        assert logged["message"] == (
            f"network: refused denied.test:{port} (403): denied.test:{port} is not in the plugin's allowlist; the user"
            f" declined it (to let it through: hostctl grant mcp-probe --host denied.test:{port})"
        )


async def test_resolve_takes_a_name_and_an_address_and_nothing_else() -> None:
    assert resolve_pin("API.Test.=127.0.0.1") == ("api.test", "127.0.0.1")
    assert resolve_pin("v6.test=::ffff:10.0.0.1") == ("v6.test", "10.0.0.1")
    for text, why in [
        ("api.test", "'api.test': write NAME=ADDRESS, NAME a host name"),
        ("127.0.0.1=127.0.0.2", "'127.0.0.1=127.0.0.2': write NAME=ADDRESS, NAME a host name"),
        ("api.test=other.test", "'api.test=other.test': ADDRESS must be an IP address, not 'other.test'"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError) as caught:
            resolve_pin(text)
        assert str(caught.value) == why

    async def fallback(host: str, port: int) -> list[str]:
        return [f"fallback {host}:{port}"]

    resolve = pinned_resolver({"api.test": "127.0.0.1"}, fallback)
    assert [await resolve("api.test", 1), await resolve("other.test", 2)] == [["127.0.0.1"], ["fallback other.test:2"]]


async def test_a_transparent_connection_takes_the_same_decision_and_limits_as_connect(nursery: trio.Nursery) -> None:
    """In-process, real loopback sockets: PluginProxy.handle_transparent with the name a fake address stood for.
    The same rules as CONNECT (tests/test_net_proxy.py): the DNS-rebinding member, the connection bound, an
    address hostd never gave; each refused by a reset, the reason reported."""

    async def echo(stream: trio.SocketStream) -> None:
        async with stream:
            while chunk := await stream.receive_some(65536):
                await stream.send_all(chunk)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, echo, listeners)
    port = listeners[0].socket.getsockname()[1]

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]  # upstream.test (named in private) and rebound.test (not named) alike

    refused: list[dict[str, Any]] = []
    allow = Allowlist.parse([f"upstream.test:{port}", f"rebound.test:{port}"], private=["upstream.test"])
    proxy = PluginProxy(
        "p3", allow, limits=ProxyLimits(max_connections=1), resolver=resolver, on_refused=refused.append
    )
    front = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]

    async def connect(host: str | None) -> trio.SocketStream:
        client = await trio.open_tcp_stream(*front.socket.getsockname())
        nursery.start_soon(proxy.handle_transparent, await front.accept(), host, port, "198.18.0.9")
        return client

    async def outcome(client: trio.SocketStream) -> bytes | str:
        async with client:
            try:
                await client.send_all(b"ping")
                return await client.receive_some(65536)
            except trio.BrokenResourceError as exc:
                return type(exc.__cause__).__name__

    # A refused connection is counted and uncounted before its reset: each of these finds the bound free.
    assert await outcome(await connect("rebound.test")) == "ConnectionResetError"
    assert await outcome(await connect(None)) == "ConnectionResetError"
    async with await connect("upstream.test") as held:
        await held.send_all(b"ping")
        assert await held.receive_some(65536) == b"ping"  # spliced both ways
        assert await outcome(await connect("upstream.test")) == "ConnectionResetError"  # the bound: 1 connection
    assert [(r["host"], r["port"], r["status"], r["reason"]) for r in refused] == [
        (
            "rebound.test",
            port,
            403,
            "rebound.test resolves to the loopback address 127.0.0.1; a plugin reaches a loopback address only when "
            "its allowlist names the host in network.private, or names the address itself",
        ),
        ("198.18.0.9", port, 403, f"198.18.0.9:{port} is no address hostd's DNS gave this plugin (an IP literal)"),
        ("upstream.test", port, 429, "more than 1 connections"),
    ]
    await front.aclose()


async def test_dns_answers_are_paced_on_trios_clock(mock_clock: trio.testing.MockClock, nursery: trio.Nursery) -> None:
    """serve_dns takes one token a query (the plugin's DNS_QUERIES_PER_SECOND; 2 here): a third query in the same
    instant is answered only once the clock moved on. Real UDP sockets on loopback; trio's mock clock."""
    server = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await server.bind(("127.0.0.1", 0))
    names = FakeNames()
    nursery.start_soon(serve_dns, server, names, lambda name, qtype: True, _Bucket(2))
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.setblocking(False)
    client.connect(server.getsockname())

    async def receive() -> bytes:
        await trio.lowlevel.wait_readable(client)
        return client.recv(512)

    for ident in range(3):
        client.send(struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + b"\x01a\x04test\x00\x00\x01\x00\x01")
    assert [(await receive())[:2] for _ in range(2)] == [b"\x00\x00", b"\x00\x01"]
    await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(BlockingIOError):
        client.recv(512)  # the third waits for a token
    mock_clock.jump(0.5)
    assert (await receive())[:2] == b"\x00\x02"
    client.close()
