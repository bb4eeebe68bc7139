/**
 * Lifecycle of one hostd: `initialize` (its answer is the readiness signal), then an orderly
 * end (`shutdown`, then `exit`, then wait for the process; kill it if it does not go).
 */

import { HostdClient, HostdClosedError } from "./client.js";
import type { InitializeResult, Requests } from "./generated.js";

export interface SessionOptions {
  /** `initialize` params; `clientInfo` defaults to `{name: "@hostd/client", version: "0"}`. */
  initialize?: Requests["initialize"]["params"];
  /** Abort while starting: the process is killed and the start rejects. */
  signal?: AbortSignal;
}

/** What a session needs from the process behind the transport. */
export interface ProcessControl {
  /** Kill the process now (SIGKILL / TerminateProcess). */
  kill(): void | Promise<void>;
  pid?: number | undefined;
}

export class Session {
  readonly client: HostdClient;
  readonly process: ProcessControl;
  /** `initialize`'s result, once answered. */
  initializeResult: InitializeResult | undefined;

  constructor(client: HostdClient, process: ProcessControl) {
    this.client = client;
    this.process = process;
  }

  /** Send `initialize` and `initialized`; resolve with the result. Rejects as `request` does. */
  async initialize(options: SessionOptions = {}): Promise<InitializeResult> {
    const params = { clientInfo: { name: "@hostd/client", version: "0" }, ...(options.initialize ?? {}) };
    const requestOptions = options.signal !== undefined ? { signal: options.signal } : {};
    const abort = (): void => void this.process.kill();
    options.signal?.addEventListener("abort", abort, { once: true });
    try {
      this.initializeResult = await this.client.request("initialize", params, requestOptions);
    } finally {
      options.signal?.removeEventListener("abort", abort);
    }
    await this.client.notify("initialized", {});
    return this.initializeResult;
  }

  /**
   * Orderly end: `shutdown` (hostd stops every plugin tree), `exit`, close stdin, and wait for
   * the process; after `timeoutMs` (default 15000) it is killed. Resolves with the exit code
   * (`null` when killed by a signal). Safe to call when hostd has already gone.
   */
  async shutdown(timeoutMs = 15_000): Promise<number | null> {
    const client = this.client;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    const orderly = async (): Promise<void> => {
      if (!client.isClosed) {
        try {
          await client.request("shutdown");
          await client.notify("exit", {});
        } catch {
          // hostd went away meanwhile: nothing more to ask
        }
        await client.end().catch(() => undefined);
      }
      await client.closed;
    };
    await Promise.race([orderly(), deadline]);
    clearTimeout(timer);
    if (!client.isClosed) await this.process.kill();
    const reason: HostdClosedError = await client.closed;
    return reason.exitCode;
  }

  /** Kill hostd at once; resolves when its transport has closed. */
  async kill(): Promise<HostdClosedError> {
    await this.process.kill();
    return this.client.closed;
  }
}
