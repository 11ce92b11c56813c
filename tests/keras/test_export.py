"""``onnx_masked_rnn.keras.export`` on real architectures: each model is exported once (strategy
"function", one trace), its "scan" and "native" forms are what ``export`` makes of the same trace
(``inline``), and all three run in onnxruntime at two batch sizes and two lengths on right-padded,
left-padded, holed and one-row-fully-masked batches, equal to Keras' own ``predict`` (torch backend,
float32, atol = rtol = 1e-5). ``export(strategy=...)`` end to end, from a ``.keras`` file through the
CLI and from another Keras backend, is in ``test_keras_export_cli.py``.

Bidirectional: one masked node per direction (each direction is its own Keras layer), so strategy
"function" has exactly one masked node per recurrent layer direction.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from oracles import assert_close

from onnx_masked_rnn import DOMAIN, inline
from onnx_masked_rnn.keras import export
from onnx_masked_rnn.testing import make_mask

if keras.backend.backend() != "torch":
    pytest.skip("export runs on Keras' torch backend (tests/conftest.py sets it)", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)

ORACLE = "Keras predict vs onnxruntime, export"
VOCABULARY, I, H = 20, 4, 5
SHAPES = ((2, 4), (5, 9))  # (batch, time): two batch sizes, two lengths
MASK_KINDS = ("right_padded", "left_padded", "holes", "one_row_masked")
STRATEGIES = ("function", "scan", "native")


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


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def exported(request, tmp_path_factory) -> tuple[str, keras.Model, dict[str, onnx.ModelProto]]:
    """One architecture exported once, in each strategy's form."""
    name = request.param
    model = build(name)
    path = Path(tmp_path_factory.mktemp(name)) / "model.onnx"
    export(model, path)
    function = onnx.load(path)
    forms = {"function": function, **{s: inline(function, strategy=s) for s in ("scan", "native")}}
    return name, model, forms


def test_one_masked_node_per_layer_direction(exported) -> None:
    name, _, forms = exported
    masked = [n.op_type for n in forms["function"].graph.node if n.domain == DOMAIN]
    assert len(masked) == ARCHITECTURES[name][1], masked
    for strategy in ("scan", "native"):
        assert not any(n.domain == DOMAIN for n in forms[strategy].graph.node)


def test_batch_and_time_are_dynamic(exported) -> None:
    """Axis 0 is one "batch" for all inputs; a time axis is "time" (or "time_<symbol>" when
    the trace does not relate two inputs' time axes, e.g. an explicit mask and the features)."""
    _, model, forms = exported
    for graph_input, keras_input in zip(forms["function"].graph.input, model.inputs):
        dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        assert dims[0] == "batch", dims
        if keras_input.name in ("ids", "mask", "x"):
            assert dims[1].startswith("time"), dims
        assert dims[2:] == list(keras_input.shape[2:]), dims


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_equals_keras_predict(exported, kind: str) -> None:
    name, model, forms = exported
    sessions = {strategy: _session(form) for strategy, form in forms.items()}
    rng = np.random.default_rng(len(name) + MASK_KINDS.index(kind))
    for n, t in SHAPES:
        inputs = batch(model, n, t, kind, rng)
        expected = model.predict(inputs if len(inputs) > 1 else inputs[0], verbose=0)
        expected = expected if isinstance(expected, list) else [expected]
        for strategy, session in sessions.items():
            feeds = {i.name: value for i, value in zip(session.get_inputs(), inputs)}
            actual = session.run(None, feeds)
            assert_close(f"{ORACLE} ({strategy})", actual, expected, rtol=1e-5, atol=1e-5)
