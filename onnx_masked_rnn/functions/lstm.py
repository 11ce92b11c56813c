"""MaskedLSTM as a Scan + Where function.

ONNX LSTM, gates in the order i, o, f, c, for every step ``t`` processed with ``m[t]`` true::

    i = f(Xt·Wiᵀ + Ht-1·Riᵀ + Pi ⊙ Ct-1 + Wbi + Rbi)
    f = f(Xt·Wfᵀ + Ht-1·Rfᵀ + Pf ⊙ Ct-1 + Wbf + Rbf)      (1 - i with input_forget)
    c = g(Xt·Wcᵀ + Ht-1·Rcᵀ + Wbc + Rbc)
    Ct = f ⊙ Ct-1 + i ⊙ c
    o = f(Xt·Woᵀ + Ht-1·Roᵀ + Po ⊙ Ct + Wbo + Rbo)
    Ht = o ⊙ h(Ct)

with ``clip`` applied to every pre-activation; a masked step keeps ``Ht-1, Ct-1``. The input
projections ``X·Wᵀ + Wb + Rb`` of all steps are computed before the Scan. The gates are grouped
by activation: a step computes ``H·Rᵀ`` in one MatMul for i, o, f and one for c, so no step splits
a product of all gates and onnxruntime fuses each MatMul with its Add (and with an activation that
follows directly) into one Gemm.
"""

from __future__ import annotations

from onnxscript import graph, script, values

from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions._builder import OPS, PARTS, Parts, activation
from onnx_masked_rnn.functions.masking import ZERO_3D, carried_output, effective_mask


def lstm_direction(
    parts: Parts, attrs: RNNAttributes, d: int, present: frozenset[str]
) -> values.OnnxFunction:
    """``Y_d, Y_h_d, Y_c_d = direction(X, W, R, B, initial_h, initial_c, P, m)``: direction ``d``
    over time-major ``X`` ``[T, N, I]`` and states ``[D, N, H]``; returns ``[T, 1, N, H]`` and
    ``[1, N, H]`` twice."""
    op = parts.op
    f, g, h = (activation(parts, a) for a in attrs.activations[d])
    reverse = attrs.direction == "reverse" or d == 1
    DIR, REVERSE = d, int(reverse)
    HAS_B, HAS_H0, HAS_C0 = "B" in present, "initial_h" in present, "initial_c" in present
    ZERO_OUTPUT = attrs.masked_output == "zero"
    CARRY_OUTPUT = attrs.masked_output == "carry" and HAS_H0  # without initial_h, carry is the state
    carried = carried_output(parts, reverse=reverse) if CARRY_OUTPUT else None
    ZERO_STATE = not (HAS_H0 and HAS_C0)
    PEEPHOLES, INPUT_FORGET = "P" in present, bool(attrs.input_forget)
    CLIP, CLIP_VALUE = attrs.clip is not None, attrs.clip or 0.0

    @script(PARTS, default_opset=op)
    def lstm_direction(X, W, R, B, initial_h, initial_c, P, m):
        # Everything independent of the state is computed once, outside the Scan; the gates i, o, f
        # (activation f) apart from c (activation g), so that no step splits off the c gate.
        H = op.Shape(R, start=2)
        iof_c = op.Concat(op.Mul(H, op.Constant(value_ints=[3])), H, axis=0)  # split sizes [3H, H]
        W_iof_t, W_c_t = op.Split(op.Transpose(op.Gather(W, DIR, axis=0)), iof_c, axis=-1)  # [I, 3H], [I, H]
        R_iof_t, R_c_t = op.Split(op.Transpose(op.Gather(R, DIR, axis=0)), iof_c, axis=-1)  # [H, 3H], [H, H]
        xw_iof, xw_c = op.MatMul(X, W_iof_t), op.MatMul(X, W_c_t)  # [T, N, 3H], [T, N, H]
        if HAS_B:
            Wb, Rb = op.Split(op.Gather(B, DIR, axis=0), num_outputs=2)
            b_iof, b_c = op.Split(op.Add(Wb, Rb), iof_c)
            xw_iof = op.Add(xw_iof, b_iof)
            xw_c = op.Add(xw_c, b_c)
        if ZERO_STATE:
            zeros = op.CastLike(op.ConstantOfShape(op.Concat(op.Shape(X, start=1, end=2), H, axis=0)), X)
        if HAS_H0:
            h0 = op.Gather(initial_h, DIR, axis=0)
        else:
            h0 = op.Identity(zeros)
        if HAS_C0:
            c0 = op.Gather(initial_c, DIR, axis=0)
        else:
            c0 = op.Identity(zeros)
        if PEEPHOLES:
            p_i, p_o, p_f = op.Split(op.Gather(P, DIR, axis=0), num_outputs=3)
        if CLIP:
            lo, hi = op.CastLike(-CLIP_VALUE, X), op.CastLike(CLIP_VALUE, X)
        if INPUT_FORGET:
            one = op.CastLike(1.0, X)
        if ZERO_OUTPUT:
            zero = op.CastLike(op.Constant(value=ZERO_3D), X)  # [1, 1, 1]

        @graph()
        def step(h_prev, c_prev, xw_iof_t, xw_c_t, m_t):
            x_iof = op.Add(xw_iof_t, op.MatMul(h_prev, R_iof_t))  # i, o, f before activation
            x_c = op.Add(xw_c_t, op.MatMul(h_prev, R_c_t))
            if PEEPHOLES:
                x_i, x_o, x_f = op.Split(x_iof, num_outputs=3, axis=-1)
                x_i = op.Add(x_i, op.Mul(p_i, c_prev))
                x_f = op.Add(x_f, op.Mul(p_f, c_prev))
                if CLIP:
                    x_i, x_f, x_c = op.Clip(x_i, lo, hi), op.Clip(x_f, lo, hi), op.Clip(x_c, lo, hi)
                i = f(x_i)
                if INPUT_FORGET:
                    forget = op.Sub(one, i)
                else:
                    forget = f(x_f)
                c = op.Add(op.Mul(forget, c_prev), op.Mul(i, g(x_c)))
                x_o = op.Add(x_o, op.Mul(p_o, c))
                if CLIP:
                    x_o = op.Clip(x_o, lo, hi)
                o = f(x_o)
            else:  # f applies to i, o, f in one call
                if CLIP:
                    x_iof, x_c = op.Clip(x_iof, lo, hi), op.Clip(x_c, lo, hi)
                i, o, forget = op.Split(f(x_iof), num_outputs=3, axis=-1)
                if INPUT_FORGET:
                    forget = op.Sub(one, i)
                c = op.Add(op.Mul(forget, c_prev), op.Mul(i, g(x_c)))
            h_new = op.Mul(o, h(c))
            h_next = op.Where(m_t, h_new, h_prev)  # a masked step keeps the state
            c_next = op.Where(m_t, c, c_prev)
            if ZERO_OUTPUT:
                y_t = op.Where(m_t, h_new, zero)  # [1, N, H]
            else:
                y_t = op.Unsqueeze(h_next, [0])
            return h_next, c_next, y_t

        h_last, c_last, Y = op.Scan(
            h0,
            c0,
            xw_iof,
            xw_c,
            m,
            body=step,
            num_scan_inputs=3,
            scan_input_directions=[REVERSE, REVERSE, REVERSE],
            scan_output_directions=[REVERSE],
        )
        if CARRY_OUTPUT:
            Y = carried(Y, m)
        return Y, op.Unsqueeze(h_last, [0]), op.Unsqueeze(c_last, [0])

    return parts.add(lstm_direction, f"lstm_direction_{d}")


