"""The address hostd checks is the address it connects to (hostd/remote/connect.py, issue 15's security item).

hostd's own HTTP client (hostd.mcp.transport.http.http_client) runs in the test process against real TLS and
HTTP servers on 127.0.0.1. Names resolve through :class:`Dns`, which stands in for ``socket.getaddrinfo``
(hostd's lookup and trio's dialling both call it): it answers the names a test gives, differently per
lookup when a test rebinds one, resolves numeric hosts as the system does, and lets only 127.0.0.1 be
dialled (any other address is recorded and fails before a socket exists), so nothing leaves the machine.
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import re
import socket
import ssl
import threading
from collections.abc import AsyncIterator, Callable, Generator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp.client.sse import sse_client
from mcp.shared._httpx_utils import request_within_origin

from hostd.mcp.transport.http import HttpWatch, http_client
from hostd.remote.endpoint import RemoteLaunch, RemoteTarget, address_problem, url_problem
from tests.tls import self_signed

#: A public address a rebinding name first answers (never dialled: :class:`Dns` lets only 127.0.0.1 through).
PUBLIC = "1.1.1.1"
NAME = "mcp.rebind.test"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


class Dns:
    """``socket.getaddrinfo`` for a test: ``answers[name]`` holds one answer per lookup (the last repeats).

    ``lookups`` lists every name looked up; ``dialled`` every numeric address off this machine looked
    up (dialling an address starts with that lookup), each refused with ``ENETUNREACH``; a lookup of a
    name in ``stalled`` waits for ``release`` (20 s at most).
    """

    def __init__(self, real: Callable[..., Any], answers: dict[str, list[list[str]]]) -> None:
        self._real = real
        self.answers = answers
        self.lookups: list[str] = []
        self.dialled: list[str] = []
        #: Names whose lookup does not return until ``release`` is set (a resolver that does not answer), 20 s at most.
        self.stalled: set[str] = set()
        self.release = threading.Event()

    def __call__(self, host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
        name = host.decode("ascii") if isinstance(host, bytes) else str(host)
        try:
            infos = self._real(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)
        except socket.gaierror:
            if flags & socket.AI_NUMERICHOST:
                raise
        else:
            if not all(_on_this_machine(info[4][0]) for info in infos):
                self.dialled.append(name)
                raise OSError(errno.ENETUNREACH, f"the test network reaches 127.0.0.1 only, not {name}")
            return infos
        self.lookups.append(name)
        if name in self.stalled:
            self.release.wait(20)  # the test sets it; the bound only ends a lookup a client failed to abandon
        if name not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: no such name in the test's DNS")
        queue = self.answers[name]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        number = int(port)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, number, 0, 0))
            if ":" in address
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, number))
            for address in answer
        ]


def _on_this_machine(address: str) -> bool:
    """Loopback or unspecified (a connection to ``0.0.0.0`` or ``::`` reaches this machine), IPv4-mapped too."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.is_unspecified


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    """The test's DNS in place of ``socket.getaddrinfo``, and no proxy from the environment."""
    for variable in PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delenv(variable.upper(), raising=False)
    resolver = Dns(socket.getaddrinfo, {})
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return resolver


class Server:
    """An HTTP/1.1 server on 127.0.0.1 (TLS when given a certificate) that records what reaches it.

    ``connections`` counts accepted TCP connections; ``heads`` holds each request's first line;
    ``server_names`` the SNI of each TLS handshake. ``answer(first line)`` gives the status line and
    extra header lines of the response (default ``200 OK``); a ``Connection: close`` answer ends the
    connection after it.
    """

    def __init__(self, tls: ssl.SSLContext | None, answer: Callable[[str], tuple[str, list[str]]]) -> None:
        self.tls = tls
        self.answer = answer
        self.connections = 0
        self.heads: list[str] = []
        self.server_names: list[str | None] = []
        if tls is not None:
            tls.sni_callback = lambda _sock, server_name, _ctx: self.server_names.append(server_name)

    async def serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        conversation: trio.abc.Stream = stream
        if self.tls is not None:
            conversation = trio.SSLStream(stream, self.tls, server_side=True)
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = await conversation.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                first = head.split(b"\r\n", 1)[0].decode("latin-1")
                self.heads.append(first)
                status, extra = self.answer(first)
                lines = [f"HTTP/1.1 {status}", "Content-Length: 2", *extra, "", "ok"]
                await conversation.send_all("\r\n".join(lines).encode("latin-1"))
                if "Connection: close" in extra:
                    return
        except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError):
            return
        finally:
            await conversation.aclose()


def ok(_first: str) -> tuple[str, list[str]]:
    return "200 OK", []


