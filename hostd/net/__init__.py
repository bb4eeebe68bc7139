"""Network by domain (issue 26): a plugin's allowlist (``allowlist``: parsing, matching and address rules, sans-IO)
and the trio HTTP proxy that enforces it for a plugin in its own network namespace (``proxy``, ``handoff``), with
transparent mode for clients that ignore the proxy variables (``dns``: fake-address answers, sans-IO;
``transparent``: serving them and the namespace's listeners). May import: ``hostd.wire``.
"""
