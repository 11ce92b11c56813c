"""One Keras 3 recurrent layer in ONNX form: op type, attributes and weights of the masked node.

The mapping, for whoever builds a graph by hand:

- Weights: ``W = kernel.T``, ``R = recurrent_kernel.T``, each with a leading direction axis.
  Keras LSTM gate blocks i, f, c, o become ONNX i, o, f, c; GRU gates z, r, h are ONNX's order.
- Bias: ``B = [bias, zeros]`` (all on the input side), except ``GRU(reset_after=True)``, which is
  ``linear_before_reset=1`` with ``B = [input_bias, recurrent_bias]``. No bias: ``B`` absent.
- Activations: LSTM ``[recurrent_activation, activation, activation]``, GRU
  ``[recurrent_activation, activation]``, SimpleRNN ``[activation]``; Keras 3's ``hard_sigmoid`` is
  ``HardSigmoid(alpha=1/6, beta=0.5)`` (the ONNX default 0.2 is tf.keras's).
- ``go_backwards`` is ``direction="reverse"``: ONNX's ``Y`` is time-aligned where Keras returns it
  in processing order (:func:`outputs_to_keras` flips it).
- ``masked_output``: ``"zero"`` when the layer has ``zero_output_for_mask`` (``Bidirectional``
  sets it to ``return_sequences``), ``"carry"`` otherwise (Keras on torch and TensorFlow).

:func:`convert_weights` and :func:`onnx_activations` work on plain arrays and names (no Keras
needed); :func:`convert_layer` reads a live layer and refuses, with :class:`UnsupportedLayerError`
naming the layer and the reason, what the ops cannot compute exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from onnx_masked_rnn.attributes import ACTIVATIONS

__all__ = [
    "KERAS_ACTIVATIONS",
    "OP_TYPES",
    "ConvertedLayer",
    "ExportWarning",
    "UnsupportedLayerError",
    "activation_names",
    "convert_layer",
    "convert_weights",
    "initial_state_to_onnx",
    "masked_output_of",
    "onnx_activations",
    "outputs_to_keras",
]

# Keras layer class name -> masked ONNX op.
OP_TYPES = {"LSTM": "MaskedLSTM", "GRU": "MaskedGRU", "SimpleRNN": "MaskedRNN"}
# Keras cell class name -> the layer class name it belongs to (for ``keras.layers.RNN(cell)``).
_CELLS = {"LSTMCell": "LSTM", "GRUCell": "GRU", "SimpleRNNCell": "SimpleRNN"}
# Keras recurrent layers whose cell no masked op computes.
_CONVOLUTIONAL = ("ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D")

# Keras 3 activation name -> (ONNX activation, alpha, beta). Each is exact: Keras 3's hard_sigmoid is
# relu6(x + 3) / 6 = HardSigmoid(1/6, 0.5); elu has alpha 1; leaky_relu has negative_slope 0.2;
# linear is Affine(1, 0).
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


class UnsupportedLayerError(ValueError):
    """A Keras layer the masked ops cannot compute exactly; the message names the layer and why."""


class ExportWarning(UserWarning):
    """The export kept something as Keras has it that the user may want otherwise (a fixed axis);
    the message names the layer and what to do."""


class ConvertedLayer(NamedTuple):
    """The masked ONNX node equal to one Keras recurrent layer (``layout=1``: Keras is batch-major)."""

    op_type: str
    """``MaskedLSTM``, ``MaskedGRU`` or ``MaskedRNN``."""
    attributes: dict[str, Any]
    """ONNX attributes: ``hidden_size``, ``direction``, ``activations`` (with ``activation_alpha``/
    ``activation_beta`` when one takes them), ``linear_before_reset`` (GRU), ``masked_output``."""
    weights: dict[str, np.ndarray]
    """``W``, ``R`` and, when the layer has a bias, ``B``."""


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
    direction axis of 1. ``kind`` is the Keras class name (LSTM, GRU, SimpleRNN); a GRU bias of
    shape ``[2, 3H]`` (``reset_after=True``) is ``[input_bias, recurrent_bias]``."""
    if kind not in OP_TYPES:
        raise ValueError(f"unsupported Keras layer {kind!r}; expected one of {sorted(OP_TYPES)}")
    out = {"W": _reorder(kind, kernel).T[None], "R": _reorder(kind, recurrent_kernel).T[None]}
    if bias is not None:
        bias = _reorder(kind, bias)
        if bias.ndim == 1:  # one bias: all of it on the input side
            bias = np.stack([bias, np.zeros_like(bias)])
        out["B"] = bias.reshape(1, -1)
    return {k: np.ascontiguousarray(v) for k, v in out.items()}