@asynccontextmanager
async def server(
    tls: ssl.SSLContext | None = None, answer: Callable[[str], tuple[str, list[str]]] = ok
) -> AsyncIterator[tuple[Server, int]]:
    """A :class:`Server` listening on 127.0.0.1: ``(the server, its port)``."""
    recorder = Server(tls, answer)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, recorder.serve, 0, host="127.0.0.1"))
        yield recorder, listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


def tls_for(folder: Path, name: str) -> ssl.SSLContext:
    """A server TLS context presenting a certificate for ``name``."""
    cert, key = self_signed(folder, name)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def client(
    *allow_private: str, connect_timeout: float = 10.0, url: str = f"https://{NAME}/mcp"
) -> tuple[httpx2.AsyncClient, HttpWatch]:
    """hostd's HTTP client for a remote launch of endpoint ``url`` allowing ``allow_private``, and its watch."""
    endpoint = RemoteTarget("streamable-http", url, (), (), tuple(allow_private), "auto")
    launch = RemoteLaunch(
        command=endpoint.transport,
        executable=endpoint.url,
        args=(),
        cwd="/",
        env={},
        isolation=(),
        manifest_env={},
        endpoint=endpoint,
    )
    watch = HttpWatch()
    return http_client(launch, {}, connect_timeout=connect_timeout, max_response_bytes=1 << 20, watch=watch), watch


@pytest.fixture
def trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Generator[ssl.SSLContext]:
    """A server TLS context for :data:`NAME` whose certificate the client trusts (``SSL_CERT_FILE``)."""
    context = tls_for(tmp_path, NAME)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / f"{NAME}.pem"))
    yield context


# -- rebinding: one lookup per connection, and the connection goes to what it answered ---------------------------


class MetadataFirst(httpx2.Auth):
    """An auth flow that fetches metadata from ``metadata`` before the request (as OAuth discovery does)."""

    def __init__(self, metadata: str) -> None:
        self.metadata = metadata

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncIterator[httpx2.Request]:  # type: ignore[override]
        yield httpx2.Request("GET", self.metadata)
        yield request


async def request_through(how: str, http: httpx2.AsyncClient, url: str) -> None:
    """One request to ``url`` made the way ``how`` names: the client, the SDK's SSE transport, an auth flow.

    ``http`` is not entered yet (the SSE transport enters the client its factory returns)."""
    if how == "sse":
        factory: Any = lambda **_settings: http  # noqa: E731 - the SDK's McpHttpClientFactory, hostd's client
        async with sse_client(url, httpx_client_factory=factory):
            pass
        return
    async with http:
        if how == "request":
            await http.get(url)
        else:
            await http.get("https://127.0.0.1:1/never", auth=MetadataFirst(url))


@pytest.mark.parametrize("how", ["request", "sse", "oauth-metadata"])
async def test_a_name_that_rebinds_to_loopback_is_dialled_only_at_the_checked_address(
    dns: Dns, trusted: ssl.SSLContext, how: str
) -> None:
    # The check sees a public address; a second lookup would lead to the server on 127.0.0.1.
    dns.answers[NAME] = [[PUBLIC], ["127.0.0.1"]]
    http, _watch = client()
    async with server(trusted) as (listening, port):
        with pytest.raises(BaseException) as failed:  # the SSE transport wraps it in a group
            await request_through(how, http, f"https://{NAME}:{port}/mcp")
        assert listening.connections == 0, "the connection reached 127.0.0.1: the name was resolved again"
    assert dns.lookups == [NAME]
    assert dns.dialled == [PUBLIC]
    assert "the test network reaches 127.0.0.1 only" in str(_leaf(failed.value))


async def test_every_new_connection_is_checked_the_same_way_a_redirect_included(dns: Dns) -> None:
    # A loopback name may lead to loopback only; the redirect's new connection looks it up again.
    dns.answers["localhost"] = [["127.0.0.1"], ["10.0.0.7"]]

    def redirect(first: str) -> tuple[str, list[str]]:
        return ("307 Temporary Redirect", ["Location: /next", "Connection: close"]) if "/mcp" in first else ok(first)

    async with server(answer=redirect) as (listening, port):
        http, watch = client(url=f"http://localhost:{port}/mcp")  # the approved endpoint: loopback is its own
        async with http:
            with pytest.raises(httpx2.ConnectError) as failed:
                await request_within_origin(http, "GET", f"http://localhost:{port}/mcp")
    assert listening.heads == ["GET /mcp HTTP/1.1"]
    assert dns.lookups == ["localhost", "localhost"]
    assert dns.dialled == []
    assert str(failed.value).startswith("localhost resolves to the private address 10.0.0.7;")
    assert watch.refused == str(failed.value)


