"""The catalog's five popular servers, installed from the registries, under the default sandbox, in a fresh home.

Each test starts a real ``hostd serve`` with no ``--allow-*`` flag (level ``standard``), ``HOME``
pointed at a new folder under ``tmp_path`` (nothing of the real home is read or written), and the
catalog folder as it is: install, grant, approve, enable, then calls with exact results. Every
plugin's npx/uvx caches are its own (``<state>/data/<id>/cache``), so each first start downloads the
pinned package from the npm registry or PyPI; a registry that does not answer the version check
below skips that server with the reason. One more test imports a Claude-Desktop-style config as
users write it (``~`` folder arguments, an absolute path in ``env``).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import threading
import zlib
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install.manifest import load_manifest
from sandbox.environment import EnvPolicy, build_environment, is_secret_name
from sandbox.home_view import RESERVED
from tests.conftest import ROOT, hostd_with_home
from tests.test_real_servers import manifest_of, npm_spec, uv_spec

pytestmark = pytest.mark.real_server

MANIFESTS = ROOT / "manifests"
FILESYSTEM = MANIFESTS / "server-filesystem"
MEMORY = MANIFESTS / "server-memory"
THINKING = MANIFESTS / "server-sequential-thinking"
GIT = MANIFESTS / "mcp-server-git"
FETCH = MANIFESTS / "mcp-server-fetch"

#: Seconds the test waits for plugins/enable (a first start downloads the package).
ENABLE_TIMEOUT = 150.0
#: Seconds allowed for one registry version check.
CHECK_TIMEOUT = 60.0


def registry_answers_or_skip(folder: Path) -> None:
    """Skip the test unless the registry serves the manifest's pinned version (asked once per session)."""
    problem = _registry_problem(folder)
    if problem is not None:
        pytest.skip(problem)


