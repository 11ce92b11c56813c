"""The LSTM, GRU and RNN cells as graph builders, mirroring ``reference.lstm_cell/gru_cell/rnn_cell``.

A cell builder runs once per direction, in the function's graph: it computes everything that does
not depend on the state for all steps at once (``X·Wᵀ + Wb + Rb``, :attr:`Cell.projections`) and
returns the per-step function (:attr:`Cell.step`) that :func:`~.masked_scan.masked_scan` traces
into the Scan body. Whatever the step reads besides its state and its projections is listed in
:attr:`Cell.weights` (slices of ``R`` and ``P``), so that the Scan can hand them to its body
(portable form) or let the body read them from the enclosing graph (capture form). Constants are
built inside the step, in the body's element type, never captured.

Weights are split by gate with ``Split(num_outputs=...)`` (sizes fixed by the graph, not computed
at run time), and the gates are grouped by activation (LSTM: i, o, f apart from c; GRU: z, r apart
from h), so that no step splits a product of all gates and onnxruntime fuses each MatMul with its
Add into one Gemm.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from onnx_masked_rnn.attributes import Activation, RNNAttributes

__all__ = ["Cell", "activation", "constant", "gru_cell", "lstm_cell", "rnn_cell"]

# step(op, xs, weights, state) -> new state; ``xs`` holds one step of each projection.
Step = Callable[[object, Sequence[ir.Value], Sequence[ir.Value], Sequence[ir.Value]], list[ir.Value]]


@dataclasses.dataclass(frozen=True)
class Cell:
    """One direction's cell: ``projections`` ``[T, N, k]`` computed before the Scan, ``weights``
    the step reads, and ``step`` returning the new state (h first). Each projection and weight
    comes with the name its per-step value has in the Scan body; each weight with its rank."""

    projections: tuple[tuple[ir.Value, str], ...]
    weights: tuple[tuple[ir.Value, str, int], ...]
    step: Step


def constant(op, value: float | Sequence[float], dtype: ir.DataType) -> ir.Value:
    """A ``Constant`` node in ``op``'s graph holding ``value`` (a scalar, or a list: 1-D) as a
    ``value`` tensor of element type ``dtype`` (never ``value_int(s)``/``value_float(s)``, which
    some runtimes, TVM among them, reject)."""
    return op.Constant(value=ir.tensor(np.array(value, dtype=dtype.numpy())))


def activation(op, act: Activation, x: ir.Value, dtype: ir.DataType) -> ir.Value:
    """The ONNX RNN activation ``act`` applied to ``x``.

    Relu, Tanh and Sigmoid are the ONNX ops. Affine and ScaledTanh are not ONNX ops and are
    decomposed; so are the others, as their ONNX function bodies define them, because onnxruntime
    1.32 has no float64 kernel for them at ai.onnx opset 21 or newer. Softplus is written
    ``max(x, 0) + log(1 + exp(-|x|))``, which cannot overflow.
    """

    def c(value: float) -> ir.Value:
        return constant(op, value, dtype)

    name, alpha, beta = act.name, act.alpha, act.beta
    if name in ("Relu", "Tanh", "Sigmoid"):
        return getattr(op, name)(x)
    if name == "Affine":
        return op.Add(op.Mul(c(alpha), x), c(beta))
    if name == "LeakyRelu":
        return op.Where(op.GreaterOrEqual(x, c(0.0)), x, op.Mul(c(alpha), x))
    if name == "ThresholdedRelu":
        return op.Where(op.Greater(x, c(alpha)), x, c(0.0))
    if name == "ScaledTanh":
        return op.Mul(c(alpha), op.Tanh(op.Mul(c(beta), x)))
    if name == "HardSigmoid":
        return op.Max(c(0.0), op.Min(c(1.0), op.Add(op.Mul(c(alpha), x), c(beta))))
    if name == "Elu":
        return op.Where(op.GreaterOrEqual(x, c(0.0)), x, op.Mul(c(alpha), op.Sub(op.Exp(x), c(1.0))))
    if name == "Softsign":
        return op.Div(x, op.Add(c(1.0), op.Abs(x)))
    if name == "Softplus":
        return op.Add(op.Relu(x), op.Log(op.Add(c(1.0), op.Exp(op.Neg(op.Abs(x))))))
    raise AssertionError(f"unknown activation {name!r}")  # parse_attributes admits no other


def _clip(op, attrs: RNNAttributes, dtype: ir.DataType) -> Callable[[ir.Value], ir.Value]:
    if attrs.clip is None:
        return lambda x: x
    return lambda x: op.Clip(x, constant(op, -attrs.clip, dtype), constant(op, attrs.clip, dtype))


def _gates(op, weight: ir.Value, d: int, num_gates: int) -> list[ir.Value]:
    """Direction ``d`` of ``W``/``R`` (``[D, G·H, K]``) split by gate: ``G`` tensors ``[H, K]``."""
    direction = op.Gather(weight, d, axis=0)
    if num_gates == 1:
        return [direction]
    return op.Split(direction, axis=0, num_outputs=num_gates, _outputs=num_gates)


def _transposed(op, *gates: ir.Value, name: str) -> ir.Value:
    """``[K, n·H]``: the gates side by side, ready to multiply ``[.., K]`` from the right."""
    return op.Transpose(gates[0] if len(gates) == 1 else op.Concat(*gates, axis=0), _outputs=[name])


def _biases(op, B: ir.Value | None, d: int, num_gates: int) -> tuple[list[ir.Value], list[ir.Value]] | None:
    """``Wb`` and ``Rb`` of direction ``d``, each split by gate (``[H]`` each); None without ``B``."""
    if B is None:
        return None
    Wb, Rb = op.Split(op.Gather(B, d, axis=0), num_outputs=2, _outputs=2)
    if num_gates == 1:
        return [Wb], [Rb]
    return (
        op.Split(Wb, num_outputs=num_gates, _outputs=num_gates),
        op.Split(Rb, num_outputs=num_gates, _outputs=num_gates),
    )


def lstm_cell(
    op, attrs: RNNAttributes, d: int, X: ir.Value, W: ir.Value, R: ir.Value, B, P, dtype: ir.DataType
) -> Cell:
    """ONNX LSTM: gates i, o, f, c; peepholes ``P = [Pi, Po, Pf]``; ``input_forget`` couples
    ``f = 1 - i``; ``clip`` bounds every pre-activation."""
    f, g, h = attrs.activations[d]
    W_i, W_o, W_f, W_c = _gates(op, W, d, 4)
    R_i, R_o, R_f, R_c = _gates(op, R, d, 4)
    xw_iof = op.MatMul(
        X, _transposed(op, W_i, W_o, W_f, name=f"W_iof_t_{d}"), _outputs=[f"xw_iof_{d}"]
    )  # [T, N, 3H]
    xw_c = op.MatMul(X, _transposed(op, W_c, name=f"W_c_t_{d}"), _outputs=[f"xw_c_{d}"])  # [T, N, H]
    biases = _biases(op, B, d, 4)
    if biases is not None:
        (b_i, b_o, b_f, b_c) = (op.Add(wb, rb) for wb, rb in zip(*biases))
        xw_iof = op.Add(xw_iof, op.Concat(b_i, b_o, b_f, axis=0))
        xw_c = op.Add(xw_c, b_c)
    weights = [
        (_transposed(op, R_i, R_o, R_f, name=f"R_iof_t_{d}"), "R_iof_t", 2),
        (_transposed(op, R_c, name=f"R_c_t_{d}"), "R_c_t", 2),
    ]
    if P is not None:
        peepholes = op.Split(op.Gather(P, d, axis=0), num_outputs=3, _outputs=3)
        weights += [(p, name, 1) for p, name in zip(peepholes, ("P_i", "P_o", "P_f"))]

    def step(op, xs, weights, state):
        x_iof, x_c = xs
        R_iof_t, R_c_t, *peepholes = weights
        h_prev, c_prev = state
        clip = _clip(op, attrs, dtype)
        x_iof = op.Add(x_iof, op.MatMul(h_prev, R_iof_t))  # i, o, f before activation
        x_c = op.Add(x_c, op.MatMul(h_prev, R_c_t))
        if peepholes:  # i and f see c_prev, o sees the new c: the gates are activated one by one
            p_i, p_o, p_f = peepholes
            x_i, x_o, x_f = op.Split(x_iof, axis=-1, num_outputs=3, _outputs=3)
            i = activation(op, f, clip(op.Add(x_i, op.Mul(p_i, c_prev))), dtype)
            if attrs.input_forget:
                forget = op.Sub(constant(op, 1.0, dtype), i)
            else:
                forget = activation(op, f, clip(op.Add(x_f, op.Mul(p_f, c_prev))), dtype)
            c = op.Add(
                op.Mul(forget, c_prev), op.Mul(i, activation(op, g, clip(x_c), dtype)), _outputs=["c_new"]
            )
            o = activation(op, f, clip(op.Add(x_o, op.Mul(p_o, c))), dtype)
        else:  # f activates i, o, f in one call
            i, o, forget = op.Split(
                activation(op, f, clip(x_iof), dtype), axis=-1, num_outputs=3, _outputs=["i", "o", "f"]
            )
            if attrs.input_forget:
                forget = op.Sub(constant(op, 1.0, dtype), i)
            c = op.Add(
                op.Mul(forget, c_prev), op.Mul(i, activation(op, g, clip(x_c), dtype)), _outputs=["c_new"]
            )
        return [op.Mul(o, activation(op, h, c, dtype), _outputs=["h_new"]), c]

    return Cell(((xw_iof, "x_iof"), (xw_c, "x_c")), tuple(weights), step)


def gru_cell(
    op, attrs: RNNAttributes, d: int, X: ir.Value, W: ir.Value, R: ir.Value, B, dtype: ir.DataType
) -> Cell:
    """ONNX GRU: gates z, r, h; with ``linear_before_reset`` the h gate's recurrent bias ``Rbh``
    is added to ``Ht-1·Rhᵀ`` inside the step instead of to the projection."""
    f, g = attrs.activations[d]
    W_z, W_r, W_h = _gates(op, W, d, 3)
    R_z, R_r, R_h = _gates(op, R, d, 3)
    xw_zr = op.MatMul(X, _transposed(op, W_z, W_r, name=f"W_zr_t_{d}"), _outputs=[f"xw_zr_{d}"])  # [T, N, 2H]
    xw_h = op.MatMul(X, _transposed(op, W_h, name=f"W_h_t_{d}"), _outputs=[f"xw_h_{d}"])  # [T, N, H]
    weights = [
        (_transposed(op, R_z, R_r, name=f"R_zr_t_{d}"), "R_zr_t", 2),
        (_transposed(op, R_h, name=f"R_h_t_{d}"), "R_h_t", 2),
    ]
    biases = _biases(op, B, d, 3)
    if biases is not None:
        (Wb_z, Wb_r, Wb_h), (Rb_z, Rb_r, Rb_h) = biases
        xw_zr = op.Add(xw_zr, op.Add(op.Concat(Wb_z, Wb_r, axis=0), op.Concat(Rb_z, Rb_r, axis=0)))
        if attrs.linear_before_reset:
            xw_h = op.Add(xw_h, Wb_h)
            weights.append((Rb_h, "Rb_h", 1))
        else:
            xw_h = op.Add(xw_h, op.Add(Wb_h, Rb_h))

    def step(op, xs, weights, state):
        x_zr, x_h = xs
        R_zr_t, R_h_t, *reset_bias = weights
        (h_prev,) = state
        clip = _clip(op, attrs, dtype)
        z, r = op.Split(
            activation(op, f, clip(op.Add(x_zr, op.MatMul(h_prev, R_zr_t))), dtype),
            axis=-1,
            num_outputs=2,
            _outputs=["z", "r"],
        )
        if attrs.linear_before_reset:
            h_h = op.MatMul(h_prev, R_h_t)
            if reset_bias:
                h_h = op.Add(h_h, reset_bias[0])
            x_h = op.Add(x_h, op.Mul(r, h_h))
        else:
            x_h = op.Add(x_h, op.MatMul(op.Mul(r, h_prev), R_h_t))
        candidate = activation(op, g, clip(x_h), dtype)
        # (1 - z)⊙h + z⊙Ht-1 as the specification writes it (rearranged, it differs at overflow)
        keep = op.Mul(op.Sub(constant(op, 1.0, dtype), z), candidate)
        return [op.Add(keep, op.Mul(z, h_prev), _outputs=["h_new"])]

    return Cell(((xw_zr, "x_zr"), (xw_h, "x_h")), tuple(weights), step)


def rnn_cell(
    op, attrs: RNNAttributes, d: int, X: ir.Value, W: ir.Value, R: ir.Value, B, dtype: ir.DataType
) -> Cell:
    """ONNX RNN: ``Ht = f(Xt·Wᵀ + Ht-1·Rᵀ + Wb + Rb)``."""
    (f,) = attrs.activations[d]
    (W_d,), (R_d,) = _gates(op, W, d, 1), _gates(op, R, d, 1)
    xw = op.MatMul(X, _transposed(op, W_d, name=f"W_t_{d}"), _outputs=[f"xw_{d}"])  # [T, N, H]
    biases = _biases(op, B, d, 1)
    if biases is not None:
        (Wb,), (Rb,) = biases
        xw = op.Add(xw, op.Add(Wb, Rb))

    def step(op, xs, weights, state):
        (x,), (R_t,), (h_prev,) = xs, weights, state
        return [activation(op, f, _clip(op, attrs, dtype)(op.Add(x, op.MatMul(h_prev, R_t))), dtype)]

    return Cell(((xw, "x"),), ((_transposed(op, R_d, name=f"R_t_{d}"), "R_t", 2),), step)