async def test_the_connect_timeout_bounds_the_lookup_too(dns: Dns) -> None:
    dns.stalled.add(NAME)  # a resolver that never answers
    http, _watch = client(connect_timeout=0.5)
    try:
        with trio.fail_after(60):  # a guard against a hang, not a timing: the client's own timeout is 0.5 s
            async with http:
                with pytest.raises(httpx2.ConnectTimeout) as failed:
                    await http.get(f"https://{NAME}:1/mcp")
    finally:
        dns.release.set()
    assert str(failed.value) == f"connecting to {NAME}:1 took over 0.5 s"
    assert (dns.lookups, dns.dialled) == ([NAME], [])


@pytest.mark.parametrize(("served", "verified"), [(NAME, True), ("other.test", False)])
async def test_tls_names_and_verifies_the_url_host_while_dialling_the_checked_address(
    dns: Dns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, served: str, verified: bool
) -> None:
    context = tls_for(tmp_path, served)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / f"{served}.pem"))
    dns.answers[NAME] = [["127.0.0.1"], ["10.0.0.7"]]  # allowed private: any answer passes, the first is dialled
    http, _watch = client(NAME)
    async with server(context) as (listening, port), http:
        if verified:
            response = await http.get(f"https://{NAME}:{port}/mcp")
            assert (response.status_code, response.text) == (200, "ok")
            assert listening.heads == ["GET /mcp HTTP/1.1"]
        else:
            with pytest.raises(httpx2.ConnectError) as failed:
                await http.get(f"https://{NAME}:{port}/mcp")
            assert f"Hostname mismatch, certificate is not valid for '{NAME}'" in verification_failure(failed.value)
            assert listening.heads == []
    assert listening.server_names == [NAME]
    assert (dns.lookups, dns.dialled) == ([NAME], [])


# -- spellings of an address: the rule judges what getaddrinfo made of them ---------------------------------------


@pytest.mark.parametrize(
    ("host", "kind", "address"),
    [
        ("2130706433", "loopback", "127.0.0.1"),  # decimal
        ("017700000001", "loopback", "127.0.0.1"),  # octal
        ("0x7f000001", "loopback", "127.0.0.1"),  # hex
        ("0x7f.1", "loopback", "127.0.0.1"),  # hex, short form
        ("127.1", "loopback", "127.0.0.1"),  # short form
        ("[::ffff:127.0.0.1]", "loopback", "::ffff:127.0.0.1"),  # IPv4-mapped
        ("[::ffff:7f00:1]", "loopback", "::ffff:127.0.0.1"),  # IPv4-mapped, hex
        ("0.0.0.0", "unspecified", "0.0.0.0"),  # connecting to it reaches this machine
        ("0", "unspecified", "0.0.0.0"),
        ("[::]", "unspecified", "::"),
    ],
)
async def test_literal_spellings_of_this_machine_are_refused_without_a_connection(
    dns: Dns, trusted: ssl.SSLContext, host: str, kind: str, address: str
) -> None:
    http, watch = client()
    async with server(trusted) as (listening, port), http:
        with pytest.raises(httpx2.ConnectError) as failed:
            await http.get(f"https://{host}:{port}/mcp")
        assert listening.connections == 0
    assert f"resolves to the {kind} address {address};" in str(failed.value)
    assert watch.refused == str(failed.value)
    # Plain http is for a loopback host written as such (url_problem): none of these spellings is one.
    assert url_problem(f"http://{host}:{port}/mcp") is not None


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 (well-known prefix) to 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 to the cloud metadata address
        ("64:ff9b::a00:5", "private"),  # NAT64 to 10.0.0.5
        ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 of 169.254.169.254
        ("::ffff:169.254.169.254", "link-local"),  # IPv4-mapped
        ("fec0::1", "private"),  # site-local (deprecated, still routed where configured)
    ],
)
def test_addresses_that_lead_to_an_ipv4_address_are_judged_by_it(address: str, kind: str) -> None:
    problem = address_problem(NAME, [address], [])
    assert problem is not None and problem.startswith(f"{NAME} resolves to the {kind} address {address};")


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"])
def test_addresses_that_lead_to_a_public_ipv4_address_pass(address: str) -> None:
    # An IPv6-only network with DNS64 answers 64:ff9b::a.b.c.d for every IPv4-only server.
    assert address_problem(NAME, [address], []) is None


async def test_a_trailing_dot_is_the_same_host_for_the_rule(dns: Dns, trusted: ssl.SSLContext) -> None:
    dns.answers[f"{NAME}."] = [["127.0.0.1"]]
    async with server(trusted) as (listening, port):
        refused, _watch = client()
        async with refused:
            with pytest.raises(httpx2.ConnectError) as failed:
                await refused.get(f"https://{NAME}.:{port}/mcp")
            assert str(failed.value).startswith(f"{NAME}. resolves to the loopback address 127.0.0.1;")
        assert listening.connections == 0
        allowed, _watch = client(NAME)  # the manifest names it without the dot
        async with allowed:
            with pytest.raises(httpx2.ConnectError) as failed:  # reached, and verified for the name with the dot
                await allowed.get(f"https://{NAME}.:{port}/mcp")
            assert f"certificate is not valid for '{NAME}.'" in verification_failure(failed.value)
        assert listening.connections == 1


