"""The state store: what the user set up, kept across restarts of hostd.

One versioned JSON document, ``state.json``, in the state directory
(``--state-dir``, ``initialize``'s ``stateDir``, or the platform's user state
directory for hostd), holding per installed plugin: its folder, its manifest
digest, the granted permissions, the approved launch digest, whether it is
enabled, its restart count, and the tools the user disabled.

Rules (``docs/protocol.md`` "State"):

- **Atomic writes.** A temporary file in the same folder, ``fsync``, rename
  over the document, ``fsync`` of the folder: a crash at any point leaves
  either the old or the new document, never a mix. A write that fails
  (``ENOSPC``, ``EFBIG``, ``EIO``...) removes its temporary file and raises
  ``OSError`` with the old document in place; the caller keeps memory as it
  was (hostd answers ``STATE_WRITE_FAILED``). Temporary files a killed hostd
  left behind (``.state.json.<pid>.tmp``, ``imported/<id>/.plugin.json.tmp``)
  are removed by :meth:`StateStore.open`, under the lock.
- **Private.** The folder is ``0700``, the document ``0600``.
- **One owner.** An exclusive ``flock`` on ``state.lock``, held for the life
  of the process; a second hostd on the same folder gets :class:`StateLocked`
  (exit code 75, "try again later").
- **Never destroy what it cannot read.** A document from a newer hostd
  (a higher ``version``) raises :class:`StateTooNew` (exit code 78) and is
  left untouched; a corrupt one is moved aside as
  ``state.json.corrupt-<UTC timestamp>`` and reported, never silently
  replaced. Records are read one by one: a record hostd cannot read (a
  string where a list belongs...) is an :class:`UnreadableRecord`, kept
  and written back as it was, its plugin shown ``broken`` with the reason;
  the other records are used as usual.
- **One write discipline** (:func:`write_atomically`) for every file kept
  here: ``state.json``, the secrets file, each plugin's settings.

This module uses only the standard library and orjson, so the lock can be
taken before ``initialize`` is answered without slowing start-up.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

#: The document version this hostd writes; newer ones are refused.
STATE_VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
#: What a hostd learnt by running a process (hostd/storage/facts.py), beside the document.
FACTS_FILE = "facts.json"
#: The files of the folder's top level that :func:`write_atomically` writes (each one's temporary file is
#: ``.<name>.<pid>.tmp`` beside it): a file added here is swept like the others.
TOP_LEVEL_FILES = (STATE_FILE, FACTS_FILE)
#: Temporary names of interrupted writes: ``.<name>.<pid>.tmp`` for each of :data:`TOP_LEVEL_FILES` here,
#: ``.plugin.json.tmp`` in ``imported/<id>/``, any ``*.tmp`` in the folders of the secrets file and of the settings
#: (:data:`TEMPORARY_FOLDERS`: hostd's own, nothing else lives there).
TEMPORARY_FOLDERS = ("secrets", "settings")
#: A plugin id: :data:`hostd.install.manifest_fields.ID_PATTERN` (not imported: this module loads before pydantic).
#: A key of another shape is an unreadable record (uninstall then touches no file named after it).
PLUGIN_ID: re.Pattern[str] = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
MANIFEST_TEMPORARY = ".plugin.json.tmp"

log = logging.getLogger("hostd.storage.state")


class StateError(Exception):
    """The state directory cannot be used; ``exit_code`` is what hostd exits with."""

    exit_code = 78


class StateLocked(StateError):
    """Another hostd holds the state directory's lock (exit code 75)."""

    exit_code = 75


class StateTooNew(StateError):
    """The document was written by a newer hostd; it is left as it is (exit code 78)."""


#: The members of a plugin record's ``limits`` (``plugins/grant``'s ``limits`` in the units hostd enforces).
LIMIT_KEYS = ("max_rss_bytes", "max_cpu_percent", "max_disk_bytes", "max_tools", "max_listing_bytes")


