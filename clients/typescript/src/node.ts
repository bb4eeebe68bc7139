/**
 * Node adapter: run `hostd serve` with `child_process.spawn` (pipes on stdin and stdout; stderr
 * is hostd's log) and drive it through a {@link HostdClient}. Electron apps use this from the
 * main process (`utilityProcess` cannot pipe stdin).
 */

import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";

import { HostdClient, HostdClosedError, type ClientOptions, type Transport, type TransportSink } from "./client.js";
import { NdjsonDecoder, DEFAULT_MAX_LINE_BYTES } from "./ndjson.js";
import { Session, type SessionOptions } from "./lifecycle.js";

/** A transport over a child process's stdin and stdout. */
export class ChildProcessTransport implements Transport {
  readonly child: ChildProcess;
  readonly #decoder: NdjsonDecoder;
  #sink: TransportSink | undefined;
  #ended = false;

  /** @param maxLineBytes bound of one line hostd sends (default 8 MiB: hostd's results are smaller). */
  constructor(child: ChildProcess, maxLineBytes: number = DEFAULT_MAX_LINE_BYTES) {
    if (!child.stdin || !child.stdout) throw new TypeError("the child needs piped stdin and stdout");
    this.child = child;
    this.#decoder = new NdjsonDecoder(maxLineBytes);
  }

  start(sink: TransportSink): void {
    this.#sink = sink;
    const stdout = this.child.stdout!;
    stdout.on("data", (chunk: Buffer) => sink.events(this.#decoder.feed(chunk)));
    // An EPIPE on stdin is reported through write()'s callback; keep the stream from throwing.
    this.child.stdin!.on("error", () => undefined);
    let stdoutEnded = false;
    let exited: [number | null, NodeJS.Signals | null] | undefined;
    const finish = (): void => {
      if (!stdoutEnded || exited === undefined) return;
      const [code, signal] = exited;
      const how = signal !== null ? `signal ${signal}` : `code ${code}`;
      sink.closed(new HostdClosedError(`hostd exited (${how})`, code, signal));
    };
    stdout.on("end", () => {
      stdoutEnded = true;
      finish();
    });
    this.child.on("exit", (code, signal) => {
      exited = [code, signal];
      finish();
    });
    this.child.on("error", (error) => {
      stdoutEnded = true;
      exited = [null, null];
      sink.closed(new HostdClosedError(`hostd could not run: ${error.message}`));
    });
  }

  write(line: string): Promise<void> {
    const stdin = this.child.stdin!;
    if (this.#ended || stdin.destroyed || !stdin.writable) {
      return Promise.reject(new HostdClosedError("hostd's stdin is closed"));
    }
    return new Promise((resolve, reject) => {
      stdin.write(line, (error) => (error ? reject(new HostdClosedError(`writing to hostd: ${error.message}`)) : resolve()));
    });
  }

  end(): Promise<void> {
    this.#ended = true;
    const stdin = this.child.stdin!;
    return new Promise((resolve) => {
      if (stdin.destroyed || stdin.writableEnded) resolve();
      else stdin.end(() => resolve());
    });
  }

  /** Send `signal` (default SIGKILL) to hostd; no effect once it has exited. */
  kill(signal: NodeJS.Signals = "SIGKILL"): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill(signal);
  }

  get sink(): TransportSink | undefined {
    return this.#sink;
  }
}

export interface SpawnHostdOptions extends SessionOptions {
  /** The executable: a Python (`args` then starts with `-m hostd serve`), `hostd`, or the sidecar. */
  command: string;
  /** Its arguments, e.g. `["-m", "hostd", "serve", "--state-dir", dir]`. */
  args?: string[];
  /** Environment of hostd (default: this process's). Set `PATH` deliberately (README). */
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** hostd's stderr (its log): `"inherit"` (default), `"pipe"` or `"ignore"`. */
  stderr?: "inherit" | "pipe" | "ignore";
  /** Kill hostd (SIGKILL) when this Node process exits (default true). */
  killOnParentExit?: boolean;
  client?: ClientOptions;
  maxLineBytes?: number;
}

/**
 * Spawn hostd, send `initialize`, and resolve once it answered (hostd's readiness signal).
 *
 * Rejects with {@link HostdError} when `initialize` is refused (e.g. `STATE_LOCKED`; hostd then
 * exits) and with {@link HostdClosedError} when hostd exits first; in both cases the process is
 * reaped. Cancellation: aborting `options.signal` kills hostd and rejects with the reason.
 */
export async function spawnHostd(options: SpawnHostdOptions): Promise<Session & { transport: ChildProcessTransport }> {
  const spawnOptions: SpawnOptions = {
    stdio: ["pipe", "pipe", options.stderr ?? "inherit"],
    env: options.env ?? process.env,
  };
  if (options.cwd !== undefined) spawnOptions.cwd = options.cwd;
  const child = spawn(options.command, options.args ?? [], spawnOptions);
  const transport = new ChildProcessTransport(child, options.maxLineBytes);
  const client = new HostdClient(transport, options.client);
  const killer = (): void => transport.kill("SIGKILL");
  if (options.killOnParentExit ?? true) {
    process.on("exit", killer);
    void client.closed.then(() => process.off("exit", killer));
  }
  const session = new Session(client, { kill: () => transport.kill("SIGKILL"), pid: child.pid });
  try {
    await session.initialize(options);
  } catch (error) {
    transport.kill("SIGKILL");
    await client.closed;
    throw error;
  }
  return Object.assign(session, { transport });
}
