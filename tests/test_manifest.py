"""The plugin manifest: loading, every kind of mistake, and the generated JSON Schema."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from hostd.cli.client import RpcError
from hostd.install.manifest import (
    MANIFEST_MAX_BYTES,
    Manifest,
    ManifestError,
    load_manifest,
    manifest_json_schema,
    manifest_schema_text,
)
from hostd.wire.errors import ErrorKind, HostError
from tests.conftest import spawn_hostd

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "manifests" / "plugin.schema.json"

VALID_YAML = """\
id: example-mcp
name: Example MCP
version: 1.0.0
permissions: [notes.read]
contributes:
  tools: [example-mcp.search]
backend:
  type: mcp
  transport: stdio
  command: uvx
  args: [--isolated, --from, example-mcp==1.2.3, example-mcp]
  env: {}
  startup_timeout_seconds: 60
  tool_timeout_seconds: 30
"""

VALID: dict[str, Any] = {
    "id": "example-mcp",
    "name": "Example MCP",
    "version": "1.0.0",
    "permissions": ["notes.read"],
    "contributes": {"tools": ["example-mcp.search"]},
    "backend": {"type": "mcp", "transport": "stdio", "command": "uvx", "args": ["example-mcp"]},
}


def write(folder: Path, text: str | bytes, name: str = "plugin.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def errors_for(folder: Path) -> ManifestError:
    with pytest.raises(ManifestError) as caught:
        load_manifest(folder)
    error = caught.value
    assert isinstance(error, HostError)
    assert error.kind is ErrorKind.MANIFEST_INVALID
    return error


def with_changes(changes: dict[str, Any]) -> dict[str, Any]:
    """VALID with dotted-path changes applied; a value of ``...`` deletes the key."""
    data: dict[str, Any] = json.loads(json.dumps(VALID))
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node[part]
        if value is ...:
            del node[last]
        else:
            node[last] = value
    return data


# --- loading ---------------------------------------------------------------------------


def test_valid_yaml_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_YAML)
    manifest, digest = load_manifest(tmp_path)
    assert digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert manifest.id == "example-mcp"
    assert manifest.version == "1.0.0"
    assert manifest.permissions == ["notes.read"]
    assert manifest.contributes.tools == ["example-mcp.search"]
    assert manifest.backend.command == "uvx"
    assert manifest.backend.args == ["--isolated", "--from", "example-mcp==1.2.3", "example-mcp"]
    assert manifest.backend.startup_timeout_seconds == 60
    assert manifest.backend.tool_timeout_seconds == 30
    assert manifest.backend.stdout_noise == "strict"
    assert manifest.description is None


def test_valid_json_manifest_and_defaults(tmp_path: Path) -> None:
    write(tmp_path, json.dumps(VALID), "plugin.json")
    manifest, _digest = load_manifest(tmp_path)
    assert manifest.backend.env == {}
    assert manifest.backend.startup_timeout_seconds == 30
    assert manifest.backend.tool_timeout_seconds == 30
    assert manifest.backend.stdout_noise == "strict"


def test_yml_extension_and_drop_policy(tmp_path: Path) -> None:
    write(tmp_path, VALID_YAML + "  stdout_noise: drop\n", "plugin.yml")
    manifest, _ = load_manifest(tmp_path)
    assert manifest.backend.stdout_noise == "drop"


def test_digest_changes_with_the_bytes(tmp_path: Path) -> None:
    write(tmp_path / "a", VALID_YAML)
    write(tmp_path / "b", VALID_YAML + "# a comment\n")
    assert load_manifest(tmp_path / "a")[1] != load_manifest(tmp_path / "b")[1]


# --- field mistakes: each names its field ------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"backend.command": ...}, "backend.command", "required field is missing"),
        ({"backend.command": ""}, "backend.command", "String should have at least 1 character"),
        (
            {"backend.command": "npx -y server"},
            "backend.command",
            "'npx -y server' looks like a shell line; hostd never uses a shell: put the program name in "
            "'command' and each argument in 'args'",
        ),
        ({"backend.command": " uvx"}, "backend.command", "must not be blank or start or end with whitespace"),
        ({"backend.args": ["ok", "a\x00b"]}, "backend.args.1", "must not contain a NUL character"),
        ({"backend.args": "--flag"}, "backend.args", "Input should be a valid list"),
        ({"backend.type": "http"}, "backend.type", "Input should be 'mcp'"),
        ({"backend.transport": "http"}, "backend.transport", "Input should be 'stdio', 'streamable-http' or 'sse'"),
        ({"backend.startup_timeout_seconds": 0}, "backend.startup_timeout_seconds", "Input should be greater than 0"),
        (
            {"backend.startup_timeout_seconds": 601},
            "backend.startup_timeout_seconds",
            "Input should be less than or equal to 600",
        ),
        (
            {"backend.startup_timeout_seconds": "30"},
            "backend.startup_timeout_seconds",
            "Input should be a valid number",
        ),
        (
            {"backend.tool_timeout_seconds": 3601},
            "backend.tool_timeout_seconds",
            "Input should be less than or equal to 3600",
        ),
        ({"backend.stdout_noise": "loud"}, "backend.stdout_noise", "Input should be 'strict' or 'drop'"),
        (
            {"backend.env": {"1BAD": "x"}},
            "backend.env.1BAD",
            "invalid key: must be an environment variable name (^[A-Za-z_][A-Za-z0-9_]*$)",
        ),
        ({"backend.env": {"OK": "a\x00"}}, "backend.env.OK", "must not contain a NUL character"),
        (
            {"permissions": ["notes.read", "Notes Write"]},
            "permissions.1",
            "must be lowercase a-z, 0-9, '.', '_' and '-', starting with a letter or digit (^[a-z0-9][a-z0-9._-]*$)",
        ),
        (
            {"permissions": ["notes.read", "notes.read"]},
            "permissions.1",
            "duplicate permission 'notes.read' (first at index 0)",
        ),
        (
            {"id": "Example_MCP"},
            "id",
            "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit (^[a-z0-9][a-z0-9-]{0,62}$)",
        ),
        ({"id": "-leading"}, "id", None),
        ({"id": "a" * 64}, "id", None),
        ({"id": "abc\n"}, "id", None),
        ({"id": ...}, "id", "required field is missing"),
        ({"name": ""}, "name", "String should have at least 1 character"),
        ({"version": ...}, "version", "required field is missing"),
        ({"contributes": ...}, "contributes", "required field is missing"),
        (
            {"contributes.tools": ["example-mcp.search", "other.search"]},
            "contributes.tools.1",
            "must be 'example-mcp.<tool name>' (the plugin id, a dot, the name)",
        ),
        ({"contributes.tools": ["example-mcp."]}, "contributes.tools.0", None),
        ({"contributes.tools": ["example-mcpsearch"]}, "contributes.tools.0", None),
        (
            {"contributes.tools": ["example-mcp.a", "example-mcp.a"]},
            "contributes.tools.1",
            "duplicate tool 'example-mcp.a' (first at index 0)",
        ),
        ({"description": 3}, "description", "Input should be a valid string"),
        # A conditional tool ({name, needs}): each mistake named once, at its own field.
        (
            {"contributes.tools": [{"name": "example-mcp.a", "needs": ["smapling"]}]},
            "contributes.tools.0.needs.0",
            "Input should be 'sampling', 'sampling.tools', 'elicitation', 'elicitation.form', "
            "'elicitation.url' or 'roots'",
        ),
        ({"contributes.tools": [{"name": "example-mcp.a", "needs": []}]}, "contributes.tools.0.needs", None),
        ({"contributes.tools": [{"name": "example-mcp.a"}]}, "contributes.tools.0.needs", "required field is missing"),
        ({"contributes.tools": [{"name": "other.a", "needs": ["roots"]}]}, "contributes.tools.0", None),
        (
            {"contributes.tools": ["example-mcp.a", {"name": "example-mcp.a", "needs": ["roots"]}]},
            "contributes.tools.1",
            "duplicate tool 'example-mcp.a' (first at index 0)",
        ),
    ],
)
def test_each_mistake_names_its_field(tmp_path: Path, changes: dict[str, Any], field: str, message: str | None) -> None:
    path = write(tmp_path, json.dumps(with_changes(changes)), "plugin.json")
    error = errors_for(tmp_path)
    assert error.data["path"] == str(path)
    assert [e["field"] for e in error.data["errors"]] == [field]
    if message is not None:
        assert error.data["errors"][0]["message"] == message
    assert field in error.message


def test_unknown_fields_are_rejected_by_name(tmp_path: Path) -> None:
    text = VALID_YAML.replace("  command: uvx", "  commnd: uvx") + "homepage: https://example.com\n"
    write(tmp_path, text)
    errors = errors_for(tmp_path).data["errors"]
    assert errors == [
        {"field": "backend.command", "message": "required field is missing"},
        {"field": "backend.commnd", "message": "unknown field 'commnd'; did you mean 'command'?"},
        {
            "field": "homepage",
            "message": "unknown field 'homepage'; allowed: id, name, version, description, permissions, "
            "contributes, backend, sandbox, user_config, origin, network",
        },
    ]


def test_all_field_errors_are_reported_at_once(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        id: Demo
        name: yes
        version: 1.0
        description: 2024-01-31
        permissions: [notes.read, BAD]
        contributes:
          tools: []
        backend:
          type: mcp
          transport: stdio
          command: uvx
          env: {DEBUG: 1}
          startup_timeout_seconds: .nan
        """
    )
    write(tmp_path, text)
    error = errors_for(tmp_path)
    assert error.data["errors"] == [
        {
            "field": "id",
            "message": "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit "
            "(^[a-z0-9][a-z0-9-]{0,62}$)",
        },
        {"field": "name", "message": "Input should be a valid string (YAML read true as a boolean; quote it)"},
        {"field": "version", "message": "Input should be a valid string (YAML read 1.0 as a number; quote it)"},
        {
            "field": "description",
            "message": "Input should be a valid string (YAML read 2024-01-31 as a date; quote it)",
        },
        {
            "field": "permissions.1",
            "message": "must be lowercase a-z, 0-9, '.', '_' and '-', starting with a letter or digit "
            "(^[a-z0-9][a-z0-9._-]*$)",
        },
        {
            "field": "backend.env.DEBUG",
            "message": "Input should be a valid string (YAML read 1 as a number; quote it)",
        },
        {"field": "backend.startup_timeout_seconds", "message": "Input should be a finite number"},
    ]
    assert error.message.endswith("(and 6 more)")
    wire = error.to_error_object()
    assert wire["code"] == -32011
    assert wire["data"]["kind"] == "MANIFEST_INVALID"
    assert wire["data"]["errors"] == error.data["errors"]


