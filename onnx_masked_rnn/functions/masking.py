"""The masking machinery shared by MaskedLSTM, MaskedGRU and MaskedRNN.

The pieces, each the same for every op:

- :func:`effective_mask`: ``m[t, n] = mask[t, n] AND t < sequence_lens[n]``, time-major, with a
  trailing axis so that ``m[t]`` broadcasts against a ``[N, H]`` state.
- the masked state update, written in each op's Scan body as ``Where(m_t, new, old)`` for every
  state tensor: a masked step leaves the state untouched (and ``Where``, unlike a multiplication,
  never lets a NaN or Inf of a masked step through).
- the output of a step, in the Scan body (``[1, N, H]``, so that the Scan emits ``Y_d``
  ``[T, 1, N, H]`` with no copy afterwards): ``Y[t] = m[t] ? h_new : 0`` in ``"zero"`` mode, the
  state after the step otherwise (a distinct value: onnxruntime 1.32 miscomputes a Scan body
  output that is both a state and a scan output). Because the state changes only at unmasked
  steps, ``"carry"`` follows from it without any extra Scan state: the previous output equals the
  state as soon as one step has been processed and is zero before that, so
  ``Y[t] = seen[t] ? state[t] : 0`` with ``seen[t]`` true once any step up to ``t`` in processing
  order is unmasked (:func:`carried_output`: a cumulative sum of ``m``, reversed for the reverse
  direction). Without ``initial_h`` the state before that is zero already, and ``"carry"`` is
  the state itself.
"""

from __future__ import annotations

from onnx import TensorProto, helper
from onnxscript import script, values

from onnx_masked_rnn.functions._builder import PARTS, Parts

_TRUE = helper.make_tensor("true", TensorProto.BOOL, [1], [True])
ZERO_3D = helper.make_tensor("zero", TensorProto.FLOAT, [1, 1, 1], [0.0])
"""A float zero of shape ``[1, 1, 1]``: ``Where(m_t, h_new, zero)`` is a ``[1, N, H]`` step output."""


def effective_mask(parts: Parts, *, layout: int, has_mask: bool, has_lens: bool) -> values.OnnxFunction:
    """``m = effective_mask(X, sequence_lens, mask)``: bool ``[T, N, 1]``, time-major whatever
    ``layout`` is; all true when neither ``mask`` nor ``sequence_lens`` is given."""
    op = parts.op
    BATCH_MAJOR, MASK, LENS = layout == 1, has_mask, has_lens
    MASK_AND_LENS = has_mask and has_lens
    ALL_TRUE = not (has_mask or has_lens)
    TIME_AXIS = 1 if layout == 1 else 0

    @script(PARTS, default_opset=op)
    def effective_mask(X, sequence_lens, mask):
        if MASK:
            if BATCH_MAJOR:
                m = op.Transpose(mask, perm=[1, 0])
            else:
                m = op.Identity(mask)
        if LENS:
            T = op.Squeeze(op.Shape(X, start=TIME_AXIS, end=TIME_AXIS + 1))
            t = op.Unsqueeze(op.Range(op.Constant(value_int=0), T, op.Constant(value_int=1)), [1])  # [T, 1]
            in_sequence = op.Less(t, op.Unsqueeze(op.Cast(sequence_lens, to=TensorProto.INT64), [0]))
            if MASK_AND_LENS:
                m = op.And(m, in_sequence)
            else:
                m = op.Identity(in_sequence)
        if ALL_TRUE:
            m = op.ConstantOfShape(op.Shape(X, start=0, end=2), value=_TRUE)
            if BATCH_MAJOR:
                m = op.Transpose(m, perm=[1, 0])
        return op.Unsqueeze(m, [2])

    return parts.add(effective_mask, "effective_mask")


def carried_output(parts: Parts, *, reverse: bool) -> values.OnnxFunction:
    """``Y = carried_output(states, m)``: a direction's ``"carry"`` mode ``Y`` ``[T, 1, N, H]`` from
    the hidden state after every step (``states``) and the effective mask ``m`` ``[T, N, 1]``."""
    op = parts.op
    REVERSE = 1 if reverse else 0
    name = f"carried_output_{'reverse' if reverse else 'forward'}"
    if (existing := parts.get(name)) is not None:
        return existing

    @script(PARTS, default_opset=op)
    def carried_output(states, m):
        processed = op.CumSum(op.Cast(m, to=TensorProto.INT64), op.Constant(value_int=0), reverse=REVERSE)
        seen = op.Greater(processed, op.Constant(value_int=0))  # a step up to t was unmasked
        return op.Where(op.Unsqueeze(seen, [1]), states, op.CastLike(0.0, states))

    return parts.add(carried_output, name)
