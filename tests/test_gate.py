"""The trust gate as a pure function (hostd/host/gate.py): each input that must refuse a start, each that
must allow it, the order of the refusals; no process, no host, no file."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hostd.host.gate import Allowed, GateInputs, decide
from hostd.install.packages import parse_package_launch
from hostd.wire.errors import ErrorKind, HostError

LAUNCH = {"command": "/usr/bin/python3", "args": ["server.py"], "digest": "sha256:launch"}
PACKAGE = parse_package_launch("npx", ["-y", "left-pad@1.3.0"])

#: Everything in order: declared permissions granted, nothing to configure or prepare, the launch approved.
READY = GateInputs(
    plugin_id="demo",
    permissions=("demo.read", "demo.write"),
    granted=frozenset({"demo.read", "demo.write"}),
    config_problem=None,
    config_missing=(),
    unpreparable=None,
    package=None,
    prepared=False,
    has_state=True,
    approved_digest="sha256:approved",
    digest="sha256:approved",
    launch=LAUNCH,
    trust_development=False,
)


def with_(**changes: Any) -> GateInputs:
    return dataclasses.replace(READY, **changes)


def refusal(inputs: GateInputs) -> HostError:
    decision = decide(inputs)
    assert isinstance(decision, HostError), decision
    return decision


# -- what allows ---------------------------------------------------------------------------------------


def test_an_approved_launch_with_every_permission_granted_starts() -> None:
    assert decide(READY) == Allowed(approved=True)


def test_a_plugin_that_declares_no_permission_needs_no_grant() -> None:
    assert decide(with_(permissions=(), granted=frozenset())) == Allowed(approved=True)


def test_the_client_feature_permissions_need_no_grant() -> None:
    inputs = with_(permissions=("demo.read", "mcp.sampling", "mcp.elicitation", "mcp.roots"))
    assert decide(inputs) == Allowed(approved=True)


def test_a_grant_beyond_the_declared_permissions_changes_nothing() -> None:
    assert decide(with_(granted=frozenset({"demo.read", "demo.write", "other.x"}))) == Allowed(approved=True)


def test_a_prepared_package_starts() -> None:
    assert decide(with_(package=PACKAGE, prepared=True)) == Allowed(approved=True)


def test_without_a_state_folder_nothing_needs_preparing() -> None:
    assert decide(with_(package=PACKAGE, prepared=False, has_state=False)) == Allowed(approved=True)
    assert decide(with_(unpreparable="npx --registry", has_state=False)) == Allowed(approved=True)


def test_trust_development_starts_an_unapproved_launch_and_says_so() -> None:
    assert decide(with_(approved_digest=None, trust_development=True)) == Allowed(approved=False)
    assert decide(with_(approved_digest="sha256:old", trust_development=True)) == Allowed(approved=False)
    assert decide(with_(trust_development=True)) == Allowed(approved=True)


# -- what refuses --------------------------------------------------------------------------------------


def test_unreadable_settings_refuse_with_their_own_error() -> None:
    problem = HostError(ErrorKind.STATE_FILE_UNREADABLE, "settings/demo.json cannot be read", plugin="demo")
    assert decide(with_(config_problem=problem)) is problem


def test_a_permission_not_granted_refuses_naming_each_missing_one_sorted() -> None:
    error = refusal(with_(permissions=("demo.write", "demo.read", "demo.admin"), granted=frozenset({"demo.read"})))
    assert error.kind is ErrorKind.PERMISSION_NOT_GRANTED
    assert error.message == "plugin demo needs permissions not granted: demo.admin, demo.write"
    assert error.data == {"plugin": "demo", "permissions": ["demo.admin", "demo.write"]}


def test_a_setting_not_set_refuses() -> None:
    error = refusal(with_(config_missing=("API_KEY", "region")))
    assert error.kind is ErrorKind.CONFIG_REQUIRED
    assert error.message == (
        "plugin demo needs settings that are not set: API_KEY, region; set them with plugins/configure"
    )
    assert error.data == {"plugin": "demo", "missing": ["API_KEY", "region"]}


def test_a_package_launch_that_cannot_be_prepared_refuses() -> None:
    error = refusal(with_(unpreparable="npx option --registry changes what is installed"))
    assert error.kind is ErrorKind.PLUGIN_NOT_PREPARED
    assert error.message == (
        "plugin demo fetches a package at start in a way hostd cannot prepare "
        "(npx option --registry changes what is installed); write the launch as npx -y pkg@version, "
        "uvx --from pkg==version cmd or deno run -A npm:pkg@version "
        "(a registry mirror is hostd's --npm-registry / --python-index)"
    )
    assert error.data == {"plugin": "demo", "packages": []}


def test_a_package_not_prepared_refuses() -> None:
    error = refusal(with_(package=PACKAGE, prepared=False))
    assert error.kind is ErrorKind.PLUGIN_NOT_PREPARED
    assert error.message == (
        "plugin demo runs left-pad@1.3.0 (npm): prepare it first (plugins/prepare), then approve its launch; "
        "hostd never fetches packages when a plugin starts"
    )
    assert error.data == {"plugin": "demo", "packages": ["left-pad@1.3.0"]}


@pytest.mark.parametrize("approved", [None, "sha256:an-older-launch"])
def test_a_launch_not_approved_refuses_with_the_launch_to_approve(approved: str | None) -> None:
    error = refusal(with_(approved_digest=approved))
    assert error.kind is ErrorKind.MCP_TRUST_APPROVAL_REQUIRED
    assert error.message == "plugin demo: approve this exact launch first (plugins/approve with its digest)"
    assert error.data == {"plugin": "demo", "launch": LAUNCH, "approvedDigest": approved}


def test_trust_development_does_not_grant_permissions() -> None:
    error = refusal(with_(granted=frozenset({"demo.read"}), approved_digest=None, trust_development=True))
    assert error.kind is ErrorKind.PERMISSION_NOT_GRANTED


# -- the order: the first refusal of the list is the answer --------------------------------------------


def test_refusals_come_in_order() -> None:
    problem = HostError(ErrorKind.STATE_FILE_UNREADABLE, "unreadable", plugin="demo")
    everything_wrong = with_(
        config_problem=problem,
        granted=frozenset(),
        config_missing=("API_KEY",),
        unpreparable="npx --registry",
        package=PACKAGE,
        approved_digest=None,
    )
    assert decide(everything_wrong) is problem
    kinds: list[ErrorKind | Allowed | HostError] = []
    inputs = dataclasses.replace(everything_wrong, config_problem=None)
    for fixed in (
        {"granted": READY.granted},
        {"config_missing": ()},
        {"unpreparable": None},
        {"prepared": True},
        {"approved_digest": READY.digest},
    ):
        decision = decide(inputs)
        kinds.append(decision.kind if isinstance(decision, HostError) else decision)
        inputs = dataclasses.replace(inputs, **fixed)
    kinds.append(decide(inputs))
    assert kinds == [
        ErrorKind.PERMISSION_NOT_GRANTED,
        ErrorKind.CONFIG_REQUIRED,
        ErrorKind.PLUGIN_NOT_PREPARED,
        ErrorKind.PLUGIN_NOT_PREPARED,
        ErrorKind.MCP_TRUST_APPROVAL_REQUIRED,
        Allowed(approved=True),
    ]


def test_the_decision_reads_its_inputs_only() -> None:
    inputs = with_(approved_digest=None)
    first, second = refusal(inputs), refusal(inputs)
    assert first is not second and first.data == second.data
    assert inputs == with_(approved_digest=None)  # nothing changed in what it was given
