"""What the plugins' proxy costs (issue 26): an HTTPS request and a download, direct and through the proxy.

Usage: ``python -m bench.proxy_cost [rounds] [MiB]`` (defaults 200 and 64). Everything is on loopback in one
process: an HTTPS server (a self-signed certificate made here, TLS 1.3) and :class:`hostd.net.proxy.PluginProxy`
with an allowlist naming it. Interleaved rounds, each on a fresh TCP connection (what a plugin's first request to
a host pays):

- ``https-direct`` / ``https-proxied``: connect (through ``CONNECT`` for the proxied one), TLS handshake, one
  ``GET`` of a 100-byte answer; microseconds per request;
- ``download-direct`` / ``download-proxied`` / ``download-proxied-unbounded``: ``MiB`` over a plain TCP
  connection (through a ``CONNECT`` tunnel for the proxied ones); MiB/s. ``proxied`` runs under the default
  :class:`~hostd.net.proxy.ProxyLimits` (8 MiB/s per plugin, so it measures the bound), ``unbounded`` with the
  bound lifted (what the relay itself costs).

Prints one JSON object: per case the summary of ``bench.common.summary`` (microseconds, or MiB/s). In
``python -m bench`` as ``proxy_cost`` (:func:`run`, :func:`table`): 200 rounds and 64 MiB, ``--quick`` 20 and 16.
"""

from __future__ import annotations

import json
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from bench.common import summary
from hostd.net.allowlist import Allowlist
from hostd.net.proxy import PluginProxy, ProxyLimits
from tests.tls import server_context

NAME = "bench.test"
BODY = b"x" * 100


