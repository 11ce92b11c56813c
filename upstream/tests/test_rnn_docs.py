"""Series 3-rnn-doc-clarification: the LSTM, GRU and RNN documentation of the patched onnx.

The text is what upstream/lstm-doc-clarification.md proposes (issue 22 item 4), without "it is an
error to give more values than the functions consume", which would make valid LSTM-22 nodes
invalid; and ThresholdedRelu is written as its operator defines it and its reference computes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

OPS = ("LSTM", "GRU", "RNN")


def schema(op: str) -> onnx.defs.OpSchema:
    return onnx.defs.get_schema(op, 22)


def attribute(op: str, name: str) -> str:
    return schema(op).attributes[name].description


@pytest.mark.parametrize("op", OPS)
def test_thresholded_relu_is_the_operators(op: str) -> None:
    assert "ThresholdedRelu(x)     - x if x > alpha else 0" in schema(op).doc
    assert "x >= alpha" not in schema(op).doc


def test_the_thresholded_relu_operator_says_and_computes_greater_than() -> None:
    assert "y = x for x > alpha, y = 0 otherwise" in onnx.defs.get_schema("ThresholdedRelu").doc
    node = helper.make_node("ThresholdedRelu", ["x"], ["y"], alpha=1.0)
    (y,) = ReferenceEvaluator(node).run(None, {"x": np.array([0.5, 1.0, 1.5], np.float32)})
    np.testing.assert_array_equal(y, [0.0, 0.0, 1.5])


@pytest.mark.parametrize("op", OPS)
def test_activation_parameters(op: str) -> None:
    alpha, beta = attribute(op, "activation_alpha"), attribute(op, "activation_beta")
    for text in (alpha, beta):
        assert "consumed in the order of `activations`" in text
        assert "consumes none" in text
        assert "error" not in text  # values left over stay what they are today (issue 22 item 4)
    assert "ThresholdedRelu 1.0" in alpha and "Affine 1.0 and ScaledTanh 1.0" in alpha
    assert "HardSigmoid 0.5" in beta and "Affine 0.0 and ScaledTanh 1.0" in beta
    doc = schema(op).doc.replace("alpha * x", "alpha*x")
    assert "alpha*x + beta (alpha defaults to 1.0, beta to 0.0)" in doc


@pytest.mark.parametrize("op", OPS)
def test_clip_and_sequence_lens(op: str) -> None:
    assert "Ct of LSTM is not clipped" in attribute(op, "clip")
    outputs = {o.name: o.description for o in schema(op).outputs}
    assert "`Y` is 0 at the steps `t >= sequence_lens[b]`" in outputs["Y"]
    assert "step `sequence_lens[b] - 1` for the forward direction" in outputs["Y_h"]


def test_input_forget_and_rnn_activations() -> None:
    assert "`ft = 1 - it`" in attribute("LSTM", "input_forget")
    two = "may also list two functions, as the default does; the first is used"
    assert two in attribute("RNN", "activations")


def test_documentation_only() -> None:
    """Types, defaults and versions are LSTM-22's, GRU-22's and RNN-22's as before."""
    lstm = schema("LSTM")
    assert lstm.since_version == 22
    assert helper.get_attribute_value(lstm.attributes["input_forget"].default_value) == 0
    rnn_default = schema("RNN").attributes["activations"].default_value
    assert helper.get_attribute_value(rnn_default) == [b"Tanh", b"Tanh"]
