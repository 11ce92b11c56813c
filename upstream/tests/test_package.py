"""The patched onnx against this package, on every case of the package's conformance suite.

For each case (a one-node model in the package's domain with the package's reference outputs):

- the function body the patched onnx builds in C++ and the package's onnxscript body give the same
  outputs in onnxruntime, within the case's tolerances;
- the patched onnx's reference implementation agrees with the package's numpy reference.

What differs by design: the node's domain (``ai.onnx.preview`` version 1 upstream, the package's
``io.onnx_masked_rnn`` version 1) and the ai.onnx opset of the bodies (22 upstream, the case
model's 21 in the package). The node, its attributes and its inputs are otherwise the same.
"""

from __future__ import annotations

import functools

import onnx
import pytest
from _upstream import BODY_OPSET, PREVIEW, assert_close, run_onnxruntime, with_cpp_body
from onnx import helper
from onnx.reference import ReferenceEvaluator

from onnx_masked_rnn import inline
from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.conformance.expect import Case
from onnx_masked_rnn.conformance.generate import collect_cases


@functools.cache
def _cases() -> dict[str, Case]:
    return {case.name: case for case in collect_cases()}


def _upstream_model(case: Case) -> onnx.ModelProto:
    """The case's model with its node moved to ai.onnx.preview."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    (node,) = model.graph.node
    assert node.domain == DOMAIN
    node.domain = PREVIEW
    del model.opset_import[:]
    model.opset_import.extend([helper.make_opsetid("", BODY_OPSET), helper.make_opsetid(PREVIEW, 1)])
    return model


def test_suite_is_not_empty() -> None:
    assert len(_cases()) > 50


@pytest.mark.parametrize("name", sorted(_cases()))
def test_cpp_body_matches_package_body(name: str) -> None:
    case = _cases()[name]
    package = run_onnxruntime(inline(case.model, "scan"), list(case.inputs))
    upstream = run_onnxruntime(with_cpp_body(_upstream_model(case)), list(case.inputs))
    assert_close(upstream, package, case.rtol, case.atol)


@pytest.mark.parametrize("name", sorted(_cases()))
def test_reference_matches_package_reference(name: str) -> None:
    case = _cases()[name]
    model = _upstream_model(case)
    names = [i.name for i in model.graph.input]
    outputs = ReferenceEvaluator(model).run(None, dict(zip(names, case.inputs)))
    assert_close(outputs, list(case.outputs), case.rtol, case.atol)
