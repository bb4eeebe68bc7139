"""MCPB bundles (``.mcpb``, formerly ``.dxt``): safe extraction, validation, and the manifest hostd runs.

Theory of operation
-------------------
A bundle is a ZIP archive holding ``manifest.json`` (MCPB manifest versions
0.2, 0.3 and 0.4) and the server's files, optionally followed by a signature
block (``MCPB_SIG_V1`` <u32 length> <PKCS#7> ``MCPB_SIG_END``) appended after
the archive. ``plugins/install {path}`` with such a file:

1. :func:`read_bundle` reads the file (at most :data:`MAX_BUNDLE_BYTES`),
   splits off the signature block and checks it (hostd/install/signing.py: a block
   that is cut, or a signature that does not match the archive, is refused;
   ``unsigned`` when there is none, ``unverified`` when no trust root is
   configured, ``verified`` with the signer's subject when its chain leads
   to one, refused when it does not);
2. :func:`extract` unpacks it into a fresh folder under the state folder.
   The class of attack it closes: *an archive entry that lands anywhere but a
   new regular file or folder inside the destination, or costs more than its
   bounds*. So every entry is refused unless its name is relative, has no
   ``..``, no empty, ``.`` or drive component and no backslash, is not a
   duplicate, and its mode is a regular file or a folder (symlinks, devices,
   FIFOs, sockets refused); the total uncompressed size, the number of
   entries and each entry's compression ratio are bounded, and sizes are
   counted on the bytes actually inflated (a header that lies does not
   help). Files are created with ``O_EXCL | O_NOFOLLOW`` under a folder
   only this process has written; only the executable bit of a mode is kept;
3. :class:`McpbManifest` validates ``manifest.json`` (pydantic; every
   problem reported at once as ``data.errors[{field, message}]``);
4. :func:`plugin_manifest` turns it into a hostd manifest document:
   ``server.mcp_config`` (with ``platform_overrides`` for this platform
   merged in) becomes ``backend``; ``${__dirname}`` is replaced by the
   bundle folder, ``${HOME}``/``${DESKTOP}``/``${DOCUMENTS}``/``${DOWNLOADS}``
   and ``${/}``/``${pathSeparator}`` are kept for the host to expand at
   resolution; ``${user_config.X}`` stays for resolution, except for a
   ``sensitive`` X, which becomes ``${secret:X}`` (hostd/storage/secrets.py);
   ``tools`` become ``contributes.tools`` (``tools_generated`` or no
   tools: discovered at the first enable); ``compatibility.platforms`` must
   include this platform; ``compatibility.runtimes`` ranges must be ranges
   (hostd/install/runtimes.py) and go to ``origin.runtimes``, which the host checks
   against the resolved launch at install; ``_meta["dev.hostd/network"]`` (MCPB has no network field; ``_meta``
   is its place for a client's own data) becomes the manifest's ``network`` allowlist, checked as that field is
   (hostd/install/network_field.py).

Every failure raises ``PACKAGE_INVALID`` with ``data.errors`` (``field`` is a
dotted manifest path, or ``""`` / an archive entry name for the file).
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hostd.install import network_field, runtimes, signing
from hostd.install.bundle_paths import escape_problem
from hostd.install.importer import sanitize_id
from hostd.install.manifest import MANIFEST_FILES
from hostd.install.signing import SIGNATURE_FOOTER, SIGNATURE_HEADER, Signature
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.jsonlimits import DocumentRefused, check_document, load_document

__all__ = ["SIGNATURE_FOOTER", "SIGNATURE_HEADER"]  # re-exported: the bundle format's markers

__all__ += [
    "MAX_BUNDLE_BYTES",
    "MAX_ENTRIES",
    "MAX_RATIO",
    "MAX_UNPACKED_BYTES",
    "Bundle",
    "McpbManifest",
    "extract",
    "install_bundle",
    "plugin_manifest",
    "read_bundle",
]

MAX_BUNDLE_BYTES: Final = 256 * 1024 * 1024
"""Largest bundle file read, in bytes (256 MiB)."""
MAX_UNPACKED_BYTES: Final = 1024 * 1024 * 1024
"""Most bytes all entries may inflate to (1 GiB)."""
MAX_ENTRIES: Final = 20_000
"""Most entries in one bundle."""
MAX_RATIO: Final = 200
"""Largest inflated/compressed ratio of one entry over 1 MiB (a zip bomb reaches 1000 and more)."""
_RATIO_FLOOR: Final = 1024 * 1024
_PLATFORM: Final = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, sys.platform)


def invalid(message: str, errors: list[dict[str, Any]] | None = None, **data: Any) -> HostError:
    """``PACKAGE_INVALID`` with ``data.errors`` (default: one entry for the whole file)."""
    return HostError(ErrorKind.PACKAGE_INVALID, message, errors=errors or [{"field": "", "message": message}], **data)


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """``data.errors`` for :func:`invalid` from a pydantic error: one ``{field, message}`` per problem.

    ``field`` is the dotted path (``""`` at the top level); ``message`` is a validator's own words when a
    validator refused the value, pydantic's message otherwise.
    """
    return [
        {"field": ".".join(str(p) for p in err["loc"]), "message": str(err.get("ctx", {}).get("error", err["msg"]))}
        for err in exc.errors()
    ]


_Model = TypeVar("_Model", bound=BaseModel)


def validated(model: type[_Model], document: Any, source: str, title: str) -> _Model:
    """``document`` checked as ``model``: JSON text (a ``str``, or ``bytes`` in UTF-8 with or without a
    byte order mark) is decoded first; a decoded value is taken as it is. ``source`` names where the
    text came from and ``title`` the document, in messages.

    Raises ``PACKAGE_INVALID``: ``"<source> is not JSON: ..."``, ``"<source> is refused: ..."`` (nested
    deeper than ``MAX_JSON_DEPTH``, a lone surrogate: ``errors[0].field`` says where, hostd/wire/jsonlimits.py),
    ``"<source> must be a JSON object"``,
    or the first field error of the model (:func:`first_invalid`) with ``data.errors`` holding all.
    """
    # The boundary of a stranger's document (issue 31, class 2): depth and text are bounded before
    # anything recursive (the parser, pydantic, str()) touches the value.
    try:
        if isinstance(document, bytes | str):
            document = load_document(document)
        else:
            check_document(document)
    except DocumentRefused as exc:
        message = exc.message.removeprefix("not JSON: ")
        what = "is not JSON" if message != exc.message else "is refused"
        text = f"{source} {what}: {message}"
        raise invalid(text, [{"field": exc.field, "message": text}]) from None
    if not isinstance(document, dict):
        raise invalid(f"{source} must be a JSON object")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise first_invalid(title, field_errors(exc)) from None


def first_invalid(title: str, errors: list[dict[str, Any]]) -> HostError:
    """``PACKAGE_INVALID`` for a document with field ``errors`` (at least one): the message names the first
    and counts the others (``"invalid <title>: <field>: <message> (and 2 more)"``); ``data.errors`` is all."""
    first = errors[0]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return invalid(f"invalid {title}: {first['field'] or '(top level)'}: {first['message']}{more}", errors)


# -- the MCPB manifest ------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class McpConfig(_Strict):
    """``server.mcp_config`` (and, all fields optional, one ``platform_overrides`` entry)."""

    command: str | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None


class McpConfigWithOverrides(McpConfig):
    """``server.mcp_config``: ``command`` required, per-platform overrides."""

    command: str = Field(min_length=1)  # type: ignore[assignment, unused-ignore]
    platform_overrides: dict[str, McpConfig] | None = None


class Server(_Strict):
    """``server``: its type, entry point and how to start it."""

    type: Literal["python", "node", "binary", "uv"]
    entry_point: str = Field(min_length=1)
    mcp_config: McpConfigWithOverrides


class Author(_Strict):
    """``author``."""

    name: str
    email: str | None = None
    url: str | None = None


class Tool(_Strict):
    """One of ``tools``."""

    name: str = Field(min_length=1)
    description: str | None = None


class Compatibility(_Strict):
    """``compatibility``."""

    claude_desktop: str | None = None
    platforms: list[Literal["darwin", "win32", "linux"]] | None = None
    runtimes: dict[str, str] | None = None


class UserConfig(_Strict):
    """One ``user_config`` option."""

    type: Literal["string", "number", "boolean", "directory", "file"]
    title: str
    description: str
    required: bool | None = None
    default: str | int | float | bool | list[str] | None = None
    multiple: bool | None = None
    sensitive: bool | None = None
    min: int | float | None = None
    max: int | float | None = None


_V03_FIELDS: Final = frozenset({"icons", "localization", "_meta"})


class McpbManifest(BaseModel):
    """An MCPB ``manifest.json``, versions 0.2 to 0.4 (``manifest_version`` or the older ``dxt_version``).

    Fields hostd does not use (``icons``, ``prompts``, ``privacy_policies``...) are accepted and
    ignored; unknown fields are refused, as MCPB's own validator does. 0.4 adds ``server.type:
    uv``; 0.3 adds ``icons``, ``localization`` and ``_meta``.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    schema_: str | None = Field(default=None, alias="$schema")
    dxt_version: Literal["0.2", "0.3", "0.4"] | None = None
    manifest_version: Literal["0.2", "0.3", "0.4"] | None = None
    name: str = Field(min_length=1)
    display_name: str | None = None
    version: str = Field(min_length=1)
    description: str
    long_description: str | None = None
    author: Author
    repository: dict[str, Any] | None = None
    homepage: str | None = None
    documentation: str | None = None
    support: str | None = None
    icon: str | None = None
    icons: list[dict[str, Any]] | None = None
    screenshots: list[str] | None = None
    localization: dict[str, Any] | None = None
    server: Server
    tools: list[Tool] | None = None
    tools_generated: bool | None = None
    prompts: list[dict[str, Any]] | None = None
    prompts_generated: bool | None = None
    keywords: list[str] | None = None
    license: str | None = None
    privacy_policies: list[str] | None = None
    compatibility: Compatibility | None = None
    user_config: dict[str, UserConfig] | None = None
    meta: dict[str, dict[str, Any]] | None = Field(default=None, alias="_meta")

    @model_validator(mode="after")
    def _version_rules(self) -> McpbManifest:
        version = self.manifest_version or self.dxt_version
        if version is None:
            raise ValueError("either 'manifest_version' or (deprecated) 'dxt_version' must be given (0.2 to 0.4)")
        if version == "0.2":
            used = sorted(f for f in _V03_FIELDS if getattr(self, "meta" if f == "_meta" else f) is not None)
            if used:
                raise ValueError(f"{', '.join(used)}: not in manifest version 0.2 (use 0.3 or later)")
        if self.server.type == "uv" and version != "0.4":
            raise ValueError("server.type 'uv' needs manifest_version 0.4")
        return self

    @property
    def version_of_manifest(self) -> str:
        """``manifest_version`` (or ``dxt_version``)."""
        return self.manifest_version or self.dxt_version or ""


