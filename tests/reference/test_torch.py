"""The reference's "zero" mode against PyTorch ``pack_padded_sequence`` with ``nn.LSTM``,
``nn.GRU`` and ``nn.RNN`` (tanh and relu), uni- and bidirectional, float32 and float64,
time- and batch-major.

A packed sequence of length ``n`` is the mask ``t < n``; torch writes zeros at padded steps, runs
the reverse direction per row from ``n - 1`` down, and returns the state after each row's last
valid step. torch refuses a length of 0, so every row keeps at least one step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracles import REFERENCE, assert_close
from oracles.torch_to_onnx import convert_module
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

T, N, I, H = 7, 5, 3, 4
MODULES = {
    "LSTM": lambda **kw: torch.nn.LSTM(I, H, **kw),
    "GRU": lambda **kw: torch.nn.GRU(I, H, **kw),
    "RNN-tanh": lambda **kw: torch.nn.RNN(I, H, nonlinearity="tanh", **kw),
    "RNN-relu": lambda **kw: torch.nn.RNN(I, H, nonlinearity="relu", **kw),
}


@pytest.mark.parametrize("batch_first", [False, True], ids=["time_major", "batch_major"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
@pytest.mark.parametrize("name", MODULES)
def test_packed_sequence(name: str, bidirectional: bool, dtype: type, batch_first: bool) -> None:
    seed = list(MODULES).index(name) * 8 + 4 * bidirectional + 2 * (dtype == np.float64) + batch_first
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    module = MODULES[name](bidirectional=bidirectional, batch_first=batch_first).to(
        getattr(torch, dtype.__name__)
    )
    D = 2 if bidirectional else 1
    lengths = rng.integers(1, T + 1, N)
    lengths[0] = T
    x = rng.standard_normal((N, T, I) if batch_first else (T, N, I)).astype(dtype)
    mask = np.arange(T)[None, :] < lengths[:, None]  # [N, T]
    states = [(rng.standard_normal((D, N, H)) * 0.5).astype(dtype) for _ in range(2 if name == "LSTM" else 1)]

    packed = pack_padded_sequence(
        torch.from_numpy(x), torch.from_numpy(lengths), batch_first, enforce_sorted=False
    )
    with torch.no_grad():
        hx = tuple(torch.from_numpy(s) for s in states)
        output, final = module(packed, hx if name == "LSTM" else hx[0])
    y, _ = pad_packed_sequence(output, batch_first=batch_first, total_length=T)
    y = y.numpy().reshape(*y.shape[:2], D, H)  # [T, N, D, H] or [N, T, D, H]
    expected = [y.transpose(0, 2, 1, 3) if not batch_first else y]  # ONNX Y
    expected += [s.numpy() for s in (final if name == "LSTM" else (final,))]  # [D, N, H]

    op_type, attributes, weights = convert_module(module)
    inputs = {"X": x, "mask": mask if batch_first else mask.T, **weights}
    for key, s in zip(("initial_h", "initial_c"), states):
        inputs[key] = s.transpose(1, 0, 2) if batch_first else s
    actual = REFERENCE[op_type](**inputs, **attributes, masked_output="zero")
    if batch_first:  # states come back [N, D, H]; torch's are [D, N, H] in both layouts
        actual = (actual[0], *(s.transpose(1, 0, 2) for s in actual[1:]))
    tolerance = 1e-5 if dtype == np.float32 else 1e-12
    assert_close(f"PyTorch {dtype.__name__}", actual, expected, rtol=tolerance, atol=tolerance)