@dataclass
class PluginRecord:
    """One installed plugin as stored (field names are the document's)."""

    path: str
    manifest_digest: str
    granted: list[str] = field(default_factory=list)
    approved_digest: str | None = None
    enabled: bool = False
    restarts: int = 0
    pinned_tools: dict[str, str] | None = None
    network_ports: list[int] = field(default_factory=list)
    limits: dict[str, Any] = field(default_factory=dict)
    #: Network allowlist entries the parent granted (``plugins/grant``'s ``networkHosts``; issue 26), canonical.
    network_hosts: list[str] = field(default_factory=list)
    #: Destinations (``host:port``) the parent let through for good at a ``network/request`` (issue 26).
    network_call_hosts: list[str] = field(default_factory=list)
    #: MCP names of the tools the user disabled (``tools/setEnabled``), sorted.
    disabled_tools: list[str] = field(default_factory=list)
    #: Folders the parent granted (``plugins/grant``'s ``folders``): ``{"read": [...], "write": [...]}``.
    folders: dict[str, list[str]] = field(default_factory=dict)
    #: Paths granted at a tool call with ``always`` (or ``plugins/grantPath``): real path -> ``read`` | ``write``.
    call_grants: dict[str, str] = field(default_factory=dict)
    #: The parent let this plugin take secrets as arguments (``plugins/grant``'s ``secretArguments``).
    secret_arguments: bool = False
    #: The install's identity (hostd/host/installs.py): ``{"id": random hex, "origin": who stands behind it}``.
    install: dict[str, str] = field(default_factory=dict)
    #: Why its last start failed, while it is enabled: ``{"kind", "message", "time"}`` (ISO 8601 UTC) and
    #: the error's ``reason`` when it had one;
    #: None once a start succeeds or it is disabled. A hostd that does not start plugins at start-up
    #: (``hostd serve --no-restore``, hostctl's) shows the plugin ``error`` with this reason (issue 28).
    start_error: dict[str, str] | None = None
    #: The MCP ``serverInfo`` (``name``, ``version``) the server reported at its last successful start, while
    #: it is installed: what an imported script runs, whose manifest version is a placeholder (issue 28).
    server_info: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """The record as stored."""
        return {
            "path": self.path,
            "manifestDigest": self.manifest_digest,
            "granted": sorted(self.granted),
            "approvedDigest": self.approved_digest,
            "enabled": self.enabled,
            "restarts": self.restarts,
            "pinnedTools": self.pinned_tools,
            "networkPorts": sorted(self.network_ports),
            "limits": dict(self.limits),
            "disabledTools": sorted(self.disabled_tools),
            "folders": {k: list(v) for k, v in self.folders.items()},
            **({"secretArguments": True} if self.secret_arguments else {}),
            **({"install": dict(self.install)} if self.install else {}),
            **({"callGrants": dict(sorted(self.call_grants.items()))} if self.call_grants else {}),
            **({"startError": dict(self.start_error)} if self.start_error is not None else {}),
            **({"networkHosts": sorted(self.network_hosts)} if self.network_hosts else {}),
            **({"networkCallHosts": sorted(self.network_call_hosts)} if self.network_call_hosts else {}),
            **({"serverInfo": dict(self.server_info)} if self.server_info is not None else {}),
        }

    @classmethod
    def from_json(cls, value: Any) -> PluginRecord:
        """Parse a stored record; raises :class:`RecordError` (a ``ValueError``) naming the bad field."""
        if not isinstance(value, dict):
            raise RecordError("", "a plugin record must be an object")

        def typed(name: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
            item = value.get(name, default)
            if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
                raise RecordError(name, f"plugin record field {name!r} has the wrong type")
            return item

        pinned = typed("pinnedTools", (dict, type(None)))
        if pinned is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in pinned.items()):
            raise RecordError("pinnedTools", "plugin record field 'pinnedTools' must map strings to strings")
        granted = typed("granted", list, [])
        if not all(isinstance(g, str) for g in granted):
            raise RecordError("granted", "plugin record field 'granted' must hold strings")
        disabled = typed("disabledTools", list, [])
        if not all(isinstance(d, str) for d in disabled):
            raise RecordError("disabledTools", "plugin record field 'disabledTools' must hold strings")
        path = typed("path", str)
        if not os.path.isabs(path) or "\x00" in path:
            raise RecordError("path", "plugin record field 'path' must be an absolute path without NUL")
        return cls(
            path=path,
            manifest_digest=typed("manifestDigest", str),
            granted=list(granted),
            approved_digest=typed("approvedDigest", (str, type(None))),
            enabled=typed("enabled", bool, False),
            restarts=typed("restarts", int, 0),
            pinned_tools=dict(pinned) if pinned is not None else None,
            secret_arguments=typed("secretArguments", bool, False),
            install={
                k: v for k, v in typed("install", dict, {}).items() if k in ("id", "origin") and isinstance(v, str)
            },
            network_ports=[p for p in typed("networkPorts", list, []) if isinstance(p, int)],
            # Kept as stored; the host parses each entry again (hostd.net.allowlist) and drops what fails.
            network_hosts=[h for h in typed("networkHosts", list, []) if isinstance(h, str)],
            network_call_hosts=[h for h in typed("networkCallHosts", list, []) if isinstance(h, str)],
            limits={
                k: v for k, v in typed("limits", dict, {}).items() if k in LIMIT_KEYS and isinstance(v, int | float)
            },
            disabled_tools=sorted(disabled),
            folders={
                k: [f for f in v if isinstance(f, str)]
                for k, v in typed("folders", dict, {}).items()
                if k in ("read", "write") and isinstance(v, list)
            },
            call_grants={
                k: v
                for k, v in typed("callGrants", dict, {}).items()
                if isinstance(k, str) and os.path.isabs(k) and "\x00" not in k and v in ("read", "write")
            },
            start_error=_start_error(value.get("startError")),
            server_info=_server_info(value.get("serverInfo")),
        )