@functools.cache
def _registry_problem(folder: Path) -> str | None:
    """Why the pinned package of ``folder`` cannot be had from its registry; ``None`` when it can.

    Asked with the package client itself and a throwaway cache, so no user
    cache is read or written: ``npm view <name>@<version> version`` must print
    the version; for PyPI, ``uv pip compile`` must resolve the pin (metadata
    only, about a second each). Blocking, bounded by ``CHECK_TIMEOUT``.
    """
    version = manifest_of(folder)["version"]
    if manifest_of(folder)["backend"]["command"] == "npx":
        spec = npm_spec(folder)
        command, stdin = ["npm", "view", spec, "version"], ""
    else:
        spec = uv_spec(folder)
        command, stdin = ["uv", "pip", "compile", "--quiet", "--no-header", "-"], spec + "\n"
    with tempfile.TemporaryDirectory(prefix="registry-check-") as cache:
        env = {**plugin_environment(), "npm_config_cache": f"{cache}/npm", "UV_CACHE_DIR": f"{cache}/uv"}
        if shutil.which(command[0], path=env["PATH"]) is None:
            return f"{spec}: {command[0]} is not on PATH"
        try:
            done = subprocess.run(
                command, env=env, input=stdin, capture_output=True, text=True, timeout=CHECK_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            return f"{spec}: the registry did not answer within {CHECK_TIMEOUT:g} s"
    if done.returncode != 0 or version not in done.stdout:
        said = " | ".join(line.strip() for line in done.stderr.splitlines()[-4:] if line.strip())
        return f"{spec} is not available from the registry ({command[0]} exited {done.returncode}): {said}"
    return None


#: The tools each server lists to hostd (a client without capabilities), in the server's order.
TOOLS = {
    FILESYSTEM: [
        "read_file",
        "read_text_file",
        "read_media_file",
        "read_multiple_files",
        "write_file",
        "edit_file",
        "create_directory",
        "list_directory",
        "list_directory_with_sizes",
        "directory_tree",
        "move_file",
        "search_files",
        "get_file_info",
        "list_allowed_directories",
    ],
    MEMORY: [
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "delete_observations",
        "delete_relations",
        "read_graph",
        "search_nodes",
        "open_nodes",
    ],
    THINKING: ["sequentialthinking"],
    GIT: [
        "git_status",
        "git_diff_unstaged",
        "git_diff_staged",
        "git_diff",
        "git_commit",
        "git_add",
        "git_reset",
        "git_log",
        "git_create_branch",
        "git_checkout",
        "git_show",
        "git_branch",
    ],
    FETCH: ["fetch"],
}
#: What each manifest declares under ``sandbox:`` (its needs beyond its arguments).
NEEDS = {
    GIT: {"read": ["~/.gitconfig", "~/.config/git", "/etc/gitconfig"], "write": ["~/src"]},
}


def test_the_five_manifests_are_valid_pinned_and_checked_by_prepare() -> None:
    prepare = (MANIFESTS / "prepare.sh").read_text()
    readme = (MANIFESTS / "README.md").read_text()
    for folder, tools in TOOLS.items():
        manifest, _digest = load_manifest(folder)
        assert manifest.id == folder.name
        assert manifest.permissions == []
        assert manifest.contributes.tools == [f"{folder.name}.{t}" for t in tools]
        assert {"read": manifest.sandbox.read, "write": manifest.sandbox.write} == NEEDS.get(
            folder, {"read": [], "write": []}
        )
        if manifest.backend.command == "npx":
            spec = npm_spec(folder)
            assert spec == f"@modelcontextprotocol/{folder.name}@{manifest.version}"
        else:
            assert manifest.backend.command == "uvx"
            spec = uv_spec(folder)
            assert spec == f"{folder.name}=={manifest.version}"
        # The env passes the default policy (no family refused) and names no secret.
        build_environment({}, manifest.backend.env, EnvPolicy(), tmpdir="/tmp")
        assert not [name for name in manifest.backend.env if is_secret_name(name)]
        # prepare.sh checks exactly what the manifest runs; the README names the same pin.
        assert f'"{spec}"' in prepare
        assert spec in readme
    # No catalog folder goes unchecked: each is here or in tests/test_real_servers.py.
    catalog = sorted(p.name for p in MANIFESTS.iterdir() if (p / "plugin.yaml").exists())
    assert catalog == sorted([*(f.name for f in TOOLS), "mcp-server-time", "server-everything"])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh, empty home for hostd and its plugins."""
    folder = tmp_path / "home"
    folder.mkdir()
    return folder


async def enable(client: HostdClient, folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """install -> grant (nothing: no permission is declared) -> approve -> enable; ``(install info, status)``."""
    info = await client.request("plugins/install", {"path": str(folder)})
    assert info["permissions"] == []
    info = await client.request("plugins/prepare", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
    await client.request("plugins/grant", {"id": info["id"], "permissions": []})
    await client.request("plugins/approve", {"id": info["id"], "digest": info["launch"]["digest"]})
    status = await client.request("plugins/enable", {"id": info["id"]}, timeout=ENABLE_TIMEOUT)
    assert status["status"] == "ready", status
    assert "landlock-fs" in status["isolation"]
    listing = await client.request("tools/list", {"plugin": info["id"]})
    assert sorted(t["name"] for t in listing["tools"]) == sorted(manifest_of(folder)["contributes"]["tools"])
    return info, status


async def call(client: HostdClient, name: str, arguments: dict[str, Any]) -> Any:
    return await client.request("tools/call", {"name": name, "arguments": arguments})


def texts(result: dict[str, Any]) -> list[str]:
    return [c["text"] for c in result["content"]]


async def call_fails(client: HostdClient, name: str, arguments: dict[str, Any]) -> list[str]:
    """The texts of a tool call the server answers with ``isError`` (hostd: ``MCP_TOOL_CALL_FAILED``)."""
    with pytest.raises(RpcError) as failed:
        await call(client, name, arguments)
    assert failed.value.kind == "MCP_TOOL_CALL_FAILED", failed.value
    return [c["text"] for c in failed.value.data["content"]]


def png_of_exactly(size: int, seed: int = 12) -> bytes:
    """A valid PNG of exactly ``size`` bytes: random RGB pixels, stored uncompressed, padded by a private chunk."""
    rng = random.Random(seed)
    width = 512
    height = (size - 1024) // (1 + 3 * width) - 1
    raw = b"".join(b"\0" + rng.randbytes(3 * width) for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    body = chunk(b"IDAT", zlib.compress(raw, 0)) + chunk(b"IEND", b"")
    padding = size - len(head) - len(body) - 12
    assert padding >= 0
    # "hoSt": ancillary, private, safe to copy; a decoder skips it.
    image = head + chunk(b"hoSt", b"\0" * padding) + body
    assert len(image) == size
    return image


# -- @modelcontextprotocol/server-filesystem ------------------------------------------------


async def test_server_filesystem(tmp_path: Path, home: Path) -> None:
    registry_answers_or_skip(FILESYSTEM)
    files = home / "mcp-files"
    files.mkdir()
    image = png_of_exactly(64 * 1024)
    (files / "photo.png").write_bytes(image)
    (home / "secret.txt").write_text("not for plugins")
    async with hostd_with_home(tmp_path, home) as hostd:
        info, status = await enable(hostd, FILESYSTEM)
        # The `~` argument is the grant, shown expanded; nothing else of the home.
        assert info["launch"]["folders"] == {"~/mcp-files": str(files)}
        assert (status["server_name"], status["server_version"]) == ("secure-filesystem-server", "0.2.0")

        allowed = await call(hostd, "server-filesystem.list_allowed_directories", {})
        assert texts(allowed) == [f"Allowed directories:\n{files}"]

        # Its HOME is a private view (sandbox/home_view.py), nothing of the user's HOME granted but the folder.
        view = tmp_path / "state" / "data" / "server-filesystem" / "home"
        assert info["launch"]["capabilities"]["folders"] == [
            {"path": str(files), "access": "write", "why": "argument", "source": "~/mcp-files"},
            {"path": str(view), "access": "write", "why": "private home", "source": "HOME"},
        ]
        # The server expands "~" itself, with its own HOME: the user's "~/mcp-files" reaches it written out
        # under the user's real HOME, so it names the user's folder, not one of the view (issue 25).
        note = "first line\nzweite Zeile ✓\n"
        written = await call(hostd, "server-filesystem.write_file", {"path": "~/mcp-files/notes.txt", "content": note})
        assert texts(written) == [f"Successfully wrote to {files}/notes.txt"]
        assert (files / "notes.txt").read_text() == note
        # Nothing of the view but the links it is made with: the runtimes' startup files and the granted folder.
        assert set(os.listdir(view)) == {rel.split("/")[0] for rel, _ in RESERVED} | {"mcp-files"}
        read = await call(hostd, "server-filesystem.read_text_file", {"path": str(files / "notes.txt")})
        assert texts(read) == [note]

        media = await call(hostd, "server-filesystem.read_media_file", {"path": str(files / "photo.png")})
        [content] = media["content"]
        assert content["type"] == "image" and content["mimeType"] == "image/png"
        assert len(content["data"]) == 4 * ((len(image) + 2) // 3) == 87384
        assert base64.b64decode(content["data"]) == image
        # The server sends the block twice (content and structuredContent, its outputSchema).
        assert media["structuredContent"] == {"content": [content]}

        # Outside the served folder: hostd finds the path in the call and, with a parent that cannot be asked,
        # refuses it before the server sees it (issue 25: call-time grants), naming the grant.
        with pytest.raises(RpcError) as outside:
            await call(hostd, "server-filesystem.read_text_file", {"path": str(home / "secret.txt")})
        assert (outside.value.kind, outside.value.data["reason"]) == ("ACCESS_NOT_GRANTED", "no-capability")
        assert [p["path"] for p in outside.value.data["paths"]] == [str(home / "secret.txt")]


async def test_server_filesystem_reads_a_1_mib_image(tmp_path: Path, home: Path) -> None:
    registry_answers_or_skip(FILESYSTEM)
    (home / "mcp-files").mkdir()
    image = png_of_exactly(1024 * 1024)
    (home / "mcp-files" / "photo.png").write_bytes(image)
    async with hostd_with_home(tmp_path, home) as hostd:
        await enable(hostd, FILESYSTEM)
        media = await call(hostd, "server-filesystem.read_media_file", {"path": "~/mcp-files/photo.png"})
        [content] = media["content"]
        assert (content["type"], content["mimeType"]) == ("image", "image/png")
        assert len(content["data"]) == 1398104
        assert base64.b64decode(content["data"]) == image
        status = await hostd.request("plugins/status", {"id": "server-filesystem"})
        assert status["status"] == "ready"


# -- @modelcontextprotocol/server-memory ----------------------------------------------------

ENTITIES = [
    {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
    {"name": "Analytical Engine", "entityType": "machine", "observations": []},
]
RELATION = {"from": "Ada", "to": "Analytical Engine", "relationType": "programmed"}


async def remember(hostd: HostdClient, plugin: str) -> None:
    """Create two entities and one relation; check the answers and the graph read back."""
    created = await call(hostd, f"{plugin}.create_entities", {"entities": ENTITIES})
    assert created["structuredContent"] == {"entities": ENTITIES}
    related = await call(hostd, f"{plugin}.create_relations", {"relations": [RELATION]})
    assert related["structuredContent"] == {"relations": [RELATION]}
    graph = await call(hostd, f"{plugin}.read_graph", {})
    assert graph["structuredContent"] == {"entities": ENTITIES, "relations": [RELATION]}


def memory_lines() -> list[dict[str, Any]]:
    return [
        {"type": "entity", **ENTITIES[0]},
        {"type": "entity", **ENTITIES[1]},
        {"type": "relation", **RELATION},
    ]


async def test_server_memory_keeps_its_graph_in_the_data_folder(tmp_path: Path, home: Path) -> None:
    registry_answers_or_skip(MEMORY)
    async with hostd_with_home(tmp_path, home) as hostd:
        info, status = await enable(hostd, MEMORY)
        stored = tmp_path / "state" / "data" / "server-memory" / "memory.jsonl"
        # MEMORY_FILE_PATH=${data}/memory.jsonl reaches the server expanded: the plugin's data folder,
        # outside the package cache, so a cache wipe, a version bump or an uninstall keeps it.
        assert info["launch"]["folders"] == {"$MEMORY_FILE_PATH": os.path.realpath(stored)}
        assert info["launch"]["env"]["MEMORY_FILE_PATH"] == "${data}/memory.jsonl"
        assert status["server_name"] == "memory-server"
        await remember(hostd, "server-memory")
        assert [json.loads(line) for line in stored.read_text().splitlines()] == memory_lines()
        restarted = await hostd.request("plugins/restart", {"id": "server-memory"}, timeout=ENABLE_TIMEOUT)
        assert restarted["status"] == "ready"
        found = await call(hostd, "server-memory.search_nodes", {"query": "program"})
        # The relations touching a found entity come with it.
        assert found["structuredContent"] == {"entities": [ENTITIES[0]], "relations": [RELATION]}
        await hostd.request("plugins/uninstall", {"id": "server-memory"})
        # Kept aside for this install (issue 25: private state belongs to an install, not a name).
        [kept] = (tmp_path / "state" / "kept" / "server-memory").glob("*/data/memory.jsonl")
        assert [json.loads(line) for line in kept.read_text().splitlines()] == memory_lines()
        assert not (stored.parent / "cache").exists()


# -- @modelcontextprotocol/server-sequential-thinking ---------------------------------------


async def test_server_sequential_thinking(tmp_path: Path, home: Path) -> None:
    registry_answers_or_skip(THINKING)
    async with hostd_with_home(tmp_path, home) as hostd:
        _, status = await enable(hostd, THINKING)
        assert (status["server_name"], status["server_version"]) == ("sequential-thinking-server", "2026.8.31")
        thought = {
            "thought": "Two plus two is four.",
            "thoughtNumber": 1,
            "totalThoughts": 2,
            "nextThoughtNeeded": True,
        }
        first = await call(hostd, "server-sequential-thinking.sequentialthinking", thought)
        expected = {
            "thoughtNumber": 1,
            "totalThoughts": 2,
            "nextThoughtNeeded": True,
            "branches": [],
            "thoughtHistoryLength": 1,
        }
        assert [json.loads(t) for t in texts(first)] == [expected]
        last = {**thought, "thought": "So the answer is 4.", "thoughtNumber": 2, "nextThoughtNeeded": False}
        second = await call(hostd, "server-sequential-thinking.sequentialthinking", last)
        assert [json.loads(t) for t in texts(second)] == [
            {**expected, "thoughtNumber": 2, "nextThoughtNeeded": False, "thoughtHistoryLength": 2}
        ]


# -- mcp-server-git -------------------------------------------------------------------------

#: A fixed author and date, so the first commit's hash is the same on every run.
FIXED = {
    "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
    "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00",
}


def git(repo: Path, home: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1", **FIXED}
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return done.stdout


async def test_mcp_server_git_reads_the_users_git_config(tmp_path: Path, home: Path) -> None:
    registry_answers_or_skip(GIT)
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    # The user's identity lives in ~/.gitconfig: the manifest declares it readable.
    (home / ".gitconfig").write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n")
    repo = home / "src" / "engine"
    repo.mkdir(parents=True)
    git(repo, home, "init", "--quiet", "--initial-branch=main")
    (repo / "README.md").write_text("# Engine\n")
    git(repo, home, "add", "README.md")
    git(repo, home, "commit", "--quiet", "-m", "First notes")
    first = git(repo, home, "rev-parse", "HEAD").strip()
    async with hostd_with_home(tmp_path, home) as hostd:
        info, status = await enable(hostd, GIT)
        assert info["launch"]["folders"] == {
            "sandbox.read[0]": str(home / ".gitconfig"),
            "sandbox.read[1]": str(home / ".config" / "git"),
            "sandbox.read[2]": os.path.realpath("/etc/gitconfig"),
            "sandbox.write[0]": str(home / "src"),
        }
        assert (status["server_name"], status["server_version"]) == ("mcp-git", "2026.10.19")

        clean = await call(hostd, "mcp-server-git.git_status", {"repo_path": str(repo)})
        assert texts(clean) == ["Repository status:\nOn branch main\nnothing to commit, working tree clean"]

        (repo / "notes.txt").write_text("cogs\n")
        added = await call(hostd, "mcp-server-git.git_add", {"repo_path": str(repo), "files": ["notes.txt"]})
        assert texts(added) == ["Files staged successfully"]
        committed = await call(hostd, "mcp-server-git.git_commit", {"repo_path": str(repo), "message": "Add notes"})
        second = git(repo, home, "rev-parse", "HEAD").strip()
        assert texts(committed) == [f"Changes committed successfully with hash {second}"]
        # The server's commit carries the identity from ~/.gitconfig, read inside the sandbox.
        assert git(repo, home, "log", "-1", "--format=%an <%ae>|%cn <%ce>") == (
            "Ada Lovelace <ada@example.org>|Ada Lovelace <ada@example.org>\n"
        )

        log = await call(hostd, "mcp-server-git.git_log", {"repo_path": str(repo), "max_count": 2})
        date = datetime.fromisoformat(git(repo, home, "log", "-1", "--format=%aI", second).strip())
        assert texts(log) == [
            "Commit history:\n"
            f"Commit: {second}\nAuthor: Ada Lovelace\nDate: {date}\nMessage: Add notes\n\n"
            f"Commit: {first}\nAuthor: Ada Lovelace\nDate: 2026-01-02 03:04:05+00:00\nMessage: First notes\n\n"
        ]

        # A repository outside the declared folder is out of the sandbox's reach. Before issue 25 the server,
        # denied even a look (EACCES), reported it as a path that does not exist (GitPython's NoSuchPathError);
        # now hostd finds the path in the call and, with a parent that cannot be asked, refuses the call
        # before the server sees it, naming the grant that would allow it.
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        git(elsewhere, home, "init", "--quiet")
        with pytest.raises(RpcError) as refused:
            await call(hostd, "mcp-server-git.git_status", {"repo_path": str(elsewhere)})
        assert (refused.value.kind, refused.value.data["reason"]) == ("ACCESS_NOT_GRANTED", "no-capability")
        assert [p["path"] for p in refused.value.data["paths"]] == [str(elsewhere)]


# -- mcp-server-fetch -----------------------------------------------------------------------

PAGE = (
    "<!doctype html><html><head><title>Catalog test</title></head><body>"
    "<main><h1>Hello from hostd</h1><p>The <b>fetch</b> server read this page.</p></main></body></html>"
)


@pytest.fixture
def website() -> Iterator[tuple[str, list[str]]]:
    """A page and a permissive robots.txt on 127.0.0.1: ``(base url, paths requested so far)``."""
    requested: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            body, kind = {
                "/robots.txt": ("User-agent: *\nAllow: /\n", "text/plain"),
                "/page.html": (PAGE, "text/html; charset=utf-8"),
            }.get(self.path, ("missing", "text/plain"))
            data = body.encode()
            self.send_response(200 if body != "missing" else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_mcp_server_fetch(tmp_path: Path, home: Path, website: tuple[str, list[str]]) -> None:
    registry_answers_or_skip(FETCH)
    base, requested = website
    # A private-address variant: the same pinned server, started with --allow-private-ips, as a user
    # would edit the manifest to let it reach a local site.
    local = tmp_path / "mcp-server-fetch-local"
    local.mkdir()
    manifest = manifest_of(FETCH)
    manifest["id"] = "fetch-local"
    manifest["contributes"]["tools"] = ["fetch-local.fetch"]
    manifest["backend"]["args"] = [*manifest["backend"]["args"], "--allow-private-ips"]
    (local / "plugin.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    async with hostd_with_home(tmp_path, home) as hostd:
        _, status = await enable(hostd, FETCH)
        assert (status["server_name"], status["server_version"]) == ("mcp-fetch", "2026.10.24")
        # The catalog's server refuses loopback addresses itself (robots.txt is the first request).
        refused = await call_fails(hostd, "mcp-server-fetch.fetch", {"url": f"{base}/page.html"})
        assert refused == [
            f"Error executing tool fetch: Refused to fetch {base}/robots.txt: 127.0.0.1 resolves to 127.0.0.1, "
            "which is not a public address. Start the server with --allow-private-ips to allow private, "
            "loopback and link-local addresses."
        ]
        assert requested == []

        await enable(hostd, local)
        page = await call(hostd, "fetch-local.fetch", {"url": f"{base}/page.html"})
        assert texts(page) == [
            f"Contents of {base}/page.html:\n## Hello from hostd\n\nThe **fetch** server read this page."
        ]
        assert requested == ["/robots.txt", "/page.html"]
        raw = await call(hostd, "fetch-local.fetch", {"url": f"{base}/robots.txt", "raw": True})
        assert texts(raw) == [
            "Content type text/plain cannot be simplified to markdown, but here is the raw content:\n"
            f"Contents of {base}/robots.txt:\nUser-agent: *\nAllow: /\n"
        ]


# -- plugins/import of a Claude Desktop config ----------------------------------------------


async def test_claude_desktop_config_with_home_paths_and_an_env_path(tmp_path: Path, home: Path) -> None:
    for folder in (FILESYSTEM, MEMORY):
        registry_answers_or_skip(folder)
    for name in ("Desktop", "Downloads", "memory"):
        (home / name).mkdir()
    (home / "Downloads" / "report.txt").write_text("quarterly numbers\n")
    memory_file = home / "memory" / "graph.jsonl"
    config = {
        "mcpServers": {
            "filesystem": {
                "command": "npx",
                "args": ["-y", npm_spec(FILESYSTEM), "~/Desktop", "~/Downloads"],
            },
            "memory": {
                "command": "npx",
                "args": ["-y", npm_spec(MEMORY)],
                "env": {"MEMORY_FILE_PATH": str(memory_file)},
            },
        }
    }
    async with hostd_with_home(tmp_path, home) as hostd:
        result = await hostd.request("plugins/import", {"config": json.dumps(config, indent=2)})
        assert [(e["name"], e["outcome"], e["id"]) for e in result["entries"]] == [
            ("filesystem", "installed", "filesystem"),
            ("memory", "installed", "memory"),
        ]
        launches = {e["id"]: e["plugin"]["launch"] for e in result["entries"]}
        assert launches["filesystem"]["folders"] == {
            "~/Desktop": str(home / "Desktop"),
            "~/Downloads": str(home / "Downloads"),
        }
        # The env value names a file (read-only, like an argument); the importer knows server-memory writes it
        # and declares its folder writable (issue 25: KNOWN_DATA_ENV), so it stays writable once it exists.
        assert launches["memory"]["folders"] == {
            "$MEMORY_FILE_PATH": str(memory_file),
            "sandbox.write[0]": str(memory_file.parent),
        }
        for plugin_id, tools in (
            ("filesystem", manifest_of(FILESYSTEM)["contributes"]["tools"]),
            ("memory", manifest_of(MEMORY)["contributes"]["tools"]),
        ):
            prepared = await hostd.request("plugins/prepare", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
            await hostd.request("plugins/approve", {"id": plugin_id, "digest": prepared["launch"]["digest"]})
            status = await hostd.request("plugins/enable", {"id": plugin_id}, timeout=ENABLE_TIMEOUT)
            assert status["status"] == "ready"  # one approval, one spawn (issue 14)
            assert status["pinned"] == sorted(t.replace(t.split(".")[0], plugin_id, 1) for t in tools)

        copied = await call(hostd, "filesystem.read_text_file", {"path": "~/Downloads/report.txt"})
        assert texts(copied) == ["quarterly numbers\n"]
        written = await call(hostd, "filesystem.write_file", {"path": "~/Desktop/todo.txt", "content": "ship it"})
        assert texts(written) == [f"Successfully wrote to {home}/Desktop/todo.txt"]  # "~" written out by hostd
        assert (home / "Desktop" / "todo.txt").read_text() == "ship it"

        await remember(hostd, "memory")
        assert [json.loads(line) for line in memory_file.read_text().splitlines()] == memory_lines()
