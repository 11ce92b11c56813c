"""The TensorFlow side of ``scripts/bench_tf2onnx_models.py``: builds its named models (tf_keras,
random seeded weights, no downloads), records Keras ``predict`` on right-padded inputs and converts
each with the tf2onnx this interpreter imports (``tf2onnx.convert.from_keras``, opset 18).

Run by the benchmark with the python of a TensorFlow venv (upstream/tf2onnx/check.sh's), once per
tf2onnx (unpatched and patched)::

    TF_USE_LEGACY_KERAS=1 python scripts/tf2onnx_models_convert.py DIR

Writes ``DIR/NAME/model.onnx`` and ``DIR/NAME/ref.npz`` (``x``, then Keras' outputs ``arr_0``...)
per model, and ``DIR/versions.json`` (the converting packages' versions).
"""

from __future__ import annotations

import argparse
import json
from importlib import metadata
from pathlib import Path

import numpy as np
import onnx.defs  # noqa: F401  # before TensorFlow, or the locally built onnx wheel crashes on protobuf
import tensorflow as tf
import tf2onnx
import tf_keras as keras

# name -> (batch, length, vocabulary)
MODELS = {"imdb": (32, 100, 20000), "ort12492": (3, 4, 5), "gru_tagger": (32, 50, 5000)}


def inputs(name: str) -> np.ndarray:
    """Token ids, right-padded with zeros to rows of seeded lengths (the first row full)."""
    batch, length, vocabulary = MODELS[name]
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, vocabulary, size=(batch, length)).astype(np.float32)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length
    tokens[np.arange(length)[None, :] >= lengths[:, None]] = 0.0
    return tokens


def build(name: str) -> keras.Model:
    """``imdb``: keras-io "Bidirectional LSTM on IMDB"; ``ort12492``: onnxruntime issue 12492's
    model; ``gru_tagger``: a Bidirectional GRU tagger."""
    keras.utils.set_random_seed(0)
    layers = keras.layers
    _, length, vocabulary = MODELS[name]
    x = keras.Input(shape=(length,), dtype="float32")
    if name == "imdb":
        h = layers.Embedding(vocabulary, 128, mask_zero=True)(x)
        h = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(h)
        h = layers.Bidirectional(layers.LSTM(64))(h)
        y = layers.Dense(1, activation="sigmoid")(h)
    elif name == "ort12492":
        init = keras.initializers.RandomNormal(mean=0.0, stddev=1.0, seed=0)
        h = layers.Embedding(vocabulary, 5, mask_zero=True, embeddings_initializer=init)(x)
        y = layers.LSTM(
            3, kernel_initializer=init, recurrent_initializer=init, return_sequences=True, return_state=True
        )(h)
    else:
        h = layers.Embedding(vocabulary, 64, mask_zero=True)(x)
        h = layers.Bidirectional(layers.GRU(64, return_sequences=True))(h)
        y = layers.TimeDistributed(layers.Dense(10, activation="softmax"))(h)
    return keras.Model(x, y)


def convert(directory: Path) -> None:
    for name in MODELS:
        model = build(name)
        x = inputs(name)
        ref = model.predict(x, verbose=0)
        ref = ref if isinstance(ref, list) else [ref]
        spec = (tf.TensorSpec((None, MODELS[name][1]), tf.float32, name="x"),)
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=18)
        (directory / name).mkdir(parents=True, exist_ok=True)
        (directory / name / "model.onnx").write_bytes(proto.SerializeToString())
        np.savez(directory / name / "ref.npz", x=x, **{f"arr_{i}": r for i, r in enumerate(ref)})
    versions = {p: metadata.version(p) for p in ("tf2onnx", "tensorflow-cpu", "tf_keras", "onnx")}
    (directory / "versions.json").write_text(json.dumps(versions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    convert(parser.parse_args().directory)


if __name__ == "__main__":
    main()