def test_model_validates_directly() -> None:
    Manifest.model_validate(VALID)
    with pytest.raises(ValidationError) as caught:
        Manifest.model_validate(with_changes({"contributes.tools": ["elsewhere.x"]}))
    assert caught.value.errors()[0]["loc"] == ("contributes", "tools", 0)


# --- whole-file mistakes -----------------------------------------------------------------


def test_yaml_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    text = "id: demo\nname: Demo\nversion: '1'\ncontributes: {tools: [demo.x]\nbackend:\n  type: mcp\n"
    path = write(tmp_path, text)
    error = errors_for(tmp_path)
    (entry,) = error.data["errors"]
    assert entry["field"] == ""
    assert (entry["line"], entry["column"]) == (5, 1)
    assert entry["message"] == (
        "YAML syntax error at line 5, column 1: did not find expected ',' or '}' "
        "(while parsing a flow mapping at line 4, column 14)"
    )
    assert error.data["path"] == str(path)
    assert "line 5" in error.message


def test_yaml_bad_indentation(tmp_path: Path) -> None:
    write(tmp_path, "id: demo\nbackend:\n  type: mcp\n   command: x\n")
    (entry,) = errors_for(tmp_path).data["errors"]
    assert entry["line"] == 4
    assert entry["message"].startswith("YAML syntax error at line 4, column ")


