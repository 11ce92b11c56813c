"""``onnx_masked_rnn.keras`` end to end and at its edges: ``onnx-masked-rnn convert`` on a ``.keras``
file, ``export`` from a process whose Keras runs another backend (a child process does the work),
and the refusals, each naming the layer and the reason."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest
from keras_architectures import batch, build
from oracles import assert_close
from toolkit import ROOT, session

from onnx_masked_rnn.keras import UnsupportedLayerError, convert_layer, export

if keras.backend.backend() != "torch":
    pytest.skip("export runs on Keras' torch backend (tests/conftest.py sets it)", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **extra}


def _run_onnx(path: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    runner = session(path)
    return runner.run(None, {i.name: v for i, v in zip(runner.get_inputs(), inputs)})


def test_cli_convert_keras_file(tmp_path: Path) -> None:
    """The IMDB architecture saved as .keras, converted by the CLI with strategy native: a progress
    line, a summary naming the dynamic axes, and Keras' outputs on a holed batch."""
    model = build("imdb_bidirectional_lstm")
    model.save(tmp_path / "imdb.keras")
    out = tmp_path / "imdb.onnx"
    command = [sys.executable, "-m", "onnx_masked_rnn", "convert", str(tmp_path / "imdb.keras"), str(out)]
    done = subprocess.run(
        [*command, "--strategy", "native"], env=_env(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "tracing 4 recurrent layer directions" in done.stderr
    assert "(native)" in done.stdout and "0 masked" in done.stdout
    assert "ids[batch, time]" in done.stdout, done.stdout
    inputs = batch(model, 3, 7, "holes", np.random.default_rng(0))
    expected = model.predict(inputs[0], verbose=0)
    assert_close(
        "Keras predict vs onnxruntime, convert CLI", _run_onnx(out, inputs), [expected], rtol=1e-5, atol=1e-5
    )


def test_cli_convert_errors(tmp_path: Path) -> None:
    """A missing file, a file that is not a Keras model and a model the ops cannot express: exit
    status 1 and one error line each, no traceback."""
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnx_masked_rnn",
            "convert",
            str(tmp_path / "none.keras"),
            str(tmp_path / "o.onnx"),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode == 1
    assert "none.keras" in missing.stderr and "Traceback" not in missing.stderr
    (tmp_path / "junk.keras").write_text("not a zip")
    junk = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnx_masked_rnn",
            "convert",
            str(tmp_path / "junk.keras"),
            str(tmp_path / "o.onnx"),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert junk.returncode == 1
    assert "junk.keras' is not a readable Keras model" in junk.stderr and "Traceback" not in junk.stderr
    inputs = keras.Input((None, 3))
    model = keras.Model(inputs, keras.layers.LSTM(4, activation="gelu", name="gelu_lstm")(inputs))
    model.save(tmp_path / "gelu.keras")
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "onnx_masked_rnn",
            "convert",
            str(tmp_path / "gelu.keras"),
            str(tmp_path / "o.onnx"),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 1
    assert "'gelu_lstm'" in refused.stderr and "gelu" in refused.stderr and "Traceback" not in refused.stderr


def test_export_from_another_backend(tmp_path: Path) -> None:
    """Keras on the JAX backend: export saves the model and runs the work in a child process on
    the torch backend (strategy scan); the result equals the JAX backend's own predict (no
    initial state, where the backends agree)."""
    script = textwrap.dedent(
        f"""
        import numpy as np, keras, onnxruntime as ort
        from onnx_masked_rnn.keras import export
        assert keras.backend.backend() == "jax"
        x = keras.Input((None, 3), name="x")
        y = keras.layers.Masking(0.0)(x)
        y = keras.layers.SimpleRNN(4, return_sequences=True)(y)
        model = keras.Model(x, keras.layers.LSTM(4)(y))
        rng = np.random.default_rng(0)
        weights = model.get_weights()
        model.set_weights([(rng.standard_normal(w.shape) * 0.5).astype("float32") for w in weights])
        summary = export(model, r"{tmp_path / "jax.onnx"}", strategy="scan")
        print(summary)
        data = rng.standard_normal((3, 6, 3)).astype("float32")
        data[0, 4:] = 0; data[1, :2] = 0; data[2, 3] = 0
        expected = model.predict(data, verbose=0)
        session = ort.InferenceSession(summary.path, providers=["CPUExecutionProvider"])
        actual, = session.run(None, {{"x": data}})
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
        print("equal")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_env(KERAS_BACKEND="jax"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "(scan): " in done.stdout and done.stdout.strip().endswith("equal"), done.stdout


class _CustomCell(keras.layers.Layer):
    def __init__(self, units: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.state_size = units

    def build(self, input_shape) -> None:
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units))

    def call(self, inputs, states):
        output = keras.ops.matmul(inputs, self.kernel) + states[0]
        return output, [output]


def _model(layer: keras.layers.Layer) -> keras.Model:
    inputs = keras.Input((None, 3))
    return keras.Model(inputs, layer(keras.layers.Masking(0.0)(inputs)))


@pytest.mark.parametrize(
    "layer, words",
    [
        (
            keras.layers.RNN(_CustomCell(4), name="custom"),
            ["'custom'", "custom cell '_CustomCell'", "not supported"],
        ),
        (keras.layers.LSTM(4, activation="gelu", name="gelu_lstm"), ["'gelu_lstm'", "activation", "gelu"]),
        (
            keras.layers.GRU(4, recurrent_activation=lambda x: x, name="lambda_gru"),
            ["'lambda_gru'", "recurrent_activation", "<lambda>"],
        ),
        (keras.layers.SimpleRNN(4, activation="selu", name="selu_rnn"), ["'selu_rnn'", "selu"]),
        (
            keras.layers.Bidirectional(
                keras.layers.LSTM(4, activation="swish", name="forward_swish"), name="bi"
            ),
            ["forward_swish", "silu"],
        ),
    ],
    ids=["custom_cell", "gelu", "lambda", "selu", "bidirectional_swish"],
)
def test_refusals_name_the_layer(layer, words, tmp_path: Path) -> None:
    model = _model(layer)
    with pytest.raises(UnsupportedLayerError) as error:
        export(model, tmp_path / "refused.onnx")
    for word in words:
        assert word in str(error.value), str(error.value)
    assert not (tmp_path / "refused.onnx").exists()


def test_refuses_convolutional_and_stacked_recurrent_layers(tmp_path: Path) -> None:
    """ConvLSTM2D is a Keras recurrent layer with Keras' own (convolutional) cell, not a custom
    cell: the refusal names the layer as the unsupported layer it is; so for stacked cells."""
    frames = keras.Input((None, 6, 6, 1))
    conv = keras.Model(frames, keras.layers.ConvLSTM2D(2, 3, name="conv")(keras.layers.Masking()(frames)))
    with pytest.raises(UnsupportedLayerError) as error:
        export(conv, tmp_path / "refused.onnx")
    message = str(error.value)
    assert "'conv' (ConvLSTM2D)" in message and "convolutional recurrent layers" in message, message
    assert "custom" not in message, message
    stacked = _model(keras.layers.RNN([keras.layers.LSTMCell(4), keras.layers.LSTMCell(4)], name="stack"))
    with pytest.raises(UnsupportedLayerError) as error:
        export(stacked, tmp_path / "refused.onnx")
    message = str(error.value)
    assert "'stack'" in message and "Keras' own cell 'StackedRNNCells'" in message, message
    assert not (tmp_path / "refused.onnx").exists()


class _Keras2Model:
    """Stands in for a tf_keras (Keras 2) model where tf_keras is not installed: the class of
    ``tf_keras.Sequential`` lives in this module (``tests/keras/test_backends.py`` uses the real
    one where TensorFlow is installed)."""

    __module__ = "tf_keras.src.engine.sequential"


def test_refuses_a_keras2_model_saying_what_is_needed(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as error:
        export(_Keras2Model(), tmp_path / "refused.onnx")
    message = str(error.value)
    assert "Keras 2 model" in message and "Keras 3" in message and "tf2onnx" in message, message
    assert "no LSTM" not in message, message
    with pytest.raises(ValueError, match="expected a Keras 3 model or the path of a .keras file; got int"):
        export(3, tmp_path / "refused.onnx")


def test_refuses_stateful(tmp_path: Path) -> None:
    inputs = keras.Input((None, 3), batch_size=2)
    model = keras.Model(inputs, keras.layers.GRU(4, stateful=True, name="kept")(inputs))
    with pytest.raises(UnsupportedLayerError, match=r"'kept'.*stateful=True"):
        export(model, tmp_path / "refused.onnx")


def test_bidirectional_as_one_node_refuses_what_differs() -> None:
    """``convert_layer`` makes a Bidirectional one bidirectional node; a backward layer of another
    kind or size cannot share it (export itself emits one node per direction and takes both)."""
    bidirectional = keras.layers.Bidirectional(
        keras.layers.LSTM(4, return_sequences=True),
        backward_layer=keras.layers.GRU(4, return_sequences=True, go_backwards=True),
        name="mixed",
    )
    bidirectional.build((None, None, 3))
    with pytest.raises(UnsupportedLayerError, match=r"'mixed'.*MaskedGRU.*MaskedLSTM"):
        convert_layer(bidirectional)
    sizes = keras.layers.Bidirectional(
        keras.layers.GRU(4, return_sequences=True),
        backward_layer=keras.layers.GRU(5, return_sequences=True, go_backwards=True),
        name="sizes",
    )
    sizes.build((None, None, 3))
    with pytest.raises(UnsupportedLayerError, match=r"'sizes'.*hidden_size differs"):
        convert_layer(sizes)


def test_mixed_bidirectional_exports_per_direction(tmp_path: Path) -> None:
    """A Bidirectional whose backward layer is a GRU of another size under an LSTM: two masked nodes,
    equal to Keras."""
    inputs = keras.Input((None, 3), name="x")
    bidirectional = keras.layers.Bidirectional(
        keras.layers.LSTM(4, return_sequences=True),
        backward_layer=keras.layers.GRU(5, return_sequences=True, go_backwards=True),
    )
    model = keras.Model(inputs, bidirectional(keras.layers.Masking(0.0)(inputs)))
    rng = np.random.default_rng(1)
    model.set_weights([(rng.standard_normal(w.shape) * 0.5).astype(np.float32) for w in model.get_weights()])
    summary = export(model, tmp_path / "mixed.onnx")
    assert summary.masked_nodes == 2
    data = rng.standard_normal((3, 6, 3)).astype(np.float32)
    data[0, 4:] = 0
    data[1, :2] = 0
    data[2, 3] = 0
    expected = model.predict(data, verbose=0)
    assert_close(
        "Keras predict vs onnxruntime, export",
        _run_onnx(tmp_path / "mixed.onnx", [data]),
        [expected],
        rtol=1e-5,
        atol=1e-5,
    )


def test_bad_arguments(tmp_path: Path) -> None:
    model = _model(keras.layers.LSTM(4))
    with pytest.raises(ValueError, match="strategy must be one of function, scan, native"):
        export(model, tmp_path / "x.onnx", strategy="loop")
    with pytest.raises(FileNotFoundError, match="no such file"):
        export(tmp_path / "missing.keras", tmp_path / "x.onnx")
    dense = keras.Model(inputs := keras.Input((3,)), keras.layers.Dense(2)(inputs))
    with pytest.raises(UnsupportedLayerError, match="no LSTM, GRU or SimpleRNN"):
        export(dense, tmp_path / "x.onnx")


class _Tagger(keras.Model):
    """A subclassed model: Keras does not know its inputs, ``input_signature`` gives them."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = keras.layers.Embedding(20, 4, mask_zero=True)
        self.lstm = keras.layers.LSTM(5, return_sequences=True)
        self.dense = keras.layers.Dense(3)

    def call(self, ids):
        return self.dense(self.lstm(self.embedding(ids)))


def test_subclassed_model_with_input_signature(tmp_path: Path) -> None:
    model = _Tagger()
    ids = np.array([[1, 2, 0, 0], [0, 3, 4, 5], [6, 0, 7, 0]], dtype=np.int32)
    expected = model.predict(ids, verbose=0)
    with pytest.raises(ValueError, match="input_signature"):
        export(model, tmp_path / "x.onnx")
    summary = export(model, tmp_path / "tagger.onnx", input_signature=[((None, None), "int32")])
    assert (summary.masked_nodes, summary.inputs) == (1, {"input_0": ["batch", "time"]})
    actual = _run_onnx(tmp_path / "tagger.onnx", [ids])
    assert_close("Keras predict vs onnxruntime, export", actual, [expected], rtol=1e-5, atol=1e-5)


def test_importing_the_package_and_the_cli_does_not_import_keras() -> None:
    code = (
        "import sys, onnx_masked_rnn, onnx_masked_rnn.keras, onnx_masked_rnn.cli as cli; "
        "cli.build_parser(); print(sorted({'keras', 'torch'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_cli_custom_object_errors(tmp_path: Path) -> None:
    """--custom-object that is not NAME=MODULE:QUALNAME, or names a module that does not exist:
    exit status 1, one line naming the option's value, no traceback."""
    (tmp_path / "m.keras").write_text("not read")
    for spec, words in (("Scale", "expected NAME=MODULE:QUALNAME"), ("S=no_such_module:S", "no_such_module")):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "onnx_masked_rnn",
                "convert",
                str(tmp_path / "m.keras"),
                str(tmp_path / "o.onnx"),
                "--custom-object",
                spec,
            ],
            env=_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        assert words in done.stderr and spec in done.stderr and "Traceback" not in done.stderr, done.stderr