# -- proxies from the environment: the proxy is dialled as configured, the target is checked first --------------


async def test_through_a_proxy_the_target_is_checked_and_the_proxy_is_not(
    dns: Dns, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse_tunnels(_first: str) -> tuple[str, list[str]]:
        return "403 Forbidden", ["Connection: close"]

    dns.answers["proxy.corp.test"] = [["127.0.0.1"]]  # as a target this would be refused (loopback)
    dns.answers["mcp.example.test"] = [[PUBLIC]]
    dns.answers["intranet.example.test"] = [["10.0.0.5"]]
    async with server(answer=refuse_tunnels) as (proxy, port):
        monkeypatch.setenv("HTTPS_PROXY", f"http://proxy.corp.test:{port}")
        monkeypatch.setenv("NO_PROXY", "direct.example.test")
        dns.answers["direct.example.test"] = [[PUBLIC]]
        http, watch = client()
        async with http:
            with pytest.raises(httpx2.ProxyError):
                await http.get("https://mcp.example.test/mcp")
            with pytest.raises(httpx2.ProxyError):  # no answer here: the proxy resolves it
                await http.get("https://unknown.example.test/mcp")
            with pytest.raises(httpx2.ConnectError) as failed:
                await http.get("https://intranet.example.test/mcp")
            assert str(failed.value).startswith("intranet.example.test resolves to the private address 10.0.0.5;")
            assert watch.refused == str(failed.value)
            with pytest.raises(httpx2.ConnectError, match=re.escape("the test network reaches 127.0.0.1 only")):
                await http.get("https://direct.example.test/mcp")  # NO_PROXY: dialled directly, at the checked address
    assert proxy.heads == ["CONNECT mcp.example.test:443 HTTP/1.1", "CONNECT unknown.example.test:443 HTTP/1.1"]
    assert dns.dialled == [PUBLIC]


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def verification_failure(exc: BaseException) -> str:
    """The certificate verification message in ``exc``'s chain of causes ("" when there is none)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return str(seen.verify_message)
        seen = seen.__cause__ or seen.__context__
    return ""


# -- the approved endpoint's policy, for every request of the link (issue 29) ------------------------------


@pytest.mark.parametrize(
    ("target", "allow", "why"),
    [
        ("http://127.0.0.1:{other}", (), "is not the approved endpoint 127.0.0.1:"),  # another local service
        ("http://localhost:{other}", (), "is not the approved endpoint 127.0.0.1:"),  # the same, named
        ("https://[::ffff:127.0.0.1]:{other}", (), "resolves to the loopback address"),  # spelled as IPv6
        ("http://127.0.0.1:{port}", (), None),  # the approved endpoint itself
        ("http://127.0.0.1:{other}", ("127.0.0.1",), None),  # a host the manifest lists in allow_private
    ],
)
async def test_loopback_is_reached_only_at_the_approved_endpoint(
    dns: Dns, target: str, allow: tuple[str, ...], why: str | None
) -> None:
    # The class: a URL the server names (OAuth metadata, a redirect) getting the endpoint's loopback
    # exemption. Only the endpoint's own host and port, or a host in allow_private, is reached.
    async with server() as (endpoint, port), server() as (other, other_port):
        http, watch = client(*allow, url=f"http://127.0.0.1:{port}/mcp")
        url = target.format(port=port, other=other_port) + "/x"
        async with http:
            if why is None:
                assert (await http.get(url)).text == "ok"
            else:
                with pytest.raises(httpx2.ConnectError) as failed:
                    await http.get(url)
                assert why in str(failed.value)
                assert watch.refused == str(failed.value)
    assert len(endpoint.heads) + len(other.heads) == (1 if why is None else 0)


async def test_a_compressed_body_is_refused_before_it_is_read(dns: Dns) -> None:
    # The byte bound counts what arrives: a gzip body would be inflated above it, so hostd asks for
    # identity and refuses any other Content-Encoding.
    def gzip(first: str) -> tuple[str, list[str]]:
        return "200 OK", ["Content-Encoding: gzip"]

    async with server(answer=gzip) as (listening, port):
        http, _watch = client(url=f"http://127.0.0.1:{port}/mcp")
        async with http:
            with pytest.raises(httpx2.DecodingError) as failed:
                await http.get(f"http://127.0.0.1:{port}/mcp")
    assert "Content-Encoding 'gzip' although hostd asked for identity" in str(failed.value)
    assert listening.heads == ["GET /mcp HTTP/1.1"]