def onnx_activations(names: Sequence[str]) -> dict[str, Any]:
    """ONNX ``activations``/``activation_alpha``/``activation_beta`` for Keras activation names,
    the parameters listed in the order ONNX consumes them (only for activations that take them)."""
    out: dict[str, Any] = {"activations": [], "activation_alpha": [], "activation_beta": []}
    for name in names:
        if name not in KERAS_ACTIVATIONS:
            raise ValueError(
                f"Keras activation {name!r} has no exact ONNX form; supported: {sorted(KERAS_ACTIVATIONS)}"
            )
        onnx_name, alpha, beta = KERAS_ACTIVATIONS[name]
        takes_alpha, takes_beta, _, _ = ACTIVATIONS[onnx_name]
        out["activations"].append(onnx_name)
        if takes_alpha:
            out["activation_alpha"].append(alpha)
        if takes_beta:
            out["activation_beta"].append(beta)
    return {k: v for k, v in out.items() if v}


def activation_names(kind: str, activation: str, recurrent_activation: str | None) -> list[str]:
    """One direction's Keras activation names in ONNX order."""
    if kind == "LSTM":
        return [recurrent_activation, activation, activation]
    if kind == "GRU":
        return [recurrent_activation, activation]
    return [activation]


def masked_output_of(layer: Any) -> str:
    """The ``masked_output`` a Keras RNN layer computes on the torch and TensorFlow backends:
    ``"zero"`` with ``zero_output_for_mask`` (which ``Bidirectional`` sets to ``return_sequences``),
    ``"carry"`` otherwise. (Keras 3 on JAX/NumPy differs only with a non-zero ``initial_state``:
    see docs/keras.md for the recipe on top of ``"carry"``.)"""
    return "zero" if layer.zero_output_for_mask else "carry"


def _describe(layer: Any) -> str:
    return f"layer {layer.name!r} ({type(layer).__name__})"


def _activation_name(layer: Any, fn: Any, role: str) -> str:
    """The Keras name of a built-in activation, by identity, or a refusal naming the layer."""
    import keras

    for name in KERAS_ACTIVATIONS:
        if fn is keras.activations.get(name):
            return name
    shown = getattr(fn, "__name__", repr(fn))
    raise UnsupportedLayerError(
        f"{_describe(layer)}: {role} {shown!r} has no exact ONNX form; "
        f"supported: {', '.join(sorted(KERAS_ACTIVATIONS))}"
    )


def _kind(layer: Any) -> str:
    """The Keras class name (LSTM, GRU, SimpleRNN) whose cell this layer runs, or a refusal."""
    import keras

    if not isinstance(layer, keras.layers.RNN):
        raise UnsupportedLayerError(f"{_describe(layer)}: not a Keras recurrent layer")
    if isinstance(layer, tuple(getattr(keras.layers, name) for name in _CONVOLUTIONAL)):
        raise UnsupportedLayerError(
            f"{_describe(layer)}: convolutional recurrent layers ({', '.join(_CONVOLUTIONAL)}) are not "
            "supported: their gates are convolutions, which no ONNX recurrent op computes; only LSTM, "
            "GRU and SimpleRNN (and RNN over their cells) have a masked ONNX op"
        )
    cell_class = type(layer.cell).__name__
    standard = getattr(keras.layers, cell_class, None)
    if cell_class not in _CELLS or type(layer.cell) is not standard:
        whose = "Keras' own cell" if type(layer.cell) is standard else "custom cell"
        raise UnsupportedLayerError(
            f"{_describe(layer)}: {whose} {cell_class!r} is not supported; only Keras' own LSTMCell, "
            "GRUCell and SimpleRNNCell have a masked ONNX op"
        )
    if layer.stateful:
        raise UnsupportedLayerError(
            f"{_describe(layer)}: stateful=True keeps state across calls, which an ONNX model cannot; "
            "rebuild the layer with stateful=False and feed the state through initial_state"
        )
    return _CELLS[cell_class]


