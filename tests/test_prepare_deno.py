"""deno's ``npm:`` and ``jsr:`` modules are a prepared form (:mod:`hostd.install.prepare`).

The class: ``deno run npm:pkg@ver`` (and ``jsr:``, ``deno x``, ``dx``) fetches the package and
its unpinned dependencies at the first start, with network, after approval. Such a launch must
be found, fetched at preparation into the plugin's environment (``DENO_DIR`` inside it, with a
lockfile), and then run with no network and no fetch (``--cached-only --frozen``) from a folder
the plugin cannot write. Options that change what is fetched or from where are refused; a local
script stays a local launch. The end-to-end tests drive a real ``hostd serve --sandbox strict``
and a real npm server run by the ``deno`` binary of the PyPI package ``deno`` (the ``test``
extra); they skip only when the registry cannot be reached.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from hostd.cli.client import HostdClient, RpcError, plugin_environment
from hostd.install.packages import PackageLaunch, PrepareError, parse_package_launch

MEMORY_SPEC = "npm:@modelcontextprotocol/server-memory@2026.8.31"
MEMORY_NAME = "npm:@modelcontextprotocol/server-memory"
MEMORY_TOOLS = (
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
)
#: Seconds one preparation may take (a cold download from the registry).
PREPARE_TIMEOUT = 300.0
ENABLE_TIMEOUT = 60.0


# -- which deno launches name a package ----------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        (
            "deno",
            ["run", "-A", MEMORY_SPEC],
            PackageLaunch("deno", (MEMORY_SPEC,), "run", (), flags=("-A",)),
        ),
        (
            "/home/ada/.deno/bin/deno",
            [
                "run",
                "--allow-read=/srv,/tmp",
                "-N",
                "--deny-env=AWS_SECRET",
                "-q",
                "npm:srv@1.2.3-beta.1",
                "--port",
                "1",
            ],
            PackageLaunch(
                "deno",
                ("npm:srv@1.2.3-beta.1",),
                "run",
                ("--port", "1"),
                flags=("--allow-read=/srv,/tmp", "-N", "--deny-env=AWS_SECRET", "-q"),
            ),
        ),
        # Everything after the module is the server's: its own --config is no deno option.
        (
            "deno",
            ["run", "-A", "npm:cowsay@1.5.0/cowthink", "--config", "x.json"],
            PackageLaunch("deno", ("npm:cowsay@1.5.0/cowthink",), "run", ("--config", "x.json"), flags=("-A",)),
        ),
        ("deno", ["-A", "npm:pkg"], PackageLaunch("deno", ("npm:pkg",), "run", (), flags=("-A",))),  # deno 2: no run
        (
            "deno",
            ["jsr:@std/http@1.0.9/file-server"],
            PackageLaunch("deno", ("jsr:@std/http@1.0.9/file-server",), "run", ()),
        ),
        (
            "deno",
            ["run", "-R", "-E=HOME", "--no-prompt", "jsr:@scope/mcp-srv@0.3.0", "stdio"],
            PackageLaunch(
                "deno", ("jsr:@scope/mcp-srv@0.3.0",), "run", ("stdio",), flags=("-R", "-E=HOME", "--no-prompt")
            ),
        ),
        ("deno", ["x", "-y", "cowsay@1.5.0", "hi"], PackageLaunch("deno", ("cowsay@1.5.0",), "x", ("hi",))),
        ("dx", ["-A", MEMORY_SPEC], PackageLaunch("deno", (MEMORY_SPEC,), "x", (), flags=("-A",))),
        ("dx", ["--yes", "jsr:@scope/tool@2.0.0"], PackageLaunch("deno", ("jsr:@scope/tool@2.0.0",), "x", ())),
    ],
)
def test_deno_package_launches_are_found(command: str, args: list[str], expected: PackageLaunch) -> None:
    assert parse_package_launch(command, args) == expected


@pytest.mark.parametrize(
    "args",
    [
        ["run", "-A", "server.ts"],  # the plugin's own script
        ["run", "--config", "deno.json", "-A", "main.ts"],  # a local launch with its own config, as before
        ["run", "-A", "file:///srv/mcp/main.ts"],
        ["run", "--allow-read", "/srv/main.ts"],  # deno takes a permission's value with = only: this is the script
        ["main.ts"],
        ["task", "start"],
        ["serve", "main.ts"],
        ["--version"],
        ["run"],
        [],
    ],
)
def test_deno_launches_of_local_code_are_left_alone(args: list[str]) -> None:
    assert parse_package_launch("deno", args) is None


@pytest.mark.parametrize(
    ("command", "args", "said"),
    [
        ("deno", ["run", "--config", "deno.json", MEMORY_SPEC], "deno option '--config' cannot be prepared"),
        ("deno", ["run", "-c", "deno.json", MEMORY_SPEC], "deno option '-c' cannot be prepared"),
        (
            "deno",
            ["run", "--import-map=map.json", MEMORY_SPEC],
            "deno option '--import-map=map.json' cannot be prepared",
        ),
        ("deno", ["run", "--lock", "x.lock", MEMORY_SPEC], "deno option '--lock' cannot be prepared"),
        ("deno", ["run", "--no-lock", MEMORY_SPEC], "deno option '--no-lock' cannot be prepared"),
        ("deno", ["run", "--reload", MEMORY_SPEC], "deno option '--reload' cannot be prepared"),
        ("deno", ["run", "-r", MEMORY_SPEC], "deno option '-r' cannot be prepared"),
        ("deno", ["run", "--cert", "ca.pem", MEMORY_SPEC], "deno option '--cert' cannot be prepared"),
        ("deno", ["run", "--location", "https://x/", MEMORY_SPEC], "deno option '--location' cannot be prepared"),
        (
            "deno",
            ["run", "--unsafely-ignore-certificate-errors", MEMORY_SPEC],
            "deno option '--unsafely-ignore-certificate-errors' cannot be prepared",
        ),
        (
            "deno",
            ["run", "--node-modules-dir=auto", MEMORY_SPEC],
            "deno option '--node-modules-dir=auto' cannot be prepared",
        ),
        ("deno", ["run", "--vendor", MEMORY_SPEC], "deno option '--vendor' cannot be prepared"),
        ("deno", ["run", "--cached-only", MEMORY_SPEC], "deno option '--cached-only' cannot be prepared"),
        ("deno", ["run", "--allow-scripts", MEMORY_SPEC], "deno option '--allow-scripts' cannot be prepared"),
        ("deno", ["run", "--env-file=.env", MEMORY_SPEC], "deno option '--env-file=.env' cannot be prepared"),
        ("deno", ["run", "-P", MEMORY_SPEC], "deno option '-P' cannot be prepared"),
        ("deno", ["run", "-Ar", MEMORY_SPEC], "deno option '-Ar' cannot be prepared"),  # a cluster hides a -r
        ("deno", ["run", "--", MEMORY_SPEC], "deno option '--' cannot be prepared"),
        ("deno", ["-r", "npm:pkg@1.0.0"], "deno option '-r' cannot be prepared"),
        ("dx", ["-p", "@scope/tools@1.0.0", "tools-server"], "deno option '-p' cannot be prepared"),
        (
            "deno",
            ["run", "-A", "https://deno.land/x/srv@1.0.0/main.ts"],
            "deno module 'https://deno.land/x/srv@1.0.0/main.ts' is not an npm: or jsr: package "
            "(a remote module is fetched at start)",
        ),
        (
            "deno",
            ["run", "http://127.0.0.1:8000/srv.ts"],
            "deno module 'http://127.0.0.1:8000/srv.ts' is not an npm: or jsr: package "
            "(a remote module is fetched at start)",
        ),
        (
            "deno",
            ["run", "data:text/javascript,console.log(1)"],
            "deno module 'data:text/javascript,console.log(1)' is not an npm: or jsr: package "
            "(a remote module is fetched at start)",
        ),
        ("deno", ["run", "npm:Pkg@1.0.0"], "deno module 'npm:Pkg@1.0.0': not a valid npm package name"),
        ("deno", ["run", "npm:.hidden@1.0.0"], "deno module 'npm:.hidden@1.0.0': not a valid npm package name"),
        ("deno", ["run", "npm:" + "a" * 215], f"deno module 'npm:{'a' * 215}': not a valid npm package name"),
        (
            "deno",
            ["run", "npm:pkg@^1.0.0"],
            "deno module 'npm:pkg@^1.0.0': the version is not exact (write npm:pkg@1.2.3, "
            "or npm:pkg to take the latest at preparation)",
        ),
        (
            "deno",
            ["run", "npm:pkg@latest"],
            "deno module 'npm:pkg@latest': the version is not exact (write npm:pkg@1.2.3, "
            "or npm:pkg to take the latest at preparation)",
        ),
        (
            "deno",
            ["run", "jsr:@std/fmt@1"],
            "deno module 'jsr:@std/fmt@1': the version is not exact (write jsr:@std/fmt@1.2.3, "
            "or jsr:@std/fmt to take the latest at preparation)",
        ),
        ("deno", ["run", "jsr:fmt@1.0.0"], "deno module 'jsr:fmt@1.0.0': not a valid jsr package name"),
        (
            "deno",
            ["run", "npm:pkg@1.0.0/../../etc"],
            "deno module 'npm:pkg@1.0.0/../../etc': '/../../etc' is not a subpath of the package",
        ),
        (
            "deno",
            ["run", "npm:pkg@1.0.0?x=1"],
            "deno module 'npm:pkg@1.0.0?x=1': the version is not exact "
            "(write npm:pkg@1.2.3, or npm:pkg to take the latest at preparation)",
        ),
        ("deno", ["x", "./server.ts"], "deno module 'npm:./server.ts': not a valid npm package name"),
    ],
)
def test_deno_options_and_modules_that_change_what_is_fetched_are_refused(
    command: str, args: list[str], said: str
) -> None:
    with pytest.raises(PrepareError) as refused:
        parse_package_launch(command, args)
    assert refused.value.reason == "unsupported"
    assert str(refused.value) == said


def test_deno_flags_name_the_environment_and_server_arguments_do_not() -> None:
    one = parse_package_launch("deno", ["run", "-A", MEMORY_SPEC, "a"])
    same = parse_package_launch("deno", ["run", "-A", MEMORY_SPEC, "b"])
    narrower = parse_package_launch("deno", ["run", "-R", MEMORY_SPEC])
    via_x = parse_package_launch("deno", ["x", "-A", MEMORY_SPEC])
    npx = parse_package_launch("npx", ["-y", MEMORY_SPEC.removeprefix("npm:")])
    assert one is not None and same is not None and narrower is not None and via_x is not None
    assert npx is not None
    assert one.key == same.key
    assert len({one.key, narrower.key, via_x.key, npx.key}) == 4
    # The keys of npm and uv launches are those of before (their environments are still found).
    assert npx.key == hashlib.sha256(json.dumps(["npm", [npx.packages[0]], "", None]).encode()).hexdigest()[:16]


# -- through a real hostd ------------------------------------------------------------------------------


def _deno_or_skip() -> str:
    found = shutil.which("deno", path=plugin_environment()["PATH"])
    if found is None:
        pytest.skip("deno is not on PATH (pip install deno: the test extra)")
    return found


@asynccontextmanager
async def hostd_at(tmp_path: Path, *args: str, environ: Mapping[str, str] | None = None) -> AsyncIterator[HostdClient]:
    """A hostd with its state under ``tmp_path``, a fresh empty home and no registry of hostd's environment.

    ``tmp_path/bin`` comes first on its ``PATH``, with ``dx`` as ``deno x --install-alias`` makes it
    (a script running ``deno x``)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "dx").write_text('#!/bin/sh\nexec deno x "$@"\n')
    (bin_dir / "dx").chmod(0o755)
    env = {**plugin_environment([str(bin_dir)]), "HOME": str(home)}
    for name in ("npm_config_registry", "NPM_CONFIG_REGISTRY", "DENO_DIR", "JSR_URL"):
        env.pop(name, None)
    env.update(environ or {})
    async with HostdClient.spawn(["--state-dir", str(tmp_path / "state"), *args], env=env) as client:
        yield client


