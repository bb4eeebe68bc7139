/**
 * A typed JSON-RPC 2.0 client of hostd's control protocol over any line transport.
 *
 * - `request(method, params, {signal, onProgress, meta})` returns the typed result or rejects
 *   with a {@link HostdError} (`kind` is hostd's `data.kind`). Aborting the signal sends
 *   `$/cancelRequest {id}`; hostd still answers the request, with `REQUEST_CANCELLED` (-32800),
 *   and the promise rejects with that error (or with the abort reason if the answer had not
 *   been awaited because the transport closed first).
 * - `$/progress` for a request goes to that request's `onProgress`.
 * - Notifications go to listeners registered with `on(method, listener)`.
 * - Requests hostd sends the parent (sampling, elicitation, roots, authorization) go to the
 *   handler registered for the method; a method without one is answered -32601; a handler that
 *   throws is answered -32603 (or the `code`/`data` of a thrown {@link HostdError}); hostd's
 *   `$/cancelRequest` for one aborts the `signal` its handler got.
 * - When the transport closes (hostd exited or crashed) every pending request rejects with a
 *   {@link HostdClosedError} and `closed` resolves.
 */

import { encodeLine, type LineEvent } from "./ndjson.js";
import type {
  ErrorKind,
  Notifications,
  ParentNotifications,
  ParentRequests,
  ProgressParams,
  Requests,
} from "./generated.js";

/** Where the client's bytes go and its events come from (see `node.ts`, `tauri.ts`). */
export interface Transport {
  /** Write one line (it ends with `\n`). Rejects when the other side is gone. */
  write(line: string): Promise<void>;
  /** Start delivering events; called once by the client. */
  start(sink: TransportSink): void;
  /** Close the writing side (hostd sees stdin EOF and shuts down). */
  end(): Promise<void>;
}

/** How a transport reports what it read and that it ended. */
export interface TransportSink {
  /** Events of the NDJSON decoder, in order. */
  events(events: LineEvent[]): void;
  /** The transport ended: hostd's stdout closed or the process ended. */
  closed(reason: HostdClosedError): void;
}

/** A JSON-RPC error from hostd (or a transport failure), with hostd's `data.kind`. */
export class HostdError extends Error {
  readonly code: number;
  readonly data: Record<string, unknown>;
  constructor(code: number, message: string, data: Record<string, unknown> = {}) {
    super(message);
    this.name = "HostdError";
    this.code = code;
    this.data = data;
  }
  /** hostd's stable symbolic error name (`data.kind`); switch on this, not on the message. */
  get kind(): ErrorKind | undefined {
    const kind = this.data["kind"];
    return typeof kind === "string" ? (kind as ErrorKind) : undefined;
  }
}

/** hostd went away: its stdout closed or its process ended before the answer. */
export class HostdClosedError extends Error {
  readonly exitCode: number | null;
  readonly signal: string | null;
  /**
   * hostd's last stderr lines before it exited (oldest first; at most {@link STDERR_TAIL_LINES}),
   * when the adapter kept them (the Node adapter does when hostd's stderr is not inherited):
   * why hostd exited ("No module named hostd", a state folder it cannot use). Empty otherwise.
   */
  readonly stderrTail: readonly string[];
  constructor(
    message: string,
    exitCode: number | null = null,
    signal: string | null = null,
    stderrTail: readonly string[] = [],
  ) {
    super(message);
    this.name = "HostdClosedError";
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderrTail = stderrTail;
  }
}

/** How many of hostd's last stderr lines a {@link HostdClosedError} carries. */
export const STDERR_TAIL_LINES = 20;

export type RequestMethod = keyof Requests;
export type ParamsOf<M extends RequestMethod> = Requests[M]["params"];
export type ResultOf<M extends RequestMethod> = Requests[M]["result"];
/** Params of a hostd -> parent request; `Record<string, unknown>` for one this build does not know. */
export type ParentParams<M extends string> = M extends keyof ParentRequests
  ? ParentRequests[M] extends { params: infer P }
    ? P
    : never
  : Record<string, unknown>;
/** Result of a hostd -> parent request; `unknown` for one this build does not know. */
export type ParentResult<M extends string> = M extends keyof ParentRequests
  ? ParentRequests[M] extends { result: infer R }
    ? R
    : never
  : unknown;

