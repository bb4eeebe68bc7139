"""hostd as an MCP server (``hostd mcp``): the tools of a state folder's enabled plugins behind one MCP endpoint any
MCP client can start, each plugin sandboxed and gated as through the control protocol. The sans-IO server session
(both protocol eras, ``session``), the conversion of hostd's tools and failures (``tools``), resources and prompts
of every plugin (``features``), tool search (``search``), the driver in front of an in-process host (``server``,
on stdio) and its Streamable HTTP side on loopback (``http``). May import every layer below it (``hostd.host`` and
down); only ``hostd.cli`` imports it.
"""
