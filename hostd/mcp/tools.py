"""The host tool and the checks of a call against it: arguments and structured results (sans-IO).

:class:`RegisteredTool` is one tool as hostd's registry and the parent see it; a plugin's listing becomes
host tools in :mod:`hostd.mcp.convert`. Here: :func:`validate_arguments` (a ``tools/call``'s
arguments against the tool's ``inputSchema``, before they reach the plugin) and
:func:`structured_content_problem` (a result's ``structuredContent`` against its ``outputSchema``),
a compiled fast path in front of ``jsonschema`` (:func:`_fast_valid`), the bounded validator caches,
and the message helpers both modules share.

**Nothing is fetched.** Argument validation uses a ``referencing.Registry`` that cannot retrieve, so a
tool's schema can never make hostd open a connection (case D2).

``jsonschema`` is imported lazily (it costs ~0.2 s), so importing this module is
cheap and stays off the ``initialize`` path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from hostd.control import models as protocol
from hostd.wire import lazy
from hostd.wire.errors import ErrorKind, HostError
from hostd.wire.jsonlimits import check_json
from hostd.wire.text import has_invisible

if TYPE_CHECKING:
    from jsonschema.protocols import Validator
    from referencing import Registry

__all__ = [
    "PERMISSION_META_KEY",
    "RegisteredTool",
    "structured_content_problem",
    "validate_arguments",
]

PERMISSION_META_KEY: Final = "hostd/permission"
"""The ``_meta`` key on an MCP tool naming the permission it needs (README.md "Writing a plugin")."""

_MAX_QUOTED: Final = 80
_MAX_REASON: Final = 500
_CACHE_SIZE: Final = 4096


@dataclass(frozen=True)
class RegisteredTool:
    """One tool as hostd's registry and the parent see it (docs/protocol.md, "HostTool"; the wire model is
    :class:`hostd.control.models.HostTool`, made by :meth:`to_model`).

    Attributes:
        name: ``"<plugin_id>.<remote_name>"``, exact and stable.
        remote_name: the MCP tool name, sent unchanged in ``tools/call``.
        plugin: the plugin id.
        function_name: provider-safe name (``[A-Za-z0-9_-]``, at most 64 characters),
            unique within the plugin; see :func:`hostd.mcp.convert.function_name_for`.
        description: the MCP ``description``, ``""`` when absent.
        input_schema: the MCP ``inputSchema`` (an object JSON Schema), as sent.
        output_schema: the MCP ``outputSchema`` or ``None``.
        annotations: the MCP ``annotations`` object or ``None``.
        permission: ``_meta["hostd/permission"]`` or ``None``.
        definition_digest: ``"sha256:<64 hex>"`` over the canonical JSON (sorted keys,
            no whitespace, UTF-8) of ``{name, description, inputSchema, outputSchema,
            annotations, permission}`` with the *remote* name: it changes exactly when
            what the tool means or accepts changes.

    The dict fields are shared with the listing they came from: treat them as read-only.
    """

    name: str
    remote_name: str
    plugin: str
    function_name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    permission: str | None
    definition_digest: str
    #: The MCP ``execution`` object (``{taskSupport: "forbidden" | "optional" | "required"}``) or ``None``.
    execution: dict[str, Any] | None = None

    @property
    def task_support(self) -> str:
        """``execution.taskSupport``: ``"forbidden"`` (the default), ``"optional"`` or ``"required"``."""
        value = (self.execution or {}).get("taskSupport")
        return value if value in ("optional", "required") else "forbidden"

    def to_wire(self) -> dict[str, Any]:
        """The ``RegisteredTool`` object of ``tools/list``: ``{name, function_name, description,
        inputSchema, outputSchema?, annotations?, permission?, plugin, enabled}``, ``None`` values omitted."""
        return self.to_model().wire()

    def to_model(self, *, enabled: bool = True) -> protocol.HostTool:
        """This tool as :class:`hostd.control.models.HostTool` (the model ``docs/protocol.md`` documents);
        ``enabled``: whether the user left it enabled (``tools/setEnabled``)."""
        return protocol.HostTool(
            name=self.name,
            function_name=self.function_name,
            description=self.description,
            inputSchema=self.input_schema,
            outputSchema=self.output_schema,
            annotations=self.annotations,
            permission=self.permission,
            execution=self.execution,
            invisibleCharacters=True if has_invisible(self.description) else None,
            plugin=self.plugin,
            enabled=enabled,
        )


def schema_libraries() -> None:
    """Load ``jsonschema`` and ``referencing`` whole, each package before any of its submodules, before a
    function here names a submodule (``from jsonschema.validators import ...``).

    The class (hostd/wire/lazy.py, :func:`~hostd.wire.lazy.load`): a submodule named first in one thread while
    another thread imports the package (a remote plugin's start loads the MCP SDK, and jsonschema with it, in a
    worker) can leave one of them with a "partially initialized module". Costs two dictionary lookups once
    both are loaded. Raises ``INTERNAL_ERROR`` naming the module when one cannot be loaded.
    """
    lazy.load("jsonschema", "checking tool schemas")
    lazy.load("referencing", "checking tool schemas")


def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    """The jsonschema validator class for the draft ``$schema`` names; 2020-12 when absent or unknown."""
    schema_libraries()
    from jsonschema.validators import (  # noqa: PLC0415
        Draft202012Validator,
        validator_for,
    )

    return validator_for(schema, default=Draft202012Validator)


_VALIDATORS: dict[str, Validator] = {}
_CACHE_LOCK = threading.Lock()


def _remember(cache: dict[str, Any], key: str, value: Any) -> None:
    """Store in a bounded cache, dropping the oldest entry when full.

    Locked because callers may run conversion in worker threads (it is CPU-bound).
    """
    with _CACHE_LOCK:
        if key not in cache and len(cache) >= _CACHE_SIZE:
            del cache[next(iter(cache))]
        cache[key] = value


_FAST: dict[tuple[str, str], Any] = {}


def _fast_valid(tool: RegisteredTool, which: str, schema: Mapping[str, Any], value: Any) -> bool:
    """True when ``value`` certainly conforms to ``schema`` (``which``: "input" or "output"), by
    jsonschema-rs (compiled, ~0.1 µs against ~30 µs for the jsonschema walk; the profile of a call
    found the two checks at ~20% of hostd's CPU). False means "ask jsonschema", which then gives the
    exact message: the fast path only ever skips work for a value that is valid. Offline: a remote
    ``$ref`` fails the build, and such a schema always takes the jsonschema path.
    """
    key = (which, tool.definition_digest)
    validator: Any = _FAST.get(key)
    if validator is None:
        import jsonschema_rs  # noqa: PLC0415

        try:
            validator = jsonschema_rs.validator_for(dict(schema), offline=True)
        except Exception:  # any schema it cannot compile: the jsonschema path
            validator = False
        with _CACHE_LOCK:
            if key not in _FAST and len(_FAST) >= _CACHE_SIZE:
                del _FAST[next(iter(_FAST))]
            _FAST[key] = validator
    if validator is False:
        return False
    try:
        return bool(validator.is_valid(value))
    except Exception:  # a value it cannot represent (a huge integer): the jsonschema path
        return False


_NO_RETRIEVAL_REGISTRY: Registry[Any] | None = None


def _validator_for_tool(tool: RegisteredTool) -> Any:
    """A compiled validator for ``tool.input_schema``, cached by ``definition_digest``.

    Compiling costs far more than validating, so validators are kept (at most 4096,
    oldest dropped first). The registry is empty and cannot retrieve: local ``$ref``
    resolve inside the schema (and the bundled metaschemas), nothing is ever fetched.
    """
    global _NO_RETRIEVAL_REGISTRY  # noqa: PLW0603 - built once, immutable
    validator = _VALIDATORS.get(tool.definition_digest)
    if validator is not None:
        return validator
    if _NO_RETRIEVAL_REGISTRY is None:
        from referencing import Registry  # noqa: PLC0415

        # The default ``retrieve`` raises NoSuchResource: an unknown URI is an error, never a download.
        _NO_RETRIEVAL_REGISTRY = Registry()
    validator = _validator_class(tool.input_schema)(tool.input_schema, registry=_NO_RETRIEVAL_REGISTRY)
    _remember(_VALIDATORS, tool.definition_digest, validator)
    return validator


def validate_arguments(tool: RegisteredTool, arguments: Any) -> None:
    """Check ``tools/call`` arguments against the tool's ``inputSchema`` before they reach the plugin.

    Uses the draft the schema's ``$schema`` declares (2020-12 when absent), follows
    local ``$ref`` and never fetches a remote one. ``format`` is an annotation only
    (the 2020-12 default). ``arguments`` is validated as given: pass ``{}`` for a call
    without arguments.

    Arguments nested deeper than ``MAX_JSON_DEPTH`` are refused before validation,
    with the pointer of the first container too deep and ``keyword: null``.

    Raises:
        HostError: ``INVALID_ARGUMENTS`` with ``data = {"tool": tool.name, "pointer":
            JSON pointer of the offending value in ``arguments`` ("" for the whole
            object, e.g. "/point/x"), "reason": jsonschema's message (truncated to 500
            characters), "keyword": the failing schema keyword ("type", "required"...)}``.
            When several errors exist, jsonschema's ``best_match`` picks the one reported.
        HostError: ``INTERNAL_ERROR`` if the schema has a reference that does not resolve
            (:func:`convert_tools` rejects such tools, so this means a bypassed check).
    """
    exceeded = check_json(arguments)
    if exceeded is not None:
        # Deeper than a plugin may be sent: orjson would refuse to encode it (over 255
        # levels) and jsonschema recurses; either way the caller gets the pointer.
        raise HostError(
            ErrorKind.INVALID_ARGUMENTS,
            f"invalid arguments for tool {tool.name!r}: {exceeded.message}",
            tool=tool.name,
            pointer=exceeded.pointer,
            reason=exceeded.message,
            keyword=None,
        )
    if _fast_valid(tool, "input", tool.input_schema, arguments):
        return
    schema_libraries()
    from jsonschema.exceptions import best_match  # noqa: PLC0415
    from referencing.exceptions import Unresolvable  # noqa: PLC0415

    validator = _validator_for_tool(tool)
    try:
        error = best_match(validator.iter_errors(arguments))
    except Unresolvable as exc:
        raise HostError(
            ErrorKind.INTERNAL_ERROR,
            f"tool {tool.name!r} has an inputSchema reference that does not resolve: {exc}",
            tool=tool.name,
        ) from None
    except RecursionError:
        raise HostError(
            ErrorKind.INVALID_ARGUMENTS,
            f"invalid arguments for tool {tool.name!r}: nested too deeply to validate",
            tool=tool.name,
            pointer="",
            reason="nested too deeply to validate",
            keyword=None,
        ) from None
    if error is None:
        return
    pointer = _pointer(error.absolute_path)
    reason = _trim(str(error.message), _MAX_REASON)
    raise HostError(
        ErrorKind.INVALID_ARGUMENTS,
        f"invalid arguments for tool {tool.name!r} at {pointer or '/'}: {reason}",
        tool=tool.name,
        pointer=pointer,
        reason=reason,
        keyword=error.validator,
    )


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _pointer(path: Sequence[Any]) -> str:
    """A JSON pointer (RFC 6901) from a jsonschema error path (``deque`` of keys and indices)."""
    return "".join(f"/{_escape(str(part))}" for part in path)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _json_text(value: Any) -> str:
    """Compact JSON text of a value for a message, cut to a readable length."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return _trim(text, _MAX_QUOTED)


