"""A registry entry's mcpb bundle URL: https only, refused before anything is read, bounded when fetched.

The class (hostd/install/serverjson.py's header): a stranger's ``server.json`` makes hostd read something that is
not a public https resource. The refusals go through a real ``hostd serve``; the canary of a ``file:`` URL
is a FIFO (hostd opening it for reading would block the install, and a non-blocking writer finds a reader
only while one holds it open). The bounds are checked against a real TLS server on 127.0.0.1 whose
self-signed certificate the client trusts through ``SSL_CERT_FILE``.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import RpcError
from hostd.install import serverjson
from hostd.wire.errors import HostError
from tests.conftest import spawn_hostd
from tests.test_bundle import mcpb_manifest, node_bundle
from tests.test_registry_serverjson import entry
from tests.tls import server_context

ONLY_HTTPS = "hostd fetches only https: URLs"
LOOPBACK_REFUSED = (
    "cannot be fetched: 127.0.0.1 is this machine; hostd downloads from a loopback or private address only from "
    "a host the user names with --allow-private-download"
)

#: What a route does with the request's stream: it writes the whole answer (status line and all).
Route = Callable[[trio.abc.Stream], Awaitable[None]]


def mcpb(url: str, sha256: str = "0" * 64) -> dict[str, Any]:
    """An ``mcpb`` package of a registry entry at ``url``."""
    return {"registryType": "mcpb", "identifier": url, "fileSha256": sha256, "transport": {"type": "stdio"}}


class Server:
    """An HTTP/1.1 server on 127.0.0.1 (TLS when given a context): ``routes[path]`` answers a GET of ``path``.

    ``requests`` lists each request's path; ``asked`` is set at the first one. An unknown path gets 404.
    Every answer closes its connection.
    """

    def __init__(self, tls: ssl.SSLContext | None, routes: dict[str, Route]) -> None:
        self.tls = tls
        self.routes = routes
        self.requests: list[str] = []
        self.connections = 0
        self.asked = trio.Event()
        self.port = 0

    async def serve(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        conversation: trio.abc.Stream = stream
        if self.tls is not None:
            conversation = trio.SSLStream(stream, self.tls, server_side=True)
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = await conversation.receive_some(65536)
                if not chunk:
                    return
                head += chunk
            path = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")[1]
            self.requests.append(path)
            self.asked.set()
            await self.routes.get(path, answer(b"", status="404 Not Found"))(conversation)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ssl.SSLError):
            return
        finally:
            await conversation.aclose()


def answer(body: bytes, *, status: str = "200 OK", headers: tuple[str, ...] = (), length: bool = True) -> Route:
    """A route answering ``status`` with ``body`` (``Content-Length`` unless ``length`` is False)."""

    async def route(stream: trio.abc.Stream) -> None:
        lines = [f"HTTP/1.1 {status}", *([f"Content-Length: {len(body)}"] if length else []), *headers]
        lines += ["Connection: close", "", ""]
        await stream.send_all("\r\n".join(lines).encode("latin-1") + body)

    return route


def redirect(location: str) -> Route:
    """A route answering ``302`` to ``location``."""
    return answer(b"", status="302 Found", headers=(f"Location: {location}",))


def trickle(held: trio.Event) -> Route:
    """A route that promises 1000 bytes and sends one every 50 s until ``held`` is set, then closes."""

    async def route(stream: trio.abc.Stream) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n")
        for _ in range(1000):
            await stream.send_all(b"x")
            with trio.move_on_after(50):  # the server's pace, not a synchronisation
                await held.wait()
            if held.is_set():
                return

    return route


@asynccontextmanager
async def serving(routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """A :class:`Server` listening on 127.0.0.1 (``server.port``) for the block."""
    server = Server(tls, routes)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, server.serve, 0, host="127.0.0.1"))
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


@pytest.fixture
def tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Generator[ssl.SSLContext]:
    """A TLS context for 127.0.0.1 that this process and a hostd spawned by the test trust; no proxy."""
    for variable in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delenv(variable.upper(), raising=False)
    context, cert = server_context(tmp_path, "127.0.0.1")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    yield context


def no_reader(fifo: Path) -> bool:
    """True when nothing holds ``fifo`` open for reading (a non-blocking writer's open fails with ENXIO)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return True
        raise
    os.close(fd)
    return False


# -- refused before anything is read ------------------------------------------------------------------------

#: (URL template, the scheme hostd reports): ``{fifo}`` is the canary's path, ``{port}`` a listener's port.
REFUSED = [
    ("file://{fifo}", "file"),
    ("FILE://{fifo}", "FILE"),
    ("file:{fifo}", "file"),
    ("file:///proc/self/fd/0", "file"),  # hostd's own standard input: its control channel
    ("file:///dev/stdin", "file"),
    ("{fifo}", ""),  # a relative URL (a path)
    ("x.mcpb", ""),
    ("//127.0.0.1:{port}/x.mcpb", ""),  # scheme-relative
    ("http://127.0.0.1:{port}/x.mcpb", "http"),
    ("HTTP://127.0.0.1:{port}/x.mcpb", "HTTP"),
    ("ftp://127.0.0.1:{port}/x.mcpb", "ftp"),
    ("data:application/zip;base64,UEsFBgAAAAAAAAAAAAAAAAAAAAAAAA==", "data"),
    ("https://user@127.0.0.1:{port}/x.mcpb", "https"),
    ("https://user:pass@127.0.0.1:{port}/x.mcpb", "https"),
    (" https://127.0.0.1:{port}/x.mcpb", ""),
    ("\thttps://127.0.0.1:{port}/x.mcpb", ""),
    ("https://127.0.0.1:{port}/x.mcpb\x00file://{fifo}", "https"),
    ("https://127.0.0.1:{port}/x\n.mcpb", "https"),
    ("https://127.0.0.1:{port}/x\x7f.mcpb", "https"),
    ("https://127.0.0.1:{port}\\@example.com/x.mcpb", "https"),
    ("https:///x.mcpb", "https"),
]


async def test_a_bundle_url_other_than_https_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    """Fails before (file: URLs were opened: the install waited on the FIFO; /proc/self/fd/0 read hostd's stdin)."""
    fifo = tmp_path / "canary"
    os.mkfifo(fifo)
    with trio.socket.socket() as listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        async with spawn_hostd(tmp_path) as hostd:
            for template, scheme in REFUSED:
                url = template.format(fifo=fifo, port=port)
                with pytest.raises(RpcError) as refused:
                    await hostd.request("plugins/install", {"serverJson": entry([mcpb(url)])}, timeout=20)
                assert refused.value.kind == "PACKAGE_INVALID", url
                assert refused.value.data["scheme"] == scheme, url
                [error] = refused.value.data["errors"]
                assert error["field"] == "packages.0.identifier", url
                assert refused.value.message == f"packages.0.identifier: the bundle URL {error['message']}"
                assert "SHA-256" not in refused.value.message
                assert no_reader(fifo), url
            assert (await hostd.request("plugins/list", {}))["plugins"] == []
        with pytest.raises(BlockingIOError):  # nothing connected to the listener
            listener._sock.accept()  # type: ignore[attr-defined]
    assert not (tmp_path / "state" / "bundles").exists() or list((tmp_path / "state" / "bundles").iterdir()) == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "has the scheme 'file:': hostd fetches only https: URLs"),
        ("File:///etc/passwd", "has the scheme 'File:': hostd fetches only https: URLs"),
        ("/etc/passwd", "is not an absolute URL (no scheme)"),
        ("https://a@example.com/x", "holds a user name or password"),
        ("https://example.com/\x00", "contains the character '\\x00' (only printable ASCII without spaces)"),
        ("https://exämple.com/x", "contains the character 'ä' (only printable ASCII without spaces)"),
        ("https://example.com\\x", "contains a backslash"),
    ],
)
def test_resource_problem_says_why(url: str, reason: str) -> None:
    problem = serverjson.resource_problem(url)
    assert problem is not None and problem[1] == reason
    assert serverjson.resource_problem("https://example.com/x.mcpb") is None
    assert serverjson.resource_problem("HTTPS://example.com/x.mcpb") is None  # a scheme's case does not matter


