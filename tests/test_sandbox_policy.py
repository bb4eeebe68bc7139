"""The probe, the isolation policy and how it becomes the launch's layers (no plugin runs here)."""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest

import sandbox.launch as launch_module
from sandbox import _landlock, _seccomp
from sandbox.environment import EnvPolicy
from sandbox.launch import DEFAULT_ISOLATION, LaunchError, resolve_launch
from sandbox.policy import (
    LAYER_ORDER,
    IsolationPlan,
    IsolationPolicy,
    IsolationUnavailable,
    landlock_rules,
    plan_layers,
    runtime_read_paths,
)
from sandbox.probe import CAPABILITY_NAMES, Capability, landlock_abi, probe, render_table
from tests.platform_facts import need_layers, platform_offers

#: A private TMPDIR for launches with a policy (a shared /tmp is refused as a plugin TMPDIR).
PRIVATE_TMP = os.path.realpath(tempfile.mkdtemp(prefix="hostd-tests-"))

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox"
PYTHON_DIR = os.path.dirname(os.path.realpath(sys.executable))
HOST_ENV = {"PATH": f"{PYTHON_DIR}:/usr/bin:/bin", "HOME": "/root"}


def caps(*available: str) -> list[Capability]:
    return [Capability(name, name in available, "test") for name in CAPABILITY_NAMES]


ALL = ("shim", "landlock-fs", "landlock-net", "landlock-scope", "netns", "seccomp")


def test_probe_table_is_printed() -> None:
    """Always runs: the table `hostd doctor` shows, for the log of this test run."""
    found = probe()
    table = render_table(found)
    print("\n" + table)
    assert [cap.name for cap in found] == list(CAPABILITY_NAMES)
    assert table.splitlines()[0].split() == ["capability", "available", "detail"]
    assert all(cap.detail for cap in found)
    assert len(table.splitlines()) == len(found) + 1
    if sys.platform.startswith("linux"):
        assert next(cap for cap in found if cap.name == "shim").available


