/**
 * Requests hostd sends the parent (sampling, elicitation, roots, authorization): routing, answers,
 * errors, and hostd's `$/cancelRequest` aborting the handler. Driven through an in-memory
 * transport, as hostd does not send these requests yet in this build: the wire bytes are asserted.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  HostdClient,
  HostdClosedError,
  HostdError,
  NdjsonDecoder,
  encodeLine,
  type Transport,
  type TransportSink,
} from "../src/index.js";

class Loopback implements Transport {
  sent: unknown[] = [];
  sink!: TransportSink;
  #waiters: Array<() => void> = [];
  readonly #decoder = new NdjsonDecoder(1024);
  start(sink: TransportSink): void {
    this.sink = sink;
  }
  async write(line: string): Promise<void> {
    this.sent.push(JSON.parse(line));
    for (const wake of this.#waiters.splice(0)) wake();
  }
  async end(): Promise<void> {}
  /** hostd writes `message` (as bytes, through the decoder). */
  deliver(message: unknown): void {
    this.sink.events(this.#decoder.feed(new TextEncoder().encode(encodeLine(message))));
  }
  async next(count: number): Promise<unknown[]> {
    while (this.sent.length < count) await new Promise<void>((resolve) => this.#waiters.push(resolve));
    return this.sent.slice(0, count);
  }
}

test("hostd's requests reach their handlers and are answered", async () => {
  const wire = new Loopback();
  const client = new HostdClient(wire);
  client.onSampling(async (params) => ({ echoed: params }));
  client.onRoots(() => ({ roots: [{ uri: "file:///w" }] }));
  client.onElicitation(() => {
    throw new HostdError(-32042, "user declined", { kind: "DECLINED" });
  });
  client.onAuthorize(() => {
    throw new Error("no browser");
  });
  wire.deliver({ jsonrpc: "2.0", id: 1, method: "sampling/createMessage", params: { plugin: "p", params: { x: 1 } } });
  wire.deliver({ jsonrpc: "2.0", id: "r", method: "roots/list", params: { plugin: "p" } });
  wire.deliver({ jsonrpc: "2.0", id: 3, method: "elicitation/create", params: { plugin: "p" } });
  wire.deliver({ jsonrpc: "2.0", id: 4, method: "auth/authorize", params: { plugin: "p", url: "https://a" } });
  wire.deliver({ jsonrpc: "2.0", id: 5, method: "unknown/thing", params: {} });
  const sent = await wire.next(5);
  const byId = new Map(sent.map((m) => [(m as { id: unknown }).id, m]));
  assert.deepEqual(byId.get(1), { jsonrpc: "2.0", id: 1, result: { echoed: { plugin: "p", params: { x: 1 } } } });
  assert.deepEqual(byId.get("r"), { jsonrpc: "2.0", id: "r", result: { roots: [{ uri: "file:///w" }] } });
  assert.deepEqual(byId.get(3), {
    jsonrpc: "2.0",
    id: 3,
    error: { code: -32042, message: "user declined", data: { kind: "DECLINED" } },
  });
  assert.deepEqual(byId.get(4), { jsonrpc: "2.0", id: 4, error: { code: -32603, message: "no browser" } });
  assert.deepEqual(byId.get(5), {
    jsonrpc: "2.0",
    id: 5,
    error: { code: -32601, message: "the parent does not serve unknown/thing" },
  });
});

test("hostd's $/cancelRequest aborts the handler's signal", async () => {
  const wire = new Loopback();
  const client = new HostdClient(wire);
  let aborted: () => void = () => undefined;
  const wasAborted = new Promise<void>((resolve) => {
    aborted = resolve;
  });
  client.onSampling(
    (_params, { signal }) =>
      new Promise((_resolve, reject) => {
        signal.addEventListener("abort", () => {
          aborted();
          reject(new HostdError(-32800, "cancelled", { kind: "REQUEST_CANCELLED" }));
        });
      }),
  );
  let entered: () => void = () => undefined;
  const running = new Promise<void>((resolve) => {
    entered = resolve;
  });
  client.handle("roots/list", () => {
    entered();
    return new Promise(() => undefined);
  });
  client.onElicitation(() => ({ action: "accept" }));
  // Cancelled before its handler ran: answered -32800 without calling it.
  wire.deliver({ jsonrpc: "2.0", id: 8, method: "elicitation/create", params: {} });
  wire.deliver({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 8 } });
  const [early] = await wire.next(1);
  assert.deepEqual(early, { jsonrpc: "2.0", id: 8, error: { code: -32800, message: "cancelled by $/cancelRequest", data: {} } });
  // Cancelled while its handler runs: the handler's signal aborts and the handler answers.
  wire.deliver({ jsonrpc: "2.0", id: 7, method: "roots/list", params: {} });
  await running;
  wire.deliver({ jsonrpc: "2.0", id: 9, method: "sampling/createMessage", params: {} });
  await new Promise((resolve) => setImmediate(resolve));
  wire.deliver({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 9 } });
  await wasAborted;
  const [, answer] = await wire.next(2);
  assert.deepEqual(answer, {
    jsonrpc: "2.0",
    id: 9,
    error: { code: -32800, message: "cancelled", data: { kind: "REQUEST_CANCELLED" } },
  });
});

