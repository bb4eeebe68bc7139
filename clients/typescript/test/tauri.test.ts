/**
 * The Tauri adapter against a real hostd: a structural stand-in for `Command.sidecar` built on
 * `child_process` that delivers stdout the way Tauri's line mode does (one `data` event per line,
 * without the `\n`; a `\r` left in place) and `write`/`kill` like Tauri's `Child`.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, test } from "node:test";

import { HostdClosedError, startTauriSidecar, type TauriChildLike, type TauriCommandLike } from "../src/index.js";
import { fixture, hostdCommand, type Fixture } from "./harness.js";

type Listener = (value: never) => void;

function tauriLikeCommand(program: string, args: string[]): TauriCommandLike {
  const events = new Map<string, Listener[]>();
  const stdoutListeners: Array<(line: string) => void> = [];
  const emit = (event: string, value: unknown): void => {
    for (const listener of events.get(event) ?? []) listener(value as never);
  };
  return {
    stdout: {
      on: (_event: "data", listener: (line: string) => void) => stdoutListeners.push(listener),
    },
    on: (event: string, listener: Listener) => {
      events.set(event, [...(events.get(event) ?? []), listener]);
    },
    spawn: async (): Promise<TauriChildLike> => {
      const child = spawn(program, args, { stdio: ["pipe", "pipe", "ignore"] });
      let pending = "";
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (text: string) => {
        const lines = (pending + text).split("\n");
        pending = lines.pop() ?? "";
        for (const line of lines) for (const listener of stdoutListeners) listener(line);
      });
      child.on("close", (code, signal) =>
        emit("close", { code, signal: signal === null ? null : signal === "SIGKILL" ? 9 : 15 }),
      );
      return {
        pid: child.pid!,
        write: (data) =>
          new Promise<void>((resolve, reject) =>
            child.stdin.write(typeof data === "string" ? data : Buffer.from(data), (e) => (e ? reject(e) : resolve())),
          ),
        kill: async () => {
          child.kill("SIGKILL");
        },
      };
    },
  } as TauriCommandLike;
}

let fx: Fixture;
before(() => {
  fx = fixture();
});
after(() => fx.cleanup());

test("a Tauri sidecar command drives hostd: initialize, requests, orderly shutdown", async () => {
  const [program, ...prefix] = hostdCommand();
  const session = await startTauriSidecar(tauriLikeCommand(program!, [...prefix, "serve", "--state-dir", fx.state]));
  assert.equal(session.initializeResult?.serverInfo.name, "hostd");
  const info = await session.client.request("plugins/install", { path: fx.plugin });
  assert.equal(info.id, "mcp-echo");
  assert.deepEqual((await session.client.request("plugins/list")).plugins.map((p) => p.id), ["mcp-echo"]);
  assert.equal(await session.shutdown(), 0);
});

test("killing the Tauri child closes the client", async () => {
  const [program, ...prefix] = hostdCommand();
  const session = await startTauriSidecar(tauriLikeCommand(program!, [...prefix, "serve", "--state-dir", fx.state]));
  const reason = await session.kill();
  assert.ok(reason instanceof HostdClosedError);
  assert.equal(reason.signal, "9");
  await assert.rejects(session.client.request("ping"), HostdClosedError);
});
