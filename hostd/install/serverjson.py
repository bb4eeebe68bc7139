"""MCP Registry entries (``server.json``, schema 2025-12-11) turned into plugin manifests.

Theory of operation
-------------------
``plugins/install {serverJson, package?}`` takes one entry of the official MCP
Registry. :func:`plan` validates the fields hostd uses (pydantic; other fields
are accepted and ignored, as the schema grows by adding them) and picks one
way to run it:

- an ``npm`` package becomes ``npx -y <identifier>@<version> <packageArguments>``;
- a ``pypi`` package becomes ``uvx <identifier>==<version> <packageArguments>``;
- an ``mcpb`` package is a bundle at a URL: it is downloaded (``https:``
  only, :func:`download_bundle`), its ``fileSha256`` checked, then installed
  as any bundle (hostd/install/bundle.py);
- with no package, a ``remote`` (Streamable HTTP or SSE) is recorded as a
  manifest with ``backend.transport``, ``url`` and ``headers``; this hostd
  runs stdio servers only, so the install ends with a clear error that says
  where the manifest was recorded.

The version must be exact (``1.2.3``, not ``^1.2``, ``latest`` or a range):
what the user approves is what runs. ``identifier`` and ``version`` go
through the package spec grammar of :mod:`hostd.install.packages` (``npm_spec`` /
``python_spec``): a bare registry name, never a path, URL, ``git+``/``file:``
source, alias, ``user/repo`` or option. ``runtimeArguments`` come before the
package, where npx/uvx read them as their own options, so only flags that
change nothing installed (``-y``, ``-q``...) and uvx's ``--python <version>``
are allowed; any other is ``PACKAGE_INVALID`` naming
``packages.N.runtimeArguments.I``. ``packageArguments`` follow the package:
the server's own arguments, never an installer's operand. ``runtimeHint`` is
not used (the command is ``npx`` or ``uvx`` by ``registryType``). ``environmentVariables``, remote
``headers`` and arguments without a fixed value become ``user_config``
options (``plugins/configure``); ``isSecret`` ones become secrets
(``${secret:NAME}``, hostd/storage/secrets.py) and are never written anywhere in
plain text. Failures raise ``PACKAGE_INVALID`` with ``data.errors``
(``field`` a dotted path into the entry).

The network allowlist (issue 26): server.json has no field for it; a publisher names it in ``_meta``, under
``io.modelcontextprotocol.registry/publisher-provided`` (the one key the official registry keeps), as
``dev.hostd/network: {hosts, private}`` (hostd/install/network_field.py). A package's manifest gets it as its
``network`` field, checked as that field is; a remote's manifest gets its URL's ``host:port`` followed by the
hosts named there (what hostd itself may reach for it).

A registry document names only ``https:`` resources
----------------------------------------------------
The class of fault: *a stranger's document makes hostd read something on the
installer's behalf that is not a public https resource*. Its members: a
``file:`` URL (any local file hostd can read, its own standard input through
``file:///dev/stdin`` or ``/proc/self/fd/0``; the hash-mismatch error then
gave a digest of what was read), ``http:``, ``ftp:``, ``data:``, a relative
URL, a scheme in other casing (``FILE:``), a URL with a user name, spaces,
control characters or a NUL (read differently by different parsers), a
redirect to any of these, and an https URL whose host resolves to a loopback,
private or link-local address (hostd/remote/connect.py's rule, as for remote
plugins: ``--allow-private-download HOST`` lets a user's own mirror through).
:func:`resource_problem` refuses them all from the text alone, before anything
is opened; :func:`download_bundle` checks every hop again and dials only
checked addresses. A download is bounded in size (``MAX_BUNDLE_BYTES``), in
redirects (:data:`MAX_REDIRECTS`) and in total time (:data:`DOWNLOAD_SECONDS`:
a server that trickles a byte a minute fails at the deadline), and runs on
trio (cancellable; hostd's control reader keeps reading).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import trio
from pydantic import BaseModel, ConfigDict, Field

from hostd.install import network_field
from hostd.install.bundle import MAX_BUNDLE_BYTES, invalid, validated
from hostd.install.importer import known_needs, sanitize_id
from hostd.install.packages import (
    NPM_FORMS,
    PYTHON_FORMS,
    PrepareError,
    npm_spec,
    parse_package_launch,
    python_request,
    python_spec,
)
from hostd.storage.secrets import secret_ref
from hostd.wire.errors import HostError

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx2

__all__ = ["DOWNLOAD_SECONDS", "MAX_REDIRECTS", "Plan", "ServerJson", "download_bundle", "plan", "resource_problem"]

_NAME: Final = re.compile(r"[^A-Za-z0-9_]+")
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")

#: The longest one bundle download may take, first byte to last, redirects included (seconds).
DOWNLOAD_SECONDS: Final = 300.0
#: The most redirects one bundle download follows (each to an ``https:`` URL checked as the first).
MAX_REDIRECTS: Final = 5
#: The longest one read may wait for the server (seconds); the total is :data:`DOWNLOAD_SECONDS`.
_READ_SECONDS: Final = 30.0

#: Runtime arguments allowed before the package (``runtimeArguments`` with a fixed value): flags that
#: change nothing installed. Anything else (``--registry=``, ``--ignore-scripts=false``, ``-p pkg``,
#: ``--from ./x``, ``--index-url``, ``--with``, a positional word that would become the package) is
#: refused: a registry entry's text must not choose what is installed or from where.
_RUNTIME_FLAGS: Final = {
    "npm": frozenset({"-y", "--yes", "-q", "--quiet"}),
    "pypi": frozenset({"-q", "--quiet", "--isolated", "--no-cache", "--no-progress"}),
}


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
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


@dataclass
class Plan:
    """What :func:`plan` decided: a manifest document, or a bundle to download (``bundle_url``)."""

    name: str
    manifest: dict[str, Any] | None = None
    bundle_url: str | None = None
    #: Where ``bundle_url`` came from: the dotted path into the entry (errors name it).
    bundle_field: str = "identifier"
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


def _package_spec(package: Package, kind: str, where: str) -> str:
    """``identifier`` + ``version`` as the installer operand (``name@1.2.3`` / ``name==1.2.3``).

    Both go through the grammar of :func:`hostd.install.packages.npm_spec` /
    :func:`~hostd.install.packages.python_spec`:
    ``identifier`` must be a bare registry name (not a path, URL, alias, ``user/repo``, option or
    a name with a version), ``version`` one exact version. Raises ``PACKAGE_INVALID`` naming the field.
    """
    check, forms = (npm_spec, NPM_FORMS) if kind == "npm" else (python_spec, PYTHON_FORMS)
    field = f"{where}.identifier"
    try:
        named = check(package.identifier, field)
    except PrepareError as exc:
        raise invalid(
            f"{where}: {exc}", [{"field": field, "message": f"must be a registry package name ({forms})"}]
        ) from None
    if named.text != package.identifier or named.version is not None or named.extras:
        raise invalid(
            f"{where}: identifier {package.identifier!r} must be a bare package name (the version is 'version')",
            [{"field": field, "message": f"must be a registry package name ({forms})"}],
        )
    pinned = None
    if package.version is not None:
        joined = (
            f"{package.identifier}@{package.version}" if kind == "npm" else f"{package.identifier}=={package.version}"
        )
        with contextlib.suppress(PrepareError):
            pinned = check(joined, f"{where}.version")
    if pinned is None or pinned.version != package.version:
        shown = "no version" if package.version is None else f"version {package.version!r}"
        raise invalid(
            f"{where}: {shown}: an exact version is required (e.g. 1.2.3), so what is approved is what runs",
            [{"field": f"{where}.version", "message": "must be an exact version"}],
        )
    return pinned.text


def _runtime(arguments: list[Argument], kind: str, field: str) -> list[str]:
    """``runtimeArguments`` as words before the package: :data:`_RUNTIME_FLAGS`, and uvx's ``--python <version>``.

    Raises ``PACKAGE_INVALID`` naming ``<field>.<index>`` for any other argument (it would be an
    option of npx/uvx choosing what is installed or from where, or the package itself), for one
    whose value is secret or left to the user, and for a ``--python`` that is not a version.
    """
    words: list[str] = []
    allowed = _RUNTIME_FLAGS[kind]
    for index, argument in enumerate(arguments):
        where = f"{field}.{index}"
        fixed = argument.value if not argument.is_secret else None
        if argument.type == "positional" and fixed in allowed:
            words.append(fixed)
            continue
        if argument.type == "named" and argument.name in allowed and argument.value is None and not argument.is_secret:
            words.append(argument.name)  # a flag written as a named argument without a value
            continue
        if kind == "pypi" and argument.type == "named" and argument.name in ("--python", "-p") and fixed is not None:
            try:
                words += ["--python", python_request(fixed, where)]
            except PrepareError as exc:
                raise invalid(str(exc), [{"field": where, "message": "must be a Python version (3.12)"}]) from None
            continue
        tool = "npx" if kind == "npm" else "uvx"
        said = " ".join(w for w in (argument.name, argument.value) if w) or argument.value_hint or "(no value)"
        raise invalid(
            f"{where}: runtime argument {said!r} is not supported: words before the package are {tool}'s own "
            f"options and could change what is installed or from where (allowed: {', '.join(sorted(allowed))}"
            + (", --python <version>)" if kind == "pypi" else ")"),
            [{"field": where, "message": "not an allowed runtime argument"}],
        )
    return words


def plan(entry: dict[str, Any] | str, index: int = 0) -> Plan:
    """Decide how to install ``entry`` (a ``server.json`` object or its text), using ``packages[index]``.

    Pure (no I/O). Raises ``PACKAGE_INVALID``: invalid fields, no package at
    ``index`` and no remote, an unsupported registry type (``oci``, ``nuget``)
    or package transport, a version that is not exact, an ``mcpb`` package
    without ``fileSha256`` or whose URL is not one hostd fetches
    (:func:`resource_problem`).
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
        return _remote_plan(server, document, options, result)
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
        _check_resource(package.identifier, f"{where}.identifier")
        result.bundle_url, result.sha256 = package.identifier, package.file_sha256
        result.bundle_field = f"{where}.identifier"
        return result
    if kind not in ("npm", "pypi"):
        raise invalid(
            f"{where}: registryType {kind!r} is not supported (npm, pypi, mcpb)",
            [{"field": f"{where}.registryType", "message": "not supported"}],
        )
    return _package_plan(server, package, where, document, options=options, result=result)


