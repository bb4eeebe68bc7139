"""The plugin manifest (v1): its pydantic model, loading from a folder, and its JSON Schema.

Theory of operation
-------------------
A plugin is a folder holding exactly one of ``plugin.yaml``, ``plugin.yml`` or
``plugin.json`` (README.md "Writing a plugin"; the schema is manifests/plugin.schema.json). :func:`load_manifest` reads
that file (bounded, never blocking on a FIFO, never through a symlink or a hard
link: the file must be a regular file of the folder's own, so no error can quote
another file's bytes), parses it, validates it against
:class:`Manifest` and returns the model together with a digest of the exact bytes
read, so the trust gate can show and approve precisely what was installed.

Every way a manifest can be wrong ends in one exception, :class:`ManifestError`
(a :class:`~hostd.wire.errors.HostError` of kind ``MANIFEST_INVALID``), whose
``data`` is ``{"path": str, "errors": [{"field": "backend.command", "message": ...}]}``.
``field`` is the dotted path of the offending value with list indices as numbers
(``"contributes.tools.0"``, ``"permissions.1"``); it is ``""`` for problems with
the file as a whole (missing, unreadable, syntax error, not a mapping), and then
the entry may carry 1-based ``line`` and ``column`` too. All field errors are
reported at once, not just the first.

The model is the single source of truth: ``manifests/plugin.schema.json`` is
generated from it (``python -m hostd.install.manifest``) and a test fails when the file
is stale. Rules the JSON Schema cannot express (every ``contributes.tools`` entry
starts with ``"<id>."``; no duplicates) are enforced by validators on the model.

The module does no I/O at import and imports PyYAML only when a YAML manifest is
read; it is safe on the ``initialize`` path.

Where each part lives: the model and the schema generation in :mod:`hostd.install.manifest_model`, the
shared field helpers in :mod:`hostd.install.manifest_fields`; this module reads and validates a plugin
folder's manifest, renders its errors, and re-exports the model (``hostd.manifest`` re-exports it again).
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from pydantic import BaseModel, ValidationError

from hostd.install.manifest_fields import ENV_NAME_PATTERN, HEADER_NAME_PATTERN, ID_PATTERN, PERMISSION_PATTERN
from hostd.install.manifest_model import (
    _TOOL_ENTRY_TAGS,
    SCHEMA_ID,
    Backend,
    ClientFeature,
    ConditionalTool,
    Contributes,
    Manifest,
    OAuthClient,
    Origin,
    UserConfigOption,
    manifest_json_schema,
    manifest_schema_text,
)
from hostd.wire.errors import ErrorKind, HostError, exhausted
from hostd.wire.jsonlimits import DocumentRefused, json_int

if TYPE_CHECKING:
    import yaml

__all__ = [
    "BUNDLE_SUFFIXES",
    "MANIFEST_FILES",
    "MANIFEST_MAX_BYTES",
    "SCHEMA_ID",
    "Backend",
    "ClientFeature",
    "ConditionalTool",
    "Contributes",
    "Manifest",
    "ManifestError",
    "Origin",
    "UserConfigOption",
    "load_manifest",
    "manifest_json_schema",
    "manifest_schema_text",
]

MANIFEST_FILES: Final = ("plugin.yaml", "plugin.yml", "plugin.json")
"""The file names a plugin folder may hold its manifest under; exactly one must exist."""

BUNDLE_SUFFIXES: Final = (".mcpb", ".dxt")
"""File suffixes of an MCPB bundle ``plugins/install`` extracts (hostd/install/bundle.py), not a plugin folder.
Here, not in hostd/install/bundle.py: an install from a folder asks without loading the bundle reader."""

MANIFEST_MAX_BYTES: Final = 256 * 1024
#: How deeply a manifest's values may nest (the top-level mapping is depth 1); deeper is refused
#: before anything recursive (validation, error rendering) touches the value.
MANIFEST_MAX_DEPTH: Final = 32
"""Upper bound on a manifest file's size in bytes (256 KiB); a larger file is rejected unread."""


SCHEMA_PATH: Final = Path(__file__).resolve().parents[2] / "manifests" / "plugin.schema.json"
"""Where ``python -m hostd.install.manifest`` writes the schema in a source checkout."""