# -- bounded when fetched -----------------------------------------------------------------------------------


def plan_for(url: str, body: bytes = b"") -> serverjson.Plan:
    return serverjson.plan(entry([mcpb(url, hashlib.sha256(body).hexdigest())]))


async def fetch_error(url: str, root: Path, **bounds: Any) -> HostError:
    with pytest.raises(HostError) as failed:
        await serverjson.download_bundle(plan_for(url), root, allow_private=["127.0.0.1"], **bounds)
    assert failed.value.kind.name == "PACKAGE_INVALID"
    assert list(root.iterdir()) == []  # no partial file left
    return failed.value


async def test_a_download_is_bounded_in_size(tmp_path: Path, tls: ssl.SSLContext) -> None:
    body = b"z" * 5000
    routes = {"/declared.mcpb": answer(body), "/undeclared.mcpb": answer(body, length=False)}
    async with serving(routes, tls) as server:
        base = f"https://127.0.0.1:{server.port}"
        declared = await fetch_error(f"{base}/declared.mcpb", tmp_path / "d", max_bytes=4096)
        assert declared.message == f"{base}/declared.mcpb: larger than 4096 bytes (Content-Length 5000)"
        undeclared = await fetch_error(f"{base}/undeclared.mcpb", tmp_path / "d", max_bytes=4096)
        assert undeclared.message == f"{base}/undeclared.mcpb: larger than 4096 bytes"
        plan = plan_for(f"{base}/declared.mcpb", body)
        path = await serverjson.download_bundle(plan, tmp_path / "d", allow_private=["127.0.0.1"], max_bytes=5000)
        assert path.read_bytes() == body
    assert server.requests == ["/declared.mcpb", "/undeclared.mcpb", "/declared.mcpb"]


