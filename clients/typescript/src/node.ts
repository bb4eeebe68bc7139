/**
 * Node adapter: run `hostd serve` with `child_process.spawn` (pipes on stdin and stdout; stderr
 * is hostd's log) and drive it through a {@link HostdClient}. Electron apps use this from the
 * main process (`utilityProcess` cannot pipe stdin).
 */

import { spawn, type ChildProcess, type SpawnOptions } from "node:child_process";

import {
  HostdClient,
  HostdClosedError,
  STDERR_TAIL_LINES,
  type ClientOptions,
  type Transport,
  type TransportSink,
} from "./client.js";
import { NdjsonDecoder, DEFAULT_MAX_LINE_BYTES } from "./ndjson.js";
import { Session, type SessionOptions } from "./lifecycle.js";

/** How long a closing waits for hostd's kept stderr to end after hostd exited, in milliseconds. */
const STDERR_GRACE_MS = 250;

/** Longest stderr line kept for {@link HostdClosedError.stderrTail}, in UTF-16 code units (longer: cut). */
const STDERR_LINE_CHARS = 2000;

/**
 * The last {@link STDERR_TAIL_LINES} lines of a stream, each at most {@link STDERR_LINE_CHARS}
 * characters: memory stays bounded however much hostd logs.
 */
class StderrTail {
  readonly lines: string[] = [];
  #partial = "";

  feed(chunk: Buffer | string): void {
    const parts = (this.#partial + chunk.toString()).split("\n");
    this.#partial = parts.pop()!.slice(-STDERR_LINE_CHARS);
    for (const line of parts) this.#push(line);
  }

  end(): void {
    if (this.#partial !== "") this.#push(this.#partial);
    this.#partial = "";
  }

  #push(line: string): void {
    const text = line.replace(/\r$/, "");
    this.lines.push(text.length > STDERR_LINE_CHARS ? text.slice(0, STDERR_LINE_CHARS) + "…" : text);
    if (this.lines.length > STDERR_TAIL_LINES) this.lines.shift();
  }
}

/** A transport over a child process's stdin and stdout. */
export class ChildProcessTransport implements Transport {
  readonly child: ChildProcess;
  readonly #decoder: NdjsonDecoder;
  readonly #stderr: StderrTail | undefined;
  #sink: TransportSink | undefined;
  #ended = false;

  /**
   * @param maxLineBytes bound of one line hostd sends (default 8 MiB: hostd's results are smaller).
   * @param keepStderrTail read the child's piped stderr and keep its last lines for
   *   {@link HostdClosedError.stderrTail} (this consumes the stream: nobody else should read it).
   */
  constructor(child: ChildProcess, maxLineBytes: number = DEFAULT_MAX_LINE_BYTES, keepStderrTail = false) {
    if (!child.stdin || !child.stdout) throw new TypeError("the child needs piped stdin and stdout");
    if (keepStderrTail && !child.stderr) throw new TypeError("keeping the stderr tail needs a piped stderr");
    this.child = child;
    this.#decoder = new NdjsonDecoder(maxLineBytes);
    this.#stderr = keepStderrTail ? new StderrTail() : undefined;
  }

  start(sink: TransportSink): void {
    this.#sink = sink;
    const stdout = this.child.stdout!;
    stdout.on("data", (chunk: Buffer) => sink.events(this.#decoder.feed(chunk)));
    // An EPIPE on stdin is reported through write()'s callback; keep the stream from throwing.
    this.child.stdin!.on("error", () => undefined);
    let stdoutEnded = false;
    let exited: [number | null, NodeJS.Signals | null] | undefined;
    // Without a tail to keep, stderr counts as ended: closing never waits for it.
    let stderrEnded = this.#stderr === undefined;
    const tail = this.#stderr;
    if (tail !== undefined) {
      const stderr = this.child.stderr!;
      stderr.on("data", (chunk: Buffer) => tail.feed(chunk));
      stderr.on("error", () => undefined);
      stderr.on("close", () => {
        tail.end();
        stderrEnded = true;
        finish();
      });
    }
    let closed = false;
    const finish = (): void => {
      if (closed || !stdoutEnded || exited === undefined) return;
      if (!stderrEnded) {
        // Its last lines are normally read by now; a process hostd left behind may hold stderr
        // open, so wait for its end only briefly (the close is never held up by it).
        setTimeout(() => {
          stderrEnded = true;
          finish();
        }, STDERR_GRACE_MS).unref();
        return;
      }
      closed = true;
      const [code, signal] = exited;
      const how = signal !== null ? `signal ${signal}` : `code ${code}`;
      const lines = [...(tail?.lines ?? [])];
      const last = [...lines].reverse().find((line) => line.trim() !== "");
      const message = `hostd exited (${how})${last !== undefined ? `: ${last}` : ""}`;
      sink.closed(new HostdClosedError(message, code, signal, lines));
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
      stderrEnded = true;
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
  /**
   * hostd's stderr (its log): `"inherit"` (default), `"pipe"` (yours to read from `child.stderr`)
   * or `"ignore"`: not shown, but its last lines are kept and given to the
   * {@link HostdClosedError} (`stderrTail`, and the last line in its message) when hostd exits.
   */
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
  const stderr = options.stderr ?? "inherit";
  const keepTail = stderr === "ignore"; // piped and read here: why hostd exited is not lost
  const spawnOptions: SpawnOptions = {
    stdio: ["pipe", "pipe", keepTail ? "pipe" : stderr],
    env: options.env ?? process.env,
  };
  if (options.cwd !== undefined) spawnOptions.cwd = options.cwd;
  const child = spawn(options.command, options.args ?? [], spawnOptions);
  const transport = new ChildProcessTransport(child, options.maxLineBytes, keepTail);
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
