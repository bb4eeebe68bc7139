/**
 * The NDJSON decoder keeps hostd's framing rules whatever the chunking (hostd/wire/framing.py).
 *
 * The class of bug: a line boundary decided by where a read happened to stop. Members: a line
 * across chunks, a multi-byte character split between chunks, `\r\n`, U+2028 inside a string,
 * blank lines, an over-long line (reported once, then the next line decodes), a line at exactly
 * the bound, invalid JSON, the Tauri line path.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { NdjsonDecoder, type LineEvent } from "../src/index.js";

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

function feedAll(decoder: NdjsonDecoder, chunks: Uint8Array[]): LineEvent[] {
  return chunks.flatMap((chunk) => decoder.feed(chunk));
}

/** Every split of `data` into single bytes, and into two pieces at every offset. */
function chunkings(data: Uint8Array): Uint8Array[][] {
  const out: Uint8Array[][] = [[data], Array.from(data, (b) => Uint8Array.of(b))];
  for (let i = 1; i < data.length; i++) out.push([data.subarray(0, i), data.subarray(i)]);
  return out;
}

test("lines decode the same under every chunking", () => {
  const text = '{"a":"é\u2028x"}\r\n\n  \n{"b":[1,2]}\n{"c":"日本"}\n';
  for (const chunks of chunkings(bytes(text))) {
    const events = feedAll(new NdjsonDecoder(1024), chunks);
    assert.deepEqual(
      events.map((e) => (e.kind === "message" ? e.value : e)),
      [{ a: "é\u2028x" }, { b: [1, 2] }, { c: "日本" }],
    );
  }
});

test("a partial line is held until its newline", () => {
  const decoder = new NdjsonDecoder(1024);
  assert.deepEqual(decoder.feed(bytes('{"a":')), []);
  assert.equal(decoder.pendingBytes, 5);
  assert.deepEqual(decoder.feed(bytes("1}\n")), [{ kind: "message", value: { a: 1 }, bytes: 7 }]);
  assert.equal(decoder.pendingBytes, 0);
});

test("an over-long line is reported once and the next line decodes", () => {
  const long = `{"x":"${"y".repeat(40)}"}`;
  for (const chunks of chunkings(bytes(`${long}\n{"ok":1}\n`))) {
    const events = feedAll(new NdjsonDecoder(16), chunks);
    assert.equal(events.length, 2);
    assert.equal(events[0]!.kind, "too-long");
    assert.equal(events[0]!.kind === "too-long" && events[0]!.limit, 16);
    assert.deepEqual(events[1], { kind: "message", value: { ok: 1 }, bytes: 8 });
  }
});

test("the bound counts the \\r: a line of exactly the bound passes, one byte more does not", () => {
  const line = '{"a":"12345678"}'; // 16 bytes
  assert.deepEqual(new NdjsonDecoder(16).feed(bytes(`${line}\n`))[0]?.kind, "message");
  assert.deepEqual(new NdjsonDecoder(16).feed(bytes(`${line}\r\n`))[0]?.kind, "too-long");
  assert.deepEqual(new NdjsonDecoder(17).feed(bytes(`${line}\r\n`))[0]?.kind, "message");
});

test("invalid JSON and invalid UTF-8 are reported, not thrown", () => {
  const decoder = new NdjsonDecoder(1024);
  const events = decoder.feed(Uint8Array.of(...bytes("{nope}\n"), 0x22, 0xff, 0x22, 0x0a, ...bytes("2\n")));
  assert.deepEqual(
    events.map((e) => e.kind),
    ["invalid", "invalid", "message"],
  );
});

test("the Tauri line path has the same bound and rules", () => {
  const decoder = new NdjsonDecoder(16);
  assert.deepEqual(decoder.feedLine('{"a":1}\r'), [{ kind: "message", value: { a: 1 }, bytes: 8 }]);
  assert.deepEqual(decoder.feedLine(""), []);
  assert.equal(decoder.feedLine(`"${"x".repeat(20)}"`)[0]?.kind, "too-long");
  assert.equal(decoder.feedLine("{")[0]?.kind, "invalid");
});
