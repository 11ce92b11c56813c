"""Masked recurrent layers for ONNX: MaskedLSTM, MaskedGRU and MaskedRNN."""

from onnx_masked_rnn import reference
from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION

__all__ = ["DOMAIN", "OPSET_VERSION", "reference"]
