/**
 * Bounded newline-delimited JSON framing, the same rules as hostd's own decoder (hostd/wire/framing.py):
 *
 * - a line ends at the byte `\n` only (never U+2028, which JSON encoders write unescaped inside
 *   strings); a trailing `\r` is dropped, so `\r\n` works; blank lines are skipped; a leading
 *   UTF-8 byte-order mark is dropped;
 * - a line may arrive across any number of chunks, a multi-byte character split between two;
 *   lines are decoded only when complete;
 * - the decoder never holds more than `maxLineBytes` of an unfinished line: past it, it reports
 *   `too-long` once, drops what it held, discards up to the next `\n` and resumes there;
 * - only new bytes are searched for a newline, so a line arriving byte by byte costs O(n).
 */

/** hostd's bound on one message it accepts from the parent (docs/protocol.md "Framing"), in bytes. */
export const DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024;

/** One event of the decoder. */
export type LineEvent =
  | { kind: "message"; value: unknown; bytes: number }
  | { kind: "invalid"; error: string; head: string }
  | { kind: "too-long"; limit: number; head: string };

const NEWLINE = 0x0a;
const CR = 0x0d;
const HEAD_BYTES = 80;
const utf8 = new TextDecoder("utf-8", { fatal: true });
const lenient = new TextDecoder("utf-8", { fatal: false });

/** Sans-IO NDJSON decoder with a per-line byte bound. */
export class NdjsonDecoder {
  readonly maxLineBytes: number;
  #parts: Uint8Array[] = [];
  #held = 0;
  #discarding = false;
  #first = true;

  /** @param maxLineBytes the bound of one line, in bytes (the `\r` counted, the `\n` not); at least 1. */
  constructor(maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {
    if (!(maxLineBytes >= 1)) throw new RangeError("maxLineBytes must be positive");
    this.maxLineBytes = maxLineBytes;
  }

  /** Bytes of the unfinished line held now (0 while discarding). */
  get pendingBytes(): number {
    return this.#held;
  }

  /** Consume one chunk of bytes; return the events it completes, in order. */
  feed(chunk: Uint8Array): LineEvent[] {
    const events: LineEvent[] = [];
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      const stop = newline < 0 ? chunk.length : newline;
      const piece = chunk.subarray(start, stop);
      if (this.#discarding) {
        // skip
      } else if (this.#held + piece.length > this.maxLineBytes) {
        events.push({ kind: "too-long", limit: this.maxLineBytes, head: this.#head(piece) });
        this.#parts = [];
        this.#held = 0;
        this.#discarding = true;
      } else if (piece.length > 0) {
        this.#parts.push(newline < 0 ? piece.slice() : piece);
        this.#held += piece.length;
      }
      if (newline < 0) break;
      if (this.#discarding) {
        this.#discarding = false;
      } else {
        const line = this.#take();
        this.#emit(line, events);
      }
      start = newline + 1;
    }
    return events;
  }

  /**
   * Consume one line already split by the transport (Tauri's `stdout` `data` event): the same
   * bound and rules as `feed`, for a line without its `\n`.
   */
  feedLine(line: string): LineEvent[] {
    const bytes = new TextEncoder().encode(line);
    if (bytes.length > this.maxLineBytes) {
      return [{ kind: "too-long", limit: this.maxLineBytes, head: this.#head(bytes) }];
    }
    const events: LineEvent[] = [];
    this.#emit(bytes, events);
    return events;
  }

  #head(piece: Uint8Array): string {
    const held = this.#parts.length > 0 ? concat(this.#parts, Math.min(this.#held, HEAD_BYTES)) : new Uint8Array();
    const head = concat([held, piece.subarray(0, HEAD_BYTES)], HEAD_BYTES);
    return lenient.decode(head);
  }

  #take(): Uint8Array {
    const line = concat(this.#parts, this.#held);
    this.#parts = [];
    this.#held = 0;
    return line;
  }

  #emit(raw: Uint8Array, events: LineEvent[]): void {
    let line = raw;
    if (this.#first && line.length >= 3 && line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) {
      line = line.subarray(3);
    }
    this.#first = false;
    if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, line.length - 1);
    if (line.length === 0 || line.every((b) => b === 0x20 || b === 0x09)) return;
    try {
      events.push({ kind: "message", value: JSON.parse(utf8.decode(line)), bytes: raw.length });
    } catch (error) {
      events.push({ kind: "invalid", error: String(error), head: lenient.decode(line.subarray(0, HEAD_BYTES)) });
    }
  }
}

function concat(parts: Uint8Array[], limit: number): Uint8Array {
  const out = new Uint8Array(limit);
  let at = 0;
  for (const part of parts) {
    if (at >= limit) break;
    const take = part.subarray(0, limit - at);
    out.set(take, at);
    at += take.length;
  }
  return out;
}

/** One message as a line: compact JSON and `\n`. Throws `TypeError` for a value JSON cannot hold. */
export function encodeLine(message: unknown): string {
  const text = JSON.stringify(message);
  if (text === undefined) throw new TypeError("the message is not JSON-serialisable");
  return `${text}\n`;
}
