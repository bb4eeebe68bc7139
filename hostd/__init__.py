"""hostd: a plugin host daemon that runs MCP servers as isolated process trees.

The parent application drives hostd over JSON-RPC 2.0 on stdin/stdout
(see ``docs/protocol.md``). This package must stay cheap to import: the
``initialize`` answer is the readiness signal, so heavy modules (the mcp SDK,
jsonschema) are imported lazily, off the start path.
"""

__version__ = "0.1.0"
