"""What a hostd learnt by running a process, kept for hostctl's reading commands (hostd/storage/facts.py, issue 28).

The class: *a read that runs processes to answer* (the login shell for its ``PATH``, the sandbox probe: each
read ran both, ~0.1-0.2 s, more with a slow profile: tests/test_hostctl_direct.py runs the reading commands
and records every process they start), and its two counterparts that the cache must not bring in: *an answer
used after what it depends on changed* and *a cache file trusted*. Members, read in this process: a changed
variable (but ``PWD``), a changed start-up file of the shell, a changed sysctl; a file that is damaged, too
large, a link, of another version, or with fields of the wrong shape: each ignored, entry by entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from hostd.cli.client import plugin_environment
from hostd.storage import facts

PROBE = {
    "linux": True,
    "subreaper": [True, "PR_SET_CHILD_SUBREAPER + PR_SET_PDEATHSIG"],
    "landlock_abi": 4,
    "landlock": [True, "ABI 4"],
    "netns": [False, "no user namespaces"],
    "pidns": [False, "no user namespaces"],
    "private-proc": [False, "needs pidns"],
    "seccomp": [True, "classic BPF deny-list"],
    "seccomp-net": [True, "sockets allowlisted"],
}


def kept(tmp_path: Path, env: dict[str, str], path: str | None = "/usr/bin:/bin") -> Path:
    """A state folder whose facts a hostd kept for ``env``: the login shell's ``path`` and :data:`PROBE`."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    facts.keep(state, (facts.login_path_key(env), path), (facts.probe_key(), PROBE))
    return state


def test_kept_facts_are_read_back_while_what_they_depend_on_holds(tmp_path: Path) -> None:
    env = {**plugin_environment(), "HOME": str(tmp_path), "PWD": "/somewhere"}
    state = kept(tmp_path, env)
    assert facts.read(state, env) == facts.Facts(login_path=("/usr/bin:/bin",), probe=PROBE)
    assert facts.read(state, {**env, "PWD": "/elsewhere", "OLDPWD": "/x"}).login_path == ("/usr/bin:/bin",)
    # A shell that gave no PATH is an answer too: the reader does not run it again.
    assert facts.read(kept(tmp_path, env, None), env).login_path == (None,)
    # Each entry is checked on its own: a changed variable voids the login shell's, not the probe's.
    changed = facts.read(state, {**env, "NVM_DIR": "/opt/nvm"})
    assert (changed.login_path, changed.probe) == (None, PROBE)
    (tmp_path / ".zshrc").write_text("export PATH=/opt/bin:$PATH\n")  # a start-up file under HOME
    assert facts.read(state, env).login_path is None


def test_a_changed_sysctl_voids_the_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysctl = tmp_path / "unprivileged_userns_clone"
    sysctl.write_text("1\n")
    monkeypatch.setattr(facts, "PROBE_FILES", (*facts.PROBE_FILES, str(sysctl)))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    state = kept(tmp_path, env)
    assert facts.read(state, env).probe == PROBE
    sysctl.write_text("0\n")
    assert facts.read(state, env) == facts.Facts(login_path=("/usr/bin:/bin",), probe=None)


@pytest.mark.parametrize(
    "damage",
    [
        b"{not json",
        b"[]",
        b'{"version": 2}',
        b"x" * (facts.MAX_BYTES + 1),
    ],
)
def test_a_damaged_facts_file_is_ignored(tmp_path: Path, damage: bytes) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    state = kept(tmp_path, env)
    (state / facts.FACTS_FILE).write_bytes(damage)
    assert facts.read(state, env) == facts.Facts()


def test_a_facts_file_through_a_link_is_ignored(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    state = kept(tmp_path, env)
    (state / facts.FACTS_FILE).rename(tmp_path / "elsewhere.json")
    (state / facts.FACTS_FILE).symlink_to(tmp_path / "elsewhere.json")
    assert facts.read(state, env) == facts.Facts()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("loginPath", "path"), "bin:/usr/bin"),  # a relative entry
        (("loginPath", "path"), "/usr/bin::/bin"),  # an empty one
        (("loginPath", "path"), "/usr/bin\n/bin"),
        (("loginPath", "path"), "/usr/\0bin"),
        (("loginPath", "path"), 7),
        (("loginPath", "path"), "/" * (facts.MAX_PATH_CHARS + 1)),
        (("probe", "answer", "landlock"), [1, "ABI 4"]),
        (("probe", "answer", "landlock"), [True]),
        (("probe", "answer", "landlock"), [True, "x" * (facts.MAX_DETAIL_CHARS + 1)]),
        (("probe", "answer", "landlock_abi"), True),
        (("probe", "answer", "landlock_abi"), -1),
        (("probe", "answer", "linux"), "yes"),
        (("probe", "answer", "error"), "the shim probe did not run"),
        (("probe", "answer", "seccomp"), None),
        (("probe", "answer"), ["not", "an", "object"]),
    ],
)
def test_a_field_of_the_wrong_shape_voids_its_entry(tmp_path: Path, field: tuple[str, ...], value: Any) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    state = kept(tmp_path, env)
    document = orjson.loads((state / facts.FACTS_FILE).read_bytes())
    parent = document
    for name in field[:-1]:
        parent = parent[name]
    parent[field[-1]] = value
    (state / facts.FACTS_FILE).write_bytes(orjson.dumps(document))
    found = facts.read(state, env)
    login_voided = field[0] == "loginPath"
    assert found.login_path == (None if login_voided else ("/usr/bin:/bin",))
    assert found.probe == (PROBE if login_voided else None)


def test_keep_writes_only_what_changed_and_never_a_failed_probe(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin"}
    state = kept(tmp_path, env)
    path = state / facts.FACTS_FILE
    written = path.stat().st_ino
    facts.keep(state, (facts.login_path_key(env), "/usr/bin:/bin"), (facts.probe_key(), PROBE))
    assert path.stat().st_ino == written  # the same content: not written again
    # A hostd that did not look the PATH up, or whose probe failed, leaves what the file holds.
    facts.keep(state, None, (facts.probe_key(), {"error": "the shim probe did not run: timed out"}))
    assert facts.read(state, env) == facts.Facts(login_path=("/usr/bin:/bin",), probe=PROBE)
