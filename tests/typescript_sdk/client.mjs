// The official MCP TypeScript SDK's client over stdio, driving `hostd mcp` as any Node MCP client would
// (tests/test_gateway_typescript.py, issue 27). Usage: node client.mjs PYTHON STATE_DIR CALLS_JSON
// (CALLS_JSON: [[tool name, arguments], ...])
// Prints one JSON object: the server's name and capabilities, the tool names listed (every page)
// and each call's result, as the SDK parsed them (its schemas validate each response).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [python, state, calls] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "hostd", "mcp", "--state-dir", state],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "typescript-sdk", version: "1.32.2" });
await client.connect(transport);
const names = [];
let cursor;
do {
  const page = await client.listTools(cursor === undefined ? {} : { cursor });
  names.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor !== undefined);
const called = [];
for (const [name, args] of JSON.parse(calls)) {
  called.push(await client.callTool({ name, arguments: args }));
}
console.log(
  JSON.stringify({
    server: client.getServerVersion()?.name,
    capabilities: Object.keys(client.getServerCapabilities() ?? {}).sort(),
    tools: names.sort(),
    called,
  }),
);
await client.close();
