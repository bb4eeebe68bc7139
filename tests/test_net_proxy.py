"""The plugins' HTTP proxy (hostd/net/proxy.py; issue 26), with real sockets on loopback only.

Upstream servers are trio servers of this test on 127.0.0.1; names are mapped by a resolver the test controls
(``upstream.test`` -> 127.0.0.1, named in ``private``; ``rebound.test`` -> 127.0.0.1, not named: the DNS
rebinding member). The class under test: *a destination the allowlist does not name reached anyway* — by
another host, another port, an IP literal, a numeric spelling, a name that resolves to loopback, a request form
the proxy does not check — each refused with the exact status and reason, and reported through ``on_refused``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from hostd.net.allowlist import Allowlist
from hostd.net.proxy import PluginProxy, ProxyLimits, _Bucket

NAMES = {"upstream.test": ["127.0.0.1"], "rebound.test": ["127.0.0.1"], "public.test": ["93.184.215.14"]}
#: The end of an unlisted destination's refusal by plugin p1's proxy: the hostctl command that lets it through.
GRANT = " (to let it through: hostctl grant p1 --host {})"


async def fake_resolver(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise OSError(0, "no such name")
    return NAMES[host]


async def http_upstream(stream: trio.SocketStream) -> None:
    """Answers one request: ``200`` whose body repeats the request line and its headers, one a line."""
    async with stream:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        body = data.partition(b"\r\n\r\n")[0]
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))


async def echo_upstream(stream: trio.SocketStream) -> None:
    async with stream:
        while chunk := await stream.receive_some(65536):
            await stream.send_all(chunk)


async def serve(nursery: trio.Nursery, handler: Any) -> int:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, handler, listeners)
    port: int = listeners[0].socket.getsockname()[1]
    return port


@pytest.fixture
async def ports(nursery: trio.Nursery) -> dict[str, int]:
    """Two upstream servers (http, echo) and a port nothing listens on."""
    closed = trio.socket.socket()
    await closed.bind(("127.0.0.1", 0))
    free = closed.getsockname()[1]
    closed.close()
    return {"http": await serve(nursery, http_upstream), "echo": await serve(nursery, echo_upstream), "closed": free}


async def start_proxy(nursery: trio.Nursery, proxy: PluginProxy) -> int:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(proxy.serve, listeners[0])
    port: int = listeners[0].socket.getsockname()[1]
    return port


async def exchange(port: int, request: bytes, then: bytes = b"") -> tuple[bytes, bytes]:
    """Send ``request`` to the proxy, read the answer head; if 200 and ``then``, send it through the tunnel.
    Returns ``(head, body or what came back through the tunnel)``."""
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await stream.send_all(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, f"the proxy closed after {data!r}"
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        if then and head.split(b" ")[1] == b"200":
            await stream.send_all(then)
            while len(rest) < len(then):
                rest += await stream.receive_some(65536)
            return head, rest
        while chunk := await stream.receive_some(65536):
            rest += chunk
        return head, rest


@pytest.fixture
async def proxy(nursery: trio.Nursery, ports: dict[str, int]) -> AsyncIterator[tuple[PluginProxy, int, list[Any]]]:
    refused: list[dict[str, Any]] = []
    allow = Allowlist.parse(
        [
            f"upstream.test:{ports['http']}",
            f"upstream.test:{ports['echo']}",
            f"rebound.test:{ports['echo']}",
            f"127.0.0.1:{ports['closed']}",
            "public.test",
        ],
        private=["upstream.test"],
    )
    plugin_proxy = PluginProxy("p1", allow, resolver=fake_resolver, on_refused=refused.append)
    yield plugin_proxy, await start_proxy(nursery, plugin_proxy), refused


async def test_allowed_hosts_are_reached_by_plain_http_and_connect(
    proxy: tuple[PluginProxy, int, list[Any]], ports: dict[str, int]
) -> None:
    _, port, refused = proxy
    http = ports["http"]
    head, body = await exchange(
        port,
        b"GET http://UPSTREAM.test.:%d/x?y=1 HTTP/1.1\r\nHost: elsewhere.test\r\nProxy-Authorization: Basic eA==\r\n"
        b"Proxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n" % http,
    )
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 200 OK"
    assert body.split(b"\r\n") == [
        b"GET /x?y=1 HTTP/1.1",
        b"Host: UPSTREAM.test.:%d" % http,
        b"Accept: */*",
        b"Connection: close",
    ]

    head, echoed = await exchange(port, b"CONNECT upstream.test:%d HTTP/1.1\r\n\r\n" % ports["echo"], then=b"ping")
    assert (head, echoed) == (b"HTTP/1.1 200 Connection Established", b"ping")
    # An IP literal that an allowlisted name (named in private) resolves to: a client that resolved it itself.
    head, echoed = await exchange(port, b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % ports["echo"], then=b"pong")
    assert (head, echoed) == (b"HTTP/1.1 200 Connection Established", b"pong")
    assert refused == []


async def test_every_other_destination_is_refused_with_a_status_and_a_reason(
    proxy: tuple[PluginProxy, int, list[Any]], ports: dict[str, int]
) -> None:
    _, port, refused = proxy
    echo, closed = ports["echo"], ports["closed"]
    cases = [
        (
            b"CONNECT other.test:443 HTTP/1.1\r\n\r\n",
            403,
            "other.test:443 is not in the plugin's allowlist" + GRANT.format("other.test:443"),
        ),
        (
            b"CONNECT upstream.test:%d HTTP/1.1\r\n\r\n" % closed,
            403,
            f"upstream.test:{closed} is not in the plugin's allowlist" + GRANT.format(f"upstream.test:{closed}"),
        ),
        (
            b"CONNECT rebound.test:%d HTTP/1.1\r\n\r\n" % echo,
            403,
            "rebound.test resolves to the loopback address 127.0.0.1; a plugin reaches a loopback address only "
            "when its allowlist names the host in network.private, or names the address itself",
        ),
        (
            b"CONNECT 127.0.0.2:%d HTTP/1.1\r\n\r\n" % echo,
            403,
            f"127.0.0.2:{echo} is not in the plugin's allowlist, and no allowed name resolves to it"
            + GRANT.format(f"127.0.0.2:{echo}"),
        ),
        (
            b"CONNECT 2130706433:%d HTTP/1.1\r\n\r\n" % echo,
            403,
            "'2130706433': a name ending in a number is an IPv4 address to resolvers; write the address as four "
            "decimal parts (e.g. 127.0.0.1)",
        ),
        (
            b"CONNECT [::ffff:127.0.0.2]:%d HTTP/1.1\r\n\r\n" % echo,
            403,
            f"127.0.0.2:{echo} is not in the plugin's allowlist, and no allowed name resolves to it"
            + GRANT.format(f"127.0.0.2:{echo}"),
        ),
        (
            b"GET https://upstream.test/ HTTP/1.1\r\n\r\n",
            400,
            "a plain request names an http:// URL; use CONNECT for anything else",
        ),
        (
            b"GET http://user@upstream.test/ HTTP/1.1\r\n\r\n",
            400,
            "a user name or password in the target is not allowed",
        ),
        (b"CONNECT upstream.test HTTP/1.1\r\n\r\n", 400, "CONNECT names host:port"),
        (b"HELLO\r\n\r\n", 400, "the request line is not 'METHOD TARGET HTTP/1.1'"),
        (
            b"GET http://public.test/ HTTP/1.1\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n",
            431,
            "the request head is over 16384 bytes",
        ),
        (
            b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n" % closed,
            502,
            f"127.0.0.1:{closed} refused the connection (127.0.0.1: Connection refused)",
        ),
    ]
    seen = []
    for request, _, _ in cases:
        head, body = await exchange(port, request)
        lines = head.split(b"\r\n")
        seen.append((int(lines[0].split(b" ")[1]), body.decode().rstrip("\n")))
        assert f"X-Hostd-Refused: {body.decode().rstrip()}".encode() in lines
    assert seen == [(status, reason) for _, status, reason in cases]
    assert [(r["plugin"], r["status"], r["reason"]) for r in refused] == [("p1", s, why) for _, s, why in cases]
    assert (refused[0]["host"], refused[0]["port"]) == ("other.test", 443)


async def test_a_bare_cr_lf_or_nul_in_a_head_is_refused_and_never_passed_upstream(
    proxy: tuple[PluginProxy, int, list[Any]], ports: dict[str, int]
) -> None:
    """The class (found by ``python -m fuzz proxy-head``; fuzz/crashers/proxy-head/): *a line end or NUL inside
    a line of the head*, which a lenient upstream reads as a line of its own (a header smuggled past the proxy's
    rebuilt head). Members: a bare LF and a bare CR in a header value, a bare LF in a header name, a NUL in the
    target, a bare LF in the request line; each ``400`` and nothing reaches the upstream."""
    _, port, refused = proxy
    target = b"http://upstream.test:%d/" % ports["http"]
    reason = "the request head holds a bare CR or LF, or a NUL"
    for request in (
        b"GET " + target + b" HTTP/1.1\r\nX: a\nInjected: b\r\n\r\n",
        b"GET " + target + b" HTTP/1.1\r\nX: a\rInjected: b\r\n\r\n",
        b"GET " + target + b" HTTP/1.1\r\nInjected: b\nX: a\r\n\r\n",
        b"CONNECT upstream.test\x00.evil:%d HTTP/1.1\r\n\r\n" % ports["echo"],
        b"GET " + target + b" HTTP/1.1\nInjected: b\r\n\r\n",
    ):
        head, body = await exchange(port, request)
        assert (head.split(b"\r\n")[0], body) == (b"HTTP/1.1 400 Bad Request", reason.encode() + b"\n")
    assert [(r["status"], r["reason"]) for r in refused] == [(400, reason)] * 5


async def test_connections_over_the_bound_are_refused_while_others_are_served(
    nursery: trio.Nursery, ports: dict[str, int]
) -> None:
    refused: list[dict[str, Any]] = []
    allow = Allowlist.parse([f"upstream.test:{ports['echo']}"], private=["upstream.test"])
    plugin_proxy = PluginProxy(
        "p2", allow, limits=ProxyLimits(max_connections=2), resolver=fake_resolver, on_refused=refused.append
    )
    port = await start_proxy(nursery, plugin_proxy)
    # One connection that never finishes its head, one open tunnel: the bound is reached, nothing is blocked.
    silent = await trio.open_tcp_stream("127.0.0.1", port)
    await silent.send_all(b"CONNECT upstream.test")
    async with await trio.open_tcp_stream("127.0.0.1", port) as tunnel:
        await tunnel.send_all(b"CONNECT upstream.test:%d HTTP/1.1\r\n\r\n" % ports["echo"])
        answer = b""
        while not answer.endswith(b"\r\n\r\n"):
            answer += await tunnel.receive_some(65536)
        assert answer == b"HTTP/1.1 200 Connection Established\r\n\r\n"
        assert plugin_proxy.open_connections == 2
        head, body = await exchange(port, b"CONNECT upstream.test:%d HTTP/1.1\r\n\r\n" % ports["echo"])
        assert (head.split(b"\r\n")[0], body) == (b"HTTP/1.1 429 Too Many Requests", b"more than 2 connections\n")
        await tunnel.send_all(b"still")
        assert await tunnel.receive_some(65536) == b"still"
        assert [r["status"] for r in refused] == [429]  # recorded before the answer was sent
    await silent.aclose()


async def test_the_bytes_per_second_bound_is_a_token_bucket_on_trios_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bucket = _Bucket(1000)
    start = trio.current_time()
    stamps = []
    for _ in range(4):
        await bucket.take(1000)
        stamps.append(trio.current_time() - start)
    # The first second's worth is there at once; each next 1000 bytes waits one second.
    assert stamps == [0.0, 1.0, 2.0, 3.0]


async def test_one_question_per_destination_however_many_connections_wait(
    nursery: trio.Nursery, ports: dict[str, int]
) -> None:
    asked: list[tuple[str, int]] = []
    release = trio.Event()

    async def ask(host: str, port: int) -> str:
        asked.append((host, port))
        await release.wait()
        return "once"

    allow = Allowlist.parse([], private=["upstream.test"])
    plugin_proxy = PluginProxy("p3", allow, resolver=fake_resolver, ask=ask)
    port = await start_proxy(nursery, plugin_proxy)
    answers: list[tuple[bytes, bytes]] = []

    async def connect() -> None:
        answers.append(await exchange(port, b"CONNECT upstream.test:%d HTTP/1.1\r\n\r\n" % ports["echo"], then=b"hi"))

    async with trio.open_nursery() as clients:
        for _ in range(3):
            clients.start_soon(connect)
        await trio.testing.wait_all_tasks_blocked(cushion=0.05)
        assert asked == [("upstream.test", ports["echo"])]  # the other two wait for the same answer
        release.set()
    assert answers == [(b"HTTP/1.1 200 Connection Established", b"hi")] * 3
    assert asked == [("upstream.test", ports["echo"])]