def _certificate(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for a self-signed certificate of :data:`NAME`
    (tests/tls.py's maker, the one the tests' TLS upstreams use)."""
    server, cert_path = server_context(folder, NAME)
    return server, ssl.create_default_context(cafile=str(cert_path))


async def _read_head(stream: trio.abc.Stream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            raise OSError("closed before the head")
        data += chunk
    return data


async def _https_server(context: ssl.SSLContext, stream: trio.SocketStream) -> None:
    tls = trio.SSLStream(stream, context, server_side=True)
    try:
        await _read_head(tls)
        await tls.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(BODY), BODY))
        await tls.aclose()
    except (trio.BrokenResourceError, ssl.SSLError, OSError):
        await stream.aclose()


def _bulk_server(mib: int) -> Callable[[trio.SocketStream], Awaitable[None]]:
    chunk = b"d" * (1024 * 1024)

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(16)  # the client's "go"
            for _ in range(mib):
                await stream.send_all(chunk)

    return serve


async def _tunnel(proxy_port: int, port: int) -> trio.SocketStream:
    stream = await trio.open_tcp_stream("127.0.0.1", proxy_port)
    await stream.send_all(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (NAME.encode(), port, NAME.encode(), port))
    head = await _read_head(stream)
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError(f"the proxy answered {head[:80]!r}")
    return stream


async def _https_request(client: ssl.SSLContext, stream: trio.SocketStream) -> None:
    tls = trio.SSLStream(stream, client, server_hostname=NAME)
    await tls.send_all(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % NAME.encode())
    answer = await _read_head(tls)
    while len(answer.partition(b"\r\n\r\n")[2]) < len(BODY):
        answer += await tls.receive_some(65536)
    await stream.aclose()


async def _download(stream: trio.SocketStream, mib: int) -> float:
    """MiB/s of receiving ``mib`` MiB on ``stream``."""
    total, want = 0, mib * 1024 * 1024
    start = time.perf_counter()
    await stream.send_all(b"go")
    while total < want:
        chunk = await stream.receive_some(1024 * 1024)
        if not chunk:
            break
        total += len(chunk)
    seconds = time.perf_counter() - start
    await stream.aclose()
    return total / (1024 * 1024) / seconds


async def main(rounds: int, mib: int) -> dict[str, Any]:
    """Run every case (module text); the summaries by case name."""
    with tempfile.TemporaryDirectory(prefix="hostd-bench-proxy-") as folder:
        server_context, client_context = _certificate(Path(folder))
        async with trio.open_nursery() as nursery:
            https = await trio.open_tcp_listeners(0, host="127.0.0.1")
            bulk = await trio.open_tcp_listeners(0, host="127.0.0.1")
            await nursery.start(trio.serve_listeners, lambda s: _https_server(server_context, s), https)
            await nursery.start(trio.serve_listeners, _bulk_server(mib), bulk)
            https_port, bulk_port = https[0].socket.getsockname()[1], bulk[0].socket.getsockname()[1]
            allow = Allowlist.parse([f"{NAME}:{https_port}", f"{NAME}:{bulk_port}"], private=[NAME])

            async def resolver(host: str, port: int) -> list[str]:
                return ["127.0.0.1"]

            ports = {}
            for name, limits in (("bounded", ProxyLimits()), ("unbounded", ProxyLimits(bytes_per_second=1 << 40))):
                listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
                proxy = PluginProxy("bench", allow, limits=limits, resolver=resolver)
                await nursery.start(proxy.serve, listeners[0])
                ports[name] = listeners[0].socket.getsockname()[1]
            samples: dict[str, list[float]] = {"https-direct": [], "https-proxied": []}
            for _ in range(rounds):
                start = time.perf_counter()
                await _https_request(client_context, await trio.open_tcp_stream("127.0.0.1", https_port))
                samples["https-direct"].append((time.perf_counter() - start) * 1e6)
                start = time.perf_counter()
                await _https_request(client_context, await _tunnel(ports["unbounded"], https_port))
                samples["https-proxied"].append((time.perf_counter() - start) * 1e6)
            downloads: dict[str, list[float]] = {
                "download-direct": [],
                "download-proxied": [],
                "download-proxied-unbounded": [],
            }
            for _ in range(3):
                downloads["download-direct"].append(
                    await _download(await trio.open_tcp_stream("127.0.0.1", bulk_port), mib)
                )
                downloads["download-proxied-unbounded"].append(
                    await _download(await _tunnel(ports["unbounded"], bulk_port), mib)
                )
            downloads["download-proxied"].append(
                await _download(await _tunnel(ports["bounded"], bulk_port), min(mib, 32))
            )
            nursery.cancel_scope.cancel()
    result = {name: summary(values) for name, values in {**samples, **downloads}.items()}
    result["params"] = {"rounds": rounds, "mib": mib}
    return result


#: ``(rounds, MiB)`` of ``python -m bench`` (quick: about 2 s; 16 MiB so that the bounded download outlasts the
#: bucket's 8 MiB burst and measures the bound).
SIZES = {"quick": (20, 16), "full": (200, 64)}
_ROWS = (
    ("https-direct", "HTTPS request, direct (µs)"),
    ("https-proxied", "HTTPS request, through the proxy (µs)"),
    ("download-direct", "download, direct (MiB/s)"),
    ("download-proxied-unbounded", "download, through the proxy, bound lifted (MiB/s)"),
    ("download-proxied", "download through the proxy, default bound 8 MiB/s (MiB/s)"),
)


async def run(quick: bool, scratch_dir: Path) -> dict[str, Any]:
    """``python -m bench``'s entry: :func:`main` at :data:`SIZES` (``scratch_dir`` unused: the certificate's
    folder is its own temporary one)."""
    return await main(*SIZES["quick" if quick else "full"])


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows: each case's p50, p90 and min, side by side (direct, then through the proxy)."""
    lines = ["| case | p50 | p90 | min | n |", "|---|---:|---:|---:|---:|"]
    for key, label in _ROWS:
        row = result[key]
        digits = 0 if key.startswith("https") else 1
        lines.append(
            f"| {label} | {row['p50']:,.{digits}f} | {row['p90']:,.{digits}f} | {row['min']:,.{digits}f} | {row['n']} |"
        )
    https = result["https-proxied"]["p50"] - result["https-direct"]["p50"]
    lines.append(f"\n(added by the proxy to a first HTTPS request, p50: {https:,.0f} µs; {result['params']})")
    return lines


if __name__ == "__main__":
    arguments = sys.argv[1:]
    print(
        json.dumps(
            trio.run(main, int(arguments[0]) if arguments else 200, int(arguments[1]) if len(arguments) > 1 else 64),
            indent=2,
        )
    )
