"""Install time: the manifest model and loader, MCPB bundles and their signatures, bundled runtimes, import of
``mcpServers`` configs, MCP Registry ``server.json`` entries, and the preparation of npx/uvx launches into a plugin's
own environment. Nothing here runs per call. May import: ``hostd.remote``, ``hostd.storage``, ``hostd.wire``,
``sandbox``.
"""
