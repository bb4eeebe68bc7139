"""A plugin's own ``/proc`` (the ``private-proc`` layer, issue 25): real plugins, as root and as nobody.

The class: a plugin reaches another process through the host's procfs. Members tried here: listing
``/proc`` (every process of the machine), ``/proc/<hostd's pid>/cmdline``, ``/proc/<another plugin's
pid>/cmdline`` (a secret passed as an argument), ``/proc/1/environ`` (pid 1: the host's init, or the
namespace's own). With ``private-proc`` the plugin's tree has a mount namespace of its own with a procfs
of its pid namespace over ``/proc``: it lists its own processes only, the others' pids do not exist
there (``ENOENT``), and what runtimes read (``self``, ``cpuinfo``, ``meminfo``, ``sys``) still reads.
hostd still sees the plugin from outside (its ``/proc`` is the host's): the watchdog, the sweep and the
host-side checks of the other isolation tests read it there. Each test skips only where the kernel
offers no such mount to this user (tests/platform_facts.py) and fails where it does and the sandbox
does not apply it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import trio

from sandbox.policy import IsolationPolicy, plan_layers
from sandbox.probe import Capability
from sandbox.process import spawn
from tests.nobody import NOBODY, ROOT, SETPRIV, nobody_folder, run_driver, skip_reason
from tests.platform_facts import need_layers, platform_offers
from tests.test_sandbox_isolation import PRIVATE_TMP, launch_of, run_to_end
from tests.waiting import GENEROUS

#: Where the launches below find ``node`` (HOST_ENV's PATH).
NODE_PATH = f"{os.path.dirname(os.path.realpath(sys.executable))}:/usr/bin:/bin"
#: The second plugin's marker: what a secret in its command line would be.
MARKER = "other-plugin-secret-argument"
#: What each runtime read of the fixture must give (the procfs of the namespace has all of them).
READS_OK = {
    path: "ok"
    for path in (
        "/proc/self/status",
        "/proc/self/cmdline",
        "/proc/self/maps",
        "/proc/self/mountinfo",
        "/proc/self/limits",
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/stat",
        "/proc/loadavg",
        "/proc/uptime",
        "/proc/sys/kernel/pid_max",
    )
}
#: A node plugin's view: /proc's pids, its own pid, what os and process read, hostd's cmdline (or the errno code).
NODE_VIEW = """
const fs = require("fs"), os = require("os");
let hostd;
try { hostd = fs.readFileSync(`/proc/${process.argv[1]}/cmdline`, "latin1"); } catch (e) { hostd = e.code; }
console.log(JSON.stringify({
  pids: fs.readdirSync("/proc").filter((n) => /^[0-9]+$/.test(n)),
  self: process.pid,
  cpus: os.cpus().length > 0,
  memory: os.totalmem() > 0 && process.memoryUsage().rss > 0,
  status: fs.readFileSync("/proc/self/status", "latin1").includes(`Pid:\\t${process.pid}\\n`),
  hostd,
}));
"""


def skip_without_private_proc() -> None:
    """Skip where the kernel lets this user mount no procfs of a new pid namespace (the kernel's word)."""
    for layer in ("pidns", "private-proc"):
        offered, why = platform_offers(layer)
        if not offered:
            pytest.skip(f"{layer}: {why}")


def probe_agrees() -> None:
    """Fail where the kernel offers the layer and the sandbox's probe does not find it (asked after the view
    is checked, so that on the old code the view is what fails)."""
    need_layers("pidns", "private-proc")


async def test_a_plugin_sees_only_its_own_tree_in_proc() -> None:
    # Fails before: the plugin listed every process of the machine and read hostd's and the other
    # plugin's command lines (a secret in argv), e.g. pids ['1', '2', ..., '31337'] and others
    # [<this test's command line>, 'python3 echo.py other-plugin-secret-argument'].
    skip_without_private_proc()
    other = await spawn(launch_of("python3", ["echo.py", MARKER], IsolationPolicy(), tmpdir=PRIVATE_TMP))
    try:
        pids = json.dumps([os.getpid(), other.pid])
        with trio.fail_after(30):
            confined, out, err = await run_to_end(
                launch_of("python3", ["proc_view.py", pids], IsolationPolicy(), tmpdir=PRIVATE_TMP)
            )
        assert out, err.decode()
        view = json.loads(out)
        # Landlocked (the default): hidepid=ptraceable hides even the namespace's pid 1 (the shim's).
        assert (view["pids"], view["self"], view["child"]) == (["2", "3"], 2, 3)
        assert view["others"] == ["ENOENT", "ENOENT"]
        assert view["pid1_environ"] == "ENOENT"
        assert view["reads"] == READS_OK
        assert view["write_comm"] == "EACCES"  # Landlock's /proc rule (read only) holds on the new mount
        # Without Landlock: pid 1 of its namespace shows; nothing outside the namespace does.
        with trio.fail_after(30):
            bare, out, err = await run_to_end(
                launch_of("python3", ["proc_view.py", pids], IsolationPolicy(landlock=False), tmpdir=PRIVATE_TMP)
            )
        view = json.loads(out)
        assert (view["pids"], view["others"], view["reads"]) == (["1", "2", "3"], ["ENOENT", "ENOENT"], READS_OK)
        assert view["write_comm"] == "ok"  # so the EACCES above is Landlock's
        # hostd still sees the plugins from outside: the other one's command line and status, by host pid.
        assert Path(f"/proc/{other.pid}/cmdline").read_bytes().split(b"\0")[-2:] == [MARKER.encode(), b""]
        assert f"\nPid:\t{other.pid}\n" in Path(f"/proc/{other.pid}/status").read_text()
    finally:
        await other.stop(grace=GENEROUS)
    probe_agrees()
    for proc in (confined, bare, other):
        assert "private-proc" in proc.isolation
    assert "landlock-fs" in confined.isolation and "landlock-fs" not in bare.isolation


async def test_node_runs_with_its_own_proc() -> None:
    skip_without_private_proc()
    if shutil.which("node", path=NODE_PATH) is None:
        pytest.skip("node is not installed")
    launch = launch_of("node", ["-e", NODE_VIEW, str(os.getpid())], IsolationPolicy(), tmpdir=PRIVATE_TMP)
    with trio.fail_after(30):
        proc, out, err = await run_to_end(launch)
    assert proc.returncode == 0, err.decode()
    view = json.loads(out)
    # Fails before: pids listed the machine and hostd was its command line.
    assert view == {"pids": ["2"], "self": 2, "cpus": True, "memory": True, "status": True, "hostd": "ENOENT"}
    probe_agrees()
    assert "private-proc" in proc.isolation


async def test_an_unprivileged_plugin_sees_only_its_own_tree_in_proc() -> None:
    """As nobody (what real users are): the same view; the driver stands in for hostd."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    offered, why = platform_offers("private-proc", as_nobody=True)
    if not offered:
        pytest.skip(f"as nobody, private-proc: {why}")
    with nobody_folder() as work:
        result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_proc.py", work, MARKER)
    # Fails before: the plugin listed the machine's processes and read the driver's and the other's cmdlines.
    view = result["view"]
    assert (view["pids"], view["self"], view["child"]) == (["2", "3"], 2, 3)
    assert view["others"] == ["ENOENT", "ENOENT"]
    assert view["reads"] == READS_OK
    assert result["uid"] == NOBODY
    assert result["outside"] == [MARKER, True]  # the driver (hostd) still reads the other plugin from outside
    assert {name: detail for name, ok, detail in result["probe"] if name == "private-proc" and not ok} == {}
    assert "private-proc" in result["isolation"]


def test_the_probe_says_why_there_is_no_private_proc_where_proc_is_masked() -> None:
    """A container masks parts of ``/proc``; the kernel then refuses a new procfs in a user namespace. Here
    a user + mount namespace with one file of ``/proc`` covered stands in for it, as root and as nobody:
    ``hostd doctor``'s table names the reason, and no launch plans the layer."""
    need_layers("pidns")
    masked = 'mount --bind /dev/null /proc/interrupts && exec "$0" -c "$1"'
    table = "from sandbox.probe import probe, render_table; print(render_table(probe()))"
    expected = (
        "mount /proc: Operation not permitted; the kernel mounts a procfs in a user namespace only where the "
        "host's /proc is fully visible (a container that masks parts of /proc forbids it) (errno 1)"
    )
    as_nobody = skip_reason() is None and platform_offers("pidns", as_nobody=True)[0]
    users = [[], SETPRIV] if as_nobody else [[]]
    for prefix in users:
        python = sys.executable if not prefix else "/usr/bin/python3"
        command = [*prefix, "unshare", "--user", "--map-root-user", "--mount", "sh", "-c", masked, python, table]
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{sysconfig.get_paths()['purelib']}"}
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False, cwd="/", env=env)
        assert done.returncode == 0, done.stderr
        rows = {row[0]: row[1:] for line in done.stdout.splitlines() if (row := re.split(r"\s{2,}", line))}
        assert rows["pidns"][0] == "yes"
        assert rows["private-proc"] == ["no", expected]
    caps = [Capability("pidns", True, ""), Capability("private-proc", False, expected)]
    assert "private-proc" not in plan_layers(IsolationPolicy(), caps)
    assert "private-proc" in plan_layers(IsolationPolicy(), [*caps[:1], Capability("private-proc", True, "")])
    # Never without its pid namespace: the procfs it mounts is that namespace's.
    assert "private-proc" not in plan_layers(IsolationPolicy(), [Capability("private-proc", True, "")])
