"""The plugins' HTTP proxy (issue 26): a plugin with an allowlist reaches the network only through it.

Theory of operation. One :class:`PluginProxy` per running plugin serves the connections of one listener (in
production the loopback socket inside the plugin's network namespace, handed to hostd by its shim; in tests any
loopback listener). Each connection carries one request head, read within :attr:`ProxyLimits.head_seconds` and
at most :attr:`ProxyLimits.max_head_bytes`:

- ``CONNECT host:port HTTP/1.1`` (HTTPS and any TCP protocol): a tunnel, answered ``200`` once the upstream
  connection is open;
- ``GET http://host[:port]/path HTTP/1.1`` (plain HTTP, absolute form, RFC 9112 section 3.2.2): the request is
  passed on in origin form with ``Connection: close``, its ``Proxy-*`` headers dropped.

Each destination goes through the same decision (:meth:`PluginProxy.decide`): the host must be one spelling the
allowlist grammar takes and an entry must allow it on that port (:meth:`hostd.net.allowlist.Allowlist.match`);
the proxy resolves names itself and connects only to the addresses it checked (so a second, rebound answer
never reaches a socket): a name resolving to a loopback, private or link-local address is refused unless the
allowlist names it in ``private`` (:func:`hostd.net.allowlist.addresses_problem`). An IP literal passes when an
entry names that address, or when an exact allowlisted name allowed on that port resolves to it (a client that
resolved the name itself); any other literal is refused.

A refusal is an HTTP status to the plugin (``403`` not allowed, ``400`` malformed, ``429`` too many connections,
``431`` head too large, ``502`` upstream unreachable, ``504`` upstream too slow), with the reason in the body and
in an ``X-Hostd-Refused`` header, and one call of ``on_refused`` (hostd logs it and tells the parent).

Bounded (:class:`ProxyLimits`, defaults documented there): concurrent connections per plugin, bytes per second
per plugin (both directions together, a token bucket on trio's clock), the head's size and time, the connect
time. Everything is trio: a slow or hostile plugin holds only its own tasks, never hostd's control loop; name
resolution runs in worker threads, at most :data:`MAX_LOOKUPS` per plugin, on a limiter of its own.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import socket
import struct
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import trio

from hostd.net.allowlist import (
    Allowlist,
    EntryError,
    addresses_problem,
    canonical_host,
    host_port,
    parse_entry,
    split_host_port,
)
from hostd.net.transparent import DNS_QUERIES_PER_SECOND, accept, serve_transparent_mode

__all__ = [
    "CONSENT",
    "MAX_LOOKUPS",
    "MAX_REFUSING",
    "Decision",
    "PluginProxy",
    "ProxyLimits",
    "Refused",
    "Resolver",
    "pinned_resolver",
    "run_proxy",
    "system_resolver",
]

#: ``resolve(host, port)`` -> the addresses (strings) the host has; raises ``OSError`` when it has none.
Resolver = Callable[[str, int], Awaitable[list[str]]]
#: Called once per refused request: ``{"plugin", "host", "port", "status", "reason"}``; must not block.
OnRefused = Callable[[dict[str, Any]], None]
#: ``ask(host, port)``: the parent's answer for a destination the allowlist does not name: ``"once"`` or
#: ``"always"`` (let it through), ``"no"`` (the user declined), anything else (nobody to ask: refused as before).
Ask = Callable[[str, int], Awaitable[str]]
#: :attr:`Decision.via` of a destination the parent let through (``ask``), not an allowlist entry.
CONSENT = "consent"
#: Destinations one plugin's proxy may be asking about at once; more are refused without asking.
MAX_PENDING_ASKS = 8
#: Connections over a plugin's ``max_connections`` being answered ``429`` at once on its proxy listener; more
#: wait in the listen backlog until one ends (:meth:`PluginProxy.serve`).
MAX_REFUSING = 16

_CHUNK = 65536
#: What one relay read takes at most (a larger read costs fewer trips through the event loop per MiB).
_RELAY_CHUNK = 256 * 1024
_STATUS_TEXT = {
    400: "Bad Request",
    403: "Forbidden",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    504: "Gateway Timeout",
}
#: Headers a proxy consumes (RFC 9110 section 7.6.1 and the ``Proxy-*`` family): never passed upstream.
_HOP_BY_HOP = frozenset({b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization", b"te", b"upgrade"})


@dataclass(frozen=True)
class ProxyLimits:
    """The proxy's bounds for one plugin (defaults in parentheses).

    ``max_connections`` (64): connections open at once, tunnels included; one more is answered ``429`` (at
    most ``MAX_REFUSING`` such answers at once: more wait in the listen backlog, :meth:`PluginProxy.serve`).
    ``bytes_per_second`` (8 MiB/s): the plugin's traffic through the proxy, both directions together.
    ``max_head_bytes`` (16 KiB): a request head (request line and headers); more is ``431``.
    ``head_seconds`` (30 s): time to send the head; ``connect_seconds`` (10 s): to resolve and connect upstream.
    """

    max_connections: int = 64
    bytes_per_second: int = 8 * 1024 * 1024
    max_head_bytes: int = 16 * 1024
    head_seconds: float = 30.0
    connect_seconds: float = 10.0


class Refused(Exception):
    """A request the proxy refuses: ``status`` (HTTP) and ``reason`` (for people, sent in the body)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class Decision:
    """Where an allowed request goes: the canonical ``host``, the ``port`` and the checked ``addresses``;
    ``via``: why it may, when not an entry naming it: :data:`CONSENT` (the parent's answer) or the exact
    allowlisted name an IP literal was reached through."""

    host: str
    port: int
    addresses: tuple[str, ...]
    via: str | None = None


