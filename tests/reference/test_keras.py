"""The numpy reference against Keras 3 live on the torch backend ("carry" mode; "zero" for
``Bidirectional`` with ``return_sequences``).

Every layer runs with ``return_sequences=True, return_state=True``; its weights are converted by
``onnx_masked_rnn.keras`` and the reference runs in ``layout=1`` (Keras is batch-major). The
outputs and the final states must agree.
"""

from __future__ import annotations

from typing import Any

import keras
import numpy as np
import pytest
from oracles import REFERENCE, assert_close

from onnx_masked_rnn.keras import convert_layer, initial_state_to_onnx, outputs_to_keras
from onnx_masked_rnn.testing import make_mask

# conftest.py sets KERAS_BACKEND=torch before any import of keras: these cases assert that backend.
assert keras.backend.backend() == "torch", keras.backend.backend()

# Keras's own numpy conversion of torch tensors warns on every call (not ours to fix).
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)

T, N, I, H = 7, 4, 3, 5
ORACLE = "Keras torch float32"
MASK_KINDS = ("right_padded", "left_padded", "holes", "all_true", "one_row_masked")
# name -> (Keras class, extra layer arguments)
LAYERS: dict[str, tuple[str, dict[str, Any]]] = {
    "LSTM": ("LSTM", {}),
    "GRU-reset_after": ("GRU", {"reset_after": True}),
    "GRU-reset_before": ("GRU", {"reset_after": False}),
    "SimpleRNN": ("SimpleRNN", {}),
}


def make_layer(name: str, rng: np.random.Generator, **kwargs: Any) -> Any:
    """A built layer with random weights (biases non-zero), returning sequences and states."""
    cls, extra = LAYERS[name]
    layer = getattr(keras.layers, cls)(H, return_sequences=True, return_state=True, **extra, **kwargs)
    return randomize(layer, rng)


def randomize(layer: Any, rng: np.random.Generator, input_dim: int = I) -> Any:
    if not layer.built:
        layer.build((None, None, input_dim))
    layer.set_weights([(rng.standard_normal(w.shape) * 0.6).astype(np.float32) for w in layer.get_weights()])
    return layer


def initial_states(name: str, rng: np.random.Generator, num_directions: int = 1) -> list[np.ndarray]:
    per_direction = 2 if name == "LSTM" else 1
    return [
        (rng.standard_normal((N, H)) * 0.5).astype(np.float32) for _ in range(per_direction * num_directions)
    ]


def run_keras(layer: Any, x: np.ndarray, mask: np.ndarray | None, states: list[np.ndarray] | None) -> list:
    outputs = layer(x, mask=mask, initial_state=states)
    return [keras.ops.convert_to_numpy(o) for o in outputs]


def run_reference(
    layer: Any, x: np.ndarray, mask: np.ndarray | None, states: list[np.ndarray] | None
) -> list:
    """What the layer computes, by the reference: the converted weights, ``layout=1``."""
    op_type, attributes, weights = convert_layer(layer)
    inputs = {"X": x, **weights, **(initial_state_to_onnx(op_type, states) if states else {})}
    if mask is not None:
        inputs["mask"] = mask
    outputs = REFERENCE[op_type](**inputs, **attributes, layout=1)
    return outputs_to_keras(outputs, attributes["direction"])


def check(layer: Any, x: np.ndarray, mask: np.ndarray | None, states: list[np.ndarray] | None = None) -> None:
    assert_close(
        ORACLE, run_reference(layer, x, mask, states), run_keras(layer, x, mask, states), rtol=1e-5, atol=1e-5
    )


def inputs(seed: int, kind: str) -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng, rng.standard_normal((N, T, I)).astype(np.float32), make_mask(kind, T, N, rng, layout=1)


@pytest.mark.parametrize("with_initial_state", [False, True], ids=["zeros", "initial_state"])
@pytest.mark.parametrize("mask_kind", MASK_KINDS)
@pytest.mark.parametrize("name", LAYERS)
def test_masked_layer(name: str, mask_kind: str, with_initial_state: bool) -> None:
    rng, x, mask = inputs(10 * list(LAYERS).index(name) + MASK_KINDS.index(mask_kind), mask_kind)
    layer = make_layer(name, rng)
    assert convert_layer(layer)[1]["masked_output"] == "carry"
    check(layer, x, mask, initial_states(name, rng) if with_initial_state else None)


@pytest.mark.parametrize("name", LAYERS)
def test_no_mask(name: str) -> None:
    rng, x, _ = inputs(1, "all_true")
    check(make_layer(name, rng), x, None, initial_states(name, rng))


