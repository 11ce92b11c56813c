"""Sums the JUnit XML reports of upstream/check.sh: one line per suite, then ``N passed, N failed``.

Exits 1 when a test failed or errored, or when a suite wrote no report (it crashed). With
``--json PATH`` it also writes the run's record (``onnx_masked_rnn.record``'s header, then what it
printed: ``suites``, each ``{name, passed, failed, skipped}``, and ``total``; the onnx tree, the
series' revision and the wall time), the one format of ``docs/results/upstream.json`` (the base
run) and ``docs/results/upstream_main.json`` (a run on onnx main) that ``scripts/generate_docs.py``
renders. It runs in check.sh's test venv, so the versions recorded are those the tests ran with.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from onnx_masked_rnn import record


def count(path: Path) -> dict[str, int]:
    """The passed, failed (failures and errors) and skipped tests of one report; a missing report
    (the suite crashed) counts as one failure."""
    if not path.exists():
        return {"name": path.stem, "passed": 0, "failed": 1, "skipped": 0, "crashed": 1}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return {"name": path.stem, "passed": tests - bad - skipped, "failed": bad, "skipped": skipped}


def line(suite: dict[str, int]) -> str:
    if suite.get("crashed"):
        return f"{suite['name']}: no report (the run crashed): 1 failed"
    return f"{suite['name']}: {suite['passed']} passed, {suite['failed']} failed, {suite['skipped']} skipped"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*", type=Path)
    parser.add_argument("--json", type=Path, help="also write the run's record here")
    parser.add_argument("--command", default="bash upstream/check.sh", help="the command, as run")
    parser.add_argument("--onnx", default="", help="the onnx tree the series was built on")
    parser.add_argument("--base", default=None, help="upstream/BASE, when the tree is its sdist")
    parser.add_argument("--seconds", type=int, help="the run's wall time")
    parser.add_argument("--revision", default="", help="this repository's revision (the series')")
    args = parser.parse_args(argv)
    data = record.start("upstream", ("ml_dtypes",), command=args.command)
    suites = [count(path) for path in args.reports]
    for suite in suites:
        print(line(suite))
        suite.pop("crashed", None)
    total = {"passed": sum(s["passed"] for s in suites), "failed": sum(s["failed"] for s in suites)}
    if args.json:
        fields = {"onnx_tree": args.onnx, "base": args.base, "series_revision": args.revision}
        fields |= {"seconds": args.seconds, "suites": suites, "total": total}
        record.write(record.finish(data, **fields), args.json)
    print(f"{total['passed']} passed, {total['failed']} failed")
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
