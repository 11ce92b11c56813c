"""MaskedRNN as a Scan + Where function.

ONNX RNN, for every step ``t`` processed with ``m[t]`` true::

    Ht = f(Xt·Wiᵀ + Ht-1·Riᵀ + Wbi + Rbi)

with ``clip`` applied to the pre-activation; a masked step keeps ``Ht-1``. ``X·Wᵀ + Wb + Rb`` of
all steps is one MatMul before the Scan.
"""

from __future__ import annotations

from onnxscript import graph, script, values

from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions._builder import PARTS, Parts, activation
from onnx_masked_rnn.functions._op import hidden_state_op
from onnx_masked_rnn.functions.masking import ZERO_3D, carried_output


def rnn_direction(parts: Parts, attrs: RNNAttributes, d: int, present: frozenset[str]) -> values.OnnxFunction:
    """``Y_d, Y_h_d = direction(X, W, R, B, initial_h, m)``: direction ``d`` over time-major ``X``
    ``[T, N, I]``; returns ``[T, 1, N, H]`` and ``[1, N, H]``."""
    op = parts.op
    (f,) = (activation(parts, a) for a in attrs.activations[d])
    reverse = attrs.direction == "reverse" or d == 1
    DIR, REVERSE = d, int(reverse)
    HAS_B, HAS_H0 = "B" in present, "initial_h" in present
    ZERO_OUTPUT = attrs.masked_output == "zero"
    CARRY_OUTPUT = attrs.masked_output == "carry" and HAS_H0  # without initial_h, carry is the state
    carried = carried_output(parts, reverse=reverse) if CARRY_OUTPUT else None
    CLIP, CLIP_VALUE = attrs.clip is not None, attrs.clip or 0.0

    @script(PARTS, default_opset=op)
    def rnn_direction(X, W, R, B, initial_h, m):
        xw = op.MatMul(X, op.Transpose(op.Gather(W, DIR, axis=0)))  # [T, N, H]
        if HAS_B:
            Wb, Rb = op.Split(op.Gather(B, DIR, axis=0), num_outputs=2)
            xw = op.Add(xw, op.Add(Wb, Rb))
        R_t = op.Transpose(op.Gather(R, DIR, axis=0))  # [H, H]
        if HAS_H0:
            h0 = op.Gather(initial_h, DIR, axis=0)
        else:
            h0 = op.CastLike(
                op.ConstantOfShape(op.Concat(op.Shape(X, start=1, end=2), op.Shape(R, start=2), axis=0)), X
            )
        if CLIP:
            lo, hi = op.CastLike(-CLIP_VALUE, X), op.CastLike(CLIP_VALUE, X)
        if ZERO_OUTPUT:
            zero = op.CastLike(op.Constant(value=ZERO_3D), X)  # [1, 1, 1]

        @graph()
        def step(h_prev, xw_t, m_t):
            x = op.Add(xw_t, op.MatMul(h_prev, R_t))
            if CLIP:
                x = op.Clip(x, lo, hi)
            h_new = f(x)
            h_next = op.Where(m_t, h_new, h_prev)  # a masked step keeps the state
            if ZERO_OUTPUT:
                y_t = op.Where(m_t, h_new, zero)  # [1, N, H]
            else:
                y_t = op.Unsqueeze(h_next, [0])
            return h_next, y_t

        h_last, Y = op.Scan(
            h0,
            xw,
            m,
            body=step,
            num_scan_inputs=2,
            scan_input_directions=[REVERSE, REVERSE],
            scan_output_directions=[REVERSE],
        )
        if CARRY_OUTPUT:
            Y = carried(Y, m)
        return Y, op.Unsqueeze(h_last, [0])

    return parts.add(rnn_direction, f"rnn_direction_{d}")


def masked_rnn(parts: Parts, attrs: RNNAttributes, present: frozenset[str]) -> values.OnnxFunction:
    """The MaskedRNN function specialised to ``attrs`` and the ``present`` optional inputs."""
    return hidden_state_op(parts, attrs, present, rnn_direction)
