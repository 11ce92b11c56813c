"""Keras 3 recurrent layers as the equivalent masked ONNX node: op type, attributes and weights.

The mapping (see UPSTREAM-NOTES): ONNX weights are ``W = kernel.T``, ``R = recurrent_kernel.T``
with one leading direction axis; Keras LSTM gates i, f, c, o become ONNX i, o, f, c; GRU gates
z, r, h are ONNX's order; ``GRU(reset_after=True)`` is ``linear_before_reset=1`` with
``B = [input_bias, recurrent_bias]``, otherwise ``B = [bias, zeros]``. ONNX LSTM activations are
``[recurrent_activation, activation, activation]``, GRU ``[recurrent_activation, activation]``,
RNN ``[activation]``.

:func:`convert_weights` and :func:`onnx_activations` work on plain arrays and names, so a test can
rebuild a layer recorded elsewhere (``tests/fixtures/keras_jax_state.npz``) without Keras;
:func:`convert_layer` reads a live layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from onnx_masked_rnn.attributes import ACTIVATIONS

__all__ = [
    "KERAS_ACTIVATIONS",
    "OP_TYPES",
    "activation_names",
    "convert_layer",
    "convert_weights",
    "initial_state_to_onnx",
    "masked_output_of",
    "onnx_activations",
    "outputs_to_keras",
]

# Keras class name -> masked ONNX op.
OP_TYPES = {"LSTM": "MaskedLSTM", "GRU": "MaskedGRU", "SimpleRNN": "MaskedRNN"}

# Keras 3 activation name -> (ONNX activation, alpha, beta). Keras 3's hard_sigmoid is
# relu6(x + 3) / 6 = HardSigmoid(1/6, 0.5) (tf.keras used 0.2).
KERAS_ACTIVATIONS: dict[str, tuple[str, float, float]] = {
    "tanh": ("Tanh", 0.0, 0.0),
    "sigmoid": ("Sigmoid", 0.0, 0.0),
    "relu": ("Relu", 0.0, 0.0),
    "hard_sigmoid": ("HardSigmoid", 1 / 6, 0.5),
    "softsign": ("Softsign", 0.0, 0.0),
    "softplus": ("Softplus", 0.0, 0.0),
    "elu": ("Elu", 1.0, 0.0),
    "linear": ("Affine", 1.0, 0.0),
    "leaky_relu": ("LeakyRelu", 0.2, 0.0),
}

# Keras LSTM gate blocks i, f, c, o taken in ONNX order i, o, f, c.
_LSTM_GATES = (0, 3, 1, 2)


def _reorder(kind: str, matrix: np.ndarray) -> np.ndarray:
    """Reorder the gate blocks of the last axis from Keras to ONNX order."""
    if kind != "LSTM":
        return matrix
    blocks = np.split(matrix, 4, axis=-1)
    return np.concatenate([blocks[g] for g in _LSTM_GATES], axis=-1)


def convert_weights(
    kind: str, kernel: np.ndarray, recurrent_kernel: np.ndarray, bias: np.ndarray | None
) -> dict[str, np.ndarray]:
    """One direction's ONNX ``W``, ``R`` and (when ``bias`` is given) ``B``, each with a leading
    direction axis of 1. ``kind`` is the Keras class name (LSTM, GRU, SimpleRNN)."""
    if kind not in OP_TYPES:
        raise ValueError(f"unsupported Keras layer {kind!r}; expected one of {sorted(OP_TYPES)}")
    out = {"W": _reorder(kind, kernel).T[None], "R": _reorder(kind, recurrent_kernel).T[None]}
    if bias is not None:
        bias = _reorder(kind, bias)
        if bias.ndim == 1:  # one bias: all of it on the input side
            bias = np.stack([bias, np.zeros_like(bias)])
        out["B"] = bias.reshape(1, -1)  # [input_bias, recurrent_bias] of GRU(reset_after=True)
    return out


def onnx_activations(names: Sequence[str]) -> dict[str, Any]:
    """ONNX ``activations``/``activation_alpha``/``activation_beta`` for Keras activation names,
    the parameters listed in the order ONNX consumes them."""
    out: dict[str, Any] = {"activations": [], "activation_alpha": [], "activation_beta": []}
    for name in names:
        if name not in KERAS_ACTIVATIONS:
            raise ValueError(f"Keras activation {name!r} has no ONNX equivalent here")
        onnx_name, alpha, beta = KERAS_ACTIVATIONS[name]
        takes_alpha, takes_beta, _, _ = ACTIVATIONS[onnx_name]
        out["activations"].append(onnx_name)
        if takes_alpha:
            out["activation_alpha"].append(alpha)
        if takes_beta:
            out["activation_beta"].append(beta)
    return {k: v for k, v in out.items() if v}


def activation_names(kind: str, activation: str, recurrent_activation: str | None) -> list[str]:
    """One direction's Keras activations in ONNX order."""
    if kind == "LSTM":
        return [recurrent_activation, activation, activation]
    if kind == "GRU":
        return [recurrent_activation, activation]
    return [activation]


