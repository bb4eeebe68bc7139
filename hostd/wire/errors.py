"""Error kinds of the control protocol: one table, one exception type.

Every error hostd sends to the parent is a JSON-RPC 2.0 error object
(JSON-RPC 2.0 section 5.1). Standard codes are used where they fit; hostd's own
failures use the server-defined range (-32000 to -32099) and always carry
``data.kind``, a stable symbolic name. ``docs/protocol.md`` renders this table;
a test keeps the two in step.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any


class ErrorKind(Enum):
    """A stable symbolic error name and its numeric JSON-RPC code.

    ``value`` is ``(code, meaning)``; ``name`` is what travels as ``data.kind``.
    """

    PARSE_ERROR = (-32700, "The frame is not valid JSON (or not UTF-8).")
    INVALID_REQUEST = (-32600, "The JSON value is not a valid JSON-RPC 2.0 request.")
    METHOD_NOT_FOUND = (-32601, "No such method.")
    INVALID_PARAMS = (-32602, "The params do not match the method's schema.")
    INTERNAL_ERROR = (-32603, "A bug in hostd; the message says where.")
    SERVER_NOT_INITIALIZED = (-32002, "A request other than initialize arrived before initialize.")
    REQUEST_CANCELLED = (-32800, "The parent cancelled the request with $/cancelRequest.")
    FRAME_TOO_LARGE = (-32001, "A frame from the parent exceeded the control channel's bound.")
    PLUGIN_NOT_FOUND = (-32010, "No installed plugin has that id.")
    MANIFEST_INVALID = (-32011, "The plugin's manifest is missing or invalid; data.errors lists each field.")
    PLUGIN_ALREADY_INSTALLED = (-32012, "A plugin with that id is installed from another folder.")
    PERMISSION_NOT_GRANTED = (-32013, "A permission the plugin declares has not been granted.")
    PERMISSION_UNKNOWN = (-32014, "A permission is not among the parent's knownPermissions.")
    MCP_TRUST_APPROVAL_REQUIRED = (-32015, "The plugin's exact launch has not been approved.")
    PLUGIN_STATE_CONFLICT = (-32016, "The request does not fit the plugin's current state.")
    PLUGIN_START_FAILED = (
        -32017,
        "The plugin could not be started; data.stderrTail has its last lines, data.stderrHead its first when"
        " lines were left out between, data.hint what the sandbox refused.",
    )
    PLUGIN_HOST_UNAVAILABLE = (-32018, "The plugin crashed, broke framing or was stopped during the call.")
    TOOL_CONFLICT = (-32019, "A tool name is already registered by another plugin.")
    TOOL_NOT_FOUND = (-32020, "No registered tool has that name.")
    INVALID_ARGUMENTS = (-32021, "The arguments do not match the tool's inputSchema; data.pointer says where.")
    TOOL_TIMEOUT = (-32022, "The tool did not answer in time; the plugin was sent notifications/cancelled.")
    MCP_TOOL_CALL_FAILED = (-32023, "The tool answered with isError: true; data.content carries its content.")
    MCP_TOOL_RESULT_TOO_LARGE = (-32024, "The tool's result exceeded the result bound.")
    MCP_UPSTREAM_ERROR = (-32025, "The plugin answered with a JSON-RPC error (in data.upstream) or an invalid result.")
    SHUTTING_DOWN = (-32026, "hostd is shutting down and takes no new work.")
    STATE_LOCKED = (-32027, "Another hostd uses the state directory; this one exits with code 75.")
    STATE_UNUSABLE = (-32028, "The state directory or document cannot be used; this hostd exits with code 78.")
    TOOL_DEFINITION_CHANGED = (
        -32030,
        "The tool's definition changed since approval; it is withheld until approved again.",
    )
    IMPORT_INVALID = (-32031, "The config cannot be imported; data.entries gives each entry's outcome.")
    MANIFEST_CHANGED = (-32029, "The manifest changed on disk since it was approved; approve it again.")
    STATE_WRITE_FAILED = (
        -32032,
        "The state document could not be written (data.errno: ENOSPC...); nothing of the request was applied.",
    )
    CAPABILITY_NOT_SUPPORTED = (
        -32034,
        "The server (or the parent) did not declare the capability the method needs; data.capability names it.",
    )
    PARENT_REQUEST_FAILED = (
        -32035,
        "hostd asked the parent (sampling, elicitation, roots) and got an error, no answer in time, or a cancel.",
    )
    TOOL_DISABLED = (
        -32037,
        "The user disabled the tool (tools/setEnabled); it is not listed and not called until enabled again.",
    )
    PREPARE_FAILED = (
        -32042,
        "The plugin's packages could not be prepared (data.reason: unreachable, not-found, failed, unsupported,"
        " spec-unsupported, tool-missing, no-entry, host-refused: an installer tried to reach a host that is not"
        " a registry in use; data.registry, data.output); nothing of it is used.",
    )
    PLUGIN_NOT_PREPARED = (
        -32043,
        "The plugin's launch names a package that is not prepared yet: call plugins/prepare first.",
    )
    HOST_OVERLOADED = (
        -32033,
        "Too many requests are in flight (data.maxInFlight, data.maxInFlightBytes); nothing was done: retry later.",
    )
    CONFIG_REQUIRED = (
        -32040,
        "A required setting (user_config value or secret) is not set; data.missing names each: plugins/configure.",
    )
    PACKAGE_INVALID = (
        -32041,
        "The .mcpb bundle or server.json cannot be installed; data.errors says where and why.",
    )
    STATE_FILE_UNREADABLE = (
        -32038,
        "A file of the state folder the request needs (the secrets file, a plugin's settings) cannot be read;"
        " data.path and data.errno say which and why: make it a readable file or move it away, then retry.",
    )
    PLUGIN_BROKEN = (
        -32039,
        "The plugin's stored files (its manifest, its record in state.json) no longer load; data.source,"
        " data.reason and data.errors say which and why: fix them and send SIGHUP or restart hostd, or uninstall it.",
    )
    PLUGIN_NOT_READY = (
        -32045,
        "The tool's plugin is installed but not ready (data.state: stopped, starting, unhealthy, error;"
        " data.nextRetryAt while a restart is due); data.transient says whether retrying later may work.",
    )
    ACCESS_NOT_GRANTED = (
        -32052,
        "A tools/call names a local file or folder the plugin may not reach, and the parent did not grant it"
        " (data.reason: declined, no-capability, refused); data.grants holds the plugins/grantPath params that"
        " would, data.commands the hostctl commands. The server never saw the call.",
    )
    SECRET_IN_ARGUMENTS = (
        -32049,
        "The launch would put a secret (data.secrets: its names) on the command line, where every process of the"
        " machine reads it in /proc/<pid>/cmdline: pass it through env, or as a 0600 file whose path the argument"
        " names (${user_config.NAME:file} or ${secret:NAME:file} in the manifest; data.remedy), or opt in with"
        " plugins/grant secretArguments: true (shown in launch.secretArguments, a new digest to approve).",
    )
    LISTING_TOO_LARGE = (
        -32050,
        "A plugin listed more tools (prompts, resources, resource templates) than its bound: data.listing, what it"
        " sent (data.count, data.bytes: compact JSON) and the bounds (data.maxCount, default 1024; data.maxBytes,"
        " default 16 MiB); plugins/grant limits.maxTools / limits.maxListingMb set them per plugin. Or one prompt,"
        " resource or resource template over 128 KiB (data.index, data.itemBytes, data.maxItemBytes), which no"
        " page of hostd's could hold.",
    )
    NAME_INVALID = (
        -32059,
        "A plugin's server listed a tool or prompt whose name breaks MCP's rule (data.rule: 1 to 128 characters of"
        " A-Z, a-z, 0-9, '_', '-', '.'): data.what (tool, prompt), data.index (its place in the listing),"
        " data.name (escaped), data.character (U+XXXX) and data.position, or data.length; a tool listing's"
        " other problems are in data.problems. Names are an allowlist: names that differ only by invisible"
        " characters would look alike everywhere they are shown.",
    )
    ANSWER_TOO_LARGE = (
        -32060,
        "hostd's answer would exceed the parent's line bound (8 MiB, the bound hostd's Python and TypeScript"
        " clients read): data.bytes, data.limit. It is sent in the answer's place (a --max-result-bytes over the"
        " line bound lets a tool result grow so); a notification over the bound is dropped and logged.",
    )
    RESOURCE_EXHAUSTED = (
        -32044,
        "The machine or hostd ran out of a resource (data.resource: descriptors, processes, memory, disk; data.errno);"
        " transient (data.transient: true): the request may work once some is freed, retry it then.",
    )
    SECRET_FILE_UNAVAILABLE = (
        -32062,
        "The launch takes a secret as a 0600 file (${secret:NAME:file}; data.secrets: the names), but the plugin"
        " has no private TMPDIR to hold it (hostd runs without a state folder): run hostd with a state folder.",
    )

    @property
    def code(self) -> int:
        """The numeric JSON-RPC error code."""
        return self.value[0]

    @property
    def meaning(self) -> str:
        """One sentence for the documentation table."""
        return self.value[1]


class HostError(Exception):
    """A failure to report to the parent as a JSON-RPC error object.

    ``kind`` picks the code and ``data.kind``; ``data`` adds structured detail
    (``plugin``, ``tool``, ``pointer``, ``stderrTail``, ``upstream``...).
    """

    def __init__(self, kind: ErrorKind, message: str, **data: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.data = data

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC error object: ``{code, message, data: {kind, ...}}``."""
        return {"code": self.kind.code, "message": self.message, "data": {"kind": self.kind.name, **self.data}}