async def test_a_download_has_a_total_deadline(tmp_path: Path, tls: ssl.SSLContext) -> None:
    """A server that sends one byte, then one per 50 s, fails at the total deadline (1.5 s here), with the
    bytes received so far; no partial file is left."""
    held = trio.Event()
    async with serving({"/slow.mcpb": trickle(held)}, tls) as server:
        url = f"https://127.0.0.1:{server.port}/slow.mcpb"
        failed = await fetch_error(url, tmp_path / "d", seconds=1.5)
        held.set()
    assert failed.message == f"{url}: not downloaded within 1.5 s (1 bytes received)"
    assert failed.data["errors"] == [{"field": "packages.0.identifier", "message": failed.message[len(url) + 2 :]}]


async def test_redirects_are_followed_only_to_https_and_only_so_far(tmp_path: Path, tls: ssl.SSLContext) -> None:
    body = b"bundle bytes"
    async with serving({}, None) as plain, serving({}, tls) as server:
        base = f"https://127.0.0.1:{server.port}"
        server.routes.update(
            {
                "/to-http": redirect(f"http://127.0.0.1:{plain.port}/x.mcpb"),
                "/to-file": redirect("file:///etc/passwd"),
                "/to-data": redirect("data:,x"),
                "/hop0": redirect("/hop1"),
                "/hop1": redirect(f"{base}/x.mcpb"),
                "/x.mcpb": answer(body),
                **{f"/loop{i}": redirect(f"/loop{i + 1}") for i in range(10)},
            }
        )
        to_http = await fetch_error(f"{base}/to-http", tmp_path / "d")
        assert to_http.message == (f"{base}/to-http: redirected to a URL that has the scheme 'http:': {ONLY_HTTPS}")
        to_file = await fetch_error(f"{base}/to-file", tmp_path / "d")
        assert to_file.message.endswith(
            "redirected to a URL that has the scheme 'file:': hostd fetches only https: URLs"
        )
        assert "SHA-256" not in to_file.message
        await fetch_error(f"{base}/to-data", tmp_path / "d")
        looped = await fetch_error(f"{base}/loop0", tmp_path / "d", max_redirects=3)
        assert looped.message == f"{base}/loop0: more than 3 redirects"
        path = await serverjson.download_bundle(
            plan_for(f"{base}/hop0", body), tmp_path / "d", allow_private=["127.0.0.1"]
        )
        assert path.read_bytes() == body
    assert plain.connections == 0
    assert server.requests == [
        "/to-http", "/to-file", "/to-data", "/loop0", "/loop1", "/loop2", "/loop3", "/hop0", "/hop1", "/x.mcpb"
    ]  # fmt: skip


