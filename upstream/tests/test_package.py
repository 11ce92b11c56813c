"""The patched onnx against this package, on every case of the package's conformance suite.

For each case (a one-node model in the package's domain with the package's reference outputs):

- the function body the patched onnx builds in C++ and the package's onnxscript body give the same
  outputs in onnxruntime, within the case's tolerances;
- the patched onnx's reference implementation agrees with the package's numpy reference.

What differs by design: the node's domain (``ai.onnx.preview`` version 1 upstream, the package's
``io.onnx_masked_rnn`` version 1). The node, its attributes, its inputs and the model's ai.onnx
opset (the case's) are otherwise the same.
"""

from __future__ import annotations

import functools

import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from upstream_testing import ai_onnx_opset, assert_close, preview_model, run_onnxruntime, with_cpp_body

from onnx_masked_rnn import DOMAIN, inline
from onnx_masked_rnn.conformance.expect import Case
from onnx_masked_rnn.conformance.generate import collect_cases


@functools.cache
def _cases() -> dict[str, Case]:
    return {case.name: case for case in collect_cases()}


def _upstream_model(case: Case) -> onnx.ModelProto:
    """The case's model with its node moved to ai.onnx.preview."""
    assert case.model.graph.node[0].domain == DOMAIN
    return preview_model(case.model, ai_onnx_opset(case.model))


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
