/**
 * Tauri adapter: drive a hostd sidecar started with `Command.sidecar(...)` from
 * `@tauri-apps/plugin-shell`. The types below are structural (this package does not depend on
 * Tauri): pass the real `Command` and it fits.
 *
 * Tauri delivers stdout as one `data` event per line (line mode, the default; the line comes
 * without its `\n`, and a `\r` may be left or split off): each goes through the same bound as the
 * Node adapter. `kill()` is SIGKILL (TerminateProcess on Windows): hostd's plugins die with it.
 */

import { HostdClient, HostdClosedError, type ClientOptions, type Transport, type TransportSink } from "./client.js";
import { NdjsonDecoder, DEFAULT_MAX_LINE_BYTES } from "./ndjson.js";
import { Session, type SessionOptions } from "./lifecycle.js";

/** The `close` event payload of a Tauri command. */
export interface TauriTerminated {
  code: number | null;
  signal: number | null;
}

/** The part of `@tauri-apps/plugin-shell`'s `Child` used here. */
export interface TauriChildLike {
  pid: number;
  write(data: string | Uint8Array | number[]): Promise<void>;
  kill(): Promise<void>;
}

/** The part of `@tauri-apps/plugin-shell`'s `Command` (from `Command.sidecar`) used here. */
export interface TauriCommandLike {
  stdout: { on(event: "data", listener: (line: string) => void): unknown };
  on(event: "close", listener: (data: TauriTerminated) => void): unknown;
  on(event: "error", listener: (error: string) => void): unknown;
  spawn(): Promise<TauriChildLike>;
}

/** A transport over a spawned Tauri sidecar. */
export class TauriTransport implements Transport {
  readonly #command: TauriCommandLike;
  readonly #decoder: NdjsonDecoder;
  #child: TauriChildLike | undefined;
  #sink: TransportSink | undefined;
  #closed = false;

  constructor(command: TauriCommandLike, maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {
    this.#command = command;
    this.#decoder = new NdjsonDecoder(maxLineBytes);
  }

  /** Attach the spawned child (`await command.spawn()`), after `start`. */
  attach(child: TauriChildLike): void {
    this.#child = child;
  }

  start(sink: TransportSink): void {
    this.#sink = sink;
    this.#command.stdout.on("data", (line) => sink.events(this.#decoder.feedLine(line)));
    this.#command.on("close", ({ code, signal }) => {
      this.#closed = true;
      const how = signal !== null ? `signal ${signal}` : `code ${code}`;
      sink.closed(new HostdClosedError(`hostd exited (${how})`, code, signal === null ? null : String(signal)));
    });
    this.#command.on("error", (error) => {
      this.#closed = true;
      sink.closed(new HostdClosedError(`hostd failed: ${error}`));
    });
  }

  async write(line: string): Promise<void> {
    if (this.#closed || this.#child === undefined) throw new HostdClosedError("hostd is not running");
    await this.#child.write(line);
  }

  /** Tauri cannot close a child's stdin alone; ending is `shutdown` + `exit` (or `kill`). */
  async end(): Promise<void> {}

  async kill(): Promise<void> {
    if (!this.#closed && this.#child !== undefined) await this.#child.kill();
  }

  get sink(): TransportSink | undefined {
    return this.#sink;
  }
}

export interface TauriSidecarOptions extends SessionOptions {
  client?: ClientOptions;
  maxLineBytes?: number;
}

/**
 * Spawn the sidecar `command` (`Command.sidecar("binaries/hostd", ["serve", ...])`), send
 * `initialize` and resolve once answered. Rejects as {@link spawnHostd} does; the child is killed.
 */
export async function startTauriSidecar(
  command: TauriCommandLike,
  options: TauriSidecarOptions = {},
): Promise<Session & { transport: TauriTransport }> {
  const transport = new TauriTransport(command, options.maxLineBytes);
  const client = new HostdClient(transport, options.client);
  const child = await command.spawn();
  transport.attach(child);
  const session = new Session(client, { kill: () => transport.kill(), pid: child.pid });
  try {
    await session.initialize(options);
  } catch (error) {
    await transport.kill();
    throw error;
  }
  return Object.assign(session, { transport });
}
