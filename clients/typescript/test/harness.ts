/**
 * Test harness: where hostd and the echo fixture are, and a fresh hostd per test.
 *
 * `HOSTD_COMMAND`: a JSON array, the command that runs hostd up to `serve` (default: the
 * repository's `.venv/bin/python -m hostd`; the sidecar test sets the built executable).
 * `HOSTD_PLUGIN_PATH`: folders put first on hostd's `PATH`, so the fixture's `python3` is found
 * (default: the folder of the repository's `.venv/bin/python`).
 */

import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { spawnHostd, type SpawnHostdOptions } from "../src/index.js";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
const PYTHON = join(REPO, ".venv", "bin", "python");

export function hostdCommand(): string[] {
  const raw = process.env["HOSTD_COMMAND"];
  return raw ? (JSON.parse(raw) as string[]) : [PYTHON, "-m", "hostd"];
}

export interface Fixture {
  dir: string;
  plugin: string;
  state: string;
  cleanup(): void;
}

/** A temporary folder with a copy of fixtures/mcp-echo as `plugin` and a `state` folder path. */
export function fixture(): Fixture {
  const dir = mkdtempSync(join(tmpdir(), "hostd-ts-"));
  const plugin = join(dir, "mcp-echo");
  cpSync(join(REPO, "fixtures", "mcp-echo"), plugin, { recursive: true });
  return { dir, plugin, state: join(dir, "state"), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `spawnHostd` for the fixture: `serve --state-dir`, the plugin PATH first. */
export function start(fx: Fixture, extra: Partial<SpawnHostdOptions> = {}) {
  const [command, ...prefix] = hostdCommand();
  const pluginPath = process.env["HOSTD_PLUGIN_PATH"] ?? dirname(PYTHON);
  return spawnHostd({
    command: command!,
    args: [...prefix, "serve", "--state-dir", fx.state],
    env: { ...process.env, PATH: `${pluginPath}:${process.env["PATH"] ?? ""}` },
    stderr: process.env["HOSTD_TEST_STDERR"] === "1" ? "inherit" : "ignore",
    initialize: { clientInfo: { name: "ts-test", version: "0" } },
    ...extra,
  });
}