def test_probe_is_cached_and_agrees_with_the_kernel() -> None:
    fresh = probe(refresh=True)
    cached = probe()
    assert cached == fresh
    assert all(a is b for a, b in zip(cached, fresh, strict=True))  # the same results, not probed again
    again = probe(refresh=True)
    assert again == fresh
    assert all(a is not b for a, b in zip(again, fresh, strict=True))  # refresh=True probes anew
    assert landlock_abi() in (0, _landlock.abi_version())
    landlock_fs = next(cap for cap in probe() if cap.name == "landlock-fs")
    assert landlock_fs.available == (landlock_abi() > 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the layers are Linux's")
def test_the_probe_finds_every_layer_the_kernel_offers() -> None:
    """A layer the kernel offers (tests/platform_facts.py asks it directly) and the probe misses would
    silently leave every plugin without it: a regression, not a machine without the layer."""
    layers = ("landlock-fs", "landlock-net", "landlock-scope", "netns", "pidns", "seccomp", "seccomp-net")
    offered = {layer for layer in layers if platform_offers(layer)[0]}
    probed = {cap.name: cap for cap in probe(refresh=True)}
    assert {layer: probed[layer].detail for layer in offered if not probed[layer].available} == {}
    # And the other way: no layer is claimed the kernel does not offer.
    assert {layer for layer in layers if probed[layer].available} <= offered


def test_plan_lists_exactly_the_enforceable_layers() -> None:
    everything = caps(*ALL)
    assert plan_layers(IsolationPolicy(), everything, euid=1000) == (
        "shim",
        "rlimits",
        "no_new_privs",
        "landlock-fs",
        "landlock-scope",
        "seccomp",
    )
    assert plan_layers(IsolationPolicy(network="deny"), everything, euid=1000) == (
        "shim",
        "rlimits",
        "no_new_privs",
        "landlock-fs",
        "landlock-net",
        "landlock-scope",
        "netns",
        "seccomp",
    )
    # Ports: Landlock TCP only (a namespace would cut the granted ports too).
    with_ports = plan_layers(IsolationPolicy(network="deny", allowed_tcp_ports=(443,)), everything, euid=1000)
    assert "landlock-net" in with_ports and "netns" not in with_ports
    # Optional layers are left out when the kernel lacks them or the policy turns them off.
    assert plan_layers(IsolationPolicy(), caps("shim"), euid=1000) == ("shim", "rlimits", "no_new_privs")
    assert plan_layers(IsolationPolicy(landlock=False, seccomp=False), everything, euid=1000) == (
        "shim",
        "rlimits",
        "no_new_privs",
    )
    # Either namespace or Landlock TCP enforces "deny".
    assert "netns" in plan_layers(IsolationPolicy(network="deny", landlock=False), everything, euid=1000)
    assert "landlock-net" in plan_layers(IsolationPolicy(network="deny"), caps("landlock-fs", "landlock-net"))
    # Root gets a user namespace of its own where possible (no capability over the host).
    assert "userns" in plan_layers(IsolationPolicy(), everything, euid=0)
    assert "userns" not in plan_layers(IsolationPolicy(network="deny"), everything, euid=0)
    # The pid namespace, wherever it works, whatever the policy (it is how a tree is ended for sure).
    with_pidns = caps(*ALL, "pidns")
    assert plan_layers(IsolationPolicy(landlock=False, seccomp=False), with_pidns, euid=1000) == (
        "shim",
        "rlimits",
        "no_new_privs",
        "pidns",
    )
    assert plan_layers(IsolationPolicy(network="deny"), with_pidns, euid=1000)[-3:] == ("netns", "pidns", "seccomp")
    assert "pidns" not in plan_layers(IsolationPolicy(), everything, euid=1000)
    for layers in (
        plan_layers(IsolationPolicy(network="deny"), everything, euid=0),
        plan_layers(IsolationPolicy(), with_pidns, euid=0),
    ):
        assert list(layers) == [layer for layer in LAYER_ORDER if layer in layers]


def test_network_deny_that_nothing_can_enforce_is_refused() -> None:
    with pytest.raises(IsolationUnavailable):
        plan_layers(IsolationPolicy(network="deny"), caps("shim", "landlock-fs", "seccomp"))
    with pytest.raises(IsolationUnavailable):
        plan_layers(IsolationPolicy(network="deny", allowed_tcp_ports=(443,)), caps("shim", "netns"))
    with pytest.raises(IsolationUnavailable):  # ports need Landlock, which the policy turned off
        plan_layers(IsolationPolicy(network="deny", allowed_tcp_ports=(443,), landlock=False), caps(*ALL))


def test_policy_validation() -> None:
    assert IsolationPolicy(network="deny", allowed_tcp_ports=(443, 80, 443)).allowed_tcp_ports == (80, 443)
    for bad in (
        {"allowed_tcp_ports": (443,)},  # ports with network "allow"
        {"network": "deny", "allowed_tcp_ports": (0,)},
        {"network": "deny", "allowed_tcp_ports": (70000,)},
        {"network": "maybe"},
        {"max_rss_bytes": 0},
        {"max_cpu_percent": -1.0},
        {"cpu_window_seconds": 0.0},
        {"data_dir": "relative/data"},
        {"extra_read_paths": ("rel",)},
    ):
        with pytest.raises(ValueError):
            IsolationPolicy(**bad)


def test_resolve_launch_with_a_policy(tmp_path: Path) -> None:
    data = tmp_path / "deep" / "data"
    policy = IsolationPolicy(data_dir=str(data))
    launch = resolve_launch(
        "python3",
        ["echo.py"],
        FIXTURES,
        {},
        EnvPolicy(),
        host_env=HOST_ENV,
        tmpdir=PRIVATE_TMP,
        isolation_policy=policy,
    )
    assert launch.isolation == plan_layers(policy, probe())
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert launch.plan is not None
    assert dataclasses.replace(launch.plan, rules=()) == IsolationPlan(tmpdir=PRIVATE_TMP, data_dir=str(data.resolve()))
    if platform_offers("landlock-fs")[0]:  # the kernel's word: a plan that lost Landlock fails here
        assert "landlock-fs" in launch.isolation
        rules = launch.plan.rule_lists()
        assert rules["write"] == [PRIVATE_TMP, str(data.resolve())]
        assert all(os.path.realpath(p) == p for p in rules["read"] + rules["write"])
    plain = resolve_launch("python3", ["echo.py"], FIXTURES, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir=PRIVATE_TMP)
    assert plain.isolation == DEFAULT_ISOLATION and plain.plan is None
    if launch.isolation != plain.isolation:
        assert launch.digest != plain.digest
    # The data folder's location is host-dependent: not in the digest.
    other = resolve_launch(
        "python3",
        ["echo.py"],
        FIXTURES,
        {},
        EnvPolicy(),
        host_env=HOST_ENV,
        tmpdir=PRIVATE_TMP,
        isolation_policy=IsolationPolicy(data_dir=str(tmp_path / "elsewhere")),
    )
    assert other.digest == launch.digest


def test_digest_covers_granted_tcp_ports() -> None:
    need_layers("landlock-net")

    def digest(ports: tuple[int, ...]) -> str:
        policy = IsolationPolicy(network="deny", allowed_tcp_ports=ports)
        launch = resolve_launch(
            "python3",
            ["echo.py"],
            FIXTURES,
            {},
            EnvPolicy(),
            host_env=HOST_ENV,
            tmpdir=PRIVATE_TMP,
            isolation_policy=policy,
        )
        return launch.digest

    assert digest((443,)) == digest((443,))
    assert digest((443,)) != digest((443, 8080))


def test_unenforceable_policy_is_a_launch_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_module, "probe", lambda: caps("shim"))
    with pytest.raises(LaunchError) as info:
        resolve_launch(
            "python3",
            ["echo.py"],
            FIXTURES,
            {},
            EnvPolicy(),
            host_env=HOST_ENV,
            tmpdir=PRIVATE_TMP,
            isolation_policy=IsolationPolicy(network="deny"),
        )
    assert info.value.kind == "ISOLATION_UNAVAILABLE"
    assert "network" in str(info.value)


