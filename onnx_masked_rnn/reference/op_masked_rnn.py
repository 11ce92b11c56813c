"""Numpy reference for MaskedLSTM, MaskedGRU and MaskedRNN.

The semantics of the three operators, in plain numpy, in the style of
``onnx/reference/ops/op_lstm.py``: the cells are exactly ONNX's LSTM/GRU/RNN cells (every attribute
honoured as onnxruntime honours it), and one masking recurrence (:func:`masked_recurrence`) serves
all three. Vectorised over the batch; a Python loop over time only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import numpy.typing as npt
from onnx.reference.op_run import OpRun

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import (
    OP_SPECS,
    Activation,
    RNNAttributes,
    infer_shapes,
    parse_attributes,
)

__all__ = [
    "FUNCTIONS",
    "OPS",
    "MaskedGRU",
    "MaskedLSTM",
    "MaskedRNN",
    "masked_gru",
    "masked_lstm",
    "masked_recurrence",
    "masked_rnn",
]

_FLOATS = (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)
_COMPUTED_IN_FLOAT32 = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_ACTIVATION_FUNCTIONS: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Sigmoid": lambda x, a, b: 1 / (1 + np.exp(-x)),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Elu": lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Softplus": lambda x, a, b: np.maximum(x, 0) + np.log(1 + np.exp(-np.abs(x))),  # as the bodies
}


def _activation(act: Activation, dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    fn = _ACTIVATION_FUNCTIONS[act.name]
    alpha, beta = dtype.type(act.alpha), dtype.type(act.beta)
    return lambda x: fn(x, alpha, beta).astype(dtype, copy=False)


# A cell maps (input projection x·Wᵀ + Wb + Rb for one step, state tuple) to the new state tuple;
# the first state is always h. `make_cell` builds one direction's cell from its weights.
Cell = Callable[[np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def _clip(attrs: RNNAttributes) -> Callable[[np.ndarray], np.ndarray]:
    if attrs.clip is None:
        return lambda x: x
    return lambda x: np.clip(x, -attrs.clip, attrs.clip)


def lstm_cell(attrs: RNNAttributes, d: int, R: np.ndarray, P: np.ndarray | None) -> Cell:
    """ONNX LSTM: gates i, o, f, c; peepholes P = [Pi, Po, Pf]; input_forget couples f = 1 - i."""
    f, g, h = (_activation(a, R.dtype) for a in attrs.activations[d])
    clip = _clip(attrs)
    p_i, p_o, p_f = np.split(P, 3) if P is not None else (0, 0, 0)

    def step(xw: np.ndarray, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        h_prev, c_prev = state
        x_i, x_o, x_f, x_c = np.split(xw + h_prev @ R.T, 4, axis=-1)
        i = f(clip(x_i + p_i * c_prev))
        forget = 1 - i if attrs.input_forget else f(clip(x_f + p_f * c_prev))
        c = forget * c_prev + i * g(clip(x_c))
        o = f(clip(x_o + p_o * c))
        return o * h(c), c

    return step


def gru_cell(attrs: RNNAttributes, d: int, R: np.ndarray, Rb_h: np.ndarray) -> Cell:
    """ONNX GRU: gates z, r, h; ``Rb_h`` is the recurrent bias of the h gate, which the input
    projection excludes when ``linear_before_reset`` is 1."""
    f, g = (_activation(a, R.dtype) for a in attrs.activations[d])
    clip = _clip(attrs)
    R_zr, R_h = R[: 2 * R.shape[1]], R[2 * R.shape[1] :]

    def step(xw: np.ndarray, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        (h_prev,) = state
        x_z, x_r, x_h = np.split(xw, 3, axis=-1)
        h_z, h_r = np.split(h_prev @ R_zr.T, 2, axis=-1)
        z = f(clip(x_z + h_z))
        r = f(clip(x_r + h_r))
        if attrs.linear_before_reset:
            candidate = g(clip(x_h + r * (h_prev @ R_h.T + Rb_h)))
        else:
            candidate = g(clip(x_h + (r * h_prev) @ R_h.T))
        return ((1 - z) * candidate + z * h_prev,)

    return step


def rnn_cell(attrs: RNNAttributes, d: int, R: np.ndarray) -> Cell:
    """ONNX RNN: h = f(x·Wᵀ + h·Rᵀ + Wb + Rb)."""
    (f,) = (_activation(a, R.dtype) for a in attrs.activations[d])
    clip = _clip(attrs)

    def step(xw: np.ndarray, state: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        return (f(clip(xw + state[0] @ R.T)),)

    return step


def masked_recurrence(
    cell: Cell,
    xw: np.ndarray,
    initial_state: tuple[np.ndarray, ...],
    mask: np.ndarray,
    reverse: bool,
    masked_output: str,
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Run one direction of a masked recurrence: the masking semantics shared by all three ops.

    ``xw``: ``[T, N, G*H]`` input projections; ``mask``: ``[T, N]`` effective mask. At a step
    where the mask is false the state is left untouched and ``Y`` holds, by ``masked_output``,
    zeros ("zero") or the previous ``Y`` of this direction ("carry", zeros before the first
    unmasked step). Returns time-aligned ``Y`` ``[T, N, H]`` and the final state.
    """
    T = xw.shape[0]
    state = initial_state
    h0 = initial_state[0]
    Y = np.zeros((T, *h0.shape), dtype=h0.dtype)
    carried_y = np.zeros_like(h0)
    for t in reversed(range(T)) if reverse else range(T):
        m = mask[t][:, None]
        new_state = cell(xw[t], state)
        state = tuple(np.where(m, new, old) for new, old in zip(new_state, state))
        if masked_output == "carry":
            carried_y = np.where(m, new_state[0], carried_y)
            Y[t] = carried_y
        else:
            Y[t] = np.where(m, new_state[0], 0)
    return Y, state


