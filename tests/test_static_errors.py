"""The package's schemas reject every static error of the operators' text, and accept valid nodes.

The cases are ``tests/static_errors.py``'s, the onnx pull request's table, which onnx's
shape-inference tests (``upstream/onnx/tests/python/masked_*_shape_inference_test.py``) run on the
C++ schemas; the list they cover is ``onnx_masked_rnn.schema_doc.STATIC_ERRORS``, the one the doc
strings print.
"""

from __future__ import annotations

import onnx
import pytest
from static_errors import CASES, VALID, case_model, expected_shapes, make_model, table

from onnx_masked_rnn import DOMAIN, register_schemas
from onnx_masked_rnn.attributes import OP_SPECS
from onnx_masked_rnn.schema_doc import STATIC_ERRORS


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    register_schemas()


def test_every_static_error_of_every_operator_has_a_case() -> None:
    wanted = {
        (op_type, error)
        for op_type, spec in OP_SPECS.items()
        for error, (applies, _) in STATIC_ERRORS.items()
        if spec.onnx_op_type in applies
    }
    assert {(case.op_type, case.error) for case in CASES} == wanted


def test_the_onnx_table_lists_the_errors_of_the_text() -> None:
    """The onnx tests' list of errors (which their doc-coverage test counts) is the text's."""
    assert list(table.ERRORS) == list(STATIC_ERRORS)
    for error, op_types in table.ERRORS.items():
        assert sorted(OP_SPECS[op].onnx_op_type for op in op_types) == sorted(STATIC_ERRORS[error][0])


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rejects(case) -> None:
    model = case_model(case, DOMAIN)
    with pytest.raises(onnx.shape_inference.InferenceError, match=case.names) as info:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    assert case.op_type in str(info.value)


@pytest.mark.parametrize(("op_type", "attributes"), VALID)
def test_accepts_a_valid_node(op_type, attributes) -> None:
    model = make_model(op_type, DOMAIN, attributes=attributes)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {o.name: tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in inferred.graph.output}
    assert shapes == expected_shapes(op_type, attributes)