def test_yaml_duplicate_key_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, VALID_YAML + "  command: /bin/sh\n")
    (entry,) = errors_for(tmp_path).data["errors"]
    assert entry["line"] == 15
    assert entry["message"] == (
        "YAML syntax error at line 15, column 3: found duplicate key 'command' "
        "(while constructing a mapping at line 8, column 3)"
    )


def test_json_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    write(tmp_path, '{\n  "id": "demo",\n  "name": "Demo"\n  "version": "1"\n}\n', "plugin.json")
    (entry,) = errors_for(tmp_path).data["errors"]
    assert (entry["line"], entry["column"]) == (4, 3)
    assert entry["message"] == "JSON syntax error at line 4, column 3: Expecting ',' delimiter"


def test_json_duplicate_key_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, '{"id": "a", "id": "b"}', "plugin.json")
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "duplicate key 'id'"}]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["plugin.yaml", "plugin.json"],
            "more than one manifest (plugin.yaml, plugin.json); keep exactly one of them",
        ),
        (["plugin.yaml", "plugin.yml"], "more than one manifest (plugin.yaml, plugin.yml); keep exactly one of them"),
    ],
)
def test_two_manifests_are_ambiguous(tmp_path: Path, names: list[str], message: str) -> None:
    for name in names:
        write(tmp_path, VALID_YAML if name != "plugin.json" else json.dumps(VALID), name)
    error = errors_for(tmp_path)
    assert error.data == {"path": str(tmp_path), "errors": [{"field": "", "message": message}]}