export interface RequestOptions {
  /** Abort: sends `$/cancelRequest`; the promise rejects with hostd's `REQUEST_CANCELLED` answer. */
  signal?: AbortSignal;
  /** Called with each `$/progress` of this request, in order. */
  onProgress?: (progress: ProgressParams) => void;
  /** `params._meta`, e.g. `{traceparent}` (W3C trace context) to continue the app's trace in hostd. */
  meta?: Record<string, unknown>;
}

export interface HandlerContext {
  /** The request's id (hostd's). */
  id: number | string;
  /** Aborted when hostd cancels the request (`$/cancelRequest`) or the transport closes. */
  signal: AbortSignal;
}

export type ParentRequestHandler<M extends string> = (
  params: ParentParams<M>,
  context: HandlerContext,
) => Promise<ParentResult<M>> | ParentResult<M>;

type Pending = {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  onProgress: ((progress: ProgressParams) => void) | undefined;
};

/** Something hostd sent that the client could not attribute (a malformed line, an id-less error). */
export type Stray =
  | { kind: "invalid"; error: string; head: string }
  | { kind: "too-long"; limit: number; head: string }
  | { kind: "error"; error: HostdError }
  | { kind: "unexpected"; value: unknown };

export interface ClientOptions {
  /** Called for what cannot be attributed (default: ignored). */
  onStray?: (stray: Stray) => void;
}

/**
 * The listings hostd pages for the parent (method -> the member holding the items): `request` follows their
 * `nextCursor` (docs/protocol.md, `tools/list`), so an answer never has to exceed the 8 MiB line bound.
 */
export const PAGED: Readonly<Record<string, string>> = {
  "tools/list": "tools",
  "prompts/list": "prompts",
  "resources/list": "resources",
  "resources/templates/list": "resourceTemplates",
};

export class HostdClient {
  readonly #transport: Transport;
  readonly #pending = new Map<number, Pending>();
  readonly #listeners = new Map<string, Set<(params: never) => void>>();
  readonly #handlers = new Map<string, (params: never, context: HandlerContext) => unknown>();
  readonly #served = new Map<number | string, AbortController>();
  readonly #onStray: ((stray: Stray) => void) | undefined;
  #nextId = 1;
  #closedWith: HostdClosedError | undefined;
  /** Resolves (never rejects) when the transport has closed, with the reason. */
  readonly closed: Promise<HostdClosedError>;
  #markClosed!: (reason: HostdClosedError) => void;

  constructor(transport: Transport, options: ClientOptions = {}) {
    this.#transport = transport;
    this.#onStray = options.onStray;
    this.closed = new Promise((resolve) => {
      this.#markClosed = resolve;
    });
    transport.start({
      events: (events) => {
        for (const event of events) this.#event(event);
      },
      closed: (reason) => this.#close(reason),
    });
  }

  /** Whether the transport has closed. */
  get isClosed(): boolean {
    return this.#closedWith !== undefined;
  }

  /**
   * Send request `method` and await its result.
   *
   * Rejects with {@link HostdError} for an error answer (`kind` = `data.kind`), with
   * {@link HostdClosedError} when hostd goes away first, with `TypeError` when `params`
   * cannot be serialised. Aborting `options.signal` sends `$/cancelRequest`.
   */
  request<M extends RequestMethod>(
    method: M,
    ...args: {} extends ParamsOf<M>
      ? [params?: ParamsOf<M>, options?: RequestOptions]
      : [params: ParamsOf<M>, options?: RequestOptions]
  ): Promise<ResultOf<M>> {
    const [params, options = {}] = args as [ParamsOf<M> | undefined, RequestOptions | undefined];
    return this.requestUntyped(method, params as Record<string, unknown> | undefined, options) as Promise<ResultOf<M>>;
  }

  /**
   * `request` for a method this build's types do not know (a newer hostd); same behaviour.
   *
   * A listing hostd pages for the parent ({@link PAGED}: `tools/list`, `prompts/list`, `resources/list`,
   * `resources/templates/list`) requested without a `cursor` is
   * followed to its last page: the result holds every page's items and the last page's other members
   * (`revision`), without `nextCursor`. Send `cursor` (`null` for the first page) to get one page as sent.
   */
  requestUntyped(method: string, params?: Record<string, unknown>, options: RequestOptions = {}): Promise<unknown> {
    const items = PAGED[method];
    if (items === undefined || (params !== undefined && "cursor" in params)) {
      return this.#requestOnce(method, params, options);
    }
    return this.#allPages(method, items, params ?? {}, options);
  }

