"""The host: the installed plugins and their records, grants, approvals and the trust gate, the install paths, and the
control methods it serves (``service.Host.METHODS``; the MCP feature methods in ``feature_methods``, written against
a small lookup interface). May import every layer below it (``hostd.plugins``, ``hostd.mcp``, ``hostd.install``,
``hostd.control``, ``hostd.remote``, ``hostd.storage``, ``hostd.wire``, ``sandbox``); only ``hostd.cli`` imports it,
by name.
"""