@pytest.mark.parametrize("mask_kind", ["holes", "one_row_masked", "left_padded"])
@pytest.mark.parametrize("name", LAYERS)
def test_go_backwards(name: str, mask_kind: str) -> None:
    rng, x, mask = inputs(2, mask_kind)
    layer = make_layer(name, rng, go_backwards=True)
    assert convert_layer(layer)[1]["direction"] == "reverse"
    check(layer, x, mask, initial_states(name, rng))


@pytest.mark.parametrize("with_initial_state", [False, True], ids=["zeros", "initial_state"])
@pytest.mark.parametrize("mask_kind", ["holes", "one_row_masked", "right_padded"])
@pytest.mark.parametrize("name", LAYERS)
def test_bidirectional(name: str, mask_kind: str, with_initial_state: bool) -> None:
    rng, x, mask = inputs(3, mask_kind)
    cls, extra = LAYERS[name]
    inner = getattr(keras.layers, cls)(H, return_sequences=True, return_state=True, **extra)
    layer = randomize(keras.layers.Bidirectional(inner, merge_mode=None), rng)
    op_type, attributes, _ = convert_layer(layer)
    assert (attributes["direction"], attributes["masked_output"]) == ("bidirectional", "zero")
    check(layer, x, mask, initial_states(name, rng, 2) if with_initial_state else None)


@pytest.mark.parametrize(
    "name, activation, recurrent_activation",
    [
        ("LSTM", "relu", "hard_sigmoid"),
        ("LSTM", "softsign", "sigmoid"),
        ("LSTM", "elu", "hard_sigmoid"),
        ("GRU-reset_after", "softplus", "hard_sigmoid"),
        ("GRU-reset_before", "leaky_relu", "sigmoid"),
        ("GRU-reset_after", "linear", "sigmoid"),
        ("SimpleRNN", "relu", None),
        ("SimpleRNN", "elu", None),
        ("SimpleRNN", "leaky_relu", None),
    ],
)
def test_activations(name: str, activation: str, recurrent_activation: str | None) -> None:
    rng, x, mask = inputs(4, "holes")
    kwargs = {"activation": activation}
    if recurrent_activation:
        kwargs["recurrent_activation"] = recurrent_activation
    check(make_layer(name, rng, **kwargs), x, mask, initial_states(name, rng))


def _functional(first: Any, layer: Any, input_spec: dict[str, Any]) -> Any:
    inp = keras.Input(**input_spec)
    return keras.Model(inp, layer(first(inp)))


@pytest.mark.parametrize("name", LAYERS)
def test_masking_layer(name: str) -> None:
    """The mask comes from ``Masking(mask_value)``: steps whose features all equal the value."""
    rng, x, mask = inputs(5, "one_row_masked")
    mask_value = 0.25
    x[~mask] = mask_value
    layer = make_layer(name, rng)
    model = _functional(keras.layers.Masking(mask_value=mask_value), layer, {"shape": (T, I)})
    outputs = [keras.ops.convert_to_numpy(o) for o in model(x)]
    assert_close(ORACLE, run_reference(layer, x, mask, None), outputs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", LAYERS)
def test_embedding_mask_zero(name: str) -> None:
    """The mask comes from ``Embedding(mask_zero=True)``: steps whose token id is 0."""
    rng, _, mask = inputs(6, "holes")
    vocabulary = 10
    ids = np.where(mask, rng.integers(1, vocabulary, (N, T)), 0).astype(np.int32)
    embedding = keras.layers.Embedding(vocabulary, I, mask_zero=True)
    embedding.build((None, T))
    table = (rng.standard_normal((vocabulary, I))).astype(np.float32)
    embedding.set_weights([table])
    layer = make_layer(name, rng)
    model = _functional(embedding, layer, {"shape": (T,), "dtype": "int32"})
    outputs = [keras.ops.convert_to_numpy(o) for o in model(ids)]
    assert_close(ORACLE, run_reference(layer, table[ids], mask, None), outputs, rtol=1e-5, atol=1e-5)


def test_fully_masked_row_keeps_initial_state() -> None:
    """Keras and the contract agree where onnxruntime does not: a row with no unmasked step ends
    in its initial state."""
    rng, x, mask = inputs(7, "one_row_masked")
    layer = make_layer("LSTM", rng)
    states = initial_states("LSTM", rng)
    _, h, c = run_keras(layer, x, mask, states)
    np.testing.assert_array_equal(h[0], states[0][0])
    np.testing.assert_array_equal(c[0], states[1][0])
    check(layer, x, mask, states)
