"""``hostd doctor --state-dir DIR``: what in a state folder hostd cannot use, and what it kept aside.

Read-only: it takes no lock, moves nothing and writes nothing, so it can run beside a hostd
serving the folder. Each finding is one line of text; :func:`check_state_folder` returns them.
The class it reports (issue 31): a file of the state folder, or a plugin's own file, that hostd
can no longer use: hostd serves on (a plugin ``broken``, a file moved aside, a named error for
the plugins that need an unreadable file) and this lists all of it in one place.
"""

from __future__ import annotations

import json
from pathlib import Path

from hostd.storage.secrets import SECRETS_FOLDER, SETTINGS_FOLDER, damage, parse_store
from hostd.storage.state import (
    PLUGIN_ID,
    STATE_FILE,
    TEMPORARY_FOLDERS,
    TOP_LEVEL_FILES,
    PluginRecord,
    RecordError,
)

__all__ = ["check_state_folder"]


def check_state_folder(directory: Path) -> list[str]:
    """The findings about the state folder ``directory``, one line each, problems first marked ``problem:``.

    Looks at ``state.json`` record by record (and each plugin's manifest), the secrets file, each
    plugin's settings, files moved aside (``*.corrupt-*``) and temporaries of interrupted writes.
    Blocking (small files); never raises for what it finds (an unexpected failure of the manifest
    loader is a finding too).
    """
    if not directory.is_dir():
        return [f"problem: {directory} is not a folder"]
    lines: list[str] = []
    lines += _check_state(directory)
    lines += _check_secrets(directory / SECRETS_FOLDER / "secrets.json")
    settings = directory / SETTINGS_FOLDER
    for path in sorted(settings.glob("*.json")) if settings.is_dir() else []:
        lines += _check_settings(path)
    aside = [*directory.glob(f"{STATE_FILE}.corrupt-*")]
    for folder in TEMPORARY_FOLDERS:
        aside += (directory / folder).glob("*.corrupt-*")
    for path in sorted(aside):
        lines.append(f"kept aside: {path.relative_to(directory)} (a damaged file hostd moved there, as it was)")
    stale = [p for name in TOP_LEVEL_FILES for p in directory.glob(f".{name}.*.tmp")]
    for folder in TEMPORARY_FOLDERS:
        stale += (directory / folder).glob("*.tmp")
    for path in sorted(stale):
        lines.append(f"temporary: {path.relative_to(directory)} (an interrupted write; hostd removes it at start)")
    return lines


def _check_state(directory: Path) -> list[str]:
    path = directory / STATE_FILE
    try:
        document = json.loads(path.read_bytes())
    except FileNotFoundError:
        return [f"ok: no {STATE_FILE} (nothing installed)"]
    except OSError as exc:
        return [f"problem: {path} cannot be read: {exc.strerror}"]
    except (ValueError, RecursionError) as exc:
        return [f"problem: {path} is damaged ({damage(exc)}); hostd moves it aside at its next start"]
    plugins = document.get("plugins") if isinstance(document, dict) else None
    if not isinstance(plugins, dict):
        return [f"problem: {path} is damaged (no 'plugins' object); hostd moves it aside at its next start"]
    lines = [f"ok: {STATE_FILE} holds {len(plugins)} plugin record(s)"]
    for plugin_id, raw in sorted(plugins.items()):
        try:
            if not PLUGIN_ID.fullmatch(plugin_id):
                raise RecordError("", "the key is not a plugin id")
            record = PluginRecord.from_json(raw)
        except RecordError as exc:
            lines.append(f"problem: plugin {plugin_id!r} is broken: its record in {STATE_FILE} cannot be read ({exc})")
            continue
        lines.append(_check_manifest(plugin_id, Path(record.path)))
    return lines


def _check_manifest(plugin_id: str, folder: Path) -> str:
    from hostd.install.manifest import load_manifest  # noqa: PLC0415
    from hostd.wire.errors import HostError  # noqa: PLC0415 - pydantic only when there is a record

    try:
        manifest, _ = load_manifest(folder)
    except HostError as error:
        return f"problem: plugin {plugin_id} is broken: its manifest cannot be loaded ({error.message})"
    except Exception as exc:  # a defect of the loader: still a finding, never a crash of doctor
        return f"problem: plugin {plugin_id} is broken: its manifest cannot be loaded ({type(exc).__name__})"
    if manifest.id != plugin_id:
        return f"problem: plugin {plugin_id} is broken: its manifest now has the id {manifest.id!r}"
    return f"ok: plugin {plugin_id} loads from {folder}"


def _check_secrets(path: Path) -> list[str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ["ok: no secrets file"]
    except OSError as exc:
        return [
            f"problem: the secrets file {path} cannot be read ({exc.strerror}): the plugins that use secrets fail "
            "to start until it is a file you can read and write (mode 0600) or moved away"
        ]
    plugins, problem = parse_store(raw)
    if problem is not None:
        return [f"problem: the secrets file {path} is damaged ({problem}); hostd moves it aside when it reads it"]
    return [f"ok: the secrets file holds secrets of {len(plugins)} plugin(s)"]


def _check_settings(path: Path) -> list[str]:
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        return [f"problem: the settings file {path} cannot be read ({exc.strerror})"]
    except (ValueError, RecursionError) as exc:
        return [f"problem: the settings file {path} is damaged ({damage(exc)}); hostd moves it aside when it reads it"]
    if not isinstance(data, dict):
        return [
            f"problem: the settings file {path} is damaged (not a JSON object); hostd moves it aside when it reads it"
        ]
    return []
