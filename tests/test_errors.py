"""The error table: every kind has a code of its own (two branches once both took -32040 and -32041)."""

from __future__ import annotations

from collections import Counter

from hostd.wire.errors import ErrorKind


def test_every_error_kind_has_its_own_code() -> None:
    codes = Counter(kind.code for kind in ErrorKind)
    assert [code for code, count in codes.items() if count > 1] == []


def test_host_codes_stay_in_the_server_error_range() -> None:
    # JSON-RPC reserves -32768..-32000; hostd's own kinds live in -32099..-32000 ("server error").
    own = [kind for kind in ErrorKind if kind.code not in (-32700, -32600, -32601, -32602, -32603, -32800)]
    assert [kind.name for kind in own if not -32099 <= kind.code <= -32000] == []
