"""Exhausted resources are a named, transient error, never INTERNAL_ERROR (issue 31, class 6).

The class: a failure of the machine (no descriptor, no memory, no disk, no process left) answered as if it were
a defect of hostd (``INTERNAL_ERROR: OSError(24, 'Too many open files')``) or of the document being read
(``MANIFEST_INVALID: cannot open the plugin folder``). It answers ``RESOURCE_EXHAUSTED`` with ``data.resource``
and ``data.transient: true``; the request may work later, and does once the resource is back
(``hostd/wire/errors.py``, ``exhausted``). Descriptors are the member a user meets first (macOS's soft limit is
256), so hostd raises its own soft limit to the hard one at start and gives its plugins the old one back
(``sandbox/limits.py``). Linux only: the limits are read and set through ``prlimit`` on a live hostd.
"""

from __future__ import annotations

import errno
import os
import resource
import sys
from pathlib import Path

import pytest

from hostd.cli.client import RpcError
from hostd.wire.errors import ErrorKind, exhausted
from tests.conftest import MakePlugin, ready, sandboxed_pids, spawn_hostd

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="prlimit and /proc are Linux's")


def _open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _plugin_pid(hostd_pid: int) -> int:
    """The pid of the one plugin server this hostd runs (its token names the hostd; not the shim)."""
    servers = [
        p
        for p in sandboxed_pids()
        if p.environ()["HOSTD_SANDBOX_TOKEN"].split(".")[1] == str(hostd_pid) and "shim.py" not in " ".join(p.cmdline())
    ]
    assert len(servers) == 1, [p.cmdline() for p in servers]
    return servers[0].pid


async def test_hostd_raises_its_descriptor_limit_and_its_plugins_get_the_old_one(
    tmp_path: Path, make_plugin: MakePlugin
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 300:
        pytest.skip(f"this machine's hard descriptor limit ({hard}) leaves nothing to raise to")
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # macOS's default soft limit, for the child
    try:
        async with spawn_hostd(tmp_path) as client:
            pid = client.process.pid
            assert resource.prlimit(pid, resource.RLIMIT_NOFILE) == (hard, hard)
            await ready(client, make_plugin())
            assert resource.prlimit(_plugin_pid(pid), resource.RLIMIT_NOFILE) == (256, min(hard, 65536))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_running_out_of_descriptors_is_named_and_transient(tmp_path: Path, make_plugin: MakePlugin) -> None:
    async with spawn_hostd(tmp_path) as client:
        pid = client.process.pid
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        await ready(client, make_plugin("first"))
        second = make_plugin("second")
        info = await client.request("plugins/install", {"path": str(second)})
        await client.request("plugins/grant", {"id": "second", "permissions": info["permissions"]})
        await client.request("plugins/approve", {"id": "second", "digest": info["launch"]["digest"]})
        # No descriptor left to open: what hostd holds now, and one more.
        tight = _open_descriptors(pid) + 1
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (tight, limits[1]))
        try:
            with pytest.raises(RpcError) as failed:
                await client.request("plugins/enable", {"id": "second"})
            data = failed.value.data
            assert (data["kind"], data["resource"], data["transient"]) == (
                "RESOURCE_EXHAUSTED",
                "descriptors",
                True,
            )
            assert data["errno"] == "EMFILE"
            # A plugin already serving keeps serving: what a call needs was prepared when its tools registered.
            answer = await client.request("tools/call", {"name": "first.echo", "arguments": {"text": "still here"}})
            assert answer["structuredContent"] == {"text": "still here", "length": 10}
            # And its arguments are still checked: a call loads nothing that registering its tools did not.
            with pytest.raises(RpcError) as invalid:
                await client.request("tools/call", {"name": "first.echo", "arguments": {"text": 5}})
            assert (invalid.value.kind, invalid.value.data["pointer"]) == ("INVALID_ARGUMENTS", "/text")
            # Installing reads a folder: the same error, not MANIFEST_INVALID.
            with pytest.raises(RpcError) as install_failed:
                await client.request("plugins/install", {"path": str(make_plugin("third"))})
            assert install_failed.value.kind == "RESOURCE_EXHAUSTED"
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        # Transient: with descriptors back, the same request works.
        status = await client.request("plugins/enable", {"id": "second"})
        assert status["status"] == "ready"
        second_answer = await client.request("tools/call", {"name": "second.echo", "arguments": {"text": "back"}})
        assert second_answer["structuredContent"] == {"text": "back", "length": 4}


@pytest.mark.parametrize(
    ("exc", "resource_name", "errno_name"),
    [
        (OSError(errno.EMFILE, "Too many open files"), "descriptors", "EMFILE"),
        (OSError(errno.ENFILE, "Too many open files in system"), "descriptors", "ENFILE"),
        (OSError(errno.ENOSPC, "No space left on device"), "disk", "ENOSPC"),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), "disk", "EDQUOT"),
        (BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"), "processes", "EAGAIN"),
        (MemoryError(), "memory", None),
        (RuntimeError("can't start new thread"), "processes", None),
        # Wrapped: a nursery's group, or an error raised while handling one.
        (ExceptionGroup("x", [ValueError("v"), OSError(errno.EMFILE, "Too many open files")]), "descriptors", "EMFILE"),
    ],
)
def test_each_kind_of_exhaustion_is_recognised(exc: BaseException, resource_name: str, errno_name: str | None) -> None:
    error = exhausted(exc, "testing")
    assert error is not None
    assert (error.kind, error.data) == (
        ErrorKind.RESOURCE_EXHAUSTED,
        {"resource": resource_name, "errno": errno_name, "transient": True},
    )


def test_a_cause_chain_is_followed_and_other_failures_are_not_exhaustion() -> None:
    try:
        try:
            raise OSError(errno.EMFILE, "Too many open files")
        except OSError as inner:
            raise RuntimeError("spawning the shim failed") from inner
    except RuntimeError as outer:
        found = exhausted(outer, "spawning")
    assert found is not None
    assert (
        found.message == "hostd ran out of descriptors while spawning (Too many open files); retry once some are freed"
    )
    for other in (OSError(errno.ENOENT, "No such file"), ValueError("x"), RuntimeError("other"), KeyError("k")):
        assert exhausted(other, "testing") is None
