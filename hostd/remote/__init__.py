"""Remote plugins' endpoints: what is approved about an endpoint and where hostd's requests may go (``endpoint``), the
connection that reaches only the address that was checked (``connect``), and OAuth with the browser step in the
parent (``oauth``). May import: ``hostd.storage``, ``hostd.wire``, ``sandbox``; not the manifest model
(``endpoint.RemoteBackend`` is the shape it reads).
"""
