"""A malicious plugin against its network isolation (issue 26): real plugin processes, raw sockets, exact answers.

One hostile plugin (fixtures/mcp-netattack: raw sockets, no proxy library) with the allowlist
``["api.test:<port>", "127.0.0.1:<echo port>"]`` and no ``private``, under one hostd run with
``--resolve api.test=127.0.0.1`` (an allowed name rebound to loopback). What it tries, through the proxy's
loopback listener inside its namespace (``127.0.0.1:3128``), and what it gets:

- every spelling of an address the allowlist does not name, in a ``CONNECT`` and in an absolute URI: decimal,
  octal, hexadecimal and short IPv4 forms and IPv6 forms with a zone id are ``400``/``403`` (never a connection),
  IPv4-mapped IPv6 is the IPv4 address it maps (``403`` as that address);
- the allowed name rebound to loopback, in any letter case or with a trailing dot: ``403`` naming the loopback
  address (DNS rebinding); the loopback literal that name resolves to: ``403`` too;
- a plain request to the allowed literal with a pipelined second request for another host in the same write:
  both heads reach only the allowed upstream (the proxy connects once, to the address it decided; the second
  head is bytes to that server, which answers for itself), never the other host.

Then the bounds: connections over the plugin's 64 cost hostd a bounded number of descriptors however many the
plugin holds open (counted in ``/proc/<hostd>/fd``), a second plugin keeps serving and the control loop answers
meanwhile, and once the plugin is stopped hostd holds no descriptor more than before it started.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
import yaml

from hostd.cli.client import RpcError
from hostd.net.allowlist import Allowlist
from hostd.net.proxy import MAX_LOOKUPS, MAX_REFUSING, PluginProxy
from sandbox._shim_net import nameservers
from tests.conftest import ECHO, ROOT, spawn_hostd
from tests.platform_facts import need_layers
from tests.waiting import GENEROUS, until

ATTACK = ROOT / "fixtures" / "mcp-netattack"
PROXY = ("127.0.0.1", 3128)


def hostile_plugin(tmp_path: Path, hosts: list[str]) -> Path:
    folder = tmp_path / "plugins" / "mcp-netattack"
    shutil.copytree(ATTACK, folder)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["network"] = {"hosts": hosts}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


async def recording_upstream(stream: trio.SocketStream, seen: list[bytes]) -> None:
    """Read two request heads (10 s at most), record every byte, answer ``200`` with the count, close."""
    async with stream:
        data = b""
        with trio.move_on_after(10):
            while len(data) < 65536 and (chunk := await stream.receive_some(65536)):
                data += chunk
                if data.count(b"\r\n\r\n") >= 2:
                    break
        seen.append(data)
        body = b"seen %d" % len(data)
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def enable(hostd: Any, folder: Path, *permissions: str) -> None:
    info = await hostd.request("plugins/install", {"path": str(folder)})
    await hostd.request("plugins/grant", {"id": info["id"], "permissions": list(permissions)})
    await hostd.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    status = await hostd.request("plugins/enable", {"id": info["id"]})
    assert status["status"] == "ready"


def status_line(answer: object) -> str:
    """The status line and body of a proxy answer (``X-Hostd-Refused`` repeats the body)."""
    assert isinstance(answer, str)
    head, _, body = answer.partition("\r\n\r\n")
    return f"{head.split(chr(13))[0]} | {body.strip()}"


async def test_address_spellings_rebinding_and_a_pipelined_second_head(tmp_path: Path, nursery: trio.Nursery) -> None:
    need_layers("netns", "pidns")
    seen: dict[int, list[bytes]] = {}
    ports = []
    for _ in range(2):
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        ports.append(listeners[0].socket.getsockname()[1])
        seen[ports[-1]] = []
        await nursery.start(
            trio.serve_listeners, functools.partial(recording_upstream, seen=seen[ports[-1]]), listeners
        )
    port, other = ports
    folder = hostile_plugin(tmp_path, [f"api.test:{port}", f"127.0.0.1:{other}"])
    # Each spelling and what the proxy makes of it (the canonical host it names in the refusal, or the reason).
    spellings = {
        "2130706433": None, "0x7f.0.0.1": None, "0177.0.0.1": None, "127.1": None, "0x7f000001": None,
        "127.0.0.1": "127.0.0.1", "127.0.0.1.": "127.0.0.1", "[::ffff:127.0.0.1]": "127.0.0.1",
        "[::ffff:7f00:1]": "127.0.0.1", "[::1]": "[::1]", "[::127.0.0.1]": "[::7f00:1]",
        "[64:ff9b::7f00:1]": "[64:ff9b::7f00:1]",
    }  # fmt: skip
    # Absolute URIs Python's urlsplit raises on: each one used to end the plugin's whole proxy (and transparent
    # mode with it) with an uncaught ValueError; every later connection was reset.
    broken = ["http://[::1/", "http://[evil]/", "http://a]b/"]
    ops: list[list[Any]] = [["exchange", *PROXY, f"GET {uri} HTTP/1.1\r\nHost: x\r\n\r\n"] for uri in broken]
    for target in [*spellings, "[fe80::1%25lo]", "api.test", "API.Test.", "localhost"]:
        ops.append(["exchange", *PROXY, f"CONNECT {target}:{port} HTTP/1.1\r\nHost: {target}:{port}\r\n\r\n"])
        ops.append(["exchange", *PROXY, f"GET http://{target}:{port}/ HTTP/1.1\r\nHost: {target}\r\n\r\n"])
    first = f"GET http://127.0.0.1:{other}/first HTTP/1.1\r\nHost: evil.test\r\nContent-Length: 0\r\n\r\n"
    second = "GET http://evil.test/second HTTP/1.1\r\nHost: evil.test\r\nTransfer-Encoding: chunked\r\n\r\n"
    ops.append(["exchange", *PROXY, first + second])
    async with spawn_hostd(tmp_path, "--resolve", "api.test=127.0.0.1") as hostd:
        await enable(hostd, folder, "attack.run")
        result = await hostd.request("tools/call", {"name": "mcp-netattack.run", "arguments": {"ops": ops}})
        logged = [n["message"] for n in hostd.seen("plugins/log") if n["message"].startswith("network:")]
    answers = [status_line(a) for a in result["structuredContent"]["results"]]
    grant = "(to let it through: hostctl grant mcp-netattack --host {0}:" + f"{port})"
    rebound = (
        "HTTP/1.1 403 Forbidden | api.test resolves to the loopback address 127.0.0.1; a plugin reaches a loopback "
        "address only when its allowlist names the host in network.private, or names the address itself"
    )
    expected = [
        "HTTP/1.1 400 Bad Request | the request target is not a URL: Invalid IPv6 URL",
        "HTTP/1.1 400 Bad Request | the request target is not a URL: 'evil' does not appear to be an IPv4 or IPv6 "
        "address",
        "HTTP/1.1 400 Bad Request | the request target is not a URL: Invalid IPv6 URL",
    ]
    for target, canonical in spellings.items():
        why = (
            f"{canonical}:{port} is not in the plugin's allowlist, and no allowed name resolves to it "
            + grant.format(canonical)
            if canonical
            else f"{target!r}: a name ending in a number is an IPv4 address to resolvers; write the address as four "
            "decimal parts (e.g. 127.0.0.1)"
        )
        expected += [f"HTTP/1.1 403 Forbidden | {why}"] * 2
    expected += ["HTTP/1.1 403 Forbidden | '[fe80::1%25lo]': an IPv6 zone id is not allowed"] * 2
    expected += [rebound] * 4
    expected += [
        f"HTTP/1.1 403 Forbidden | localhost:{port} is not in the plugin's allowlist " + grant.format("localhost")
    ] * 2
    assert seen[port] == []  # the rebound name and every literal spelling of its address: never connected
    # The pipelined head went, as bytes, to the one upstream the proxy decided on; evil.test was never resolved.
    assert seen[other] == [
        f"GET /first HTTP/1.1\r\nHost: 127.0.0.1:{other}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
        + second.encode()
    ]
    expected.append(f"HTTP/1.1 200 OK | seen {len(seen[other][0])}")
    assert answers == expected
    assert not [line for line in logged if "evil.test" in line]


async def test_connections_over_the_bound_cost_hostd_a_bounded_number_of_descriptors(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    """After raising its own RLIMIT_NOFILE to the hard limit, the plugin opens ten tunnels to an upstream that
    never answers nor closes (the proxy's upstream side would wait forever), 54 connections sending nothing
    (slowloris heads) and 200 more, all kept open: hostd holds the 64 and MAX_REFUSING being answered 429, the
    rest wait in the backlog; the other plugin and the control loop answer meanwhile. The plugin dies (its side
    of every connection closed by the kernel): every tunnel is closed upstream, and once the plugin is disabled
    hostd holds no descriptor more than before it was enabled."""
    need_layers("netns", "pidns")
    opened, closed = trio.Semaphore(0), trio.Semaphore(0)

    async def silent(stream: trio.SocketStream) -> None:
        opened.release()
        async with stream:
            while await stream.receive_some(65536):
                pass
        closed.release()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, silent, listeners)
    port = listeners[0].socket.getsockname()[1]
    folder = hostile_plugin(tmp_path, [f"127.0.0.1:{port}"])
    echo = tmp_path / "plugins" / "mcp-echo"
    shutil.copytree(ECHO, echo)
    async with spawn_hostd(tmp_path) as hostd:
        pid = hostd.process.pid
        await enable(hostd, echo, "echo.use", "echo.inspect")
        before_plugin = descriptors(pid)
        await enable(hostd, folder, "attack.run")
        idle = descriptors(pid)
        tunnel = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"
        ops = [["nofile"], ["hold", *PROXY, 10, tunnel], ["hold", *PROXY, 54, ""], ["hold", *PROXY, 200, ""]]
        result = await hostd.request("tools/call", {"name": "mcp-netattack.run", "arguments": {"ops": ops}})
        assert result["structuredContent"]["results"][1:3] == ["10 connected", "54 connected"]
        for _ in range(10):
            await opened.acquire()

        def refusals() -> list[str]:
            return [n["message"] for n in hostd.seen("plugins/log") if "(429)" in n["message"]]

        await hostd.wait_until(lambda: len(refusals()) >= MAX_REFUSING)
        # 10 tunnels (the plugin's side and the upstream's), 54 heads never sent, at most 16 being answered 429
        # (one whose lingering close just ended may not be replaced yet: the bound is what is asserted).
        assert 10 * 2 + 54 <= descriptors(pid) - idle <= 10 * 2 + 54 + MAX_REFUSING
        assert refusals()[0] == "network: refused a connection (429): more than 64 connections"
        listed = await hostd.request("plugins/list")
        assert {p["id"] for p in listed["plugins"]} == {"mcp-echo", "mcp-netattack"}
        echoed = await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "still here"}})
        assert echoed["structuredContent"] == {"text": "still here", "length": 10}
        call = await hostd.start("tools/call", {"name": "mcp-netattack.run", "arguments": {"ops": [["exit", 3]]}})
        with pytest.raises(RpcError) as crashed:
            await call()
        assert str(crashed.value) == "-32018: plugin mcp-netattack exited with code 3"
        for _ in range(10):
            await closed.acquire()  # each tunnel's upstream side saw its end
        await hostd.request("plugins/disable", {"id": "mcp-netattack"})
        # hostd's other tasks may close a descriptor a moment after the answer (a state only its process can
        # report: polled, bounded); a leak stays and fails the assertion with its number.
        with contextlib.suppress(trio.TooSlowError):
            await until(lambda: descriptors(pid) == before_plugin, timeout=GENEROUS)
        assert descriptors(pid) == before_plugin


async def test_a_plugins_hanging_lookups_never_take_the_threads_other_plugins_resolve_with() -> None:
    """glibc's real getaddrinfo against a name server that never answers (fixtures/sandbox/dns_starve.py, in a
    user, mount and network namespace of its own: no privilege needed). Before the fix the attacker's 64
    lookups took all 40 threads of trio's default limiter, and the other plugin's ``localhost`` got ``504``."""
    need_layers("netns")
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    driver = ROOT / "fixtures" / "sandbox" / "dns_starve.py"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with trio.fail_after(90):
        done = await trio.run_process(
            ["unshare", "-rmn", sys.executable, str(driver)],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert result == {
        "names": MAX_LOOKUPS,
        "other": "HTTP/1.1 200 Connection Established | "
        "HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\nhello /other",
        "thread": "ran",
    }


def dns_query(name: str) -> str:
    """An ``A`` question for ``name`` (RFC 1035 section 4.1), as the latin-1 text the fixture sends."""
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    return (struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack("!HH", 1, 1)).decode(
        "latin-1"
    )


async def test_no_other_way_out_of_the_namespace(tmp_path: Path) -> None:
    """Every socket kind and destination besides the proxy and the fake-address DNS, from a real plugin."""
    need_layers("netns", "pidns")
    folder = hostile_plugin(tmp_path, ["api.test:443"])
    server = nameservers()[0]
    unix, inet, inet6, netlink, packet, vsock = 1, 2, 10, 16, 17, 40
    ops: list[list[Any]] = [
        ["udp", server, 53, dns_query("api.test")],
        ["udp", server, 53, dns_query("other.test")],
        ["udp", server, 5353, "x"],
        ["udp", "127.0.0.1", 9, "x"],
        ["udp", "8.8.8.8", 53, dns_query("api.test")],
        ["udp", "2001:4860:4860::8888", 53, dns_query("api.test")],
        ["udp", "::1", 53, dns_query("api.test")],
        ["tcp", server, 53],
        ["tcp", "::1", 3128],
        ["tcp", "::1", 443],
        ["tcp", "198.18.0.1", 22],
        ["tcp", "10.0.0.1", 80],
        ["tcp", "2606:4700:4700::1111", 443],
        ["socket", unix, socket.SOCK_STREAM, 0],
        ["socket", unix, socket.SOCK_DGRAM, 0],
        ["socket", packet, socket.SOCK_RAW, 0],
        ["socket", vsock, socket.SOCK_STREAM, 0],
        ["socket", inet, socket.SOCK_RAW, socket.IPPROTO_ICMP],
        ["socket", inet, socket.SOCK_DGRAM, socket.IPPROTO_ICMP],
        ["socket", inet, socket.SOCK_STREAM, 262],
        ["socket", inet6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6],
        ["socket", netlink, socket.SOCK_RAW, 0],
        ["pids"],
    ]
    async with spawn_hostd(tmp_path, "--resolve", "api.test=127.0.0.1") as hostd:
        await enable(hostd, folder, "attack.run")
        result = await hostd.request("tools/call", {"name": "mcp-netattack.run", "arguments": {"ops": ops}})
    assert result["structuredContent"]["results"] == [
        "42 bytes",  # hostd's DNS: the fake address of api.test (12 + 14 question + 16 answer)
        "28 bytes",  # NXDOMAIN, the question echoed
        "ECONNREFUSED",  # UDP to another port of the name server's address
        "ECONNREFUSED",  # UDP to loopback: nothing listens but hostd's DNS
        "ENETUNREACH",  # UDP out: no route
        "ENETUNREACH",
        "ECONNREFUSED",  # IPv6 loopback: hostd listens on IPv4 only
        "ECONNREFUSED",  # DNS over TCP: not served
        "ECONNREFUSED",
        "ECONNREFUSED",
        "ECONNREFUSED",  # a fake address on a port not listened
        "ENETUNREACH",
        "ENETUNREACH",
        "EACCES",  # AF_UNIX (pathname and abstract: hostd's handoff socket, D-Bus...): seccomp-net
        "EACCES",
        "EAFNOSUPPORT",  # AF_PACKET
        "EAFNOSUPPORT",  # AF_VSOCK reaches the hypervisor host whatever the network namespace
        "EPROTONOSUPPORT",  # raw IP
        "EPROTONOSUPPORT",  # ICMP "ping" sockets
        "EPROTONOSUPPORT",  # MPTCP
        "EPROTONOSUPPORT",  # raw IPv6
        "ok",  # route netlink: its own namespace's interfaces only
        [2],  # the pid namespace: the plugin (1 is the shim's init); no hostd to ptrace or read /proc of
    ]


async def test_an_exception_on_one_connection_ends_that_connection_only(nursery: trio.Nursery) -> None:
    """The generic member of the class of ``GET http://[::1/`` (in-process, real loopback sockets): a resolver
    that raises something no one expected (here ``UnicodeError``) ends that connection, with one ``error``
    record; the proxy keeps answering the next connection."""
    records: list[dict[str, Any]] = []

    async def resolver(host: str, port: int) -> list[str]:
        raise UnicodeError(f"cannot encode {host}")

    proxy = PluginProxy("p", Allowlist.parse(["boom.test:443"]), resolver=resolver, on_refused=records.append)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    nursery.start_soon(proxy.serve, listeners[0])
    answers = []
    for target in ("boom.test:443", "other.test:443"):
        async with await trio.open_tcp_stream(*listeners[0].socket.getsockname()[:2]) as stream:
            await stream.send_all(f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            answers.append(answer.split(b"\r\n")[0])
    assert answers == [b"", b"HTTP/1.1 403 Forbidden"]
    assert [(r["status"], r["reason"]) for r in records] == [
        ("error", "the proxy could not serve a connection: UnicodeError: cannot encode boom.test"),
        (
            403,
            "other.test:443 is not in the plugin's allowlist"
            " (to let it through: hostctl grant p --host other.test:443)",
        ),
    ]


CLIENTS = """
import socket, sys
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(3)]
print("connected", flush=True)
for sock in socks:
    sock.sendall(b"CONNECT x.test:443 HTTP/1.1\\r\\n\\r\\n")
    print(sock.recv(65536).split(b"\\r\\n")[0].decode(), flush=True)
