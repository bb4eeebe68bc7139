"""What hostd keeps on disk: the atomic state document (grants, approvals, records), the per-plugin log files, and the
secret store with its ``${secret:...}`` references. May import: ``hostd.wire`` and ``sandbox``.
"""
