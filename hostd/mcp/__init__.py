"""The MCP client of one plugin: the sans-IO session (both protocol eras), the handshake models, the link's driver
(``link``, the era choice in ``negotiate``) and its transports (``transport.stdio``: hostd's bounded stdio;
``transport.http``: Streamable HTTP / SSE), the client features (sampling, elicitation, roots)
behind a narrow interface to the host (``client_features.FeatureParent``), and MCP tool -> host tool conversion. May
import: ``hostd.control`` (the wire models, the request context), ``hostd.remote``, ``hostd.storage``,
``hostd.wire``, ``sandbox``; never ``hostd.plugins``, ``hostd.host`` or ``hostd.install``.
"""