#: errno -> the resource it says ran out. EAGAIN is here as fork's and clone's "no more processes": an EAGAIN
#: of non-blocking I/O never leaves trio, so one that reaches a request is a process or thread not started.
_EXHAUSTED_ERRNO: dict[int, str] = {
    errno.EMFILE: "descriptors",
    errno.ENFILE: "descriptors",
    errno.ENOMEM: "memory",
    errno.ENOSPC: "disk",
    errno.EDQUOT: "disk",
    errno.EAGAIN: "processes",
}


def exhausted(exc: BaseException, doing: str) -> HostError | None:
    """``RESOURCE_EXHAUSTED`` when ``exc`` (or what caused it, or an exception group's member) says a resource
    ran out; ``None`` otherwise.

    The class: a failure of the machine, not of hostd nor of the document being read, answered as if it were
    one of those (``INTERNAL_ERROR: OSError(24, 'Too many open files')`` from an enable under a low descriptor
    limit; ``MANIFEST_INVALID`` for a folder that could not be opened for the same reason). Recognised: an
    ``OSError`` whose errno is in :data:`_EXHAUSTED_ERRNO` (EMFILE, ENFILE, ENOMEM, ENOSPC, EDQUOT, EAGAIN),
    ``MemoryError``, and the ``RuntimeError`` "can't start new thread". ``doing`` says what hostd was doing,
    for the message. ``data``: ``{resource, errno (its name, or null), transient: true}``.
    """
    found = _exhausted_cause(exc, set())
    if found is None:
        return None
    resource, code, text = found
    return HostError(
        ErrorKind.RESOURCE_EXHAUSTED,
        f"hostd ran out of {resource} while {doing} ({text}); retry once some are freed",
        resource=resource,
        errno=errno.errorcode.get(code) if code is not None else None,
        transient=True,
    )


