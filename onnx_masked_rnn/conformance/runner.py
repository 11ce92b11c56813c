"""``onnx-masked-rnn conformance``: run the conformance suite on one or more backends.

Reads a suite in ONNX's backend-test layout (``DIR/node/test_*/``; by default the one shipped in
the package), runs every case on every chosen backend, compares with the case's ``rtol``/``atol``
the way onnx's backend-test runner does, prints a table (backend x passed/failed/skipped, every
skip's reason, every failure) and ends with the line ``N passed, N failed``. Exit status 1 when
anything failed.

Module-level imports stay light: ``cli`` imports this module to build its parser.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
import unittest
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from onnx.backend.test.case.test_case import TestCase

__all__ = ["Outcome", "add_arguments", "load_cases", "load_data_sets", "run", "run_case"]

_BUILTIN_NAMES = ("onnxruntime", "reference", "onnx-reference")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="suite root holding node/test_*/ (default: the suite shipped in the package)",
    )
    parser.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="onnxruntime, reference, onnx-reference, all (the default: the three), or module:Class, "
        "any object with onnx's Backend interface (prepare(model, device).run(inputs), "
        "supports_device), e.g. onnxruntime.backend.backend:OnnxRuntimeBackend, or a module that has "
        "them (onnxruntime.backend); repeatable. ALLOW_RELEASED_ONNX_OPSET_ONLY=0 is set unless already set",
    )
    parser.add_argument("--filter", metavar="REGEX", help="run only the cases whose name matches (re.search)")


def load_cases(data_dir: Path) -> list[TestCase]:
    """The suite's cases as onnx ``TestCase`` objects, as onnx's on-disk loader builds them:
    ``model_dir`` set, ``rtol``/``atol`` from ``data.json`` (onnx's defaults when absent).

    ``onnx.backend.test.loader.load_model_tests(data_dir, kind="node")`` would be the call, but
    since onnx 1.16 it returns onnx's own in-memory node tests for ``kind="node"`` whatever
    ``data_dir`` says; this reads the folder instead, field for field as that loader does.
    """
    import json

    from onnx.backend.test.case.test_case import TestCase

    node_dir = Path(data_dir) / "node"
    if not node_dir.is_dir():
        raise ValueError(f"{data_dir} holds no node/ folder of conformance cases")
    cases = []
    for case_dir in sorted(node_dir.iterdir()):
        if not (case_dir / "model.onnx").is_file():
            continue
        meta = json.loads((case_dir / "data.json").read_text()) if (case_dir / "data.json").exists() else {}
        cases.append(
            TestCase(
                name=case_dir.name,
                model_name=case_dir.name,
                url=None,
                model_dir=str(case_dir),
                model=None,
                data_sets=None,
                kind="node",
                rtol=meta.get("rtol", 1e-3),
                atol=meta.get("atol", 1e-7),
            )
        )
    return cases


def load_data_sets(case: TestCase) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """``(inputs, expected outputs)`` of each ``test_data_set_*`` folder of the case."""
    import onnx
    from onnx import numpy_helper

    def read(path: Path) -> np.ndarray:
        tensor = onnx.TensorProto()
        tensor.ParseFromString(path.read_bytes())
        return numpy_helper.to_array(tensor)

    data_sets = []
    for folder in sorted(Path(case.model_dir).glob("test_data_set_*")):
        count = {kind: len(list(folder.glob(f"{kind}_*.pb"))) for kind in ("input", "output")}
        data_sets.append(
            tuple(
                [read(folder / f"{kind}_{i}.pb") for i in range(count[kind])] for kind in ("input", "output")
            )
        )
    return data_sets  # type: ignore[return-value]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One case on one backend: ``status`` is passed, failed or skipped; ``detail`` the skip
    reason or failure message; ``error`` the largest absolute difference from the expected
    outputs (NaN when nothing was compared)."""

    status: str
    detail: str = ""
    error: float = float("nan")


def run_case(backend: Any, case: TestCase, device: str = "CPU") -> Outcome:
    """Prepare and run one case on ``backend``; compare as onnx's backend-test runner does."""
    import numpy as np
    import onnx
    from onnx.backend.test.runner import Runner

    try:
        model = onnx.load(str(Path(case.model_dir) / "model.onnx"))
        if hasattr(backend, "is_compatible") and not backend.is_compatible(model):
            return Outcome("skipped", "the backend's is_compatible() returned False")
        rep = backend.prepare(model, device)
        worst = 0.0
        for inputs, expected in load_data_sets(case):
            outputs = [np.asarray(o) for o in rep.run(inputs)]
            Runner.assert_similar_outputs(expected, outputs, rtol=case.rtol, atol=case.atol)
            for out, ref in zip(outputs, expected):
                diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
                worst = max(worst, float(np.max(diff, initial=0.0, where=~np.isnan(diff))))
        return Outcome("passed", error=worst)
    except unittest.SkipTest as exc:
        return Outcome("skipped", str(exc) or "skipped by the backend")
    except Exception as exc:  # any error of the backend is a failure of the case
        lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
        return Outcome("failed", f"{type(exc).__name__}: " + " | ".join(lines[:6]))


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        sys.stderr.write("\r\033[K" + text[:120])
        sys.stderr.flush()


def _report(results: dict[str, list[tuple[str, Outcome]]], seconds: dict[str, float]) -> str:
    lines = []
    width = max(len("backend"), *(len(b) for b in results))
    lines.append(
        f"{'backend':<{width}}  {'passed':>6}  {'failed':>6}  {'skipped':>7}  {'max |err|':>9}  {'time':>6}"
    )
    for backend, outcomes in results.items():
        counts = Counter(o.status for _, o in outcomes)
        errors = [o.error for _, o in outcomes if o.status == "passed"]
        worst = f"{max(errors):9.1e}" if errors else f"{'-':>9}"
        lines.append(
            f"{backend:<{width}}  {counts['passed']:>6}  {counts['failed']:>6}  {counts['skipped']:>7}  "
            f"{worst}  {seconds[backend]:>5.1f}s"
        )
    for backend, outcomes in results.items():
        reasons = Counter(o.detail for _, o in outcomes if o.status == "skipped")
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
            lines.append(f"skipped  {backend}: {count} x {reason}")
    for backend, outcomes in results.items():
        for name, outcome in outcomes:
            if outcome.status == "failed":
                lines.append(f"FAILED   {backend}: {name}: {outcome.detail}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run the suite per ``args`` (see :func:`add_arguments`); print the report; 1 on any failure."""
    from onnx_masked_rnn.conformance import DATA_DIR
    from onnx_masked_rnn.conformance.backends import resolve

    data_dir = Path(args.directory) if args.directory else DATA_DIR
    names: list[str] = []
    for spec in args.backend or ["all"]:
        names.extend(_BUILTIN_NAMES if spec == "all" else [spec])
    backends = {name: resolve(name) for name in dict.fromkeys(names)}
    for name, backend in backends.items():
        if not backend.supports_device("CPU"):
            raise ValueError(f"--backend {name!r} does not support device CPU")
    cases = load_cases(data_dir)
    if args.filter:
        pattern = re.compile(args.filter)
        cases = [c for c in cases if pattern.search(c.name)]
    if not cases:
        matching = f" matches --filter {args.filter!r}" if args.filter else ""
        raise ValueError(f"no conformance case under {data_dir}{matching}")

    print(f"conformance suite: {data_dir} ({len(cases)} cases)")
    show = sys.stderr.isatty()
    results: dict[str, list[tuple[str, Outcome]]] = {}
    seconds: dict[str, float] = {}
    for name, backend in backends.items():
        start = time.perf_counter()
        results[name] = []
        for i, case in enumerate(cases):
            _progress(show, f"{name}: {i + 1}/{len(cases)} {case.name}")
            results[name].append((case.name, run_case(backend, case)))
        seconds[name] = time.perf_counter() - start
    _progress(show, "")
    print(_report(results, seconds))
    passed = sum(o.status == "passed" for outcomes in results.values() for _, o in outcomes)
    failed = sum(o.status == "failed" for outcomes in results.values() for _, o in outcomes)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