class ManifestError(HostError):
    """A missing or invalid manifest: ``HostError`` of kind ``MANIFEST_INVALID``.

    ``data`` is ``{"path": str, "errors": [{"field": str, "message": str, "line"?: int,
    "column"?: int}]}``; ``path`` is the plugin folder for folder-level problems and
    the manifest file otherwise; ``field`` is ``""`` for problems with the whole file.
    """

    def __init__(self, message: str, *, path: Path | str, errors: list[dict[str, Any]]) -> None:
        super().__init__(ErrorKind.MANIFEST_INVALID, message, path=str(path), errors=errors)
        self.errors = errors


def _whole_file_error(path: Path, message: str, **position: int) -> ManifestError:
    return ManifestError(f"{path}: {message}", path=path, errors=[{"field": "", "message": message, **position}])


_BUILD_LOCK = threading.Lock()


def load_manifest(folder: Path) -> tuple[Manifest, str]:
    """Read, parse and validate the manifest in a plugin folder (``plugins/install``).

    Args:
        folder: the plugin folder; it must hold exactly one of :data:`MANIFEST_FILES`.

    Returns:
        ``(manifest, digest)`` where ``digest`` is ``"sha256:<64 hex>"`` over the raw
        bytes of the manifest file exactly as read.

    Raises:
        ManifestError: (``MANIFEST_INVALID``) the folder is missing or not a directory;
            no manifest file, or more than one; the file is a symbolic link (even to a
            file inside the folder), is not a regular file, has more than one hard
            link, is unreadable, larger than :data:`MANIFEST_MAX_BYTES`, not UTF-8, has a YAML or
            JSON syntax error (with 1-based ``line``/``column``) or a duplicate key; the
            top level is not a mapping; or any field is invalid (each field's dotted
            path and reason in ``data.errors``).

    Blocking: reads one small file; call it from a worker thread in async code if the
    folder may be on slow storage.
    """
    folder = Path(folder)
    # Class (issue 9, class 7): every byte an error may quote must come from a file that
    # is inside the plugin folder and belongs to it alone. A manifest that is a symlink
    # (to ~/.aws/credentials, say) would make a YAML/JSON error echo another file's lines
    # to the parent. So: the folder is resolved once (realpath) and opened as a directory;
    # the manifest is looked up and opened relative to that descriptor with O_NOFOLLOW, so
    # neither a symlinked manifest nor a parent swapped after the check can redirect the
    # read; it must be a regular file (no FIFO, device, socket, directory) with exactly
    # one link (a hard link shares its bytes with a name that may be outside the folder)
    # and at most MANIFEST_MAX_BYTES. Symlinks are refused even when they point inside
    # the folder: simpler and stricter than resolving and re-checking.
    root = os.path.realpath(folder)
    try:
        dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _whole_file_error(folder, "plugin folder does not exist") from None
    except NotADirectoryError:
        raise _whole_file_error(folder, "not a directory (give the plugin's folder, not a file)") from None
    except OSError as exc:
        raise _unreadable(folder, exc, "cannot open the plugin folder") from None
    try:
        present = [name for name in MANIFEST_FILES if _lexists(name, dir_fd)]
        if not present:
            raise _whole_file_error(folder, f"no manifest: expected one of {', '.join(MANIFEST_FILES)}")
        if len(present) > 1:
            raise _whole_file_error(folder, f"more than one manifest ({', '.join(present)}); keep exactly one of them")
        path = folder / present[0]
        raw = _read_bounded(path, present[0], dir_fd)
    finally:
        os.close(dir_fd)
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _whole_file_error(path, f"not valid UTF-8 (byte offset {exc.start})") from None
    data = _parse_json(path, text) if path.suffix == ".json" else _parse_yaml(path, text)
    if data is None:
        raise _whole_file_error(path, "the manifest is empty")
    if not isinstance(data, dict):
        raise _whole_file_error(path, f"the top level must be a mapping, not {_kind_of(data)}")
    _check_values(path, data)
    return _validated(path, data), digest


def _unreadable(path: Path, exc: OSError, what: str) -> HostError:
    """The error of a file or folder that could not be opened or read: ``RESOURCE_EXHAUSTED`` when the machine
    ran out of something (descriptors, memory: not the manifest's fault, and transient), else ``MANIFEST_INVALID``
    saying ``what`` failed and why."""
    return exhausted(exc, f"reading {path}") or _whole_file_error(path, f"{what}: {exc.strerror or exc}")


