"""Authoring with onnxscript: the README's first example runs and asserts its own equality, and a
model calling two differently configured ops through an ``Opset`` object runs after
``attach_functions``."""

from __future__ import annotations

import runpy

import numpy as np
from onnxscript import FLOAT, INT32, script
from onnxscript import opset18 as op
from onnxscript.values import Opset
from toolkit import ROOT, run

import onnx_masked_rnn
from onnx_masked_rnn.reference import masked_gru

EXAMPLE = ROOT / "examples" / "author_with_onnxscript.py"
masked = Opset(onnx_masked_rnn.DOMAIN, onnx_masked_rnn.OPSET_VERSION)
H = 4


def test_example_runs():
    runpy.run_path(str(EXAMPLE), run_name="__main__")  # asserts onnxruntime == reference


@script()
def two_grus(X: FLOAT[5, 2, 3], W: FLOAT[1, 12, 3], R: FLOAT[1, 12, 4], lens: INT32[2]):
    Y1, _ = masked.MaskedGRU(X, W, R, None, lens, hidden_size=H, masked_output="zero")
    Y2, _ = masked.MaskedGRU(X, W, R, None, lens, hidden_size=H, direction="reverse", linear_before_reset=1)
    return op.Add(Y1, Y2)


def test_two_configurations_authored_in_onnxscript():
    model = onnx_masked_rnn.attach_functions(two_grus.to_model_proto())
    rng = np.random.default_rng(0)
    feeds = {
        "X": rng.standard_normal((5, 2, 3), np.float32),
        "W": rng.standard_normal((1, 12, 3), np.float32) * 0.5,
        "R": rng.standard_normal((1, 12, 4), np.float32) * 0.5,
        "lens": np.array([5, 2], np.int32),
    }
    (actual,) = run(model, feeds)
    first, _ = masked_gru(
        feeds["X"], feeds["W"], feeds["R"], sequence_lens=feeds["lens"], masked_output="zero"
    )
    second, _ = masked_gru(
        feeds["X"],
        feeds["W"],
        feeds["R"],
        sequence_lens=feeds["lens"],
        direction="reverse",
        linear_before_reset=1,
    )
    np.testing.assert_allclose(actual, first + second, rtol=1e-5, atol=1e-6)
