/** @hostd/client: a typed client of hostd's control protocol (docs/openrpc.json). */

export * from "./generated.js";
export * from "./ndjson.js";
export * from "./client.js";
export * from "./lifecycle.js";
export * from "./node.js";
export * from "./tauri.js";
