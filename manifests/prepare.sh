#!/usr/bin/env bash
# Fetch the pinned third-party MCP servers of the bundled catalog into the
# package caches, so that enabling them later needs no download.
# Idempotent; safe to run again. Needs node/npm (for npx) and the project venv (for uv).
#
# It never fails: a server it cannot fetch is reported as a warning, and the
# real-server tests (tests/test_real_servers.py) then skip that server with
# the reason. The pins below must equal the manifests' (a test checks it).
set -euo pipefail
cd "$(dirname "$0")/.."

SERVER_EVERYTHING="@modelcontextprotocol/server-everything@2026.8.31"
MCP_SERVER_TIME="mcp-server-time==2026.10.19"

warn() { echo "manifests/prepare.sh: warning: $*" >&2; }

# server-everything: install it, dependencies included, into npx's own cache
# (~/.npm/_npx/<hash of the spec>), the very folder the manifest's
# `npx -y <spec>` looks in: the hash covers only the spec string, so
# `--package=<spec>` here and `npx -y <spec>` in the manifest share it. Running
# `node -e ""` instead of the server keeps this from waiting on stdin.
# A second run finds the install and only revalidates the package metadata.
if command -v npx >/dev/null 2>&1; then
  if ! npx --yes --package="$SERVER_EVERYTHING" -- node -e "" </dev/null >/dev/null; then
    warn "could not fetch $SERVER_EVERYTHING (see npm's message above)"
  fi
else
  warn "npx not found: $SERVER_EVERYTHING not fetched"
fi

# mcp-server-time: install it as a uv tool (its own environment under
# ~/.local/share/uv/tools, its executable in ~/.local/bin). The manifest's
# `uvx --from <spec> mcp-server-time` then uses that installed environment as it
# is, with no index request, as long as the installed version satisfies the pin.
# `uv tool install` of an already installed, matching version is a no-op.
UV=""
if [ -x .venv/bin/uv ]; then
  UV=.venv/bin/uv
elif command -v uv >/dev/null 2>&1; then
  UV=uv
fi
if [ -n "$UV" ]; then
  if ! "$UV" tool install --quiet "$MCP_SERVER_TIME" </dev/null; then
    warn "could not install $MCP_SERVER_TIME with uv (see uv's message above)"
  fi
else
  warn "uv not found (is the venv installed?): $MCP_SERVER_TIME not fetched"
fi