def test_landlock_rules_cover_the_runtime_and_nothing_of_home(tmp_path: Path) -> None:
    plan = IsolationPlan(tmpdir=str(tmp_path / "tmp"), data_dir=str(tmp_path / "data"))
    python = os.path.join(PYTHON_DIR, "python3")
    rules = landlock_rules(executable=python, plugin_dir=str(FIXTURES), path_env=HOST_ENV["PATH"], plan=plan)
    prefix = os.path.dirname(PYTHON_DIR)
    assert os.path.join(prefix, "lib") in rules["read"]
    assert str(FIXTURES) in rules["read"] and "/usr" in rules["read"]
    assert "/etc" not in rules["read"] and "/etc/ssl" in rules["read"]
    assert rules["write"] == [plan.tmpdir, plan.data_dir]
    # A script with "#!/usr/bin/env node" brings in node's prefix; ~/bin/x never opens all of ~.
    script = tmp_path / "bin" / "tool"
    script.parent.mkdir()
    script.write_text("#!/usr/bin/env python3\n")
    found = runtime_read_paths(str(script), HOST_ENV["PATH"], home=str(tmp_path))
    assert str(tmp_path) not in found and str(script.parent) in found
    assert os.path.join(prefix, "lib") in found


def test_seccomp_filter_shape() -> None:
    program = _seccomp.build_filter("x86_64", deny_unix_sockets=True)
    assert len(program) % 8 == 0 and len(program) // 8 < 200
    assert len(_seccomp.build_filter("aarch64")) < len(program)
