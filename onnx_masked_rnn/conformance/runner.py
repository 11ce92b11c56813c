"""``onnx-masked-rnn conformance``: run the conformance suite on one or more backends.

Reads a suite in ONNX's backend-test layout (``DIR/node/test_*/``; by default the one shipped in
the package), runs every case on every chosen backend, each backend in a worker process of its own
(``worker``), compares with the case's ``rtol``/``atol`` the way onnx's backend-test runner does,
classifies each result (``outcomes``: passed, wrong, error, crashed, unsupported), prints a table
(backend x outcome, every unsupported reason, every failure) and ends with the line
``N passed, M failed, K skipped`` (failed: wrong, error or crashed; skipped: unsupported). Exit
status 1 when anything failed.

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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnx_masked_rnn.conformance.outcomes import STATUSES, Outcome, classify_error, describe_mismatch

if TYPE_CHECKING:
    import numpy as np
    from onnx.backend.test.case.test_case import TestCase

# Without --backend: onnxruntime and the package's two references, on which no case fails.
DEFAULT_BACKENDS = ("onnxruntime", "reference", "onnx-reference")

__all__ = [
    "DEFAULT_BACKENDS",
    "add_arguments",
    "backends_of",
    "compare",
    "load_cases",
    "load_data_sets",
    "report",
    "run",
    "run_case",
    "run_plan",
    "run_suite",
]


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
        help="onnxruntime, onnxruntime-noopt (graph optimizations disabled), openvino, tract, reference, "
        "onnx-reference, all (every one of these whose package is installed), or module:Class, "
        "any object with onnx's Backend interface (prepare(model, device).run(inputs), "
        "supports_device), e.g. onnxruntime.backend.backend:OnnxRuntimeBackend, or a module that has "
        "them (onnxruntime.backend); repeatable (default: onnxruntime, reference and onnx-reference, "
        "on which nothing fails). ALLOW_RELEASED_ONNX_OPSET_ONLY=0 is set unless already set",
    )
    parser.add_argument(
        "--filter", type=_regex, metavar="REGEX", help="run only the cases whose name matches (re.search)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=600.0,
        metavar="SECONDS",
        help="a case running longer on a backend is reported as crashed (default: 600)",
    )


def _regex(text: str) -> re.Pattern[str]:
    """``--filter``'s type: a bad pattern is a usage error (exit status 2) naming it."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid regular expression: {exc}") from None


def _positive_seconds(text: str) -> float:
    """``--timeout``'s type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _read_meta(path: Path) -> dict[str, Any]:
    """``data.json`` of one case: its ``rtol``/``atol`` (onnx's defaults when absent)."""
    import json

    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(meta).__name__}")
    for key in ("rtol", "atol"):
        if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], int | float)):
            raise ValueError(f"{path}: {key!r} must be a number, got {meta[key]!r}")
    return meta


def _check_data_sets(case_dir: Path) -> None:
    """A case needs at least one ``test_data_set_*`` folder, each with ``output_0.pb`` and numbered
    files without gaps; anything else would compare nothing and pass."""
    folders = sorted(case_dir.glob("test_data_set_*"))
    if not folders:
        raise ValueError(f"{case_dir}: no test_data_set_*/ folder, so nothing to compare")
    for folder in folders:
        for kind in ("input", "output"):
            count = len(list(folder.glob(f"{kind}_*.pb")))
            missing = [f"{kind}_{i}.pb" for i in range(count) if not (folder / f"{kind}_{i}.pb").is_file()]
            if missing:
                raise ValueError(f"{folder}: {count} {kind}_*.pb files but {missing[0]} is missing")
        if not (folder / "output_0.pb").is_file():
            raise ValueError(f"{folder}: no output_0.pb, so nothing to compare")


