"""The fast path of tools/call results: a frame the number check lets through re-encodes byte-exact.

``hostd.plugins.results._as_sent`` forwards the parsed result (orjson writes it back) unless the frame
holds a number orjson might write differently; then it slices the plugin's own bytes. Property:
for any number the check lets through, orjson's round trip gives the same bytes.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hostd.plugins.results import _REWRITTEN_NUMBER

NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(lambda n: str(n).encode()),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda f: repr(f).encode()),
    st.from_regex(rb"\A-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?\Z", fullmatch=True),
)


@settings(max_examples=1000, deadline=None)
@given(NUMBERS)
def test_a_number_let_through_round_trips_byte_exact(number: bytes) -> None:
    frame = b'{"structuredContent":{"n":' + number + b"}}"
    # Only the numbers the check lets through are the property's; should the check let none through,
    # hypothesis fails the test (Unsatisfiable, or the filter_too_much health check) rather than pass it.
    assume(_REWRITTEN_NUMBER.search(frame) is None)
    assert orjson.dumps(orjson.loads(frame)) == frame


def test_an_ordinary_response_takes_the_fast_path() -> None:
    """The envelope's "jsonrpc":"2.0" is not a number (the search skips it); a plain result passes."""
    from hostd.plugins.results import _as_sent  # noqa: PLC0415
    from hostd.wire.content import ContentLimits  # noqa: PLC0415

    out = {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"text": "hi", "length": 2}}
    raw = orjson.dumps({"jsonrpc": "2.0", "id": "hostd-5", "result": out})
    assert _as_sent(out, raw, ContentLimits()) is out
    exact = raw.replace(b'"length":2', b'"length":2.50')
    assert isinstance(_as_sent(out, exact, ContentLimits())["structuredContent"], orjson.Fragment)


def test_forms_that_change_take_the_exact_path() -> None:
    for number in (b"1E2", b"1e22", b"18446744073709551616", b"1.50", b"-0", b"0.000001", b"1.5E+3"):
        frame = b'{"n":' + number + b"}"
        assert orjson.dumps(orjson.loads(frame)) != frame
        assert _REWRITTEN_NUMBER.search(frame) is not None


@pytest.mark.parametrize(
    "frame",
    [
        b'{"jsonrpc":"2.0","id":1,"result":{"n":1}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"v":"2.0","w":["2.0","2.0"]}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"n":1.50}}',
        b'{"jsonrpc":"2.0","id":1,"result":{"v":"2.0","n":-0}}',
        b'{"n":1e5,"jsonrpc":"2.0"}',
        b'"2.0"',
        b".0",
        b'{"v":"12.0"}',
    ],
)
def test_the_jsonrpc_version_is_skipped_in_place(frame: bytes) -> None:
    # The class: a "2.0" string is never a number that orjson rewrites, wherever it is; every
    # other match still sends the frame down the exact path (as searching without the "2.0"s did).
    from hostd.plugins.results import _may_be_rewritten  # noqa: PLC0415

    assert _may_be_rewritten(frame) == (_REWRITTEN_NUMBER.search(frame.replace(b'"2.0"', b"")) is not None)