def _exhausted_cause(exc: BaseException, seen: set[int]) -> tuple[str, int | None, str] | None:
    if id(exc) in seen:
        return None
    seen.add(id(exc))
    if isinstance(exc, OSError) and exc.errno in _EXHAUSTED_ERRNO:
        return _EXHAUSTED_ERRNO[exc.errno], exc.errno, exc.strerror or os.strerror(exc.errno)
    if isinstance(exc, MemoryError):
        return "memory", None, "MemoryError"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes", None, str(exc)
    inner: list[BaseException] = []
    if isinstance(exc, BaseExceptionGroup):
        inner.extend(exc.exceptions)
    inner.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)
    for candidate in inner:
        found = _exhausted_cause(candidate, seen)
        if found is not None:
            return found
    return None


def start_failed(plugin_id: str, reason: str, message: str | None = None, /, **data: Any) -> HostError:
    """``PLUGIN_START_FAILED``: ``message`` (default "plugin <id> failed to start: <reason>"), ``data`` is
    ``{plugin, reason, stderrTail, **data}`` (docs/protocol.md, the error's data members). A link passes its
    ``stderrTail``; a start that failed before any process existed (the launch does not resolve, the remote
    server cannot be reached, a module failed to load) gets ``[]``."""
    data.setdefault("stderrTail", [])
    text = message if message is not None else f"plugin {plugin_id} failed to start: {reason}"
    return HostError(ErrorKind.PLUGIN_START_FAILED, text, plugin=plugin_id, reason=reason, **data)


@contextmanager
def unwrap_host_error() -> Iterator[None]:
    """Re-raise a lone :class:`HostError` that a nursery wrapped in an exception group.

    trio's nurseries raise ``ExceptionGroup`` even for a single error; a
    request handler wants the :class:`HostError` itself. Groups holding
    anything else propagate unchanged.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        matched, rest = group.split(HostError)
        # Siblings cancelled because of the HostError are not news.
        if rest is not None and all(type(e).__name__ == "Cancelled" for e in _leaves(rest)):
            rest = None
        if matched is not None and rest is None:
            leaves = list(_leaves(matched))
            if len(leaves) == 1 and isinstance(leaves[0], HostError):
                raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
