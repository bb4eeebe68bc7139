"""Which plugins get the ``netproxy`` layer (sandbox/policy.py ``plan_layers``; issue 26), and what ``hostd
doctor`` says about it. Sans-IO: the machine's capabilities are given.

The class: *an allowlist believed enforced where it is not, or a plugin without one whose network changed*.
Members: an allowlist with namespaces (netns, netproxy, seccomp-net; no Landlock TCP rule that would cut the
proxy's port), without netns or without pidns (the level's network, unchanged), under ``basic`` (nothing), an
empty allowlist (enforced: reaches nothing), and policies without an allowlist under both levels (as before).
"""

from __future__ import annotations

import dataclasses

from hostd.cli.hostd import domain_filtering_line
from sandbox.netns import PROXY_PORT, proxy_environment
from sandbox.policy import IsolationPolicy, plan_layers
from sandbox.probe import CAPABILITY_NAMES, Capability

ALL = ("shim", "landlock-fs", "landlock-net", "landlock-scope", "netns", "pidns", "seccomp", "seccomp-net")
BASE = ("shim", "rlimits", "no_new_privs", "landlock-fs", "landlock-scope")


def caps(*available: str) -> list[Capability]:
    return [Capability(name, name in available, "test") for name in CAPABILITY_NAMES]


STANDARD = IsolationPolicy(network="allow")
STRICT = IsolationPolicy(network="deny")


def test_an_allowlist_gets_the_proxy_layer_where_namespaces_work() -> None:
    for level in (STANDARD, STRICT):
        for hosts in ((), ("api.example.com",)):
            policy = dataclasses.replace(level, proxy_hosts=hosts)
            assert plan_layers(policy, caps(*ALL), euid=1000) == (
                *BASE[:4],
                "landlock-scope",
                "netns",
                "netproxy",
                "pidns",
                "seccomp",
                "seccomp-net",
            )


def test_without_namespaces_or_under_basic_the_levels_network_stays() -> None:
    proxied = dataclasses.replace(STANDARD, proxy_hosts=("api.example.com",))
    for missing in ("netns", "pidns"):
        have = caps(*(c for c in ALL if c != missing))
        assert "netproxy" not in plan_layers(proxied, have, euid=1000)
        assert plan_layers(proxied, have, euid=1000) == plan_layers(STANDARD, have, euid=1000)
    strict_proxied = dataclasses.replace(STRICT, proxy_hosts=("api.example.com",))
    no_netns = caps(*(c for c in ALL if c != "netns"))
    assert plan_layers(strict_proxied, no_netns, euid=1000) == plan_layers(STRICT, no_netns, euid=1000)
    basic = IsolationPolicy(landlock=False, seccomp=False, proxy_hosts=("api.example.com",))
    assert "netproxy" not in plan_layers(basic, caps(*ALL), euid=1000)


def test_policies_without_an_allowlist_plan_as_before() -> None:
    assert plan_layers(STANDARD, caps(*ALL), euid=1000) == (*BASE, "pidns", "seccomp")
    assert plan_layers(STRICT, caps(*ALL), euid=1000) == (
        *BASE[:4],
        "landlock-net",
        "landlock-scope",
        "netns",
        "pidns",
        "seccomp",
        "seccomp-net",
    )


def test_the_proxy_variables_and_the_doctor_line() -> None:
    url = f"http://127.0.0.1:{PROXY_PORT}"
    assert proxy_environment() == {
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "http_proxy": url,
        "https_proxy": url,
        "NO_PROXY": "",
        "no_proxy": "",
        "NODE_USE_ENV_PROXY": "1",
    }
    assert domain_filtering_line(caps(*ALL)).startswith("domain filtering: yes - ")
    assert domain_filtering_line(caps(*(c for c in ALL if c != "pidns"))) == (
        "domain filtering: no - netns or pidns is unavailable: a plugin's network allowlist is not enforced, it "
        "has the sandbox level's network (standard: all, strict: none), as launch.capabilities.network says\n"
        "  preparation: not filtered either - an installer may reach any host, not only the registries in use\n"
    )