def _check_array(name: str, value: np.ndarray | None, dtype: np.dtype | None) -> None:
    if value is None:
        return
    if not isinstance(value, np.ndarray):
        raise ValueError(f"input {name!r} must be a numpy array, got {type(value).__name__}")
    if dtype is not None and value.dtype != dtype:
        raise ValueError(f"input {name!r} must have the dtype of X ({dtype}), got {value.dtype}")


def _float_dtype(compute_dtype: npt.DTypeLike) -> np.dtype:
    """``compute_dtype`` as a numpy dtype; ``ValueError`` unless it is one of the four floats."""
    try:
        dtype = np.dtype(compute_dtype)
    except TypeError:
        dtype = None
    if dtype is None or dtype.type not in _FLOATS:
        raise ValueError(
            f"compute_dtype must be float16, bfloat16, float32 or float64, got {compute_dtype!r}"
        )
    return dtype


def _run(
    attrs: RNNAttributes, inputs: dict[str, np.ndarray | None], compute_dtype: npt.DTypeLike | None = None
) -> tuple[np.ndarray, ...]:
    """Validate everything, then run every direction of ``attrs.op_type``."""
    spec = attrs.spec
    X = inputs["X"]
    if not isinstance(X, np.ndarray) or X.dtype.type not in _FLOATS:
        dtype = getattr(X, "dtype", type(X).__name__)
        raise ValueError(f"input 'X' must be a float16, bfloat16, float32 or float64 array, got {dtype}")
    computed_in = None if compute_dtype is None else _float_dtype(compute_dtype)
    for name in spec.inputs:
        if name not in ("X", "sequence_lens", "mask"):
            _check_array(name, inputs.get(name), X.dtype)
    for name in ("W", "R"):
        if inputs.get(name) is None:
            raise ValueError(f"input {name!r} is required")
    seq_lens, mask = inputs.get("sequence_lens"), inputs.get("mask")
    _check_array("sequence_lens", seq_lens, None)
    _check_array("mask", mask, None)
    if seq_lens is not None and not np.issubdtype(seq_lens.dtype, np.integer):
        raise ValueError(f"input 'sequence_lens' must be an integer tensor, got {seq_lens.dtype}")
    if mask is not None and mask.dtype != np.bool_:
        raise ValueError(f"input 'mask' must be a bool tensor, got {mask.dtype}")
    shapes = [None if inputs.get(n) is None else inputs[n].shape for n in spec.inputs]
    out_shapes = infer_shapes(attrs, shapes)
    Tn, D, N, H = (out_shapes[0][i] for i in ((1, 2, 0, 3) if attrs.layout else (0, 1, 2, 3)))
    if seq_lens is not None and ((seq_lens < 0) | (seq_lens > Tn)).any():
        raise ValueError(f"input 'sequence_lens' must lie in [0, seq_length={Tn}], got {seq_lens.tolist()}")

    # By default in float32 for float16 and bfloat16 inputs; in the input's own type otherwise.
    compute = computed_in or (np.dtype(np.float32) if X.dtype in _COMPUTED_IN_FLOAT32 else X.dtype)

    def get(name: str, default_shape: tuple[int, ...] | None = None) -> np.ndarray | None:
        value = inputs.get(name)
        if value is None:
            return None if default_shape is None else np.zeros(default_shape, compute)
        return value.astype(compute)

    batch_major = attrs.layout == 1
    X = get("X")
    initial_h = get("initial_h", (N, D, H) if batch_major else (D, N, H))
    initial_c = get("initial_c", (N, D, H) if batch_major else (D, N, H))
    if batch_major:
        X = X.transpose(1, 0, 2)
        mask = mask.T if mask is not None else None
        initial_h, initial_c = initial_h.transpose(1, 0, 2), initial_c.transpose(1, 0, 2)
    effective = np.ones((Tn, N), dtype=bool) if mask is None else mask.copy()
    if seq_lens is not None:
        effective &= np.arange(Tn)[:, None] < seq_lens[None, :]

    W, R = get("W"), get("R")
    B = get("B", (D, 2 * spec.num_gates * H))
    P = get("P")
    ys, finals = [], []
    with np.errstate(all="ignore"):  # values at masked steps may overflow; they are discarded
        for d in range(D):
            Wb, Rb = np.split(B[d], 2)
            bias = Wb + Rb
            if spec.op_type == "MaskedLSTM":
                cell = lstm_cell(attrs, d, R[d], None if P is None else P[d])
                state = (initial_h[d], initial_c[d])
            elif spec.op_type == "MaskedGRU":
                Rb_h = Rb[2 * H :]
                if attrs.linear_before_reset:
                    bias[2 * H :] = Wb[2 * H :]
                cell = gru_cell(attrs, d, R[d], Rb_h)
                state = (initial_h[d],)
            else:
                cell = rnn_cell(attrs, d, R[d])
                state = (initial_h[d],)
            xw = X @ W[d].T + bias
            reverse = attrs.direction == "reverse" or d == 1
            y, final = masked_recurrence(cell, xw, state, effective, reverse, attrs.masked_output)
            ys.append(y)
            finals.append(final)
    Y = np.stack(ys, axis=1)  # [T, D, N, H]
    states = [np.stack(s, axis=0) for s in zip(*finals)]  # each [D, N, H]
    if batch_major:
        Y = Y.transpose(2, 0, 1, 3)
        states = [s.transpose(1, 0, 2) for s in states]
    out_dtype = inputs["X"].dtype
    return tuple(o.astype(out_dtype) for o in (Y, *states))


