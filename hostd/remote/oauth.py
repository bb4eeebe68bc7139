"""OAuth 2.1 for remote plugins: the SDK's OAuth client, with the browser step in the parent.

Theory of operation
-------------------
A remote server that answers 401 (or 403 ``insufficient_scope``) is authorized
by the MCP SDK's :class:`mcp.client.auth.OAuthClientProvider`, set as the
``auth`` of hostd's HTTP client (hostd/mcp/transport/http.py). The SDK does the
protocol: protected resource metadata (RFC 9728), authorization server
metadata (RFC 8414) with ``iss`` checks (RFC 9207), client ID metadata
documents or dynamic client registration, authorization code with PKCE
(S256), the resource indicator, scope step-up and token refresh. hostd
supplies three things:

- **The browser step goes to the parent.** hostd never opens or fetches the
  authorization URL. :class:`Authorization` sends the parent the request
  ``auth/authorize {plugin, url}`` (status ``authorizing`` meanwhile) and waits
  for the redirect: on a loopback port it listens on (``redirect_uri``
  ``http://127.0.0.1:<port>/callback``, RFC 8252 section 7.3: any port), or
  from the parent, ``auth/callback {plugin, url}``, for apps that register a
  custom scheme. Waiting on a person is bounded by :data:`AUTHORIZE_SECONDS`,
  not by the start timeout.
- **A redirect proves it belongs to the flow before anything else is read.**
  The loopback listener is reachable by every local process, and the parent's
  ``auth/callback`` carries what a browser was sent. The class: *a result that
  did not come from this flow's authorization request ends or steers the flow*
  (an ``?error=`` from another local client ending the enable with its text, a
  ``code`` for another flow, a replayed redirect). :meth:`Authorization.deliver`
  accepts a redirect only when its ``state`` equals the one the SDK put in the
  authorization URL hostd handed the parent (compared in constant time), for
  errors as much as for codes; anything else is answered 400 (loopback) or
  ``INVALID_PARAMS`` (``auth/callback``) and the flow keeps waiting. The path
  stays ``/callback``: an authorization server compares the registered redirect
  URI's path exactly (RFC 8252 section 7.3 lets only the loopback port vary), so
  a random path would void pre-registered clients and stored registrations; the
  ``state`` (256 random bits, the SDK's ``secrets.token_urlsafe(32)``) is the proof.
  An error the authorization server reports is quoted and attributed to it.
- **Where credentials live.** :class:`CredentialStore` keeps the tokens and
  the client registration of one plugin, keyed by the authorization server
  (issuer) that issued them, outside ``state.json``: in the OS keyring when a
  usable one exists (``keyring``, not its fail or null backends), else in
  ``<state>/credentials/<plugin>.json`` (0600, in a 0700 folder). No token
  reaches a log line, an error or a status; the SDK's own debug logging is
  below hostd's log level.
- **Logout.** ``plugins/logout {id}`` forgets a plugin's credentials and stops
  it (the next enable authorizes again).
- **Which client hostd is.** A pre-registered client (manifest
  ``backend.oauth``) first; else, where the authorization server advertises
  ``client_id_metadata_document_supported``, the URL of the application's
  client ID metadata document (``initialize.params.oauth.clientIdMetadataDocument``,
  from the parent: it names the application, so no plugin's manifest may
  name it); else dynamic registration (MCP authorization 2025-11-25,
  "Client Registration": that order). The SDK does each; hostd supplies the URL.
- **Servers of the 2025-03-26 revision** (no protected resource metadata):
  the authorization server is the MCP server's origin, as in the SDK, and
  the ``issuer`` of the metadata found there is held to that origin rather
  than to the origin exactly (:func:`legacy_issuer` says why and what stays
  refused); servers that publish protected resource metadata keep the SDK's
  exact check.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import trio

from hostd.storage.secrets import usable_keyring
from hostd.wire.errors import ErrorKind, HostError

log = logging.getLogger("hostd.remote.oauth")

#: Seconds a start may wait for the person to authorize in the browser (the start timeout is paused meanwhile).
AUTHORIZE_SECONDS: Final = 300.0
#: Seconds the parent has to acknowledge ``auth/authorize`` (it answers once it has shown the URL).
PARENT_ACK_SECONDS: Final = 30.0
#: Bound of the loopback redirect request hostd reads, in bytes.
_CALLBACK_BYTES: Final = 16 * 1024
_KEYRING_SERVICE: Final = "hostd"

ParentRequest = Callable[[str, dict[str, Any], float], Awaitable[Any]]


class CredentialStore:
    """The SDK's ``TokenStorage`` for one plugin: tokens and client registration, per issuer.

    ``folder`` is ``<state>/credentials`` (created 0700); ``None`` keeps them
    in memory only (a hostd without a state folder). ``issuer`` is set by
    the provider's flow (:meth:`bind`); until then the server URL keys them.
    Blocking file I/O is small and runs in a worker thread.
    """

    def __init__(self, folder: Path | None, plugin_id: str, server_url: str) -> None:
        self.folder = folder
        self.plugin_id = plugin_id
        self.key = server_url
        self._memory: dict[str, Any] = {}
        #: A pre-registered client (manifest backend.oauth): it wins over a stored registration.
        self.preset: Any = None
        #: The parent's ``oauth.clientIdMetadataDocument`` (None: none). A stored client whose ``client_id`` was
        #: another document URL (the parent changed or dropped it) is not offered: the flow chooses again.
        self.client_metadata_url: str | None = None

    # -- the SDK's TokenStorage ------------------------------------------------------

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken  # noqa: PLC0415

        data = (await self._load()).get("tokens")
        return OAuthToken.model_validate(data) if data else None

    async def set_tokens(self, tokens: Any) -> None:
        await self._update("tokens", tokens.model_dump(mode="json", exclude_none=True))
        expires_in = getattr(tokens, "expires_in", None)
        await self._update("expiresAt", time.time() + expires_in if isinstance(expires_in, int | float) else None)

    async def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), or None when unknown."""
        value = (await self._load()).get("expiresAt")
        return float(value) if isinstance(value, int | float) else None

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull  # noqa: PLC0415

        if self.preset is not None:
            return self.preset
        entry = await self._load()
        data = entry.get("client")
        document = entry.get("clientIdMetadataDocument")
        if not data or (document is not None and document != self.client_metadata_url):
            return None
        return OAuthClientInformationFull.model_validate(data)

    async def set_client_info(self, client_info: Any) -> None:
        await self._update("client", client_info.model_dump(mode="json", exclude_none=True))
        used = client_info.client_id if client_info.client_id == self.client_metadata_url else None
        await self._update("clientIdMetadataDocument", used)

    # -- storage ---------------------------------------------------------------------

    async def _load(self) -> dict[str, Any]:
        document = await trio.to_thread.run_sync(self._read_all)
        entry = document.get(self.key)
        return entry if isinstance(entry, dict) else {}

    async def _update(self, field: str, value: Any) -> None:
        def write() -> None:
            document = self._read_all()
            entry = document.setdefault(self.key, {})
            entry[field] = value
            self._write_all(document)

        await trio.to_thread.run_sync(write)

    def _read_all(self) -> dict[str, Any]:
        if self.folder is None:
            return self._memory
        ring = usable_keyring()
        try:
            if ring is not None:
                text = ring.get_password(_KEYRING_SERVICE, self.plugin_id)
            else:
                text = (self.folder / f"{self.plugin_id}.json").read_text(encoding="utf-8")
        except (OSError, ValueError):
            return {}
        if not text:
            return {}
        try:
            document = json.loads(text)
        except ValueError:
            return {}
        return document if isinstance(document, dict) else {}

    def _write_all(self, document: dict[str, Any]) -> None:
        if self.folder is None:
            self._memory = document
            return
        text = json.dumps(document, sort_keys=True)
        ring = usable_keyring()
        if ring is not None:
            ring.set_password(_KEYRING_SERVICE, self.plugin_id, text)
            return
        write_private(self.folder, f"{self.plugin_id}.json", text)


