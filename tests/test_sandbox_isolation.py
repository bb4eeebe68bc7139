"""Kernel isolation layers with real plugin processes: Landlock, network namespace, seccomp.

Every test that needs a layer skips when this machine's kernel lacks it (tests/platform_facts.py asks
the kernel, not the probe) and fails when the kernel has it and the sandbox does not apply it. The
fixture poke.py tries operations from inside the sandbox and reports "ok" or the errno name.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from sandbox.environment import EnvPolicy
from sandbox.launch import Launch, LaunchError, resolve_launch
from sandbox.policy import IsolationPolicy, plan_layers
from sandbox.probe import probe
from sandbox.process import SandboxedProcess, spawn
from sandbox.sweep import sweep_leftovers
from tests.platform_facts import need_layers, platform_offers
from tests.plugin_pids import host_pids
from tests.waiting import alive, exited

#: A private TMPDIR for launches with a policy (a shared /tmp is refused as a plugin TMPDIR).
PRIVATE_TMP = os.path.realpath(tempfile.mkdtemp(prefix="hostd-tests-"))

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sandbox"
PYTHON_DIR = os.path.dirname(os.path.realpath(sys.executable))
HOST_ENV = {"PATH": f"{PYTHON_DIR}:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8", "OPENAI_API_KEY": "sk-planted"}
DENIED = {"EACCES", "EPERM"}
NO_ROUTE = {"ECONNREFUSED", "EACCES", "ENETUNREACH", "EPERM"}


def need(*names: str) -> None:
    """Skip unless the kernel offers every named layer; fail if it does and the probe finds one unavailable."""
    need_layers(*names)


def need_network_deny(*, landlock: bool = True) -> None:
    """Skip where the kernel offers neither way to enforce network "deny" (a network namespace, or
    Landlock TCP rules where the policy keeps Landlock)."""
    ways = ("netns", "landlock-net") if landlock else ("netns",)
    facts = [platform_offers(way) for way in ways]
    if not any(offered for offered, _ in facts):
        pytest.skip(f"network 'deny' needs one of {list(ways)}: {[why for _, why in facts]}")


def strict(**kwargs: object) -> IsolationPolicy:
    """``network="deny"`` plus ``kwargs``; skips where the kernel cannot enforce it, fails where the
    sandbox does not plan it though the kernel can (plan_layers raises IsolationUnavailable)."""
    policy = IsolationPolicy(network="deny", **kwargs)  # type: ignore[arg-type]
    need_network_deny(landlock=bool(kwargs.get("landlock", True)))
    plan_layers(policy, probe())
    return policy


def launch_of(
    command: str,
    args: list[str],
    policy: IsolationPolicy | None,
    *,
    tmpdir: str,
    folder: Path = FIXTURES,
) -> Launch:
    return resolve_launch(
        command, args, folder, {}, EnvPolicy(), host_env=HOST_ENV, tmpdir=tmpdir, isolation_policy=policy
    )


def without_pidns(launch: Launch) -> Launch:
    """``launch`` as planned on a machine without the ``pidns`` layer (to test the other layers alone), so
    also without ``private-proc`` (the procfs of that namespace)."""
    gone = ("pidns", "private-proc")
    return dataclasses.replace(launch, isolation=tuple(layer for layer in launch.isolation if layer not in gone))


async def drain(proc: SandboxedProcess) -> tuple[bytes, bytes]:
    """Everything the plugin writes until its stdout and stderr close."""
    out = bytearray()
    err = bytearray()

    async def pump(stream: trio.abc.ReceiveStream, into: bytearray) -> None:
        while chunk := await stream.receive_some(65536):
            into += chunk

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump, proc.stdout, out)
        nursery.start_soon(pump, proc.stderr, err)
    return bytes(out), bytes(err)


async def run_to_end(launch: Launch) -> tuple[SandboxedProcess, bytes, bytes]:
    proc = await spawn(launch)
    try:
        out, err = await drain(proc)
    finally:
        await proc.stop(grace=0.5)
    return proc, out, err


async def poke(
    ops: list[list[object]], policy: IsolationPolicy | None, tmpdir: str
) -> tuple[list[str], SandboxedProcess]:
    proc, out, err = await run_to_end(launch_of("python3", ["poke.py", json.dumps(ops)], policy, tmpdir=tmpdir))
    assert out, err.decode()
    results: list[str] = json.loads(out)
    return results, proc


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    made = {name: tmp_path / name for name in ("data", "tmp", "outside")}
    for folder in made.values():
        folder.mkdir()
    (made["outside"] / "secret.txt").write_text("outside\n")
    return made


# -- what is reported ------------------------------------------------------------------------


async def test_reported_isolation_is_what_was_planned(folders: dict[str, Path]) -> None:
    policy = strict(data_dir=str(folders["data"]))
    launch = launch_of("python3", ["poke.py", "[]"], policy, tmpdir=str(folders["tmp"]))
    with trio.fail_after(10):
        proc, _, _ = await run_to_end(launch)
    assert proc.isolation == launch.isolation
    assert proc.isolation[:3] == ("shim", "rlimits", "no_new_privs")
    assert launch.describe()["isolation"] == list(launch.isolation)


async def test_a_layer_that_fails_to_apply_fails_the_spawn(folders: dict[str, Path]) -> None:
    need("landlock-net")
    policy = IsolationPolicy(network="deny", allowed_tcp_ports=(443,), seccomp=False)
    launch = launch_of("python3", ["stubborn.py"], policy, tmpdir=str(folders["tmp"]))
    assert "landlock-net" in launch.isolation
    assert launch.plan is not None
    # A port the kernel refuses (EINVAL): the layer cannot be applied, so nothing may run.
    broken = dataclasses.replace(launch, plan=dataclasses.replace(launch.plan, tcp_ports=(70000,)))
    with trio.fail_after(10), pytest.raises(LaunchError) as info:
        await spawn(broken)
    assert info.value.kind == "ISOLATION_FAILED"
    assert "landlock" in str(info.value) and "errno 22" in str(info.value)

    with trio.fail_after(10), pytest.raises(LaunchError) as info:
        await spawn(dataclasses.replace(launch, isolation=(*launch.isolation, "made-up-layer")))
    assert info.value.kind == "ISOLATION_FAILED"
    assert "made-up-layer" in str(info.value)

    with trio.fail_after(10), pytest.raises(LaunchError) as info:
        await spawn(dataclasses.replace(launch, isolation=("rlimits",)))  # layers without the shim
    assert info.value.kind == "ISOLATION_FAILED"

    with trio.fail_after(10), pytest.raises(LaunchError) as info:
        await spawn(dataclasses.replace(launch, plan=None))  # Landlock without resolved folders: no guessing
    assert info.value.kind == "ISOLATION_FAILED"


# -- Landlock filesystem -----------------------------------------------------------------------


async def test_landlock_confines_reads_and_writes(folders: dict[str, Path]) -> None:
    need("landlock-fs")
    policy = IsolationPolicy(data_dir=str(folders["data"]))
    ops: list[list[object]] = [
        ["read", str(FIXTURES / "poke.py")],  # 0 its plugin folder
        ["list", str(FIXTURES)],  # 1
        ["write", str(folders["data"] / "state.json")],  # 2 its data folder
        ["write", str(folders["tmp"] / "scratch")],  # 3 its TMPDIR
        ["read", str(folders["outside"] / "secret.txt")],  # 4 another tmp folder
        ["list", str(folders["outside"])],  # 5
        ["write", str(folders["outside"] / "dropped")],  # 6
        ["write", str(FIXTURES / "dropped-by-plugin")],  # 7 its own folder is read-only
        ["read", "/etc/shadow"],  # 8 /etc beyond the runtime's needs
        ["read", f"/proc/{os.getpid()}/environ"],  # 9 the host's environment (secrets)
        ["read", "/etc/ssl/openssl.cnf"],  # 10 what runtimes need stays readable
        ["write", "/dev/null"],  # 11
    ]
    with trio.fail_after(10):
        results, proc = await poke(ops, policy, str(folders["tmp"]))
    assert "landlock-fs" in proc.isolation
    assert results[0:4] == ["ok", "ok", "ok", "ok"]
    assert results[4] in DENIED and results[5] in DENIED and results[6] in DENIED and results[7] in DENIED
    assert results[8] in DENIED
    if os.geteuid() != 0 or platform_offers("netns")[0]:
        # Landlock's ptrace scoping; root also needs its user namespace (else CAP_SYS_PTRACE lets it read),
        # which it gets wherever the kernel offers user + network namespaces.
        assert os.geteuid() != 0 or "userns" in proc.isolation
        # With its own /proc (private-proc) hostd's pid is not there at all; else Landlock denies it.
        assert results[9] in ({"ENOENT"} if "private-proc" in proc.isolation else DENIED)
    assert results[10] in ("ok", "ENOENT")
    assert results[11] == "ok"
    assert (folders["data"] / "state.json").read_text() == "written\n"
    assert not (folders["outside"] / "dropped").exists()
    assert not (FIXTURES / "dropped-by-plugin").exists()

    # The same operations without Landlock: the denials above are Landlock's, not file modes.
    with trio.fail_after(10):
        results, proc = await poke(ops[4:7], IsolationPolicy(landlock=False), str(folders["tmp"]))
    assert "landlock-fs" not in proc.isolation
    assert results == ["ok", "ok", "ok"]


async def test_a_manifest_tmpdir_does_not_widen_the_writable_set(tmp_path: Path, folders: dict[str, Path]) -> None:
    """TMPDIR is hostd's (created, checked, emptied): a manifest may not set it (ENV_POLICY); even allowed
    (the embedder's escape hatch), the folder it names gets no write rule."""
    need("landlock-fs")
    poke = ["poke.py", json.dumps([["write", str(folders["outside"] / "via-manifest")]])]
    with pytest.raises(LaunchError) as refused:
        resolve_launch(
            "python3",
            poke,
            FIXTURES,
            {"TMPDIR": str(folders["outside"])},
            EnvPolicy(),
            host_env=HOST_ENV,
            tmpdir=str(folders["tmp"]),
            isolation_policy=IsolationPolicy(),
        )
    assert refused.value.kind == "ENV_POLICY"
    launch = resolve_launch(
        "python3",
        poke,
        FIXTURES,
        {"TMPDIR": str(folders["outside"])},
        EnvPolicy(allow_loader_vars=True),
        host_env=HOST_ENV,
        tmpdir=str(folders["tmp"]),
        isolation_policy=IsolationPolicy(),
    )
    assert launch.env["TMPDIR"] == str(folders["outside"])
    with trio.fail_after(10):
        _, out, _ = await run_to_end(launch)
    assert json.loads(out) == ["EACCES"]


async def test_python_and_node_run_under_landlock_and_netns(folders: dict[str, Path]) -> None:
    need("landlock-fs", "netns")
    policy = IsolationPolicy(network="deny", data_dir=str(folders["data"]))
    script = "import json, ssl, asyncio, tempfile; tempfile.TemporaryFile().close(); print(json.dumps([1]))"
    launch = launch_of("python3", ["-c", script], policy, tmpdir=str(folders["tmp"]))
    with trio.fail_after(15):
        proc, out, err = await run_to_end(launch)
    assert {"landlock-fs", "netns"} <= set(proc.isolation)
    assert proc.returncode == 0, err.decode()
    assert out == b"[1]\n"

    if shutil.which("node", path=HOST_ENV["PATH"]) is None:
        pytest.skip("node is not installed")
    launch = launch_of("node", ["-e", "console.log(1)"], policy, tmpdir=str(folders["tmp"]))
    with trio.fail_after(15):
        proc, out, err = await run_to_end(launch)
    assert {"landlock-fs", "netns"} <= set(proc.isolation)
    assert proc.returncode == 0, err.decode()
    assert out == b"1\n"


# -- network -----------------------------------------------------------------------------------


@pytest.fixture
async def listeners() -> AsyncIterator[list[int]]:
    """Two TCP listeners on 127.0.0.1 in the test (the host side); yields their ports."""
    async with trio.open_nursery() as nursery:
        ports: list[int] = []
        for _ in range(2):
            found = await nursery.start(_serve)
            ports.append(found)
        yield ports
        nursery.cancel_scope.cancel()


async def _serve(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    task_status.started(listener.socket.getsockname()[1])

    async def hang_up(stream: trio.abc.Stream) -> None:
        await stream.aclose()

    await trio.serve_listeners(hang_up, [listener])


async def test_network_deny_blocks_a_host_listener_and_allow_reaches_it(
    listeners: list[int], folders: dict[str, Path]
) -> None:
    port = listeners[0]
    ops: list[list[object]] = [["connect", "127.0.0.1", port]]
    tmp = str(folders["tmp"])
    with trio.fail_after(20):
        allowed, proc = await poke(ops, IsolationPolicy(), tmp)
        assert allowed == ["ok"]
        assert not {"netns", "landlock-net"} & set(proc.isolation)

        need_network_deny()
        denied, proc = await poke(ops, IsolationPolicy(network="deny"), tmp)
        assert {"netns", "landlock-net"} & set(proc.isolation)
        assert denied[0] in NO_ROUTE


async def test_network_namespace_alone_denies(listeners: list[int], folders: dict[str, Path]) -> None:
    need("netns")
    ops: list[list[object]] = [["connect", "127.0.0.1", listeners[0]]]
    with trio.fail_after(10):
        results, proc = await poke(ops, IsolationPolicy(network="deny", landlock=False), str(folders["tmp"]))
    assert "netns" in proc.isolation and "landlock-net" not in proc.isolation
    # Its own loopback is up, but nothing listens there: the host's listener is in another namespace.
    assert results == ["ECONNREFUSED"]


async def test_landlock_tcp_ports_allow_only_the_listed_port(listeners: list[int], folders: dict[str, Path]) -> None:
    need("landlock-net")
    granted, other = listeners
    policy = IsolationPolicy(network="deny", allowed_tcp_ports=(granted,))
    ops: list[list[object]] = [["connect", "127.0.0.1", granted], ["connect", "127.0.0.1", other]]
    with trio.fail_after(10):
        results, proc = await poke(ops, policy, str(folders["tmp"]))
    assert "landlock-net" in proc.isolation and "netns" not in proc.isolation
    assert results == ["ok", "EACCES"]


# -- signals, seccomp ------------------------------------------------------------------------


@pytest.fixture
async def victim() -> AsyncIterator[trio.Process]:
    """A sacrificial process standing in for hostd (same user, outside the sandbox)."""
    proc = await trio.lowlevel.open_process(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        await proc.wait()


async def test_signal_scoping_protects_the_host_and_the_shim(victim: trio.Process, folders: dict[str, Path]) -> None:
    need("landlock-scope")
    tmp = str(folders["tmp"])
    with trio.fail_after(10):
        # Control: without Landlock (and without a pid namespace) the plugin may signal it (signal 0:
        # the permission check only).
        control = launch_of(
            "python3", ["poke.py", json.dumps([["kill", victim.pid, 0]])], IsolationPolicy(landlock=False), tmpdir=tmp
        )
        _, out, err = await run_to_end(without_pidns(control))
        assert json.loads(out) == ["ok"], err.decode()
        ops = [["kill", victim.pid, 0], ["kill", victim.pid, signal.SIGKILL], ["kill", "parent", signal.SIGKILL]]
        launch = launch_of("python3", ["poke.py", json.dumps(ops)], IsolationPolicy(), tmpdir=tmp)
        # Landlock's scope alone (a machine without the pidns layer): the victim is seen but out of reach.
        proc, out, err = await run_to_end(without_pidns(launch))
        assert "landlock-scope" in proc.isolation and "pidns" not in proc.isolation
        assert json.loads(out) == ["EPERM", "EPERM", "EPERM"], err.decode()
        assert victim.poll() is None
        assert proc.returncode == 0  # its shim was not killed: the plugin exited normally
        if platform_offers("pidns")[0]:  # the kernel's word: a pidns layer the plan lost fails below
            # In its own pid namespace the host's processes do not even exist for it; its parent is
            # the namespace's pid 1 (outside its Landlock domain).
            proc, out, err = await run_to_end(launch)
            assert {"landlock-scope", "pidns"} <= set(proc.isolation)
            assert json.loads(out) == ["ESRCH", "ESRCH", "EPERM"], err.decode()
            assert victim.poll() is None
            assert proc.returncode == 0


async def test_seccomp_denies_ptrace_and_unix_sockets_when_network_is_denied(
    tmp_path: Path, folders: dict[str, Path]
) -> None:
    need("seccomp")
    path = str(tmp_path / "daemon.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    ops: list[list[object]] = [["ptrace"], ["unix", path], ["status", "Seccomp"], ["status", "NoNewPrivs"]]
    tmp = str(folders["tmp"])
    try:
        with trio.fail_after(10):
            open_results, proc = await poke(ops, IsolationPolicy(landlock=False), tmp)
            assert "seccomp" in proc.isolation
            assert open_results == ["EPERM", "ok", "2", "1"]  # a unix socket is reachable with network "allow"
            denied, proc = await poke(ops, strict(landlock=False), tmp)
            assert denied == ["EPERM", "EACCES", "2", "1"]
            bare, proc = await poke(ops, IsolationPolicy(landlock=False, seccomp=False), tmp)
            assert "seccomp" not in proc.isolation
            assert bare[1:] == ["ok", "0", "1"]
    finally:
        server.close()


# -- the tree still ends -----------------------------------------------------------------------


async def read_pids(proc: SandboxedProcess) -> list[int]:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await proc.stdout.receive_some(4096)
        assert chunk
        line += chunk
    report = json.loads(line)
    return host_pids(report["pidns"], report["pids"])


async def test_hostile_tree_ends_under_every_layer(folders: dict[str, Path]) -> None:
    policy = strict(data_dir=str(folders["data"]))
    with trio.fail_after(10):
        proc = await spawn(launch_of("python3", ["tree.py", "stubborn"], policy, tmpdir=str(folders["tmp"])))
        pids = await read_pids(proc)
        assert all(alive(pid) for pid in pids)
        report = await proc.stop(grace=0.2)
    assert report.step == "sigkill"
    assert [pid for pid in pids if alive(pid)] == []


@pytest.mark.parametrize("pidns", [False, True], ids=["netns-in-child", "pidns"])
async def test_parent_death_signal_survives_the_namespace_switch(folders: dict[str, Path], pidns: bool) -> None:
    need("netns", *(["pidns"] if pidns else []))
    launch = launch_of("python3", ["tree.py", "stubborn"], IsolationPolicy(network="deny"), tmpdir=str(folders["tmp"]))
    if not pidns:  # the shim's child enters the namespace itself (a machine without the pidns layer)
        launch = without_pidns(launch)
    with trio.fail_after(10):
        proc = await spawn(launch)
        try:
            pids = await read_pids(proc)
            assert "netns" in proc.isolation and proc.shim_pid is not None
            assert ("pidns" in proc.isolation) == pidns
            os.kill(proc.shim_pid, signal.SIGKILL)
            assert await proc.wait() == -signal.SIGKILL  # PR_SET_PDEATHSIG still fired
            assert not alive(pids[0])
            if pidns:
                # pid 1 of the namespace died of its parent-death signal, and the kernel took the rest.
                for pid in pids:
                    await exited(pid)
                assert [pid for pid in pids if alive(pid)] == []
                assert sweep_leftovers(proc.token) == 0
            else:
                assert sweep_leftovers(proc.token) >= 1  # the token sweep reaches into the namespace
            assert [pid for pid in pids if alive(pid)] == []
        finally:
            await proc.stop(grace=0.1)


async def test_pdeathsig_is_not_lost_after_exec_in_a_user_namespace() -> None:
    """PR_SET_PDEATHSIG is readable back with PR_GET_PDEATHSIG; check the plugin still has it."""
    need("netns")
    code = (
        "import ctypes, sys; v = ctypes.c_int(); ctypes.CDLL(None).prctl(2, ctypes.byref(v), 0, 0, 0); print(v.value)"
    )
    launch = launch_of("python3", ["-c", code], IsolationPolicy(network="deny"), tmpdir=PRIVATE_TMP)
    with trio.fail_after(10):
        _, out, err = await run_to_end(launch)
    assert out.strip() == str(int(signal.SIGKILL)).encode(), err.decode()


async def test_spawn_cost_per_layer(tmp_path: Path) -> None:
    """Prints median spawn cost per layer set (full figures: python -m bench.spawn_cost 31)."""
    need("landlock-fs", "landlock-net", "landlock-scope", "netns", "seccomp")
    module = importlib.import_module("bench.spawn_cost")
    with trio.fail_after(60):
        results = await module.measure(3, str(tmp_path))
    print()
    for name, row in results["variants"].items():
        print(f"{name:16} spawn {row['spawn_ms']:6.1f} ms  first reply {row['reply_ms']:6.1f} ms  {row['layers']}")
        assert row["spawn_ms"] < 2000 and row["reply_ms"] < 4000
    assert {"direct", "shim (fork)", "shim (exec)", "+pidns (fork)", "+pidns (exec)"} <= set(results["variants"])
    print(results["shim_memory"], results["targets"])
    assert set(results["targets"]) == {"fork", "exec"}
