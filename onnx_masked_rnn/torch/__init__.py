"""PyTorch: masked LSTM/GRU/RNN modules, their custom ops, and ONNX export.

``import onnx_masked_rnn`` does not import torch; this subpackage does. Importing it registers the
custom ops ``torch.ops.onnx_masked_rnn.masked_lstm/masked_gru/masked_rnn`` (:mod:`.ops`).
A missing torch is an ``ImportError`` of one line naming the ``[torch]`` extra.
"""

from onnx_masked_rnn.extras import missing_dependency

try:
    import torch  # noqa: F401 (imported first so that a missing torch gets the line below)
except ModuleNotFoundError as exc:
    if exc.name != "torch":
        raise
    raise missing_dependency("onnx_masked_rnn.torch", "torch", "torch") from None

from onnx_masked_rnn.torch.export import STRATEGIES, export
from onnx_masked_rnn.torch.modules import MaskedGRU, MaskedLSTM, MaskedRNN
from onnx_masked_rnn.torch.ops import OPS, masked_gru, masked_lstm, masked_rnn
from onnx_masked_rnn.torch.translations import TRANSLATIONS

__all__ = [
    "OPS",
    "STRATEGIES",
    "TRANSLATIONS",
    "MaskedGRU",
    "MaskedLSTM",
    "MaskedRNN",
    "export",
    "masked_gru",
    "masked_lstm",
    "masked_rnn",
]
