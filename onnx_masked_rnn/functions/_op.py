"""The op-level function of MaskedGRU and MaskedRNN: layout and directions around the recurrence.

Both ops have the inputs ``X, W, R, B, sequence_lens, initial_h, mask`` and the outputs
``Y, Y_h``; they differ only in the direction function (:mod:`.gru`, :mod:`.rnn`).
"""

from __future__ import annotations

from collections.abc import Callable

from onnxscript import script, values

from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions._builder import OPS, Parts
from onnx_masked_rnn.functions.masking import effective_mask

Direction = Callable[[Parts, RNNAttributes, int, frozenset[str]], values.OnnxFunction]


def hidden_state_op(
    parts: Parts, attrs: RNNAttributes, present: frozenset[str], direction: Direction
) -> values.OnnxFunction:
    """The op function: time-major view for ``layout`` 1, the effective mask, one call of
    ``direction`` per direction, outputs concatenated over directions and back in ``layout``."""
    op = parts.op
    mask_of = effective_mask(
        parts, layout=attrs.layout, has_mask="mask" in present, has_lens="sequence_lens" in present
    )
    BIDIRECTIONAL = attrs.direction == "bidirectional"
    forward = direction(parts, attrs, 0, present)
    backward = direction(parts, attrs, 1, present) if BIDIRECTIONAL else None
    BATCH_MAJOR = attrs.layout == 1
    TRANSPOSE_H0 = BATCH_MAJOR and "initial_h" in present

    @script(OPS, default_opset=op)
    def masked_op(X, W, R, B, sequence_lens, initial_h, mask):
        m = mask_of(X, sequence_lens, mask)  # [T, N, 1]
        if BATCH_MAJOR:
            X = op.Transpose(X, perm=[1, 0, 2])
        if TRANSPOSE_H0:
            initial_h = op.Transpose(initial_h, perm=[1, 0, 2])
        if BIDIRECTIONAL:
            Y_f, Y_h_f = forward(X, W, R, B, initial_h, m)
            Y_b, Y_h_b = backward(X, W, R, B, initial_h, m)
            Y = op.Concat(Y_f, Y_b, axis=1)
            Y_h = op.Concat(Y_h_f, Y_h_b, axis=0)
        else:
            Y, Y_h = forward(X, W, R, B, initial_h, m)
        if BATCH_MAJOR:
            Y = op.Transpose(Y, perm=[2, 0, 1, 3])
            Y_h = op.Transpose(Y_h, perm=[1, 0, 2])
        return Y, Y_h

    return masked_op
