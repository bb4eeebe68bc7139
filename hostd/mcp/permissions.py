"""The reserved ``mcp.*`` permissions: which client feature (MCP spec "Client Features": sampling, elicitation,
roots) each lets a plugin use.

Its own module, importing nothing, so that what only names them (hostctl's tables, hostd/cli/render.py; the
grant gate) does not load the link to a plugin, as :mod:`hostd.mcp.client_features` (which offers the features)
does.
"""

from __future__ import annotations

__all__ = ["CLIENT_FEATURE_PERMISSIONS", "RESERVED_PERMISSIONS"]

#: Client feature -> the reserved permission that lets a plugin use it.
CLIENT_FEATURE_PERMISSIONS = {"sampling": "mcp.sampling", "elicitation": "mcp.elicitation", "roots": "mcp.roots"}
#: Permissions hostd itself gives meaning to: optional (enable does not need them), never in knownPermissions.
RESERVED_PERMISSIONS = frozenset(CLIENT_FEATURE_PERMISSIONS.values())
