"""PyTorch: masked LSTM/GRU/RNN modules, their custom ops, and ONNX export.

``import onnx_masked_rnn`` does not import torch; this subpackage does.
"""

from onnx_masked_rnn.torch.ops import OPS, masked_gru, masked_lstm, masked_rnn
from onnx_masked_rnn.torch.translations import TRANSLATIONS

__all__ = ["OPS", "TRANSLATIONS", "masked_gru", "masked_lstm", "masked_rnn"]
