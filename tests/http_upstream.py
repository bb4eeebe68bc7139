"""A one-request HTTP server for the network-by-domain tests: the destination a plugin reaches through hostd's proxy.

One place for it: the enforcement, the ask and the unprivileged driver's tests all serve it on loopback.
"""

from __future__ import annotations

import trio


async def upstream(stream: trio.SocketStream) -> None:
    """Answer one request on ``stream`` with ``200 hello <path>`` (the request line's path), then close."""
    async with stream:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            data += chunk
        body = b"hello " + data.split(b" ")[1]
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
        )