def plugin_folder(tmp_path: Path, args: list[str], env: Mapping[str, str] | None = None, command: str = "deno") -> Path:
    """A plugin folder whose manifest runs ``command`` with ``args`` (server-memory's tools)."""
    folder = tmp_path / "deno-memory"
    folder.mkdir()
    manifest = {
        "id": "deno-memory",
        "name": "server-memory run by deno",
        "version": "2026.8.31",
        "permissions": [],
        "contributes": {"tools": [f"deno-memory.{tool}" for tool in MEMORY_TOOLS]},
        "backend": {
            "type": "mcp",
            "transport": "stdio",
            "command": command,
            "args": args,
            "env": dict(env or {}),
            "startup_timeout_seconds": 60,
            "tool_timeout_seconds": 30,
        },
    }
    (folder / "plugin.json").write_text(json.dumps(manifest))
    return folder


async def prepare_or_skip(client: HostdClient, plugin_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``plugins/prepare``; its result and its ``$/progress`` notes. Skips when npm's registry is unreachable."""
    response = await client.start("plugins/prepare", {"id": plugin_id})
    with trio.fail_after(PREPARE_TIMEOUT):
        try:
            info = await response()
        except RpcError as error:
            if error.kind == "PREPARE_FAILED" and error.data["reason"] == "unreachable":
                pytest.skip(f"the package registry cannot be reached: {error.message}")
            raise
    rid = response.request_id  # type: ignore[attr-defined]
    return info, [n for n in client.seen("$/progress") if n["requestId"] == rid]


def tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` -> its size (what a run may have added or changed)."""
    return {
        str(Path(folder, name).relative_to(root)): os.lstat(Path(folder, name)).st_size
        for folder, _dirs, files in os.walk(root)
        for name in files
    }


#: The launch forms run end to end: deno run, and dx (deno x) with a bare npm name.
FORMS = [
    ("deno", ["run", "-A", MEMORY_SPEC], ["run"], ["--no-remote", "-A", MEMORY_SPEC]),
    ("dx", ["-y", "-A", MEMORY_SPEC[4:]], ["x", "-y"], ["--no-remote", "-A", MEMORY_SPEC[4:]]),
]


@pytest.mark.real_server
@pytest.mark.parametrize(("command", "args", "head", "tail"), FORMS, ids=["deno-run", "dx"])
async def test_a_deno_npm_server_is_prepared_and_runs_under_strict_with_no_network(
    tmp_path: Path, command: str, args: list[str], head: list[str], tail: list[str]
) -> None:
    deno = _deno_or_skip()
    folder = plugin_folder(tmp_path, args, {"MEMORY_FILE_PATH": "${data}/memory.jsonl"}, command)
    spec = args[-1]
    async with hostd_at(tmp_path, "--sandbox", "strict") as hostd:
        info = await hostd.request("plugins/install", {"path": str(folder)})
        assert info["launch"]["prepare"] == {"state": "needed", "manager": "deno", "packages": [spec]}
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/enable", {"id": "deno-memory"})
        assert refused.value.kind == "PLUGIN_NOT_PREPARED"
        assert refused.value.data["packages"] == [spec]

        prepared, notes = await prepare_or_skip(hostd, "deno-memory")
        launch = prepared["launch"]
        root = Path(launch["prepare"]["root"])
        lock = root / "deno.lock"
        assert root.parent == tmp_path / "state" / "prepared" / "deno-memory"
        assert launch["prepare"] == {
            "state": "prepared",
            "manager": "deno",
            "packages": [spec],
            "resolved": {MEMORY_NAME: "2026.8.31"},
            "lockfile": "sha256:" + hashlib.sha256(lock.read_bytes()).hexdigest(),
            "root": str(root),
            "registry": "https://registry.npmjs.org/",
            "unpinned": [],
            "build": False,
        }
        assert json.loads(lock.read_text())["specifiers"][MEMORY_SPEC].split("_")[0] == "2026.8.31"
        assert launch["command"] == deno
        assert launch["args"] == [*head, "--no-config", "--cached-only", "--frozen", f"--lock={lock}", *tail]
        assert "DENO_DIR" in launch["envKeys"]
        assert launch["digest"] != info["launch"]["digest"]
        assert [n["progress"] for n in notes] == [1, 2, 3, 4]
        assert notes[-1]["message"] == f"prepared {MEMORY_NAME}@2026.8.31"
        assert "netns" in launch["isolation"]
        # The package is in the environment's own DENO_DIR, from npm's registry.
        package = root / "deno" / "npm" / "registry.npmjs.org" / "@modelcontextprotocol" / "server-memory" / "2026.8.31"
        assert json.loads((package / "package.json").read_text())["version"] == "2026.8.31"
        before = tree(root)

        await hostd.request("plugins/grant", {"id": "deno-memory", "permissions": []})
        await hostd.request("plugins/approve", {"id": "deno-memory", "digest": launch["digest"]})
        started = time.monotonic()
        status = await hostd.request("plugins/enable", {"id": "deno-memory"}, timeout=ENABLE_TIMEOUT)
        assert status["status"] == "ready", status
        print(f"\nenable of prepared deno server-memory under strict: {time.monotonic() - started:.2f} s")
        entity = {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}
        created = await hostd.request(
            "tools/call", {"name": "deno-memory.create_entities", "arguments": {"entities": [entity]}}
        )
        assert created["structuredContent"] == {"entities": [entity]}
        graph = await hostd.request("tools/call", {"name": "deno-memory.read_graph", "arguments": {}})
        assert graph["structuredContent"] == {"entities": [entity], "relations": []}
        memory = tmp_path / "state" / "data" / "deno-memory" / "memory.jsonl"
        assert json.loads(memory.read_text().splitlines()[0])["name"] == "Ada"
        # deno said nothing but the server's own line: no warning about its read-only caches, no fetch.
        logs = await hostd.request("plugins/logs", {"id": "deno-memory"})
        said = [line["message"] for line in logs["lines"] if line["source"] == "stderr"]
        assert said == ["Knowledge Graph MCP Server running on stdio"]
        await hostd.request("plugins/disable", {"id": "deno-memory"})
        # The run wrote nothing into the environment (it is read-only to the plugin: deno's caches stay as prepared).
        assert tree(root) == before

        # A second prepare finds the environment: no installer, no network.
        again, notes = await prepare_or_skip(hostd, "deno-memory")
        assert again["launch"]["digest"] == launch["digest"]
        assert [(n["progress"], n["message"]) for n in notes] == [(4, f"already prepared: {MEMORY_NAME}@2026.8.31")]
    assert sorted(os.listdir(tmp_path / "home")) == []


async def test_an_unreachable_registry_is_a_precise_error_at_deno_prepare(tmp_path: Path) -> None:
    _deno_or_skip()
    registry = "http://127.0.0.1:9/"
    folder = plugin_folder(tmp_path, ["run", "-A", MEMORY_SPEC])
    async with hostd_at(tmp_path, "--npm-registry", registry) as hostd:
        await hostd.request("plugins/install", {"path": str(folder)})
        with pytest.raises(RpcError) as failed:
            await hostd.request("plugins/prepare", {"id": "deno-memory"}, timeout=PREPARE_TIMEOUT)
        error = failed.value
        assert error.kind == "PREPARE_FAILED"
        assert error.data["reason"] == "unreachable"
        assert error.data["registry"] == registry
        assert error.message.startswith(
            f"plugin deno-memory: deno install --entrypoint {MEMORY_SPEC}: cannot reach {registry}: "
        )
        assert "Connection refused" in error.message
        listed = await hostd.request("plugins/list", {})
        assert listed["plugins"][0]["launch"]["prepare"]["state"] == "needed"
        assert os.listdir(tmp_path / "state" / "prepared" / "deno-memory") == ["cache"]


async def test_a_deno_launch_that_cannot_be_prepared_never_starts(tmp_path: Path) -> None:
    """deno with its own import map would resolve and fetch at start: refused at prepare and at enable."""
    folder = plugin_folder(tmp_path, ["run", "--import-map", "map.json", "-A", MEMORY_SPEC])
    async with hostd_at(tmp_path) as hostd:
        await hostd.request("plugins/install", {"path": str(folder)})
        with pytest.raises(RpcError) as refused:
            await hostd.request("plugins/prepare", {"id": "deno-memory"})
        assert refused.value.kind == "PREPARE_FAILED"
        assert refused.value.data["reason"] == "unsupported"
        assert refused.value.message == "plugin deno-memory: deno option '--import-map' cannot be prepared"
        with pytest.raises(RpcError) as not_started:
            await hostd.request("plugins/enable", {"id": "deno-memory"})
        assert not_started.value.kind == "PLUGIN_NOT_PREPARED"
        assert "deno option '--import-map' cannot be prepared" in not_started.value.message


# -- jsr: through a registry of the test's own ------------------------------------------------------

#: A JSR package of the test's own, ``@hostd/adder@1.0.0``: an MCP server in two modules (one
#: imports the other, so the whole module graph must be fetched), no dependencies.
ADDER_MAIN = """\
import { add } from "./add.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const send = (message: unknown) => Deno.stdout.writeSync(encoder.encode(JSON.stringify(message) + "\\n"));
const tool = {
  name: "add",
  description: "a + b",
  inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
};
console.error("adder ready");
let buffer = "";
for await (const chunk of Deno.stdin.readable) {
  buffer += decoder.decode(chunk, { stream: true });
  let end;
  while ((end = buffer.indexOf("\\n")) >= 0) {
    const line = buffer.slice(0, end);
    buffer = buffer.slice(end + 1);
    if (!line.trim()) continue;
    const { id, method, params } = JSON.parse(line);
    if (id === undefined) continue;
    if (method === "initialize") {
      const result = { protocolVersion: params.protocolVersion, capabilities: { tools: {} } };
      send({ jsonrpc: "2.0", id, result: { ...result, serverInfo: { name: "adder", version: "1.0.0" } } });
    } else if (method === "tools/list") {
      send({ jsonrpc: "2.0", id, result: { tools: [tool] } });
    } else if (method === "tools/call") {
      const text = String(add(params.arguments.a, params.arguments.b));
      send({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }] } });
    } else if (method === "ping") {
      send({ jsonrpc: "2.0", id, result: {} });
    } else {
      send({ jsonrpc: "2.0", id, error: { code: -32601, message: `no method ${method}` } });
    }
  }
}
"""
ADDER_ADD = "export const add = (a: number, b: number): number => a + b;\n"


def _publish(registry: Path, scope: str, name: str, version: str, files: Mapping[str, str]) -> None:
    """Lay ``files`` out as a JSR registry serves them (``meta.json``, ``<version>_meta.json``, the files)."""
    package = registry / f"@{scope}" / name
    (package / version).mkdir(parents=True)
    manifest = {}
    for path, text in files.items():
        (package / version / path).write_text(text)
        data = text.encode()
        manifest[f"/{path}"] = {"size": len(data), "checksum": "sha256-" + hashlib.sha256(data).hexdigest()}
    meta = {"scope": scope, "name": name, "latest": version, "versions": {version: {}}}
    (package / "meta.json").write_text(json.dumps(meta))
    (package / f"{version}_meta.json").write_text(json.dumps({"manifest": manifest, "exports": {".": "./main.ts"}}))


class _JsrFiles(http.server.SimpleHTTPRequestHandler):
    """Files as JSR serves them: TypeScript as TypeScript (not ``video/mp2t``), no request log."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".ts": "application/typescript"}

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def jsr_registry(tmp_path: Path) -> Iterator[str]:
    """A JSR registry serving ``@hostd/adder@1.0.0`` from a folder, on a loopback port; its URL."""
    folder = tmp_path / "jsr"
    _publish(folder, "hostd", "adder", "1.0.0", {"main.ts": ADDER_MAIN, "add.ts": ADDER_ADD})
    handler = functools.partial(_JsrFiles, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_a_deno_jsr_server_is_prepared_and_runs_under_strict(tmp_path: Path, jsr_registry: str) -> None:
    deno = _deno_or_skip()
    spec = "jsr:@hostd/adder@1.0.0"
    folder = tmp_path / "adder"
    folder.mkdir()
    manifest = {
        "id": "adder",
        "name": "adder",
        "version": "1.0.0",
        "permissions": [],
        "contributes": {"tools": ["adder.add"]},
        "backend": {"type": "mcp", "transport": "stdio", "command": "deno", "args": ["run", spec]},
    }
    (folder / "plugin.json").write_text(json.dumps(manifest))
    async with hostd_at(tmp_path, "--sandbox", "strict", environ={"JSR_URL": jsr_registry}) as hostd:
        await hostd.request("plugins/install", {"path": str(folder)})
        prepared, _notes = await prepare_or_skip(hostd, "adder")
        launch = prepared["launch"]
        root = Path(launch["prepare"]["root"])
        lock = root / "deno.lock"
        assert launch["prepare"]["resolved"] == {"jsr:@hostd/adder": "1.0.0"}
        assert json.loads(lock.read_text())["specifiers"] == {spec: "1.0.0"}
        assert launch["command"] == deno
        # No --no-remote: a jsr module is itself remote, read from the environment's cache.
        assert launch["args"] == ["run", "--no-config", "--cached-only", "--frozen", f"--lock={lock}", spec]
        assert {"DENO_DIR", "JSR_URL"} <= set(launch["envKeys"])
        await hostd.request("plugins/grant", {"id": "adder", "permissions": []})
        await hostd.request("plugins/approve", {"id": "adder", "digest": launch["digest"]})
        status = await hostd.request("plugins/enable", {"id": "adder"}, timeout=ENABLE_TIMEOUT)
        assert status["status"] == "ready", status
        summed = await hostd.request("tools/call", {"name": "adder.add", "arguments": {"a": 2, "b": 40}})
        assert summed["content"] == [{"type": "text", "text": "42"}]
        logs = await hostd.request("plugins/logs", {"id": "adder"})
        assert [line["message"] for line in logs["lines"] if line["source"] == "stderr"] == ["adder ready"]


@pytest.mark.real_server
async def test_an_unpinned_deno_npm_module_is_resolved_at_preparation_and_runs_offline(tmp_path: Path) -> None:
    """``npm:pkg`` without a version: the preparation takes the latest and locks it; the run under
    strict neither asks the registry for a newer one nor fails for want of it."""
    _deno_or_skip()
    spec = "npm:@modelcontextprotocol/server-memory"
    folder = plugin_folder(tmp_path, ["run", "-A", spec], {"MEMORY_FILE_PATH": "${data}/memory.jsonl"})
    async with hostd_at(tmp_path, "--sandbox", "strict") as hostd:
        await hostd.request("plugins/install", {"path": str(folder)})
        prepared, _notes = await prepare_or_skip(hostd, "deno-memory")
        launch = prepared["launch"]
        locked = json.loads((Path(launch["prepare"]["root"]) / "deno.lock").read_text())["specifiers"]
        assert list(locked) == [f"{spec}@*"]
        version = locked[f"{spec}@*"].split("_")[0]
        assert re.fullmatch(r"\d+\.\d+\.\d+", version)
        assert launch["prepare"]["resolved"] == {spec: version}
        await hostd.request("plugins/grant", {"id": "deno-memory", "permissions": []})
        await hostd.request("plugins/approve", {"id": "deno-memory", "digest": launch["digest"]})
        status = await hostd.request("plugins/enable", {"id": "deno-memory"}, timeout=ENABLE_TIMEOUT)
        assert status["status"] == "ready", status
        graph = await hostd.request("tools/call", {"name": "deno-memory.read_graph", "arguments": {}})
        assert graph["structuredContent"] == {"entities": [], "relations": []}
