/**
 * The TypeScript client as a real parent of a real `hostd serve` and the echo fixture.
 *
 * The class of bug: a client that works against the docs but not against hostd (a method name,
 * a field, the cancel and progress routing, the end of the process). Each member is driven end
 * to end here: install -> grant -> approve -> enable -> call -> cancel -> progress -> restart ->
 * disable -> shutdown; a malformed line from the parent; hostd crashing under a pending request.
 */

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { HostdClosedError, HostdError, type PluginStatus, type ProgressParams, type Stray } from "../src/index.js";
import { fixture, start, type Fixture } from "./harness.js";

let fx: Fixture;
before(() => {
  fx = fixture();
});
after(() => fx.cleanup());

test("install, approve, enable, call, cancel, progress, restart, disable, shutdown", async () => {
  const session = await start(fx);
  const { client } = session;
  assert.equal(session.initializeResult?.serverInfo.name, "hostd");
  assert.equal(session.initializeResult?.capabilities.cancelRequest, true);

  const info = await client.request("plugins/install", { path: fx.plugin });
  assert.equal(info.id, "mcp-echo");
  assert.deepEqual(info.permissions, ["echo.use", "echo.inspect"]);
  assert.ok(info.launch !== null && "digest" in info.launch);
  await client.request("plugins/grant", { id: info.id, permissions: info.permissions });
  const approved = await client.request("plugins/approve", { id: info.id, digest: info.launch.digest });
  assert.ok(approved.launch !== null && "approved" in approved.launch && approved.launch.approved);

  // plugins/statusChanged may reach the parent after the answer, and a queued one for the same plugin
  // may be replaced by a newer one (docs/protocol.md, Flow control): wait for "ready", do not count.
  const statuses: PluginStatus["status"][] = [];
  client.on("plugins/statusChanged", (status) => statuses.push(status.status));
  const readyNote = client.waitFor("plugins/statusChanged", (s) => s.plugin_id === info.id && s.status === "ready");
  const enabled = await client.request("plugins/enable", { id: info.id });
  assert.equal(enabled.status, "ready");
  assert.equal(enabled.tools_count, 7);
  assert.equal((await readyNote).tools_count, 7);
  assert.ok(statuses.every((s) => s === "starting" || s === "ready"));
  // The supervisor shim ran (it reports the layers it applied): the same ones the launch promised.
  assert.equal(enabled.isolation[0], "shim");
  assert.deepEqual(enabled.isolation, info.launch.isolation);

  const echoed = await client.request("tools/call", { name: "mcp-echo.echo", arguments: { text: "héllo" } });
  assert.deepEqual(echoed.structuredContent, { text: "héllo", length: 5 });
  assert.deepEqual(echoed.content, [{ type: "text", text: "héllo" }]);

  // Unknown tool: a typed error with hostd's kind.
  await assert.rejects(client.request("tools/call", { name: "mcp-echo.nope" }), (error: unknown) => {
    assert.ok(error instanceof HostdError);
    assert.equal(error.kind, "TOOL_NOT_FOUND");
    assert.equal(error.code, -32020);
    return true;
  });

  // Cancel: abort after the first progress; hostd answers -32800 and the plugin is told.
  const controller = new AbortController();
  const seen: ProgressParams[] = [];
  const cancelled = client.request(
    "tools/call",
    { name: "mcp-echo.sleep", arguments: { seconds: 60, steps: 600 } },
    {
      signal: controller.signal,
      onProgress: (progress) => {
        seen.push(progress);
        controller.abort();
      },
    },
  );
  await assert.rejects(cancelled, (error: unknown) => {
    assert.ok(error instanceof HostdError);
    assert.equal(error.kind, "REQUEST_CANCELLED");
    assert.equal(error.code, -32800);
    return true;
  });
  assert.deepEqual(seen[0], { requestId: seen[0]!.requestId, progress: 1, total: 600, message: "step 1/600" });
  const told = await client.request("tools/call", { name: "mcp-echo.seen", arguments: {} });
  assert.ok((told.structuredContent as { notifications: string[] }).notifications.includes("notifications/cancelled"));

  // Progress: in order, before the result; hostd may coalesce intermediate steps (latest wins) but
  // queues the last one before the answer, so the final step always arrives.
  const seenSteps: ProgressParams[] = [];
  const slept = await client.request(
    "tools/call",
    { name: "mcp-echo.sleep", arguments: { seconds: 0.4, steps: 4 } },
    { onProgress: (progress) => seenSteps.push(progress) },
  );
  assert.deepEqual(slept.content, [{ type: "text", text: "slept 0.4" }]);
  const steps = seenSteps.map((p) => p.progress);
  assert.equal(steps.at(-1), 4);
  assert.ok(steps.every((step, i) => i === 0 || step > steps[i - 1]!), `not increasing: ${steps.join(",")}`);
  for (const p of seenSteps) assert.deepEqual([p.total, p.message], [4, `step ${p.progress}/4`]);

  const restarted = await client.request("plugins/restart", { id: info.id });
  assert.equal(restarted.status, "ready");
  assert.equal(restarted.restarts, 1);
  const again = await client.request("tools/call", { name: "mcp-echo.echo", arguments: { text: "back" } });
  assert.deepEqual(again.structuredContent, { text: "back", length: 4 });

  const disabled = await client.request("plugins/disable", { id: info.id });
  assert.equal(disabled.status, "stopped");
  const listed = await client.request("tools/list");
  assert.deepEqual(listed.tools, []);

  assert.deepEqual(await client.request("ping"), {});
  assert.equal(await session.shutdown(), 0);
  assert.equal(client.isClosed, true);
  await assert.rejects(client.request("ping"), HostdClosedError);
});

