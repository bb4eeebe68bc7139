"""Preparation's network (issue 26): an installer reaches only the registries in use, through hostd's proxy.

The fault class this module closes: *an installer led to a host that is not a registry*. Members: an index page
or a packument naming a file on another host (a hostile or compromised mirror, a dependency's tarball URL), a
lockfile's ``resolved`` URL, package code that runs during an allowed build and opens its own connection, a
redirect. Package text cannot name a source (the grammar of :mod:`hostd.install.packages`), but what a registry
answers is attacker input too; so every installer run (npm, uv, deno, the bytecode compile: whatever
``_INSTALLERS`` holds) runs under the ``netproxy`` layer the plugins use (``sandbox/netns.py``): its own network
namespace whose only way out is hostd's proxy (:class:`hostd.install.registry_proxy.RegistryProxy`), whose
allowlist is exactly the registries of that run (:func:`registry_hosts`), nothing granted, nobody asked.

Which hosts, per run (:func:`registry_hosts` of the URLs the installer is given):

- npm (and a Python package's bundled JavaScript helper): the npm registry's host (``registry.npmjs.org:443``
  or the configured mirror's), whose packuments name tarballs on that host;
- uv: the index's host; for PyPI proper (``pypi.org``) also ``files.pythonhosted.org``, where PyPI's pages link
  every file (:data:`FILE_HOSTS`, the known pairs). A mirror is taken to serve its files itself (its host only):
  one whose pages link files on another host fails with that host named (reason ``host-refused``);
- deno: ``npm:`` modules the npm registry; ``jsr:`` modules JSR (``jsr.io:443`` or ``JSR_URL``'s host) and the npm
  registry (a JSR package may depend on npm packages);
- ``uv venv`` and the bytecode compile: none (they fetch nothing).

The port is the URL's (443 for ``https://``, 80 only for an ``http://`` mirror). The registries are hostd's own
configuration (defaults, ``--npm-registry``, ``--python-index``, ``npm_config_registry``, ``UV_INDEX_URL``,
``JSR_URL``), never package text, so each of their names may resolve to any address (``private``): a machine
whose resolver maps a registry to an internal mirror (this project's CI maps ``registry.npmjs.org`` to a
documentation address) prepares as before.

Each refusal is the proxy's HTTP answer to the installer, one ``log`` line per refused destination and
preparation (``"network: refused HOST:PORT (STATUS): REASON"``; hostd sends it to the parent as the plugin's
``plugins/log``), and, when the installer then fails, the :class:`~hostd.install.packages.PrepareError`
(:meth:`InstallerNetwork.failure`: ``host-refused`` naming the host and the registries in use; a registry the
proxy could not reach: ``unreachable`` with the proxy's words).

Where ``netproxy`` cannot be planned (no unprivileged user, network and pid namespaces on this kernel) or hostd's
own environment names a proxy (``HTTPS_PROXY``...: hostd's proxy does not chain to another), the installer keeps
today's network and the first progress line says so (:func:`network_words`): never silently weaker. The
installer's sandbox does not follow ``--sandbox`` (issue 23: ``basic`` does not weaken preparation).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import trio

from hostd.install.packages import PrepareError
from hostd.net.allowlist import Allowlist, EntryError, canonical_host, host_port, parse_entry

__all__ = [
    "FILE_HOSTS",
    "InstallerNetwork",
    "RegistryHosts",
    "network_words",
    "registry_hosts",
    "upstream_proxy",
]

#: Registries whose pages link their files on a second host, as the registry itself does it: PyPI's simple index
#: links every file on ``files.pythonhosted.org``. Only these known pairs; a mirror serves its files itself.
FILE_HOSTS: Mapping[str, tuple[str, ...]] = {"pypi.org:443": ("files.pythonhosted.org:443",)}
#: hostd's variables that name a proxy of its own network (the installer then keeps it: module text).
UPSTREAM_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
#: Refused destinations kept per preparation (the first ones; the log and the error name these).
MAX_REFUSED = 32


@dataclass(frozen=True)
class RegistryHosts:
    """The allowlist of one installer run: ``tool`` (``"npm"``, ``"uv"``, ``"deno"``: the words of a refusal) and
    ``entries`` (canonical ``host:port``, in the order the registries were given). Build with
    :func:`registry_hosts`."""

    tool: str
    entries: tuple[str, ...] = ()

    @property
    def private(self) -> tuple[str, ...]:
        """The names among :attr:`entries` (hostd's own registries may resolve to any address: module text)."""
        return tuple(dict.fromkeys(e.host for e in map(parse_entry, self.entries) if e.address is None))

    def allowlist(self) -> Allowlist:
        """The proxy's :class:`~hostd.net.allowlist.Allowlist` of these registries."""
        return Allowlist.parse(self.entries, self.private)

    def shown(self) -> str:
        """The entries for people: ``"registry.npmjs.org:443"``, comma-separated; ``"none"`` when empty."""
        return ", ".join(self.entries) or "none"


def registry_hosts(tool: str, urls: Iterable[str]) -> RegistryHosts:
    """The allowlist of an installer run given the registry ``urls`` (``https://registry.npmjs.org/``, a mirror).

    Each URL's host with its port (the URL's, else 443 for ``https``, 80 for ``http``), followed by the hosts
    :data:`FILE_HOSTS` pairs with it. Raises :class:`PrepareError` ``"failed"`` for a URL that is not ``http(s)``
    with a host (a mistyped ``--npm-registry``: nothing would be reachable). Source: issue 26 ("Preparation").
    """
    entries: list[str] = []
    for url in urls:
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("not an http:// or https:// URL with a host")
            name, _ = canonical_host(parts.hostname)
            entry = parse_entry(host_port(name, port)).text
        except (ValueError, EntryError) as exc:  # EntryError is a ValueError; both spelled for the reader
            raise PrepareError("failed", f"registry {url[:200]!r} cannot be used: {exc}") from None
        entries += [entry, *FILE_HOSTS.get(entry, ())]
    return RegistryHosts(tool, tuple(dict.fromkeys(entries)))


def upstream_proxy(environ: Mapping[str, str]) -> str | None:
    """The first of :data:`UPSTREAM_PROXY_VARS` set in ``environ`` (hostd's own network needs that proxy), or None."""
    return next((name for name in UPSTREAM_PROXY_VARS if environ.get(name)), None)


def network_words(hosts: RegistryHosts, proxied: bool, environ: Mapping[str, str]) -> str:
    """What the first progress line says of the installer's network: ``"network: H only, through hostd's proxy"``,
    or why it is not filtered (``proxied`` False: the ``netproxy`` layer cannot be planned here, or ``environ``
    names a proxy, :func:`upstream_proxy`)."""
    if proxied:
        return f"network: {hosts.shown()} only, through hostd's proxy"
    upstream = upstream_proxy(environ)
    if upstream is not None:
        return (
            f"network: not filtered: hostd's environment names a proxy ({upstream}), which the installer uses; "
            "hostd's proxy does not chain to it"
        )
    return (
        "network: not filtered: no unprivileged user, network and pid namespaces here, so the installer may reach "
        "any host, not only the registries"
    )


class InstallerNetwork:
    """What one preparation's installer runs did on the network (a record shared by its runs).

    ``log``: awaited with each refusal's line (hostd: the plugin's ``plugins/log``); ``reached``: connections the
    proxy let through, by ``host:port``; ``refused``: the refusals (``{host, port, status, reason}``, the first
    :data:`MAX_REFUSED` destinations, once each); ``run_refused``: those of the current run only.
    """

    def __init__(self, log: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.log = log
        self.reached: dict[str, int] = {}
        self.refused: list[dict[str, Any]] = []
        self.run_refused: list[dict[str, Any]] = []

    def summary(self) -> str:
        """``" (through hostd's proxy: H, N connections; ...)"``, or ``""`` when nothing went through it."""
        if not self.reached:
            return ""
        counts = "; ".join(f"{host}, {n} connection{'s' if n != 1 else ''}" for host, n in self.reached.items())
        return f" (through hostd's proxy: {counts})"

    def record(self, refusal: dict[str, Any], nursery: trio.Nursery) -> None:
        """Keep ``refusal`` (once per destination and status) and send its log line from ``nursery``. Not blocking."""
        key = (refusal["host"], refusal["port"], refusal["status"])
        if any((r["host"], r["port"], r["status"]) == key for r in self.refused) or len(self.refused) >= MAX_REFUSED:
            return
        self.refused.append(refusal)
        self.run_refused.append(refusal)
        if self.log is not None:
            where = f"{refusal['host']}:{refusal['port']}" if refusal["host"] else "a connection"
            nursery.start_soon(self.log, f"network: refused {where} ({refusal['status']}): {refusal['reason']}")

    def failure(self, what: str, hosts: RegistryHosts, registry: str, output: Sequence[str]) -> PrepareError | None:
        """The :class:`PrepareError` of a failed run whose proxy refused something, or None (the installer's own
        words then decide): a host outside the registries (``403``) is ``"host-refused"`` naming it; a registry
        the proxy could not reach (``502``/``504``) is ``"unreachable"`` with the proxy's reason."""
        outside = [r for r in self.run_refused if r["status"] == 403 and r["host"]]
        if outside:
            shown = host_port(outside[0]["host"], outside[0]["port"])
            return PrepareError(
                "host-refused",
                f"{what}: {hosts.tool} tried to reach {shown}, which is not one of the registries in use "
                f"({hosts.shown()})",
                output=list(output)[-20:],
                registry=registry,
            )
        down = [r for r in self.run_refused if r["status"] in (502, 504)]
        if down:
            return PrepareError(
                "unreachable",
                f"{what}: cannot reach {registry}: {down[0]['reason']}",
                output=list(output)[-20:],
                registry=registry,
            )
        return None
