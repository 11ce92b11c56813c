"""MaskedGRU as a Scan + Where function.

ONNX GRU, gates in the order z, r, h, for every step ``t`` processed with ``m[t]`` true::

    z = f(Xt·Wzᵀ + Ht-1·Rzᵀ + Wbz + Rbz)
    r = f(Xt·Wrᵀ + Ht-1·Rrᵀ + Wbr + Rbr)
    h = g(Xt·Whᵀ + (r ⊙ Ht-1)·Rhᵀ + Rbh + Wbh)          linear_before_reset = 0
    h = g(Xt·Whᵀ + r ⊙ (Ht-1·Rhᵀ + Rbh) + Wbh)          linear_before_reset = 1
    Ht = (1 - z) ⊙ h + z ⊙ Ht-1

with ``clip`` applied to every pre-activation; a masked step keeps ``Ht-1``. ``X·Wᵀ + Wb + Rb``
of all steps is computed before the Scan (without ``Rbh`` when ``linear_before_reset`` is 1). The
gates are grouped by activation: z, r share one MatMul per step and h has its own (it needs ``r``
first when ``linear_before_reset`` is 0), so no step splits a product of all gates and onnxruntime
fuses each MatMul with its Add (and with an activation that follows directly) into one Gemm.
"""

from __future__ import annotations

from onnxscript import graph, script, values

from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions._builder import PARTS, Parts, activation
from onnx_masked_rnn.functions._op import hidden_state_op
from onnx_masked_rnn.functions.masking import ZERO_3D, carried_output


def gru_direction(parts: Parts, attrs: RNNAttributes, d: int, present: frozenset[str]) -> values.OnnxFunction:
    """``Y_d, Y_h_d = direction(X, W, R, B, initial_h, m)``: direction ``d`` over time-major ``X``
    ``[T, N, I]``; returns ``[T, 1, N, H]`` and ``[1, N, H]``."""
    op = parts.op
    f, g = (activation(parts, a) for a in attrs.activations[d])
    reverse = attrs.direction == "reverse" or d == 1
    DIR, REVERSE = d, int(reverse)
    HAS_B, HAS_H0 = "B" in present, "initial_h" in present
    ZERO_OUTPUT = attrs.masked_output == "zero"
    CARRY_OUTPUT = attrs.masked_output == "carry" and HAS_H0  # without initial_h, carry is the state
    carried = carried_output(parts, reverse=reverse) if CARRY_OUTPUT else None
    CLIP, CLIP_VALUE = attrs.clip is not None, attrs.clip or 0.0
    LINEAR_BEFORE_RESET = bool(attrs.linear_before_reset)
    RESET_BIAS = LINEAR_BEFORE_RESET and HAS_B

    @script(PARTS, default_opset=op)
    def gru_direction(X, W, R, B, initial_h, m):
        # Everything independent of the state is computed once, outside the Scan; the gates z, r
        # (activation f) apart from h (activation g), so that no step splits off the h gate.
        H = op.Shape(R, start=2)
        zr_h = op.Concat(op.Mul(H, op.Constant(value_ints=[2])), H, axis=0)  # split sizes [2H, H]
        W_zr_t, W_h_t = op.Split(op.Transpose(op.Gather(W, DIR, axis=0)), zr_h, axis=-1)  # [I, 2H], [I, H]
        R_zr_t, R_h_t = op.Split(op.Transpose(op.Gather(R, DIR, axis=0)), zr_h, axis=-1)  # [H, 2H], [H, H]
        xw_zr, xw_h = op.MatMul(X, W_zr_t), op.MatMul(X, W_h_t)  # [T, N, 2H], [T, N, H]
        if HAS_B:
            Wb, Rb = op.Split(op.Gather(B, DIR, axis=0), num_outputs=2)
            Wb_zr, Wb_h = op.Split(Wb, zr_h)
            Rb_zr, Rb_h = op.Split(Rb, zr_h)
            xw_zr = op.Add(xw_zr, op.Add(Wb_zr, Rb_zr))
            if LINEAR_BEFORE_RESET:
                xw_h = op.Add(xw_h, Wb_h)  # Rbh is added to Ht-1·Rhᵀ inside the step
            else:
                xw_h = op.Add(xw_h, op.Add(Wb_h, Rb_h))
        if HAS_H0:
            h0 = op.Gather(initial_h, DIR, axis=0)
        else:
            h0 = op.CastLike(op.ConstantOfShape(op.Concat(op.Shape(X, start=1, end=2), H, axis=0)), X)
        if CLIP:
            lo, hi = op.CastLike(-CLIP_VALUE, X), op.CastLike(CLIP_VALUE, X)
        if ZERO_OUTPUT:
            zero = op.CastLike(op.Constant(value=ZERO_3D), X)  # [1, 1, 1]

        @graph()
        def step(h_prev, xw_zr_t, xw_h_t, m_t):
            x_zr = op.Add(xw_zr_t, op.MatMul(h_prev, R_zr_t))
            if CLIP:
                x_zr = op.Clip(x_zr, lo, hi)
            z, r = op.Split(f(x_zr), num_outputs=2, axis=-1)
            if LINEAR_BEFORE_RESET:
                h_h = op.MatMul(h_prev, R_h_t)
                if RESET_BIAS:
                    h_h = op.Add(h_h, Rb_h)
                x_h = op.Add(xw_h_t, op.Mul(r, h_h))
            else:
                x_h = op.Add(xw_h_t, op.MatMul(op.Mul(r, h_prev), R_h_t))
            if CLIP:
                x_h = op.Clip(x_h, lo, hi)
            candidate = g(x_h)
            h_new = op.Add(candidate, op.Mul(z, op.Sub(h_prev, candidate)))  # (1 - z) ⊙ h + z ⊙ Ht-1
            h_next = op.Where(m_t, h_new, h_prev)  # a masked step keeps the state
            if ZERO_OUTPUT:
                y_t = op.Where(m_t, h_new, zero)  # [1, N, H]
            else:
                y_t = op.Unsqueeze(h_next, [0])
            return h_next, y_t

        h_last, Y = op.Scan(
            h0,
            xw_zr,
            xw_h,
            m,
            body=step,
            num_scan_inputs=3,
            scan_input_directions=[REVERSE, REVERSE, REVERSE],
            scan_output_directions=[REVERSE],
        )
        if CARRY_OUTPUT:
            Y = carried(Y, m)
        return Y, op.Unsqueeze(h_last, [0])

    return parts.add(gru_direction, f"gru_direction_{d}")


def masked_gru(parts: Parts, attrs: RNNAttributes, present: frozenset[str]) -> values.OnnxFunction:
    """The MaskedGRU function specialised to ``attrs`` and the ``present`` optional inputs."""
    return hidden_state_op(parts, attrs, present, gru_direction)
