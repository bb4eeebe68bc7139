"""Call-time grants (issue 25, under-granting item 4): a file the user hands a tool reaches it -- with consent.

The class: a ``tools/call`` names a local file or folder (absolute, ``~/``, ``file://``, nested, an output to
create) that the plugin's Landlock rules do not cover. Before this, the server got the call and answered
``Permission denied`` -- or, through a library that swallows ``EACCES``, a wrong normal result ("Package not
found") -- and nothing said what to grant. Now hostd asks a parent that declared ``capabilities.grants``
(``grants/request``), grants (``once`` / ``always``), restarts the plugin so the rule is in force, then delivers
the call; on ``no``, without the capability, or for a path the sandbox refuses, the call fails with
``ACCESS_NOT_GRANTED`` carrying the exact grant, and the server never sees it (its own record says so).

Real processes: hostd, the fixture server ``fixtures/mcp-files`` under Landlock, a parent (``HostdClient``)
answering ``grants/request``. What it proves for an unprivileged user: the same, since Landlock needs no
privilege and the fixture's files are the test's own (``tests/test_grant_folders.py`` shows the refusal
without a grant for a user's files).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from tests.conftest import ROOT, hostctl_on_a_terminal, run_hostctl
from tests.nobody import nobody_folder, run_driver, skip_reason
from tests.platform_facts import need_layers

FILES = ROOT / "fixtures" / "mcp-files"
CLIENT = {"clientInfo": {"name": "test-parent", "version": "0"}}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home with ``docs/report.txt``, ``docs/q3.xlsx`` and an empty ``out``."""
    need_layers("landlock-fs")  # skips where the kernel has no Landlock, fails where the sandbox lost it
    home = tmp_path / "home"
    (home / "docs").mkdir(parents=True)
    (home / "out").mkdir()
    (home / "docs" / "report.txt").write_text("the quarterly report")
    (home / "docs" / "q3.xlsx").write_text("q3 numbers")
    return home


def files_plugin(tmp_path: Path, *, record: bool = True) -> Path:
    """fixtures/mcp-files copied outside the home, recording every tools/call to shared/record.jsonl."""
    folder = tmp_path / "plugins" / "mcp-files"
    shutil.copytree(FILES, folder)
    if not record:
        return folder
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["args"] = ["server.py", "--record", str(tmp_path / "shared" / "record.jsonl")]
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return folder


def recorded(tmp_path: Path) -> list[dict[str, Any]]:
    """The tools/call requests the server received (its own record)."""
    record = tmp_path / "shared" / "record.jsonl"
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


@asynccontextmanager
async def parent(tmp_path: Path, home: Path, answer: str | None) -> AsyncIterator[HostdClient]:
    """hostd with HOME = ``home`` driven by a parent that answers ``grants/request`` with ``answer``
    (``None``: a parent that does not declare ``capabilities.grants``)."""
    (tmp_path / "shared").mkdir(exist_ok=True)
    initialize = {**CLIENT, "capabilities": {"grants": {}}} if answer is not None else CLIENT
    async with HostdClient.spawn(
        ["--state-dir", str(tmp_path / "state"), "--allow-write", str(tmp_path / "shared")],
        env={**plugin_environment(), "HOME": str(home)},
        initialize=initialize,
    ) as hostd:
        if answer is not None:

            async def on_request(method: str, params: dict[str, Any]) -> Any:
                assert method == "grants/request"
                return {"grant": answer}

            hostd.on_request = on_request
        yield hostd


async def enabled(hostd: HostdClient, tmp_path: Path) -> dict[str, Any]:
    info: dict[str, Any] = await hostd.request("plugins/install", {"path": str(files_plugin(tmp_path))})
    await hostd.request("plugins/approve", {"id": "mcp-files", "digest": info["launch"]["digest"]})
    status = await hostd.request("plugins/enable", {"id": "mcp-files"})
    assert status["status"] == "ready"
    return info


async def call(hostd: HostdClient, tool: str, **arguments: Any) -> dict[str, Any]:
    result: dict[str, Any] = await hostd.request("tools/call", {"name": f"mcp-files.{tool}", "arguments": arguments})
    return result