#: Bound of a recorded start failure's ``message``, in characters (the rest is cut: it is a plugin's text).
START_ERROR_CHARS = 2000

#: Bound of a recorded ``serverInfo`` ``name`` and ``version``, in characters (the server's text).
SERVER_INFO_CHARS = 200


def _server_info(value: Any) -> dict[str, str] | None:
    """A stored ``serverInfo``: ``name`` and ``version`` as strings of at most :data:`SERVER_INFO_CHARS`, else
    None (a malformed one is dropped, never a broken record: the document is attacker input, as in
    :func:`_start_error`)."""
    if not isinstance(value, dict):
        return None
    name, version = value.get("name"), value.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return None
    return {"name": name[:SERVER_INFO_CHARS], "version": version[:SERVER_INFO_CHARS]}


def _start_error(value: Any) -> dict[str, str] | None:
    """A stored ``startError``: ``kind``, ``message`` and ``time`` as strings (cut to bounds), else None.

    The class: a field of the document is attacker input (the file may be edited or damaged); a malformed
    reason is dropped (the plugin shows ``stopped``, as if no start had failed), never a broken record.
    """
    if not isinstance(value, dict):
        return None
    fields = {name: value.get(name) for name in ("kind", "message", "time")}
    if not all(isinstance(item, str) for item in fields.values()):
        return None
    found = {
        "kind": str(fields["kind"])[:64],
        "message": str(fields["message"])[:START_ERROR_CHARS],
        "time": str(fields["time"])[:40],
    }
    if isinstance(value.get("reason"), str):
        found["reason"] = value["reason"][:START_ERROR_CHARS]
    return found


