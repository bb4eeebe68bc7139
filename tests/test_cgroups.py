"""Kernel accounting of plugin trees (sandbox/cgroups.py) and the watchdog's counting where there is none.

The class (issue 29, finding 5): a resource charged to an object rather than to a process hides from a bound
that enumerates processes: memory in a memfd, a /dev/shm file or a mapping whose descriptor is closed; disk in a
deleted file kept alive by a mapping. Where a cgroup is usable the kernel charges the pages themselves and the
kernel's own figures are asserted; elsewhere the watchdog must count each such file once.

What this proves for an unprivileged user: on this machine (a cgroup v1 hybrid, CI's layout) nobody cannot
write the v1 hierarchies, so a user gets the watchdog's counting; ``test_nobody_gets_the_counting_fallback``
runs the memfd hog as nobody and shows it stopped. The fork bomb is run only under a cgroup (the fallback
has no process bound, and says so).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from pathlib import Path

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from sandbox import cgroups
from sandbox.cgroups import Mechanism, choose, parse_membership, parse_mountinfo
from sandbox.policy import IsolationPolicy
from sandbox.process import SandboxedProcess, spawn
from sandbox.watchdog import LimitHit, cgroup_hit, watch, watch_disk
from tests.conftest import MakePlugin, spawn_hostd
from tests.nobody import nobody_folder, run_driver, skip_reason
from tests.test_sandbox_watchdog import PRIVATE_TMP, first_line, launch_of
from tests.waiting import GENEROUS

MIB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent

# -- the choice, sans-IO -----------------------------------------------------------------------------------

HYBRID_MOUNTS = """\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
33 30 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids
"""
HYBRID_CGROUP = "8:pids:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"
V2_MOUNTS = "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope\n"
USER = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service"


def test_a_hybrid_host_gets_v1_with_the_cpu_hierarchy_when_writable() -> None:
    writable = {"/sys/fs/cgroup/memory/process_api/abc", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu"}
    found = choose(
        parse_mountinfo(HYBRID_MOUNTS),
        parse_membership(HYBRID_CGROUP),
        writable=writable.__contains__,
        read=lambda path: "" if path.endswith("cgroup.controllers") else None,
    )
    assert found.kind == "cgroup-v1"
    assert dict(found.folders) == {
        "memory": "/sys/fs/cgroup/memory/process_api/abc",
        "pids": "/sys/fs/cgroup/pids",
        "cpu": "/sys/fs/cgroup/cpu",
    }
    assert found.cpu == "cpu.shares"
    # Without the cpu hierarchy: still v1, and the CPU weight says why it is not applied.
    no_cpu = choose(
        parse_mountinfo(HYBRID_MOUNTS),
        parse_membership(HYBRID_CGROUP),
        writable=(writable - {"/sys/fs/cgroup/cpu"}).__contains__,
        read=lambda path: None,
    )
    assert (no_cpu.kind, no_cpu.cpu) == ("cgroup-v1", "none: no writable v1 cpu hierarchy")
    # An unprivileged user (nothing writable): the watchdog, with both reasons.
    user = choose(
        parse_mountinfo(HYBRID_MOUNTS), parse_membership(HYBRID_CGROUP), writable=lambda p: False, read=lambda p: None
    )
    assert user.kind == "watchdog"
    assert "cgroup v2: /sys/fs/cgroup/unified is not writable" in user.reason
    assert "cgroup v1: /sys/fs/cgroup/memory/process_api/abc is not writable" in user.reason


def test_a_delegated_v2_session_uses_the_top_of_its_delegation() -> None:
    scope = f"{USER}/app.slice/app-x.scope"
    writable = {f"{USER}{p}" for p in ("", "/cgroup.procs", "/app.slice", "/app.slice/cgroup.procs")}
    writable |= {scope, f"{scope}/cgroup.procs"}
    texts = {f"{USER}/cgroup.controllers": "cpu memory pids", f"{USER}/cgroup.subtree_control": "cpu memory pids"}
    found = choose(
        parse_mountinfo(V2_MOUNTS), parse_membership(V2_CGROUP), writable=writable.__contains__, read=texts.get
    )
    assert (found.kind, set(found.folders.values()), found.cpu) == ("cgroup-v2", {USER}, "cpu.weight")
    # The same delegation without the pids controller is refused with the reason, as is a disabled backend.
    texts[f"{USER}/cgroup.controllers"] = "memory"
    refused = choose(
        parse_mountinfo(V2_MOUNTS), parse_membership(V2_CGROUP), writable=writable.__contains__, read=texts.get
    )
    assert refused.kind == "watchdog"
    assert f"cgroup v2: {USER} does not offer the pids controller(s)" in refused.reason
    off = choose([], {}, writable=writable.__contains__, read=texts.get, disabled="cgroups disabled (x)")
    assert off == Mechanism("watchdog", "cgroups disabled (x)")


def test_mountinfo_escapes_and_multi_controller_lines_are_read() -> None:
    mounts = parse_mountinfo("40 30 0:31 /in\\040ns /sys/fs/cgroup/cpu\\054cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n")
    assert mounts[0].root == "/in ns" and mounts[0].point == "/sys/fs/cgroup/cpu,cpuacct"
    assert mounts[0].options >= {"cpu", "cpuacct"}
    assert parse_membership("2:cpu,cpuacct:/a\n0::/b\n") == {"cpu": "/a", "cpuacct": "/a", "": "/b"}


def test_v2_counters_are_read_as_the_kernel_writes_them(tmp_path: Path) -> None:
    """The v2 files' formats (cgroup-v2.rst), from files written here: no v2 hierarchy with controllers
    exists on CI; the real-process v2 test above runs where one does."""
    texts = {
        "memory.current": "1048576\n",
        "memory.peak": "104857600\n",
        "memory.max": "104857600\n",
        "memory.events": "low 0\nhigh 0\nmax 7\noom 1\noom_kill 2\noom_group_kill 1\n",
        "pids.current": "3\n",
        "pids.max": "max\n",
        "pids.events": "max 0\n",
    }
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    mechanism = Mechanism("cgroup-v2", "test", {"memory": str(tmp_path), "pids": str(tmp_path)})
    tree = cgroups.TreeCgroup(mechanism, dict(mechanism.folders), cgroups.TreeLimits(memory_bytes=100 * MIB))
    figures = tree.figures()
    assert figures == cgroups.Figures(
        memory_current=MIB,
        memory_peak=100 * MIB,
        memory_limit=100 * MIB,
        oom_kills=2,
        memory_max_hits=7,
        pids_current=3,
        pids_limit=None,
        pids_refused=0,
    )
    hit = cgroup_hit(figures)
    assert hit is not None and (hit.limit, hit.value, hit.threshold) == ("rss", 100.0 * MIB, 100.0 * MIB)
    assert "the kernel ended 2 of its process(es)" in hit.message


# -- the cgroup path, real processes -------------------------------------------------------------------------


#: This machine's accounting, found once at import: a skip says the reason (pytest-trio loses a skip's
#: message raised inside an async test).
HERE = cgroups.detect()


def _only(kind: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(HERE.kind != kind, reason=f"this machine's accounting is {HERE.kind}: {HERE.reason}")


needs_cgroup = pytest.mark.skipif(not HERE.usable, reason=f"no cgroup backend here: {HERE.reason}")


def _gone(process: SandboxedProcess) -> None:
    assert process.cgroup is not None
    for folder in process.cgroup.folders.values():
        assert not os.path.exists(folder), folder


@pytest.mark.parametrize(
    "kind", [pytest.param("cgroup-v1", marks=_only("cgroup-v1")), pytest.param("cgroup-v2", marks=_only("cgroup-v2"))]
)
async def test_a_memfd_hog_is_stopped_at_the_cgroup_memory_bound(kind: str) -> None:
    mechanism = cgroups.detect(refresh=True)
    assert mechanism.kind == kind
    policy = IsolationPolicy(max_rss_bytes=100 * MIB)
    with trio.fail_after(60):
        proc = await spawn(launch_of("memfd_hog.py", "300", policy=policy), limits=policy)
        assert proc.cgroup is not None and proc.accounting == mechanism
        try:
            hit = await watch(proc, policy, interval=0.1)
            figures = proc.cgroup.figures()
        finally:
            await proc.stop(grace=GENEROUS)
    # The kernel's figures: the limit written, the peak never past it, the OOM kill that ended the hog.
    assert figures.memory_limit == 100 * MIB
    assert figures.memory_peak is not None and 90 * MIB < figures.memory_peak <= 100 * MIB
    assert figures.oom_kills >= 1
    assert isinstance(hit, LimitHit)
    assert (hit.limit, hit.value, hit.threshold) == ("rss", float(figures.memory_peak), float(100 * MIB))
    assert "memfd" in hit.message and "104.9 MB" in hit.message
    _gone(proc)


@needs_cgroup
async def test_a_fork_bomb_is_stopped_at_the_pids_bound_and_nothing_is_left() -> None:
    policy = IsolationPolicy(max_pids=32)
    with trio.fail_after(60):
        proc = await spawn(launch_of("forkbomb.py", "200", policy=policy), limits=policy)
        assert proc.cgroup is not None
        try:
            bomb = json.loads(await first_line(proc))
            hit = await watch(proc, policy, interval=0.1)
            figures = proc.cgroup.figures()
            members = (proc.cgroup.procs_files[0], Path(proc.cgroup.procs_files[0]).read_text().split())
        finally:
            report = await proc.stop(grace=GENEROUS)
    assert bomb["errno"] == errno.EAGAIN
    # Its first line of code already ran inside: the shim entered the cgroup before it forked the plugin.
    token = os.path.basename(proc.cgroup.folders["pids"])
    line = next(line for line in bomb["cgroup"] if ":pids:" in line or line.startswith("0::"))
    assert line.endswith("/" + token)
    assert (figures.pids_current, figures.pids_limit) == (32, 32)
    assert figures.pids_refused >= 1
    # Every process of the tree is in the cgroup: the shim, pid 1 of the namespace, the bomb, its children.
    assert len(members[1]) == 32 and str(proc.pid) in members[1]
    assert (hit.limit, hit.value, hit.threshold) == ("pids", 32.0, 32.0)
    assert report.step == "stdin-eof"
    _gone(proc)


@needs_cgroup
async def test_a_stale_parent_left_by_a_crashed_hostd_is_swept_at_the_next_start(tmp_path: Path) -> None:
    mechanism = cgroups.detect(refresh=True)
    # Named as a hostd of our pid namespace whose start time is not ours: gone, so stale.
    stale = f"hostd-{os.getpid()}-0-{os.stat('/proc/self/ns/pid').st_ino}"
    bases = list(dict.fromkeys(mechanism.folders.values()))
    sleeper = await trio.lowlevel.open_process(["sleep", "600"])
    try:
        for base in bases:
            os.makedirs(os.path.join(base, stale, "tree"))
            Path(base, stale, "tree", "cgroup.procs").write_text(str(sleeper.pid))
        async with spawn_hostd(tmp_path) as hostd:
            assert (await hostd.request("plugins/list", {}))["plugins"] == []  # the host is up: its start swept
            with trio.fail_after(GENEROUS):
                assert await sleeper.wait() == -9
    finally:
        with trio.CancelScope(shield=True):
            sleeper.kill()
            await sleeper.wait()
        for base in bases:  # only if the sweep failed
            for folder in (os.path.join(base, stale, "tree"), os.path.join(base, stale)):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)
    assert not any(os.path.exists(os.path.join(base, stale)) for base in bases)


# -- the counting fallback -----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["memfd", "mapped", "shm"])
async def test_without_cgroups_the_watchdog_counts_memory_files(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cgroups.DISABLE_VAR, "off")
    # Landlock keeps a plugin out of /dev/shm; a policy without it (``--sandbox`` off) lets it in.
    policy = IsolationPolicy(max_rss_bytes=100 * MIB, landlock=where != "shm")
    with trio.fail_after(60):
        proc = await spawn(launch_of("memfd_hog.py", "300", where, policy=policy), limits=policy)
        try:
            held = json.loads(await first_line(proc))
            hit = await watch(proc, policy, interval=0.1)
        finally:
            await proc.stop(grace=GENEROUS)
    assert proc.cgroup is None
    assert proc.accounting == Mechanism("watchdog", "cgroups disabled (HOSTD_CGROUPS=off)")
    assert held["bytes"] == 300 * MIB
    assert hit.limit == "rss" and hit.threshold == 100 * MIB
    assert 300 * MIB <= hit.value < 400 * MIB  # the file once, plus the plugin's own RSS
    assert "in memfd and shared-memory files" in hit.message


async def test_a_deleted_file_kept_only_by_a_mapping_counts_on_the_disk_bound() -> None:
    policy = IsolationPolicy(max_rss_bytes=400 * MIB)
    with trio.fail_after(60):
        proc = await spawn(launch_of("memfd_hog.py", "120", "deleted", policy=policy))
        try:
            held = json.loads(await first_line(proc))
            assert not os.listdir(PRIVATE_TMP)  # no walk can see it
            hit = await watch_disk([PRIVATE_TMP], 50 * MIB, interval=0.1, process=proc)
        finally:
            await proc.stop(grace=GENEROUS)
    assert held["bytes"] == 120 * MIB
    assert hit.limit == "disk" and hit.threshold == 50 * MIB
    assert 120 * MIB <= hit.value < 130 * MIB
    assert "deleted files it keeps" in hit.message


@pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
async def test_nobody_gets_the_counting_fallback_and_is_stopped() -> None:
    with nobody_folder() as work:
        result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_memfd.py", work)
    assert result["kind"] == "watchdog"
    assert "not writable by uid 65534" in result["reason"]
    assert result["limit"] == "rss" and result["threshold"] == 100 * MIB
    assert result["value"] > 100 * MIB  # caught while it wrote, or after


# -- through hostd: the same named error on either path ------------------------------------------------------


@pytest.mark.parametrize(
    "cgroup",
    [pytest.param(True, marks=needs_cgroup), False],
    ids=["kernel", "counting"],
)
async def test_hostd_stops_a_plugin_holding_a_memfd_with_the_rss_limit(
    tmp_path: Path, make_plugin: MakePlugin, cgroup: bool
) -> None:
    folder = make_plugin(variant="memfd-hog")
    shared = tmp_path / "shared"
    shared.mkdir()
    env = plugin_environment()
    if not cgroup:
        env[cgroups.DISABLE_VAR] = "off"
    command = ["--state-dir", str(tmp_path / "state"), "--allow-write", str(shared), "--restart", "never"]
    async with HostdClient.spawn(command, env=env) as hostd:
        installed = await hostd.request("plugins/install", {"path": str(folder)})
        # The launch the user approves says what bounds the tree here, and why.
        accounting = installed["launch"]["accounting"]
        if cgroup:
            assert accounting == cgroups.describe(HERE)
        else:
            assert (accounting["memory"], accounting["reason"]) == ("watchdog", "cgroups disabled (HOSTD_CGROUPS=off)")
        assert accounting["disk"] == cgroups.DISK_BOUND
        granted = await hostd.request(
            "plugins/grant",
            {"id": "mcp-echo", "permissions": installed["permissions"], "limits": {"maxRssMb": 100}},
        )
        await hostd.request("plugins/approve", {"id": "mcp-echo", "digest": granted["launch"]["digest"]})
        await hostd.request("plugins/enable", {"id": "mcp-echo"})
        with contextlib.suppress(RpcError):  # the call may be answered before the stop, or fail with it
            await hostd.request("tools/call", {"name": "mcp-echo.echo", "arguments": {"text": "x"}})
        stopped = await hostd.wait_for("plugins/statusChanged", lambda s: s["status"] == "unhealthy", timeout=30)
    limit = stopped["error"]["limit"]
    assert (limit["limit"], limit["threshold"]) == ("rss", 100 * MIB)
    assert "exceeding a limit: memory" in stopped["error"]["reason"]
    if cgroup:  # the kernel's peak, never past the bound
        assert 90 * MIB < limit["value"] <= 100 * MIB
    else:  # the watchdog's count, the memfd once plus the server's RSS (~26 MB alone: only the memfd can pass
        # the bound), as sampled: while the hog still fills its memfd the sample is anywhere past 100 MiB
        assert 100 * MIB < limit["value"] < 400 * MIB


async def test_doctor_says_which_mechanism_is_in_force_and_why() -> None:
    env = {**plugin_environment(), "PYTHONPATH": str(ROOT)}
    found = {}
    for value in ("", "off"):
        env[cgroups.DISABLE_VAR] = value
        done = await trio.run_process(
            [sys.executable, "-m", "hostd.cli.hostd", "doctor"], env=env, capture_stdout=True, check=True
        )
        row = next(line for line in done.stdout.decode().splitlines() if line.startswith("accounting "))
        found[value] = row.split(None, 2)[1:]
    said = cgroups.describe(HERE)
    assert found[""] == [
        "yes" if HERE.usable else "no",
        f"{said['memory']}: {said['reason']}; CPU weight: {said['cpu']}; disk: {said['disk']}",
    ]
    assert found["off"][0] == "no"
    assert found["off"][1].startswith("watchdog: cgroups disabled (HOSTD_CGROUPS=off); CPU weight: none")
