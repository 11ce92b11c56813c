"""A ``Sequential`` built by calling it on data, the style of Keras' masking guide
(https://keras.io/guides/understanding_masking_and_padding/): Keras fixes its input at the first
call's shape, batch and time included, although the recurrent layers need neither. The export
makes both dynamic; where a layer truly needs a size, it keeps that axis and warns, naming the
layer."""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import pytest
from oracles import assert_close
from toolkit import session

from onnx_masked_rnn.keras import ExportWarning, export

if keras.backend.backend() != "torch":
    pytest.skip("export runs on Keras' torch backend (tests/conftest.py sets it)", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)

ORACLE = "Keras predict vs onnxruntime, Sequential built on data"
# The guide's example sentences, padded at the end.
RAW_INPUTS = [[711, 632, 71], [73, 8, 3215, 55, 927], [83, 91, 1, 645, 1253, 927]]


def _padded(rng: np.random.Generator, batch: int, time: int, vocabulary: int = 5000) -> np.ndarray:
    lengths = rng.integers(1, time + 1, batch)
    ids = rng.integers(1, vocabulary, (batch, time))
    return np.where(np.arange(time) < lengths[:, None], ids, 0).astype(np.int32)


def _run(path: Path, ids: np.ndarray) -> list[np.ndarray]:
    runner = session(path)
    return runner.run(None, {runner.get_inputs()[0].name: ids})


def test_masking_guide_sequential_exports_dynamic_batch_and_time(tmp_path: Path) -> None:
    """The guide's model, called once on its padded sentences (batch 3, time 6): the ONNX model
    takes any batch and length, int32 token ids, and equals Keras' predict."""
    model = keras.Sequential(
        [keras.layers.Embedding(input_dim=5000, output_dim=16, mask_zero=True), keras.layers.LSTM(32)]
    )
    model(keras.utils.pad_sequences(RAW_INPUTS, padding="post"))
    assert tuple(model.inputs[0].shape) == (3, 6)  # what Keras fixed
    summary = export(model, tmp_path / "guide.onnx")
    assert list(summary.inputs.values()) == [["batch", "time"]], summary
    rng = np.random.default_rng(0)
    for batch, time in ((3, 6), (2, 4), (5, 9)):
        ids = _padded(rng, batch, time)
        expected = model.predict(ids, verbose=0)
        assert_close(ORACLE, _run(tmp_path / "guide.onnx", ids), [expected], rtol=1e-5, atol=1e-5)


def test_layer_that_fixes_the_time_is_named(tmp_path: Path) -> None:
    """Flatten -> Dense after the LSTM needs the length of the first call (Dense's kernel has
    time * units rows): the export keeps time fixed, warns naming the layer that fails at another
    length and how to get dynamic axes, and still makes the batch dynamic."""
    model = keras.Sequential(
        [
            keras.layers.Embedding(50, 4, mask_zero=True),
            keras.layers.LSTM(3, return_sequences=True),
            keras.layers.Flatten(),
            keras.layers.Dense(2, name="head"),
        ]
    )
    rng = np.random.default_rng(1)
    model(_padded(rng, 2, 5, 50))
    with pytest.warns(ExportWarning) as caught:
        summary = export(model, tmp_path / "flat.onnx")
    (message,) = [str(w.message) for w in caught if issubclass(w.category, ExportWarning)]
    assert "'head' (Dense)" in message and "time" in message and "keras.Input" in message, message
    assert list(summary.inputs.values()) == [["batch", 5]], summary
    ids = _padded(rng, 4, 5, 50)
    expected = model.predict(ids, verbose=0)
    assert_close(ORACLE, _run(tmp_path / "flat.onnx", ids), [expected], rtol=1e-5, atol=1e-5)
