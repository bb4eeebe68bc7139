"""MCP Registry entries (``server.json``, schema 2025-12-11) turned into plugin manifests.

Theory of operation
-------------------
``plugins/install {serverJson, package?}`` takes one entry of the official MCP
Registry. :func:`plan` validates the fields hostd uses (pydantic; other fields
are accepted and ignored, as the schema grows by adding them) and picks one
way to run it:

- an ``npm`` package becomes ``npx -y <identifier>@<version> <packageArguments>``;
- a ``pypi`` package becomes ``uvx <identifier>==<version> <packageArguments>``;
- an ``mcpb`` package is a bundle at a URL: it is downloaded (``https:`` or
  ``file:``; at most :data:`hostd.bundle.MAX_BUNDLE_BYTES`), its
  ``fileSha256`` checked, then installed as any bundle (hostd/bundle.py);
- with no package, a ``remote`` (Streamable HTTP or SSE) is recorded as a
  manifest with ``backend.transport``, ``url`` and ``headers``; this hostd
  runs stdio servers only, so the install ends with a clear error that says
  where the manifest was recorded.

The version must be exact (``1.2.3``, not ``^1.2``, ``latest`` or a range):
what the user approves is what runs. ``environmentVariables``, remote
``headers`` and arguments without a fixed value become ``user_config``
options (``plugins/configure``); ``isSecret`` ones become secrets
(``${secret:NAME}``, hostd/secrets.py) and are never written anywhere in
plain text. Failures raise ``PACKAGE_INVALID`` with ``data.errors``
(``field`` a dotted path into the entry).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from hostd.bundle import MAX_BUNDLE_BYTES, invalid, validated
from hostd.importer import known_needs, sanitize_id
from hostd.secrets import secret_ref

__all__ = ["Plan", "ServerJson", "download_bundle", "plan"]

_NPM_EXACT: Final = re.compile(r"^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_PYPI_EXACT: Final = re.compile(r"^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?$")
_NAME: Final = re.compile(r"[^A-Za-z0-9_]+")


class _Lenient(BaseModel):
    # Unknown fields are ignored: the registry schema grows by adding fields, and hostd
    # must not refuse an entry over one it does not use.
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class Input(_Lenient):
    """The fields every input has (an argument, a variable, a header)."""

    description: str | None = None
    is_required: bool = Field(default=False, alias="isRequired")
    is_secret: bool = Field(default=False, alias="isSecret")
    format: str | None = None
    value: str | None = None
    default: str | None = None


class KeyValueInput(Input):
    """An environment variable or a header: ``name`` and the value's rules."""

    name: str = Field(min_length=1)


class Argument(Input):
    """A runtime or package argument: ``positional`` or ``named`` (``--flag value``)."""

    type: Literal["positional", "named"]
    name: str | None = None
    value_hint: str | None = Field(default=None, alias="valueHint")
    is_repeated: bool = Field(default=False, alias="isRepeated")


class Transport(_Lenient):
    """A package's transport."""

    type: str
    url: str | None = None
    headers: list[KeyValueInput] = []


class Package(_Lenient):
    """One of ``packages``."""

    registry_type: str = Field(alias="registryType")
    registry_base_url: str | None = Field(default=None, alias="registryBaseUrl")
    identifier: str = Field(min_length=1)
    version: str | None = None
    file_sha256: str | None = Field(default=None, alias="fileSha256", pattern=r"^[a-f0-9]{64}$")
    runtime_hint: str | None = Field(default=None, alias="runtimeHint")
    transport: Transport
    runtime_arguments: list[Argument] = Field(default=[], alias="runtimeArguments")
    package_arguments: list[Argument] = Field(default=[], alias="packageArguments")
    environment_variables: list[KeyValueInput] = Field(default=[], alias="environmentVariables")


class Remote(_Lenient):
    """One of ``remotes``."""

    type: str
    url: str = Field(min_length=1)
    headers: list[KeyValueInput] = []


class ServerJson(_Lenient):
    """A registry ``server.json``: the fields hostd uses."""

    schema_: str | None = Field(default=None, alias="$schema")
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    title: str | None = None
    version: str = Field(min_length=1)
    packages: list[Package] = []
    remotes: list[Remote] = []


@dataclass
class Plan:
    """What :func:`plan` decided: a manifest document, or a bundle to download (``bundle_url``)."""

    name: str
    manifest: dict[str, Any] | None = None
    bundle_url: str | None = None
    sha256: str | None = None
    remote: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