#: Name lookups one plugin's proxy runs at once (each a worker thread blocked in ``getaddrinfo``); more wait.
MAX_LOOKUPS = 4
#: The worker-thread limiter of the plugin whose proxy is resolving (set by :meth:`PluginProxy._resolve`).
_lookup_limiter: contextvars.ContextVar[trio.CapacityLimiter | None] = contextvars.ContextVar(
    "hostd_net_lookup_limiter", default=None
)


async def system_resolver(host: str, port: int) -> list[str]:
    """The machine's resolver (``getaddrinfo`` in a worker thread): the unique addresses of ``host``, in order.

    The thread counts against the resolving plugin's own limiter (:data:`MAX_LOOKUPS`), never trio's default
    one: the class closed is *one plugin's name lookups holding threads every other part of hostd waits for*.
    A plugin allowed ``*.attacker.example`` can ask for names whose name server never answers: each lookup
    blocks a thread for glibc's whole timeout, and a cancelled one (``connect_seconds``) is abandoned but keeps
    its thread, and its token, until glibc gives up. On trio's default limiter (40 threads, shared by hostd's
    file work and every plugin's lookups) 64 such connections left other plugins' names unresolved (``504``).
    Cancellation abandons the thread (its token is released when glibc returns)."""
    limiter = _lookup_limiter.get() or trio.to_thread.current_default_thread_limiter()
    lookup = functools.partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    infos = await trio.to_thread.run_sync(lookup, abandon_on_cancel=True, limiter=limiter)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def pinned_resolver(pins: Mapping[str, str], fallback: Resolver = system_resolver) -> Resolver:
    """A resolver where each name of ``pins`` (canonical names, :func:`hostd.net.allowlist.canonical_host`) has
    exactly its address, like curl's ``--resolve``; other names go to ``fallback``. ``hostd serve --resolve``."""

    async def resolve(host: str, port: int) -> list[str]:
        pinned = pins.get(host)
        return [pinned] if pinned is not None else await fallback(host, port)

    return resolve