def test_missing_manifest(tmp_path: Path) -> None:
    write(tmp_path, "id: x\n", "manifest.yaml")
    error = errors_for(tmp_path)
    assert error.data == {
        "path": str(tmp_path),
        "errors": [{"field": "", "message": "no manifest: expected one of plugin.yaml, plugin.yml, plugin.json"}],
    }


def test_missing_folder_and_file_instead_of_folder(tmp_path: Path) -> None:
    error = errors_for(tmp_path / "absent")
    assert error.data["errors"] == [{"field": "", "message": "plugin folder does not exist"}]
    path = write(tmp_path, VALID_YAML)
    error = errors_for(path)
    assert error.data["errors"] == [{"field": "", "message": "not a directory (give the plugin's folder, not a file)"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the manifest is empty"),
        ("# only a comment\n", "the manifest is empty"),
        ("- id: x\n", "the top level must be a mapping, not a list"),
        ("just text\n", "the top level must be a mapping, not a string"),
    ],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, message: str) -> None:
    write(tmp_path, text)
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": message}]


def test_oversized_manifest_is_rejected(tmp_path: Path) -> None:
    write(tmp_path, VALID_YAML + "#" * MANIFEST_MAX_BYTES + "\n")
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "larger than 262144 bytes (256 KiB)"}]


def test_manifest_at_the_size_bound_is_read(tmp_path: Path) -> None:
    padding = MANIFEST_MAX_BYTES - len(VALID_YAML.encode()) - 1
    write(tmp_path, VALID_YAML + "#" * padding + "\n")
    assert load_manifest(tmp_path)[0].id == "example-mcp"


def test_not_utf8(tmp_path: Path) -> None:
    write(tmp_path, b"id: demo\nname: \xff\n")
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "not valid UTF-8 (byte offset 15)"}]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "plugin.yaml")
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "not a regular file"}]