def _validated(path: Path, data: dict[str, Any]) -> Manifest:
    """``data`` (the parsed manifest file at ``path``, its values checked) validated as a :class:`Manifest`.

    Builds the validator at the first call (once, under a lock). Raises :class:`ManifestError` with every
    field's error (:func:`_field_error`), or naming the whole file when validation or rendering fails otherwise.
    """
    if not Manifest.__pydantic_complete__:
        with _BUILD_LOCK:  # restores load manifests in several worker threads: one builds the validator
            if not Manifest.__pydantic_complete__:
                Manifest.model_rebuild()
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        try:
            errors = [_field_error(err, yaml_source=path.suffix != ".json") for err in exc.errors()]
        except Exception as failure:  # rendering the errors failed: still this manifest's error, never another
            reason = f"its errors cannot be shown: {type(failure).__name__}"
            raise _whole_file_error(path, f"invalid manifest ({reason})") from None
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ManifestError(
            f"{path}: invalid manifest: {first['field'] or '(top level)'}: {first['message']}{more}",
            path=path,
            errors=errors,
        ) from None
    except Exception as failure:  # the class: no document makes load_manifest raise anything but MANIFEST_INVALID
        raise _whole_file_error(path, f"invalid manifest (it cannot be validated: {type(failure).__name__})") from None
    return manifest


