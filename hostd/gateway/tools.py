"""What the gateway's MCP client sees of hostd's tools: a listed tool, a call's result, a call's failure.

Sans-IO. The names are hostd's own (``<plugin id>.<MCP tool name>``, :class:`hostd.control.models.HostTool`'s
``name``), the names a parent of the control protocol calls: one tool has one name whichever way it is reached.
The MCP 2025-11-25 "Tools" rules on errors decide the mapping of hostd's failures:

- A failure of the tool itself (the plugin answered ``isError: true``: ``MCP_TOOL_CALL_FAILED``) is relayed as it
  came: ``{content, structuredContent?, isError: true}``.
- Every other failure of a call the client named rightly (a permission or a file not granted, a plugin not
  ready, a timeout, an invalid result, arguments the schema refuses) is a *tool execution error* too: a model
  reads it and can act on it (tell its user the hostctl command that grants it). ``isError: true``, the message as
  text, and hostd's error object under ``_meta["hostd/error"]`` (``{code, message, data: {kind, ...}}``) for a
  program.
- A call naming no tool hostd serves, or with params that are not ``{name, arguments?}``, is a protocol error:
  the JSON-RPC error itself (:data:`PROTOCOL_ERRORS`).
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any

from hostd.wire import advice
from hostd.wire.errors import ErrorKind, HostError

#: The ``_meta`` key of a failed call's result that carries hostd's error object.
ERROR_META_KEY = "hostd/error"
#: Failures of ``tools/call`` answered as JSON-RPC errors (the request was wrong), not as tool results.
PROTOCOL_ERRORS = frozenset({ErrorKind.TOOL_NOT_FOUND, ErrorKind.INVALID_PARAMS, ErrorKind.INVALID_REQUEST})
#: The MCP ``Tool`` members hostd's ``HostTool`` carries over as they are (``execution`` is hostd's to honour: a
#: task-only tool is called as a task behind a plain ``tools/call``, so the client is not told).
_TOOL_MEMBERS = ("name", "description", "inputSchema", "outputSchema", "annotations")


def mcp_tool(host_tool: dict[str, Any]) -> dict[str, Any]:
    """The MCP ``Tool`` of one ``tools/list`` entry of the control protocol (``HostTool``'s wire form):
    ``{name, description, inputSchema, outputSchema?, annotations?}`` with the values as the plugin sent them."""
    return {key: host_tool[key] for key in _TOOL_MEMBERS if host_tool.get(key) is not None}


def hostctl_program(state_dir: str | None) -> str:
    """How the person behind an MCP client runs hostctl for this hostd's state folder, as text for a shell: the
    ``hostctl`` console script beside the ``hostd`` one that runs (a venv's ``bin/``), else this interpreter's
    ``-m hostd.cli.hostctl`` (``python -m hostd``), else ``hostctl``; with ``--state-dir`` when one is given."""
    script = sys.argv[0] if sys.argv else ""
    beside = os.path.join(os.path.dirname(script), "hostctl")
    if os.path.basename(script) == "hostd" and os.access(beside, os.X_OK):
        program = shlex.quote(beside)
    elif not getattr(sys, "frozen", False) and sys.executable:
        program = f"{shlex.quote(sys.executable)} -m hostd.cli.hostctl"
    else:
        program = "hostctl"
    return f"{program} --state-dir {shlex.quote(state_dir)}" if state_dir else program


def call_failure(error: HostError, hostctl: str = "hostctl") -> dict[str, Any] | None:
    """The ``CallToolResult`` a failed ``tools/call`` is answered with, or None when it is a protocol error
    (:data:`PROTOCOL_ERRORS`: answer the JSON-RPC error).

    ``MCP_TOOL_CALL_FAILED``: the tool's own ``content`` and ``structuredContent`` with ``isError: true``. Any other
    failure: ``{content: [{type: "text", text: message}], isError: true, _meta: {"hostd/error": error object}}``,
    the text with hostd's advice in hostctl's words (:func:`hostd.wire.advice.cli_words`: a model relays it to a
    person, who runs ``hostctl``, the program as :func:`hostctl_program` says); the error object as hostd made it.
    """
    if error.kind in PROTOCOL_ERRORS:
        return None
    if error.kind is ErrorKind.MCP_TOOL_CALL_FAILED and isinstance(error.data.get("content"), list):
        out: dict[str, Any] = {"content": error.data["content"], "isError": True}
        if error.data.get("structuredContent") is not None:
            out["structuredContent"] = error.data["structuredContent"]
        return out
    return {
        "content": [
            {
                "type": "text",
                "text": advice.cli_words(error.message, error.data, lambda c: advice.with_program(c, hostctl)),
            }
        ],
        "isError": True,
        "_meta": {ERROR_META_KEY: error.to_error_object()},
    }


__all__ = ["ERROR_META_KEY", "PROTOCOL_ERRORS", "call_failure", "hostctl_program", "mcp_tool"]
