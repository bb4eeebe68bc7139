"""The control channel with the parent: the wire models of every method's params and result, the control core
without I/O (what a message is, in-flight bounds, ``initialize``), the explicit method router, the stdio driver
(framing of stdin, one task per request, cancellation, shutdown), the byte-bounded outbox and the OpenRPC document
generated from the models. May import: ``hostd.storage``, ``hostd.wire``, ``sandbox``; never the plugin side
(``hostd.mcp``, ``hostd.plugins``) or the host that serves the methods.
"""
