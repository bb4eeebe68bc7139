"""Generators of hostd's documentation, run by hand and checked by tests/test_docs.py: docs/protocol.md's tables, schema
and live-captured examples (``python -m docgen.docs [--check] [--examples]``). Not part of the runtime package: it
may import anything of hostd; nothing in hostd imports it.
"""