# -- reading and extraction -------------------------------------------------------------------


@dataclass(frozen=True)
class Bundle:
    """A bundle file as read: the archive bytes, the digest of the whole file, its checked signature."""

    path: Path
    archive: bytes
    sha256: str
    checked: Signature

    @property
    def signature(self) -> Literal["unsigned", "unverified", "verified"]:
        """``origin.signature``: ``unsigned``, ``unverified`` (no trust root configured) or ``verified``."""
        return self.checked.state


def read_bundle(path: Path, *, max_bytes: int = MAX_BUNDLE_BYTES, trust_roots: Sequence[str] = ()) -> Bundle:
    """Read a bundle file, split off a trailing signature block and check it (hostd/install/signing.py).

    ``trust_roots``: PEM files of the certificates a signer's chain must lead
    to (``hostd serve --bundle-trust-root``); empty: a signature is checked
    against the archive only (``unverified``). Raises ``PACKAGE_INVALID``: not
    a regular file (a FIFO, a device, a folder), larger than ``max_bytes``,
    unreadable; a signature refused (``data.reason``: ``signature-malformed``,
    ``signature-mismatch``, ``signer-untrusted``, ``trust-root-unusable``).
    Blocking.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise invalid(f"{path}: cannot open the bundle: {exc.strerror or exc}", path=str(path)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise invalid(f"{path}: not a regular file", path=str(path))
        if info.st_size > max_bytes:
            raise invalid(f"{path}: {info.st_size} bytes; a bundle may have at most {max_bytes}", path=str(path))
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise invalid(f"{path}: larger than {max_bytes} bytes", path=str(path))
    digest = hashlib.sha256(data).hexdigest()
    archive, der = signing.split_block(data)
    checked = Signature("unsigned")
    if der is not None:
        try:
            roots = signing.load_trust_roots(trust_roots) if trust_roots else None
        except ValueError as exc:
            raise signing.refused("trust-root-unusable", f"the trust root {exc}") from None
        checked = signing.verify(archive, der, roots)
    return Bundle(path=path, archive=archive, sha256=digest, checked=checked)


_DRIVE: Final = re.compile(r"^[A-Za-z]:")


def _entry_problem(name: str) -> str | None:
    """Why the archive member ``name`` may not be extracted, or ``None``."""
    if "\x00" in name:
        return "contains a NUL character"
    if len(os.fsencode(name)) > _PATH_MAX:
        return f"is longer than {_PATH_MAX} bytes"
    if any(len(os.fsencode(part)) > _NAME_MAX for part in name.split("/")):
        return f"has a path component longer than {_NAME_MAX} bytes"
    if "\\" in name:
        return "contains a backslash (a Windows path separator)"
    if name.startswith("/") or _DRIVE.match(name):
        return "is an absolute path"
    parts = name.rstrip("/").split("/")
    if any(part == ".." for part in parts):
        return "contains '..' (it would land outside the bundle folder)"
    if any(part in ("", ".") for part in parts):
        return "has an empty or '.' path component"
    return None


#: The compression methods hostd reads: stored (0) and deflate (8). Anything else (bzip2, LZMA, zstd,
#: a number no library knows) is refused by name before a decompressor sees a byte.
ZIP_METHODS: Final = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
#: Longest path component and whole entry name, in bytes (NAME_MAX and PATH_MAX - 1 on Linux).
_NAME_MAX: Final = 255
_PATH_MAX: Final = 4095


class _Archive:
    """The one way hostd reads a ZIP archive: every call into :mod:`zipfile` goes through here.

    The class (issue 31, class 2): zipfile and its decompressors raise what they
    like on a damaged archive (``BadZipFile``, ``NotImplementedError`` for an
    unsupported version or method, ``OSError``/``ValueError`` for a damaged
    local-header offset, ``EOFError``, ``zlib.error``, ``LZMAError``,
    ``UnicodeDecodeError`` for a name flagged UTF-8 that is not...). Each is
    the archive's fault, as the reader works on bytes in memory and does no
    I/O of its own, so every exception but ``MemoryError`` raised inside a
    zipfile call becomes ``PACKAGE_INVALID`` naming the entry. Only stored
    and deflate members are opened (:data:`ZIP_METHODS`); the caller checks
    that first (:func:`_check_member`).
    """

    def __init__(self, archive: bytes) -> None:
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(archive))
            self.members = self._zip.infolist()
        except MemoryError:
            raise
        except Exception as exc:  # the class above: the archive's fault, whatever zipfile raises
            raise invalid(f"not a ZIP archive: {_library_failure(exc)}") from None

    def close(self) -> None:
        """Release the archive (it holds only memory)."""
        self._zip.close()

    def chunks(self, member: zipfile.ZipInfo, size: int = 1024 * 1024) -> Iterator[bytes]:
        """The inflated bytes of ``member`` in pieces of at most ``size``; ``PACKAGE_INVALID`` when corrupt."""
        name = member.filename
        if member.compress_type not in ZIP_METHODS:  # _check_member refused it already: never decompress one
            raise invalid(f"archive entry {name!r} {_method_problem(member)}", entry=name)
        try:
            with self._zip.open(member) as source:
                while chunk := source.read(size):
                    yield chunk
        except MemoryError:
            raise
        except Exception as exc:  # the class above
            problem = f"is corrupt: {_library_failure(exc)}"
            raise invalid(
                f"archive entry {name!r} {problem}", [{"field": name, "message": problem}], entry=name
            ) from None


def _library_failure(exc: BaseException) -> str:
    """A library exception in words: its type and its message, cut to 200 characters."""
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _method_problem(member: zipfile.ZipInfo) -> str:
    accepted = ", ".join(f"{word} ({number})" for number, word in ZIP_METHODS.items())
    return f"uses compression method {member.compress_type}; only {accepted} are accepted"


def extract(
    archive: bytes,
    destination: Path,
    *,
    max_unpacked: int = MAX_UNPACKED_BYTES,
    max_entries: int = MAX_ENTRIES,
    max_ratio: int = MAX_RATIO,
) -> int:
    """Extract ``archive`` (ZIP bytes) into ``destination``, which must not exist yet; return the bytes written.

    ``destination`` is created ``0700``. Raises ``PACKAGE_INVALID`` naming the
    offending entry for each refusal described in the module docstring, for a
    compression method other than stored and deflate, a version of the format
    zipfile cannot read, a name component over 255 bytes or a name over 4095,
    and any failure of the ZIP library on a damaged archive (:class:`_Archive`);
    the caller removes ``destination`` then (it may hold part of the archive).
    ``OSError`` from writing the files (a full disk) is raised as it is.
    Blocking; CPU-bound on large bundles.
    """
    reader = _Archive(archive)
    try:
        members = reader.members
        if len(members) > max_entries:
            raise invalid(f"the bundle has {len(members)} entries; at most {max_entries} are accepted")
        seen: set[str] = set()
        kinds: dict[str, bool] = {}
        for member in members:
            _check_member(member, seen)
            _check_layout(member, kinds)
        destination.mkdir(mode=0o700)
        root_fd = os.open(destination, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        total = 0
        try:
            for member in members:
                total += _extract_member(reader, member, root_fd, max_unpacked - total, max_ratio)
        finally:
            os.close(root_fd)
    finally:
        reader.close()
    return total


def _check_member(member: zipfile.ZipInfo, seen: set[str]) -> None:
    name = member.filename
    problem = _entry_problem(name)
    if problem is None:
        mode = member.external_attr >> 16
        kind = stat.S_IFMT(mode)
        if member.create_system == 3 and kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
            what = {stat.S_IFLNK: "a symbolic link", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}
            problem = f"is {what.get(kind, 'a FIFO, socket or other special file')}; only files and folders are allowed"
        elif member.flag_bits & 0x1:
            problem = "is encrypted"
        elif member.compress_type not in ZIP_METHODS:
            problem = _method_problem(member)
        elif member.extract_version > zipfile.MAX_EXTRACT_VERSION:
            problem = (
                f"needs ZIP version {member.extract_version / 10:.1f} to extract; "
                f"at most {zipfile.MAX_EXTRACT_VERSION / 10:.1f} is supported"
            )
    key = name.rstrip("/")
    if problem is None and key in seen:
        problem = "appears twice in the archive"
    seen.add(key)
    if problem is not None:
        raise invalid(f"archive entry {name!r} {problem}", [{"field": name, "message": problem}], entry=name)


def _check_layout(member: zipfile.ZipInfo, folders: dict[str, bool]) -> None:
    """Refuse an entry whose path makes a file and a folder of one name (``folders``: path -> is a folder).

    The class (issue 31, found by ``python -m fuzz bundle``): entries whose paths collide as a file and a
    folder, in either order: a file ``server`` beside ``server/index.js`` (the folder it implies), or an
    entry under a name another entry holds as a file. Extraction met them as ``FileExistsError`` or
    ``NotADirectoryError``, which escaped the reader. Checked on the names before anything is written;
    a collision only the file system sees (a case-insensitive one: ``A`` and ``a``) is caught where the
    entry is opened (:func:`_extract_member`).
    """
    name = member.filename
    parts = name.rstrip("/").split("/")
    problem = None
    for depth in range(1, len(parts)):
        prefix = "/".join(parts[:depth])
        if folders.setdefault(prefix, True) is False:
            problem = f"is inside {prefix!r}, which the archive also holds as a file"
    key = "/".join(parts)
    if problem is None and folders.get(key) is True and not member.is_dir():
        problem = "is a file where other entries make a folder"
    folders.setdefault(key, member.is_dir())
    if problem is not None:
        raise invalid(f"archive entry {name!r} {problem}", [{"field": name, "message": problem}], entry=name)


def _layout_failure(name: str, exc: OSError) -> HostError:
    problem = f"collides with another entry on this file system ({exc.strerror or exc})"
    return invalid(f"archive entry {name!r} {problem}", [{"field": name, "message": problem}], entry=name)


def _open_parent(root_fd: int, parts: list[str]) -> int:
    """A descriptor of the folder ``parts`` under ``root_fd``, created as needed, never through a link."""
    fd = os.dup(root_fd)
    for part in parts:
        try:
            os.mkdir(part, 0o700, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _extract_member(reader: _Archive, member: zipfile.ZipInfo, root_fd: int, budget: int, max_ratio: int) -> int:
    name = member.filename
    parts = name.rstrip("/").split("/")
    if member.is_dir():
        try:
            os.close(_open_parent(root_fd, parts))
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:  # _check_layout: the class
            raise _layout_failure(name, exc) from None
        return 0
    mode = 0o700 if (member.external_attr >> 16) & 0o111 else 0o600
    try:
        parent = _open_parent(root_fd, parts[:-1])
    except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:  # _check_layout: the class
        raise _layout_failure(name, exc) from None
    written = 0
    try:
        try:
            fd = os.open(
                parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent
            )
        except (FileExistsError, NotADirectoryError, IsADirectoryError) as exc:  # _check_layout: the class
            raise _layout_failure(name, exc) from None
        try:
            for chunk in reader.chunks(member):
                written += len(chunk)
                if written > budget:
                    raise invalid(
                        f"archive entry {name!r}: the bundle inflates to more than the bound "
                        f"({MAX_UNPACKED_BYTES if budget > MAX_UNPACKED_BYTES else 'the remaining'} bytes)",
                        [{"field": name, "message": "the bundle's unpacked size exceeds the bound"}],
                        entry=name,
                    )
                if written > _RATIO_FLOOR and written > max_ratio * max(member.compress_size, 1):
                    raise invalid(
                        f"archive entry {name!r} inflates more than {max_ratio} times its compressed "
                        f"size ({member.compress_size} bytes): a zip bomb?",
                        [{"field": name, "message": f"compression ratio over {max_ratio}"}],
                        entry=name,
                    )
                view = memoryview(chunk)
                while view:  # os.write may write less than asked
                    view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    finally:
        os.close(parent)
    return written


# -- conversion ---------------------------------------------------------------------------------

_SUBST: Final = re.compile(r"\$\{([A-Za-z_/][A-Za-z0-9_./]*)\}")
#: Variables kept for the host to expand when it resolves the launch (hostd/host/service.py).
HOST_VARIABLES: Final = ("HOME", "DESKTOP", "DOCUMENTS", "DOWNLOADS", "/", "pathSeparator")


def load_mcpb_manifest(folder: Path) -> McpbManifest:
    """Validate ``folder/manifest.json``; ``PACKAGE_INVALID`` with every field error at once."""
    path = folder / "manifest.json"
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise invalid("the bundle has no manifest.json at its top level") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > 1024 * 1024:
        raise invalid("manifest.json must be a regular file of at most 1 MiB")
    return validated(McpbManifest, path.read_bytes(), "manifest.json", "bundle manifest.json")


def plugin_manifest(
    mcpb: McpbManifest, folder: Path, *, sha256: str, signature: str, source: str, signer: str | None = None
) -> dict[str, Any]:
    """The hostd manifest document (``plugin.json``) for the bundle ``mcpb`` extracted into ``folder``.

    ``origin`` records ``source``, ``sha256``, ``signature`` and (a verified one) the ``signer``'s subject.

    Raises ``PACKAGE_INVALID`` when the bundle does not support this platform,
    refers to an undeclared ``${user_config.X}`` or to an unknown variable.
    """
    compat = mcpb.compatibility
    if compat is not None and compat.platforms is not None and _PLATFORM not in compat.platforms:
        raise invalid(
            f"the bundle supports {', '.join(compat.platforms)}, not {_PLATFORM}",
            [{"field": "compatibility.platforms", "message": f"{_PLATFORM} is not listed"}],
        )
    config = mcpb.server.mcp_config
    command, args, env = config.command, list(config.args or []), dict(config.env or {})
    override = (config.platform_overrides or {}).get(_PLATFORM)
    if override is not None:
        command = override.command or command
        args = list(override.args) if override.args is not None else args
        env = {**env, **(override.env or {})}
    options = mcpb.user_config or {}
    plugin_id = sanitize_id(mcpb.name)
    errors: list[dict[str, Any]] = []
    convert = _substitution(folder, options, errors)
    command = convert(command, "server.mcp_config.command")
    args = [convert(a, f"server.mcp_config.args.{i}") for i, a in enumerate(args)]
    env = {k: convert(v, f"server.mcp_config.env.{k}") for k, v in env.items()}
    required_runtimes = dict(compat.runtimes or {}) if compat is not None else {}
    for runtime, spec in required_runtimes.items():
        problem = runtimes.range_problem(runtime, spec)
        if problem is not None:
            errors.append({"field": f"compatibility.runtimes.{runtime}", "message": problem})
    bad_names = [k for k in options if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k)]
    errors += [
        {"field": f"user_config.{k}", "message": "option names must be [A-Za-z_][A-Za-z0-9_]*"} for k in bad_names
    ]
    if errors:
        raise first_invalid("bundle manifest.json", errors)
    tools = [] if mcpb.tools_generated or not mcpb.tools else [f"{plugin_id}.{t.name}" for t in mcpb.tools]
    contributes: dict[str, Any] = {"tools": tools}
    if not tools:
        contributes["discover"] = True
    user_config = {
        key: {
            k: v
            for k, v in option.model_dump().items()
            if v is not None and not (k in ("required", "multiple", "sensitive") and v is False)
        }
        for key, option in options.items()
    }
    network = network_field.declared(mcpb.meta)
    return {
        "id": plugin_id,
        "name": mcpb.display_name or mcpb.name,
        "version": mcpb.version,
        "description": mcpb.description,
        "permissions": [],
        "contributes": contributes,
        "backend": {
            "type": "mcp",
            "transport": "stdio",
            "command": command,
            "args": args,
            "env": env,
            "startup_timeout_seconds": 60,
        },
        "user_config": user_config,
        "origin": {
            "kind": "mcpb",
            "source": source,
            "sha256": sha256,
            "signature": signature,
            **({"signer": signer} if signer is not None else {}),
            **({"runtimes": required_runtimes} if required_runtimes else {}),
        },
        **({"network": network[0]} if network is not None else {}),
    }


def _substitution(
    folder: Path, options: dict[str, UserConfig], errors: list[dict[str, Any]]
) -> Callable[[str, str], str]:
    """:func:`plugin_manifest`'s ``convert(word, field)``: a bundle's ``${...}`` variables in ``word`` substituted.

    ``${__dirname}`` becomes ``folder``; host variables and ``${user_config.X}`` stay (a sensitive option's
    becomes ``${secret:X}``); an undeclared option, an unknown variable or a ``..`` that leaves the bundle
    folder (:func:`hostd.install.bundle_paths.escape_problem`) is appended to ``errors`` (with ``field``).
    """

    def convert(word: str, field: str) -> str:
        escape = escape_problem(word)
        if escape is not None:
            errors.append({"field": field, "message": escape})

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name == "__dirname":
                return str(folder)
            if name in HOST_VARIABLES:
                return match.group(0)
            if name.startswith("user_config."):
                key = name.removeprefix("user_config.")
                if key not in options:
                    errors.append({"field": field, "message": f"${{{name}}}: no user_config option {key!r}"})
                elif options[key].sensitive:
                    return "${secret:" + key + "}"
                return match.group(0)
            errors.append({"field": field, "message": f"unknown variable ${{{name}}}"})
            return match.group(0)

        return _SUBST.sub(replace, word)

    return convert


def _check_entry_point(mcpb: McpbManifest, folder: Path) -> None:
    """``server.entry_point`` must be a regular file of the bundle; a ``binary`` server's command must be in it.

    A ``node``/``python``/``uv`` server runs its entry point with the runtime named by
    ``mcp_config.command`` (found on PATH); a ``binary`` server runs a program the bundle ships,
    so its command must be ``${__dirname}/...`` (hostd then hashes it into the approved launch).
    """
    server = mcpb.server
    entry = server.entry_point
    problem = _entry_problem(entry)
    target = folder / entry
    if problem is None and (not target.is_file() or target.is_symlink()):
        problem = "is not a file of the bundle"
    if problem is not None:
        raise invalid(f"server.entry_point {entry!r} {problem}", [{"field": "server.entry_point", "message": problem}])
    if server.type == "binary" and not server.mcp_config.command.startswith("${__dirname}/"):
        message = "a binary server's command must be a program of the bundle ('${__dirname}/...')"
        raise invalid(
            f"server.mcp_config.command: {message}", [{"field": "server.mcp_config.command", "message": message}]
        )


def _check_generated(document: dict[str, Any]) -> None:
    """``PACKAGE_INVALID`` naming the bundle manifest's field when hostd would refuse the manifest made from it.

    Issue 31, class 3 (hostd/install/generated.py): what ``manifest.json`` let through
    but the plugin manifest refuses (a NUL in an argument or an env value, an
    env name that is not one) is reported against ``manifest.json``, not as
    MANIFEST_INVALID naming the ``plugin.json`` hostd wrote.
    """
    from hostd.install.generated import manifest_errors, source_field  # noqa: PLC0415 - pulls in the manifest model

    errors = manifest_errors(document)
    if not errors:
        return
    backend = document.get("backend", {})
    table = {"id": "name", "name": "display_name", "version": "version", "description": "description"}
    table["backend.command"] = "server.mcp_config.command"
    table.update({f"backend.args.{i}": f"server.mcp_config.args.{i}" for i in range(len(backend.get("args", [])))})
    table.update({f"backend.env.{name}": f"server.mcp_config.env.{name}" for name in backend.get("env", {})})
    table["user_config"] = "user_config"
    if "network" in document:
        table.update(network_field.field_table(document["network"], f"_meta.{network_field.NETWORK_KEY}"))
    found = [{"field": source_field(e["field"], table, ""), "message": e["message"]} for e in errors]
    raise first_invalid("bundle manifest.json", found)


def install_bundle(
    bundle: Bundle, root: Path, *, check: Callable[[str, Path], None] | None = None
) -> tuple[Path, dict[str, Any]]:
    """Extract ``bundle`` under ``root`` (``<state>/bundles``) and return ``(folder, manifest document)``.

    The bundle is extracted into a fresh ``root/.new-<random>`` folder, validated
    and converted; then moved to ``root/<plugin id>`` (an existing folder of that
    id, an older version, is replaced; the host refuses that while the plugin
    runs: ``check(plugin id, folder)`` is called before anything is replaced and
    may raise to refuse). The caller writes ``plugin.json`` into the folder. Raises
    ``PACKAGE_INVALID`` (and leaves nothing behind). Blocking.
    """
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".new-", dir=root))
    try:
        unpacked = staging / "b"
        extract(bundle.archive, unpacked)
        mcpb = load_mcpb_manifest(unpacked)
        _check_entry_point(mcpb, unpacked)
        plugin_id = sanitize_id(mcpb.name)
        present = [name for name in MANIFEST_FILES if os.path.lexists(unpacked / name)]
        if present:
            raise invalid(f"the bundle holds {present[0]}, a name hostd keeps for its own manifest")
        final = root / plugin_id
        if check is not None:
            check(plugin_id, final)
        document = plugin_manifest(
            mcpb,
            final,
            sha256=bundle.sha256,
            signature=bundle.signature,
            signer=bundle.checked.signer,
            source=str(bundle.path),
        )
        _check_generated(document)
        old = root / f".old-{plugin_id}"
        shutil.rmtree(old, ignore_errors=True)
        if final.exists():
            os.replace(final, old)
        os.replace(unpacked, final)
        shutil.rmtree(old, ignore_errors=True)
        return final, document
    finally:
        shutil.rmtree(staging, ignore_errors=True)
