"""The key isolation checks again, as the unprivileged user nobody (65534), through setpriv.

The test process must be root (to switch user). The driver fixtures/sandbox/unprivileged.py
runs under the system Python (nobody cannot enter /root, where this venv's interpreter may
live) with this checkout and the venv's site-packages on PYTHONPATH; its work folder is
created for nobody. It proves, for an unprivileged user: the probe's layers apply; Landlock
confines reads and writes; network "deny" blocks a listener on 127.0.0.1 that "allow"
reaches; the same "deny" refuses socket kinds its rules do not cover (MPTCP, vsock, packet,
netlink sock_diag) and a granted port opens plain TCP only; signal scoping protects another
process of the same user; the shim ends a hostile tree.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from tests.nobody import NOBODY, ROOT, nobody_folder, run_driver, skip_reason
from tests.platform_facts import platform_offers

DRIVER = ROOT / "fixtures" / "sandbox" / "unprivileged.py"


#: The layers the test below asserts nobody gets.
LAYERS = ("landlock-fs", "landlock-net", "landlock-scope", "netns", "seccomp", "seccomp-net")


@pytest.fixture
def work() -> Iterator[Path]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    for layer in LAYERS:
        offered, why = platform_offers(layer, as_nobody=True)
        if not offered:
            pytest.skip(f"as nobody, {layer}: {why}")
    with nobody_folder() as folder:
        yield folder


@pytest.fixture
async def listener_port() -> AsyncIterator[int]:
    async def hang_up(stream: trio.abc.Stream) -> None:
        await stream.aclose()

    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, hang_up, [listener])
        yield listener.socket.getsockname()[1]
        nursery.cancel_scope.cancel()


async def test_layers_and_tree_kill_work_for_an_unprivileged_user(work: Path, listener_port: int) -> None:
    result = await run_driver(DRIVER, work, str(listener_port))
    print("\nas nobody:", json.dumps(result["isolation"]))

    assert result["uid"] == NOBODY
    assert result["capeff"] == "0000000000000000"  # truly unprivileged: no capability at all
    # The platform offers nobody every one of LAYERS (the fixture checked): the probe, as nobody, finds them.
    assert {name: detail for name, ok, detail in result["probe"] if name in LAYERS and not ok} == {}
    assert set(LAYERS) <= set(result["isolation"])
    read_plugin, write_data, write_tmp, read_outside, write_outside, connect = result["fs"]
    assert [read_plugin, write_data, write_tmp] == ["ok", "ok", "ok"]
    assert read_outside == "EACCES" and write_outside == "EACCES"  # nobody's own files, outside the sandbox
    assert connect in ("EACCES", "ECONNREFUSED", "ENETUNREACH")
    assert result["net_allow"] == ["ok"]  # the same listener is reachable without "deny"
    # Socket kinds no other layer covers (MPTCP, vsock, packet, netlink sock_diag): refused by seccomp-net.
    assert result["sockets"] == ["EPROTONOSUPPORT", "EAFNOSUPPORT", "EAFNOSUPPORT", "EPROTONOSUPPORT"]
    # Plain TCP to the granted port; no MPTCP to a port plain TCP was refused, nor to the granted one.
    assert result["ports"] == ["ok", "EACCES", "EPROTONOSUPPORT", "EPROTONOSUPPORT"]
    assert result["refused_port_reached"] is False
    # nobody's own process, outside the Landlock domain (and, with pidns, outside the plugin's pid namespace)
    pidns = platform_offers("pidns", as_nobody=True)[0]  # the kernel's word, not the plan's
    assert ("pidns" in result["isolation"]) == pidns
    assert result["kill"] == (["ESRCH"] if pidns else ["EPERM"])
    assert result["victim_alive"]
    assert len(result["tree"]) == 4
    assert result["tree_step"] == "sigkill"
    assert result["tree_alive"] == []
    # The shims come from this user's own fork server, a child of the driver (sandbox.forkserver._ForkServer).
    assert result["shim_parent"] == ["hostd-shimsrv", NOBODY, True]