def _remote_plan(server: ServerJson, document: dict[str, Any], options: _Options, result: Plan) -> Plan:
    """:func:`plan` of an entry without packages: its first remote (``PACKAGE_INVALID`` when it has none)."""
    if not server.remotes:
        raise invalid(f"{server.name}: no packages and no remotes", [{"field": "packages", "message": "empty"}])
    remote = server.remotes[0]
    headers = {h.name: h.value if h.value and not h.is_secret else options.add(h.name, h) for h in remote.headers}
    result.remote = {"type": remote.type, "url": remote.url, "headers": sorted(headers)}
    document["backend"] = {"type": "mcp", "transport": remote.type, "url": remote.url, "headers": headers}
    document["origin"]["remote"] = result.remote
    document["user_config"] = options.options
    table = {"backend.url": "remotes.0.url", "backend.transport": "remotes.0.type", **_entry_fields(server)}
    own = network_field.remote_entry(remote.url)
    declared = _network(server, document, table)
    hosts = declared.get("hosts", []) if isinstance(declared, dict) else None if declared is not None else []
    if own is not None and isinstance(hosts, list):  # else the manifest model names what is wrong with it
        # The remote's own host first (what hostd reaches for it), then what its publisher names.
        kept = [(i, h) for i, h in enumerate(hosts) if h != own]
        document["network"] = {**(declared or {}), "hosts": [own, *(h for _, h in kept)]}
        table.update({f"network.hosts.{n + 1}": f"{table['network']}.hosts.{i}" for n, (i, _) in enumerate(kept)})
        table["network.hosts.0"] = "remotes.0.url"
    table.update({f"backend.headers.{h.name}": f"remotes.0.headers.{i}" for i, h in enumerate(remote.headers)})
    _check_generated(server.name, document, table)
    result.manifest = document
    return result