test("a malformed line is answered with PARSE_ERROR and the channel goes on", async () => {
  let onError: (error: HostdError) => void = () => undefined;
  const parseError = new Promise<HostdError>((resolve) => {
    onError = resolve;
  });
  const strays: Stray[] = [];
  const session = await start(fx, {
    client: {
      onStray: (stray) => {
        strays.push(stray);
        if (stray.kind === "error") onError(stray.error);
      },
    },
  });
  const { client } = session;
  await client.writeRaw('{"jsonrpc":"2.0","id":1,"method":');
  const error = await parseError;
  assert.equal(error.kind, "PARSE_ERROR");
  assert.equal(error.code, -32700);
  assert.deepEqual(await client.request("ping"), {});
  assert.equal(strays.length, 1);
  assert.equal(await session.shutdown(), 0);
});

test("hostd crashing rejects the pending requests and closes the client", async () => {
  const session = await start(fx);
  const { client } = session;
  await client.request("plugins/install", { path: fx.plugin }).catch(() => undefined);
  const info = (await client.request("plugins/list")).plugins[0]!;
  await client.request("plugins/grant", { id: info.id, permissions: info.permissions });
  assert.ok(info.launch !== null && "digest" in info.launch);
  await client.request("plugins/approve", { id: info.id, digest: info.launch.digest });
  const status = await client.request("plugins/enable", { id: info.id });
  assert.equal(status.status, "ready");
  let progressed: () => void = () => undefined;
  const started = new Promise<void>((resolve) => {
    progressed = resolve;
  });
  const pending = client.request(
    "tools/call",
    { name: "mcp-echo.sleep", arguments: { seconds: 60, steps: 600 } },
    { onProgress: () => progressed() },
  );
  await started;
  process.kill(session.process.pid!, "SIGKILL");
  await assert.rejects(pending, (error: unknown) => {
    assert.ok(error instanceof HostdClosedError);
    assert.equal(error.signal, "SIGKILL");
    assert.equal(error.exitCode, null);
    return true;
  });
  const reason = await client.closed;
  assert.equal(reason.signal, "SIGKILL");
  await assert.rejects(client.request("ping"), HostdClosedError);
  // shutdown on a dead hostd resolves at once with its exit code.
  assert.equal(await session.shutdown(), null);
});

test("a listing over the 8 MiB line bound reaches the client whole, page by page (issue 29)", async () => {
  // 90 tools of 100 KiB: ~9.2 MB of tools, over the client's 8 MiB line bound in one answer.
  const own = fixture();
  try {
    const names = Array.from({ length: 90 }, (_, i) => `t${String(i).padStart(4, "0")}`);
    const manifest = {
      id: "mcp-echo",
      name: "many tools",
      version: "1.0.0",
      permissions: ["echo.use"],
      contributes: { tools: names.map((n) => `mcp-echo.${n}`) },
      backend: {
        type: "mcp",
        transport: "stdio",
        command: "python3",
        args: ["server.py", "--variant", "many-tools", "--count", "90", "--description-bytes", "102400"],
        startup_timeout_seconds: 30,
      },
    };
    writeFileSync(join(own.plugin, "plugin.yaml"), JSON.stringify(manifest));
    const session = await start(own);
    const { client } = session;
    const info = await client.request("plugins/install", { path: own.plugin });
    await client.request("plugins/grant", { id: info.id, permissions: info.permissions });
    assert.ok(info.launch !== null && "digest" in info.launch);
    await client.request("plugins/approve", { id: info.id, digest: info.launch.digest });
    assert.equal((await client.request("plugins/enable", { id: info.id })).status, "ready");
    const listed = await client.request("tools/list", { plugin: info.id });
    assert.deepEqual(
      listed.tools.map((t) => t.name),
      names.map((n) => `mcp-echo.${n}`),
    );
    assert.equal(listed.nextCursor, undefined);
    const first = await client.request("tools/list", { plugin: info.id, cursor: null });
    assert.equal(first.tools.length, 10);
    assert.equal(typeof first.nextCursor, "string");
    assert.equal(await session.shutdown(), 0);
  } finally {
    own.cleanup();
  }
});