class _Bucket:
    """A token bucket of ``rate`` bytes per second on trio's clock (so tests run it under ``MockClock``)."""

    def __init__(self, rate: int) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self.stamp = trio.current_time()
        self.lock = trio.Lock()

    async def take(self, count: int) -> None:
        async with self.lock:  # one waiter at a time: the bucket is the plugin's, shared by its connections
            now = trio.current_time()
            self.tokens = min(float(self.rate), self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= count
            if self.tokens < 0:
                await trio.sleep(-self.tokens / self.rate)


class PluginProxy:
    """The proxy of one plugin (module text). ``plugin``: its id (in refusals); ``allowlist``: what it may reach
    (replace :attr:`allowlist` to apply a grant to new connections); ``resolver``: :func:`system_resolver`
    unless a test maps names itself; ``on_refused``: see :data:`OnRefused`."""

    def __init__(
        self,
        plugin: str,
        allowlist: Allowlist,
        *,
        limits: ProxyLimits | None = None,
        resolver: Resolver = system_resolver,
        on_refused: OnRefused | None = None,
        ask: Ask | None = None,
    ) -> None:
        self.plugin = plugin
        self.ask = ask
        #: The answers of ``ask`` by ``(canonical host, port)``, for this proxy's life (one question each).
        self.answers: dict[tuple[str, int], str] = {}
        self._asking: dict[tuple[str, int], trio.Event] = {}
        self.allowlist = allowlist
        self.limits = limits or ProxyLimits()
        self.resolver = resolver
        self.on_refused = on_refused
        self.open_connections = 0
        self._bucket = _Bucket(self.limits.bytes_per_second)
        #: Each open upstream connection and the decision that opened it (:meth:`replace_allowlist` checks them
        #: again); weak: a connection that ended leaves by itself.
        self._upstreams: weakref.WeakKeyDictionary[trio.SocketStream, Decision] = weakref.WeakKeyDictionary()

        #: This plugin's lookup threads (:func:`system_resolver`): its slow names wait for its own tokens only.
        self.lookups = trio.CapacityLimiter(MAX_LOOKUPS)

    def replace_allowlist(self, allowlist: Allowlist, always: Iterable[str] = ()) -> list[Decision]:
        """Apply a changed allowlist at once (issue 26: a grant or revoke needs no restart of the plugin).

        ``allowlist``: what the plugin may reach now; ``always``: the destinations the parent let through for
        good (``networkCallHosts``, ``host:port`` entries); an ``always`` answer of this proxy not among them is
        forgotten (the parent is asked again), one among them needs no question. ``once`` and ``no`` answers
        stay (they last while the plugin runs). New connections are decided by the new rules at once; an open
        connection the new rules no longer allow is **closed** (both sides; it gets no answer, its client sees
        the connection end) and reported to ``on_refused`` with status 403: a revoke is a promise about every
        byte from now on, not only about new connections. Returns the decisions of the connections closed.
        Never blocks (no name is resolved: an open connection is checked against the addresses it was opened to).
        """
        recorded = set()
        for text in always:
            try:
                entry = parse_entry(text)
            except EntryError:
                continue  # stored grants were checked when given: a damaged one allows nothing
            if entry.port_given and not entry.wildcard:
                recorded.add((entry.host, entry.ports[0]))
        for key, answer in list(self.answers.items()):
            if answer == "always" and key not in recorded:
                del self.answers[key]
        for key in recorded:
            self.answers[key] = "always"
        self.allowlist = allowlist
        closed = []
        for upstream, decision in list(self._upstreams.items()):
            if upstream.socket.fileno() == -1 or self._still_allowed(decision):
                continue
            closed.append(decision)
            upstream.socket.close()  # the relay's read fails at once: both sides of the connection end
            shown = host_port(decision.host, decision.port)
            reason = f"an open connection to {shown} closed: the plugin's allowlist no longer allows it"
            self.report(decision.host, decision.port, 403, reason)
        return closed

    def _still_allowed(self, decision: Decision) -> bool:
        """Whether the current rules allow an open connection's ``decision`` (:meth:`replace_allowlist`)."""
        key = (decision.host, decision.port)
        listed = self.answers.get(key) in ("once", "always")
        try:
            listed = listed or self.allowlist.match(decision.host, decision.port) is not None
        except EntryError:
            return False
        name = decision.host
        if decision.via not in (None, CONSENT):
            name = str(decision.via)
            listed = listed or name in self.allowlist.exact_names(decision.port)
        return listed and addresses_problem(name, decision.addresses, self.allowlist) is None

    async def serve(self, listener: trio.abc.Listener[Any], *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Accept connections on ``listener`` until cancelled, each served by :meth:`handle` in its own task, at
        most ``max_connections`` + :data:`MAX_REFUSING` at once (more wait in the listener's backlog).

        Cancellation closes the listener and every open connection of this plugin.
        """
        # The class closed here: *a plugin's connections holding hostd's resources beyond its bound, whatever
        # their state* (served, or being answered 429 with a lingering close that waits up to 5 s for the
        # client). Without this gate a plugin that keeps its excess connections open makes hostd hold one
        # descriptor and one task per connection, as many as it can open (it may raise its own RLIMIT_NOFILE to
        # hostd's hard limit): hostd's descriptors, then every plugin's and the control loop's, run out. With it,
        # hostd accepts at most ``max_connections`` + :data:`MAX_REFUSING` of this listener's connections at
        # once; the next ones wait in the namespace's listen backlog (the kernel's, 128), costing hostd nothing.
        admission = trio.Semaphore(self.limits.max_connections + MAX_REFUSING)
        async with trio.open_nursery() as nursery:
            task_status.started()
            async with listener:
                while True:
                    await admission.acquire()
                    try:
                        stream = await accept(listener, lambda why: self.report("", 0, "error", why))
                    except BaseException:
                        admission.release()
                        raise
                    nursery.start_soon(self._admitted, stream, admission)

    async def _admitted(self, stream: trio.abc.Stream, admission: trio.Semaphore) -> None:
        try:
            await self.handle(stream)
        finally:
            admission.release()

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one connection: read the head, decide, answer or connect and relay; always closes ``stream``."""
        async with stream:
            with self._contained():
                if self.open_connections >= self.limits.max_connections:
                    limit = self.limits.max_connections
                    await self._refuse(stream, "", 0, Refused(429, f"more than {limit} connections"))
                    return
                self.open_connections += 1
                try:
                    await self._serve_one(stream)
                finally:
                    self.open_connections -= 1

    @contextlib.contextmanager
    def _contained(self) -> Iterator[None]:
        """Where one connection's failure ends: with that connection, never past it.

        The class closed here: *an exception raised on a plugin's bytes reaching past its connection's task*.
        A connection's task runs in the plugin's proxy nursery, itself in hostd's: an uncaught exception there
        ended the plugin's proxy and transparent mode, and then hostd itself (``hostd is shutting down``; a
        ``GET http://[::1/`` was enough: ``urlsplit`` raises ``ValueError``). A client or upstream that went
        away ends the connection quietly; anything else is reported (``on_refused``, status ``"error"``) and
        ends the connection only. Cancellation passes.
        """
        try:
            yield
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client or the upstream went away: this connection ends, the proxy goes on
        except Exception as exc:  # the class above: nothing a plugin sends may end the proxy
            self.report("", 0, "error", f"the proxy could not serve a connection: {type(exc).__name__}: {exc}")

    async def _serve_one(self, stream: trio.abc.Stream) -> None:
        host, port, reply = "", 0, b""
        try:
            head, rest = await self._read_head(stream)
            method, target, version, headers = _parse_head(head)
            if method == b"CONNECT":
                host, port = _authority(target.decode("ascii", "replace"), None)
                upstream = await self._open(host, port)
                reply, first = version + b" 200 Connection Established\r\n\r\n", rest
            else:
                try:
                    url = urlsplit(target.decode("ascii", "replace"))
                except ValueError as exc:  # an unclosed or non-address bracket: "http://[::1/", "http://[evil]/"
                    raise Refused(400, f"the request target is not a URL: {exc}") from None
                if url.scheme.lower() != "http" or not url.netloc:
                    raise Refused(400, "a plain request names an http:// URL; use CONNECT for anything else")
                host, port = _authority(url.netloc, 80)
                upstream = await self._open(host, port)
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                first = _origin_head(method, path.encode("ascii", "replace"), version, headers, url.netloc) + rest
        except Refused as refused:
            await self._refuse(stream, host, port, refused)
            return
        async with upstream:  # closed however the client goes away
            if reply:
                await stream.send_all(reply)
            if first:
                await self._bucket.take(len(first))
                await upstream.send_all(first)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, stream, upstream, nursery.cancel_scope)
                nursery.start_soon(self._pump, upstream, stream, nursery.cancel_scope)

    async def _read_head(self, stream: trio.abc.Stream) -> tuple[bytes, bytes]:
        data = b""
        with trio.move_on_after(self.limits.head_seconds) as timer:
            while b"\r\n\r\n" not in data:
                if len(data) > self.limits.max_head_bytes:
                    raise Refused(431, f"the request head is over {self.limits.max_head_bytes} bytes")
                chunk = await stream.receive_some(_CHUNK)
                if not chunk:
                    raise Refused(400, "the connection ended before the request head did")
                data += chunk
        if timer.cancelled_caught:
            raise Refused(400, f"no complete request head within {self.limits.head_seconds:g} s")
        head, _, rest = data.partition(b"\r\n\r\n")
        if len(head) > self.limits.max_head_bytes:
            raise Refused(431, f"the request head is over {self.limits.max_head_bytes} bytes")
        return head, rest

    async def decide(self, host: str, port: int) -> Decision:
        """Whether the plugin may reach ``host`` on ``port``, and at which addresses (module text).

        Raises :class:`Refused` (403) naming why: a host outside the grammar, no entry allowing it on that port,
        a name resolving to a non-public address the allowlist does not name, an IP literal no allowed name
        resolves to; (502) a name that does not resolve. Resolution is bounded by ``connect_seconds``.
        """
        try:
            name, address = canonical_host(host)
            entry = self.allowlist.match(host, port)
        except EntryError as exc:
            raise Refused(403, str(exc)) from None
        shown = host_port(name, port)
        if address is not None:
            if entry is not None:
                return Decision(name, port, (name,))
            via = await self._resolves_to_allowed(name, port)
            if via is not None or await self._consent(name, port):
                return Decision(name, port, (name,), via or CONSENT)
            why = f"{shown} is not in the plugin's allowlist, and no allowed name resolves to it"
            raise Refused(403, why + self._declined(name, port, shown))
        if entry is None and not await self._consent(name, port):
            raise Refused(403, f"{shown} is not in the plugin's allowlist{self._declined(name, port, shown)}")
        addresses = await self._resolve(name, port)
        problem = addresses_problem(name, addresses, self.allowlist)
        if problem is not None:
            raise Refused(403, problem)
        return Decision(name, port, tuple(addresses), None if entry is not None else CONSENT)

    async def _consent(self, name: str, port: int) -> bool:
        """Whether the parent lets ``name:port`` through (``ask``; issue 26's call-time consent). One question
        per destination for this proxy's life: concurrent connections wait for the same answer; beyond
        :data:`MAX_PENDING_ASKS` open questions a destination is refused without asking."""
        if self.ask is None:
            return False
        key = (name, port)
        while key not in self.answers:
            pending = self._asking.get(key)
            if pending is not None:
                await pending.wait()
                continue
            if len(self._asking) >= MAX_PENDING_ASKS:
                return False
            self._asking[key] = done = trio.Event()
            try:
                try:
                    self.answers[key] = await self.ask(name, port)
                except Exception:
                    self.answers[key] = "unanswered"
            finally:
                self.answers.setdefault(key, "unanswered")  # a cancelled question counts as no, once
                del self._asking[key]
                done.set()
        return self.answers[key] in ("once", "always")

    def _declined(self, name: str, port: int, shown: str) -> str:
        """The end of an unlisted destination's refusal: whether the user declined it, and the hostctl command
        that lets it through for good (a parent or MCP client that could not ask a person: the person can)."""
        declined = "; the user declined it" if self.answers.get((name, port)) == "no" else ""
        return f"{declined} (to let it through: hostctl grant {self.plugin} --host {shown})"

    async def _resolve(self, name: str, port: int) -> list[str]:
        token = _lookup_limiter.set(self.lookups)
        try:
            with trio.fail_after(self.limits.connect_seconds):
                return await self.resolver(name, port)
        except trio.TooSlowError:
            raise Refused(504, f"{name} did not resolve within {self.limits.connect_seconds:g} s") from None
        except OSError as exc:
            raise Refused(502, f"{name} does not resolve: {exc.strerror or exc}") from None
        finally:
            _lookup_limiter.reset(token)

    async def _resolves_to_allowed(self, literal: str, port: int) -> str | None:
        """The exact allowed name resolving to the IP ``literal`` (checked as the name itself is), or None."""
        for name in self.allowlist.exact_names(port)[:16]:  # bounded: a literal costs at most 16 lookups
            try:
                addresses = await self._resolve(name, port)
            except Refused:
                continue
            if literal in {canonical_host(a)[0] for a in addresses}:
                return name if addresses_problem(name, addresses, self.allowlist) is None else None
        return None

    async def _open(self, host: str, port: int) -> trio.SocketStream:
        decision = await self.decide(host, port)
        errors: list[str] = []
        with trio.move_on_after(self.limits.connect_seconds):
            for address in decision.addresses:
                try:
                    upstream = await _connect(address, port)
                except OSError as exc:
                    errors.append(f"{address}: {os.strerror(exc.errno) if exc.errno else exc}")
                    continue
                opened = Decision(decision.host, port, (address,), decision.via)
                if not self._still_allowed(opened):  # the allowlist changed while this one was deciding or dialling
                    upstream.socket.close()
                    raise Refused(403, f"{decision.host}:{port}: the plugin's allowlist no longer allows it")
                self._upstreams[upstream] = opened
                return upstream
            raise Refused(502, f"{decision.host}:{port} refused the connection ({'; '.join(errors)})")
        raise Refused(504, f"{decision.host}:{port} did not answer within {self.limits.connect_seconds:g} s")

    async def _pump(self, source: trio.abc.Stream, sink: trio.abc.Stream, scope: trio.CancelScope) -> None:
        try:
            while chunk := await source.receive_some(_RELAY_CHUNK):
                await self._bucket.take(len(chunk))
                await sink.send_all(chunk)
            if isinstance(sink, trio.SocketStream):
                await sink.send_eof()  # a half-close passes on; the other direction may still talk
                return
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        scope.cancel()

    def report(self, host: str, port: int, status: int | str, reason: str) -> None:
        """One refusal to ``on_refused`` (``port`` 0: a name refused at DNS time, ``status`` ``"NXDOMAIN"``)."""
        if self.on_refused is not None:
            self.on_refused({"plugin": self.plugin, "host": host, "port": port, "status": status, "reason": reason})

    async def handle_transparent(self, stream: trio.SocketStream, host: str | None, port: int, address: str) -> None:
        """Serve one connection a proxy-unaware client opened to ``address:port`` in its namespace (transparent
        mode, :mod:`hostd.net.transparent`): ``host`` is the name hostd's DNS gave that fake address (None: an
        address it never gave, e.g. an IP literal that is local in the namespace). The same decision as
        ``CONNECT`` (:meth:`decide`, the connection limit), then the bytes pass untouched both ways (TLS end to
        end). A refusal cannot be an HTTP status here: the connection is reset (``SO_LINGER`` 0) and the reason
        goes to ``on_refused``. Always closes ``stream``."""
        async with stream:
            try:
                if host is None:
                    raise Refused(403, f"{address}:{port} is no address hostd's DNS gave this plugin (an IP literal)")
                if self.open_connections >= self.limits.max_connections:
                    raise Refused(429, f"more than {self.limits.max_connections} connections")
            except Refused as refused:
                self.report(host or address, port, refused.status, refused.reason)
                _reset(stream)
                return
            self.open_connections += 1
            try:
                with self._contained():
                    try:
                        upstream = await self._open(host, port)
                    except Refused as refused:
                        self.report(host, port, refused.status, refused.reason)
                        _reset(stream)
                        return
                    async with upstream, trio.open_nursery() as nursery:
                        nursery.start_soon(self._pump, stream, upstream, nursery.cancel_scope)
                        nursery.start_soon(self._pump, upstream, stream, nursery.cancel_scope)
            finally:
                self.open_connections -= 1

    async def _refuse(self, stream: trio.abc.Stream, host: str, port: int, refused: Refused) -> None:
        self.report(host, port, refused.status, refused.reason)
        reason = refused.reason.encode("utf-8", "replace")
        header = refused.reason.encode("ascii", "replace").replace(b"\r", b" ").replace(b"\n", b" ")
        answer = (
            b"HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
            b"X-Hostd-Refused: %s\r\nConnection: close\r\n\r\n%s"
            % (refused.status, _STATUS_TEXT[refused.status].encode(), len(reason) + 1, header, reason + b"\n")
        )
        # A lingering close (RFC 9112 section 9.6): answer, end our side, then read (bounded) what the client
        # still sends, so closing with unread input does not reset the connection before it reads the answer.
        try:
            with trio.move_on_after(5):
                await stream.send_all(answer)
                if isinstance(stream, trio.SocketStream):
                    await stream.send_eof()
                drained = 0
                while drained < self.limits.max_head_bytes * 4 and (chunk := await stream.receive_some(_CHUNK)):
                    drained += len(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


def _reset(stream: trio.SocketStream) -> None:
    """Make the coming close of ``stream`` a reset (``SO_LINGER`` 0): a raw client sees ``ECONNRESET``, not an
    empty answer it could take for a complete one."""
    with contextlib.suppress(OSError):
        stream.socket.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_LINGER, struct.pack("ii", 1, 0))


async def _connect(address: str, port: int) -> trio.SocketStream:
    """A TCP connection to the IP ``address`` (no name resolution); raises ``OSError`` with the errno's text."""
    family = trio.socket.AF_INET6 if ":" in address else trio.socket.AF_INET
    sock = trio.socket.socket(family, trio.socket.SOCK_STREAM)
    try:
        await sock.connect((address, port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


async def run_proxy(
    plugin: str,
    listener: trio.abc.Listener[Any],
    allowlist: Allowlist,
    log: Callable[[str], Awaitable[None]],
    *,
    limits: ProxyLimits | None = None,
    ask: Ask | None = None,
    resolver: Resolver = system_resolver,
    dns: Sequence[trio.socket.SocketType] = (),
    transparent: Sequence[trio.SocketListener] = (),
    askable: Callable[[str], bool] | None = None,
    on_proxy: Callable[[PluginProxy], None] | None = None,
) -> None:
    """Serve ``plugin``'s proxy on ``listener`` until cancelled (``ask``: see :data:`Ask`; ``resolver``: see
    :data:`Resolver`; ``on_proxy`` gets the :class:`PluginProxy` before it serves, to change its allowlist while
    it runs); each refusal becomes one ``log`` line (``"network: refused HOST:PORT (STATUS): REASON"``,
    ``"network: refused NAME (NXDOMAIN): REASON"`` for a name refused at DNS time; hostd sends it to the parent as
    ``plugins/log``). With ``dns`` sockets and ``transparent`` listeners (the shim's, ``sandbox/_shim_net.py``)
    it also serves transparent mode (:mod:`hostd.net.transparent`; ``askable(name)``: whether the parent could
    let a name the allowlist does not cover through, default no).

    Refusals wait in a bounded queue (256); beyond it they are counted, never waited for: a plugin that hammers
    forbidden hosts slows neither its own connections nor hostd. Cancellation closes the listener and every
    connection of the plugin, and the DNS sockets and transparent listeners.
    """
    send, receive = trio.open_memory_channel[dict[str, Any]](256)
    dropped = [0]

    def on_refused(record: dict[str, Any]) -> None:
        try:
            send.send_nowait(record)
        except trio.WouldBlock:
            dropped[0] += 1

    async def report() -> None:
        async for record in receive:
            extra = f" ({dropped[0]} more refusals not shown)" if dropped[0] else ""
            dropped[0] = 0
            host, port = record["host"], record["port"]
            where = (f"{host}:{port}" if port else host) if host else "a connection"
            await log(f"network: refused {where} ({record['status']}): {record['reason']}{extra}")

    proxy = PluginProxy(plugin, allowlist, limits=limits, resolver=resolver, on_refused=on_refused, ask=ask)
    if on_proxy is not None:
        on_proxy(proxy)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(report)
        if dns or transparent:
            pace = _Bucket(DNS_QUERIES_PER_SECOND)
            nursery.start_soon(serve_transparent_mode, proxy, dns, transparent, askable or (lambda name: False), pace)
        await proxy.serve(listener)


def _parse_head(head: bytes) -> tuple[bytes, bytes, bytes, list[tuple[bytes, bytes]]]:
    """``(method, target, version, headers)`` of a request head (RFC 9112 section 3); raises :class:`Refused`.

    A bare CR or LF, or a NUL, is refused wherever it is (RFC 9112 section 2.2): a lenient server reads a bare LF
    as a line end, so a header value holding one would reach the upstream as a header of its own through the
    head hostd rebuilds (:func:`_origin_head`), and a NUL ends a name early for some readers.
    """
    if any(c in head.replace(b"\r\n", b"") for c in (b"\r", b"\n", b"\x00")):
        raise Refused(400, "the request head holds a bare CR or LF, or a NUL")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[0].isalpha() or parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise Refused(400, "the request line is not 'METHOD TARGET HTTP/1.1'")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip() or any(c in name for c in b" \t"):
            raise Refused(400, "a header line is not 'Name: value'")
        headers.append((name, value.strip()))
    return parts[0].upper(), parts[1], parts[2], headers


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    """``host:port`` of a CONNECT target or a URL's authority (no user info); raises :class:`Refused`."""
    if "@" in text:
        raise Refused(400, "a user name or password in the target is not allowed")
    try:
        host, port = split_host_port(text)
    except EntryError as exc:
        raise Refused(400, str(exc)) from None
    if port is None:
        if default_port is None:
            raise Refused(400, "CONNECT names host:port")
        port = default_port
    return host, port


def _origin_head(
    method: bytes, path: bytes, version: bytes, headers: list[tuple[bytes, bytes]], authority: str
) -> bytes:
    """The request head as the origin server gets it: origin form, ``Host`` the target's, hop-by-hop and
    ``Proxy-*`` headers dropped, ``Connection: close`` (one request per proxied connection)."""
    kept = [
        (n, v)
        for n, v in headers
        if n.lower() not in _HOP_BY_HOP and n.lower() != b"host" and b"proxy-" not in n.lower()
    ]
    lines = [b"%s %s %s" % (method, path, version), b"Host: " + authority.encode("ascii", "replace")]
    lines += [n + b": " + v for n, v in kept]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"