  async #allPages(
    method: string,
    items: string,
    params: Record<string, unknown>,
    options: RequestOptions,
  ): Promise<unknown> {
    let result = (await this.#requestOnce(method, params, options)) as Record<string, unknown>;
    const collected: unknown[] = [...((result[items] as unknown[] | undefined) ?? [])];
    while (typeof result["nextCursor"] === "string") {
      const cursor = result["nextCursor"];
      result = (await this.#requestOnce(method, { ...params, cursor }, options)) as Record<string, unknown>;
      collected.push(...((result[items] as unknown[] | undefined) ?? []));
    }
    const { nextCursor: _last, ...rest } = result;
    return { ...rest, [items]: collected };
  }

  #requestOnce(method: string, params: Record<string, unknown> | undefined, options: RequestOptions): Promise<unknown> {
    if (this.#closedWith) return Promise.reject(this.#closedWith);
    const { signal, onProgress, meta } = options;
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const id = this.#nextId++;
    const body: Record<string, unknown> = { ...(params ?? {}) };
    if (meta !== undefined) body["_meta"] = meta;
    const line = encodeLine({ jsonrpc: "2.0", id, method, params: body });
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = (): void => {
        if (this.#pending.has(id)) void this.notify("$/cancelRequest", { id }).catch(() => undefined);
      };
      const done = (): void => signal?.removeEventListener("abort", onAbort);
      this.#pending.set(id, {
        resolve: (value) => {
          done();
          resolve(value);
        },
        reject: (error) => {
          done();
          reject(error);
        },
        onProgress,
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#transport.write(line).catch((error: unknown) => {
        const pending = this.#pending.get(id);
        if (pending) {
          this.#pending.delete(id);
          pending.reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
    });
  }

  /** Send a notification to hostd (`$/cancelRequest`, `exit`, `initialized`). */
  notify<M extends keyof ParentNotifications>(method: M, params?: ParentNotifications[M]): Promise<void> {
    if (this.#closedWith) return Promise.reject(this.#closedWith);
    return this.#transport.write(encodeLine({ jsonrpc: "2.0", method, params: params ?? {} }));
  }

  /** Write one raw line (tests, diagnostics): `text` plus `\n`, unchecked. */
  writeRaw(text: string): Promise<void> {
    return this.#transport.write(`${text}\n`);
  }

  /** Listen to notification `method`; returns a function that removes the listener. */
  on<M extends keyof Notifications>(method: M, listener: (params: Notifications[M]) => void): () => void {
    let set = this.#listeners.get(method);
    if (!set) {
      set = new Set();
      this.#listeners.set(method, set);
    }
    const entry = listener as (params: never) => void;
    set.add(entry);
    return () => set.delete(entry);
  }

  /** Resolve with the first notification `method` whose params satisfy `predicate`. */
  waitFor<M extends keyof Notifications>(
    method: M,
    predicate: (params: Notifications[M]) => boolean = () => true,
    signal?: AbortSignal,
  ): Promise<Notifications[M]> {
    return new Promise((resolve, reject) => {
      const cleanup = (): void => {
        off();
        signal?.removeEventListener("abort", onAbort);
      };
      const off = this.on(method, (params) => {
        if (predicate(params)) {
          cleanup();
          resolve(params);
        }
      });
      const onAbort = (): void => {
        cleanup();
        reject(signal?.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      void this.closed.then((reason) => {
        cleanup();
        reject(reason);
      });
    });
  }

  /** Answer hostd's requests `method` with `handler` (replaces an earlier one). */
  handle<M extends string>(method: M, handler: ParentRequestHandler<M>): void {
    this.#handlers.set(method, handler as (params: never, context: HandlerContext) => unknown);
  }

  /** `sampling/createMessage`: a plugin asks the app's model for a completion. */
  onSampling(handler: ParentRequestHandler<"sampling/createMessage">): void {
    this.handle("sampling/createMessage", handler);
  }

  /** `elicitation/create`: a plugin asks the user for input. */
  onElicitation(handler: ParentRequestHandler<"elicitation/create">): void {
    this.handle("elicitation/create", handler);
  }

  /** `roots/list`: a plugin asks which folders it may work in. */
  onRoots(handler: ParentRequestHandler<"roots/list">): void {
    this.handle("roots/list", handler);
  }

  /**
   * `grants/request`: a tool call names files the plugin may not reach; ask the user and answer
   * `{grant: "no" | "once" | "always"}`. Declare `capabilities: {grants: {}}` at `initialize`, or such a call
   * fails with `ACCESS_NOT_GRANTED`.
   */
  onGrants(handler: ParentRequestHandler<"grants/request">): void {
    this.handle("grants/request", handler);
  }

  /** `auth/authorize`: a remote plugin needs the user to authorise it in a browser. */
  onAuthorize(handler: ParentRequestHandler<"auth/authorize">): void {
    this.handle("auth/authorize", handler);
  }

  /** Close the writing side: hostd sees stdin EOF and shuts down. */
  end(): Promise<void> {
    return this.#transport.end();
  }

  #event(event: LineEvent): void {
    if (event.kind !== "message") {
      this.#onStray?.(event);
      return;
    }
    const message = event.value;
    if (typeof message !== "object" || message === null || Array.isArray(message)) {
      this.#onStray?.({ kind: "unexpected", value: message });
      return;
    }
    const m = message as Record<string, unknown>;
    const method = m["method"];
    if (typeof method === "string") {
      const params = (m["params"] ?? {}) as Record<string, unknown>;
      if ("id" in m && (typeof m["id"] === "number" || typeof m["id"] === "string")) {
        this.#serve(m["id"], method, params);
      } else {
        this.#notification(method, params);
      }
      return;
    }
    const id = m["id"];
    const pending = typeof id === "number" ? this.#pending.get(id) : undefined;
    if (pending === undefined || typeof id !== "number") {
      const error = m["error"];
      if (error && typeof error === "object") {
        const e = error as Record<string, unknown>;
        this.#onStray?.({ kind: "error", error: toError(e) });
      } else {
        this.#onStray?.({ kind: "unexpected", value: message });
      }
      return;
    }
    this.#pending.delete(id);
    if ("error" in m && m["error"] && typeof m["error"] === "object") {
      pending.reject(toError(m["error"] as Record<string, unknown>));
    } else {
      pending.resolve(m["result"]);
    }
  }

  #notification(method: string, params: Record<string, unknown>): void {
    if (method === "$/progress") {
      const requestId = params["requestId"];
      const pending = typeof requestId === "number" ? this.#pending.get(requestId) : undefined;
      pending?.onProgress?.(params as unknown as ProgressParams);
    } else if (method === "$/cancelRequest") {
      const id = params["id"];
      if (typeof id === "number" || typeof id === "string") this.#served.get(id)?.abort();
    }
    for (const listener of this.#listeners.get(method) ?? []) {
      try {
        listener(params as never);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  #serve(id: number | string, method: string, params: Record<string, unknown>): void {
    const handler = this.#handlers.get(method);
    const reply = (body: Record<string, unknown>): void => {
      if (this.#closedWith) return;
      void this.#transport.write(encodeLine({ jsonrpc: "2.0", id, ...body })).catch(() => undefined);
    };
    if (handler === undefined) {
      reply({ error: { code: -32601, message: `the parent does not serve ${method}` } });
      return;
    }
    const controller = new AbortController();
    this.#served.set(id, controller);
    Promise.resolve()
      .then(() => {
        // Cancelled before the handler started: answer for it (LSP: a cancelled request is still answered).
        if (controller.signal.aborted) throw new HostdError(-32800, "cancelled by $/cancelRequest");
        return handler(params as never, { id, signal: controller.signal });
      })
      .then(
        (result) => reply({ result: result ?? null }),
        (error: unknown) => {
          if (error instanceof HostdError) {
            reply({ error: { code: error.code, message: error.message, data: error.data } });
          } else {
            reply({ error: { code: -32603, message: error instanceof Error ? error.message : String(error) } });
          }
        },
      )
      .finally(() => this.#served.delete(id));
  }

  #close(reason: HostdClosedError): void {
    if (this.#closedWith) return;
    this.#closedWith = reason;
    for (const pending of this.#pending.values()) pending.reject(reason);
    this.#pending.clear();
    for (const controller of this.#served.values()) controller.abort(reason);
    this.#served.clear();
    this.#markClosed(reason);
  }
}

function toError(error: Record<string, unknown>): HostdError {
  const code = typeof error["code"] === "number" ? error["code"] : -32603;
  const message = typeof error["message"] === "string" ? error["message"] : "error";
  const data = error["data"] && typeof error["data"] === "object" ? (error["data"] as Record<string, unknown>) : {};
  return new HostdError(code, message, data);
}
