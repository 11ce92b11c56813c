"""Write a model that uses MaskedLSTM in onnxscript, run it in onnxruntime, check it against the
reference. Run: ``python examples/author_with_onnxscript.py``."""

import numpy as np
import onnxruntime as ort
from onnxscript import BOOL, FLOAT, script
from onnxscript import opset18 as op
from onnxscript.values import Opset

import onnx_masked_rnn

masked = Opset(onnx_masked_rnn.DOMAIN, onnx_masked_rnn.OPSET_VERSION)
I, H = 8, 16


@script()
def tagger(
    X: FLOAT["N", "T", I],  # noqa: F821 (symbolic dimensions, not names)
    mask: BOOL["N", "T"],  # noqa: F821
    W: FLOAT[1, 4 * H, I],
    R: FLOAT[1, 4 * H, H],
    B: FLOAT[1, 8 * H],
):
    # Inputs by position, None for the absent ones (B, sequence_lens, initial_h, initial_c, P, mask):
    # onnxscript drops the gaps of keyword inputs.
    Y, Y_h, Y_c = masked.MaskedLSTM(
        X, W, R, B, None, None, None, None, mask, hidden_size=H, layout=1, masked_output="carry"
    )
    return op.Squeeze(Y, [2])  # [N, T, H]: one direction


model = onnx_masked_rnn.attach_functions(tagger.to_model_proto())  # adds the MaskedLSTM body

rng = np.random.default_rng(0)
feeds = {
    "X": rng.standard_normal((3, 5, I), np.float32),
    "mask": rng.random((3, 5)) > 0.3,  # e.g. Keras Masking: False at padded or skipped steps
    "W": rng.standard_normal((1, 4 * H, I), np.float32) * 0.3,
    "R": rng.standard_normal((1, 4 * H, H), np.float32) * 0.3,
    "B": rng.standard_normal((1, 8 * H), np.float32) * 0.3,
}
(Y,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
expected, _, _ = onnx_masked_rnn.reference.masked_lstm(
    **feeds, hidden_size=H, layout=1, masked_output="carry"
)
np.testing.assert_allclose(Y, expected[:, :, 0], rtol=1e-5, atol=1e-6)
print("onnxruntime equals the reference; max |difference| =", float(np.abs(Y - expected[:, :, 0]).max()))
