"""Judge a conformance results folder: passed/total per suite, and the failures against the expected list.

A scenario passes when none of its checks is a FAILURE or a WARNING (the harness's own rule). Prints
``core: P/T`` and ``auth: P/T`` with the failed scenarios; exits 1 when a scenario failed that
``expected-failures.yml`` does not list, or one it lists passed (the list is then stale).
Usage: python conformance/summary.py RESULTS_FOLDER EXPECTED_FAILURES_YML
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def main() -> int:
    root, expected_file = Path(sys.argv[1]), Path(sys.argv[2])
    expected = set((yaml.safe_load(expected_file.read_text()) or {}).get("client", []))
    results: dict[str, bool] = {}
    for checks_file in sorted(root.rglob("checks.json")):
        scenario = _STAMP.sub("", checks_file.parent.relative_to(root).as_posix())
        checks = json.loads(checks_file.read_text())
        results[scenario] = not any(check["status"] in ("FAILURE", "WARNING") for check in checks)
    for suite in ("core", "auth"):
        mine = {name: ok for name, ok in results.items() if name.startswith("auth/") == (suite == "auth")}
        failed = ", ".join(name for name, ok in mine.items() if not ok) or "none"
        print(f"{suite}: {sum(mine.values())}/{len(mine)} scenarios passed (failed: {failed})")
    unexpected = sorted(name for name, ok in results.items() if not ok and name not in expected)
    stale = sorted(name for name, ok in results.items() if ok and name in expected)
    for name in unexpected:
        print(f"unexpected failure: {name}")
    for name in stale:
        print(f"passes now, remove from {expected_file}: {name}")
    return 1 if unexpected or stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
