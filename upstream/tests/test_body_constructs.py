"""The C++-built bodies use the constructs the package's bodies use where a runtime broke on others.

The package changed its bodies (tests/test_emitted_constructs.py): every Constant is a ``value``
tensor (TVM rejects ``value_int(s)``/``value_float(s)``); the emptiness test is on ``T·N``
(``Mul`` of two ``Gather`` of ``Shape(X)``: no ``ReduceProd``, and no ``Size(X)``, which would call
an X of shape ``[T, N, 0]`` empty); batch-major float16 X is projected before the transpose
(onnxruntime 1.32's MatmulTransposeFusion crashed a float16 MatMul fed by a Transpose of X under
ORT_ENABLE_ALL). These tests check the same of the C++ bodies, on every case of the package's
conformance suite and on the cases that broke.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from upstream_testing import (
    ai_onnx_opset,
    assert_close,
    model_body,
    preview_model,
    run_onnxruntime,
    with_cpp_body,
)

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.conformance.generate import collect_cases
from onnx_masked_rnn.reference import FUNCTIONS
from onnx_masked_rnn.testing import make_model, random_inputs

SCALAR_CONSTANTS = {"value_int", "value_ints", "value_float", "value_floats", "value_string", "value_strings"}


@functools.cache
def cases() -> dict[str, onnx.ModelProto]:
    return {case.name: preview_model(case.model, ai_onnx_opset(case.model)) for case in collect_cases()}


def nodes(graph_nodes):
    """Every node of a function body, those of its subgraphs (Scan and If bodies) included."""
    for node in graph_nodes:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from nodes(attribute.g.node)
            for graph in attribute.graphs:
                yield from nodes(graph.node)


def offending_constructs(function: onnx.FunctionProto) -> list[str]:
    found = []
    for node in nodes(function.node):
        if node.op_type == "Constant":
            found += [f"Constant {a.name}" for a in node.attribute if a.name in SCALAR_CONSTANTS]
        if node.op_type in ("ReduceProd", "Size"):
            found.append(node.op_type)
    return found


@pytest.mark.parametrize("name", sorted(cases()))
def test_constants_are_tensors_and_no_reduce_prod_or_size(name: str) -> None:
    assert offending_constructs(model_body(cases()[name])) == []


def test_empty_check_keeps_an_input_size_of_zero() -> None:
    """X of shape [T, N, 0]: the recurrence still runs (B and R move the state)."""
    for op_type in ("MaskedLSTM", "MaskedGRU", "MaskedRNN"):
        attrs = parse_attributes(op_type, hidden_size=3)
        feeds = random_inputs(attrs, 4, 2, 0, 3, rng=np.random.default_rng(0), present=("B", "mask"))
        expected = FUNCTIONS[op_type](**feeds, **attrs.to_onnx())
        assert np.abs(expected[1]).max() > 0.01
        model = with_cpp_body(preview_model(make_model(attrs, feeds), 22))
        names = [i.name for i in model.graph.input]
        assert_close(run_onnxruntime(model, [feeds[n] for n in names]), list(expected), 1e-5, 1e-6)


def transposed_x_feeds_matmul(function: onnx.FunctionProto) -> bool:
    """Whether a Transpose of X (directly) feeds a MatMul anywhere in the body."""
    all_nodes = list(nodes(function.node))
    transposed = {o for n in all_nodes if n.op_type == "Transpose" and n.input[0] == "X" for o in n.output}
    return any(n.op_type == "MatMul" and set(n.input) & transposed for n in all_nodes)


_RUN_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np, onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
    feeds = dict(np.load(sys.argv[2]))
    np.savez(sys.argv[3], *session.run(None, feeds))
    """
)


@pytest.mark.parametrize("op_type", ["MaskedLSTM", "MaskedGRU", "MaskedRNN"])
def test_float16_batch_major_followed_by_products_runs_under_ort_enable_all(
    op_type: str, tmp_path: Path
) -> None:
    """Y followed by a MatMul and a Mul (a tagger's head), onnxruntime in a child process (it
    crashed the process at session creation)."""
    H = 4
    attrs = parse_attributes(op_type, hidden_size=H, layout=1, direction="bidirectional")
    rng = np.random.default_rng(0)
    feeds = random_inputs(attrs, 5, 3, 2, H, rng=rng, dtype=np.float16, present=("B", "mask"))
    model = with_cpp_body(preview_model(make_model(attrs, feeds), 22))
    assert not transposed_x_feeds_matmul(model.functions[0])
    weights = {"MatMul": np.linspace(-1, 1, H * 3).reshape(H, 3), "Mul": np.linspace(-1, 1, H)}
    del model.graph.output[:]
    for op, weight in weights.items():
        model.graph.initializer.append(numpy_helper.from_array(weight.astype(np.float16), f"{op}_weight"))
        model.graph.node.append(helper.make_node(op, ["Y", f"{op}_weight"], [op]))
        model.graph.output.append(helper.make_tensor_value_info(op, onnx.TensorProto.FLOAT16, None))
    onnx.save(model, tmp_path / "model.onnx")
    np.savez(tmp_path / "feeds.npz", **feeds)
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_CHILD,
            *(str(tmp_path / f) for f in ("model.onnx", "feeds.npz", "out.npz")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, (
        f"onnxruntime's child exited with {child.returncode}: {child.stderr[-2000:]}"
    )
    Y = FUNCTIONS[op_type](**feeds, **attrs.to_onnx())[0].astype(np.float32)
    expected = [Y @ weights["MatMul"], Y * weights["Mul"]]
    with np.load(tmp_path / "out.npz") as out:
        actual = [out[f"arr_{i}"].astype(np.float32) for i in range(len(out.files))]
    assert_close(actual, expected, rtol=1e-2, atol=1e-2)