def _check_values(path: Path, data: dict[str, Any]) -> None:
    """Refuse what no field may hold, before validation or error rendering touches any value.

    The class (issue 31): text that is not text. A lone surrogate (``"\\ud800"`` in JSON or YAML)
    cannot be encoded, so pydantic failed while *rendering* an error about it (a
    ``UnicodeEncodeError`` out of :func:`load_manifest`, and out of hostd's start and SIGHUP);
    a NUL cannot reach a command, an argument, the environment or a path; nesting deeper than
    :data:`MANIFEST_MAX_DEPTH` is more than any field needs and costs recursion. Each is
    ``MANIFEST_INVALID`` with the field's dotted path (keys and values, checked iteratively);
    the value itself is never quoted.
    """
    stack: list[tuple[Any, tuple[str, ...], int]] = [(data, (), 1)]
    while stack:
        value, where, depth = stack.pop()
        if isinstance(value, str):
            _check_text(path, value, where, "")
        elif isinstance(value, dict | list):
            if depth > MANIFEST_MAX_DEPTH:
                field = ".".join(where)
                message = f"nested more than {MANIFEST_MAX_DEPTH} levels deep"
                raise ManifestError(
                    f"{path}: invalid manifest: {field}: {message}",
                    path=path,
                    errors=[{"field": field, "message": message}],
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            children = []
            for key, item in items:
                name = key if isinstance(key, str) else str(key) if isinstance(key, int) else type(key).__name__
                if isinstance(key, str):
                    _check_text(path, key, where, "invalid key: ")
                children.append((item, (*where, name), depth + 1))
            stack += reversed(children)  # the first problem in document order is the one reported


def _check_text(path: Path, text: str, where: tuple[str, ...], what: str) -> None:
    """Raise ``MANIFEST_INVALID`` at ``where`` when ``text`` holds a lone surrogate or a NUL (``what``: a prefix)."""
    problem = None
    if "\x00" in text:
        problem = "must not contain a NUL character"
    else:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            problem = f"must not contain a lone surrogate (U+{ord(text[exc.start]):04X}): it is not text"
    if problem is None:
        return
    field = ".".join(where)
    message = what + problem
    raise ManifestError(
        f"{path}: invalid manifest: {field or '(top level)'}: {message}",
        path=path,
        errors=[{"field": field, "message": message}],
    )


def _lexists(name: str, dir_fd: int) -> bool:
    """``name`` exists in the folder open as ``dir_fd`` (a dangling symlink counts)."""
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # exists but cannot be examined: opening it reports why
    return True


def _read_bounded(path: Path, name: str, dir_fd: int) -> bytes:
    """The bytes of ``name`` in the folder ``dir_fd``, at most ``MANIFEST_MAX_BYTES + 1`` read.

    ``path`` is only for messages. Refuses a symlink, anything but a regular file, a file
    with more than one hard link, and (after reading) one larger than the bound.
    """
    symlink = (
        f"is a symbolic link; the manifest must be a regular file inside the plugin folder "
        f"(symlinks are refused, even to a file inside it): replace {name} with the file itself"
    )
    try:
        if stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode):
            raise _whole_file_error(path, symlink)
    except OSError as exc:
        raise _unreadable(path, exc, "cannot read") from None
    # O_NOFOLLOW: a symlink swapped in after the lstat fails with ELOOP instead of being
    # followed. O_NONBLOCK: opening a FIFO planted under the manifest's name must not hang
    # install; the regular-file check then rejects it (and directories, devices, sockets).
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _whole_file_error(path, symlink) from None
        raise _unreadable(path, exc, "cannot read") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _whole_file_error(path, "not a regular file")
        if info.st_nlink > 1:
            raise _whole_file_error(
                path,
                f"has {info.st_nlink} hard links; the manifest must be a file of its own inside the "
                f"plugin folder (its other names may be outside it): replace {name} with a copy",
            )
        if info.st_size > MANIFEST_MAX_BYTES:
            raise _whole_file_error(path, f"larger than {MANIFEST_MAX_BYTES} bytes (256 KiB)")
        chunks: list[bytes] = []
        size = 0
        while size <= MANIFEST_MAX_BYTES:
            chunk = os.read(fd, MANIFEST_MAX_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise _unreadable(path, exc, "cannot read") from None
    finally:
        os.close(fd)
    if size > MANIFEST_MAX_BYTES:
        raise _whole_file_error(path, f"larger than {MANIFEST_MAX_BYTES} bytes (256 KiB)")
    return b"".join(chunks)


def _parse_json(path: Path, text: str) -> Any:
    def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                raise _whole_file_error(path, f"duplicate key {key!r}")
            result[key] = value
        return result

    try:
        return json.loads(text, object_pairs_hook=unique_keys, parse_int=json_int)
    except DocumentRefused as exc:  # a literal the syntax accepts but no value is (json_int: the class)
        raise _whole_file_error(path, f"not a value: {exc.message}") from None
    except json.JSONDecodeError as exc:
        raise _whole_file_error(
            path,
            f"JSON syntax error at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            line=exc.lineno,
            column=exc.colno,
        ) from None
    except RecursionError:
        raise _whole_file_error(path, "nested too deeply") from None


def _parse_yaml(path: Path, text: str) -> Any:
    import yaml  # noqa: PLC0415 - lazy: only YAML manifests pay for PyYAML

    try:
        return yaml.load(text, Loader=_yaml_loader())  # a SafeLoader subclass: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context:
            # e.g. "did not find expected ',' or '}' (while parsing a flow mapping at line 4, column 14)"
            where = exc.context_mark
            started = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
            reason = f"{exc.problem} ({exc.context}{started})"
        if mark is None:
            raise _whole_file_error(path, f"YAML syntax error: {reason}") from None
        line, column = mark.line + 1, mark.column + 1
        raise _whole_file_error(
            path, f"YAML syntax error at line {line}, column {column}: {reason}", line=line, column=column
        ) from None
    except yaml.YAMLError as exc:
        raise _whole_file_error(path, f"YAML error: {exc}") from None
    except RecursionError:
        raise _whole_file_error(path, "nested too deeply") from None


_YAML_LOADER: type[yaml.SafeLoader] | None = None


def _yaml_loader() -> type[yaml.SafeLoader]:
    """A SafeLoader (libyaml-backed when available) that rejects duplicate mapping keys.

    Plain PyYAML keeps the last of two equal keys silently; in a manifest that would
    let a second ``command:`` hide below the first one a reviewer reads.
    """
    global _YAML_LOADER  # noqa: PLW0603 - a lazily built, immutable class
    if _YAML_LOADER is not None:
        return _YAML_LOADER
    import yaml  # noqa: PLC0415

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = cast("type[yaml.SafeLoader]", type("_ManifestLoader", (base,), {}))

    def construct_map(self: yaml.SafeLoader, node: yaml.MappingNode) -> Iterator[dict[Any, Any]]:
        seen: set[Any] = set()
        for key_node, _value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key; SafeConstructor reports it
                continue
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
        yield from self.construct_yaml_map(node)

    def construct_object(self: yaml.SafeLoader, node: yaml.Node, deep: bool = False) -> Any:
        # The class (issue 31, found by python -m fuzz manifest; hostd.wire.jsonlimits.json_int for JSON): a
        # scalar the syntax accepts whose implicit type's constructor raises its own exception, not a
        # YAMLError: a timestamp that is no date (2026-07-38, an hour 25) or an integer of more digits than
        # Python converts raise ValueError from the constructor. Every value is built here, keys included,
        # so any constructor's failure becomes a ConstructorError at the value's line and column. Recursion
        # and memory are left to the caller's handling (nesting has its own error).
        try:
            return base.construct_object(self, node, deep=deep)
        except (yaml.YAMLError, RecursionError, MemoryError):
            raise
        except Exception as exc:
            kind = str(node.tag).rsplit(":", 1)[-1]
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {kind} ({exc})", node.start_mark
            ) from None

    loader.add_constructor("tag:yaml.org,2002:map", construct_map)
    setattr(loader, "construct_object", construct_object)  # noqa: B010 (a method of the class built above)
    _YAML_LOADER = loader
    return loader


