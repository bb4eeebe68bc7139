#!/usr/bin/env bash
# Fetch the pinned third-party MCP servers of the bundled catalog into the
# package caches, so that enabling them later needs no download.
# Idempotent; safe to run again. Needs node/npm (for npx) and the project venv (for uv).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v npm >/dev/null 2>&1; then
  npm cache add @modelcontextprotocol/server-everything@2026.8.31 >/dev/null 2>&1 || echo "warning: could not cache server-everything" >&2
fi