class RecordError(ValueError):
    """A stored plugin record hostd cannot read; ``field`` names the member (``""``: the record itself)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class UnreadableRecord:
    """A stored plugin record hostd cannot read: kept and written back exactly as it was found.

    ``raw`` is the record's JSON value, ``field`` the member at fault (``""``: the record itself),
    ``reason`` why. Its plugin is shown ``broken`` until the record is fixed or the plugin uninstalled.
    """

    raw: Any
    field: str
    reason: str

    def to_json(self) -> Any:
        """The record as found."""
        return self.raw

    @property
    def path(self) -> str | None:
        """The plugin folder the record names, when it names one as text."""
        value = self.raw.get("path") if isinstance(self.raw, dict) else None
        return value if isinstance(value, str) else None


#: What the document holds for one plugin.
StoredRecord = PluginRecord | UnreadableRecord


@dataclass
class OpenedState:
    """What :meth:`StateStore.open` found: the records (readable or not) and anything worth reporting."""

    plugins: dict[str, StoredRecord]
    warnings: list[str]


class StateStore:
    """The state document in ``directory`` and its lock.

    :meth:`open` takes the lock and reads; :meth:`save` writes atomically;
    :meth:`close` releases the lock. All methods block (call them from a
    worker thread in async code); each is fast (one small file).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE
        self._lock_fd: int | None = None

    def lock(self) -> None:
        """Create the folder (0700) and take the exclusive lock.

        Raises :class:`StateLocked` when another process holds it, and
        :class:`StateError` when the folder cannot be created or used.
        """
        if self._lock_fd is not None:
            return
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(PermissionError):
                os.chmod(self.directory, 0o700)
            fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StateError(f"state directory {self.directory} cannot be used: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StateLocked(
                f"state directory {self.directory} is in use by another hostd (pid {_lock_owner(self.directory)})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def open(self) -> OpenedState:
        """Take the lock (if not yet held) and read the document.

        A missing document is an empty state. Raises :class:`StateTooNew`
        for a newer version; moves a corrupt document aside and reports it in
        ``warnings``. Removes the temporary files of writes a previous hostd
        did not finish (reported in ``warnings``).
        """
        self.lock()
        warnings = self._remove_stale_temporaries()
        try:
            plugins = self._read()
        except StateTooNew:
            raise
        except ValueError as exc:
            aside = move_aside(self.path)
            warnings.append(f"{self.path} was corrupt ({exc}); moved aside to {aside.name}")
            return OpenedState(plugins={}, warnings=warnings)
        return OpenedState(plugins=plugins, warnings=warnings)

    def _read(self) -> dict[str, StoredRecord]:
        """The records of the document (none when it is missing), each readable or not (:class:`UnreadableRecord`).

        Raises :class:`StateTooNew` for a newer version, ``ValueError`` for a corrupt document (the caller
        decides what to do with it), :class:`StateError` when it cannot be read. Writes nothing.
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror}") from None
        document = orjson.loads(raw)
        if not isinstance(document, dict):
            raise ValueError("the document is not an object")
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError("the document has no integer 'version'")
        if version > STATE_VERSION:
            raise StateTooNew(
                f"{self.path} was written by a newer hostd (version {version}; this one reads up to "
                f"{STATE_VERSION}); it is left untouched"
            )
        plugins_raw = document.get("plugins", {})
        if not isinstance(plugins_raw, dict):
            raise ValueError("'plugins' is not an object")
        plugins: dict[str, StoredRecord] = {}
        for key, value in plugins_raw.items():
            try:
                if not PLUGIN_ID.fullmatch(key):
                    raise RecordError("", "the key is not a plugin id")
                plugins[key] = PluginRecord.from_json(value)
            except RecordError as exc:  # this record only: the others are used as usual
                plugins[key] = UnreadableRecord(raw=value, field=exc.field, reason=str(exc))
        return plugins

    def _remove_stale_temporaries(self) -> list[str]:
        """Remove what interrupted writes left (we hold the lock: no write is under way)."""
        stale: list[Path] = []
        with contextlib.suppress(OSError):
            prefixes = tuple(f".{name}." for name in TOP_LEVEL_FILES)
            stale += [e for e in self.directory.iterdir() if e.name.startswith(prefixes) and e.name.endswith(".tmp")]
        with contextlib.suppress(OSError):
            stale += [p for p in (self.directory / "imported").glob(f"*/{MANIFEST_TEMPORARY}")]
        for folder in TEMPORARY_FOLDERS:
            with contextlib.suppress(OSError):
                stale += [e for e in (self.directory / folder).iterdir() if e.name.endswith(".tmp")]
        removed = []
        for path in stale:
            with contextlib.suppress(OSError):
                if path.is_symlink() or path.is_file():
                    path.unlink()
                    removed.append(str(path.relative_to(self.directory)))
        if not removed:
            return []
        return [f"removed {len(removed)} temporary file(s) of interrupted state writes: {', '.join(sorted(removed))}"]

    def save(self, plugins: Mapping[str, StoredRecord]) -> None:
        """Write the document atomically (:func:`write_atomically`); unreadable records as they were found.

        Raises ``OSError`` (``ENOSPC``, ``EFBIG``, ``EDQUOT``, ``EIO``...) when the new
        document could not be put in place: the old one is then untouched
        and the temporary file removed. Once the rename is done the new
        document is the one a restart reads, so a failing ``fsync`` of the
        folder after it is only logged.
        """
        document = {
            "version": STATE_VERSION,
            "plugins": {k: plugins[k].to_json() for k in sorted(plugins)},
        }
        data = orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
        write_atomically(self.path, data)

    def close(self) -> None:
        """Release the lock."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


class StateNeedsRepair(StateError):
    """What a :class:`ReadOnlyStateStore` found that only a hostd holding the lock may handle (a corrupt document,
    which it moves aside): the reader leaves it to one."""


class ReadOnlyStateStore(StateStore):
    """The state document read as it is, by a process that does not own the folder (``hostctl``'s reading
    commands, issue 28): no lock taken (a hostd starting meanwhile is not refused), nothing written, removed
    or moved aside.

    :meth:`open` reads the records with the very checks of :meth:`StateStore.open`; where that one would
    change the folder (a corrupt document moved aside) it raises :class:`StateNeedsRepair` instead. Temporary
    files of interrupted writes are left alone: they are never read (the document is replaced by a rename),
    and a hostd removes them under its lock. :meth:`save` keeps nothing: what a hostd decides to write
    (a start failure it saw) is written by the hostd that runs the plugin, never by a reader.
    """

    def lock(self) -> None:
        """Take nothing: a reader holds no lock."""

    def open(self) -> OpenedState:
        """The records as :meth:`StateStore.open` reads them (no warnings: nothing was changed).

        Raises :class:`StateTooNew`, :class:`StateError` as that one does, and :class:`StateNeedsRepair` for a
        corrupt document (left as it is).
        """
        try:
            return OpenedState(plugins=self._read(), warnings=[])
        except StateTooNew:
            raise
        except ValueError as exc:
            raise StateNeedsRepair(f"{self.path} is corrupt ({exc})") from None

    def save(self, plugins: Mapping[str, StoredRecord]) -> None:
        """Write nothing (see the class)."""


def temporary_name(path: Path) -> Path:
    """Where :func:`write_atomically` writes ``path``'s next content first: ``.<name>.<pid>.tmp`` beside it."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path``'s content with ``data`` so that a crash leaves the old or the new one, never a mix.

    The one write discipline of every file hostd keeps in its state folder (``state.json``, the
    secrets file, each plugin's settings): a temporary file beside ``path`` (:func:`temporary_name`,
    opened ``O_NOFOLLOW``, mode ``mode``), every byte written (a loop over short writes), ``fsync``,
    rename over ``path``, ``fsync`` of the folder. Blocking; ``data`` is bytes, ``mode`` Unix bits.

    Raises ``OSError`` (``ENOSPC``, ``EFBIG``, ``EDQUOT``, ``EIO``...) when the new content could not be
    put in place: ``path`` is then untouched and the temporary file removed (cancellation cannot
    interrupt it: it runs in a worker thread). Once the rename is done the new content is what a
    restart reads, so a failing ``fsync`` of the folder after it is only logged. Temporary files a
    killed hostd left behind are removed by :meth:`StateStore.open`.
    """
    temporary = temporary_name(path)
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        log.warning("%s was replaced, but fsync of its folder failed: %s", path, exc.strerror)


def move_aside(path: Path) -> Path:
    """Rename a damaged ``path`` to ``<name>.corrupt-<UTC time>`` beside it (never over another); return the new path.

    Raises ``OSError`` when the rename fails (the file then stays where it is).
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    serial = 1
    while aside.exists() or aside.is_symlink():
        serial += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{serial}")
    os.rename(path, aside)
    return aside


def _lock_owner(directory: Path) -> str:
    try:
        return (directory / LOCK_FILE).read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def default_state_dir() -> Path:
    """The platform's user state directory for hostd (``platformdirs``)."""
    import platformdirs  # noqa: PLC0415  (light, but only needed without --state-dir)

    return Path(platformdirs.user_state_dir("hostd"))
