"""MCP tool listing -> host tools: the conversion a start (and a re-discovery) runs (sans-IO).

Theory of operation
-------------------
After a plugin's paginated ``tools/list`` walk, the supervisor hands the raw tool
objects (JSON dicts exactly as the server sent them, pages concatenated) to
:func:`convert_tools`. It either returns the whole set as :class:`~hostd.mcp.tools.RegisteredTool`
values or raises one :class:`~hostd.wire.errors.HostError` listing *every* problem found, so
the registry can register the set atomically or not at all (docs/protocol.md,
``plugins/enable`` steps 9-11).

Two rules shape it:

* **Nothing is fetched.** A ``$ref`` that does not start with ``#`` is rejected at
  conversion (argument validation, :mod:`hostd.mcp.tools`, uses a ``referencing.Registry``
  that cannot retrieve), so a tool's schema can never make hostd open a connection (case D2).
* **Names are kept exact.** ``name`` is ``"<plugin_id>.<remote name>"`` byte for byte
  (``tools/call`` sends the remote name back unchanged); only ``function_name``, the
  identifier handed to model providers, is sanitized (case D1).

What lives here: the provider-safe function names, :func:`convert_tools` and its field, bound,
metaschema and ``$ref`` checks (:class:`ToolProblem`). The host tool itself and the checks of a
call's arguments and result live in :mod:`hostd.mcp.tools`. ``jsonschema`` is imported lazily.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urljoin

from hostd.mcp.tools import (
    PERMISSION_META_KEY,
    RegisteredTool,
    _escape,
    _json_text,
    _json_type,
    _pointer,
    _quote,
    _remember,
    _trim,
    _validator_class,
    schema_libraries,
)
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.jsonlimits import MAX_TOOL_BYTES, check_json
from hostd.wire.text import escape_invisible, invisible

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = [
    "FUNCTION_NAME_MAX_LENGTH",
    "NAME_RULE",
    "OUTPUT_SCHEMA_ANY_ROOT_SINCE",
    "TOOL_NAME_MAX_LENGTH",
    "NameRefusal",
    "ToolProblem",
    "convert_tools",
    "function_name_for",
    "name_invalid",
    "name_refusal",
]

FUNCTION_NAME_MAX_LENGTH: Final = 64
"""Longest ``function_name`` (OpenAI and Anthropic both cap tool names at 64 characters)."""

TOOL_NAME_MAX_LENGTH: Final = 128
"""Longest accepted MCP tool name, in characters (MCP 2025-11-25, "Tool names": 1 to 128)."""
OUTPUT_SCHEMA_ANY_ROOT_SINCE: Final = "2026-07-28"
"""First MCP protocol version whose ``outputSchema`` may have a root other than ``type: object``."""

_UNSAFE_CHARACTER = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTHS: Final = (8, 16, 32)
_MAX_REF_PROBLEMS: Final = 10


@dataclass(frozen=True)
class ToolProblem:
    """One reason a plugin's tool listing was rejected.

    Attributes:
        tool: the remote tool name, or its index in the listing when the name itself
            is unusable (missing, empty, not a string, control characters, too long).
        field: the tool field at fault (``"name"``, ``"inputSchema"``, ``"outputSchema"``,
            ``"_meta.hostd/permission"``, ...) or ``"contributes.tools"`` for a declared
            tool the server did not list.
        message: what is wrong, with the offending value quoted (truncated).
        pointer: JSON pointer inside the schema named by ``field``, when there is one.
    """

    tool: str | int
    field: str
    message: str
    pointer: str | None = None

    def to_wire(self) -> dict[str, Any]:
        """``{"tool", "field", "message", "pointer"?}`` for ``data.problems``."""
        wire: dict[str, Any] = {"tool": self.tool, "field": self.field, "message": self.message}
        if self.pointer is not None:
            wire["pointer"] = self.pointer
        return wire


def function_name_for(host_name: str) -> str:
    """The provider-safe function name for a host tool name (docs/protocol.md, "HostTool" ``function_name``).

    Every character outside ``[A-Za-z0-9_-]`` becomes ``_`` (``"cal.read"`` ->
    ``"cal_read"``, ``"naïve"`` -> ``"na_ve"``). If the result is longer than 64
    characters (or empty), it is cut to a prefix and ``"_"`` plus the first 8 hex
    digits of ``sha256(host_name)`` is appended, giving exactly 64 characters. The
    result depends on ``host_name`` only, so it is stable across runs and restarts.

    Sanitizing can map two host names to one function name; :func:`convert_tools`
    detects that within a plugin and gives every member of a clash a hash suffix.
    """
    sanitized = _UNSAFE_CHARACTER.sub("_", host_name)
    if sanitized and len(sanitized) <= FUNCTION_NAME_MAX_LENGTH:
        return sanitized
    return _hashed_function_name(host_name, _HASH_LENGTHS[0])


def _hashed_function_name(host_name: str, hex_length: int) -> str:
    digest = hashlib.sha256(host_name.encode("utf-8", "surrogatepass")).hexdigest()[:hex_length]
    prefix = _UNSAFE_CHARACTER.sub("_", host_name)[: FUNCTION_NAME_MAX_LENGTH - 1 - hex_length]
    return f"{prefix}_{digest}"


def _assign_function_names(host_names: Sequence[str]) -> dict[str, str]:
    """Function names for a plugin's tools, unique within the set and independent of order.

    Every member of a clash (not just the later one) gets a hash suffix, so the outcome
    does not depend on the order the server listed its tools in; a clash that survives
    (a suffixed name equal to another name) is retried with a longer hash.
    """
    names = {host: function_name_for(host) for host in host_names}
    for hex_length in _HASH_LENGTHS:
        by_function: defaultdict[str, list[str]] = defaultdict(list)
        for host, function in names.items():
            by_function[function].append(host)
        clashes = [hosts for hosts in by_function.values() if len(hosts) > 1]
        if not clashes:
            return names
        for hosts in clashes:
            for host in hosts:
                names[host] = _hashed_function_name(host, hex_length)
    if len(set(names.values())) != len(names):  # only a sha256 prefix collision gets here
        raise HostError(ErrorKind.INTERNAL_ERROR, "could not make function names unique")
    return names


def convert_tools(
    plugin_id: str,
    tools: Sequence[Mapping[str, Any]],
    *,
    permissions: Sequence[str],
    contributes: Sequence[str],
    protocol_version: str | None = None,
    server: tuple[str, str] | None = None,
) -> list[RegisteredTool]:
    """Validate a plugin's MCP tool listing and convert it to host tools (lifecycle steps 8-9).

    Args:
        plugin_id: the manifest ``id``.
        tools: the ``tools`` arrays of every ``tools/list`` page, concatenated, as raw
            JSON objects.
        permissions: the manifest ``permissions``; a tool's ``_meta["hostd/permission"]``
            must be one of them.
        contributes: the manifest ``contributes.tools`` (host names); the discovered set
            must equal it exactly.
        protocol_version: the negotiated MCP version. Before ``2026-07-28`` (and when
            ``None``) an ``outputSchema`` must be ``type: object`` like ``inputSchema``;
            from that version on any JSON Schema root is allowed.
        server: the server's ``serverInfo`` ``(name, version)`` from ``initialize``, when it sent one: a
            rejection names the release that sent the listing (``data.server``), so its remedy is a release.

    Each tool is first held to the bounds of ``hostd.wire.jsonlimits``: every field at most
    ``MAX_JSON_DEPTH`` (64) levels deep, the whole definition at most ``MAX_TOOL_BYTES``
    (128 KiB) as JSON; a tool over one gets that problem only (field and pointer named).
    Then it is checked for: a name that is a non-empty string of at most 128
    characters of MCP's ``[A-Za-z0-9_.-]`` (:func:`name_refusal`), unique in the listing; an ``inputSchema``
    that is present, an object with ``"type": "object"``, valid for the draft its
    ``$schema`` names (2020-12 by default), whose every ``$ref`` is local (``#...``,
    never fetched) and resolves inside the schema; the same for ``outputSchema`` when
    present; ``description`` a string, ``annotations`` and ``_meta`` objects when
    present; a declared permission. Then the set of host names must equal
    ``contributes``: declared-but-missing and listed-but-undeclared names are separate
    problems.

    Returns:
        The host tools in listing order, with unique function names.

    Raises:
        HostError: ``PLUGIN_START_FAILED`` with ``data = {"plugin": plugin_id,
            "problems": [ToolProblem.to_wire(), ...], "missing"?: [host names],
            "unexpected"?: [host names], "server"?: {"name", "version"}}``; all problems are collected,
            not just the first.
    """
    permitted = set(permissions)
    output_any_root = protocol_version is not None and protocol_version >= OUTPUT_SCHEMA_ANY_ROOT_SINCE
    problems, first_index, accepted, bad_name = _check_listing(tools, permitted, output_any_root)
    prefix = f"{plugin_id}."
    missing, unexpected = _contributes_problems(prefix, first_index, contributes, problems)
    if problems:
        raise _listing_rejected(plugin_id, problems, missing, unexpected, server, bad_name=bad_name)
    return _host_tools(plugin_id, accepted)


def _check_listing(
    tools: Sequence[Mapping[str, Any]], permitted: set[str], output_any_root: bool
) -> tuple[list[ToolProblem], dict[str, int], list[tuple[str, dict[str, Any]]], BadName | None]:
    """Each tool of the listing checked (:func:`convert_tools`): ``(problems, the index of each name's first
    listing, (remote name, fields) of the tools without problems, the first tool whose name breaks the
    rule)``."""
    problems: list[ToolProblem] = []
    first_index: dict[str, int] = {}
    accepted: list[tuple[str, dict[str, Any]]] = []  # (remote name, fields) of tools without problems
    bad_name: BadName | None = None

    for index, raw in enumerate(tools):
        if not isinstance(raw, Mapping):
            problems.append(ToolProblem(index, "", f"a tool must be a JSON object, got {_json_type(raw)}"))
            continue
        name = raw.get("name")
        refusal = name_refusal("tool", name)
        if refusal is not None:
            problems.append(ToolProblem(index, "name", refusal.message))
            if bad_name is None:
                bad_name = (index, refusal, problems[-1])
            label: str | int = index
        else:
            assert isinstance(name, str)
            label = name
            if name in first_index:
                problems.append(
                    ToolProblem(
                        name,
                        "name",
                        f"duplicate tool name {_quote(name)} at index {index} "
                        f"(first at index {first_index[name]}); names must be unique",
                    )
                )
            else:
                first_index[name] = index

        limit_problems = _limit_problems(label, raw)
        if limit_problems:
            # Nothing else is checked: the other checks (metaschema, digest) recurse.
            problems.extend(limit_problems)
            continue
        tool_problems, fields = _check_tool_fields(label, raw, permitted, output_any_root)
        problems.extend(tool_problems)
        if isinstance(label, str) and fields is not None and first_index[label] == index:
            accepted.append((label, fields))
    return problems, first_index, accepted, bad_name


def _contributes_problems(
    prefix: str, first_index: dict[str, int], contributes: Sequence[str], problems: list[ToolProblem]
) -> tuple[list[str], list[str]]:
    """The listed names against the manifest's ``contributes.tools``: a problem appended to ``problems`` for
    each declared-but-missing and each listed-but-undeclared host name; returns ``(missing, unexpected)``."""
    declared = set(contributes)
    discovered = {prefix + remote for remote in first_index}
    missing = [host for host in dict.fromkeys(contributes) if host not in discovered]
    unexpected = [prefix + remote for remote in first_index if prefix + remote not in declared]
    for host in missing:
        remote: str | int = host[len(prefix) :] if host.startswith(prefix) else host
        problems.append(
            ToolProblem(
                remote,
                "contributes.tools",
                f"{_quote(host)} is declared in the manifest's contributes.tools but the server did not list it",
            )
        )
    for host in unexpected:
        problems.append(
            ToolProblem(
                host[len(prefix) :],
                "name",
                f"the server lists {_quote(host)} but the manifest's contributes.tools does not declare it",
            )
        )
    return missing, unexpected


def _listing_rejected(
    plugin_id: str,
    problems: list[ToolProblem],
    missing: list[str],
    unexpected: list[str],
    server: tuple[str, str] | None,
    *,
    bad_name: BadName | None = None,
) -> HostError:
    """``PLUGIN_START_FAILED`` for a listing with ``problems`` (all of them in ``data.problems``), naming the
    server release that sent it (``server``: its ``serverInfo`` name and version) when known; ``NAME_INVALID``
    (:func:`name_invalid`, the message led by that tool's problem) when a tool's name breaks the rule."""
    data: dict[str, Any] = {"plugin": plugin_id, "problems": [p.to_wire() for p in problems]}
    if missing:
        data["missing"] = missing
    if unexpected:
        data["unexpected"] = unexpected
    sender = ""
    if server is not None and server[0]:
        data["server"] = {"name": server[0], "version": server[1]}
        sender = f" of {_quote(server[0])}{' version ' + _quote(server[1]) if server[1] else ''}"
    first = problems[0] if bad_name is None else bad_name[2]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    message = (
        f"plugin {plugin_id!r}: tool listing{sender} rejected: tool {_quote(first.tool)}, "
        f"{first.field or 'tool'}: {first.message}{more}"
    )
    if bad_name is not None:
        del data["plugin"]
        return name_invalid(plugin_id, bad_name[0], bad_name[1], message, **data)
    return HostError(ErrorKind.PLUGIN_START_FAILED, message, **data)


def _host_tools(plugin_id: str, accepted: list[tuple[str, dict[str, Any]]]) -> list[RegisteredTool]:
    """The host tools of an accepted listing, in listing order, with unique function names."""
    prefix = f"{plugin_id}."
    function_names = _assign_function_names([prefix + remote for remote, _ in accepted])
    result: list[RegisteredTool] = []
    for remote, fields in accepted:
        host = prefix + remote
        result.append(
            RegisteredTool(
                name=host,
                remote_name=remote,
                plugin=plugin_id,
                function_name=function_names[host],
                description=fields["description"],
                input_schema=fields["inputSchema"],
                output_schema=fields["outputSchema"],
                annotations=fields["annotations"],
                permission=fields["permission"],
                definition_digest=fields["digest"],
                execution=fields["execution"],
            )
        )
    return result


#: The characters of an MCP tool (and prompt) name (MCP 2025-11-25, "Tool names"): an allowlist.
NAME_CHARACTERS: Final = re.compile(r"[A-Za-z0-9_.-]+")
#: The rule a refused name is told (``NAME_INVALID`` ``data.rule``).
NAME_RULE: Final = f"1 to {TOOL_NAME_MAX_LENGTH} characters, each one of A-Z, a-z, 0-9, '_', '-' and '.'"


@dataclass(frozen=True)
class NameRefusal:
    """Why a tool or prompt name breaks MCP's rule: ``message`` (a sentence, the name quoted and escaped) and
    ``data`` for ``NAME_INVALID`` (``what``; ``name`` escaped when it is a string; ``character`` ``"U+XXXX"``
    and ``position`` for a character outside the rule, ``length`` for a name too long)."""

    message: str
    data: dict[str, Any]


def _shown(name: str) -> str:
    """``name`` for a message: ``repr``, cut, and every invisible character Python leaves raw (a variation
    selector, a Hangul filler) escaped too (hostd/wire/text.py)."""
    return escape_invisible(_quote(name))


def name_refusal(what: str, name: object) -> NameRefusal | None:
    """Why ``name`` (of a ``what``: "tool", "prompt") is not MCP's 1 to 128 characters of ``[A-Za-z0-9_.-]``
    (the first character outside it named by code point and position), or ``None`` for a good name.

    The class (issue 29, found item 7): a deny-list of control characters let through names that differ
    only by invisible characters (word joiner, tag characters, Arabic letter mark, variation selectors,
    Hangul fillers), which every rendering shows alike; so names are an allowlist, the spec's, and the
    refusal shows the name with every invisible character escaped.
    """
    if name is None:
        return NameRefusal(f"the {what} has no name", {"what": what, "name": None})
    if not isinstance(name, str):
        return NameRefusal(f"the {what} name must be a string, got {_json_type(name)}", {"what": what, "name": None})
    data: dict[str, Any] = {"what": what, "name": _trim(escape_invisible(name), 200)}
    if not name:
        return NameRefusal(f"the {what} name is empty", {**data, "length": 0})
    if len(name) > TOOL_NAME_MAX_LENGTH:
        return NameRefusal(
            f"the {what} name is {len(name)} characters long; at most {TOOL_NAME_MAX_LENGTH} are allowed",
            {**data, "length": len(name)},
        )
    if NAME_CHARACTERS.fullmatch(name):
        return None
    position, character = next((i, c) for i, c in enumerate(name) if not NAME_CHARACTERS.fullmatch(c))
    code = f"U+{ord(character):04X}"
    shown = code + ("" if invisible(character) else f" {character!r}")
    return NameRefusal(
        f"the {what} name {_shown(name)} contains {shown} at {position}; "
        f"only A-Z, a-z, 0-9, '_', '-' and '.' are allowed",
        {**data, "character": code, "position": position},
    )


#: The first tool of a listing whose name breaks the rule: its index, why, and its problem.
BadName = tuple[int, NameRefusal, ToolProblem]


def name_invalid(plugin_id: str, index: int, refusal: NameRefusal, message: str, **data: Any) -> HostError:
    """``NAME_INVALID`` for the name at ``index`` of a plugin's listing: ``data`` is ``{plugin, index, rule,
    **refusal.data, **data}``; ``message`` the error's sentence."""
    return HostError(
        ErrorKind.NAME_INVALID, message, plugin=plugin_id, index=index, rule=NAME_RULE, **refusal.data, **data
    )