def _kind_of(value: Any) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    if isinstance(value, date):
        return "a date"
    return names.get(type(value), f"a {type(value).__name__}")


_RULES: Final = {
    "id": f"must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit ({ID_PATTERN})",
    "permissions": f"must be lowercase a-z, 0-9, '.', '_' and '-', starting with a letter or digit "
    f"({PERMISSION_PATTERN})",
    "backend.env": f"must be an environment variable name ({ENV_NAME_PATTERN})",
    "backend.headers": f"must be an HTTP header name ({HEADER_NAME_PATTERN})",
}

_MODELS_AT: Final[dict[tuple[str, ...], type[BaseModel]]] = {
    (): Manifest,
    ("backend",): Backend,
    ("backend", "oauth"): OAuthClient,
    ("contributes",): Contributes,
}


def _field_error(err: Any, *, yaml_source: bool) -> dict[str, Any]:
    """Turn one pydantic error into ``{"field": "a.b.0", "message": ...}``."""
    loc: tuple[int | str, ...] = err["loc"]
    is_key = "[key]" in loc
    parts = [str(part) for part in loc if part != "[key]" and part not in _TOOL_ENTRY_TAGS]
    field = ".".join(parts)
    kind: str = err["type"]
    message: str = err["msg"]
    if kind == "extra_forbidden":
        name = parts[-1] if parts else ""
        message = f"unknown field {name!r}"
        model = _MODELS_AT.get(tuple(parts[:-1]))
        if model is not None:
            close = difflib.get_close_matches(name, list(model.model_fields), n=1)
            message += f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(model.model_fields)}"
    elif kind == "missing":
        message = "required field is missing"
    elif kind == "value_error":
        message = str(err.get("ctx", {}).get("error", message))
    elif kind == "string_pattern_mismatch":
        rule_key = "permissions" if parts[:1] == ["permissions"] else ".".join(parts[:2]) if is_key else field
        message = _RULES.get(rule_key, message)
    elif kind == "string_type" and yaml_source and isinstance(err.get("input"), bool | int | float | date):
        # YAML's implicit typing: ``version: 1.0``, ``name: yes``, ``version: 2024-01-01``.
        value = err["input"]
        shown = value.isoformat() if isinstance(value, date) else json.dumps(value)
        message += f" (YAML read {shown} as {_kind_of(value)}; quote it)"
    if is_key:
        message = f"invalid key: {message}"
    return {"field": field, "message": message}


def _main(argv: list[str]) -> int:
    """``python -m hostd.install.manifest [--check] [PATH]``: write (or check) the generated schema file."""
    import argparse  # noqa: PLC0415

    parser = argparse.ArgumentParser(
        prog="python -m hostd.install.manifest", description="Generate manifests/plugin.schema.json from the model."
    )
    parser.add_argument("path", nargs="?", type=Path, default=SCHEMA_PATH, help="output file")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is missing or stale")
    args = parser.parse_args(argv)
    text = manifest_schema_text()
    target: Path = args.path
    if args.check:
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current != text:
            print(f"{target} is stale; regenerate it with: python -m hostd.install.manifest", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