def test_directory_under_the_manifest_name(tmp_path: Path) -> None:
    (tmp_path / "plugin.json").mkdir()
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "not a regular file"}]


SYMLINK_REFUSED = (
    "is a symbolic link; the manifest must be a regular file inside the plugin folder "
    "(symlinks are refused, even to a file inside it): replace {name} with the file itself"
)


def test_broken_symlink_is_refused_as_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "plugin.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    message = SYMLINK_REFUSED.format(name="plugin.yaml")
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": message}]


# --- issue 9, class 7: no error quotes bytes of a file outside the plugin folder -------------
# The class: any way the bytes read as "the manifest" belong to a file outside the folder (a
# symlink, absolute or relative, dangling or not; a hard link), which a YAML/JSON/validation
# error would then quote to the parent. Each shape below quotes the marker on the old code.

MARKER = "hostd-secret-marker-5f0c"

#: Outside files that each make a different error quote the marker when read as a manifest.
LEAKY_OUTSIDE: dict[str, tuple[str, str]] = {
    "passwd-like, unknown field": ("plugin.yaml", f"root: x\n{MARKER}: /bin/bash\n"),
    "duplicate key": ("plugin.yaml", f"id: a\n{MARKER}: 1\n{MARKER}: 2\n"),
    "unknown tag": ("plugin.yaml", f"id: !{MARKER} x\n"),
    "shell-line command": ("plugin.yml", f"backend:\n  command: export TOKEN={MARKER}\n"),
    "JSON duplicate": ("plugin.json", f'{{"{MARKER}": 1, "{MARKER}": 2}}'),
}


def _assert_no_marker(error: ManifestError) -> None:
    assert MARKER not in str(error)
    assert MARKER not in json.dumps(error.to_error_object())


@pytest.mark.parametrize("shape", sorted(LEAKY_OUTSIDE))
@pytest.mark.parametrize("target", ["absolute", "relative"])
def test_symlinked_manifest_to_a_file_outside_is_refused_without_quoting_it(
    tmp_path: Path, shape: str, target: str
) -> None:
    name, text = LEAKY_OUTSIDE[shape]
    outside = tmp_path / "home" / ".aws" / "credentials"
    outside.parent.mkdir(parents=True)
    outside.write_text(text)
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / name).symlink_to(outside if target == "absolute" else Path("..") / "home" / ".aws" / "credentials")
    error = errors_for(folder)
    assert error.data["errors"] == [{"field": "", "message": SYMLINK_REFUSED.format(name=name)}]
    assert error.data["path"] == str(folder / name)
    _assert_no_marker(error)


def test_symlink_to_a_file_inside_the_folder_is_refused_too(tmp_path: Path) -> None:
    write(tmp_path, VALID_YAML, "real.yaml")
    (tmp_path / "plugin.yaml").symlink_to("real.yaml")
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": SYMLINK_REFUSED.format(name="plugin.yaml")}]


def test_hard_link_to_a_file_outside_is_refused_without_quoting_it(tmp_path: Path) -> None:
    outside = tmp_path / "secrets.yaml"
    outside.write_text(f"root: x\n{MARKER}: /bin/bash\n")
    folder = tmp_path / "plugin"
    folder.mkdir()
    os.link(outside, folder / "plugin.yaml")
    error = errors_for(folder)
    assert error.data["errors"] == [
        {
            "field": "",
            "message": "has 2 hard links; the manifest must be a file of its own inside the plugin folder "
            "(its other names may be outside it): replace plugin.yaml with a copy",
        }
    ]
    _assert_no_marker(error)


def test_a_folder_given_through_a_symlink_is_resolved_once(tmp_path: Path) -> None:
    write(tmp_path / "real", VALID_YAML)
    (tmp_path / "link").symlink_to("real")
    assert load_manifest(tmp_path / "link")[0].id == "example-mcp"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mknod needs root")
