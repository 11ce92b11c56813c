"""The whole conformance suite on ``--backend onnxruntime-kernel``: every masked-node case passes
(float16 and float64 included), every expanded case is skipped with the reason that it holds no
masked node. The runner runs the backend in a worker process: a kernel crash is a ``crashed``
outcome here, not a dead pytest."""

from __future__ import annotations

from collections import Counter

from onnx_masked_rnn.conformance import DATA_DIR
from onnx_masked_rnn.conformance.suite import load_cases, variant_of
from onnx_masked_rnn.conformance.worker import run_suite

BASE_CASES = 148


def test_every_masked_node_case_passes_on_the_kernel():
    cases = load_cases(DATA_DIR)
    outcomes = run_suite(["onnxruntime-kernel"], cases, timeout=300.0)["onnxruntime-kernel"]
    base = {name: o for name, o in outcomes if variant_of(name) == "base"}
    assert len(base) == BASE_CASES
    failed = {name: f"{o.status}: {o.detail}" for name, o in base.items() if o.status != "passed"}
    assert not failed, "\n".join(f"{name}: {detail}" for name, detail in sorted(failed.items()))
    assert {n for n in base if "float64" in n} and {n for n in base if "float16" in n}
    expanded = [o for name, o in outcomes if variant_of(name) != "base"]
    assert len(expanded) == 2 * BASE_CASES
    assert Counter(o.status for o in expanded) == {"unsupported": 2 * BASE_CASES}
    assert {o.detail for o in expanded} == {
        "expanded variant (standard ops only): no masked node for the kernel to run; "
        "--backend onnxruntime runs these graphs"
    }