def asked(hostd: HostdClient) -> list[dict[str, Any]]:
    return [params for _, method, params in hostd.requests if method == "grants/request"]


async def test_yes_once_grants_the_file_restarts_the_plugin_and_delivers_the_call(tmp_path: Path, home: Path) -> None:
    report = home / "docs" / "report.txt"
    async with parent(tmp_path, home, "once") as hostd:
        info = await enabled(hostd, tmp_path)
        result = await call(hostd, "read_file", path="~/docs/report.txt")
        assert result["content"] == [{"type": "text", "text": "the quarterly report"}]
        assert asked(hostd) == [
            {
                "plugin": "mcp-files",
                "tool": "mcp-files.read_file",
                "paths": [{"path": str(report), "access": "read", "argument": "/path", "value": "~/docs/report.txt"}],
                "reason": f"the tool mcp-files.read_file was called with {report} (read), which plugin mcp-files "
                "may not reach",
            }
        ]
        # The server expands "~" with its own HOME, a private view: the user's "~" reaches it written out (issue 25).
        assert recorded(tmp_path) == [{"name": "read_file", "arguments": {"path": str(report)}}]
        # In force now: the same file (absolute this time) is not asked for again, and the approval stands.
        again = await call(hostd, "read_file", path=str(report))
        assert again["content"] == [{"type": "text", "text": "the quarterly report"}]
        assert len(asked(hostd)) == 1
        [listed] = (await hostd.request("plugins/list", {}))["plugins"]
        assert listed["launch"]["approved"] is True
        assert listed["launch"]["digest"] == info["launch"]["digest"]
        # Shown in the launch, and not written to the state (once: until hostd exits).
        assert {k: v for k, v in listed["launch"]["folders"].items() if k.startswith("call.")} == {
            "call.read[0]": str(report)
        }
        # And in the one capability set, with its access and why.
        granted = [f for f in listed["launch"]["capabilities"]["folders"] if f["why"] == "call-time grant"]
        assert granted == [{"path": str(report), "access": "read", "why": "call-time grant", "source": "once"}]
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert "callGrants" not in stored["plugins"]["mcp-files"]  # once: never written


async def test_no_fails_with_the_grant_to_make_and_the_server_never_sees_the_call(tmp_path: Path, home: Path) -> None:
    report = home / "docs" / "report.txt"
    async with parent(tmp_path, home, "no") as hostd:
        await enabled(hostd, tmp_path)
        with pytest.raises(RpcError) as refused:
            await call(hostd, "read_file", path=str(report))
        assert refused.value.kind == "ACCESS_NOT_GRANTED"
        assert refused.value.data["reason"] == "declined"
        assert refused.value.data["grants"] == [{"id": "mcp-files", "path": str(report), "access": "read"}]
        assert refused.value.data["commands"] == [f"hostctl allow mcp-files {report}"]
        assert len(asked(hostd)) == 1
        # A call naming no file still goes through; the refused one never reached the server.
        with pytest.raises(RpcError) as missing:
            await call(hostd, "read_file", path="relative.txt")
        assert missing.value.kind == "MCP_TOOL_CALL_FAILED"
    assert recorded(tmp_path) == [{"name": "read_file", "arguments": {"path": "relative.txt"}}]


