"""Remote plugins: what the user approves about a server hostd reaches over HTTP, and the rules it must meet.

Theory of operation
-------------------
A manifest whose ``backend.transport`` is ``streamable-http`` or ``sse`` names a
``url`` instead of a ``command`` (hostd/install/manifest.py). Nothing is spawned and no
sandbox applies, so what the user approves is the *endpoint*: the transport,
the URL, the names of the headers hostd sends (their values may be secrets and
are never shown), the hosts allowed to be private and the protocol era. These
form a :class:`RemoteLaunch`, a :class:`sandbox.launch.Launch` whose digest
covers exactly them, so the trust gate, ``plugins/approve`` and the stored
approval work unchanged: change the URL, add a header or allow another private
host, and the approval is void.

Two rules guard where hostd's own HTTP requests may go (the class: *a request
hostd makes on a manifest's behalf must not reach what the user did not name*):

- :func:`url_problem`, at manifest validation: ``https`` only, except plain
  ``http`` to a loopback address written literally (``127.0.0.1``, ``[::1]``,
  ``localhost``); no user name or password in the URL (it would be a secret
  outside the secret store); no fragment.
- :func:`address_problem`, at every connection (hostd/mcp/transport/http.py): every
  address the host name resolves to must be public, or loopback when the URL
  names loopback literally, or the host must be listed in
  ``backend.allow_private``. A public name that resolves to ``10.0.0.5``,
  ``169.254.169.254`` (cloud metadata), ``fe80::1`` or ``127.0.0.1`` is refused,
  and so is any spelling of them (``2130706433``, ``0x7f.1``,
  ``::ffff:127.0.0.1``, ``64:ff9b::a9fe:a9fe``): the rule judges the numeric
  addresses ``getaddrinfo`` answers. The connection goes to an address this
  rule passed, from the same lookup (hostd/remote/connect.py), so a DNS answer that
  changes between the check and the connection (rebinding) reaches nothing.

Header values of the form ``${secret:NAME}`` are resolved at connection time by
:func:`resolve_headers` through the lookup the host passes in (its secret store,
hostd/storage/secrets.py: ``SecretStore.get``); resolved values join the link's redactor so they
appear in no log line, error or status.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

from hostd.net.allowlist import address_kind
from sandbox.environment import is_secret_name
from sandbox.launch import Launch, LaunchError

__all__ = [
    "LOOPBACK_NAMES",
    "SECRET_REFERENCE",
    "RemoteLaunch",
    "RemoteTarget",
    "address_problem",
    "is_remote",
    "looks_secret",
    "resolve_headers",
    "resolve_remote",
    "url_problem",
]

#: Host names that mean this machine without a DNS lookup (RFC 6761 reserves ``localhost``).
LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.", "127.0.0.1", "::1"})

#: A header value that is a reference to a secret: ``${secret:NAME}`` (the whole value or part of it).
SECRET_REFERENCE: Final = re.compile(r"\$\{secret:([A-Za-z_][A-Za-z0-9_.-]*)\}")


#: How a ``${secret:NAME}`` reference is resolved: ``(plugin id, NAME) -> value``, or None when there is no
#: such secret (``SecretStore.get`` of hostd/storage/secrets.py has this shape).
SecretLookup = Callable[[str, str], str | None]


def looks_secret(header: str) -> bool:
    """Whether a header's value is a credential by its name (``Authorization``, ``Cookie``, ``X-Api-Key``...)."""
    lowered = header.lower()
    return lowered in ("authorization", "proxy-authorization", "cookie") or is_secret_name(header.replace("-", "_"))


def is_remote(transport: str) -> bool:
    """Whether ``transport`` (manifest ``backend.transport``) reaches a server over the network."""
    return transport in ("streamable-http", "sse")


