"""PyTorch ``nn.LSTM``/``nn.GRU``/``nn.RNN`` (one layer) as the equivalent masked ONNX node.

ONNX ``W``/``R`` are torch's ``weight_ih``/``weight_hh`` stacked over directions (``_reverse`` is
direction 1) with the gate blocks reordered: LSTM i, f, g, o to ONNX i, o, f, c; GRU r, z, n to
ONNX z, r, h. ``B = [bias_ih, bias_hh]``. torch's GRU applies the reset gate after the recurrent
product (``linear_before_reset=1``); ``nn.RNN``'s ``nonlinearity`` is the ONNX activation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["convert_module"]

# torch class -> (masked op, the torch gate block of each ONNX gate in ONNX order)
_OPS = {"LSTM": ("MaskedLSTM", (0, 3, 1, 2)), "GRU": ("MaskedGRU", (1, 0, 2)), "RNN": ("MaskedRNN", (0,))}


def convert_module(module: Any) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """``(op_type, attributes, weights)`` for a one-layer torch ``nn.LSTM``, ``nn.GRU`` or
    ``nn.RNN`` (``bias`` may be off); ``layout`` follows ``batch_first``."""
    kind = type(module).__name__
    if kind not in _OPS or module.num_layers != 1 or getattr(module, "proj_size", 0):
        raise ValueError(f"only one-layer nn.LSTM/GRU/RNN without projection convert, got {module}")
    op_type, order = _OPS[kind]
    suffixes = ("", "_reverse") if module.bidirectional else ("",)

    def param(name: str, suffix: str) -> np.ndarray:
        blocks = np.split(getattr(module, f"{name}_l0{suffix}").detach().numpy(), len(order))
        return np.concatenate([blocks[k] for k in order])

    weights = {
        "W": np.stack([param("weight_ih", s) for s in suffixes]),
        "R": np.stack([param("weight_hh", s) for s in suffixes]),
    }
    if module.bias:
        weights["B"] = np.stack(
            [np.concatenate([param("bias_ih", s), param("bias_hh", s)]) for s in suffixes]
        )
    attributes: dict[str, Any] = {
        "hidden_size": module.hidden_size,
        "direction": "bidirectional" if module.bidirectional else "forward",
        "layout": int(module.batch_first),
    }
    if kind == "GRU":
        attributes["linear_before_reset"] = 1
    if kind == "RNN":
        attributes["activations"] = [module.nonlinearity.capitalize()] * len(suffixes)
    return op_type, attributes, weights
