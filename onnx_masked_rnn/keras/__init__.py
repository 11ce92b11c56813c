"""Keras 3 models with masked recurrent layers as ONNX models.

- :func:`export` turns a Keras model (or a ``.keras`` file) into an ONNX model with one masked node
  per recurrent layer direction, dynamic batch and time (``docs/keras.md``).
- :func:`convert_layer` and friends give one layer's weights and attributes in ONNX form, for
  those who build graphs by hand.

Importing this package does not import Keras; the functions do when called. It does pick Keras'
backend when nothing else would work: with ``KERAS_BACKEND`` unset, Keras not imported yet, Keras'
default ``"tensorflow"`` configured and TensorFlow not installed (the ``[keras]`` extra installs
torch), it sets ``KERAS_BACKEND=torch`` so that a later ``import keras`` works (docs/keras.md,
"Backends").
"""

from onnx_masked_rnn.keras._backend import default_backend
from onnx_masked_rnn.keras.export import STRATEGIES, SUPPORTED_KERAS, ExportSummary, export
from onnx_masked_rnn.keras.layers import (
    KERAS_ACTIVATIONS,
    OP_TYPES,
    ConvertedLayer,
    ExportWarning,
    UnsupportedLayerError,
    activation_names,
    convert_layer,
    convert_weights,
    initial_state_to_onnx,
    masked_output_of,
    onnx_activations,
    outputs_to_keras,
)

default_backend()

__all__ = [
    "KERAS_ACTIVATIONS",
    "OP_TYPES",
    "STRATEGIES",
    "SUPPORTED_KERAS",
    "ConvertedLayer",
    "ExportSummary",
    "ExportWarning",
    "UnsupportedLayerError",
    "activation_names",
    "convert_layer",
    "convert_weights",
    "export",
    "initial_state_to_onnx",
    "masked_output_of",
    "onnx_activations",
    "outputs_to_keras",
]
