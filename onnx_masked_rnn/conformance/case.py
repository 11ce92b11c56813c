"""One conformance case on one backend, in this process: prepare, run, compare with the case's
``rtol``/``atol`` the way onnx's backend-test runner does, and classify the result (``outcomes``).
"""

from __future__ import annotations

import dataclasses
import re
import time
import unittest
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.runner import Runner

from onnx_masked_rnn.conformance.outcomes import Outcome, classify_error, describe_mismatch
from onnx_masked_rnn.conformance.suite import describe_case, load_data_sets, load_model

__all__ = ["compare", "run_case"]


def run_case(
    backend: Any, case: TestCase, device: str = "CPU", unsupported: Sequence[re.Pattern[str]] = ()
) -> Outcome:
    """Prepare and run one case on ``backend`` in this process (see :func:`compare`; the layout
    a *wrong* case's first difference is read with comes from ``suite.describe_case``, read only
    then). A case file that cannot be read is an ``error`` naming the file."""
    case_dir = Path(case.model_dir)
    try:
        model = load_model(case_dir / "model.onnx")
        data_sets = load_data_sets(case)
    except ValueError as exc:
        return Outcome("error", f"cannot read the case: {exc}")

    def layout() -> int | None:
        value = describe_case(case_dir, model).get("layout")
        return None if value is None else int(value)

    return compare(backend, model, data_sets, case.rtol, case.atol, device, unsupported, layout)


def compare(
    backend: Any,
    model: onnx.ModelProto,
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]],
    rtol: float,
    atol: float,
    device: str = "CPU",
    unsupported: Sequence[re.Pattern[str]] = (),
    layout: int | Callable[[], int | None] | None = None,
) -> Outcome:
    """Run ``model`` on ``backend`` for each ``(inputs, expected)``; compare as onnx's backend-test
    runner does; classify the result (see ``outcomes``: an error matching one of ``unsupported`` is
    unsupported; a *wrong* result names the first output that differs and where, reading its axes
    by the masked op's ``layout`` when given: a number, or a function giving it, called only for a
    wrong result)."""
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
        return done(classify_error(exc, unsupported))
    worst = 0.0
    for expected, outputs in results:
        try:
            Runner.assert_similar_outputs(expected, outputs, rtol=rtol, atol=atol)
        except (AssertionError, TypeError):
            names = [o.name for o in model.graph.output]
            axes = layout() if callable(layout) else layout
            return done(Outcome("wrong", describe_mismatch(expected, outputs, rtol, atol, names, axes)))
        for out, ref in zip(outputs, expected):
            diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
            worst = max(worst, float(np.max(diff, initial=0.0, where=~np.isnan(diff))))
    return done(Outcome("passed", error=worst))
