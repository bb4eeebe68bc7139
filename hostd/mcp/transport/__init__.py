"""The transports of the plugin link: ``stdio`` (a sandboxed process's pipes, :mod:`hostd.mcp.transport.stdio`)
and Streamable HTTP / SSE (a remote server, :mod:`hostd.mcp.transport.http`, loaded only when a remote plugin
starts). Each subclasses the link's driver (:class:`hostd.mcp.link.PluginLink`) and provides its inbound loop
and outbound hook; it may import :mod:`hostd.mcp`'s modules and the layers below, never the plugins above.
"""
