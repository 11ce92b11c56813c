"""The masking machinery shared by MaskedLSTM, MaskedGRU and MaskedRNN.

Three pieces, each the same for every op:

- :func:`effective_mask`: ``m[t, n] = mask[t, n] AND t < sequence_lens[n]``, time-major, with a
  trailing axis so that ``m[t]`` broadcasts against a ``[N, H]`` state.
- the masked state update, written in each op's Scan body as ``Where(m_t, new, old)`` for every
  state tensor: a masked step leaves the state untouched (and ``Where``, unlike a multiplication,
  never lets a NaN or Inf of a masked step through).
- :func:`masked_output`: every Scan emits its hidden state after each step, which *is* the
  ``"state"`` mode output. Because the state changes only at unmasked steps, the other modes
  follow from it without any extra Scan state:

  - ``"zero"``: ``Y[t] = m[t] ? state[t] : 0`` (``state[t]`` is ``h_new`` where ``m[t]``);
  - ``"carry"``: the previous output equals the state as soon as one step has been processed, and
    is zero before that, so ``Y[t] = seen[t] ? state[t] : 0`` with ``seen[t]`` true once any step
    up to ``t`` in processing order is unmasked (a cumulative sum of ``m``, reversed for the
    reverse direction).
"""

from __future__ import annotations

from onnx import TensorProto, helper
from onnxscript import script, values

from onnx_masked_rnn.functions._builder import PARTS, Parts

_TRUE = helper.make_tensor("true", TensorProto.BOOL, [1], [True])


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


def masked_output(parts: Parts, *, mode: str, reverse: bool) -> values.OnnxFunction:
    """``Y = masked_output(states, m)``: a direction's ``Y`` ``[T, N, H]`` in ``mode`` from the
    hidden state after every step (``states``) and the effective mask ``m`` ``[T, N, 1]``."""
    op = parts.op
    STATE, ZERO = mode == "state", mode == "zero"
    REVERSE = 1 if reverse else 0
    name = f"masked_output_{mode}_{'reverse' if reverse else 'forward'}"
    if (existing := parts.get(name)) is not None:
        return existing

    @script(PARTS, default_opset=op)
    def masked_output(states, m):
        if STATE:
            Y = op.Identity(states)
        elif ZERO:
            Y = op.Where(m, states, op.CastLike(0.0, states))
        else:
            processed = op.CumSum(op.Cast(m, to=TensorProto.INT64), op.Constant(value_int=0), reverse=REVERSE)
            seen = op.Greater(processed, op.Constant(value_int=0))  # a step up to t was unmasked
            Y = op.Where(seen, states, op.CastLike(0.0, states))
        return Y

    return parts.add(masked_output, name)
