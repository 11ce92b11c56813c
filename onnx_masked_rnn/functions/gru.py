"""MaskedGRU as a Scan + Where function.

ONNX GRU, gates in the order z, r, h, for every step ``t`` processed with ``m[t]`` true::

    z = f(Xt·Wzᵀ + Ht-1·Rzᵀ + Wbz + Rbz)
    r = f(Xt·Wrᵀ + Ht-1·Rrᵀ + Wbr + Rbr)
    h = g(Xt·Whᵀ + (r ⊙ Ht-1)·Rhᵀ + Rbh + Wbh)          linear_before_reset = 0
    h = g(Xt·Whᵀ + r ⊙ (Ht-1·Rhᵀ + Rbh) + Wbh)          linear_before_reset = 1
    Ht = (1 - z) ⊙ h + z ⊙ Ht-1

with ``clip`` applied to every pre-activation; a masked step keeps ``Ht-1``. ``X·Wᵀ + Wb + Rb``
of all steps is one MatMul before the Scan (without ``Rbh`` when ``linear_before_reset`` is 1). A
step computes ``H·Rᵀ`` in one MatMul for all gates when ``linear_before_reset`` is 1; otherwise the
h gate needs ``r`` first, so z, r share one MatMul and h has its own.
"""

from __future__ import annotations

from onnxscript import graph, script, values

from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions._builder import PARTS, Parts, activation
from onnx_masked_rnn.functions._op import hidden_state_op
from onnx_masked_rnn.functions.masking import masked_output


def gru_direction(parts: Parts, attrs: RNNAttributes, d: int, present: frozenset[str]) -> values.OnnxFunction:
    """``Y_d, Y_h_d = direction(X, W, R, B, initial_h, m)``: direction ``d`` over time-major ``X``
    ``[T, N, I]``; returns ``[T, 1, N, H]`` and ``[1, N, H]``."""
    op = parts.op
    f, g = (activation(parts, a) for a in attrs.activations[d])
    reverse = attrs.direction == "reverse" or d == 1
    output = masked_output(parts, mode=attrs.masked_output, reverse=reverse)
    DIR, REVERSE = d, int(reverse)
    HAS_B, HAS_H0 = "B" in present, "initial_h" in present
    CLIP, CLIP_VALUE = attrs.clip is not None, attrs.clip or 0.0
    LINEAR_BEFORE_RESET = bool(attrs.linear_before_reset)
    RESET_BIAS = LINEAR_BEFORE_RESET and HAS_B
    RESET_AFTER_MATMUL = not LINEAR_BEFORE_RESET

    @script(PARTS, default_opset=op)
    def gru_direction(X, W, R, B, initial_h, m):
        H = op.Shape(R, start=2)
        zr_h = op.Concat(op.Mul(H, op.Constant(value_ints=[2])), H, axis=0)  # split sizes [2H, H]
        xw = op.MatMul(X, op.Transpose(op.Gather(W, DIR, axis=0)))  # [T, N, 3H]: z, r, h
        if HAS_B:
            Wb, Rb = op.Split(op.Gather(B, DIR, axis=0), num_outputs=2)
            if LINEAR_BEFORE_RESET:
                Wb_zr, Wb_h = op.Split(Wb, zr_h)
                Rb_zr, Rb_h = op.Split(Rb, zr_h)  # Rb_h is added inside the step
                xw = op.Add(xw, op.Concat(op.Add(Wb_zr, Rb_zr), Wb_h, axis=0))
            else:
                xw = op.Add(xw, op.Add(Wb, Rb))
        xw_zr, xw_h = op.Split(xw, zr_h, axis=-1)
        R_t = op.Transpose(op.Gather(R, DIR, axis=0))  # [H, 3H]
        if RESET_AFTER_MATMUL:
            R_zr_t, R_h_t = op.Split(R_t, zr_h, axis=-1)
        if HAS_H0:
            h0 = op.Gather(initial_h, DIR, axis=0)
        else:
            h0 = op.CastLike(op.ConstantOfShape(op.Concat(op.Shape(X, start=1, end=2), H, axis=0)), X)
        if CLIP:
            lo, hi = op.CastLike(-CLIP_VALUE, X), op.CastLike(CLIP_VALUE, X)
        one = op.CastLike(1.0, X)

        @graph()
        def step(h_prev, xw_zr_t, xw_h_t, m_t):
            if LINEAR_BEFORE_RESET:
                h_zr, h_h = op.Split(op.MatMul(h_prev, R_t), zr_h, axis=-1)
            else:
                h_zr = op.MatMul(h_prev, R_zr_t)
            x_zr = op.Add(xw_zr_t, h_zr)
            if CLIP:
                x_zr = op.Clip(x_zr, lo, hi)
            z, r = op.Split(f(x_zr), num_outputs=2, axis=-1)
            if LINEAR_BEFORE_RESET:
                if RESET_BIAS:
                    h_h = op.Add(h_h, Rb_h)
                x_h = op.Add(xw_h_t, op.Mul(r, h_h))
            else:
                x_h = op.Add(xw_h_t, op.MatMul(op.Mul(r, h_prev), R_h_t))
            if CLIP:
                x_h = op.Clip(x_h, lo, hi)
            candidate = g(x_h)
            h_new = op.Add(op.Mul(op.Sub(one, z), candidate), op.Mul(z, h_prev))
            h_next = op.Where(m_t, h_new, h_prev)  # a masked step keeps the state
            return h_next, op.Identity(h_next)

        h_last, states = op.Scan(
            h0,
            xw_zr,
            xw_h,
            m,
            body=step,
            num_scan_inputs=3,
            scan_input_directions=[REVERSE, REVERSE, REVERSE],
            scan_output_directions=[REVERSE],
        )
        return op.Unsqueeze(output(states, m), [1]), op.Unsqueeze(h_last, [0])

    return parts.add(gru_direction, f"gru_direction_{d}")


def masked_gru(parts: Parts, attrs: RNNAttributes, present: frozenset[str]) -> values.OnnxFunction:
    """The MaskedGRU function specialised to ``attrs`` and the ``present`` optional inputs."""
    return hidden_state_op(parts, attrs, present, gru_direction)
