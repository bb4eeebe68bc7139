"""The manifest's field helpers: patterns, constrained types and the checks its models share.

What lives here: the patterns of an id, a permission, an environment variable and an HTTP header name;
the constrained string types (no NUL, declared paths, secret references); the pydantic field factories
(:func:`_model_config`, :func:`_seconds`, :func:`_unique_list`, :func:`_keyed`); the cross-field checks of a
backend's transport (:func:`_transport_errors`, :func:`_details`) and :func:`_duplicates`. The models are in
:mod:`hostd.install.manifest_model`; loading and error rendering in :mod:`hostd.install.manifest`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Final

from pydantic import AfterValidator, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["ENV_NAME_PATTERN", "HEADER_NAME_PATTERN", "ID_PATTERN", "PERMISSION_PATTERN", "REMOTE_TRANSPORTS"]

ID_PATTERN: Final = r"^[a-z0-9][a-z0-9-]{0,62}$"
PERMISSION_PATTERN: Final = r"^[a-z0-9][a-z0-9._-]*$"
ENV_NAME_PATTERN: Final = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: An HTTP header name (RFC 9110 token characters).
HEADER_NAME_PATTERN: Final = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
#: The transports that reach a server over the network (hostd/remote/endpoint.py); ``stdio`` spawns it.
REMOTE_TRANSPORTS: Final = ("streamable-http", "sse")


def _no_nul(value: str) -> str:
    # execve(2) takes NUL-terminated strings: a NUL would silently cut the value short.
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


_ExecString = Annotated[str, AfterValidator(_no_nul)]
_EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
_Permission = Annotated[str, Field(pattern=PERMISSION_PATTERN)]


def _model_config(schema_description: str) -> ConfigDict:
    # ``strict``: a YAML ``30`` stays a number and ``"30"`` stays a string; nothing is coerced,
    # so ``version: 1.0`` or ``env: {DEBUG: 1}`` is an error that says "quote it", not a guess.
    # The schema description replaces the class docstring, which is written for developers.
    # ``defer_build``: the validator is built at the first manifest loaded (:func:`load_manifest`, in a
    # worker thread), not when hostd imports this module before its first host answer (~10 ms).
    return ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        defer_build=True,
        json_schema_extra={"description": schema_description},
    )


def _seconds(description: str, *, most: float, default: float | None = 30) -> Any:
    """A timeout field of the manifest: finite seconds, over 0 and at most ``most`` (``default`` when absent)."""
    return Field(default=default, gt=0, le=most, allow_inf_nan=False, description=description)


def _unique_list(description: str) -> Any:
    """A list field of the manifest: absent means empty, and no item may stand twice (``uniqueItems``)."""
    return Field(default=[], json_schema_extra={"uniqueItems": True}, description=description)


def _keyed(description: str) -> Any:
    """A mapping field of the manifest: absent means empty; its key type's pattern is the only property
    the schema allows (``additionalProperties: false``)."""
    return Field(default={}, json_schema_extra={"additionalProperties": False}, description=description)


def _secret_reference(value: str) -> str:
    from hostd.remote.endpoint import SECRET_REFERENCE  # noqa: PLC0415 - remote imports this module

    if SECRET_REFERENCE.fullmatch(value) is None:
        raise ValueError("must be a secret reference, '${secret:NAME}': a client secret is never written in a manifest")
    return value


def _transport_errors(data: dict[str, Any]) -> list[InitErrorDetails]:
    """What ``backend.transport`` forbids or requires in the raw ``data`` (see Backend._fields_fit_transport)."""
    # A field counts as used when it holds more than its default (a manifest hostd writes back,
    # model_dump, carries every default: ``headers: {}`` on a stdio plugin is not a mistake).
    transport = data.get("transport")
    unset: tuple[object, ...] = (None, [], {}, "strict")
    if transport == "stdio":
        if data.get("command") is None and "command" not in data:
            return [InitErrorDetails(type="missing", loc=("command",), input=data)]
        used: list[str] = [name for name in ("url", "headers", "allow_private", "oauth") if data.get(name) not in unset]
        need = None
    elif transport in REMOTE_TRANSPORTS:
        used = [name for name in ("command", "args", "env", "tcp_ports", "stdout_noise") if data.get(name) not in unset]
        need = None if data.get("url") is not None else "url"
    else:
        return []  # an unknown transport is the field's own error
    errors = [
        InitErrorDetails(
            type=PydanticCustomError("transport_field", "transport '{transport}' does not use '{name}'", ctx),
            loc=(name,),
            input=data[name],
        )
        for name in used
        for ctx in [{"transport": transport, "name": name}]
    ]
    if need is not None:
        errors.append(
            InitErrorDetails(
                type=PydanticCustomError(
                    "transport_field", "transport '{transport}' needs 'url'", {"transport": transport}
                ),
                loc=("url",),
                input=data,
            )
        )
    return errors


def _details(exc: ValidationError) -> list[InitErrorDetails]:
    """``exc``'s errors, re-raisable with their types, locations and messages as they were."""
    out: list[InitErrorDetails] = []
    for err in exc.errors():
        if err["type"] == "value_error":  # _field_error reads the message from ctx["error"]
            out.append(InitErrorDetails(type="value_error", loc=err["loc"], input=err["input"], ctx=err.get("ctx", {})))
        else:
            out.append(
                InitErrorDetails(type=PydanticCustomError(err["type"], err["msg"]), loc=err["loc"], input=err["input"])
            )
    return out


def _declared_path(value: str) -> str:
    # Where a declared need may point: an absolute path or one under the home (``~``, ``${HOME}``)
    # or the plugin's data folder (``${data}``); nothing relative (to what?), no NUL.
    _no_nul(value)
    if not value.startswith(("/", "~/", "${HOME}/", "${data}")) and value not in ("~", "${HOME}"):
        raise ValueError(f"{value!r} must be absolute or start with '~/', '${{HOME}}/' or '${{data}}'")
    return value


_DeclaredPath = Annotated[str, AfterValidator(_declared_path)]


def _duplicates(values: list[str]) -> Iterator[tuple[int, str, int]]:
    """Yield ``(index, value, first_index)`` for every repeat of an earlier value."""
    first: dict[str, int] = {}
    for index, value in enumerate(values):
        if value in first:
            yield index, value, first[value]
        else:
            first[value] = index