def _limit_problems(label: str | int, raw: Mapping[str, Any]) -> list[ToolProblem]:
    """Depth and size bounds of one tool (``hostd.wire.jsonlimits``): each field's value at most
    ``MAX_JSON_DEPTH`` deep (the problem names the field and the pointer inside it), then
    the whole definition at most ``MAX_TOOL_BYTES`` as JSON. A tool over a bound would
    otherwise be registered and break every unfiltered ``tools/list`` (issue 10)."""
    problems: list[ToolProblem] = []
    for field, value in raw.items():
        exceeded = check_json(value)
        if exceeded is not None:
            problems.append(ToolProblem(label, str(field), exceeded.message, pointer=exceeded.pointer))
    if not problems:
        exceeded = check_json(dict(raw), max_bytes=MAX_TOOL_BYTES)
        if exceeded is not None:
            problems.append(ToolProblem(label, "", f"the tool definition is {exceeded.message}"))
    return problems


def _check_tool_fields(
    label: str | int, raw: Mapping[str, Any], permitted: set[str], output_any_root: bool
) -> tuple[list[ToolProblem], dict[str, Any] | None]:
    """Check one tool's fields other than its name.

    Returns ``(problems, fields)``: ``fields`` holds the normalized ``description``,
    ``inputSchema``, ``outputSchema``, ``annotations``, ``permission`` and ``digest``
    when there is no problem and the name is usable, else ``None``.
    """
    problems: list[ToolProblem] = []

    if "inputSchema" not in raw:
        problems.append(
            ToolProblem(label, "inputSchema", 'missing; the MCP spec requires one (at least {"type": "object"})')
        )
    else:
        problems.extend(_schema_problems(label, "inputSchema", raw["inputSchema"], require_object=True))
    output_schema = raw.get("outputSchema")
    if output_schema is not None:
        problems.extend(_schema_problems(label, "outputSchema", output_schema, require_object=not output_any_root))

    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        problems.append(ToolProblem(label, "description", f"must be a string, got {_json_type(description)}"))
    annotations = raw.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        problems.append(ToolProblem(label, "annotations", f"must be an object, got {_json_type(annotations)}"))

    permission: str | None = None
    meta = raw.get("_meta")
    if meta is not None and not isinstance(meta, Mapping):
        problems.append(ToolProblem(label, "_meta", f"must be an object, got {_json_type(meta)}"))
    elif meta is not None and meta.get(PERMISSION_META_KEY) is not None:
        value = meta[PERMISSION_META_KEY]
        field = f"_meta.{PERMISSION_META_KEY}"
        if not isinstance(value, str):
            problems.append(ToolProblem(label, field, f"must be a string, got {_json_type(value)}"))
        elif value not in permitted:
            declared = ", ".join(sorted(permitted)) or "none"
            problems.append(
                ToolProblem(
                    label,
                    field,
                    f"permission {_quote(value)} is not declared in the manifest's permissions (declared: {declared})",
                )
            )
        else:
            permission = value

    if problems or not isinstance(label, str):
        return problems, None

    fields: dict[str, Any] = {
        "name": label,
        "description": description if description is not None else "",
        "inputSchema": raw["inputSchema"],
        "outputSchema": output_schema,
        "annotations": annotations,
        "permission": permission,
    }
    try:
        canonical = json.dumps(
            fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        message = f"the tool definition cannot be encoded as JSON in UTF-8: {_trim(str(exc))}"
        return [ToolProblem(label, "", message)], None
    fields["digest"] = "sha256:" + hashlib.sha256(canonical).hexdigest()
    # How the tool is called (MCP 2025-11-25 "execution"), not what it means: outside the digest.
    execution = raw.get("execution")
    fields["execution"] = execution if isinstance(execution, dict) else None
    return [], fields


def _schema_problems(label: str | int, field: str, schema: Any, *, require_object: bool) -> list[ToolProblem]:
    """Problems with an ``inputSchema`` / ``outputSchema`` value (case D2).

    Checks, in order: it is a JSON object; its root ``type`` is ``"object"`` when
    ``require_object``; ``$schema`` (if any) is a string; it is valid against the
    metaschema of the draft it declares (2020-12 by default); every ``$ref``,
    ``$dynamicRef`` and ``$recursiveRef`` is local and resolves inside the schema.
    """
    if not isinstance(schema, dict):
        return [ToolProblem(label, field, f"must be a JSON Schema object, got {_json_type(schema)}")]
    if require_object and schema.get("type") != "object":
        got = f"'type' is {_json_text(schema['type'])}" if "type" in schema else "'type' is missing"
        return [ToolProblem(label, field, f'the root must be {{"type": "object"}}; {got}', pointer="/type")]
    declared = schema.get("$schema")
    if declared is not None and not isinstance(declared, str):
        return [ToolProblem(label, field, "'$schema' must be a string", pointer="/$schema")]

    return [ToolProblem(label, field, message, pointer=pointer) for message, pointer in _schema_findings(schema)]


_Finding = tuple[str, "str | None"]  # (message, JSON pointer inside the schema)
_FINDINGS: dict[str, tuple[_Finding, ...]] = {}
_METASCHEMA_VALIDATORS: dict[type[Validator], Validator] = {}


def _schema_findings(schema: dict[str, Any]) -> tuple[_Finding, ...]:
    """Metaschema and reference findings for a schema, memoized by its canonical JSON.

    Metaschema validation costs about a millisecond per schema; a plugin re-listed
    after ``list_changed`` (or restarted) sends the same schemas again, and large
    listings often repeat one schema, so results are kept (at most 4096, oldest
    dropped first). Schemas that cannot be serialized are checked uncached.
    """
    try:
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        key: str | None = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    except (TypeError, ValueError, RecursionError):
        key = None
    if key is not None and (cached := _FINDINGS.get(key)) is not None:
        return cached
    if key is not None and _certainly_clean(schema, canonical):
        _remember(_FINDINGS, key, ())
        return ()

    schema_libraries()
    from jsonschema.exceptions import best_match  # noqa: PLC0415

    validator_class = _validator_class(schema)
    metaschema_validator = _METASCHEMA_VALIDATORS.get(validator_class)
    if metaschema_validator is None:
        # What ``check_schema`` builds on every call, built once per draft.
        meta_class = _validator_class(validator_class.META_SCHEMA)
        metaschema_validator = meta_class(validator_class.META_SCHEMA, format_checker=meta_class.FORMAT_CHECKER)
        _METASCHEMA_VALIDATORS[validator_class] = metaschema_validator
    findings: tuple[_Finding, ...]
    try:
        error = best_match(metaschema_validator.iter_errors(schema))
    except RecursionError:
        findings = (("the schema is nested too deeply to check", None),)
    else:
        if error is not None:
            draft = getattr(validator_class, "__name__", "JSON Schema").removesuffix("Validator")
            message = f"not a valid JSON Schema ({draft}): {_trim(str(error.message))}"
            findings = ((message, _pointer(error.absolute_path)),)
        else:
            findings = tuple(_reference_findings(schema, validator_class))
    if key is not None:
        _remember(_FINDINGS, key, findings)
    return findings


#: Text that sends a schema to the jsonschema path when it occurs anywhere in the schema's canonical JSON:
#: ``"$`` (every keyword the 2020-12 metaschema checks with a ``format``: ``$schema`` as a URI, ``$id``/``$ref``
#: /``$dynamicRef`` as URI references, and ``$anchor``, the draft ``$schema`` selects, the references
#: :func:`_reference_findings` resolves) and ``pattern`` (``pattern``, ``patternProperties``: the ``regex`` format,
#: which jsonschema checks with Python's ``re`` and jsonschema-rs with its own engine). A string value or a
#: property name holding the same text only costs the slower path.
_SLOW_PATH_TEXT: Final = ('"$', "pattern")
#: Deeper schemas take the jsonschema path (which reports one too deep for it as a finding).
_FAST_PATH_DEPTH: Final = 32


def _certainly_clean(schema: dict[str, Any], canonical: str) -> bool:
    """True when ``schema`` certainly has no finding, decided without importing jsonschema (issue 28).

    ``jsonschema`` with ``referencing`` and the metaschemas costs ~0.1 s of CPU to import, paid by every hostd
    whose plugin lists a tool, though nearly every schema a server sends is a plain, valid, reference-free
    object. Such a schema (none of :data:`_SLOW_PATH_TEXT`, at most :data:`_FAST_PATH_DEPTH` deep: no
    ``$schema``, so draft 2020-12 for both libraries) is checked against the 2020-12 metaschema by jsonschema-rs
    (``jsonschema_rs.meta.is_valid``, compiled, already a dependency for argument checks); valid there, it has
    no reference to check and no finding. Anything else, an error of the fast check included, returns False and
    the jsonschema path decides, with its exact message: like :func:`hostd.mcp.tools._fast_valid`, the fast
    path only ever skips work for a schema that is clean. tests/test_tool_schema_fast_path.py holds the two
    libraries to the same verdict on every schema of a corpus of valid and broken ones.
    """
    if any(text in canonical for text in _SLOW_PATH_TEXT) or check_json(schema, max_depth=_FAST_PATH_DEPTH):
        return False
    import jsonschema_rs  # noqa: PLC0415 (compiled; imported with the first listing)

    try:
        return bool(jsonschema_rs.meta.is_valid(schema))
    except Exception:  # anything it cannot take: the jsonschema path
        return False


# Keywords whose value is a schema, a list of schemas, or a map of name -> schema, across
# drafts 4 to 2020-12. Only these are walked: a "$ref" inside "const", "enum",
# "default" or "examples" is data, not a reference.
_SCHEMA_VALUED: Final = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_LIST_OF_SCHEMAS: Final = frozenset({"allOf", "anyOf", "items", "oneOf", "prefixItems"})
_MAP_OF_SCHEMAS: Final = frozenset(
    {"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties", "properties"}
)
_REFERENCE_KEYWORDS: Final = ("$ref", "$dynamicRef", "$recursiveRef")


def _subschemas(schema: dict[str, Any], pointer: str) -> Iterator[tuple[Any, str]]:
    """Yield ``(subschema, its JSON pointer)`` for the immediate subschemas of ``schema``."""
    for keyword, value in schema.items():
        here = f"{pointer}/{_escape(keyword)}"
        if keyword in _SCHEMA_VALUED and isinstance(value, dict | bool):
            yield value, here
        if keyword in _LIST_OF_SCHEMAS and isinstance(value, list):
            for index, item in enumerate(value):
                yield item, f"{here}/{index}"
        if keyword in _MAP_OF_SCHEMAS and isinstance(value, dict):
            for name, item in value.items():
                yield item, f"{here}/{_escape(str(name))}"


def _reference_findings(schema: dict[str, Any], validator_class: Any) -> list[_Finding]:
    """Check every reference in ``schema`` with ``referencing``, the library the validator uses.

    Each ``$ref`` / ``$dynamicRef`` / ``$recursiveRef`` is looked up in a
    registry that holds only this schema (its embedded ``$id`` resources
    crawled) and cannot retrieve: so a check and a later validation always
    agree, and a reference to another document is reported, never fetched.
    The walk that finds the references is iterative (a deep schema cannot
    exhaust the stack) and visits only schema-valued keywords: a ``"$ref"``
    inside ``const`` or ``examples`` is data.
    """
    schema_libraries()
    from referencing import Registry  # noqa: PLC0415
    from referencing.exceptions import NoSuchAnchor, PointerToNowhere, Unresolvable  # noqa: PLC0415
    from referencing.jsonschema import specification_with  # noqa: PLC0415

    specification = specification_with(validator_class.META_SCHEMA.get("$id") or validator_class.META_SCHEMA["id"])
    root = specification.create_resource(schema)
    root_uri = root.id() or "urn:hostd:tool-schema"
    registry: Registry[Any] = Registry().with_resource(root_uri, root).crawl()
    references: list[tuple[str, str, str]] = []  # (ref, pointer of the keyword, base URI)
    stack: list[tuple[Any, str, str]] = [(schema, "", root_uri)]
    while stack:
        node, pointer, base = stack.pop()
        if not isinstance(node, dict):
            continue
        own_id = specification.id_of(node)
        if own_id and not own_id.startswith("#") and node is not schema:
            base = urljoin(base, own_id)
        for keyword in _REFERENCE_KEYWORDS:
            if isinstance(node.get(keyword), str):
                references.append((node[keyword], f"{pointer}/{keyword}", base))
        stack.extend((child, child_pointer, base) for child, child_pointer in _subschemas(node, pointer))

    findings: list[_Finding] = []
    for ref, pointer, base in sorted(references, key=lambda r: r[1]):
        message: str | None = None
        try:
            target = registry.resolver(base_uri=base).lookup(ref).contents
        except PointerToNowhere:
            message = f"$ref {_quote(ref)} does not resolve inside the schema"
        except NoSuchAnchor:
            message = f"$ref {_quote(ref)} names an anchor the schema does not define"
        except Unresolvable:
            message = (
                f"$ref {_quote(ref)} points outside the schema; hostd never fetches schemas, "
                "so inline it (e.g. under $defs) and use a local '#/...' reference"
            )
        else:
            if not isinstance(target, dict | bool):
                message = f"$ref {_quote(ref)} points at {_json_type(target)}, not a schema"
        if message is not None:
            findings.append((f"{message} (at {pointer})", pointer))
    if len(findings) > _MAX_REF_PROBLEMS:
        extra = len(findings) - _MAX_REF_PROBLEMS
        findings = [*findings[:_MAX_REF_PROBLEMS], (f"... and {extra} more bad references", None)]
    return findings