def write_private(folder: Path, name: str, text: str) -> None:
    """Write ``folder/name`` atomically, 0600 in a 0700 folder (created), never through a link."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    temporary = folder / f".{name}.tmp"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, folder / name)


def forget(folder: Path | None, plugin_id: str) -> bool:
    """Delete a plugin's stored credentials (keyring entry and file); True when there were any."""
    found = False
    ring = usable_keyring()
    if ring is not None:
        with contextlib.suppress(Exception):
            if ring.get_password(_KEYRING_SERVICE, plugin_id) is not None:
                ring.delete_password(_KEYRING_SERVICE, plugin_id)
                found = True
    if folder is not None:
        with contextlib.suppress(FileNotFoundError):
            (folder / f"{plugin_id}.json").unlink()
            found = True
    return found


class Authorization:
    """One connection's authorization: the loopback redirect listener and the wait for the redirect.

    Use :meth:`listen` with ``nursery.start`` before building the provider:
    it binds ``127.0.0.1:0`` and sets :attr:`redirect_uri`. :meth:`redirect`
    and :meth:`callback` are the provider's ``redirect_handler`` and
    ``callback_handler``; :meth:`deliver` takes a redirect URL from the
    parent (``auth/callback``).
    """

    def __init__(
        self,
        plugin_id: str,
        request_parent: ParentRequest | None,
        on_waiting: Callable[[bool], Awaitable[None]],
    ) -> None:
        self.plugin_id = plugin_id
        self.redirect_uri = ""
        self._request_parent = request_parent
        self._on_waiting = on_waiting
        self._result: Any = None
        self._arrived = trio.Event()
        #: The ``state`` of the authorization URL handed to the parent (None before :meth:`redirect`).
        self._state: str | None = None

    async def listen(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Serve the loopback redirect until cancelled (reports ``started`` once bound)."""
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        self.redirect_uri = f"http://127.0.0.1:{port}/callback"
        task_status.started()
        await trio.serve_listeners(self._serve_one, listeners)

    async def _serve_one(self, stream: trio.SocketStream) -> None:
        data = b""
        with trio.move_on_after(10):
            while b"\r\n\r\n" not in data and len(data) < _CALLBACK_BYTES:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        ok = len(parts) == 3 and parts[0] == "GET" and parts[1].startswith("/callback?")
        if ok:
            ok = self.deliver(f"http://127.0.0.1{parts[1]}")
        body = b"hostd: authorized; you can close this window.\n" if ok else b"hostd: not an authorization redirect.\n"
        status = b"200 OK" if ok else b"400 Bad Request"
        head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: "
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(head + str(len(body)).encode() + b"\r\n\r\n" + body)
            await stream.aclose()

    def deliver(self, url: str) -> bool:
        """Take the authorization server's redirect (``...?code=&state=&iss=``); False when it is not this flow's.

        Refused (False, nothing recorded): no authorization URL was handed out
        yet, a ``state`` missing or not the one of that URL (compared in constant
        time), no ``code`` and no ``error``, or a result already taken. An
        ``error`` redirect with the right ``state`` (the person refused) ends the
        wait with ``PLUGIN_START_FAILED`` quoting what the authorization server said.
        """
        from mcp.shared.auth import AuthorizationCodeResult  # noqa: PLC0415

        query = parse_qs(urlsplit(url).query)
        state = _first(query, "state")
        if not _same_state(state, self._state) or self._arrived.is_set():
            return False
        code, error = _first(query, "code"), _first(query, "error")
        if code is None and error is None:
            return False
        if code is None:
            said = json.dumps(str(error)[:200], ensure_ascii=True)
            description = _first(query, "error_description")
            if description is not None:
                said += ", " + json.dumps(description[:300], ensure_ascii=True)
            self._result = HostError(
                ErrorKind.PLUGIN_START_FAILED,
                f"plugin {self.plugin_id}: the authorization was refused; the authorization server said: {said}",
                plugin=self.plugin_id,
                reason=f"authorization refused; the authorization server said: {said}",
            )
        else:
            self._result = AuthorizationCodeResult(code=code, state=state, iss=_first(query, "iss"))
        self._arrived.set()
        return True

    async def redirect(self, url: str) -> None:
        """The provider's ``redirect_handler``: status ``authorizing``; the parent gets ``auth/authorize``.

        Raises ``HostError`` (``PLUGIN_START_FAILED``) when no parent can show the URL.
        """
        self._arrived = trio.Event()
        self._result = None
        self._state = _first(parse_qs(urlsplit(url).query), "state")
        await self._on_waiting(True)
        if self._request_parent is None:
            raise HostError(
                ErrorKind.PLUGIN_START_FAILED,
                f"plugin {self.plugin_id} needs authorization, and no parent is connected to show it",
                plugin=self.plugin_id,
                reason="authorization required",
            )
        try:
            await self._request_parent("auth/authorize", {"plugin": self.plugin_id, "url": url}, PARENT_ACK_SECONDS)
        except HostError as exc:
            raise HostError(
                ErrorKind.PLUGIN_START_FAILED,
                f"plugin {self.plugin_id} needs authorization; the parent did not take auth/authorize: {exc.message}",
                plugin=self.plugin_id,
                reason="authorization required: " + exc.message,
            ) from None

    async def callback(self) -> Any:
        """The provider's ``callback_handler``: wait for the redirect (loopback or ``auth/callback``)."""
        try:
            await self._arrived.wait()
        finally:
            await self._on_waiting(False)
        if isinstance(self._result, HostError):
            raise self._result
        return self._result


def _same_state(received: str | None, expected: str | None) -> bool:
    """Whether a redirect's ``state`` is the flow's (both present, equal; constant time over UTF-8 bytes)."""
    if received is None or expected is None:
        return False
    return secrets.compare_digest(received.encode("utf-8"), expected.encode("utf-8"))


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


class Authorizer:
    """The host's side: credential folders, the parent, and the authorizations in progress by plugin.

    ``folder`` is ``<state>/credentials`` (``None``: in memory only);
    ``request_parent`` returns the control channel's hostd->parent request
    function (None before ``initialize``); ``client_metadata_url`` the parent's
    ``initialize.params.oauth.clientIdMetadataDocument`` (None: the parent has none).
    """

    def __init__(
        self,
        folder: Path | None,
        request_parent: Callable[[], ParentRequest | None],
        client_metadata_url: str | None = None,
    ) -> None:
        self.folder = folder
        self._request_parent = request_parent
        self.client_metadata_url = client_metadata_url
        self.pending: dict[str, Authorization] = {}

    def store(self, plugin_id: str, server_url: str) -> CredentialStore:
        """The credential store of ``plugin_id`` for ``server_url``."""
        store = CredentialStore(self.folder, plugin_id, server_url)
        store.client_metadata_url = self.client_metadata_url
        return store

    def begin(self, plugin_id: str, on_waiting: Callable[[bool], Awaitable[None]]) -> Authorization:
        """A new :class:`Authorization` for a connection of ``plugin_id`` (replacing an older one)."""
        authorization = Authorization(plugin_id, self._request_parent(), on_waiting)
        self.pending[plugin_id] = authorization
        return authorization

    def end(self, plugin_id: str, authorization: Authorization) -> None:
        """Forget ``authorization`` once its connection ended."""
        if self.pending.get(plugin_id) is authorization:
            del self.pending[plugin_id]

    def callback(self, plugin_id: str, url: str) -> None:
        """``auth/callback {plugin, url}``: hand the redirect to the plugin's waiting authorization.

        Raises ``INVALID_PARAMS`` when no authorization of that plugin waits or the URL is not its flow's
        (:meth:`Authorization.deliver`: the ``state`` of the URL hostd handed out, a code or an error).
        """
        authorization = self.pending.get(plugin_id)
        if authorization is None or not authorization.deliver(url):
            raise HostError(
                ErrorKind.INVALID_PARAMS,
                f"no authorization of plugin {plugin_id} waits for this redirect",
                plugin=plugin_id,
            )

    async def logout(self, plugin_id: str) -> bool:
        """Forget ``plugin_id``'s tokens and client registrations; True when there were any."""
        return await trio.to_thread.run_sync(forget, self.folder, plugin_id)


def provider(
    server_url: str,
    authorization: Authorization,
    store: CredentialStore,
    *,
    client_id: str | None = None,
    client_secret: str | None = None,
    scope: str | None = None,
) -> Any:
    """The SDK's ``OAuthClientProvider`` for one connection (an ``httpx2.Auth``).

    ``client_id``/``client_secret``: a pre-registered client (manifest ``backend.oauth``), used first.
    ``store.client_metadata_url``: the parent's client ID metadata document URL, which the SDK uses as
    ``client_id`` where the authorization server advertises ``client_id_metadata_document_supported``
    (MCP authorization 2025-11-25, "Client ID Metadata Documents"), registering dynamically elsewhere.

    Two differences from the SDK's:

    - tokens loaded from the store keep their expiry (the SDK forgets it across restarts and would
      present an expired token, get 401 and ask the person again); so a token that expired while
      hostd or the plugin was stopped is refreshed without the person;
    - the 2025-03-26 discovery (no protected resource metadata) holds the metadata's ``issuer`` to
      the server's origin rather than to the origin exactly (:func:`legacy_issuer`).
    """
    import httpx2  # noqa: PLC0415 (a remote connection's only: every host builds an Authorizer, a reader too)
    from mcp.client.auth import OAuthClientProvider  # noqa: PLC0415
    from mcp.client.auth.utils import create_oauth_metadata_request  # noqa: PLC0415
    from mcp.shared.auth import OAuthClientInformationFull  # noqa: PLC0415

    if client_id is not None:  # pre-registered (manifest backend.oauth): no dynamic registration
        store.preset = OAuthClientInformationFull(
            client_id=client_id,
            client_secret=client_secret,
            redirect_uris=[authorization.redirect_uri],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_basic" if client_secret else "none",
        )
    parts = urlsplit(server_url)
    origin = f"{parts.scheme}://{parts.netloc}"  # as the SDK builds its well-known URLs
    resource_root = httpx2.URL(f"{origin}/.well-known/oauth-protected-resource")
    legacy_metadata = httpx2.URL(f"{origin}/.well-known/oauth-authorization-server")

    class Provider(OAuthClientProvider):
        #: The issuer :func:`legacy_issuer` accepted for this flow's 2025-03-26 discovery (None: the SDK's rule).
        _legacy_issuer: str | None = None
        #: Its metadata response, handed to the SDK when it asks for the same URL next (one fetch, not two).
        _legacy_answer: Any = None

        async def _initialize(self) -> None:
            await super()._initialize()
            expiry = await store.expires_at()
            if expiry is not None and self.context.current_tokens is not None:
                self.context.token_expiry_time = expiry

        def _expected_issuer(self) -> str:
            if self.context.auth_server_url is None and self._legacy_issuer is not None:
                return self._legacy_issuer
            return str(super()._expected_issuer())

        async def _auth_flow(self, request: Any) -> Any:
            """The SDK's flow; where its resource metadata discovery ends with none, the legacy
            metadata is fetched first so :meth:`_expected_issuer` knows the issuer to hold it to."""
            flow = super()._auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    answer, self._legacy_answer = self._legacy_answer, None
                    if answer is not None and outgoing.method == "GET" and outgoing.url == legacy_metadata:
                        response = answer
                    else:
                        response = yield outgoing
                        if await self._ends_discovery_without_metadata(outgoing, response):
                            answer = yield create_oauth_metadata_request(str(legacy_metadata))
                            self._legacy_issuer = await legacy_issuer(answer, server_url)
                            self._legacy_answer = answer
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()

        async def _ends_discovery_without_metadata(self, outgoing: Any, response: Any) -> bool:
            """Whether ``response`` ends the SDK's resource metadata discovery with none (its last URL, the
            root one, answered with no metadata and no server error), no authorization server known."""
            if self.context.auth_server_url is not None or outgoing.method != "GET":
                return False
            if outgoing.url != resource_root:
                return False
            self._legacy_issuer = None
            status: int = response.status_code
            if status == 200:  # the SDK goes on without metadata it cannot read, as without any
                return await _unreadable_resource_metadata(response)
            return status < 500 and status != 429

    return Provider(
        server_url,
        client_metadata(authorization.redirect_uri, scope),
        store,
        redirect_handler=authorization.redirect,
        callback_handler=authorization.callback,
        client_metadata_url=store.client_metadata_url,
    )


async def _unreadable_resource_metadata(response: Any) -> bool:
    from mcp.shared.auth import ProtectedResourceMetadata  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    try:
        ProtectedResourceMetadata.model_validate_json(await response.aread())
    except ValidationError:
        return True
    return False


def _origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``url``, lower-case, the port explicit (443 for https, 80 for http)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower().rstrip("."), parts.port or (443 if scheme == "https" else 80)


async def legacy_issuer(answer: Any, server_url: str) -> str | None:
    """The ``issuer`` of 2025-03-26 authorization server metadata hostd holds it to, or None for the SDK's rule.

    ``answer`` is the response (an ``httpx2.Response``) to ``GET <origin>/.well-known/oauth-authorization-server``
    for the MCP server ``server_url``, asked when the server publishes no protected resource metadata (MCP
    authorization 2025-03-26, "Authorization Base URL": the authorization server is the MCP server's origin).

    RFC 8414 section 3.3 holds the ``issuer`` to the identifier the well-known URL was built from; the
    2025-03-26 URL is built from the MCP server's origin, not from an issuer, so what the document can be held
    to is that origin: an issuer on the same scheme, host and port (``<origin>/oauth``) names nothing outside
    the origin hostd fetched it from and the user approved, and is returned (the SDK then requires exactly
    it, and the ``iss`` of the authorization response, RFC 9207, is compared with it). The class this keeps
    closed: *metadata naming another authorization server's issuer* (a mix-up): an issuer on any other
    origin gets None, and the SDK's own rule (the origin exactly) refuses it. A server that publishes
    protected resource metadata never reaches this: its authorization server's metadata is held to the
    issuer that metadata names, exactly (the SDK's rule, unchanged). None also when the answer is not
    200 with valid metadata, or its issuer is the origin itself (the SDK's rule accepts it).
    """
    from mcp.shared.auth import OAuthMetadata  # noqa: PLC0415
    from pydantic import ValidationError  # noqa: PLC0415

    if answer.status_code != 200:
        return None
    try:
        metadata = OAuthMetadata.model_validate_json(await answer.aread())
    except ValidationError:
        return None
    issuer = str(metadata.issuer)
    if _origin(issuer) != _origin(server_url) or urlsplit(issuer).path in ("", "/"):
        return None
    return issuer


def client_metadata(redirect_uri: str, scope: str | None) -> Any:
    """The client metadata hostd registers: a public client (PKCE, no secret) with a loopback redirect."""
    from mcp.shared.auth import OAuthClientMetadata  # noqa: PLC0415

    return OAuthClientMetadata(
        client_name="hostd",
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