def _single(layer: Any) -> ConvertedLayer:
    from keras.ops import convert_to_numpy

    kind = _kind(layer)
    cell = layer.cell
    names = activation_names(
        kind,
        _activation_name(layer, cell.activation, "activation"),
        _activation_name(layer, cell.recurrent_activation, "recurrent_activation")
        if kind != "SimpleRNN"
        else None,
    )
    bias = convert_to_numpy(cell.bias) if cell.use_bias else None
    weights = convert_weights(
        kind, convert_to_numpy(cell.kernel), convert_to_numpy(cell.recurrent_kernel), bias
    )
    attributes = {
        "hidden_size": int(cell.units),
        "direction": "reverse" if layer.go_backwards else "forward",
        **onnx_activations(names),
    }
    if kind == "GRU":
        attributes["linear_before_reset"] = int(cell.reset_after)
    attributes["masked_output"] = masked_output_of(layer)
    return ConvertedLayer(OP_TYPES[kind], attributes, weights)


def _merge_bidirectional(layer: Any, forward: ConvertedLayer, backward: ConvertedLayer) -> ConvertedLayer:
    """The two directions of a ``Bidirectional`` as one node, or a refusal saying what differs."""
    if layer.forward_layer.go_backwards:
        raise UnsupportedLayerError(
            f"{_describe(layer)}: its forward layer has go_backwards=True, so its 'forward' output "
            "runs in reverse; one bidirectional node cannot express that"
        )
    if forward.op_type != backward.op_type:
        reason = f"the backward layer is a {backward.op_type}, the forward one a {forward.op_type}"
    elif forward.weights.keys() != backward.weights.keys():
        reason = "one direction has a bias and the other not"
    else:
        reason = next(
            (
                f"{key} differs ({forward.attributes.get(key)!r} vs {backward.attributes.get(key)!r})"
                for key in ("hidden_size", "linear_before_reset", "masked_output")
                if forward.attributes.get(key) != backward.attributes.get(key)
            ),
            None,
        )
    if reason:
        raise UnsupportedLayerError(f"{_describe(layer)}: {reason}; the op has one value for both directions")
    attributes = dict(forward.attributes, direction="bidirectional")
    for key in ("activations", "activation_alpha", "activation_beta"):
        if key in forward.attributes or key in backward.attributes:
            attributes[key] = forward.attributes.get(key, []) + backward.attributes.get(key, [])
    weights = {k: np.concatenate([forward.weights[k], backward.weights[k]]) for k in forward.weights}
    return ConvertedLayer(forward.op_type, attributes, weights)


def convert_layer(layer: Any) -> ConvertedLayer:
    """The masked ONNX node (``layout=1``) equal to a built Keras ``LSTM``, ``GRU``, ``SimpleRNN``,
    ``RNN`` over one of their cells, or ``Bidirectional`` of one of them (one bidirectional node).

    Raises :class:`UnsupportedLayerError` for a custom cell, an activation with no exact ONNX form,
    ``stateful=True``, or a ``Bidirectional`` whose directions differ in op type, ``units``, bias,
    ``reset_after`` or masked output (the op has one value of each for both directions).
    """
    import keras

    if isinstance(layer, keras.layers.Bidirectional):
        return _merge_bidirectional(layer, _single(layer.forward_layer), _single(layer.backward_layer))
    return _single(layer)


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
