"""The numpy reference: the operators' semantics, and OpRun classes for ``ReferenceEvaluator``.

``ReferenceEvaluator(model, new_ops=reference.OPS)`` runs models that contain the three ops.
"""

from onnx_masked_rnn.reference.op_masked_rnn import (
    FUNCTIONS,
    OPS,
    MaskedGRU,
    MaskedLSTM,
    MaskedRNN,
    masked_gru,
    masked_lstm,
    masked_recurrence,
    masked_rnn,
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
