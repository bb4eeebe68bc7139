"""What every layer of hostd stands on: NDJSON framing, JSON depth and size bounds, aggregate content bounds, the error
catalog, secret redaction, the pipe helpers, tracing spans, and the lazy loader of off-start-path modules. All of it
is sans-IO or close to it. May import: the standard library, third-party packages, ``hostd`` (``__version__``) and
``sandbox``; nothing else of hostd.
"""
