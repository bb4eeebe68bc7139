"""Which hosts an installer may reach, and what preparation says of its network (issue 26; sans-IO).

hostd/install/installer_network.py: the allowlist of an installer run is exactly the registries in use
(:func:`registry_hosts`: the URL's host and port, PyPI's files' host with it); where hostd's proxy cannot be
used (no namespaces here, or hostd's environment names a proxy of its own) the first progress line says the
network is not filtered. The real runs through the proxy: tests/test_prepare.py (npm, uv from the real
registries) and tests/test_prepare_sandbox.py (a host outside the registries refused, a direct connection
failing inside the namespace).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hostd.install.ecosystems import Registries, installer_hosts
from hostd.install.installer_network import network_words, registry_hosts
from hostd.install.installers import InstallerSandbox
from hostd.install.packages import PrepareError, parse_package_launch
from sandbox.probe import CAPABILITY_NAMES, Capability


def caps(*missing: str) -> list[Capability]:
    return [Capability(name, name not in missing, "test") for name in CAPABILITY_NAMES]


@pytest.mark.parametrize(
    ("command", "args", "registries", "entries"),
    [
        ("npx", ["-y", "left-pad@1.3.0"], Registries(), ("registry.npmjs.org:443",)),
        ("uvx", ["mcp-server-time==1.0"], Registries(), ("pypi.org:443", "files.pythonhosted.org:443")),
        ("deno", ["run", "npm:left-pad@1.3.0"], Registries(), ("registry.npmjs.org:443",)),
        ("deno", ["run", "jsr:@std/x@1.0.0"], Registries(), ("jsr.io:443", "registry.npmjs.org:443")),
        # A mirror: its own host and port only (80 for http://), whatever letter case or IDNA spelling.
        ("npx", ["-y", "x@1.0.0"], Registries(npm="http://Mirror.Example.:8080/npm/"), ("mirror.example:8080",)),
        ("uvx", ["x==1.0"], Registries(python="http://10.0.0.5/simple"), ("10.0.0.5:80",)),
        ("uvx", ["x==1.0"], Registries(python="https://[::1]/simple"), ("[::1]:443",)),
        ("uvx", ["x==1.0"], Registries(python="https://pypi.org:8443/simple"), ("pypi.org:8443",)),
        (
            "deno",
            ["run", "jsr:@s/x@1.0.0"],
            Registries(jsr="http://127.0.0.1:4507/"),
            ("127.0.0.1:4507", "registry.npmjs.org:443"),
        ),
    ],
)
def test_an_installer_may_reach_exactly_the_registries_in_use(
    command: str, args: list[str], registries: Registries, entries: tuple[str, ...]
) -> None:
    launch = parse_package_launch(command, args)
    assert launch is not None
    hosts = installer_hosts(launch, registries)
    assert hosts.entries == entries
    assert hosts.tool == launch.manager
    # hostd's own registries may resolve to any address (their names, never an address entry).
    assert hosts.private == tuple(e.rsplit(":", 1)[0] for e in entries if not e[0].isdigit() and e[0] != "[")


@pytest.mark.parametrize("url", ["ftp://mirror.example/", "file:///srv/npm", "https:///npm", "https://a b/", "x"])
def test_a_registry_url_that_names_no_http_host_is_refused(url: str) -> None:
    with pytest.raises(PrepareError) as refused:
        registry_hosts("npm", [url])
    assert refused.value.reason == "failed"
    assert str(refused.value).startswith(f"registry {url!r} cannot be used: ")


def test_where_the_proxy_cannot_be_used_the_first_progress_line_says_the_network_is_not_filtered(
    tmp_path: Path,
) -> None:
    """(c) of issue 26's preparation: never silently weaker. The words for each case, from the same decision
    prepare() takes (InstallerSandbox.proxied with the machine's capabilities)."""
    sandbox = InstallerSandbox(tmp_path / "state", tmp_path / "state" / "prepared" / "p", (str(tmp_path),))
    hosts = registry_hosts("npm", ["https://registry.npmjs.org/"])
    assert sandbox.proxied(hosts, {}, caps()) is True
    assert network_words(hosts, True, {}) == "network: registry.npmjs.org:443 only, through hostd's proxy"
    for missing in ("netns", "pidns"):
        assert sandbox.proxied(hosts, {}, caps(missing)) is False
    assert network_words(hosts, False, {}) == (
        "network: not filtered: no unprivileged user, network and pid namespaces here, so the installer may reach "
        "any host, not only the registries"
    )
    upstream = {"https_proxy": "http://proxy.corp:3128"}
    assert sandbox.proxied(hosts, upstream, caps()) is False
    assert network_words(hosts, False, upstream) == (
        "network: not filtered: hostd's environment names a proxy (https_proxy), which the installer uses; "
        "hostd's proxy does not chain to it"
    )