def test_device_under_the_manifest_name(tmp_path: Path) -> None:
    os.mknod(tmp_path / "plugin.yaml", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "not a regular file"}]


def test_errors_still_quote_the_manifest_itself(tmp_path: Path) -> None:
    write(tmp_path, f"id: a\n{MARKER}: 1\n")
    assert any(MARKER in e["message"] for e in errors_for(tmp_path).data["errors"])


async def test_install_of_a_symlinked_manifest_never_shows_the_target(tmp_path: Path) -> None:
    """Through a real hostd: the parent's MANIFEST_INVALID carries no byte of the outside file."""
    outside = tmp_path / "passwd"
    outside.write_text(f"root: x:0:0:root:/root:/bin/bash\n{MARKER}: x:1000:1000::/home/ada:/bin/bash\n")
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "plugin.yaml").symlink_to(outside)
    with trio.fail_after(20):
        async with spawn_hostd(tmp_path) as hostd:
            with pytest.raises(RpcError) as failed:
                await hostd.request("plugins/install", {"path": str(folder)})
    assert failed.value.kind == "MANIFEST_INVALID"
    assert failed.value.data["errors"] == [{"field": "", "message": SYMLINK_REFUSED.format(name="plugin.yaml")}]
    assert MARKER not in json.dumps(failed.value.data)
    assert MARKER not in str(failed.value)


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root reads anything")
def test_unreadable(tmp_path: Path) -> None:
    path = write(tmp_path, VALID_YAML)
    path.chmod(0)
    try:
        assert errors_for(tmp_path).data["errors"] == [{"field": "", "message": "cannot read: Permission denied"}]
    finally:
        path.chmod(0o644)


# --- the generated JSON Schema -------------------------------------------------------------


def test_schema_file_is_fresh() -> None:
    current = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    assert current == manifest_schema_text(), (
        "manifests/plugin.schema.json is stale; regenerate it with: .venv/bin/python -m hostd.install.manifest"
    )


def test_schema_header() -> None:
    schema = manifest_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "urn:hostd:schema:plugin-manifest:v1"
    assert schema["title"] == "hostd plugin manifest (v1)"
    assert manifest_schema_text().endswith("}\n")


def test_schema_agrees_with_the_model() -> None:
    Draft202012Validator.check_schema(manifest_json_schema())
    validator = Draft202012Validator(manifest_json_schema())
    assert list(validator.iter_errors(VALID)) == []
    for changes in (
        {"extra": 1},
        {"backend.commnd": "x"},
        {"id": "Bad"},
        {"permissions": ["a", "a"]},
        {"backend.env": {"1BAD": "x"}},
        {"backend.tool_timeout_seconds": 0},
        {"backend.stdout_noise": "loud"},
    ):
        data = with_changes(changes)
        assert list(validator.iter_errors(data)), changes
        with pytest.raises(ValidationError):
            Manifest.model_validate(data)


# --- conditional tools: the expected set follows the client features offered -----------------