def _package_plan(
    server: ServerJson, package: Package, where: str, document: dict[str, Any], *, options: _Options, result: Plan
) -> Plan:
    """:func:`plan` of an npm or pypi ``package`` (at ``where``): an npx / uvx launch of its exact version.

    Raises ``PACKAGE_INVALID``: a spec outside the grammar, a ``registryBaseUrl`` other than the default,
    a runtime argument that is not allowed, a launch that does not name exactly the package.
    """
    kind = package.registry_type
    spec = _package_spec(package, kind, where)
    default_base = {"npm": "https://registry.npmjs.org", "pypi": "https://pypi.org"}[kind]
    if package.registry_base_url is not None and package.registry_base_url.rstrip("/") != default_base:
        # The package would be fetched from the default registry (or the host's mirror), which may
        # hold a different package of that name: refuse rather than run something else.
        raise invalid(
            f"{where}: registryBaseUrl {package.registry_base_url!r}: only {default_base} is supported",
            [{"field": f"{where}.registryBaseUrl", "message": f"only {default_base} is supported"}],
        )
    runtime = _runtime(package.runtime_arguments, kind, f"{where}.runtimeArguments")
    arguments = _arguments(package.package_arguments, options, f"{where}.packageArguments", result.notes)
    if kind == "npm":
        command = "npx"
        args = ["-y", *[w for w in runtime if w not in ("-y", "--yes")], spec]
    else:
        command = "uvx"
        args = [*runtime, spec]
    # packageArguments follow the package: the server's own arguments, never an installer's operand.
    try:
        launch = parse_package_launch(command, [*args, *arguments])
    except PrepareError as exc:  # not reached for a spec and runtime words checked above: a defect if it is
        raise invalid(f"{where}: {exc}", [{"field": where, "message": str(exc)}]) from None
    if launch is None or launch.packages != (spec,):
        raise invalid(f"{where}: the launch does not name exactly {spec}", [{"field": where, "message": "ambiguous"}])
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
    _network(server, document, table)
    table.update({f"backend.args.{i}": f"{where}.runtimeArguments" for i in range(len(args) - 1)})
    table[f"backend.args.{len(args) - 1}"] = f"{where}.identifier"
    table.update({f"backend.args.{len(args) + i}": f"{where}.packageArguments" for i in range(len(arguments))})
    variables = package.environment_variables
    table.update({f"backend.env.{v.name}": f"{where}.environmentVariables.{i}" for i, v in enumerate(variables)})
    _check_generated(server.name, document, table)
    result.manifest = document
    return result