def masked_lstm(parts: Parts, attrs: RNNAttributes, present: frozenset[str]) -> values.OnnxFunction:
    """The MaskedLSTM function specialised to ``attrs`` and the ``present`` optional inputs."""
    op = parts.op
    mask_of = effective_mask(
        parts, layout=attrs.layout, has_mask="mask" in present, has_lens="sequence_lens" in present
    )
    forward = lstm_direction(parts, attrs, 0, present)
    BIDIRECTIONAL = attrs.direction == "bidirectional"
    backward = lstm_direction(parts, attrs, 1, present) if BIDIRECTIONAL else None
    BATCH_MAJOR = attrs.layout == 1
    TRANSPOSE_H0 = BATCH_MAJOR and "initial_h" in present
    TRANSPOSE_C0 = BATCH_MAJOR and "initial_c" in present

    @script(OPS, default_opset=op)
    def MaskedLSTM(X, W, R, B, sequence_lens, initial_h, initial_c, P, mask):
        m = mask_of(X, sequence_lens, mask)  # [T, N, 1]
        if BATCH_MAJOR:
            X = op.Transpose(X, perm=[1, 0, 2])
        if TRANSPOSE_H0:
            initial_h = op.Transpose(initial_h, perm=[1, 0, 2])
        if TRANSPOSE_C0:
            initial_c = op.Transpose(initial_c, perm=[1, 0, 2])
        if BIDIRECTIONAL:
            Y_f, Y_h_f, Y_c_f = forward(X, W, R, B, initial_h, initial_c, P, m)
            Y_b, Y_h_b, Y_c_b = backward(X, W, R, B, initial_h, initial_c, P, m)
            Y = op.Concat(Y_f, Y_b, axis=1)
            Y_h = op.Concat(Y_h_f, Y_h_b, axis=0)
            Y_c = op.Concat(Y_c_f, Y_c_b, axis=0)
        else:
            Y, Y_h, Y_c = forward(X, W, R, B, initial_h, initial_c, P, m)
        if BATCH_MAJOR:
            Y = op.Transpose(Y, perm=[2, 0, 1, 3])
            Y_h = op.Transpose(Y_h, perm=[1, 0, 2])
            Y_c = op.Transpose(Y_c, perm=[1, 0, 2])
        return Y, Y_h, Y_c

    return MaskedLSTM