#: server-everything's shape: unconditional tools and ones listed only for offered client features.
CONDITIONAL_TOOLS: list[Any] = [
    "srv.echo",
    {"name": "srv.get-roots-list", "needs": ["roots"]},
    {"name": "srv.trigger-elicitation-request", "needs": ["elicitation"]},
    {"name": "srv.trigger-sampling-request", "needs": ["sampling"]},
    {"name": "srv.trigger-url-elicitation", "needs": ["elicitation.url"]},
    {"name": "srv.sample-with-tools", "needs": ["sampling", "sampling.tools"]},
]


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        # The class: a tool is expected exactly when every feature it needs was offered (served AND granted).
        ({}, ["echo"]),
        ({"roots": {}}, ["echo", "get-roots-list"]),
        # An empty elicitation object is form mode only: not url.
        ({"elicitation": {}}, ["echo", "trigger-elicitation-request"]),
        ({"elicitation": {"form": {}}}, ["echo", "trigger-elicitation-request"]),
        ({"elicitation": {"url": {}}}, ["echo", "trigger-elicitation-request", "trigger-url-elicitation"]),
        ({"sampling": {}}, ["echo", "trigger-sampling-request"]),
        ({"sampling": {"tools": {}}}, ["echo", "trigger-sampling-request", "sample-with-tools"]),
        (
            {"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}},
            [
                "echo",
                "get-roots-list",
                "trigger-elicitation-request",
                "trigger-sampling-request",
                "trigger-url-elicitation",
                "sample-with-tools",
            ],
        ),
    ],
)
def test_expected_tools_are_the_unconditional_ones_and_those_whose_needs_were_offered(
    offered: dict[str, Any], expected: list[str]
) -> None:
    from hostd.mcp.client_features import offered_features  # noqa: PLC0415

    manifest = Manifest.model_validate(
        {**with_changes({"id": "srv", "contributes.tools": CONDITIONAL_TOOLS}), "permissions": []}
    )
    assert manifest.contributes.tool_names == [t if isinstance(t, str) else t["name"] for t in CONDITIONAL_TOOLS]
    assert manifest.contributes.expected_tools(offered_features(offered)) == [f"srv.{t}" for t in expected]


def test_offered_features_names_each_feature_and_sub_feature() -> None:
    from hostd.mcp.client_features import offered_features  # noqa: PLC0415

    assert offered_features({}) == set()
    assert offered_features({"elicitation": {}}) == {"elicitation", "elicitation.form"}
    assert offered_features({"sampling": {"tools": {}}, "roots": {"listChanged": True}, "experimental": {}}) == {
        "sampling",
        "sampling.tools",
        "roots",
        "roots.listChanged",
    }


# Issue 31, class 1: text that is not text, and nesting no field needs, refused before pydantic validates or
# renders anything (a lone surrogate made pydantic's duplicate-tool error raise UnicodeEncodeError out of
# load_manifest). Each member: MANIFEST_INVALID with the field's dotted path, the value never quoted.
SURROGATE = "must not contain a lone surrogate (U+D800): it is not text"


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        (  # the fuzzer's find: a tool listed twice with a lone surrogate
            json.dumps({**VALID, "contributes": {"tools": ["example-mcp.a\ud800"] * 2}}),
            "contributes.tools.0",
            SURROGATE,
        ),
        (json.dumps({**VALID, "name": "Ex\ud800"}), "name", SURROGATE),
        (
            json.dumps({**VALID, "backend": {**VALID["backend"], "env": {"K\ud800": "v"}}}),
            "backend.env",
            f"invalid key: {SURROGATE}",
        ),
        (json.dumps({**VALID, "description\ud800": 1}), "", f"invalid key: {SURROGATE}"),
        (json.dumps({**VALID, "name": "Ex\x00"}), "name", "must not contain a NUL character"),
        (
            json.dumps({**VALID, "backend": {**VALID["backend"], "command": "uvx\x00"}}),
            "backend.command",
            "must not contain a NUL character",
        ),
        (
            json.dumps({**VALID, "remote": {"a": _nested(40)}}),
            "remote.a" + ".0" * 30,
            "nested more than 32 levels deep",
        ),
    ],
)
def test_text_that_is_not_text_and_deep_nesting_are_manifest_invalid(
    tmp_path: Path, text: str, field: str, message: str
) -> None:
    path = write(tmp_path, text, "plugin.json")
    with pytest.raises(ManifestError) as refused:
        load_manifest(tmp_path)
    assert refused.value.data == {"path": str(path), "errors": [{"field": field, "message": message}]}
    assert refused.value.message == f"{path}: invalid manifest: {field or '(top level)'}: {message}"
    refused.value.message.encode("utf-8")  # the error itself can be sent