def resource_problem(url: str) -> tuple[str, str] | None:
    """Why hostd will not fetch ``url``, named by a registry document: ``(scheme, reason)``, or None.

    Pure: the text only, nothing is opened or resolved (the address rule is
    applied when connecting, :func:`download_bundle`). ``scheme`` is the
    scheme as written (``""`` when there is none). Refused: any scheme but
    ``https`` (in any casing), a relative URL, a character outside printable
    ASCII (space, tab, newline, NUL, other control characters, non-ASCII:
    write a host in punycode), a backslash, a user name or password, no host,
    a URL httpx cannot parse. See the module header for the class.
    """
    match = _SCHEME.match(url)
    scheme = match.group(1) if match else ""
    bad = next((ch for ch in url if not 0x21 <= ord(ch) <= 0x7E), None)
    if bad is not None:
        return scheme, f"contains the character {bad!r} (only printable ASCII without spaces)"
    if not match:
        return scheme, "is not an absolute URL (no scheme)"
    if scheme.lower() != "https":
        return scheme, f"has the scheme {scheme + ':'!r}: hostd fetches only https: URLs"
    if "\\" in url:
        return scheme, "contains a backslash"
    import httpx2  # noqa: PLC0415 - only an mcpb install pays for it

    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL as exc:
        return scheme, f"is not a valid URL: {exc}"
    if parsed.scheme != "https" or not parsed.host:
        return scheme, "has no host"
    if parsed.userinfo:
        return scheme, "holds a user name or password"
    return None


