"""The Keras architectures the export tests run (tests/keras/test_export.py and
tests/keras/test_export_cli.py): each a model factory with the number of masked nodes strategy
"function" gives, built with random weights, and batches for them on a mask of a given kind."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from onnx_masked_rnn.testing import make_mask

VOCABULARY, I, H = 20, 4, 5


def _ids() -> Any:
    return keras.Input((None,), dtype="int32", name="ids")


def _features() -> Any:
    return keras.Input((None, I), name="x")


def imdb() -> keras.Model:
    """The Keras example "Bidirectional LSTM on IMDB", small: Embedding(mask_zero) ->
    Bidirectional(LSTM, return_sequences) -> Bidirectional(LSTM) -> Dense."""
    ids = _ids()
    x = keras.layers.Embedding(VOCABULARY, 6, mask_zero=True)(ids)
    x = keras.layers.Bidirectional(keras.layers.LSTM(H, return_sequences=True))(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(H))(x)
    return keras.Model(ids, keras.layers.Dense(1, activation="sigmoid")(x))


def onnxruntime_12492() -> keras.Model:
    """The scenario of onnxruntime issue 12492: Embedding(mask_zero=True) -> LSTM returning its
    sequence and states, where onnxruntime's LSTM with sequence_lens writes zeros at padded steps
    and Keras repeats the previous output."""
    ids = _ids()
    x = keras.layers.Embedding(VOCABULARY, 6, mask_zero=True)(ids)
    y, h, c = keras.layers.LSTM(H, return_sequences=True, return_state=True)(x)
    return keras.Model(ids, [y, h, c])


def gru_time_distributed() -> keras.Model:
    """Masking -> GRU(reset_after=False) -> TimeDistributed(Dense)."""
    x = _features()
    y = keras.layers.Masking(0.0)(x)
    y = keras.layers.GRU(H, reset_after=False, return_sequences=True)(y)
    return keras.Model(x, keras.layers.TimeDistributed(keras.layers.Dense(3))(y))


def simple_rnn_lstm() -> keras.Model:
    """Masking -> SimpleRNN -> LSTM(return_sequences=False) -> Dense, as a Sequential model."""
    return keras.Sequential(
        [
            _features(),
            keras.layers.Masking(0.0),
            keras.layers.SimpleRNN(H, return_sequences=True),
            keras.layers.LSTM(H, return_sequences=False),
            keras.layers.Dense(2),
        ]
    )


def go_backwards_initial_state() -> keras.Model:
    """Masking -> GRU(go_backwards=True) with initial_state fed from a second input, returning its
    sequence (in processing order, as Keras does) and state."""
    x, h0 = _features(), keras.Input((H,), name="h0")
    y = keras.layers.Masking(0.0)(x)
    y, h = keras.layers.GRU(H, go_backwards=True, return_sequences=True, return_state=True)(
        y, initial_state=[h0]
    )
    return keras.Model([x, h0], [y, h])


def activations_explicit_mask() -> keras.Model:
    """hard_sigmoid (Keras 3: HardSigmoid(1/6, 0.5)) and relu, the mask an explicit model input:
    LSTM(relu, hard_sigmoid) -> GRU(relu, hard_sigmoid, reset_after=True) -> SimpleRNN(relu)."""
    x, mask = _features(), keras.Input((None,), dtype="bool", name="mask")
    y = keras.layers.LSTM(H, activation="relu", recurrent_activation="hard_sigmoid", return_sequences=True)(
        x, mask=mask
    )
    y = keras.layers.GRU(H, activation="relu", recurrent_activation="hard_sigmoid", return_sequences=True)(
        y, mask=mask
    )
    y = keras.layers.SimpleRNN(H, activation="relu")(y, mask=mask)
    return keras.Model([x, mask], y)


def bidirectional_merge_modes() -> keras.Model:
    """Every Bidirectional merge_mode on one Masking mask, with return_state on one of them."""
    x = _features()
    m = keras.layers.Masking(0.0)(x)
    summed = keras.layers.Bidirectional(keras.layers.GRU(H, return_sequences=True), merge_mode="sum")(m)
    product = keras.layers.Bidirectional(keras.layers.SimpleRNN(H), merge_mode="mul")(m)
    average, *states = keras.layers.Bidirectional(
        keras.layers.LSTM(H, return_sequences=True, return_state=True), merge_mode="ave"
    )(m)
    forward, backward = keras.layers.Bidirectional(keras.layers.GRU(H, go_backwards=False), merge_mode=None)(
        m
    )
    return keras.Model(x, [summed, product, average, *states, forward, backward])


# name -> (model factory, masked nodes with strategy "function": one per layer direction)
ARCHITECTURES: dict[str, tuple[Callable[[], keras.Model], int]] = {
    "imdb_bidirectional_lstm": (imdb, 4),
    "onnxruntime_12492": (onnxruntime_12492, 1),
    "masking_gru_reset_before_time_distributed": (gru_time_distributed, 1),
    "masking_simple_rnn_lstm_dense": (simple_rnn_lstm, 2),
    "go_backwards_initial_state_input": (go_backwards_initial_state, 1),
    "hard_sigmoid_relu_explicit_mask": (activations_explicit_mask, 3),
    "bidirectional_merge_modes": (bidirectional_merge_modes, 8),
}


def build(name: str, seed: int = 0) -> keras.Model:
    """The architecture with random weights (biases non-zero, so masked steps would show)."""
    model = ARCHITECTURES[name][0]()
    rng = np.random.default_rng(seed)
    model.set_weights([(rng.standard_normal(w.shape) * 0.5).astype(np.float32) for w in model.get_weights()])
    return model


def batch(model: keras.Model, n: int, t: int, kind: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for ``model``: masked steps are id 0 (Embedding), all-zero features (Masking) or
    False (explicit mask input); initial states are random."""
    mask = make_mask(kind, t, n, rng, layout=1)
    out = []
    for tensor in model.inputs:
        if tensor.name == "ids":
            out.append(np.where(mask, rng.integers(1, VOCABULARY, (n, t)), 0).astype(np.int32))
        elif tensor.name == "x":
            out.append(np.where(mask[:, :, None], rng.standard_normal((n, t, I)), 0).astype(np.float32))
        elif tensor.name == "mask":
            out.append(mask)
        else:  # an initial state
            out.append((rng.standard_normal((n, *tensor.shape[1:])) * 0.5).astype(np.float32))
    return out