def load_cases(data_dir: Path) -> list[TestCase]:
    """The suite's cases as onnx ``TestCase`` objects, as onnx's on-disk loader builds them:
    ``model_dir`` set, ``rtol``/``atol`` from ``data.json`` (onnx's defaults when absent).

    ``onnx.backend.test.loader.load_model_tests(data_dir, kind="node")`` would be the call, but
    since onnx 1.16 it returns onnx's own in-memory node tests for ``kind="node"`` whatever
    ``data_dir`` says; this reads the folder instead, field for field as that loader does. A case
    folder without ``model.onnx`` or test data, or with a ``data.json`` that is not valid, is a
    ``ValueError`` naming the file.
    """
    from onnx.backend.test.case.test_case import TestCase

    node_dir = Path(data_dir) / "node"
    if not node_dir.is_dir():
        raise ValueError(f"{data_dir} holds no node/ folder of conformance cases")
    cases = []
    for case_dir in sorted(p for p in node_dir.iterdir() if p.is_dir()):
        if not (case_dir / "model.onnx").is_file():
            raise ValueError(f"{case_dir}: no model.onnx")
        meta = _read_meta(case_dir / "data.json")
        _check_data_sets(case_dir)
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
        try:
            tensor.ParseFromString(path.read_bytes())
            return numpy_helper.to_array(tensor)
        except Exception as exc:  # protobuf's DecodeError, or a tensor numpy cannot hold
            raise ValueError(f"{path}: not a readable TensorProto: {exc}") from None

    data_sets = []
    for folder in sorted(Path(case.model_dir).glob("test_data_set_*")):
        count = {kind: len(list(folder.glob(f"{kind}_*.pb"))) for kind in ("input", "output")}
        data_sets.append(
            tuple(
                [read(folder / f"{kind}_{i}.pb") for i in range(count[kind])] for kind in ("input", "output")
            )
        )
    return data_sets  # type: ignore[return-value]


def run_case(backend: Any, case: TestCase, device: str = "CPU") -> Outcome:
    """Prepare and run one case on ``backend`` in this process (see :func:`compare`). A case file
    that cannot be read is an ``error`` naming the file."""
    import onnx

    path = Path(case.model_dir) / "model.onnx"
    try:
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # protobuf's DecodeError
            raise ValueError(f"{path}: not a readable ONNX model: {exc}") from None
        data_sets = load_data_sets(case)
    except ValueError as exc:
        return Outcome("error", f"cannot read the case: {exc}")
    return compare(backend, model, data_sets, case.rtol, case.atol, device)


def compare(
    backend: Any,
    model: Any,
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]],
    rtol: float,
    atol: float,
    device: str = "CPU",
) -> Outcome:
    """Run ``model`` on ``backend`` for each ``(inputs, expected)``; compare as onnx's backend-test
    runner does; classify the result (see ``outcomes``)."""
    import numpy as np
    from onnx.backend.test.runner import Runner

    start = time.perf_counter()

    def done(outcome: Outcome) -> Outcome:
        return dataclasses.replace(outcome, seconds=time.perf_counter() - start)

    try:
        if hasattr(backend, "is_compatible") and not backend.is_compatible(model):
            return done(Outcome("unsupported", "the backend's is_compatible() returned False"))
        rep = backend.prepare(model, device)
        results = [(expected, [np.asarray(o) for o in rep.run(inputs)]) for inputs, expected in data_sets]
    except unittest.SkipTest as exc:
        return done(Outcome("unsupported", str(exc) or "skipped by the backend"))
    except Exception as exc:  # any error of the backend is the case's outcome
        return done(classify_error(exc))
    worst = 0.0
    for expected, outputs in results:
        try:
            Runner.assert_similar_outputs(expected, outputs, rtol=rtol, atol=atol)
        except (AssertionError, TypeError):
            return done(Outcome("wrong", describe_mismatch(expected, outputs, rtol, atol)))
        for out, ref in zip(outputs, expected):
            diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
            worst = max(worst, float(np.max(diff, initial=0.0, where=~np.isnan(diff))))
    return done(Outcome("passed", error=worst))


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        sys.stderr.write("\r\033[K" + text[:120])
        sys.stderr.flush()