def _check_resource(url: str, where: str) -> None:
    problem = resource_problem(url)
    if problem is not None:
        scheme, reason = problem
        raise invalid(f"{where}: the bundle URL {reason}", [{"field": where, "message": reason}], scheme=scheme)


def _network(server: ServerJson, document: dict[str, Any], table: dict[str, str]) -> Any:
    """The entry's ``dev.hostd/network`` (module text) as ``document``'s ``network`` (checked with the rest of the
    manifest by :func:`_check_generated`; ``table`` gets its fields); returns it, or None when the entry names none."""
    found = network_field.declared(server.meta, network_field.PUBLISHER_KEY)
    if found is None:
        table["network"] = f"_meta.{network_field.PUBLISHER_KEY}.{network_field.NETWORK_KEY}"
        return None
    document["network"] = found[0]
    table.update(network_field.field_table(found[0], found[1]))
    return found[0]


def _entry_fields(server: ServerJson) -> dict[str, str]:
    """Where the manifest's own fields come from in the entry (hostd/install/generated.py's table)."""
    return {
        "id": "name",
        "name": "title" if server.title else "name",
        "version": "version",
        "description": "description",
    }


def _check_generated(name: str, document: dict[str, Any], table: dict[str, str]) -> None:
    """Raise ``PACKAGE_INVALID`` naming the entry's field when hostd would refuse the manifest planned for it.

    The class (issue 31, class 3; hostd/install/generated.py): what the entry let
    through but the manifest refuses (a NUL in an argument or a value, a name
    that is not an environment variable's or a header's, a remote URL or
    transport) is reported here, against ``server.json``, before anything is
    written into hostd's state folder. ``data.errors`` lists every error.
    """
    from hostd.install.generated import manifest_errors, source_field  # noqa: PLC0415 - pulls in the manifest model

    errors = manifest_errors(document)
    if not errors:
        return
    found = [{"field": source_field(e["field"], table, ""), "message": e["message"]} for e in errors]
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise invalid(f"{name}: {first['field'] or '(the entry)'}: {first['message']}{more}", found)