def _trim(text: str, limit: int = _MAX_QUOTED * 4) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _quote(value: str | int) -> str:
    """``repr`` of a (possibly hostile, huge) value, cut to a readable length."""
    if isinstance(value, int):
        return f"#{value}"
    return _trim(repr(value), _MAX_QUOTED)


_OUTPUT_VALIDATORS: dict[str, Validator] = {}


def structured_content_problem(tool: RegisteredTool, value: Any) -> str | None:
    """Why ``value`` (a result's ``structuredContent``) breaks ``tool.output_schema``, or ``None``.

    MCP "Tools / Output Schema": a tool that declares an output schema must
    return conforming structured content. Validators are cached per
    definition digest; remote references are never fetched.
    """
    schema = tool.output_schema
    if schema is None:
        return None
    if value is None:
        return "the tool declares an outputSchema but returned no structuredContent"
    if _fast_valid(tool, "output", schema, value):
        return None
    schema_libraries()
    from jsonschema.exceptions import best_match  # noqa: PLC0415
    from referencing import Registry  # noqa: PLC0415
    from referencing.exceptions import Unresolvable  # noqa: PLC0415

    validator = _OUTPUT_VALIDATORS.get(tool.definition_digest)
    if validator is None:
        validator = _validator_class(schema)(schema, registry=Registry())
        _remember(_OUTPUT_VALIDATORS, tool.definition_digest, validator)
    try:
        error = best_match(validator.iter_errors(value))
    except (Unresolvable, RecursionError) as exc:
        return f"structuredContent cannot be checked: {exc}"
    if error is None:
        return None
    return f"structuredContent at {_pointer(error.absolute_path) or '/'}: {error.message[:300]}"
