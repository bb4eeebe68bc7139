"""Judge a conformance results folder: passed/total per suite, and the failures against each suite's expected list.

``RESULTS/<suite>/<scenario>-<stamp>/checks.json`` holds one scenario's checks (conformance/run.sh).
A scenario passes when none of its checks is a FAILURE or a WARNING (the harness's own rule). Prints, per
suite, ``<suite> core: P/T`` and ``<suite> auth: P/T`` with the failed scenarios, then ``<suite>: P/T``;
exits 1 when a scenario failed that ``EXPECTED/<suite>.yml`` does not list, or one it lists passed (the
list is then stale).
Usage: python conformance/summary.py RESULTS_FOLDER EXPECTED_FOLDER SUITE...
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def judge(root: Path, expected_file: Path, suite: str) -> bool:
    """Print one suite's figures; True when its failures are exactly the expected ones (of those run)."""
    expected = set((yaml.safe_load(expected_file.read_text()) or {}).get("client", []))
    results: dict[str, bool] = {}
    for checks_file in sorted(root.rglob("checks.json")):
        scenario = _STAMP.sub("", checks_file.parent.relative_to(root).as_posix())
        checks = json.loads(checks_file.read_text())
        results[scenario] = not any(check["status"] in ("FAILURE", "WARNING") for check in checks)
    for part in ("core", "auth"):
        mine = {name: ok for name, ok in results.items() if name.startswith("auth/") == (part == "auth")}
        failed = ", ".join(name for name, ok in mine.items() if not ok) or "none"
        print(f"{suite} {part}: {sum(mine.values())}/{len(mine)} scenarios passed (failed: {failed})")
    print(f"{suite}: {sum(results.values())}/{len(results)} scenarios passed")
    unexpected = sorted(name for name, ok in results.items() if not ok and name not in expected)
    stale = sorted(name for name, ok in results.items() if ok and name in expected)
    for name in unexpected:
        print(f"{suite}: unexpected failure: {name}")
    for name in stale:
        print(f"{suite}: passes now, remove from {expected_file}: {name}")
    return not unexpected and not stale


def main() -> int:
    root, expected_folder, suites = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    verdicts = [judge(root / suite, expected_folder / f"{suite}.yml", suite) for suite in suites]
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
