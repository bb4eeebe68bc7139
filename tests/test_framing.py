"""The bounded NDJSON decoder: exact events, chunking independence, bounds."""

from __future__ import annotations

import json
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from hostd.wire.framing import FrameDiscarded, FrameTooLarge, InvalidJSON, LineDecoder, Message, encode


def feed_all(decoder: LineDecoder, chunks: list[bytes]) -> list[object]:
    events: list[object] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


def values(events: Sequence[object]) -> list[object]:
    return [e.value if isinstance(e, Message) else type(e).__name__ for e in events]


def test_messages_split_and_glued() -> None:
    data = b'{"a":1}\n{"b":[1,2]}\r\n\r\n\n{"c":"\xc3\xa9"}\n'
    assert values(LineDecoder(100).feed(data)) == [{"a": 1}, {"b": [1, 2]}, {"c": "é"}]
    one_byte = [data[i : i + 1] for i in range(len(data))]
    assert values(feed_all(LineDecoder(100), one_byte)) == [{"a": 1}, {"b": [1, 2]}, {"c": "é"}]


def test_bom_and_u2028_inside_strings() -> None:
    line = '{"t":"a\u2028b"}'.encode()
    assert values(LineDecoder(100).feed(b"\xef\xbb\xbf" + line + b"\n")) == [{"t": "a\u2028b"}]


def test_invalid_json_and_invalid_utf8_name_the_line() -> None:
    events = LineDecoder(100).feed(b'log: starting{"jsonrpc":"2.0"}\n\xff\xfe\n{"ok":true}\n')
    assert isinstance(events[0], InvalidJSON)
    assert events[0].head == b'log: starting{"jsonrpc":"2.0"}'
    assert isinstance(events[1], InvalidJSON)
    assert events[1].head == b"\xff\xfe"
    assert events[2] == Message(value={"ok": True}, size=11)


def test_over_long_line_reported_early_then_resumes() -> None:
    decoder = LineDecoder(10)
    assert decoder.feed(b"12345") == []
    assert decoder.pending_bytes == 5
    events = decoder.feed(b"678901")
    assert events == [FrameTooLarge(limit=10, head=b"12345678901")]
    assert decoder.pending_bytes == 0
    assert decoder.feed(b"x" * 1000) == []
    assert decoder.pending_bytes == 0
    events = decoder.feed(b'yyy\n{"n":1}\n')
    # The end of the discarded line: its size and last bytes (to tell which request it answered).
    assert events[0] == FrameDiscarded(limit=10, head=b"12345678901", tail=b"x" * 77 + b"yyy", size=1014)
    assert values(events[1:]) == [{"n": 1}]


def test_a_discarded_line_in_one_read_reports_its_head_tail_and_size() -> None:
    line = b'{"jsonrpc":"2.0","result":{"blob":"' + b"z" * 200 + b'"},"id":"hostd-7"}'
    events = LineDecoder(100).feed(line + b"\r\n" + b'{"n":2}\n')
    assert events[0] == FrameTooLarge(limit=100, head=line[:80])
    assert events[1] == FrameDiscarded(limit=100, head=line[:80], tail=line[-80:], size=len(line) + 1)
    assert values(events[2:]) == [{"n": 2}]


def test_bound_is_exact() -> None:
    line = b'"' + b"x" * 8 + b'"'  # 10 bytes
    assert values(LineDecoder(10).feed(line + b"\n")) == ["x" * 8]
    assert values(LineDecoder(9).feed(line + b"\n")) == ["FrameTooLarge", "FrameDiscarded"]
    # the same verdict when the newline arrives in a later read
    decoder = LineDecoder(10)
    assert decoder.feed(line) == []
    assert values(decoder.feed(b"\n")) == ["x" * 8]


def test_endless_line_holds_at_most_the_bound() -> None:
    decoder = LineDecoder(1024)
    reports = 0
    for _ in range(10_000):
        reports += len(decoder.feed(b"x" * 4096))
        assert decoder.pending_bytes <= 1024
    assert reports == 1


def test_byte_at_a_time_is_linear() -> None:
    # 2 MiB line fed one byte per call: quadratic rescanning would take minutes.
    decoder = LineDecoder(4 * 1024 * 1024)
    payload = encode({"blob": "y" * (2 * 1024 * 1024)})
    view = memoryview(payload)
    events: list[object] = []
    for i in range(len(payload)):
        events.extend(decoder.feed(bytes(view[i : i + 1])))
    assert len(events) == 1
    assert isinstance(events[0], Message)
    assert len(events[0].value["blob"]) == 2 * 1024 * 1024


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=8), st.data())
def test_any_chunking_gives_the_same_messages(messages: list[object], data: st.DataObject) -> None:
    stream = b"".join(encode(m) for m in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert values(feed_all(LineDecoder(1 << 20), chunks)) == messages


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.data(), st.integers(1, 64))
def test_arbitrary_bytes_never_buffer_past_the_bound(blob: bytes, data: st.DataObject, limit: int) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=10)))
    chunks = [blob[a:b] for a, b in zip([0, *cuts], [*cuts, len(blob)], strict=True)]
    decoder = LineDecoder(limit)
    events: list[object] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
        assert decoder.pending_bytes <= limit
    whole = LineDecoder(limit).feed(blob)
    # the verdicts never depend on chunking
    assert [type(e) for e in events] == [type(e) for e in whole]
    for event in events:
        if isinstance(event, Message):
            assert event.size <= limit
            assert json.loads(json.dumps(event.value)) == event.value
