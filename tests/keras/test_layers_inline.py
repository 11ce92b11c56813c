"""Keras parity through the function bodies: Keras 3 layers (torch backend) with masks, converted
by ``onnx_masked_rnn.keras``, run in onnxruntime on every path of ``toolkit.PATHS``.

Tolerance: ``toolkit.TOLERANCE`` (float32; Keras and onnxruntime differ in summation order).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from oracles import assert_close
from toolkit import PATHS, TOLERANCE, run

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.functions import MIN_OPSET
from onnx_masked_rnn.keras import convert_layer, initial_state_to_onnx, outputs_to_keras
from onnx_masked_rnn.testing import make_mask, make_model

# conftest.py sets KERAS_BACKEND=torch before any import of keras: these cases assert that backend.
assert keras.backend.backend() == "torch", keras.backend.backend()

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)

T, N, I, H = 7, 4, 3, 5

# id -> (layer factory, mask kind, with initial state)
CASES = {
    "LSTM-holes-carry": (
        lambda: keras.layers.LSTM(H, return_sequences=True, return_state=True),
        "holes",
        True,
    ),
    "GRU-reset_after-left_padded": (
        lambda: keras.layers.GRU(H, return_sequences=True, return_state=True, reset_after=True),
        "left_padded",
        False,
    ),
    "SimpleRNN-go_backwards-one_row_masked": (
        lambda: keras.layers.SimpleRNN(H, return_sequences=True, return_state=True, go_backwards=True),
        "one_row_masked",
        True,
    ),
    "Bidirectional-LSTM-right_padded-zero": (
        lambda: keras.layers.Bidirectional(
            keras.layers.LSTM(H, return_sequences=True, return_state=True), merge_mode=None
        ),
        "right_padded",
        False,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_keras_parity_through_the_bodies(case):
    factory, mask_kind, with_state = CASES[case]
    rng = np.random.default_rng(len(case))
    layer = factory()
    layer.build((None, None, I))
    layer.set_weights([(rng.standard_normal(w.shape) * 0.6).astype(np.float32) for w in layer.get_weights()])
    x = rng.standard_normal((N, T, I)).astype(np.float32)
    mask = make_mask(mask_kind, T, N, rng, layout=1)
    op_type, attributes, weights = convert_layer(layer)
    num_states = (2 if op_type == "MaskedLSTM" else 1) * (
        2 if attributes["direction"] == "bidirectional" else 1
    )
    states = (
        [(rng.standard_normal((N, H)) * 0.5).astype(np.float32) for _ in range(num_states)]
        if with_state
        else None
    )
    keras_outputs = [keras.ops.convert_to_numpy(o) for o in layer(x, mask=mask, initial_state=states)]

    inputs = {"X": x, **weights, **(initial_state_to_onnx(op_type, states) if states else {}), "mask": mask}
    attrs = parse_attributes(op_type, **attributes, layout=1)
    model = make_model(attrs, inputs, MIN_OPSET)
    for name, prepare in PATHS.items():
        outputs = outputs_to_keras(run(prepare(model), inputs), attributes["direction"])
        assert_close(f"Keras torch vs onnxruntime, {name}", outputs, keras_outputs, **TOLERANCE)
