"""The C++-built function bodies in models at every ai.onnx opset the package supports (18 and
newer, up to onnx's newest), issue 22 item 10.

For each opset and node: onnx's C++ inliner expands the node (the typical Keras node omits the
inputs between B and mask), the result passes the full checker and onnxruntime computes the
package's reference outputs; and the body attached as a model-local function passes the full
checker and onnxruntime likewise.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import inliner
from upstream_testing import OPSETS, PREVIEW, assert_close, preview_model, run_onnxruntime, with_cpp_body

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.reference import FUNCTIONS
from onnx_masked_rnn.testing import make_model, random_inputs

# (op_type, attributes, inputs present besides X, W, R): Keras' node (B and mask only), and others
# that reach every part of the body (reverse Scan, carry state, peepholes, sequence_lens, layout).
NODES = {
    "masked_lstm_keras": ("MaskedLSTM", {"masked_output": "carry"}, ("B", "mask")),
    "masked_lstm_bidirectional_batchwise": (
        "MaskedLSTM",
        {"direction": "bidirectional", "layout": 1},
        ("B", "sequence_lens", "initial_h", "initial_c", "P", "mask"),
    ),
    "masked_gru_reverse_linear_before_reset": (
        "MaskedGRU",
        {"direction": "reverse", "linear_before_reset": 1, "masked_output": "carry"},
        ("B", "initial_h", "mask"),
    ),
    "masked_rnn_bidirectional": ("MaskedRNN", {"direction": "bidirectional"}, ("B", "sequence_lens", "mask")),
}


def node_model(name: str, opset: int, dtype: type = np.float32) -> tuple[onnx.ModelProto, list, list]:
    """The model of ``NODES[name]`` at ``opset``, its inputs and the package's reference outputs."""
    op_type, extra, present = NODES[name]
    attrs = parse_attributes(op_type, hidden_size=3, **extra)
    lens = np.array([5, 0, 2], np.int32) if "sequence_lens" in present else None
    rng = np.random.default_rng(0)
    feeds = random_inputs(attrs, 5, 3, 2, 3, rng=rng, dtype=dtype, present=present, sequence_lens=lens)
    expected = FUNCTIONS[op_type](**feeds, **attrs.to_onnx())
    model = preview_model(make_model(attrs, feeds), opset)
    names = [i.name for i in model.graph.input]
    return model, [feeds[n] for n in names], list(expected)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(NODES))
def test_inlined_body(name: str, opset: int) -> None:
    model, inputs, expected = node_model(name, opset)
    # Only the masked node: onnx's inliner cannot expand a context-dependent function (CastLike)
    # inside a subgraph of the body (If), it looks its input types up in the main graph only.
    selected = [(PREVIEW, NODES[name][0])]
    inlined = inliner.inline_selected_functions(model, selected, exclude=False, inline_schema_functions=True)
    assert NODES[name][0] not in {n.op_type for n in inlined.graph.node}
    onnx.checker.check_model(inlined, full_check=True)
    assert_close(run_onnxruntime(inlined, inputs), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(NODES))
def test_model_local_function(name: str, opset: int) -> None:
    model, inputs, expected = node_model(name, opset)
    attached = with_cpp_body(model)
    onnx.checker.check_model(attached, full_check=True)
    assert_close(run_onnxruntime(attached, inputs), expected, rtol=1e-5, atol=1e-5)