async def download_bundle(
    plan: Plan,
    root: Path,
    *,
    allow_private: Iterable[str] = (),
    seconds: float = DOWNLOAD_SECONDS,
    max_bytes: int = MAX_BUNDLE_BYTES,
    max_redirects: int = MAX_REDIRECTS,
) -> Path:
    """Fetch ``plan.bundle_url`` into a temporary file under ``root`` and check its SHA-256; return the file.

    ``https:`` only (:func:`resource_problem`, checked again for every
    redirect; at most ``max_redirects``). Connections go only to addresses
    hostd/remote/connect.py's rule passes (``allow_private``: host names that may
    resolve to a private or loopback address, the user's ``--allow-private-download``);
    the environment's proxy and CA variables apply. At most ``max_bytes``
    bytes (``Content-Encoding`` other than identity is refused, so the bound
    is on the bytes hashed); the whole download takes at most ``seconds``
    (each read at most 30 s). Raises ``PACKAGE_INVALID`` (``data.errors[0].field``
    the URL's field): refused URL or redirect, unreachable, HTTP status other
    than 200, too large, too slow, wrong hash (the message gives both hashes).
    The caller deletes the file. Cancellation closes the connection and
    deletes the partial file. Source: MCP Registry server.json, ``mcpb``
    packages (``identifier`` is the bundle's URL).
    """
    import httpx2  # noqa: PLC0415 - only an mcpb install pays for httpx and httpcore

    from hostd.remote.connect import checked_client_transports  # noqa: PLC0415 - likewise

    assert plan.bundle_url is not None and plan.sha256 is not None
    where = plan.bundle_field
    url = first = plan.bundle_url
    _check_resource(url, where)

    def failed(message: str) -> HostError:
        return invalid(f"{first}: {message}", [{"field": where, "message": message}])

    allowed = {h.lower().rstrip(".") for h in allow_private}
    refusals: list[str] = []
    transport, mounts = checked_client_transports(allowed, refusals.append)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".download-", suffix=".mcpb", dir=root)
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "wb") as out, trio.move_on_after(seconds) as deadline:
            async with httpx2.AsyncClient(
                transport=transport,
                mounts=mounts,
                trust_env=True,
                follow_redirects=False,
                timeout=httpx2.Timeout(_READ_SECONDS),
                headers={"Accept-Encoding": "identity"},
            ) as client:
                for hop in range(max_redirects + 1):
                    _refuse_loopback(httpx2.URL(url).host, allowed, failed)
                    async with client.stream("GET", url) as response:
                        if response.is_redirect:
                            url = _redirect_target(response, hop, max_redirects, failed)
                            continue
                        _check_answer(response, url, max_bytes, failed)
                        async for chunk in response.aiter_raw():
                            size += len(chunk)
                            if size > max_bytes:
                                raise failed(f"larger than {max_bytes} bytes")
                            digest.update(chunk)
                            out.write(chunk)
                        break
        if deadline.cancelled_caught:
            raise failed(f"not downloaded within {seconds:g} s ({size} bytes received)")
    except httpx2.HTTPError as exc:
        os.unlink(name)
        reason = refusals[-1] if refusals else str(exc) or type(exc).__name__
        raise failed(f"cannot be fetched: {reason}") from None
    except BaseException:
        os.unlink(name)
        raise
    if digest.hexdigest() != plan.sha256:
        os.unlink(name)
        raise invalid(
            f"{first}: SHA-256 {digest.hexdigest()} does not match fileSha256 {plan.sha256}",
            [{"field": "fileSha256", "message": "does not match the downloaded file"}],
        )
    return Path(name)


def _refuse_loopback(host: str, allowed: set[str], failed: Callable[[str], HostError]) -> None:
    """:func:`download_bundle` goes to a loopback literal ``host`` only when the user allowed it (``allowed``)."""
    from hostd.remote.endpoint import _host_is_loopback_literal  # noqa: PLC0415 - only an mcpb install pays for it

    if _host_is_loopback_literal(host) and host.lower().rstrip(".") not in allowed:
        # hostd/remote/connect.py lets a loopback literal through (a manifest the user approved
        # wrote it); a stranger's registry entry may not point hostd at this machine.
        raise failed(
            f"cannot be fetched: {host} is this machine; hostd downloads from a loopback or "
            "private address only from a host the user names with --allow-private-download"
        )


def _redirect_target(
    response: httpx2.Response, hop: int, max_redirects: int, failed: Callable[[str], HostError]
) -> str:
    """Where the redirect ``response`` (the ``hop``-th) points: a URL hostd fetches, within ``max_redirects``."""
    location = response.headers.get("location", "")
    target = str(response.url.join(location))
    problem = resource_problem(target)
    if problem is not None:
        raise failed(f"redirected to a URL that {problem[1]}")
    if hop == max_redirects:
        raise failed(f"more than {max_redirects} redirects")
    return target


def _check_answer(response: httpx2.Response, url: str, max_bytes: int, failed: Callable[[str], HostError]) -> None:
    """The answer from ``url`` is a 200 in identity encoding, not declared larger than ``max_bytes``."""
    if response.status_code != 200:
        raise failed(f"HTTP status {response.status_code} from {url}")
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise failed(f"Content-Encoding {encoding!r} (hostd asked for identity)")
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise failed(f"larger than {max_bytes} bytes (Content-Length {declared})")