async def test_a_parent_without_the_capability_gets_the_exact_grant_which_then_works(
    tmp_path: Path, home: Path
) -> None:
    document = home / "docs" / "q3.xlsx"
    async with parent(tmp_path, home, None) as hostd:
        await enabled(hostd, tmp_path)
        with pytest.raises(RpcError) as refused:
            await call(hostd, "open_document", document=document.as_uri())
        assert refused.value.kind == "ACCESS_NOT_GRANTED"
        assert refused.value.data["reason"] == "no-capability"
        assert refused.value.data["paths"] == [
            {"path": str(document), "access": "read", "argument": "/document", "value": document.as_uri()}
        ]
        [grant] = refused.value.data["grants"]
        assert recorded(tmp_path) == []
        assert hostd.requests == []
        # The grant it names, made by hand, lets the next call through (the plugin restarted transparently).
        await hostd.request("plugins/grantPath", grant)
        result = await call(hostd, "open_document", document=document.as_uri())
        assert result["content"] == [{"type": "text", "text": "q3 numbers"}]
        assert hostd.requests == []
        # Revoked: refused again, before the server.
        await hostd.request("plugins/revokePath", {"id": "mcp-files", "path": str(document)})
        with pytest.raises(RpcError) as again:
            await call(hostd, "open_document", document=document.as_uri())
        assert again.value.kind == "ACCESS_NOT_GRANTED"
    assert len(recorded(tmp_path)) == 1


async def test_a_library_that_swallows_eacces_gets_the_file(tmp_path: Path, home: Path) -> None:
    """The office-document server answered a normal result "Package not found" for a file it could not open."""
    document = home / "docs" / "q3.xlsx"
    async with parent(tmp_path, home, "once") as hostd:
        await enabled(hostd, tmp_path)
        result = await call(hostd, "open_document", document=document.as_uri())
        assert result["content"] == [{"type": "text", "text": "q3 numbers"}]


async def test_an_output_to_create_asks_for_its_folder_read_write(tmp_path: Path, home: Path) -> None:
    out = home / "out"
    async with parent(tmp_path, home, "once") as hostd:
        await enabled(hostd, tmp_path)
        result = await call(hostd, "write_report", output="~/out/summary.txt", text="written")
        assert result["content"] == [{"type": "text", "text": "ok"}]
        assert [a["paths"] for a in asked(hostd)] == [
            [{"path": str(out), "access": "write", "argument": "/output", "value": "~/out/summary.txt"}]
        ]
    assert (out / "summary.txt").read_text() == "written"


async def test_a_tool_whose_annotations_do_not_say_read_only_is_asked_read_write(tmp_path: Path, home: Path) -> None:
    """office-word-mcp-server 1.1.11's ``add_paragraph`` (annotations: a ``title`` only) was asked for ``read``;
    on yes the server answered ``Permission denied`` writing the user's document. MCP defaults ``readOnlyHint``
    to ``false``: a tool whose annotations do not say read-only may write what it names. And excel-mcp-server
    2.2.2's ``write_range``, granted the workbook read-write, failed on its atomic save (``mkstemp`` beside the
    file: ``Permission denied``): writing an existing file needs its folder (issue 25)."""
    report = home / "docs" / "report.txt"
    async with parent(tmp_path, home, "once") as hostd:
        await enabled(hostd, tmp_path)
        result = await call(hostd, "add_paragraph", filename="~/docs/report.txt", text="added")
        assert result["content"] == [{"type": "text", "text": "ok"}]
        # Saved atomically (a temporary file beside it, renamed over it): its folder is what must be writable.
        assert [a["paths"] for a in asked(hostd)] == [
            [{"path": str(report.parent), "access": "write", "argument": "/filename", "value": "~/docs/report.txt"}]
        ]
    assert report.read_text() == "the quarterly reportadded\n"
    assert sorted(p.name for p in report.parent.iterdir()) == ["q3.xlsx", "report.txt"]  # no temporary left


async def test_always_is_recorded_and_kept_across_restarts_of_hostd(tmp_path: Path, home: Path) -> None:
    report = home / "docs" / "report.txt"
    async with parent(tmp_path, home, "always") as hostd:
        info = await enabled(hostd, tmp_path)
        result = await call(hostd, "read_file", path=str(report))
        assert result["content"] == [{"type": "text", "text": "the quarterly report"}]
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert stored["plugins"]["mcp-files"]["callGrants"] == {str(report): "read"}
    async with parent(tmp_path, home, None) as hostd:  # no one to ask now: the recorded grant is enough
        await hostd.wait_for("plugins/statusChanged", lambda n: n["status"] == "ready")
        result = await call(hostd, "read_file", path=str(report))
        assert result["content"] == [{"type": "text", "text": "the quarterly report"}]
        [listed] = (await hostd.request("plugins/list", {}))["plugins"]
        assert listed["launch"]["approved"] is True
        assert listed["launch"]["digest"] == info["launch"]["digest"]
        assert hostd.requests == []


