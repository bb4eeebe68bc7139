"""Which local paths a tool call's arguments name (hostd/host/file_args.py), member by member of the class.

The class: a string in a ``tools/call``'s arguments that names a local file or folder the plugin will open.
Members found: absolute, ``~/``, ``file://`` (percent-encoded), nested objects and arrays, a schema
``format: uri``, a camelCase output property whose file is still to be created (its folder is needed,
read-write), a tool that says it writes, a link (its target is what is granted). Not members: a string that
only looks like a path (``/help``), a relative path, another host's ``file://`` URI, anything past the bounds.
Real files in ``tmp_path``; ``reachable`` against rule lists shaped as ``IsolationPlan.rule_lists()`` gives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hostd.host.file_args import (
    MAX_DEPTH,
    MAX_PATHS,
    MAX_STRINGS,
    NamedPath,
    may_name_paths,
    named_paths,
    reachable,
    with_real_home,
)


def found(
    arguments: Mapping[str, Any], home: Path, schema: object = None, annotations: object = None
) -> list[tuple[str, str, str]]:
    items = named_paths(arguments, schema, annotations, str(home))  # type: ignore[arg-type]
    return [(item.pointer, item.grant, item.access) for item in items]


def test_absolute_home_and_file_uri_paths_at_any_depth(tmp_path: Path) -> None:
    (tmp_path / "my docs").mkdir()
    report = tmp_path / "my docs" / "q3.xlsx"
    report.write_text("x")
    arguments = {
        "path": str(report),
        "nested": {"list": ["plain words", "~/my docs"]},
        "document": report.as_uri(),  # file:///…/my%20docs/q3.xlsx
        "files": [{"name": str(tmp_path)}],
    }
    assert found(arguments, tmp_path) == [
        ("/path", str(report), "read"),
        ("/nested/list/1", str(tmp_path / "my docs"), "read"),
        ("/files/0/name", str(tmp_path), "read"),
    ]  # the URI names the same file as /path: asked for once


def test_what_only_looks_like_a_path_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    arguments = {
        "message": "/help",
        "relative": "docs",
        "remote": f"file://otherhost{tmp_path}",
        "multi": f"{tmp_path}\nsecond line",
        "number": 3,
    }
    assert found(arguments, tmp_path) == []
    assert may_name_paths({"text": "hello", "n": [1, "two"]}, str(tmp_path)) is False
    assert may_name_paths({"text": ["x", {"y": "~/notes"}]}, str(tmp_path)) is True


def test_an_output_to_create_needs_its_folder_read_write(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    arguments = {"outputPath": str(out / "new.pdf"), "inputPath": str(out / "missing.txt")}
    assert found(arguments, tmp_path) == [("/outputPath", str(out), "write")]
    # A tool that says it is read-only is taken at its word: no output, nothing to create.
    assert found(arguments, tmp_path, annotations={"readOnlyHint": True}) == []


def test_a_tool_that_says_it_writes_needs_write_on_every_path(tmp_path: Path) -> None:
    target = tmp_path / "notes.md"
    target.write_text("x")
    assert found({"file": str(target)}, tmp_path, annotations={"destructiveHint": True}) == [
        ("/file", str(target), "write")
    ]
    assert found({"file": str(target)}, tmp_path, annotations={"readOnlyHint": False}) == [
        ("/file", str(target), "write")
    ]  # a file right in the home: the file itself (the home as a whole is never granted)
    # Writing an existing file may replace it (a temporary beside it, renamed over it): its folder, read-write.
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "q3.xlsx").write_text("x")
    (tmp_path / "sub" / "folder").mkdir()
    arguments = {"file": str(tmp_path / "sub" / "q3.xlsx"), "dir": str(tmp_path / "sub" / "folder")}
    assert found(arguments, tmp_path, annotations={"destructiveHint": True}) == [
        ("/file", str(tmp_path / "sub"), "write"),
        ("/dir", str(tmp_path / "sub" / "folder"), "write"),
    ]


def test_annotations_are_read_with_the_specs_defaults(tmp_path: Path) -> None:
    """MCP ``ToolAnnotations``: ``readOnlyHint`` defaults to ``false``. Annotations that do not say read-only
    (a ``title`` only, as office-word-mcp-server's ``add_paragraph``; ``destructiveHint: false``, an additive
    write; ``idempotentHint``/``openWorldHint`` only) mean the tool may write; no annotations at all say nothing
    and a plain argument is read."""
    target = tmp_path / "notes.md"
    target.write_text("x")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("x")
    for said in ({"title": "Add Paragraph"}, {"destructiveHint": False}, {"idempotentHint": True}, {}):
        assert found({"file": str(docs / "notes.md")}, tmp_path, annotations=said) == [("/file", str(docs), "write")]
    for unsaid in (None, {"readOnlyHint": True, "title": "Get Text"}, "not an object"):
        assert found({"file": str(target)}, tmp_path, annotations=unsaid) == [("/file", str(target), "read")]


def test_a_schema_uri_field_with_a_file_to_create(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"where": {"type": "string", "format": "uri"}}}
    target = (tmp_path / "new.txt").as_uri()
    assert found({"where": target}, tmp_path, schema, {"readOnlyHint": False}) == [("/where", str(tmp_path), "write")]


def test_a_link_is_granted_as_its_target(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    [item] = named_paths({"dir": str(tmp_path / "link")}, None, None, str(tmp_path))
    assert (item.grant, item.value) == (str(real), str(tmp_path / "link"))


def test_the_walk_is_bounded(tmp_path: Path) -> None:
    deep: object = str(tmp_path)
    for _ in range(MAX_DEPTH):
        deep = {"d": deep}
    assert found({"d": deep}, tmp_path) == []  # one level past the bound
    for index in range(MAX_PATHS + 5):
        (tmp_path / f"f{index}").write_text("x")
    many = {"files": [str(tmp_path / f"f{index}") for index in range(MAX_PATHS + 5)]}
    assert len(found(many, tmp_path)) == MAX_PATHS


def test_reachable_compares_with_the_rules_in_force() -> None:
    item = NamedPath(
        pointer="/p", value="/home/u/docs/a.txt", path="/home/u/docs/a.txt", access="read", grant="/home/u/docs/a.txt"
    )
    rules = {"read": ["/usr", "/home/u/docs"], "write": ["/tmp/x"]}
    assert reachable(item, rules)
    assert not reachable(item, {"read": ["/home/u/doc"], "write": []})  # a prefix of the name is not a folder
    writing = NamedPath(pointer="/p", value="/home/u/docs", path="/home/u/docs", access="write", grant="/home/u/docs")
    assert not reachable(writing, rules)
    assert reachable(writing, {"read": [], "write": ["/home/u"]})
    null = NamedPath(pointer="/p", value="/dev/null", path="/dev/null", access="write", grant="/dev/null")
    assert reachable(null, {"read": [], "write": [], "devices_rw": ["/dev/null"], "devices_r": []})
    assert not reachable(null, {"read": [], "write": [], "devices_rw": [], "devices_r": ["/dev/null"]})


def test_the_users_tilde_is_written_out_under_the_real_home_member_by_member() -> None:
    """A plugin whose HOME is a private view must receive the user's ``~`` as the user's home (issue 25)."""
    arguments = {
        "path": "~/mcp-files/notes.txt",  # top level, the file need not exist
        "home": "~",
        "nested": {"output": "~/out/new.txt", "a/b~": ["~/x", "keep ~/y", "~user/z", "~"]},
        "uri": "file:///tmp/~/x",
        "count": 3,
        "deep": {"d": {"d": {"d": {"d": {"d": {"d": {"d": {"d": "~/past the depth bound"}}}}}}}},
    }
    rewritten, pointers = with_real_home(arguments, "/home/ada/")
    assert rewritten == {
        "path": "/home/ada/mcp-files/notes.txt",
        "home": "/home/ada",
        "nested": {"output": "/home/ada/out/new.txt", "a/b~": ["/home/ada/x", "keep ~/y", "~user/z", "/home/ada"]},
        "uri": "file:///tmp/~/x",
        "count": 3,
        "deep": arguments["deep"],
    }
    assert pointers == ["/path", "/home", "/nested/output", "/nested/a~1b~0/0", "/nested/a~1b~0/3"]
    assert arguments["path"] == "~/mcp-files/notes.txt"  # the caller's value is not changed
    assert with_real_home({"path": "/abs", "text": "see ~/x"}, "/home/ada") == ({"path": "/abs", "text": "see ~/x"}, [])
    assert with_real_home({"p": "~/x"}, "/")[0] == {"p": "/x"}
    # Past MAX_STRINGS strings, none is looked at (the walk's bound, as may_name_paths).
    many = {"items": ["plain"] * MAX_STRINGS + ["~/late"]}
    assert with_real_home(many, "/home/ada") == (many, [])
