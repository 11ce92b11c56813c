"""Masked recurrent layers for ONNX: MaskedLSTM, MaskedGRU and MaskedRNN."""

from onnx_masked_rnn import reference
from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.inline import attach_functions, inline
from onnx_masked_rnn.preview import PREVIEW_DOMAIN, from_preview
from onnx_masked_rnn.schemas import register_schemas

__all__ = [
    "DOMAIN",
    "OPSET_VERSION",
    "PREVIEW_DOMAIN",
    "attach_functions",
    "from_preview",
    "inline",
    "reference",
    "register_schemas",
]