async def test_a_path_the_sandbox_refuses_is_not_granted_even_on_yes(tmp_path: Path, home: Path) -> None:
    """``~`` itself: a rule covering the home is refused by the sandbox; the yes grants nothing."""
    async with parent(tmp_path, home, "always") as hostd:
        await enabled(hostd, tmp_path)
        with pytest.raises(RpcError) as refused:
            await call(hostd, "read_file", path="~")
        assert refused.value.kind == "ACCESS_NOT_GRANTED"
        assert refused.value.data["reason"] == "refused"
        [listed] = (await hostd.request("plugins/list", {}))["plugins"]
        assert not [k for k in listed["launch"]["folders"] if k.startswith("call.")]
    stored = json.loads((tmp_path / "state" / "state.json").read_text())
    assert "callGrants" not in stored["plugins"]["mcp-files"]
    assert recorded(tmp_path) == []


async def test_hostctl_names_the_grant_and_allow_makes_it(tmp_path: Path, home: Path) -> None:
    """Without a terminal hostctl declares no grants: the call fails naming ``hostctl allow``, which works."""
    report = home / "docs" / "report.txt"
    state = tmp_path / "state"
    env = {**plugin_environment(), "HOME": str(home)}

    async def hostctl(*args: str) -> Any:
        return await run_hostctl(state, *args, env=env, timeout=120)

    folder = files_plugin(tmp_path, record=False)
    for step in (["install", str(folder)], ["approve", "mcp-files", "--yes"], ["enable", "mcp-files"]):
        done = await hostctl(*step)
        assert done.returncode == 0, done.stderr
    refused = await hostctl("call", "mcp-files", "read_file", json.dumps({"path": str(report)}))
    assert refused.returncode == 1
    assert "ACCESS_NOT_GRANTED" in refused.stderr
    assert f"hostctl allow mcp-files {report}" in refused.stderr
    allowed = await hostctl("allow", "mcp-files", "~/docs/report.txt")
    assert allowed.returncode == 0, allowed.stderr
    done = await hostctl("call", "mcp-files", "read_file", json.dumps({"path": str(report)}))
    assert (done.returncode, done.stdout.strip()) == (0, "the quarterly report")
    listed = json.loads((await hostctl("list", "--json")).stdout)
    [info] = listed["plugins"] if isinstance(listed, dict) else listed
    assert {k: v for k, v in info["launch"]["folders"].items() if k.startswith("call.")} == {
        "call.read[0]": str(report)
    }
    # hostctl approve shows the one capability set (no terminal: shown, then refused for want of a yes).
    shown = await hostctl("approve", "mcp-files")
    assert shown.returncode == 1
    lines = [" ".join(line.split()) for line in shown.stderr.splitlines()]
    assert f"reaches {report} read, call-time grant: always" in lines
    assert "network all" in lines
    revoked = await hostctl("allow", "mcp-files", str(report), "--revoke")
    assert revoked.returncode == 0, revoked.stderr
    again = await hostctl("call", "mcp-files", "read_file", json.dumps({"path": str(report)}))
    assert again.returncode == 1 and "ACCESS_NOT_GRANTED" in again.stderr


