"""Sums the JUnit XML reports of upstream/check.sh: one line per suite, then ``N passed, N failed``.

Exits 1 when a test failed or errored, or when a suite wrote no report
(it crashed).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(paths: list[str]) -> int:
    passed = failed = 0
    for path in paths:
        if not Path(path).exists():
            print(f"{Path(path).stem}: no report (the run crashed): 1 failed")
            failed += 1
            continue
        root = ET.parse(path).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        tests = sum(int(s.get("tests", 0)) for s in suites)
        bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
        skipped = sum(int(s.get("skipped", 0)) for s in suites)
        print(f"{Path(path).stem}: {tests - bad - skipped} passed, {bad} failed, {skipped} skipped")
        passed += tests - bad - skipped
        failed += bad
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