async def test_a_private_address_is_refused_unless_the_user_allows_it(tmp_path: Path, tls: ssl.SSLContext) -> None:
    async with serving({"/x.mcpb": answer(b"x")}, tls) as server:
        url = f"https://127.0.0.1:{server.port}/x.mcpb"
        with pytest.raises(HostError) as refused:
            await serverjson.download_bundle(plan_for(url, b"x"), tmp_path / "d")
        assert refused.value.message == f"{url}: {LOOPBACK_REFUSED}"
        for spelling in ("localhost", "127.1", "[::ffff:127.0.0.1]", "2130706433"):  # names and odd literals
            other = f"https://{spelling}:{server.port}/x.mcpb"
            with pytest.raises(HostError) as refused:
                await serverjson.download_bundle(plan_for(other, b"x"), tmp_path / "d")
            assert refused.value.message.startswith(f"{other}: cannot be fetched: "), spelling
        status = await fetch_error(f"https://127.0.0.1:{server.port}/missing.mcpb", tmp_path / "d")
        assert status.message.endswith("HTTP status 404 from " + f"https://127.0.0.1:{server.port}/missing.mcpb")
        gz = f"https://127.0.0.1:{server.port}/gz.mcpb"
        server.routes["/gz.mcpb"] = answer(b"x", headers=("Content-Encoding: gzip",))
        assert (
            await fetch_error(gz, tmp_path / "d")
        ).message == f"{gz}: Content-Encoding 'gzip' (hostd asked for identity)"
    assert server.requests == ["/missing.mcpb", "/gz.mcpb"]  # the refused one never connected


# -- through hostd serve ------------------------------------------------------------------------------------


async def test_mcpb_from_a_loopback_mirror_the_user_allows(tmp_path: Path, tls: ssl.SSLContext) -> None:
    """hostd serve downloads over https (trusting SSL_CERT_FILE), checks fileSha256, installs, runs it; the
    control reader answers while a download is stalled; without --allow-private-download nothing connects."""
    bundle = node_bundle(tmp_path)
    body = bundle.read_bytes()
    digest = hashlib.sha256(body).hexdigest()
    held = trio.Event()
    async with serving({"/node-echo.mcpb": answer(body), "/slow.mcpb": trickle(held)}, tls) as server:
        url = f"https://127.0.0.1:{server.port}/node-echo.mcpb"
        (tmp_path / "refusing").mkdir()
        async with spawn_hostd(tmp_path / "refusing") as hostd:
            with pytest.raises(RpcError) as refused:
                await hostd.request("plugins/install", {"serverJson": entry([mcpb(url, digest)])})
            assert refused.value.kind == "PACKAGE_INVALID"
            assert refused.value.message == f"{url}: {LOOPBACK_REFUSED}"
        assert server.connections == 0
        async with spawn_hostd(tmp_path, "--allow-private-download", "127.0.0.1") as hostd:
            with pytest.raises(RpcError) as wrong:
                await hostd.request("plugins/install", {"serverJson": entry([mcpb(url)], name="io.example/x")})
            assert wrong.value.message == f"{url}: SHA-256 {digest} does not match fileSha256 {'0' * 64}"
            info = await hostd.request("plugins/install", {"serverJson": entry([mcpb(url, digest)], name="io.ex/x")})
            assert info["id"] == mcpb_manifest()["name"]
            assert info["origin"]["sha256"] == digest
            await hostd.request("plugins/approve", {"id": "node-echo", "digest": info["launch"]["digest"]})
            await hostd.request("plugins/enable", {"id": "node-echo"})
            echoed = await hostd.request("tools/call", {"name": "node-echo.echo", "arguments": {"text": "over https"}})
            assert echoed["content"] == [{"type": "text", "text": "over https"}]
            await hostd.request("plugins/disable", {"id": "node-echo"})

            slow = f"https://127.0.0.1:{server.port}/slow.mcpb"
            outcome: list[RpcError] = []

            async def install_slow() -> None:
                with pytest.raises(RpcError) as failed:
                    await hostd.request("plugins/install", {"serverJson": entry([mcpb(slow)], name="io.example/s")})
                outcome.append(failed.value)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(install_slow)
                while "/slow.mcpb" not in server.requests:
                    server.asked = trio.Event()
                    await server.asked.wait()
                listed = await hostd.request("plugins/list", {}, timeout=10)  # answered during the download
                assert [p["id"] for p in listed["plugins"]] == ["node-echo"]
                held.set()  # the server closes the connection after one byte of 1000
            assert outcome[0].kind == "PACKAGE_INVALID"
            assert outcome[0].message.startswith(f"{slow}: cannot be fetched: ")
    assert [p.name for p in (tmp_path / "state" / "bundles").iterdir()] == ["node-echo"]  # no download left
    assert server.requests.count("/node-echo.mcpb") == 2