def masked_output_of(layer: Any) -> str:
    """The ``masked_output`` mode of a Keras RNN layer: "zero" with ``zero_output_for_mask``
    (which ``Bidirectional`` sets to ``return_sequences``), "carry" otherwise. (Keras 3 on JAX or
    NumPy with ``unroll=False`` differs before the first processed step when ``initial_state`` is
    non-zero: ``tests/test_keras_jax_fixture.py`` applies the spec's recipe on top of "carry".)"""
    return "zero" if layer.zero_output_for_mask else "carry"


def _name(fn: Any) -> str:
    import keras

    return keras.activations.serialize(fn) if not isinstance(fn, str) else fn


def _single(layer: Any) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    from keras.ops import convert_to_numpy

    kind = type(layer).__name__
    cell = layer.cell
    bias = convert_to_numpy(cell.bias) if cell.use_bias else None
    weights = convert_weights(
        kind, convert_to_numpy(cell.kernel), convert_to_numpy(cell.recurrent_kernel), bias
    )
    recurrent = _name(cell.recurrent_activation) if kind != "SimpleRNN" else None
    attributes = {
        "hidden_size": cell.units,
        "direction": "reverse" if layer.go_backwards else "forward",
        **onnx_activations(activation_names(kind, _name(cell.activation), recurrent)),
    }
    if kind == "GRU":
        attributes["linear_before_reset"] = int(cell.reset_after)
    return kind, attributes, weights


def convert_layer(layer: Any) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """``(op_type, attributes, weights)`` of the masked ONNX node equal to a built Keras LSTM, GRU,
    SimpleRNN or ``Bidirectional`` of one of them (Keras' TensorFlow/torch semantics).

    ``attributes`` include ``direction`` (``reverse`` for ``go_backwards``: ONNX output is then
    time-aligned where Keras returns it in processing order) and ``masked_output``; ``weights``
    holds ``W``, ``R`` and ``B`` (absent when the layer has no bias).
    """
    if type(layer).__name__ == "Bidirectional":
        kind, forward, w_forward = _single(layer.forward_layer)
        _, backward, w_backward = _single(layer.backward_layer)
        attributes = dict(forward, direction="bidirectional")
        for key in ("activations", "activation_alpha", "activation_beta"):
            if key in forward:
                attributes[key] = forward[key] + backward[key]
        weights = {k: np.concatenate([w_forward[k], w_backward[k]]) for k in w_forward}
        modes = {masked_output_of(lay) for lay in (layer.forward_layer, layer.backward_layer)}
        (attributes["masked_output"],) = modes
        return OP_TYPES[kind], attributes, weights
    kind, attributes, weights = _single(layer)
    attributes["masked_output"] = masked_output_of(layer)
    return OP_TYPES[kind], attributes, weights


def initial_state_to_onnx(op_type: str, states: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Keras ``initial_state`` (``[h]``, ``[h, c]``, or both directions' lists one after the other
    for ``Bidirectional``; each ``[N, H]``) as ONNX ``initial_h``/``initial_c`` for ``layout=1``."""
    per_direction = 2 if op_type == "MaskedLSTM" else 1
    names = ("initial_h", "initial_c")[:per_direction]
    return {
        name: np.stack([np.asarray(s) for s in states[i::per_direction]], axis=1)
        for i, name in enumerate(names)
    }


def outputs_to_keras(outputs: Sequence[np.ndarray], direction: str) -> list[np.ndarray]:
    """ONNX ``layout=1`` outputs ``(Y, Y_h[, Y_c])`` as the list a Keras layer with
    ``return_sequences=True, return_state=True`` returns: ``[Y, h(, c)]``; for ``Bidirectional``
    with ``merge_mode=None``, ``[Y_forward, Y_backward, forward states..., backward states...]``.
    A ``go_backwards`` layer (``direction="reverse"``) returns ``Y`` in processing order."""
    Y, *states = outputs
    if direction == "bidirectional":
        return [Y[:, :, 0], Y[:, :, 1], *(s[:, 0] for s in states), *(s[:, 1] for s in states)]
    y = Y[:, ::-1, 0] if direction == "reverse" else Y[:, :, 0]
    return [y, *(s[:, 0] for s in states)]
