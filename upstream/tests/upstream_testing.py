"""Helpers of the upstream tests: masked models in ai.onnx.preview, the patched onnx's function
bodies attached to them, and runs.

These tests run in the venv of ``upstream/check.sh``, where ``onnx`` is the patched build.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import onnxruntime as ort
from onnx import helper

PREVIEW = onnx.defs.AI_ONNX_PREVIEW_DOMAIN
MASKED_OPS = ("MaskedLSTM", "MaskedGRU", "MaskedRNN")
OPSETS = range(18, onnx.defs.onnx_opset_version() + 1)
"""The ai.onnx opsets the package's bodies support (18 and newer), up to onnx's newest."""


def ai_onnx_opset(model: onnx.ModelProto | onnx.FunctionProto) -> int | None:
    """The ai.onnx version ``model`` imports, None if it imports none."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def preview_model(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """``model`` (one masked node in any domain) with its node in ai.onnx.preview version 1 and
    ai.onnx imported at ``opset``."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    (node,) = out.graph.node
    node.domain = PREVIEW
    del out.opset_import[:]
    out.opset_import.extend([helper.make_opsetid("", opset), helper.make_opsetid(PREVIEW, 1)])
    out.ir_version = max(out.ir_version, 10)
    return out


def cpp_body(node: onnx.NodeProto, input_types: list[onnx.TypeProto]) -> onnx.FunctionProto:
    """The function body the patched onnx's C++ builder makes for ``node`` (an ai.onnx.preview
    masked node) with input types ``input_types`` (one per node input, empty for absent ones)."""
    schema = onnx.defs.get_schema(node.op_type, 1, PREVIEW)
    data = schema.get_context_dependent_function_with_opset_version(
        1, node.SerializeToString(), [t.SerializeToString() for t in input_types]
    )
    function = onnx.FunctionProto()
    function.ParseFromString(data)
    if not function.node:
        raise AssertionError(f"no function body for {node.op_type}")
    return function


def model_body(model: onnx.ModelProto) -> onnx.FunctionProto:
    """The C++-built body of ``model``'s one masked node, for the node's input types."""
    (node,) = model.graph.node
    types = {v.name: v.type for v in model.graph.input}
    return cpp_body(node, [types[name] if name else onnx.TypeProto() for name in node.input])


def with_cpp_body(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (one masked ai.onnx.preview node, ai.onnx imported) with that node's C++-built
    body attached as a model-local function.

    The function declares as many outputs as the node has: onnxruntime (and onnx's full checker)
    reject a model-local function with more outputs than its call node. A body that imports no
    ai.onnx version gets the model's (its ops are those of the model's opset).
    """
    (node,) = model.graph.node
    function = model_body(model)
    del function.output[len(node.output) :]
    if ai_onnx_opset(function) is None:
        function.opset_import.append(helper.make_opsetid("", ai_onnx_opset(model)))
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.functions.append(function)
    out.ir_version = max(out.ir_version, 10)
    return out


def run_onnxruntime(model: onnx.ModelProto, inputs: list[np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


def assert_close(actual: list[np.ndarray], expected: list[np.ndarray], rtol: float, atol: float) -> None:
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, f"output {i}: shape {a.shape}, expected {e.shape}"
        np.testing.assert_allclose(
            a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"output {i}"
        )
