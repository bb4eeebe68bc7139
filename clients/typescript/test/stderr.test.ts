/**
 * Why hostd exited reaches the app: with `stderr: "ignore"` (nothing shown) the Node adapter keeps
 * hostd's last stderr lines and puts them in the HostdClosedError. The class: an exit whose reason
 * was only on a stream nobody reads ("No module named hostd" showed as `hostd exited (code 1)`).
 * Real processes stand in for hostd failing before it answers `initialize`.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import { HostdClosedError, STDERR_TAIL_LINES, spawnHostd } from "../src/index.js";
import { REPO } from "./harness.js";

const PYTHON = join(REPO, ".venv", "bin", "python");

async function closedError(args: string[], stderr: "ignore" | "pipe" = "ignore"): Promise<HostdClosedError> {
  try {
    await spawnHostd({ command: PYTHON, args, stderr, initialize: { clientInfo: { name: "ts-test", version: "0" } } });
  } catch (error) {
    assert.ok(error instanceof HostdClosedError, String(error));
    return error;
  }
  assert.fail("hostd was expected to exit before answering initialize");
}

test("a missing module: the exit carries hostd's last stderr lines", async () => {
  const error = await closedError(["-m", "hostd_not_installed_anywhere", "serve"]);
  assert.equal(error.exitCode, 1);
  const last = error.stderrTail.at(-1) ?? "";
  assert.match(last, /: No module named hostd_not_installed_anywhere$/);
  assert.equal(error.message, `hostd exited (code 1): ${last}`);
});

test("the tail is bounded: the last lines, each cut at 2000 characters", async () => {
  const code = [
    "import sys",
    "for i in range(100): sys.stderr.write(f'line {i}\\n')",
    "sys.stderr.write('x' * 5000 + '\\n')",
    "sys.stderr.write('last, without a newline')",
    "sys.exit(3)",
  ].join("\n");
  const error = await closedError(["-c", code]);
  assert.equal(error.exitCode, 3);
  assert.equal(error.stderrTail.length, STDERR_TAIL_LINES);
  assert.equal(error.stderrTail[0], "line 82");
  assert.equal(error.stderrTail.at(-2), "x".repeat(2000) + "…");
  assert.equal(error.stderrTail.at(-1), "last, without a newline");
  assert.equal(error.message, "hostd exited (code 3): last, without a newline");
});

test("stderr piped to the app is left to it: no tail is taken", async () => {
  const error = await closedError(["-c", "import sys; sys.stderr.write('mine\\n'); sys.exit(2)"], "pipe");
  assert.deepEqual(error.stderrTail, []);
  assert.equal(error.message, "hostd exited (code 2)");
});
