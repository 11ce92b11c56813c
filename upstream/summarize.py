"""Sums the JUnit XML reports of upstream/check.sh: one line per suite, then ``N passed, N failed``.

Exits 1 when a test failed or errored, or when a suite wrote no report (it crashed). With
``--json PATH`` it also records the counts, the onnx tree, the machine and the versions as JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path


def count(path: str) -> dict[str, int]:
    """The passed, failed (failures and errors) and skipped tests of one report."""
    if not Path(path).exists():
        return {"passed": 0, "failed": 1, "skipped": 0, "crashed": 1}
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return {"passed": tests - bad - skipped, "failed": bad, "skipped": skipped}


def record(
    suites: dict[str, dict[str, int]], onnx_tree: str, seconds: int | None, revision: str
) -> dict[str, object]:
    versions = {}
    for name in ("onnx", "onnxruntime", "numpy", "onnxscript", "onnx_ir"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "versions": versions,
        "onnx_tree": onnx_tree,
        "series_revision": revision,
        "command": "bash upstream/check.sh" + ("" if "source distribution" in onnx_tree else " --source DIR"),
        "seconds": seconds,
        "suites": suites,
        "passed": sum(s["passed"] for s in suites.values()),
        "failed": sum(s["failed"] for s in suites.values()),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="*")
    parser.add_argument("--json", type=Path, help="also write the record here")
    parser.add_argument("--onnx", default="", help="the onnx tree the series was built on")
    parser.add_argument("--seconds", type=int, help="the run's wall time")
    parser.add_argument("--revision", default="", help="this repository's revision (the series')")
    args = parser.parse_args(argv)
    suites = {}
    for path in args.reports:
        name = Path(path).stem
        suites[name] = counts = count(path)
        if counts.pop("crashed", 0):
            print(f"{name}: no report (the run crashed): 1 failed")
        else:
            passed, failed, skipped = counts["passed"], counts["failed"], counts["skipped"]
            print(f"{name}: {passed} passed, {failed} failed, {skipped} skipped")
    passed = sum(s["passed"] for s in suites.values())
    failed = sum(s["failed"] for s in suites.values())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(record(suites, args.onnx, args.seconds, args.revision), indent=2) + "\n"
        )
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