"""


async def test_hostd_out_of_descriptors_pauses_the_proxy_never_ends_it(nursery: trio.Nursery) -> None:
    """In-process, real sockets, a real client process: with hostd's soft RLIMIT_NOFILE below the descriptors
    it holds, the proxy's accept gets EMFILE; once one is free again, the three waiting clients are
    answered. Before the fix the accept loop raised EMFILE, which ended the plugin's proxy (and, through its
    nursery, the rest of hostd)."""
    failed = trio.Event()
    records: list[dict[str, Any]] = []

    def on_refused(record: dict[str, Any]) -> None:
        records.append(record)
        if record["status"] == "error":
            failed.set()

    proxy = PluginProxy("p", Allowlist.parse([]), on_refused=on_refused)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    client = await trio.lowlevel.open_process([sys.executable, "-c", CLIENTS, str(port)], stdout=subprocess.PIPE)
    assert client.stdout is not None
    first = b""
    while not first.endswith(b"\n"):
        first += await client.stdout.receive_some(1)
    assert first == b"connected\n"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, hard))  # below what is open: no new descriptor at all
    try:
        nursery.start_soon(proxy.serve, listeners[0])
        await failed.wait()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    output = b""
    while chunk := await client.stdout.receive_some(65536):
        output += chunk
    assert await client.wait() == 0
    assert output.decode().splitlines() == ["HTTP/1.1 403 Forbidden"] * 3
    assert (records[0]["status"], records[0]["reason"]) == (
        "error",
        "hostd could not accept a connection (Too many open files); retrying",
    )
