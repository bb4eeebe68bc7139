"""hostctl's reading commands read the state folder in their own process when no hostd serves it (issue 28).

The class: *a command that only reads, changing or locking what it reads*. A reading command used to start a
``hostd serve --no-restore`` of its own: ~1 s more per command, the folder's lock taken (a hostd starting
meanwhile refused ``STATE_LOCKED``), and lines written to what it read (a plugin whose last start failed got
a "start failed ... not tried again here" line in its log at every ``logs``, ``list`` or ``status``).
Members tested: the lock (held by this test for the whole run: a hostd started by hostctl would exit 75),
the folder's files (byte for byte and by mtime before and after: no log line, no record, no temporary),
the plugin's own start count, and the answers: each command's exit code, stdout and stderr exactly those of
the command's own hostd (hostd/cli/hostd.py with ``--no-restore``, run the old way, with the lock released),
for an enabled plugin, a plugin whose start failed (its reason, its remedy) and an unknown id. And the
processes a read starts (an audit hook in hostctl's interpreter records each): none, with the login shell's
``PATH`` and the probe's answer the hostd kept (hostd/storage/facts.py; before, both ran at every read); the
login shell alone, with the same stdout, when the environment differs from the one its answer was kept for.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.storage import facts
from tests.conftest import MakePlugin, run_quietly
from tests.test_hostctl_attach import COUNTING, FAILING, hostctl, starts

#: hostctl as before: every reading command through a hostd of its own (hostd/cli/direct.py not used), its
#: hints naming ``python -m hostd.cli.hostctl`` as the command run directly does.
OLD_WAY = (
    "import sys; from hostd.cli import hostctl; from hostd.cli.render import invoked_as; "
    "hostctl.READING = frozenset(); "
    "hostctl.invoked_as = lambda a, e, o, m: invoked_as(a, e, [sys.executable], 'hostd.cli.hostctl'); "
    "sys.exit(hostctl.main(sys.argv[1:]))"
)

VERBS = [["list", "--json"], ["status"], ["logs", "broken-echo"], ["tools"], ["status", "nope"]]


def snapshot(state: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``state``: its modification time (ns) and bytes."""
    return {
        str(path.relative_to(state)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(state.rglob("*"))
        if path.is_file()
    }


#: hostctl run with an audit hook that writes one ``CHILD <argv as JSON>`` line to stderr for every process it starts.
AUDITED = (
    "import json, runpy, sys\n"
    "def hook(event, args):\n"
    "    if event == 'subprocess.Popen':\n"
    "        sys.stderr.write('CHILD ' + json.dumps([str(a) for a in args[1]]) + '\\n')\n"
    "    elif event in ('os.posix_spawn', 'os.exec', 'os.system', 'os.spawn', 'os.fork'):\n"
    "        sys.stderr.write('CHILD ' + json.dumps([event, repr(args)]) + '\\n')\n"
    "sys.addaudithook(hook)\n"
    "runpy.run_module('hostd.cli.hostctl', run_name='__main__', alter_sys=True)\n"
)
#: trio's import asks ``ctypes.util.find_library("pthread")``, which runs ``ldconfig -p`` (~2 ms): not a read's.
TRIO_IMPORT = ["/sbin/ldconfig", "-p"]


def hostctl_env() -> dict[str, str]:
    return {**os.environ, "HOSTD_SECRETS": "file"}


async def read_audited(
    state: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """hostctl ``args`` on ``state`` run with :data:`AUDITED`: the process (its stderr without the ``CHILD``
    lines) and the processes it started, but trio's import's."""
    done = await run_quietly(
        [sys.executable, "-c", AUDITED, *args, "--state-dir", str(state)], env=env or hostctl_env(), timeout=120
    )
    lines = done.stderr.splitlines(keepends=True)
    children = [orjson.loads(line.removeprefix("CHILD ")) for line in lines if line.startswith("CHILD ")]
    done.stderr = "".join(line for line in lines if not line.startswith("CHILD "))
    return done, [child for child in children if child != TRIO_IMPORT]


async def old_way(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return await run_quietly(
        [sys.executable, "-c", OLD_WAY, *args, "--state-dir", str(state)],
        env=hostctl_env(),
        timeout=120,
    )


async def test_reading_commands_start_nothing_lock_nothing_write_nothing_and_answer_alike(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    state = tmp_path / "state"
    env = {**plugin_environment(), "HOSTD_SECRETS": "file"}
    async with HostdClient.spawn(["--state-dir", str(state), "--log-level", "error"], env=env) as hd:
        for plugin_id, code in (("mcp-echo", COUNTING), ("broken-echo", FAILING)):
            folder = make_plugin(plugin_id, backend={"args": ["-c", code]})
            info = await hd.request("plugins/install", {"path": str(folder)})
            await hd.request("plugins/grant", {"id": plugin_id, "permissions": info["permissions"]})
            await hd.request("plugins/approve", {"id": plugin_id, "digest": info["launch"]["digest"]})
        assert (await hd.request("plugins/enable", {"id": "mcp-echo"}, timeout=60))["status"] == "ready"
        with pytest.raises(RpcError) as failed:
            await hd.request("plugins/enable", {"id": "broken-echo"}, timeout=60)  # its failure is recorded
        assert failed.value.kind == "PLUGIN_START_FAILED"
    assert (starts(state), starts(state, "broken-echo")) == (1, 1)

    before = snapshot(state)
    assert facts.FACTS_FILE in before  # what that hostd learnt by running the login shell and the probe
    lock = os.open(state / "state.lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a hostd serving the folder holds it
        audited = [await read_audited(state, *verb) for verb in VERBS]
        # The login shell's start-up may depend on any variable: with another one, its PATH is looked up again.
        again = await read_audited(state, *VERBS[0], env={**hostctl_env(), "HOSTD_TEST_ANOTHER_VARIABLE": "1"})
    finally:
        os.close(lock)
    assert snapshot(state) == before  # nothing written, moved or removed
    # No process started by a read: neither the login shell nor the sandbox probe, whose answers the hostd kept.
    assert [children for _, children in audited] == [[] for _ in VERBS]
    assert [child[:2] for child in again[1]] == [[hostctl_env().get("SHELL", "/bin/sh"), "-l"]]  # not the probe
    read = [done for done, _ in audited]
    assert again[0].stdout == read[0].stdout
    assert (starts(state), starts(state, "broken-echo")) == (1, 1)
    for done in read:
        assert done.stderr.splitlines()[0] == f"hostctl: read {state} directly (no hostd serves it; nothing started)"

    for verb, done in zip(VERBS, read, strict=True):
        through_hostd = await old_way(state, *verb)
        first, *rest = through_hostd.stderr.splitlines()
        assert first == f"hostctl: started a hostd for {state} (it starts only the plugins this command uses)"
        assert (done.returncode, done.stdout, done.stderr.splitlines()[1:]) == (
            through_hostd.returncode,
            through_hostd.stdout,
            rest,
        ), verb
    # hostd's own path (--no-restore) no longer logs a recorded failure again each time it shows it either.
    assert snapshot(state / "logs") == {k.removeprefix("logs/"): v for k, v in before.items() if k.startswith("logs/")}
    # What they said, in a few exact values (the comparison above holds them all).
    status = read[1]
    assert status.returncode == 1
    assert "error: broken-echo is enabled but error: exited with code 3 during start" in status.stderr
    assert read[4].returncode == 1
    assert "error: PLUGIN_NOT_FOUND: no installed plugin 'nope' (installed: broken-echo, mcp-echo)" in read[4].stderr
    assert "start failed: PLUGIN_START_FAILED" in read[2].stdout
    assert "not tried again here" not in read[2].stdout  # shown by each command, never logged again
    assert (starts(state), starts(state, "broken-echo")) == (1, 1)


async def test_a_folder_hostd_would_repair_is_left_to_a_hostd(tmp_path: Path) -> None:
    """A corrupt state document is moved aside by a hostd (and said so in its log), never by a reader: the
    command starts a hostd as before, which does."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "state.json").write_text("{not json")
    done = await hostctl(state, "list")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"hostctl: started a hostd for {state} (it starts only the plugins this command uses)"
    )
    assert [p.name.partition("-")[0] for p in state.glob("state.json.corrupt-*")] == ["state.json.corrupt"]