test("params carry _meta; an abort before the answer sends $/cancelRequest; close rejects the rest", async () => {
  const wire = new Loopback();
  const client = new HostdClient(wire);
  const controller = new AbortController();
  const call = client.request(
    "tools/call",
    { name: "p.t", arguments: {} },
    { signal: controller.signal, meta: { traceparent: "00-1-2-01" } },
  );
  const other = client.request("ping");
  controller.abort();
  const sent = await wire.next(3);
  assert.deepEqual(sent, [
    { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "p.t", arguments: {}, _meta: { traceparent: "00-1-2-01" } } },
    { jsonrpc: "2.0", id: 2, method: "ping", params: {} },
    { jsonrpc: "2.0", method: "$/cancelRequest", params: { id: 1 } },
  ]);
  wire.deliver({ jsonrpc: "2.0", id: 1, error: { code: -32800, message: "cancelled", data: { kind: "REQUEST_CANCELLED" } } });
  await assert.rejects(call, (error: unknown) => error instanceof HostdError && error.kind === "REQUEST_CANCELLED");
  wire.sink.closed(new HostdClosedError("gone", 3, null));
  await assert.rejects(other, (error: unknown) => error instanceof HostdClosedError && error.exitCode === 3);
  assert.equal((await client.closed).message, "gone");
});

test("resources/templates/list and resources/list follow nextCursor too, each into its own member", async () => {
  const wire = new Loopback();
  const client = new HostdClient(wire);
  const all = client.request("resources/templates/list", { plugin: "p" });
  const [first] = (await wire.next(1)) as Array<{ id: number; params: Record<string, unknown> }>;
  const page1 = { resourceTemplates: [{ uriTemplate: "a://{x}", name: "a" }], nextCursor: "k1.MDA=" };
  wire.deliver({ jsonrpc: "2.0", id: first!.id, result: page1 });
  const [, second] = (await wire.next(2)) as Array<{ id: number; params: Record<string, unknown> }>;
  assert.deepEqual(second!.params, { plugin: "p", cursor: "k1.MDA=" });
  wire.deliver({ jsonrpc: "2.0", id: second!.id, result: { resourceTemplates: [{ uriTemplate: "b://{x}", name: "b" }] } });
  assert.deepEqual(await all, {
    resourceTemplates: [
      { uriTemplate: "a://{x}", name: "a" },
      { uriTemplate: "b://{x}", name: "b" },
    ],
  });
  const resources = client.request("resources/list", { plugin: "p" });
  const third = (await wire.next(3))[2] as { id: number; params: Record<string, unknown> };
  wire.deliver({ jsonrpc: "2.0", id: third.id, result: { resources: [{ uri: "a://1", name: "1" }], nextCursor: "k1.MDA=" } });
  const fourth = (await wire.next(4))[3] as { id: number; params: Record<string, unknown> };
  assert.deepEqual(fourth.params, { plugin: "p", cursor: "k1.MDA=" });
  wire.deliver({ jsonrpc: "2.0", id: fourth.id, result: { resources: [{ uri: "a://2", name: "2" }] } });
  assert.deepEqual(await resources, { resources: [{ uri: "a://1", name: "1" }, { uri: "a://2", name: "2" }] });
});

test("tools/list without a cursor follows nextCursor to the last page; with one, one page as sent", async () => {
  const wire = new Loopback();
  const client = new HostdClient(wire);
  const all = client.request("tools/list", { plugin: "p" });
  const [first] = (await wire.next(1)) as Array<{ id: number; params: Record<string, unknown> }>;
  assert.deepEqual(first!.params, { plugin: "p" });
  wire.deliver({ jsonrpc: "2.0", id: first!.id, result: { tools: [{ name: "p.a" }], revision: 3, nextCursor: "k1.YQ==" } });
  const [, second] = (await wire.next(2)) as Array<{ id: number; params: Record<string, unknown> }>;
  assert.deepEqual(second!.params, { plugin: "p", cursor: "k1.YQ==" });
  wire.deliver({ jsonrpc: "2.0", id: second!.id, result: { tools: [{ name: "p.b" }], revision: 4 } });
  assert.deepEqual(await all, { tools: [{ name: "p.a" }, { name: "p.b" }], revision: 4 });

  const one = client.request("tools/list", { cursor: null });
  const third = (await wire.next(3))[2] as { id: number; params: Record<string, unknown> };
  assert.deepEqual(third.params, { cursor: null });
  wire.deliver({ jsonrpc: "2.0", id: third.id, result: { tools: [{ name: "p.a" }], revision: 4, nextCursor: "k1.YQ==" } });
  assert.deepEqual(await one, { tools: [{ name: "p.a" }], revision: 4, nextCursor: "k1.YQ==" });
});
