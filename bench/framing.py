"""Framing: :class:`hostd.wire.framing.LineDecoder` on its own, in one process, no I/O.

- **Throughput**: a stream of 1 KiB or 1 MiB JSON-RPC messages, cut into
  64 KiB reads (hostd's read size; the chunks are made before the clock
  starts), fed to a decoder with the plugin bound (2 MiB). ``split+bound``
  uses ``parse=lambda b: b`` (finding newlines, bounding, copying each line
  out), ``orjson`` the default parser. MB/s is 10^6 bytes of input per second,
  the median of several passes.
- **Endless line**: 64 MiB without a newline in 64 KiB reads: time until the
  decoder reports ``FrameTooLarge``, time to swallow all 64 MiB, and the
  peak of Python allocations during the whole feed (tracemalloc, in a
  separate pass).
- **Byte at a time**: the same endless line arriving 1 byte per read, under
  the parent bound (8 MiB, so every byte is kept): 1 MiB against 4 MiB. A
  linear decoder takes 4x as long for 4x the bytes; one that rescanned its
  buffer would take 16x.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson

from hostd.wire.framing import PARENT_FRAME_LIMIT, PLUGIN_FRAME_LIMIT, FrameTooLarge, LineDecoder, Message

KIB = 1024
MIB = 1024 * 1024
READ = 64 * KIB


def _message(size: int, shape: str, index: int = 0) -> bytes:
    """One JSON-RPC response line of exactly ``size`` bytes (newline included)."""
    if shape == "text":
        envelope: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": index,
            "result": {"content": [{"type": "text", "text": ""}]},
        }
        base = len(orjson.dumps(envelope)) + 1
        envelope["result"]["content"][0]["text"] = "x" * (size - base)
        line = orjson.dumps(envelope) + b"\n"
    else:  # structured: an array of small objects, padded with a text field
        items: list[dict[str, object]] = []
        envelope = {"jsonrpc": "2.0", "id": index, "result": {"structuredContent": {"items": items}, "pad": ""}}
        used = len(orjson.dumps(envelope)) + 1
        i = 0
        while True:
            item = {"i": i, "name": f"item-{i:06d}", "ok": True, "score": 1.5}
            cost = len(orjson.dumps(item)) + 1
            if used + cost > size:
                break
            items.append(item)
            used += cost
            i += 1
        envelope["result"]["pad"] = "p" * (size - len(orjson.dumps(envelope)) - 1)
        line = orjson.dumps(envelope) + b"\n"
    assert len(line) == size, (len(line), size)
    return line


def _chunks(stream: bytes, read: int = READ) -> list[bytes]:
    return [stream[i : i + read] for i in range(0, len(stream), read)]


def _verify(chunks: list[bytes], count: int) -> None:
    """Every message of the stream decodes as JSON (checked once, off the clock)."""
    decoder = LineDecoder(PLUGIN_FRAME_LIMIT)
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    if len(events) != count or not all(isinstance(event, Message) for event in events):
        raise RuntimeError(f"the stream did not decode into {count} messages")


def _throughput(chunks: list[bytes], parse: Callable[[bytes], Any], expect: int, passes: int) -> float:
    total = sum(len(c) for c in chunks)
    rates = []
    for _ in range(passes):
        decoder = LineDecoder(PLUGIN_FRAME_LIMIT, parse=parse)
        got = 0
        start = time.perf_counter()
        for chunk in chunks:
            got += len(decoder.feed(chunk))
        elapsed = time.perf_counter() - start
        if got != expect:
            raise RuntimeError(f"decoded {got} messages, expected {expect}")
        rates.append(total / elapsed / 1e6)
    return statistics.median(rates)


def _endless(total: int, limit: int) -> dict[str, Any]:
    chunk = b"x" * READ
    reads = total // READ
    decoder = LineDecoder(limit)
    rejected_at: float | None = None
    start = time.perf_counter()
    for _ in range(reads):
        events = decoder.feed(chunk)
        if rejected_at is None and any(isinstance(e, FrameTooLarge) for e in events):
            rejected_at = time.perf_counter() - start
    elapsed = time.perf_counter() - start

    decoder = LineDecoder(limit)
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    for _ in range(reads):
        decoder.feed(chunk)
    peak = tracemalloc.get_traced_memory()[1] - baseline
    tracemalloc.stop()
    return {
        "bytes": total,
        "limit": limit,
        "ms_to_reject": None if rejected_at is None else rejected_at * 1000,
        "ms_total": elapsed * 1000,
        "peak_alloc_mib": peak / MIB,
    }


def _bytewise(total: int) -> float:
    decoder = LineDecoder(PARENT_FRAME_LIMIT)
    one = b"x"
    feed = decoder.feed
    start = time.perf_counter()
    for _ in range(total):
        feed(one)
    elapsed = time.perf_counter() - start
    if decoder.pending_bytes != total:
        raise RuntimeError(f"the decoder holds {decoder.pending_bytes} bytes, expected {total}")
    return elapsed


def run(quick: bool) -> dict[str, Any]:
    """All framing measurements; ``quick`` uses less data and one pass."""
    passes = 1 if quick else 7
    cases = [
        ("1 KiB text", KIB, "text", (2 if quick else 32) * MIB),
        ("1 MiB text", MIB, "text", (4 if quick else 64) * MIB),
        ("1 MiB structured", MIB, "structured", (4 if quick else 64) * MIB),
    ]
    rows = []
    for label, size, shape, total in cases:
        count = total // size
        if size == MIB:
            lines = [_message(size, shape, i % 10) for i in range(min(count, 4))]
            stream = b"".join(lines[i % len(lines)] for i in range(count))
        else:
            stream = b"".join(_message(size, shape, i % 1000) for i in range(count))
        chunks = _chunks(stream)
        del stream
        _verify(chunks, count)
        rows.append(
            {
                "messages": label,
                "bytes": total,
                "split_bound_mb_s": _throughput(chunks, lambda b: b, count, passes),
                "orjson_mb_s": _throughput(chunks, orjson.loads, count, passes),
            }
        )
    endless = [_endless((16 if quick else 64) * MIB, limit) for limit in (PLUGIN_FRAME_LIMIT, PARENT_FRAME_LIMIT)]
    small, large = (64 * KIB, 256 * KIB) if quick else (MIB, 4 * MIB)
    t_small, t_large = _bytewise(small), _bytewise(large)
    return {
        "throughput": rows,
        "endless": endless,
        "bytewise": {
            "small_bytes": small,
            "large_bytes": large,
            "small_s": t_small,
            "large_s": t_large,
            "ratio": t_large / t_small,
            "expected_linear_ratio": large / small,
            "ns_per_byte_small": t_small / small * 1e9,
            "ns_per_byte_large": t_large / large * 1e9,
        },
    }


def table(result: dict[str, Any]) -> list[str]:
    """Markdown rows of the framing section."""
    lines = [
        "| messages (64 KiB reads) | split+bound MB/s | + orjson MB/s |",
        "|---|---:|---:|",
    ]
    for row in result["throughput"]:
        lines.append(f"| {row['messages']} | {row['split_bound_mb_s']:,.0f} | {row['orjson_mb_s']:,.0f} |")
    lines += [
        "",
        "| endless line, 64 KiB reads | bound | ms to reject | ms for all | peak alloc MiB |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in result["endless"]:
        reject = "never" if row["ms_to_reject"] is None else f"{row['ms_to_reject']:.2f}"
        lines.append(
            f"| {row['bytes'] // MIB} MiB | {row['limit'] // MIB} MiB | {reject} "
            f"| {row['ms_total']:.1f} | {row['peak_alloc_mib']:.2f} |"
        )
    b = result["bytewise"]
    lines += [
        "",
        "| endless line, 1 byte per read | seconds | ns/byte |",
        "|---|---:|---:|",
        f"| {b['small_bytes'] // KIB:,} KiB | {b['small_s']:.3f} | {b['ns_per_byte_small']:.0f} |",
        f"| {b['large_bytes'] // KIB:,} KiB | {b['large_s']:.3f} | {b['ns_per_byte_large']:.0f} |",
        f"\n{b['large_bytes'] // b['small_bytes']}x the bytes took {b['ratio']:.2f}x the time "
        f"(linear: {b['expected_linear_ratio']:.0f}x, quadratic: {b['expected_linear_ratio'] ** 2:.0f}x)",
    ]
    return lines
