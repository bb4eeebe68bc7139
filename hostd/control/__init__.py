"""The control channel with the parent: the wire models of every method's params and result, the control server (framing
of stdin, one task per request, cancellation, the byte-bounded outbox, shutdown) and the OpenRPC document generated
from the models. May import: ``hostd.storage``, ``hostd.wire``, ``sandbox``; never the plugin side (``hostd.mcp``,
``hostd.plugins``) or the host that serves the methods.
"""