async def test_the_capability_set_lists_everything_the_plugin_may_reach_with_why(tmp_path: Path, home: Path) -> None:
    """One list: an argument's folder, an env value's file (read-only, as an argument naming it), a declared
    folder, a parent's grant, a call-time grant (always), the network, the environment's names and a secret
    by its channel."""
    (home / "notes").mkdir()
    (home / "config.toml").write_text("x")
    folder = files_plugin(tmp_path)
    manifest: dict[str, Any] = yaml.safe_load((folder / "plugin.yaml").read_text())
    manifest["backend"]["args"] += [str(home / "notes")]
    manifest["backend"]["env"] = {"FILES_CONFIG": str(home / "config.toml"), "FILES_TOKEN": "${secret:FILES_TOKEN}"}
    manifest["sandbox"] = {"read": ["~/docs"]}
    (folder / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    async with parent(tmp_path, home, "always") as hostd:
        await hostd.request("plugins/install", {"path": str(folder)})
        await hostd.request("plugins/configure", {"id": "mcp-files", "values": {"FILES_TOKEN": "t0ken"}})
        await hostd.request("plugins/grant", {"id": "mcp-files", "permissions": [], "folders": {"write": ["~/out"]}})
        await hostd.request("plugins/grantPath", {"id": "mcp-files", "path": "~/docs/q3.xlsx"})
        [info] = (await hostd.request("plugins/list", {}))["plugins"]
    capabilities = info["launch"]["capabilities"]
    shared = str(tmp_path / "shared" / "record.jsonl")
    assert capabilities["folders"] == [
        {"path": shared, "access": "write", "why": "argument", "source": shared},
        {"path": str(home / "notes"), "access": "write", "why": "argument", "source": str(home / "notes")},
        {"path": str(home / "config.toml"), "access": "read", "why": "env", "source": "$FILES_CONFIG"},
        {"path": str(home / "docs"), "access": "read", "why": "declared", "source": "sandbox.read[0]"},
        {"path": str(home / "out"), "access": "write", "why": "parent grant", "source": "grant.write[0]"},
        # Its own ~/.toolname writes land there (sandbox/home_view.py); nothing of the real HOME by default.
        {"path": str(tmp_path / "state" / "data" / "mcp-files" / "home"), "access": "write", "why": "private home"}
        | {"source": "HOME"},
        {"path": str(home / "docs" / "q3.xlsx"), "access": "read", "why": "call-time grant", "source": "always"},
    ]
    assert capabilities["network"] == {"access": "all", "tcpPorts": []}
    assert {"FILES_CONFIG", "FILES_TOKEN", "HOME", "PATH"} <= set(capabilities["env"])
    assert capabilities["env"] == info["launch"]["envKeys"]
    assert capabilities["secrets"] == [{"name": "FILES_TOKEN", "channel": "env", "set": True}]
    assert capabilities["packages"] == []


async def test_hostctl_call_asks_in_the_terminal(tmp_path: Path, home: Path) -> None:
    report = home / "docs" / "report.txt"
    state = tmp_path / "state"
    env = {**plugin_environment(), "HOME": str(home)}
    folder = files_plugin(tmp_path, record=False)
    for step in (["install", str(folder)], ["approve", "mcp-files", "--yes"], ["enable", "mcp-files"]):
        done = await run_hostctl(state, *step, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
    arguments = json.dumps({"path": "~/docs/report.txt"})
    code, screen = await hostctl_on_a_terminal(
        state, b"n\n", b"[N]o:", "call", "mcp-files", "read_file", arguments, env=env
    )
    assert code == 1
    assert f"{report} (read)" in screen and "Allow? [o]nce / [a]lways / [N]o:" in screen
    assert "ACCESS_NOT_GRANTED" in screen
    code, screen = await hostctl_on_a_terminal(
        state, b"a\n", b"[N]o:", "call", "mcp-files", "read_file", arguments, env=env
    )
    assert code == 0, screen
    assert "the quarterly report" in screen
    stored = json.loads((state / "state.json").read_text())
    assert stored["plugins"]["mcp-files"]["callGrants"] == {str(report): "read"}


async def test_the_consent_flow_works_for_an_unprivileged_user() -> None:
    """As nobody (CI runs as root; users do not): no refuses before the server, once grants the file, under
    Landlock applied without privilege."""
    need_layers("landlock-fs")
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with nobody_folder() as work:
        result = await run_driver(ROOT / "fixtures" / "sandbox" / "unprivileged_call_grants.py", work, timeout=120)
    assert result == {
        "declined": "ACCESS_NOT_GRANTED",
        "reason": "declined",
        "granted": "the quarterly report",
        "asked": 2,
    }
