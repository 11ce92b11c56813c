"""The known limitations: for each runtime (and variant of it) the tests check, every case of the
shipped suite that does not pass, its outcome and the defects behind it (``defects.DEFECTS``).

The list is data, ``known_limitations.json`` beside this module, with the runtime versions it was
measured with. ``python -m onnx_masked_rnn.conformance.limitations`` runs the suite on the checked
backends and rewrites it, refusing when an outcome matches no defect (find the defect, write its
repro in ``defects.py``, then rerun). Read the diff before committing it. With ``--record PATH``
it also runs the suite on :data:`RECORDED` (the backends nothing fails on, not checked here) and
writes a record of the run (``onnx_masked_rnn.record``: date, machine, versions; counts of those
backends, time per backend and variant), ``docs/results/conformance.json``, from which
``scripts/generate_docs.py`` writes the documents' tables (:func:`markdown` gives the defects').
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import onnx
from onnx.backend.test.case.test_case import TestCase

from onnx_masked_rnn import record
from onnx_masked_rnn.conformance import DATA_DIR
from onnx_masked_rnn.conformance.backends import missing_package
from onnx_masked_rnn.conformance.defects import DEFECTS
from onnx_masked_rnn.conformance.outcomes import STATUSES, Outcome
from onnx_masked_rnn.conformance.suite import load_cases, load_data_sets, variant_of
from onnx_masked_rnn.conformance.worker import run_plan

__all__ = [
    "CHECKED",
    "PATH",
    "explain",
    "known_limitation",
    "load",
    "markdown",
    "observed",
    "plan",
    "variant_of",
    "versions",
]

# For each built-in runtime and variant, every case of the shipped suite that does not pass, its
# outcome and the defects behind it (:func:`main` measures it, the tests check it).
PATH = Path(__file__).with_name("known_limitations.json")

# backend -> the variants of the suite checked on it: every variant on every runtime, the masked
# node on OpenVINO and tract too (unsupported: neither has model-local functions) and tract's
# native expansion (its If), so that a runtime upgrade that changes any cell is noticed.
CHECKED: dict[str, tuple[str, ...]] = {
    "onnxruntime": ("base", "expanded", "native"),
    "onnxruntime-noopt": ("base", "expanded", "native"),
    "openvino": ("base", "expanded", "native"),
    "tract": ("base", "expanded", "native"),
}

RECORDED: dict[str, tuple[str, ...] | None] = {
    "reference": None,
    "onnx-reference": None,
    "onnxruntime-kernel": ("base",),
}
"""The backends ``--record`` also runs the suite on, for their counts (they pass everything; the
conformance tests check that), with the variants each runs (None: every one). The kernel runs the
masked node (the expansions hold none) and is left out, saying why, when its library was not
built."""

_PACKAGES = {
    "onnxruntime": "onnxruntime",
    "onnxruntime-noopt": "onnxruntime",
    "openvino": "openvino",
    "tract": "tract",
}


def versions() -> dict[str, str]:
    """The installed version of each checked runtime."""
    return {package: version(package) for package in sorted(set(_PACKAGES.values()))}


def load() -> dict[str, Any]:
    """``known_limitations.json``: ``{"versions": ..., "checked": {backend: [variant, ...]},
    "counts": {backend: {variant: {status: n}}}, "backends": {backend: {case: {"status": ...,
    "defects": [...]}}}}``."""
    return json.loads(PATH.read_text())


def known_limitation(known: dict[str, Any], backend: str, case: TestCase, outcome: Outcome) -> list[str]:
    """The defects ``known`` (:func:`load`) lists for this outcome of a case of the shipped suite
    on a built-in backend; empty when it lists none (a new failure)."""
    if Path(case.model_dir).resolve().parent != (DATA_DIR / "node").resolve():
        return []
    entry = known.get("backends", {}).get(backend, {}).get(case.name)
    return list(entry["defects"]) if entry and entry["status"] == outcome.status else []


def observed(results: dict[str, list[tuple[str, Outcome]]]) -> dict[str, dict[str, str]]:
    """``{backend: {case: status}}`` of every case that did not pass."""
    return {
        backend: {name: o.status for name, o in outcomes if o.status != "passed"}
        for backend, outcomes in results.items()
    }


def explain(backend: str, case: str, outcome: Outcome, data_dir: Path = DATA_DIR) -> list[str]:
    """The defects (``DEFECTS`` keys) that account for ``outcome`` of ``case`` on ``backend``."""
    case_dir = Path(data_dir) / "node" / case
    model = onnx.load(str(case_dir / "model.onnx"))
    inputs: list[np.ndarray] = load_data_sets(SimpleNamespace(model_dir=case_dir))[0][0]
    return [key for key, defect in DEFECTS.items() if defect.explains(backend, outcome, model, inputs)]


def plan(data_dir: Path = DATA_DIR) -> dict[str, list[Any]]:
    """The cases :data:`CHECKED` asks for, per backend (``worker.run_plan`` runs them)."""
    cases = load_cases(data_dir)
    return {
        backend: [c for c in cases if variant_of(c.name) in variants] for backend, variants in CHECKED.items()
    }


def counts(results: dict[str, list[tuple[str, Outcome]]]) -> dict[str, dict[str, dict[str, int]]]:
    """``{backend: {variant: {status: count}}}`` of a run."""
    tallies: dict[str, dict[str, dict[str, int]]] = {}
    for backend, outcomes in results.items():
        tallies[backend] = {}
        for name, outcome in outcomes:
            tally = tallies[backend].setdefault(variant_of(name), dict.fromkeys(STATUSES, 0))
            tally[outcome.status] += 1
    return tallies


def markdown(data: dict[str, Any] | None = None) -> str:
    """The defects as the Markdown tables of ``docs/runtimes.md``: each defect that cases show, with
    their count per runtime, then those no case shows (the workaround avoids them)."""
    data = data or load()
    lines: list[str] = []
    used = {
        key: {b: sum(key in e["defects"] for e in cases.values()) for b, cases in data["backends"].items()}
        for key in DEFECTS
    }
    lines += ["| defect | outcome | cases (runtime: count) | what |", "|---|---|---|---|"]
    for key, defect in DEFECTS.items():
        if any(used[key].values()):
            shown = ", ".join(f"{b}: {n}" for b, n in used[key].items() if n)
            lines.append(f"| `{key}` | {defect.status} | {shown} | {defect.summary} |")
    lines += [
        "",
        "Defects no case shows (the portable graphs avoid them); their repros still show them, and the "
        "tests check that too:",
        "",
        "| defect | outcome | what | why no case shows it |",
        "|---|---|---|---|",
    ]
    for key, defect in DEFECTS.items():
        if not any(used[key].values()):
            lines.append(f"| `{key}` | {defect.status} | {defect.summary} | {defect.workaround} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m onnx_masked_rnn.conformance.limitations",
        description="Run the suite on the checked backends and rewrite known_limitations.json.",
    )
    parser.add_argument(
        "--record",
        metavar="PATH",
        help=f"also run {', '.join(RECORDED)} and write a record of the run (docs/results/conformance.json)",
    )
    args = parser.parse_args(argv)
    recorded = record.start("conformance", ["openvino", "tract"])
    checked = plan()
    extra = {}
    for backend, variants in RECORDED.items() if args.record else ():
        package = missing_package(backend)
        if package:
            print(f"{backend}: not recorded ({package} is not installed or built)", file=sys.stderr)
            continue
        extra[backend] = [
            c for c in load_cases(DATA_DIR) if variants is None or variant_of(c.name) in variants
        ]
    start = time.perf_counter()
    run = run_plan({**checked, **extra}, progress=sys.stderr.isatty())
    wall = time.perf_counter() - start
    tallies = counts(run)
    seconds = {
        backend: {v: sum(o.seconds for n, o in results if variant_of(n) == v) for v in tallies[backend]}
        for backend, results in run.items()
    }
    for backend, times in seconds.items():
        print(f"{backend}: " + ", ".join(f"{v} {t:.1f} s" for v, t in times.items()))

    listing: dict[str, dict[str, dict[str, Any]]] = {}
    unexplained = []
    for backend in checked:
        listing[backend] = {}
        for name, outcome in run[backend]:
            if outcome.status == "passed":
                continue
            defects = explain(backend, name, outcome)
            if not defects:
                unexplained.append(f"{backend}: {name}: {outcome.status}: {outcome.detail}")
            listing[backend][name] = {"status": outcome.status, "defects": defects}
    if unexplained:
        print("no defect explains:\n" + "\n".join(unexplained), file=sys.stderr)
        return 1
    checked_counts = {b: tallies[b] for b in checked}
    data = {"versions": versions(), "checked": CHECKED, "counts": checked_counts, "backends": listing}
    PATH.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {PATH}: " + ", ".join(f"{b} {len(v)} cases" for b, v in listing.items()))
    if args.record:
        record.finish(
            recorded,
            known_limitations="onnx_masked_rnn/conformance/known_limitations.json",
            wall_seconds=wall,
            seconds=seconds,
            counts={b: tallies[b] for b in extra},
        )
        record.write(recorded, args.record)
        print(f"wrote {args.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
