"""Private state belongs to an install, not a name (issue 25, over-granting 3).

Theory of operation. A plugin's private data folder (``<state>/data/<id>``) and its secrets
belong to one *install*: ``{"id": <random hex>, "origin": <origin identity>}``, recorded in
``state.json`` (``install``). The class closed here: private state handed to whoever next uses
the same plugin id. Members: a bundle by another author that picks the same name after an
uninstall (the data folder was kept under the id); the same over a live install (a bundle of
the same name replaces the folder, data and secrets stayed); a registry entry or a local folder
taking an id a bundle used.

- :func:`origin_identity`: who stands behind an install: a verified signer, the registry server
  name (its namespace is the publisher's), the bundle file, or the plugin folder.
- Uninstall (and a replacement by another origin) moves a non-empty data folder aside, to
  ``<state>/kept/<id>/<install id>/`` with ``install.json`` (:func:`keep_aside`); nothing is lost.
- A later install starts with an empty data folder; it receives kept data only when the parent
  says so (``plugins/install`` ``adoptData: true``) *and* the kept install's origin is the same
  (:func:`adopt`).
- A record without ``install`` (written before this) gets one at load (:func:`migrate`): its data
  folder stays where it is, as the current install's.
- Secrets are keyed the same way (:func:`secret_owner`, ``<id>#<install id>`` in the secret store) and
  follow the data: uninstall keeps them under the install (``install.json`` is written aside even when
  the data folder is empty), an adoption moves them to the new install (:func:`adopt` returns the kept
  install's id), a store keyed by plugin id is migrated once at hostd's start.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostd.storage.secrets import UNCLAIMED, install_key

if TYPE_CHECKING:
    from hostd.install.manifest import Manifest

__all__ = [
    "KEPT_FOLDER",
    "adopt",
    "keep_aside",
    "migrate",
    "new_install",
    "origin_identity",
    "same_origin",
    "secret_owner",
]

#: Where uninstalled plugins' data waits for an adoption: ``<state>/kept/<id>/<install id>/``.
KEPT_FOLDER = "kept"
_IDENTITY_FILE = "install.json"


def origin_identity(manifest: Manifest, folder: Path) -> str:
    """Who stands behind an install of ``manifest`` from ``folder``, as one string.

    ``signer:<subject>`` for a bundle whose signature was verified; ``registry:<server name>`` for a
    registry entry (the name's namespace is the publisher's); ``mcpb:<bundle file>`` for another
    bundle; ``folder:<real path>`` for a plugin folder. Pure but for ``realpath``.
    """
    origin = manifest.origin
    if origin is None:
        return f"folder:{os.path.realpath(folder)}"
    if origin.kind == "mcpb" and origin.signature == "verified" and origin.signer:
        return f"signer:{origin.signer}"
    return f"{origin.kind}:{origin.source}"


def new_install(origin: str) -> dict[str, str]:
    """A fresh install identity: ``{"id": 16 random hex digits, "origin": origin}``."""
    return {"id": secrets.token_hex(8), "origin": origin}


def secret_owner(plugin_id: str, install: dict[str, str]) -> str:
    """The secret store's owner key of ``plugin_id``'s ``install``: ``<id>#<install id>``
    (:func:`hostd.storage.secrets.install_key`; ``<id>#unclaimed`` for an install without an id, which
    :func:`migrate` never leaves)."""
    return install_key(plugin_id, install.get("id") or UNCLAIMED)


def same_origin(install: dict[str, str], origin: str) -> bool:
    """True when ``install`` (a recorded identity) has the origin ``origin``."""
    return install.get("origin") == origin


def migrate(install: dict[str, str], manifest: Manifest, folder: Path) -> dict[str, str]:
    """``install`` as recorded, or (a record from before installs had identities) a new one for its origin.

    The data folder keyed by the id stays where it is: it is the current install's. Pure but for ``realpath``.
    """
    if install.get("id") and install.get("origin"):
        return dict(install)
    return new_install(origin_identity(manifest, folder))


def keep_aside(state_dir: Path, plugin_id: str, install: dict[str, str], *, has_secrets: bool = False) -> Path | None:
    """Move ``<state>/data/<id>`` aside to ``<state>/kept/<id>/<install id>/`` when it holds anything.

    Writes ``install.json`` (``{"plugin", "install", "origin", "keptAt"}``) beside the data, in a
    ``data`` subfolder -- also without data when ``has_secrets`` (the install's secrets stay in the
    secret store under :func:`secret_owner`, and this file is what an adoption finds them by). Returns
    the kept folder, or ``None`` (nothing to keep; an empty data folder is removed). Blocking; raises
    ``OSError`` when the move fails (the data then stays where it was).
    """
    data_dir = state_dir / "data" / plugin_id
    try:
        has_data = any(data_dir.iterdir())
        if not has_data:
            data_dir.rmdir()
    except FileNotFoundError:
        has_data = False
    if not has_data and not (has_secrets and install.get("id")):
        return None
    install_id = install.get("id") or secrets.token_hex(8)
    kept = state_dir / KEPT_FOLDER / plugin_id / install_id
    kept.mkdir(mode=0o700, parents=True, exist_ok=True)
    identity = {"plugin": plugin_id, "install": install_id, "origin": install.get("origin"), "keptAt": time.time()}
    (kept / _IDENTITY_FILE).write_text(json.dumps(identity))
    if has_data:
        os.replace(data_dir, kept / "data")
    return kept


def adopt(state_dir: Path, plugin_id: str, origin: str) -> Path | None:
    """Move the most recently kept data of ``plugin_id`` *from the same origin* back to ``<state>/data/<id>``.

    The kept folder's name is the kept install's id: its secrets (:func:`secret_owner`) go to the new
    install with it (the caller moves them, :meth:`hostd.storage.secrets.SecretStore.move`).

    Kept data of another origin is never taken (it stays aside). Returns the kept folder adopted, or
    ``None``. Does nothing when ``<state>/data/<id>`` already holds data. Blocking; ``OSError`` on a
    failed move.
    """
    data_dir = state_dir / "data" / plugin_id
    if data_dir.exists() and any(data_dir.iterdir()):
        return None
    candidates: list[tuple[float, Path]] = []
    root = state_dir / KEPT_FOLDER / plugin_id
    for kept in root.iterdir() if root.is_dir() else ():
        identity = _identity(kept)
        if identity is not None and identity.get("origin") == origin:
            candidates.append((float(identity.get("keptAt") or 0), kept))
    if not candidates:
        return None
    _, chosen = max(candidates)
    if (chosen / "data").is_dir():
        if data_dir.exists():
            data_dir.rmdir()
        data_dir.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.replace(chosen / "data", data_dir)
    (chosen / _IDENTITY_FILE).unlink()
    chosen.rmdir()
    return chosen


def _identity(kept: Path) -> dict[str, Any] | None:
    try:
        value = json.loads((kept / _IDENTITY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