def _host_is_loopback_literal(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(url: str) -> str | None:
    """Why ``url`` may not be a remote plugin's endpoint, or None when it may.

    Refused: a scheme other than ``https`` (``http`` only to a loopback host
    written literally), no host, a user name or password, a fragment, a
    control character or space, an invalid port. Pure: no DNS lookup (that is
    :func:`address_problem`, at connection time).
    """
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL: {exc}"
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in ("https", "http"):
        return f"must be an https URL (got scheme {parts.scheme!r})" if scheme else "must be an absolute https URL"
    if not host:
        return "has no host"
    if parts.username is not None or parts.password is not None:
        return "must not hold a user name or password (use a header with a ${secret:NAME} value)"
    if parts.fragment:
        return "must not have a fragment ('#...')"
    if port == 0:
        return "has port 0"
    if scheme == "http" and not _host_is_loopback_literal(host):
        return f"must use https: plain http is allowed only to a loopback address (127.0.0.1, [::1]), not {host!r}"
    return None


def address_problem(host: str, addresses: list[str], allow_private: list[str]) -> str | None:
    """Why hostd may not connect to ``host`` resolving to ``addresses``, or None when it may.

    ``addresses`` are IP address strings (from ``getaddrinfo``). A host listed
    in ``allow_private`` (the manifest's ``backend.allow_private``, approved
    with the launch) may resolve to anything. A host written as a loopback
    literal may resolve to loopback addresses only. Otherwise every address
    must be public: one loopback, private, link-local, multicast, reserved or
    unspecified address refuses the whole host (the client could pick it).
    """
    if not addresses:
        return f"{host} resolves to no address"
    if host.lower().rstrip(".") in {h.lower().rstrip(".") for h in allow_private}:
        return None
    loopback_ok = _host_is_loopback_literal(host)
    for address in addresses:
        kind = address_kind(address)
        if kind is None or (kind == "loopback" and loopback_ok):
            continue
        return (
            f"{host} resolves to the {kind} address {address}; hostd reaches a {kind} address only when the "
            f"manifest names the host in backend.allow_private (and the user approves it)"
        )
    return None


def resolve_headers(
    plugin_id: str, headers: Mapping[str, str], lookup: SecretLookup
) -> tuple[dict[str, str], list[str]]:
    """``(headers with every ${secret:NAME} replaced, the secret values used)``.

    ``lookup`` is the host's secret store, asked for this plugin's secrets only.
    Raises :class:`LookupError` naming the first secret ``lookup``
    does not know (the message names the header and the secret, never a value).
    """
    resolved: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in headers.items():

        def substitute(match: re.Match[str], header: str = name) -> str:
            secret = lookup(plugin_id, match.group(1))
            if secret is None:
                raise LookupError(
                    f"{header if header.startswith('backend.') else 'header ' + header}: no secret named "
                    f"{match.group(1)!r} (set it with plugins/configure)"
                )
            secrets.append(secret)
            return secret

        resolved[name] = SECRET_REFERENCE.sub(substitute, value)
    return resolved, secrets


@dataclass(frozen=True)
class RemoteTarget:
    """What the user approves about a remote server (everything :attr:`RemoteLaunch.digest` covers).

    ``transport`` is ``"streamable-http"`` or ``"sse"``; ``header_names`` are
    sorted; ``literal_headers`` the header values that hold no secret
    reference (shown and covered; a value with a reference is shown as its
    reference only); ``allow_private`` the hosts that may be private.
    """

    transport: str
    url: str
    header_names: tuple[str, ...]
    literal_headers: tuple[tuple[str, str], ...]
    allow_private: tuple[str, ...]
    protocol: str
    #: ``(("clientId", ...), ("clientSecret", reference), ("scope", ...))`` as the manifest's backend.oauth has them.
    oauth: tuple[tuple[str, str], ...] = ()

    def describe(self) -> dict[str, Any]:
        """JSON-ready: ``{transport, url, headers: {name: value-or-null}, allowPrivate, protocol}``.

        A header whose value is (or holds) a secret reference, or whose name looks
        secret (``Authorization``, ``Cookie``, ``*-Token``, ``*Key*``...), shows
        ``null``; the digest still covers a literal value.
        """
        literal = {k: v for k, v in self.literal_headers if not looks_secret(k)}
        return {
            "transport": self.transport,
            "url": self.url,
            "headers": {name: literal.get(name) for name in self.header_names},
            "allowPrivate": list(self.allow_private),
            "protocol": self.protocol,
            "oauth": dict(self.oauth) if self.oauth else None,
        }


@dataclass(frozen=True)
class RemoteLaunch(Launch):
    """A :class:`~sandbox.launch.Launch` for a remote server: nothing runs locally.

    ``command`` is the transport, ``executable`` the URL, ``cwd`` the plugin
    folder; no environment, no isolation layers (the server runs elsewhere).
    :attr:`digest` covers :attr:`endpoint`, and ``network`` when the plugin has an allowlist (issue 26: the hosts
    hostd sends this remote server's requests to).
    """

    endpoint: RemoteTarget = field(default=RemoteTarget("streamable-http", "", (), (), (), "auto"))

    @property
    def digest(self) -> str:
        """``"sha256:<64 hex>"`` over the endpoint's canonical JSON (transport, URL, header names, ...)."""
        payload: dict[str, object] = {"remote": self.endpoint.describe(), "v": 1}
        if self.network is not None:
            payload["network"] = {"hosts": list(self.network[0]), "private": list(self.network[1])}
        text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()

    def describe(self) -> dict[str, object]:
        """:meth:`Launch.describe` with ``remote`` (:meth:`RemoteTarget.describe`) added."""
        info = super().describe()
        info["digest"] = self.digest
        info["remote"] = self.endpoint.describe()
        return info


class RemoteOAuth(Protocol):
    """A remote backend's OAuth settings as read here (the manifest's ``backend.oauth``)."""

    @property
    def client_id(self) -> str | None: ...

    @property
    def client_secret(self) -> str | None: ...

    @property
    def scope(self) -> str | None: ...


class RemoteBackend(Protocol):
    """The fields of a manifest's ``backend`` a remote launch is resolved from.

    :class:`hostd.install.manifest.Backend` satisfies it; the manifest model is not imported here (the
    install layer, which holds it, sits above this one: docs/architecture.md).
    """

    @property
    def transport(self) -> str: ...

    @property
    def url(self) -> str | None: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def allow_private(self) -> Collection[str]: ...

    @property
    def protocol(self) -> str: ...

    @property
    def oauth(self) -> RemoteOAuth | None: ...


def _oauth_items(backend: RemoteBackend) -> tuple[tuple[str, str], ...]:
    oauth = backend.oauth
    if oauth is None:
        return ()
    items = {"clientId": oauth.client_id, "clientSecret": oauth.client_secret, "scope": oauth.scope}
    return tuple((key, value) for key, value in items.items() if value is not None)


def resolve_remote(backend: RemoteBackend, folder: str) -> RemoteLaunch:
    """The :class:`RemoteLaunch` of a remote manifest (no I/O).

    Raises :class:`~sandbox.launch.LaunchError` (``ENV_POLICY``) when ``url``
    breaks :func:`url_problem` (a manifest loaded through hostd.install.manifest
    never does).
    """
    transport, url, headers = backend.transport, backend.url or "", backend.headers
    problem = url_problem(url)
    if problem is not None:
        raise LaunchError("ENV_POLICY", transport, f"backend.url {problem}")
    literal = tuple(sorted((k, v) for k, v in headers.items() if SECRET_REFERENCE.search(v) is None))
    endpoint = RemoteTarget(
        transport=transport,
        url=url,
        header_names=tuple(sorted(headers)),
        literal_headers=literal,
        allow_private=tuple(sorted(backend.allow_private)),
        protocol=backend.protocol,
        oauth=_oauth_items(backend),
    )
    return RemoteLaunch(
        command=transport,
        executable=url,
        args=(),
        cwd=folder,
        env={},
        isolation=(),
        manifest_env={},
        endpoint=endpoint,
    )
