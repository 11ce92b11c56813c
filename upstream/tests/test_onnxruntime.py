"""onnxruntime on the node tests the patch series adds (``test_masked_*``, ``test_scan9_*``).

onnxruntime carries its own copy of onnx and cannot know the patched schemas, so it runs

- every ``*_expanded*`` test as onnx generates it (the C++-built function body inlined by onnx's
  ``expect``: standard ai.onnx ops only), and
- every base test with that C++-built body attached as a model-local function (the node stays),

against the outputs onnx's reference computed, with the test's own tolerances.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.backend.test.case.node import collect_testcases
from upstream_testing import MASKED_OPS, PREVIEW, assert_close, run_onnxruntime, with_cpp_body

NEW_SCAN_TESTS = ("test_scan9_reverse", "test_scan9_mixed_directions", "test_scan9_axes")


@functools.cache
def _cases() -> dict[str, object]:
    cases = {}
    for case in collect_testcases():
        ops = {node.op_type for node in case.model.graph.node}
        if case.name.startswith("test_masked_") or case.name in NEW_SCAN_TESTS:
            cases[case.name] = case
        elif ops & set(MASKED_OPS):
            raise AssertionError(f"masked node test {case.name} does not start with test_masked_")
    return cases


def _names(expanded: bool) -> list[str]:
    return sorted(n for n in _cases() if ("_expanded" in n) == expanded)


def test_every_op_has_node_tests() -> None:
    ops = {n.op_type for c in _cases().values() for n in c.model.graph.node if n.domain == PREVIEW}
    assert ops == set(MASKED_OPS)
    assert all(n.removesuffix("_expanded_ver22") in _cases() for n in _names(expanded=True))
    assert len(_names(expanded=True)) == len(
        [n for n in _names(expanded=False) if n.startswith("test_masked")]
    )


@pytest.mark.parametrize("name", _names(expanded=True))
def test_expanded(name: str) -> None:
    case = _cases()[name]
    (inputs, outputs) = case.data_sets[0]
    assert_close(run_onnxruntime(case.model, list(inputs)), list(outputs), case.rtol, case.atol)


@pytest.mark.parametrize("name", _names(expanded=False))
def test_base_with_cpp_body(name: str) -> None:
    case = _cases()[name]
    (inputs, outputs) = case.data_sets[0]
    model = case.model if name in NEW_SCAN_TESTS else with_cpp_body(case.model)
    assert_close(run_onnxruntime(model, list(inputs)), list(outputs), case.rtol, case.atol)


def test_mask_of_another_shape_fails_at_run_time() -> None:
    """A mask that would broadcast against X's first two axes ([T, 1] for [T, N]) is an error."""
    node = helper.make_node("MaskedLSTM", ["X", "W", "R", "", "", "", "", "", "mask"], ["Y"], domain=PREVIEW)
    graph = helper.make_graph(
        [node],
        "wrong_mask",
        [
            helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, ["T", "N", 2]),
            helper.make_tensor_value_info("W", onnx.TensorProto.FLOAT, [1, 12, 2]),
            helper.make_tensor_value_info("R", onnx.TensorProto.FLOAT, [1, 12, 3]),
            helper.make_tensor_value_info("mask", onnx.TensorProto.BOOL, ["T", "M"]),
        ],
        [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
    )
    # The body takes the model's ai.onnx opset (it imports none of its own).
    opsets = [helper.make_opsetid(PREVIEW, 1), helper.make_opsetid("", 22)]
    model = with_cpp_body(helper.make_model(graph, opset_imports=opsets))
    X = np.ones((4, 3, 2), np.float32)
    W, R = np.ones((1, 12, 2), np.float32), np.ones((1, 12, 3), np.float32)
    run_onnxruntime(model, [X, W, R, np.ones((4, 3), bool)])  # the right shape runs
    with pytest.raises(Exception, match="Concat"):
        run_onnxruntime(model, [X, W, R, np.ones((4, 1), bool)])
