"""Secrets and user settings of plugins, kept out of manifests, state and logs.

Theory of operation
-------------------
A manifest never holds a secret value. Where a value is secret, the manifest
holds a *reference*, ``"${secret:NAME}"``, as a whole ``backend.env`` value
or a whole or partial ``backend.args`` word; the value lives in a
:class:`SecretStore` under ``(owner, NAME)``, where the owner is the plugin's
*install* (:func:`install_key`: ``<plugin id>#<install id>``,
hostd/host/installs.py), not its id: a bundle by another author that later
takes the same id has another install and never receives them (issue 25,
over-granting 3). A file written before (keyed by plugin id) is migrated once
at hostd's start (:meth:`SecretStore.migrate`), nothing lost:

- the OS keyring (the ``keyring`` package, optional: ``pip install
  'hostd[secrets]'``) when it has a usable backend, i.e. not one of its
  ``fail`` / ``null`` backends (a headless Linux without a Secret Service
  gets ``fail``);
- otherwise one file, ``<state>/secrets/secrets.json``, mode ``0600`` in a
  ``0700`` folder, apart from ``state.json`` and every manifest.

``HOSTD_SECRETS=file|keyring|auto`` (default ``auto``) forces a backend; with
``keyring`` the file still records which names are set (values ``null``), since
a keyring cannot list its entries.

The class of leak this module closes: a secret value reaching any place that
is shown, logged or written in plain text (``plugin.json``, ``state.json``,
``launch`` in ``PluginInfo`` and in errors, log lines). So values cross
exactly one boundary: :func:`inject` replaces the references in a resolved
launch just before it is spawned. The launch that is approved, shown and
digested keeps the references (a rotated token does not void the approval);
errors name a missing secret by its NAME only.

Non-secret user settings (an MCPB bundle's ``user_config`` values that are
not ``sensitive``) are kept per plugin in ``<state>/settings/<id>.json``
(:func:`load_settings`, :func:`save_settings`); they are substituted into the
launch before it is resolved, so the approved launch shows them.

Which values are secret: an ``env`` name that looks secret
(:func:`sandbox.environment.is_secret_name`), a name the user marks, a
registry variable with ``isSecret``, a bundle option with ``sensitive``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from hostd.storage.state import move_aside, write_atomically
from hostd.wire.errors import ErrorKind, HostError
from sandbox.environment import is_secret_name

if TYPE_CHECKING:  # a launch's secrets are filled by a start; hostctl's checkup reads the store without one
    from sandbox.launch import Launch

__all__ = [
    "SECRET_REF",
    "Applied",
    "SecretStore",
    "apply_settings",
    "check_value",
    "effective_values",
    "host_variables",
    "inject",
    "install_key",
    "load_settings",
    "references",
    "save_settings",
    "secret_file_ref",
    "secret_ref",
    "split_secrets",
    "update_settings",
]

SECRET_REF: Final = re.compile(r"\$\{secret:([A-Za-z_][A-Za-z0-9_.-]{0,127})(:file)?\}")
"""A reference to a stored secret: ``${secret:NAME}`` (the value itself) or ``${secret:NAME:file}`` (the path of
a ``0600`` file holding it, :func:`inject`); group 1 is NAME, group 2 ``":file"`` or ``None``."""

#: The name of a secret's file in the plugin's TMPDIR: ``hostd-secret-<NAME>``.
SECRET_FILE_PREFIX: Final = "hostd-secret-"

SECRETS_FOLDER: Final = "secrets"
SETTINGS_FOLDER: Final = "settings"
_FILE: Final = "secrets.json"
_SERVICE_PREFIX: Final = "hostd:"
#: One writer at a time for the store file and the settings files (configure and import run in worker threads);
#: re-entrant: a write reads first, and a read that meets a damaged file moves it aside under the same lock.
_WRITE_LOCK: Final = threading.RLock()
log = logging.getLogger(__name__)

#: Told about a damaged file moved aside: ``report(plugin_id or None, message)``; may be called from any thread.
Report = Callable[[str | None, str], None]


def _log_report(plugin_id: str | None, message: str) -> None:
    log.error("%s", message)


# Damaged or unreadable files of the state folder (the class: a file hostd keeps for the user that it can
# no longer use). Unreadable (EACCES, EISDIR, ELOOP, EIO...): only the requests and plugins that need the
# file fail, with STATE_FILE_UNREADABLE naming it, and the file is left as it is. Damaged (not UTF-8 JSON,
# or of the wrong shape): moved aside as <name>.corrupt-<UTC time> (kept, never overwritten), what could be
# read of it is kept in place, and the parent is told (plugins/log, hostd doctor lists what lies aside).


def unreadable(path: Path, exc: OSError, what: str, plugin_id: str | None = None) -> HostError:
    """``STATE_FILE_UNREADABLE`` for ``path`` (``what``: "the secrets file", ...), which ``exc`` could not read."""
    code = errno.errorcode.get(exc.errno or 0, "EIO")
    data: dict[str, Any] = {"path": str(path), "errno": code}
    if plugin_id is not None:
        data["plugin"] = plugin_id
    return HostError(
        ErrorKind.STATE_FILE_UNREADABLE,
        f"cannot read {what} {path}: {exc.strerror or code}; make it a file you can read and write "
        "(mode 0600) or move it away, then retry",
        **data,
    )


def install_key(plugin_id: str, install_id: str) -> str:
    """The secret store's owner key of one install: ``"<plugin id>#<install id>"`` (``#`` is never in an id,
    ``^[a-z0-9][a-z0-9-]{0,62}$``, so a key written before installs, a bare id, never equals one)."""
    return f"{plugin_id}#{install_id}"


#: The owner of secrets found under a bare plugin id no installed plugin has, at migration: kept, given to
#: no later install (whose install id is random hex, never this word).
UNCLAIMED: Final = "unclaimed"


def secret_ref(name: str) -> str:
    """The manifest text that refers to the secret ``name``: ``"${secret:NAME}"``."""
    return "${secret:" + name + "}"


def references(words: Iterable[str], *, channel: str | None = None) -> set[str]:
    """The secret NAMEs referred to in ``words`` (env values, args): all of them, or with ``channel``
    ``"value"`` only the ``${secret:NAME}`` ones, with ``"file"`` only the ``${secret:NAME:file}`` ones."""
    return {
        match.group(1)
        for word in words
        for match in SECRET_REF.finditer(word)
        if channel is None or (match.group(2) is not None) == (channel == "file")
    }


def secret_file_ref(name: str) -> str:
    """The manifest text that hands the secret ``name`` to the plugin as a file: ``"${secret:NAME:file}"``."""
    return "${secret:" + name + ":file}"


def remote_references(headers: Mapping[str, str], client_secret: str | None) -> set[str]:
    """The secret NAMEs a remote backend refers to: in header values and ``backend.oauth.client_secret``.

    These are resolved when hostd connects (hostd/mcp/transport/http.py), not at spawn, but they are the
    plugin's secrets like those in ``args``/``env``: settable with ``plugins/configure`` and listed
    as missing until set. (Bug class: a place that may hold ``${secret:NAME}`` left out of the list
    of referenced names, so ``plugins/configure`` refused the name as "not a setting".)
    """
    return references([*headers.values(), *([client_secret] if client_secret else [])])


def split_secrets(env: Mapping[str, str], marked: Collection[str] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """Split an ``env`` table into ``(env with references, {name: secret value})``.

    A variable is secret when :func:`is_secret_name` says so or its name is in
    ``marked``. An empty value, or one that already is a reference, stays as
    it is. Pure: stores nothing.
    """
    kept: dict[str, str] = {}
    secrets: dict[str, str] = {}
    for name, value in env.items():
        if value and (is_secret_name(name) or name in marked) and not SECRET_REF.fullmatch(value):
            secrets[name] = value
            kept[name] = secret_ref(name)
        else:
            kept[name] = value
    return kept, secrets


def inject(launch: Launch, lookup: Callable[[str], str | None], plugin_id: str) -> Launch:
    """``launch`` with every ``${secret:NAME}`` in its ``env`` and ``args`` replaced by the value, and every
    ``${secret:NAME:file}`` by the path of a file holding it.

    The file channel (issue 25, "Secrets never travel in argv"): a value a server can only take on its
    command line (``--token-file PATH``) or from a file an env variable names. The path is
    ``<TMPDIR>/hostd-secret-<NAME>`` in the plugin's private TMPDIR (``launch.plan.tmpdir``); the result's
    ``secret_files`` lists ``(path, value)``, which the spawn writes ``0600`` before every start
    (:func:`sandbox.paths.write_private_file`) and the TMPDIR's emptying removes when the plugin stops.
    Only the path reaches ``/proc/<pid>/cmdline``. ``SECRET_FILE_UNAVAILABLE`` when the launch has no
    private TMPDIR (hostd runs without a state folder).

    ``lookup(NAME)`` gives the value or ``None``. The result is only for
    spawning: never show, log or persist it (its ``describe()`` would show
    the values). Raises ``CONFIG_REQUIRED`` (``data.missing``: the NAMEs not
    set, sorted) when a referenced secret has no value; the message names
    them and ``plugins/configure``. A launch without references is returned
    unchanged.
    """
    wanted = references([*launch.args, *launch.env.values()])
    if not wanted:
        return launch
    values = {name: lookup(name) for name in sorted(wanted)}
    missing = [name for name, value in values.items() if value is None]
    if missing:
        raise HostError(
            ErrorKind.CONFIG_REQUIRED,
            f"plugin {plugin_id} needs secrets that are not set: {', '.join(missing)}; set them with plugins/configure",
            plugin=plugin_id,
            missing=missing,
        )

    as_files = references([*launch.args, *launch.env.values()], channel="file")
    tmpdir = launch.plan.tmpdir if launch.plan is not None else ""
    if as_files and not tmpdir:
        raise HostError(
            ErrorKind.SECRET_FILE_UNAVAILABLE,
            f"plugin {plugin_id} takes the secrets {', '.join(sorted(as_files))} as files, but has no private "
            "folder to hold them (hostd runs without a state folder): run hostd with --state-dir",
            plugin=plugin_id,
            secrets=sorted(as_files),
        )
    paths = {name: os.path.join(tmpdir, SECRET_FILE_PREFIX + name) for name in sorted(as_files)}

    def fill(word: str) -> str:
        return SECRET_REF.sub(lambda m: paths[m.group(1)] if m.group(2) else values[m.group(1)] or "", word)

    return dataclasses.replace(
        launch,
        args=tuple(fill(a) for a in launch.args),
        env={k: fill(v) for k, v in launch.env.items()},
        secret_files=tuple((path, values[name] or "") for name, path in paths.items()),
    )


class SecretStore:
    """The secret values of every plugin of one state folder.

    ``directory`` is the state folder. Blocking (file or keyring I/O): call
    from a worker thread in async code. Values are ``str``. Raises
    ``OSError`` when the file cannot be written (:func:`hostd.storage.state.write_atomically`:
    the old file stays), ``STATE_FILE_UNREADABLE`` when it cannot be read.
    """

    def __init__(self, directory: Path, backend: str | None = None, report: Report = _log_report) -> None:
        #: Told when a damaged file was moved aside (from the thread that found it).
        self.report = report
        self.folder = directory / SECRETS_FOLDER
        self.path = self.folder / _FILE
        self._service = _SERVICE_PREFIX + os.path.realpath(directory)
        choice = backend or os.environ.get("HOSTD_SECRETS", "auto")
        self._keyring: Any = usable_keyring() if choice in ("auto", "keyring") else None
        if choice == "keyring" and self._keyring is None:
            raise HostError(ErrorKind.STATE_UNUSABLE, "HOSTD_SECRETS=keyring, but no usable keyring backend")

    @property
    def backend(self) -> str:
        """``"keyring"`` or ``"file"``: where values are kept."""
        return "keyring" if self._keyring is not None else "file"

    def _read(self) -> dict[str, dict[str, str | None]]:
        """``{plugin id: {NAME: value or None}}`` as stored; ``{}`` when there is no file.

        Raises ``STATE_FILE_UNREADABLE`` when the file cannot be read (left as it is). A damaged
        file is moved aside (:func:`hostd.storage.state.move_aside`), what could be read of it is written
        back, and :attr:`report` is told; never overwritten.
        """
        with _WRITE_LOCK:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return {}
            except OSError as exc:
                raise unreadable(self.path, exc, "the secrets file") from None
            plugins, problem = parse_store(raw)
            if problem is None:
                return plugins
            try:
                aside = move_aside(self.path)
            except OSError as exc:
                raise unreadable(self.path, exc, "the damaged secrets file (it cannot be moved aside)") from None
            kept = ""
            if plugins:
                try:
                    self._write(plugins)
                    kept = f"; the readable secrets of {', '.join(sorted(plugins))} are kept"
                except OSError as exc:
                    kept = f"; writing its readable part back failed ({exc.strerror}): set them again"
                    plugins = {}
            self.report(
                None,
                f"the secrets file {self.path} was damaged ({problem}): moved aside to {aside.name}, kept as it "
                f"was{kept}; set what is missing again with plugins/configure",
            )
            return plugins

    def check(self) -> str | None:
        """Read the file once (hostd's start): a damaged one is moved aside and reported now.

        Returns why the file cannot be read (the message of ``STATE_FILE_UNREADABLE``), or ``None``.
        Never raises for the file's sake.
        """
        try:
            self._read()
        except HostError as error:
            return error.message
        return None

    def _write(self, plugins: dict[str, dict[str, str | None]]) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        blob = json.dumps({"backend": self.backend, "plugins": plugins}, sort_keys=True, indent=1).encode()
        write_atomically(self.path, blob)

    def names(self, plugin_id: str) -> list[str]:
        """The NAMEs set for the owner ``plugin_id`` (an :func:`install_key`), sorted."""
        return sorted(self._read().get(plugin_id, {}))

    def get(self, plugin_id: str, name: str) -> str | None:
        """The value of ``name`` for the owner ``plugin_id`` (an :func:`install_key`), or ``None`` when not set."""
        entry = self._read().get(plugin_id, {})
        if name not in entry:
            return None
        if self._keyring is not None:
            try:
                value = self._keyring.get_password(self._service, f"{plugin_id}/{name}")
            except Exception as exc:  # a locked or vanished keyring: say so, name only the secret
                raise HostError(
                    ErrorKind.CONFIG_REQUIRED,
                    f"the keyring did not give the secret {name} of {plugin_id}: {type(exc).__name__}",
                    plugin=plugin_id,
                    missing=[name],
                ) from None
            return value if isinstance(value, str) else None
        return entry[name]

    def set(self, plugin_id: str, name: str, value: str | None) -> None:
        """Store ``value`` for ``(plugin_id, name)``; ``None`` deletes it."""
        with _WRITE_LOCK:
            self._set(plugin_id, name, value)

    def _set(self, plugin_id: str, name: str, value: str | None) -> None:
        plugins = self._read()
        entry = plugins.setdefault(plugin_id, {})
        if value is None:
            entry.pop(name, None)
            if self._keyring is not None:
                with contextlib.suppress(Exception):
                    self._keyring.delete_password(self._service, f"{plugin_id}/{name}")
        elif self._keyring is not None:
            self._keyring.set_password(self._service, f"{plugin_id}/{name}", value)
            entry[name] = None
        else:
            entry[name] = value
        if not entry:
            plugins.pop(plugin_id, None)
        self._write(plugins)

    def drop(self, plugin_id: str) -> None:
        """Forget every secret of the owner ``plugin_id`` (an :func:`install_key`)."""
        for name in self.names(plugin_id):
            self.set(plugin_id, name, None)

    def move(self, source: str, target: str) -> list[str]:
        """Give every secret of the owner ``source`` to ``target`` (an adopted install: kept data and its
        secrets go on together); ``target``'s own values of the same NAMEs win. Returns the NAMEs moved,
        sorted. Each value is written under ``target`` before it is removed from ``source``: a failure
        half-way loses nothing (``OSError``, ``STATE_FILE_UNREADABLE`` raised as :meth:`set` does)."""
        moved: list[str] = []
        with _WRITE_LOCK:
            mine = set(self.names(target))
            for name in self.names(source):
                if name in mine:
                    self._set(source, name, None)
                    continue
                value = self.get(source, name)
                if value is None:
                    continue  # a keyring that lost the value: the name stays where it is
                self._set(target, name, value)
                self._set(source, name, None)
                moved.append(name)
        return moved

    def migrate(self, owners: Mapping[str, str]) -> dict[str, str]:
        """Key a store written before installs (``{plugin id: {NAME: value}}``) by install, once, losing nothing.

        ``owners``: each installed plugin's id -> its :func:`install_key`. Every bare id in the store goes to
        its plugin's install; one no plugin has goes to ``<id>#unclaimed`` (:data:`UNCLAIMED`), kept but
        given to no later install of the same id. Returns ``{bare id: owner}`` for what was moved. A keyring's
        values move with their names (written under the new owner first). Raises as :meth:`set` does; a
        damaged file is moved aside by the read, never overwritten (:meth:`_read`).
        """
        done: dict[str, str] = {}
        with _WRITE_LOCK:
            for key in sorted(self._read()):
                if "#" not in key:
                    target = owners.get(key) or install_key(key, UNCLAIMED)
                    self.move(key, target)
                    done[key] = target
        return done


def usable_keyring() -> Any:
    """The ``keyring`` module when installed with a usable backend, else ``None``.

    Usable: a backend other than keyring's fail or null one, or a chainer with at least one
    backend. Shared by the plugin secrets and the OAuth credential store (hostd.remote.oauth), so both
    choose the same store. Never raises: a broken keyring configuration counts as none.
    """
    try:
        import keyring  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 - optional
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:
        return None
    module = type(backend).__module__
    if module.startswith(("keyring.backends.fail", "keyring.backends.null")):
        return None
    if module.startswith("keyring.backends.chainer") and not getattr(backend, "backends", None):
        return None
    return keyring


def _settings_path(directory: Path, plugin_id: str) -> Path:
    return directory / SETTINGS_FOLDER / f"{plugin_id}.json"


def load_settings(directory: Path, plugin_id: str, report: Report = _log_report) -> dict[str, Any]:
    """The non-secret settings of ``plugin_id`` (``{name: value}``), ``{}`` when none.

    Raises ``STATE_FILE_UNREADABLE`` when the file cannot be read (left as it is). A damaged one
    (not a JSON object) is moved aside as ``<id>.json.corrupt-<UTC time>``, ``report`` is told, and
    the plugin has no settings until they are set again.
    """
    path = _settings_path(directory, plugin_id)
    with _WRITE_LOCK:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise unreadable(path, exc, f"the settings of {plugin_id}", plugin_id) from None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            problem = damage(exc)
        else:
            return data
        try:
            aside = move_aside(path)
        except OSError as exc:
            raise unreadable(path, exc, f"the damaged settings of {plugin_id} (they cannot be moved aside)") from None
        report(
            plugin_id,
            f"the settings of {plugin_id} ({path}) were damaged ({problem}): moved aside to {aside.name}, kept as "
            "they were; set them again with plugins/configure",
        )
        return {}


def save_settings(directory: Path, plugin_id: str, values: Mapping[str, Any]) -> None:
    """Write ``values`` as ``plugin_id``'s settings (:func:`hostd.storage.state.write_atomically`, 0600).

    Empty ``values`` remove the file."""
    with _WRITE_LOCK:
        _save_settings(_settings_path(directory, plugin_id), values)


def update_settings(directory: Path, plugin_id: str, changes: Mapping[str, Any], report: Report = _log_report) -> None:
    """Apply ``changes`` (name -> value, ``None`` removes) to ``plugin_id``'s settings, as one step.

    Raises as :func:`load_settings` does (a damaged file is moved aside first, never overwritten),
    and ``OSError`` when the new file cannot be written (the old one stays).
    """
    with _WRITE_LOCK:
        values = load_settings(directory, plugin_id, report)
        for name, value in changes.items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        _save_settings(_settings_path(directory, plugin_id), values)


def _save_settings(path: Path, values: Mapping[str, Any]) -> None:
    if not values:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(path, json.dumps(dict(values), sort_keys=True, indent=1).encode())


def damage(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8"
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc)


def parse_store(raw: bytes) -> tuple[dict[str, dict[str, str | None]], str | None]:
    """The secrets file's ``{plugin id: {NAME: value or None}}`` and why it is damaged (``None``: it is not).

    A damaged file gives what of it is well formed: each plugin's entry that is an object of
    strings (or nulls) to strings (or nulls).
    """
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return {}, damage(exc)
    if not isinstance(data, dict):
        return {}, "not a JSON object"
    plugins = data.get("plugins", {})
    if not isinstance(plugins, dict):
        return {}, "'plugins' is not an object"
    good: dict[str, dict[str, str | None]] = {}
    bad: list[str] = []
    for plugin_id, entry in plugins.items():
        if isinstance(entry, dict) and all(isinstance(v, str | None) for v in entry.values()):
            good[plugin_id] = dict(entry)
        else:
            bad.append(plugin_id)
    if bad:
        return good, f"the entries of {', '.join(sorted(bad))} are not objects of strings"
    return good, None


# -- user_config values -------------------------------------------------------------------------

_SETTING_REF: Final = re.compile(
    r"\$\{(user_config\.[A-Za-z_][A-Za-z0-9_]*|HOME|DESKTOP|DOCUMENTS|DOWNLOADS|/|pathSeparator)(:file)?\}"
)
"""``${user_config.X}``, ``${user_config.X:file}`` (a ``sensitive`` X handed over as a ``0600`` file:
``${secret:X:file}``) and the MCPB host variables; group 2 is ``":file"`` or ``None``."""


def host_variables(home: str) -> dict[str, str]:
    """The values of the MCPB host variables (``${HOME}``, ``${DESKTOP}``, ``${/}``...) for ``home``."""
    return {
        "HOME": home,
        "DESKTOP": os.path.join(home, "Desktop"),
        "DOCUMENTS": os.path.join(home, "Documents"),
        "DOWNLOADS": os.path.join(home, "Downloads"),
        "/": os.sep,
        "pathSeparator": os.sep,
    }


@dataclasses.dataclass(frozen=True)
class Applied:
    """A backend with its settings substituted (:func:`apply_settings`)."""

    command: str
    args: list[str]
    env: dict[str, str]
    read: list[str]
    write: list[str]
    missing: list[str]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    return str(value)


def effective_values(options: Mapping[str, Any], settings: Mapping[str, Any], home: str) -> dict[str, Any]:
    """Each non-sensitive option's value: the one set, else its default (host variables expanded), else ``None``."""
    variables = host_variables(home)

    def expand(value: Any) -> Any:
        if isinstance(value, str):
            return _SETTING_REF.sub(lambda m: variables.get(m.group(1), m.group(0)), value)
        if isinstance(value, list):
            return [expand(v) for v in value]
        return value

    return {
        name: (settings[name] if name in settings else expand(option.default))
        for name, option in options.items()
        if not option.sensitive
    }


def apply_settings(
    command: str,
    *,
    args: Iterable[str],
    env: Mapping[str, str],
    options: Mapping[str, Any],
    settings: Mapping[str, Any],
    secret_names: Collection[str],
    home: str,
    expand_host_variables: bool = True,
) -> Applied:
    """Substitute ``${user_config.X}`` and the host variables into a backend, without a shell.

    ``options``: the manifest's ``user_config`` (name -> :class:`~hostd.install.manifest.UserConfigOption`);
    ``settings``: the values set (non-sensitive); ``secret_names``: the secrets stored. An argument
    that is exactly ``${user_config.X}`` with a list value becomes one argument per item, and is
    dropped when X has no value; inside a longer word a list is joined with ``,``. ``read`` /
    ``write``: the ``file`` / ``directory`` values (to be granted). ``missing``: the required
    options with no value (sensitive ones: not stored), sorted. Pure.

    A ``${user_config.X}`` of a ``sensitive`` X becomes ``${secret:X}`` (filled in only at
    spawn, :func:`inject`), and ``${user_config.X:file}`` becomes ``${secret:X:file}`` (the path of a
    ``0600`` file holding the value, for a server that reads a token from a file its argument or env
    names); ``:file`` on a non-sensitive X gives its value as text. One of an undeclared X is left as it
    is. The host variables (``${HOME}``...) are expanded only with ``expand_host_variables`` (manifests hostd
    generated from bundles and registry entries; a hand-written manifest's words are kept).
    """
    variables = host_variables(home) if expand_host_variables else {}
    values = effective_values(options, settings, home)

    def word(text: str) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("user_config."):
                key = name.removeprefix("user_config.")
                if key not in options:
                    return match.group(0)
                if options[key].sensitive:
                    return secret_file_ref(key) if match.group(2) else secret_ref(key)
                value = values.get(key)
                return "" if value is None else _text(value)
            return variables.get(name, match.group(0)) if not match.group(2) else match.group(0)

        return _SETTING_REF.sub(replace, text)

    out_args: list[str] = []
    for arg in args:
        whole = _SETTING_REF.fullmatch(arg)
        key = whole.group(1).removeprefix("user_config.") if whole is not None else ""
        if whole is not None and whole.group(1).startswith("user_config.") and key in values:
            value = values[key]
            if isinstance(value, list):
                out_args += [_text(v) for v in value]
            elif value is not None:
                out_args.append(_text(value))
            continue
        out_args.append(word(arg))
    read: list[str] = []
    write: list[str] = []
    missing: list[str] = []
    for name, option in options.items():
        if option.sensitive:
            if option.required and name not in secret_names:
                missing.append(name)
            continue
        value = values.get(name)
        if value is None or value in ([], ""):
            if option.required:
                missing.append(name)
            continue
        if option.type in ("directory", "file"):
            paths = [os.path.expanduser(str(v)) for v in (value if isinstance(value, list) else [value])]
            (write if option.type == "directory" else read).extend(p for p in paths if os.path.isabs(p))
    return Applied(
        command=word(command),
        args=out_args,
        env={k: word(v) for k, v in env.items()},
        read=read,
        write=write,
        missing=sorted(missing),
    )


def check_secret(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the secret ``name`` a manifest refers to (``${secret:NAME}``), or ``None``.

    The class (issue 31): text that cannot reach a process, refused where it enters rather than when a plugin
    starts. A secret lands in an argument or an environment variable, where a NUL ends the C string (``execve``
    refuses it); :func:`check_value` holds ``user_config`` values to the same rule.
    """
    if not isinstance(value, str):
        return f"{name}: a secret is a string"
    if "\x00" in value:
        return f"{name}: must not contain a NUL character"
    return None


def check_value(name: str, option: Any, value: Any) -> str | None:
    """Why ``value`` does not fit ``option`` (a :class:`~hostd.install.manifest.UserConfigOption`), or ``None``."""
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and not option.multiple:
        return f"{name}: a single value is expected, not a list"
    for item in items:
        kind = option.type
        if kind == "boolean" and not isinstance(item, bool):
            return f"{name}: expected true or false"
        if kind == "number":
            if isinstance(item, bool) or not isinstance(item, int | float):
                return f"{name}: expected a number"
            if option.min is not None and item < option.min:
                return f"{name}: {item} is below the minimum {option.min}"
            if option.max is not None and item > option.max:
                return f"{name}: {item} is above the maximum {option.max}"
        if kind in ("string", "directory", "file") and not isinstance(item, str):
            return f"{name}: expected a string"
        if kind in ("directory", "file") and not os.path.isabs(os.path.expanduser(item)):
            return f"{name}: a {kind} must be an absolute path (or start with '~/')"
        if isinstance(item, str) and "\x00" in item:
            return f"{name}: must not contain a NUL character"
    return None
