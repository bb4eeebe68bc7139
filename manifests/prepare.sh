#!/usr/bin/env bash
# Check that the registries serve every pinned third-party MCP server of the
# bundled catalog, before anything depends on them (CI, a first enable).
#
# It fetches nothing into any cache hostd uses: every plugin's packages are
# installed by plugins/prepare into its own environment, with caches of its
# own (<state>/prepared/<id>, see hostd/install/prepare.py), so a package fetched here
# would never be found by a plugin. What is left worth
# doing ahead of time is asking the registries for the exact pins: a pin that
# was yanked or a registry that cannot be reached shows up here, with the
# client's own message, rather than as a plugin that fails to start.
# Each check asks for metadata only (about a second), with a throwaway cache:
# the user's ~/.npm and uv caches are neither read nor written.
#
# It never fails: a pin it cannot confirm is reported as a warning, and the
# real-server tests (tests/test_real_servers.py, tests/test_real_catalog.py)
# then skip that server with the reason. The pins below must equal the
# manifests' (a test checks it). Needs npm and the project venv (for uv).
set -euo pipefail
cd "$(dirname "$0")/.."
# npm's "New minor version of npm available" banner is not about the pins: never print it.
export npm_config_update_notifier=false

NPM_PINS=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-sequential-thinking@2026.8.31"
)
PYPI_PINS=(
  "mcp-server-time==2026.10.19"
  "mcp-server-git==2026.10.19"
  "mcp-server-fetch==2026.10.24"
)

warn() { echo "manifests/prepare.sh: warning: $*" >&2; }
# What it is doing, while it does it (one line per pin; ~1 s each): never a silent wait.
say() { echo "manifests/prepare.sh: $*"; }
say "asking the registries for the ${#NPM_PINS[@]} npm and ${#PYPI_PINS[@]} PyPI pins of the catalog (metadata only, no cache of yours)"

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

# npm: `npm view <name>@<version> version` prints the version when the registry
# has it, and fails with E404 (or a network error) when it does not.
if command -v npm >/dev/null 2>&1; then
  for spec in "${NPM_PINS[@]}"; do
    if ! found="$(npm_config_cache="$scratch/npm" npm view "$spec" version </dev/null)" \
      || [ "$found" != "${spec##*@}" ]; then
      warn "the npm registry does not serve $spec (see npm's message above)"
    else
      say "  npm serves $spec"
    fi
  done
else
  warn "npm not found: ${NPM_PINS[*]} not checked"
fi

# PyPI: `uv pip compile` resolves the pin with its dependencies, from metadata.
UV=""
if [ -x .venv/bin/uv ]; then
  UV=.venv/bin/uv
elif command -v uv >/dev/null 2>&1; then
  UV=uv
fi
if [ -n "$UV" ]; then
  for spec in "${PYPI_PINS[@]}"; do
    if ! echo "$spec" | UV_CACHE_DIR="$scratch/uv" "$UV" pip compile --quiet --no-header - >/dev/null; then
      warn "the package index does not serve $spec (see uv's message above)"
    else
      say "  the package index serves $spec (it resolves with its dependencies)"
    fi
  done
else
  warn "uv not found (is the venv installed?): ${PYPI_PINS[*]} not checked"
fi
say "done"
