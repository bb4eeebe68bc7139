"""Network by domain (issue 26): a plugin's allowlist (``allowlist``: parsing, matching and address rules, sans-IO)
and the trio HTTP proxy that enforces it for a plugin in its own network namespace. May import: ``hostd.wire``.
"""