def _inputs(op_type: str, values: Sequence[np.ndarray | None]) -> dict[str, np.ndarray | None]:
    return dict(zip(OP_SPECS[op_type].inputs, values))


def masked_lstm(
    X: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    B: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    initial_c: np.ndarray | None = None,
    P: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    *,
    compute_dtype: npt.DTypeLike | None = None,
    **attributes: object,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MaskedLSTM; returns ``(Y, Y_h, Y_c)``. Attributes by their ONNX names. ``compute_dtype``: the
    dtype every operation computes in (default: float32 for float16 and bfloat16 ``X``, ``X``'s own
    otherwise; e.g. float16 rounds at every operation); the outputs have ``X``'s dtype."""
    attrs = parse_attributes("MaskedLSTM", **attributes)
    values = (X, W, R, B, sequence_lens, initial_h, initial_c, P, mask)
    return _run(attrs, _inputs("MaskedLSTM", values), compute_dtype)  # type: ignore[return-value]


def masked_gru(
    X: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    B: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    *,
    compute_dtype: npt.DTypeLike | None = None,
    **attributes: object,
) -> tuple[np.ndarray, np.ndarray]:
    """MaskedGRU; returns ``(Y, Y_h)``. Attributes by their ONNX names. ``compute_dtype``: what the
    recurrence computes in (:func:`masked_lstm`)."""
    attrs = parse_attributes("MaskedGRU", **attributes)
    values = (X, W, R, B, sequence_lens, initial_h, mask)
    return _run(attrs, _inputs("MaskedGRU", values), compute_dtype)  # type: ignore[return-value]


def masked_rnn(
    X: np.ndarray,
    W: np.ndarray,
    R: np.ndarray,
    B: np.ndarray | None = None,
    sequence_lens: np.ndarray | None = None,
    initial_h: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    *,
    compute_dtype: npt.DTypeLike | None = None,
    **attributes: object,
) -> tuple[np.ndarray, np.ndarray]:
    """MaskedRNN; returns ``(Y, Y_h)``. Attributes by their ONNX names. ``compute_dtype``: what the
    recurrence computes in (:func:`masked_lstm`)."""
    attrs = parse_attributes("MaskedRNN", **attributes)
    values = (X, W, R, B, sequence_lens, initial_h, mask)
    return _run(attrs, _inputs("MaskedRNN", values), compute_dtype)  # type: ignore[return-value]


class _CommonMaskedRNN(OpRun):
    """The three ops' ``_run``: inputs by position in ``OP_SPECS[op].inputs`` order (trailing
    optional ones may be omitted), attributes by their ONNX names as the node states them."""

    op_domain = DOMAIN

    def _run(self, *inputs: np.ndarray | None, **attributes: object):  # type: ignore[override]
        op_type = self.__class__.__name__
        outputs = _run(parse_attributes(op_type, **attributes), _inputs(op_type, inputs))
        return outputs[: max(len(self.onnx_node.output), 1)]

    def run(self, *args: object, **kwargs: object):  # type: ignore[override]
        """``OpRun.run``, then ``None`` for an omitted output (name ``""``): the evaluator stores
        each output under its name, and a tensor stored under ``""`` would become the omitted
        inputs of every later node (onnx 1.23 does this for its own LSTM too)."""
        outputs = super().run(*args, **kwargs)
        return tuple(
            None if name == "" else v for name, v in zip(self.onnx_node.output, outputs, strict=False)
        )


class MaskedLSTM(_CommonMaskedRNN):
    """MaskedLSTM(X, W, R, B, sequence_lens, initial_h, initial_c, P, mask) -> Y, Y_h, Y_c"""


class MaskedGRU(_CommonMaskedRNN):
    """MaskedGRU(X, W, R, B, sequence_lens, initial_h, mask) -> Y, Y_h"""


class MaskedRNN(_CommonMaskedRNN):
    """MaskedRNN(X, W, R, B, sequence_lens, initial_h, mask) -> Y, Y_h"""


FUNCTIONS: dict[str, Callable[..., tuple[np.ndarray, ...]]] = {
    "MaskedLSTM": masked_lstm,
    "MaskedGRU": masked_gru,
    "MaskedRNN": masked_rnn,
}
"""The reference function of each op, by op type."""

OPS: list[type[OpRun]] = [MaskedLSTM, MaskedGRU, MaskedRNN]
