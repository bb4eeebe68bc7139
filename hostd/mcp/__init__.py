"""The MCP client of one plugin: the sans-IO session (both protocol eras), the handshake models, the link over hostd's
bounded stdio transport and the Streamable HTTP / SSE transport, the client features (sampling, elicitation, roots)
behind a narrow interface to the host (``client_features.FeatureParent``), and MCP tool -> host tool conversion. May
import: ``hostd.control`` (the wire models, the request context), ``hostd.remote``, ``hostd.storage``,
``hostd.wire``, ``sandbox``; never ``hostd.plugins``, ``hostd.host`` or ``hostd.install``.
"""
