"""Keras backends other than this session's torch (each in a child process, since Keras picks its
backend once per process): the backend a fresh environment gets (no ``KERAS_BACKEND``; the
``[keras]``/``[test]`` extras have no TensorFlow), and the export of a model with custom layers from a
JAX-backend process and, where TensorFlow is installed, a TensorFlow-backend one (the export runs in
a torch-backend child process, which must find the custom classes)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from toolkit import ROOT

HAS_TENSORFLOW = importlib.util.find_spec("tensorflow") is not None
NO_TENSORFLOW = pytest.mark.skipif(not HAS_TENSORFLOW, reason="TensorFlow is not installed here")
# The backends a user exports from, other than the torch backend the export itself runs on.
OTHER_BACKENDS = ["jax", pytest.param("tensorflow", marks=NO_TENSORFLOW)]

# A module of custom layers, as a user's package would hold them: one registered with Keras, one not.
LAYERS_MODULE = '''
import keras


class Scale(keras.layers.Layer):
    """Not registered: the export's child process imports this module (recorded in the file)."""

    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor
        self.supports_masking = True

    def call(self, x):
        return x * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@keras.saving.register_keras_serializable(package="user")
class Shift(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def call(self, x):
        return x + 0.5
'''

# A model with both custom layers between Masking and an LSTM, exported from this process's backend
# and compared with this backend's own predict on a holed batch (no initial state: every backend
# agrees). Prints the summary, then "equal".
EXPORT_SCRIPT = """
import numpy as np, keras, onnxruntime as ort
from onnx_masked_rnn.keras import export
from user_layers import Scale, Shift
assert keras.backend.backend() == {backend!r}, keras.backend.backend()
x = keras.Input((None, 3), name="x")
y = Shift()(Scale(1.5)(keras.layers.Masking(0.0)(x)))
model = keras.Model(x, keras.layers.LSTM(4, return_sequences=True)(y))
rng = np.random.default_rng(0)
model.set_weights([(rng.standard_normal(w.shape) * 0.5).astype("float32") for w in model.get_weights()])
summary = export(model, "custom.onnx", strategy="scan")
print(summary)
data = rng.standard_normal((3, 6, 3)).astype("float32")
data[0, 4:] = 0; data[1, :2] = 0; data[2, 3] = 0
expected = model.predict(data, verbose=0)
session = ort.InferenceSession(summary.path, providers=["CPUExecutionProvider"])
actual, = session.run(None, {{"x": data[:, :5]}})
np.testing.assert_allclose(actual, model.predict(data[:, :5], verbose=0), rtol=1e-5, atol=1e-5)
actual, = session.run(None, {{"x": data}})
np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
print("equal")
"""


def _run(code: str, cwd: Path, unset: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    environment.update(PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


# --- item 12: the backend a fresh environment gets ---------------------------------------------


@pytest.mark.skipif(HAS_TENSORFLOW, reason="TensorFlow is installed: Keras' default backend works here")
def test_fresh_environment_import_keras_fails_without_the_package(tmp_path: Path) -> None:
    """What a user of the [keras] extra meets: no KERAS_BACKEND, Keras' default 'tensorflow'
    (fresh KERAS_HOME) and no TensorFlow, so a bare `import keras` fails."""
    done = _run("import keras", tmp_path, unset=("KERAS_BACKEND",), KERAS_HOME=str(tmp_path / "home"))
    assert done.returncode != 0 and "No module named 'tensorflow'" in done.stderr, done.stderr


@pytest.mark.skipif(HAS_TENSORFLOW, reason="TensorFlow is installed: Keras' default backend works here")
def test_importing_onnx_masked_rnn_keras_first_picks_torch(tmp_path: Path) -> None:
    """Imported before Keras, onnx_masked_rnn.keras sets KERAS_BACKEND=torch (not set, default
    backend, TensorFlow missing), and Keras then imports and exports."""
    code = """
        import os, onnx_masked_rnn.keras, keras
        print(os.environ["KERAS_BACKEND"], keras.backend.backend())
    """
    done = _run(code, tmp_path, unset=("KERAS_BACKEND",), KERAS_HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch", "torch"], done.stdout


def test_an_explicit_backend_choice_is_kept(tmp_path: Path) -> None:
    """KERAS_BACKEND=jax, or keras.json saying jax, is the user's choice: left alone."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "keras.json").write_text('{"backend": "jax"}')
    code = "import onnx_masked_rnn.keras, keras; print(keras.backend.backend())"
    by_file = _run(code, tmp_path, unset=("KERAS_BACKEND",), KERAS_HOME=str(home))
    by_variable = _run(code, tmp_path, KERAS_BACKEND="jax", KERAS_HOME=str(tmp_path / "other"))
    assert (by_file.stdout.strip(), by_variable.stdout.strip()) == ("jax", "jax"), (
        by_file.stderr + by_variable.stderr
    )


@pytest.mark.skipif(HAS_TENSORFLOW, reason="TensorFlow is installed: the 'tensorflow' backend imports")
def test_a_missing_backend_is_one_line_naming_keras_backend(tmp_path: Path) -> None:
    """KERAS_BACKEND=tensorflow set explicitly without TensorFlow: export says so in one line that
    names KERAS_BACKEND (no traceback from deep inside Keras)."""
    code = """
        import numpy as np
        from onnx_masked_rnn.keras import export
        try:
            export("model.keras", "out.onnx")
        except ImportError as exc:
            print(exc)
    """
    done = _run(code, tmp_path, KERAS_BACKEND="tensorflow", KERAS_HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert "\n" not in line and "'tensorflow'" in line and "KERAS_BACKEND=torch" in line, line


# --- item 8: custom layers from another backend ------------------------------------------------


def _user_project(tmp_path: Path) -> Path:
    (tmp_path / "user_layers.py").write_text(LAYERS_MODULE)
    return tmp_path


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_custom_layers_from_a_module_export_from_another_backend(tmp_path: Path, backend: str) -> None:
    """A registered and an unregistered custom layer from the user's module: the torch-backend child
    imports the module; the ONNX model equals this backend's predict at two lengths."""
    done = _run(EXPORT_SCRIPT.format(backend=backend), _user_project(tmp_path), KERAS_BACKEND=backend)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "(scan): " in done.stdout and done.stdout.strip().endswith("equal"), done.stdout


SCRIPT_CLASS = """
import keras
from onnx_masked_rnn.keras import export
class Local(keras.layers.Layer):
    def call(self, x):
        return x
x = keras.Input((None, 3))
model = keras.Model(x, keras.layers.LSTM(4)(Local()(x)))
try:
    export(model, "local.onnx")
except ValueError as exc:
    print(exc)
"""

BACKEND_CALL = """
import keras
from onnx_masked_rnn.keras import export, UnsupportedLayerError
import {library} as lib
class Direct(keras.layers.Layer):
    def call(self, x):
        return lib.{function}(x)
x = keras.Input((None, 3))
model = keras.Model(x, keras.layers.LSTM(4)(Direct(name="direct")(x)))
try:
    export(model, "direct.onnx")
except UnsupportedLayerError as exc:
    print(exc)
"""


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_class_defined_in_the_script_is_named(tmp_path: Path, backend: str) -> None:
    """A custom layer defined in the script (__main__): the child cannot import it; the error names
    the class and the two ways out, and no model is written."""
    done = _run(SCRIPT_CLASS, tmp_path, KERAS_BACKEND=backend)
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.strip()
    assert "'Local'" in message and "__main__" in message, message
    assert "module" in message and "KERAS_BACKEND=torch" in message, message
    assert not (tmp_path / "local.onnx").exists()


@pytest.mark.parametrize(
    "backend, library, function",
    [
        ("jax", "jax.numpy", "tanh"),
        pytest.param(
            "tensorflow",
            "tensorflow",
            "tanh",
            marks=NO_TENSORFLOW,
        ),
    ],
)
def test_layer_calling_the_backend_directly_is_named(
    tmp_path: Path, backend: str, library: str, function: str
) -> None:
    """A custom layer whose call() uses TensorFlow/JAX itself cannot run on the torch backend: the
    error names the layer, its class and the library, and says what to do."""
    done = _run(BACKEND_CALL.format(library=library, function=function), tmp_path, KERAS_BACKEND=backend)
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.strip()
    root = library.split(".")[0]
    assert "'direct'" in message and "Direct.call()" in message and f"calls {root}" in message, message
    assert "keras.ops" in message, message


# --- item 10: a tf_keras (Keras 2) model ---------------------------------------------------------

KERAS2_SCRIPT = """
import tf_keras
from onnx_masked_rnn.keras import export
model = tf_keras.Sequential([tf_keras.layers.Embedding(20, 4, mask_zero=True), tf_keras.layers.LSTM(3)])
model.build((None, None))
try:
    export(model, "keras2.onnx")
except ValueError as exc:
    print(exc)
"""


@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None, reason="tf_keras is not installed here")
def test_tf_keras_model_is_named_as_keras2(tmp_path: Path) -> None:
    """A real tf_keras model (it has an LSTM): refused as a Keras 2 model, saying what is needed,
    not as a model without recurrent layers."""
    done = _run(KERAS2_SCRIPT, tmp_path, KERAS_BACKEND="torch")
    assert done.returncode == 0, done.stderr[-3000:]
    message = done.stdout.strip()
    assert "Keras 2 model" in message and "tf2onnx" in message and "no LSTM" not in message, message