def report(results: dict[str, list[tuple[str, Outcome]]]) -> str:
    """The table (a row per backend: a column per outcome, the largest error among passed cases,
    the time), every unsupported reason with its count, and every failed case."""
    lines = []
    width = max(len("backend"), *(len(b) for b in results))
    header = f"{'backend':<{width}}" + "".join(f"  {s:>{max(6, len(s))}}" for s in STATUSES)
    lines.append(header + f"  {'max |err|':>9}  {'time':>6}")
    for backend, outcomes in results.items():
        counts = Counter(o.status for _, o in outcomes)
        errors = [o.error for _, o in outcomes if o.status == "passed"]
        worst = f"{max(errors):9.1e}" if errors else f"{'-':>9}"
        seconds = sum(o.seconds for _, o in outcomes)
        row = f"{backend:<{width}}" + "".join(f"  {counts[s]:>{max(6, len(s))}}" for s in STATUSES)
        lines.append(row + f"  {worst}  {seconds:>5.1f}s")
    for backend, outcomes in results.items():
        reasons = Counter(o.detail for _, o in outcomes if o.verdict == "skipped")
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"skipped  {backend}: {count} x {reason}")
    for backend, outcomes in results.items():
        for name, outcome in outcomes:
            if outcome.verdict == "failed":
                lines.append(f"FAILED   {backend}: {name}: {outcome.status}: {outcome.detail}")
    return "\n".join(lines)


def backends_of(specs: Sequence[str]) -> tuple[list[str], list[str]]:
    """The backends ``--backend`` names (``all`` expanded) and the notes on built-in backends
    ``all`` leaves out because their package is not installed. Each is checked: importable, with
    the Backend interface, supporting the CPU (``ValueError`` otherwise)."""
    from onnx_masked_rnn.conformance.backends import BUILTIN, missing_package, resolve

    names: list[str] = []
    notes: list[str] = []
    for spec in specs:
        if spec != "all":
            names.append(spec)
            continue
        for name in BUILTIN:
            package = missing_package(name)
            if package:
                notes.append(f"--backend all: left out {name} ({package} is not installed)")
            else:
                names.append(name)
    names = list(dict.fromkeys(names))
    for name in names:
        if not resolve(name).supports_device("CPU"):
            raise ValueError(f"--backend {name!r} does not support device CPU")
    return names, notes


def run_suite(
    specs: Sequence[str], cases: Sequence[TestCase], timeout: float = 600.0, progress: bool = False
) -> dict[str, list[tuple[str, Outcome]]]:
    """Every case on every backend: ``{backend: [(case name, outcome), ...]}`` in case order."""
    return run_plan({spec: cases for spec in specs}, timeout, progress)


def run_plan(
    plan: dict[str, Sequence[TestCase]], timeout: float = 600.0, progress: bool = False
) -> dict[str, list[tuple[str, Outcome]]]:
    """Each backend's cases (``plan``: backend -> cases), each backend in a worker process of its
    own (see ``worker``), all backends at once: ``{backend: [(case name, outcome), ...]}``."""
    from onnx_masked_rnn.conformance.worker import run_cases

    results: dict[str, list[Any]] = {spec: [None] * len(cases) for spec, cases in plan.items()}
    total, done = sum(len(cases) for cases in plan.values()), 0
    for spec, index, outcome in run_cases(plan, timeout):
        name = plan[spec][index].name
        results[spec][index] = (name, outcome)
        done += 1
        _progress(progress, f"{done}/{total} {spec}: {name}")
    _progress(progress, "")
    return results


def run(args: argparse.Namespace) -> int:
    """Run the suite per ``args`` (see :func:`add_arguments`); print the report; 1 on any failure."""
    from onnx_masked_rnn.conformance import DATA_DIR

    data_dir = Path(args.directory) if args.directory else DATA_DIR
    names, notes = backends_of(args.backend or list(DEFAULT_BACKENDS))
    cases = load_cases(data_dir)
    if args.filter:
        cases = [c for c in cases if args.filter.search(c.name)]
    if not cases:
        matching = f" matches --filter {args.filter.pattern!r}" if args.filter else ""
        raise ValueError(f"no conformance case under {data_dir}{matching}")

    print(f"conformance suite: {data_dir} ({len(cases)} cases)")
    for note in notes:
        print(note)
    results = run_suite(names, cases, args.timeout, progress=sys.stderr.isatty())
    print(report(results))
    verdicts = Counter(o.verdict for outcomes in results.values() for _, o in outcomes)
    print(f"{verdicts['passed']} passed, {verdicts['failed']} failed, {verdicts['skipped']} skipped")
    return 1 if verdicts["failed"] else 0
