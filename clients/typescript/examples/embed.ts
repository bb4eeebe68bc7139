/**
 * Example app: embed hostd through @hostd/client and print tool results.
 *
 *   node dist/examples/embed.js PLUGIN_FOLDER [STATE_DIR]
 *
 * What an Electron main process does, as a plain Node script: start hostd as a child process,
 * install the plugin, show what will run (an app asks the user here), grant and approve it,
 * enable it, list its tools, call one with progress, and shut hostd down in order. hostd is
 * `HOSTD_COMMAND` (a JSON array, e.g. `["/app/hostd-x86_64-unknown-linux-gnu"]` for the sidecar
 * build) or `python3 -m hostd` by default.
 */

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { HostdClosedError, HostdError, spawnHostd } from "../src/index.js";

/** Why hostd is gone: its exit and, since its stderr is not shown here, its last stderr lines. */
function reportClosed(error: HostdClosedError): void {
  console.error(`hostd is gone: ${error.message}`);
  for (const line of error.stderrTail) console.error(`  hostd stderr | ${line}`);
}

async function main(): Promise<number> {
  const [plugin, stateArg] = process.argv.slice(2);
  if (plugin === undefined) {
    console.error("usage: node dist/examples/embed.js PLUGIN_FOLDER [STATE_DIR]");
    return 2;
  }
  const state = stateArg ?? mkdtempSync(join(tmpdir(), "hostd-example-"));
  const [command, ...prefix] = JSON.parse(process.env["HOSTD_COMMAND"] ?? '["python3", "-m", "hostd"]') as string[];
  let session;
  try {
    session = await spawnHostd({
      command: command!,
      args: [...prefix, "serve", "--state-dir", state],
      initialize: { clientInfo: { name: "example-app", version: "1.0" } },
      stderr: "ignore", // not shown; its last lines come with a HostdClosedError
    });
  } catch (error) {
    if (!(error instanceof HostdClosedError)) throw error;
    reportClosed(error); // e.g. "No module named hostd": HOSTD_COMMAND runs the wrong Python
    return 1;
  }
  const { client } = session;
  console.log(`hostd ${session.initializeResult?.serverInfo.version} is ready`);
  client.on("plugins/statusChanged", (status) => console.log(`  [${status.plugin_id}] ${status.status}`));
  try {
    const info = await client.request("plugins/install", { path: plugin });
    if (info.launch === null || !("digest" in info.launch)) throw new Error(`cannot launch ${info.id}`);
    // An app shows info.launch (command, files, isolation) to the user and asks before approving.
    console.log(`installed ${info.id}: runs ${info.launch.command} ${info.launch.args.join(" ")}`);
    await client.request("plugins/grant", { id: info.id, permissions: info.permissions });
    await client.request("plugins/approve", { id: info.id, digest: info.launch.digest });
    await client.request("plugins/enable", { id: info.id });
    const { tools } = await client.request("tools/list", { plugin: info.id });
    console.log(`tools: ${tools.map((tool) => tool.name).join(", ")}`);
    const echo = tools.find((tool) => tool.name.endsWith(".echo"));
    if (echo !== undefined) {
      const result = await client.request("tools/call", { name: echo.name, arguments: { text: "hello from the app" } });
      console.log(`${echo.name} -> ${JSON.stringify(result.content)}`);
    }
    const sleep = tools.find((tool) => tool.name.endsWith(".sleep"));
    if (sleep !== undefined) {
      const result = await client.request(
        "tools/call",
        { name: sleep.name, arguments: { seconds: 0.2, steps: 2 } },
        { onProgress: (p) => console.log(`  progress ${p.progress}/${p.total ?? "?"}`) },
      );
      console.log(`${sleep.name} -> ${JSON.stringify(result.content)}`);
    }
  } catch (error) {
    if (error instanceof HostdClosedError) reportClosed(error);
    else console.error(error instanceof HostdError ? `hostd refused: ${error.kind}: ${error.message}` : error);
    await session.shutdown();
    return 1;
  }
  const code = await session.shutdown();
  console.log(`hostd exited with code ${code}`);
  return code ?? 1;
}

process.exitCode = await main();
