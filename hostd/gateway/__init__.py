"""hostd as an MCP server (``hostd mcp``): the tools of a state folder's enabled plugins behind one MCP endpoint any
MCP client can start, each plugin sandboxed and gated as through the control protocol. The sans-IO server session
(both protocol eras, ``session``), the conversion of hostd's tools and failures (``tools``) and the stdio driver in
front of an in-process host (``server``). May import every layer below it (``hostd.host`` and down); only
``hostd.cli`` imports it.
"""
