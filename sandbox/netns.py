"""The ``netproxy`` layer (issue 26): a plugin in its own network namespace whose only way out is hostd's proxy.

A launch with ``netproxy`` (planned by :func:`sandbox.policy.plan_layers` for a policy with an allowlist, where
unprivileged user, network and pid namespaces work) runs in a network namespace with nothing but its own
loopback: no route out, no DNS. The shim opens ``127.0.0.1:``:data:`PROXY_PORT` inside it and hands the listener
to hostd (``sandbox/_shim_net.py``), whose proxy (:mod:`hostd.net.proxy`) decides every connection. The plugin
finds the proxy through :func:`proxy_environment`:

- Python (``urllib``, ``requests``, ``httpx``, ``aiohttp`` with ``trust_env``), curl, pip, uv, npm, git, Go's
  ``net/http`` and Deno read ``HTTP_PROXY`` / ``HTTPS_PROXY`` (or the lowercase names);
- Node.js reads them in ``fetch`` and ``http``/``https`` only with ``NODE_USE_ENV_PROXY=1`` (Node 24.5+ and
  22.21+); an older Node's built-in clients ignore them and need a proxy-aware agent: inside the namespace a
  direct connection fails (nothing answers), it never reaches the network;
- a client that resolves names itself fails at resolution (no DNS in the namespace) and must use the proxy.

``NO_PROXY`` is emptied: every destination, loopback names included, goes through the proxy's allowlist.
"""

from __future__ import annotations

__all__ = ["PROXY_PORT", "proxy_environment"]

#: The proxy's port on the loopback of the plugin's network namespace (any port would do: the namespace is the
#: plugin's own; 3128 is the conventional proxy port).
PROXY_PORT = 3128


def proxy_environment(port: int = PROXY_PORT) -> dict[str, str]:
    """The variables that point a plugin's clients at the proxy on ``127.0.0.1:port`` (module text)."""
    url = f"http://127.0.0.1:{port}"
    return {
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "",
        "no_proxy": "",
        "NODE_USE_ENV_PROXY": "1",
    }