class _Options:
    """The ``user_config`` options an entry's inputs become, with unique names."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def add(self, wanted: str, item: Input, *, kind: str = "string") -> str:
        """Declare an option for ``item``; return the text that refers to it in the manifest."""
        name = _NAME.sub("_", wanted).strip("_") or "value"
        if name[0].isdigit():
            name = "_" + name
        base, counter = name, 2
        while name in self.options:
            name, counter = f"{base}_{counter}", counter + 1
        option: dict[str, Any] = {"type": kind, "title": wanted, "description": item.description or ""}
        if item.is_required:
            option["required"] = True
        if item.is_secret:
            option["sensitive"] = True
        elif item.default is not None:
            option["default"] = item.default
        self.options[name] = option
        return secret_ref(name) if item.is_secret else "${user_config." + name + "}"


def _arguments(arguments: list[Argument], options: _Options, field: str, notes: list[str]) -> list[str]:
    words: list[str] = []
    for index, argument in enumerate(arguments):
        where = f"{field}.{index}"
        if argument.type == "named":
            if not argument.name:
                raise invalid(f"{where}: a named argument needs 'name'", [{"field": where, "message": "needs 'name'"}])
            if argument.value is not None and not argument.is_secret:
                words += [argument.name, argument.value]
            elif argument.is_required or argument.default is not None or argument.is_secret:
                words += [argument.name, options.add(argument.name.lstrip("-"), argument)]
            else:
                notes.append(f"optional argument {argument.name} left out")
        elif argument.value is not None and not argument.is_secret:
            words.append(argument.value)
        else:
            words.append(options.add(argument.value_hint or argument.name or f"arg{index}", argument))
    return words


def plan(entry: dict[str, Any] | str, index: int = 0) -> Plan:
    """Decide how to install ``entry`` (a ``server.json`` object or its text), using ``packages[index]``.

    Pure (no I/O). Raises ``PACKAGE_INVALID``: invalid fields, no package at
    ``index`` and no remote, an unsupported registry type (``oci``, ``nuget``)
    or package transport, a version that is not exact, an ``mcpb`` package
    without ``fileSha256``.
    """
    server = validated(ServerJson, entry, "serverJson", "server.json")
    plugin_id = sanitize_id(server.name.rsplit("/", 1)[-1])
    document: dict[str, Any] = {
        "id": plugin_id,
        "name": server.title or server.name,
        "version": server.version,
        "description": server.description or f"{server.name} from the MCP Registry.",
        "permissions": [],
        "contributes": {"tools": [], "discover": True},
        "origin": {"kind": "registry", "source": server.name},
    }
    options = _Options()
    result = Plan(name=server.name)
    if not server.packages:
        if not server.remotes:
            raise invalid(f"{server.name}: no packages and no remotes", [{"field": "packages", "message": "empty"}])
        remote = server.remotes[0]
        headers = {h.name: h.value if h.value and not h.is_secret else options.add(h.name, h) for h in remote.headers}
        result.remote = {"type": remote.type, "url": remote.url, "headers": sorted(headers)}
        document["backend"] = {"type": "mcp", "transport": remote.type, "url": remote.url, "headers": headers}
        document["origin"]["remote"] = result.remote
        document["user_config"] = options.options
        table = {"backend.url": "remotes.0.url", "backend.transport": "remotes.0.type", **_entry_fields(server)}
        table.update({f"backend.headers.{h.name}": f"remotes.0.headers.{i}" for i, h in enumerate(remote.headers)})
        _check_generated(server.name, document, table)
        result.manifest = document
        return result
    if index >= len(server.packages):
        raise invalid(
            f"{server.name} has {len(server.packages)} packages; there is no package {index}",
            [{"field": "packages", "message": f"no index {index}"}],
        )
    package = server.packages[index]
    where = f"packages.{index}"
    kind = package.registry_type
    if package.transport.type != "stdio":
        raise invalid(
            f"{where}: transport {package.transport.type!r}: hostd runs packages over stdio only",
            [{"field": f"{where}.transport.type", "message": "only 'stdio' is supported"}],
        )
    if kind == "mcpb":
        if package.file_sha256 is None:
            raise invalid(
                f"{where}: an mcpb package needs fileSha256 (hostd installs only what it can check)",
                [{"field": f"{where}.fileSha256", "message": "required for mcpb"}],
            )
        result.bundle_url, result.sha256 = package.identifier, package.file_sha256
        return result
    exact = {"npm": _NPM_EXACT, "pypi": _PYPI_EXACT}.get(kind)
    if exact is None:
        raise invalid(
            f"{where}: registryType {kind!r} is not supported (npm, pypi, mcpb)",
            [{"field": f"{where}.registryType", "message": "not supported"}],
        )
    if package.version is None or not exact.match(package.version):
        shown = "no version" if package.version is None else f"version {package.version!r}"
        raise invalid(
            f"{where}: {shown}: an exact version is required (e.g. 1.2.3), so what is approved is what runs",
            [{"field": f"{where}.version", "message": "must be an exact version"}],
        )
    default_base = {"npm": "https://registry.npmjs.org", "pypi": "https://pypi.org"}[kind]
    if package.registry_base_url is not None and package.registry_base_url.rstrip("/") != default_base:
        # The package would be fetched from the default registry (or the host's mirror), which may
        # hold a different package of that name: refuse rather than run something else.
        raise invalid(
            f"{where}: registryBaseUrl {package.registry_base_url!r}: only {default_base} is supported",
            [{"field": f"{where}.registryBaseUrl", "message": f"only {default_base} is supported"}],
        )
    runtime = _arguments(package.runtime_arguments, options, f"{where}.runtimeArguments", result.notes)
    arguments = _arguments(package.package_arguments, options, f"{where}.packageArguments", result.notes)
    if kind == "npm":
        command = "npx"
        args = ["-y", *[w for w in runtime if w not in ("-y", "--yes")], f"{package.identifier}@{package.version}"]
    else:
        command = "uvx"
        args = [*runtime, f"{package.identifier}=={package.version}"]
    env: dict[str, str] = {}
    for variable in package.environment_variables:
        if variable.value is not None and not variable.is_secret:
            env[variable.name] = variable.value
        else:
            reference = options.add(variable.name, variable)
            env[variable.name] = reference
    document["backend"] = {
        "type": "mcp",
        "transport": "stdio",
        "command": command,
        "args": [*args, *arguments],
        "env": env,
        "startup_timeout_seconds": 120,
        "tool_timeout_seconds": 60,
        "stdout_noise": "drop",
    }
    needs = known_needs([command, *args])
    if needs:
        document["sandbox"] = {"read": needs["read"]}
    document["user_config"] = options.options
    table = {"backend.command": f"{where}.registryType", "sandbox": f"{where}.identifier", **_entry_fields(server)}
    table.update({f"backend.args.{i}": f"{where}.runtimeArguments" for i in range(len(args) - 1)})
    table[f"backend.args.{len(args) - 1}"] = f"{where}.identifier"
    table.update({f"backend.args.{len(args) + i}": f"{where}.packageArguments" for i in range(len(arguments))})
    variables = package.environment_variables
    table.update({f"backend.env.{v.name}": f"{where}.environmentVariables.{i}" for i, v in enumerate(variables)})
    _check_generated(server.name, document, table)
    result.manifest = document
    return result


def _entry_fields(server: ServerJson) -> dict[str, str]:
    """Where the manifest's own fields come from in the entry (hostd/generated.py's table)."""
    return {
        "id": "name",
        "name": "title" if server.title else "name",
        "version": "version",
        "description": "description",
    }


def _check_generated(name: str, document: dict[str, Any], table: dict[str, str]) -> None:
    """Raise ``PACKAGE_INVALID`` naming the entry's field when hostd would refuse the manifest planned for it.

    The class (issue 31, class 3; hostd/generated.py): what the entry let
    through but the manifest refuses (a NUL in an argument or a value, a name
    that is not an environment variable's or a header's, a remote URL or
    transport) is reported here, against ``server.json``, before anything is
    written into hostd's state folder. ``data.errors`` lists every error.
    """
    from hostd.generated import manifest_errors, source_field  # noqa: PLC0415 - pulls in the manifest model

    errors = manifest_errors(document)
    if not errors:
        return
    found = [{"field": source_field(e["field"], table, ""), "message": e["message"]} for e in errors]
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise invalid(f"{name}: {first['field'] or '(the entry)'}: {first['message']}{more}", found)


def download_bundle(plan: Plan, root: Path) -> Path:
    """Fetch ``plan.bundle_url`` into a temporary file under ``root`` and check its SHA-256; return the file.

    ``https:`` and ``file:`` URLs only; at most ``MAX_BUNDLE_BYTES``; 60 s per
    read. Raises ``PACKAGE_INVALID`` (unreachable, too large, wrong hash: the
    message gives both hashes). The caller deletes the file. Blocking.
    """
    assert plan.bundle_url is not None and plan.sha256 is not None
    url = plan.bundle_url
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("https", "file"):
        raise invalid(
            f"{url}: only https: and file: bundle URLs are fetched", [{"field": "identifier", "message": url}]
        )
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".download-", suffix=".mcpb", dir=root)
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            while chunk := response.read(1024 * 1024):
                size += len(chunk)
                if size > MAX_BUNDLE_BYTES:
                    raise invalid(f"{url}: larger than {MAX_BUNDLE_BYTES} bytes")
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:
        os.unlink(name)
        raise invalid(f"{url}: cannot be fetched: {exc}", [{"field": "identifier", "message": str(exc)}]) from None
    except BaseException:
        os.unlink(name)
        raise
    if digest.hexdigest() != plan.sha256:
        os.unlink(name)
        raise invalid(
            f"{url}: SHA-256 {digest.hexdigest()} does not match fileSha256 {plan.sha256}",
            [{"field": "fileSha256", "message": "does not match the downloaded file"}],
        )
    return Path(name)
