"""Keras 3 models with masked recurrent layers as ONNX models.

- :func:`export` turns a Keras model (or a ``.keras`` file) into an ONNX model with one masked node
  per recurrent layer direction, dynamic batch and time (``docs/keras.md``).
- :func:`convert_layer` and friends give one layer's weights and attributes in ONNX form, for
  those who build graphs by hand.

Importing this package does not import Keras; the functions do when called.
"""

from onnx_masked_rnn.keras.export import STRATEGIES, SUPPORTED_KERAS, ExportSummary, export
from onnx_masked_rnn.keras.layers import (
    KERAS_ACTIVATIONS,
    OP_TYPES,
    ConvertedLayer,
    UnsupportedLayerError,
    activation_names,
    convert_layer,
    convert_weights,
    initial_state_to_onnx,
    masked_output_of,
    onnx_activations,
    outputs_to_keras,
)

__all__ = [
    "KERAS_ACTIVATIONS",
    "OP_TYPES",
    "STRATEGIES",
    "SUPPORTED_KERAS",
    "ConvertedLayer",
    "ExportSummary",
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
