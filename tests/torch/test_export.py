"""``onnx_masked_rnn.torch.export``: one exported model (LSTM, GRU and RNN modules, dynamic batch
and time) run in onnxruntime at two batch sizes and two lengths against eager PyTorch, for every mask
kind and each strategy; the "function" graph holds one masked node per layer, the others none."""

from __future__ import annotations

import collections
import subprocess
import sys

import numpy as np
import onnx
import pytest
import toolkit
import torch
from oracles import assert_close

from onnx_masked_rnn import DOMAIN
from onnx_masked_rnn.testing import MASK_KINDS, make_mask
from onnx_masked_rnn.torch import STRATEGIES, MaskedGRU, MaskedLSTM, MaskedRNN, export

I, H = 4, 5
LAYERS = {"MaskedLSTM": 2, "MaskedGRU": 1, "MaskedRNN": 2}


class Stack(torch.nn.Module):
    """Batch-first LSTM (2 layers, bidirectional, given initial states) -> GRU ("carry", no bias)
    -> time-major RNN (relu, 2 layers, bidirectional): every op, both layouts, both modes."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = MaskedLSTM(I, H, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = MaskedGRU(2 * H, H, bias=False, batch_first=True, masked_output="carry")
        self.rnn = MaskedRNN(H, H, num_layers=2, nonlinearity="relu", bidirectional=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        y, (h, c) = self.lstm(x, (h0, c0), mask)
        y, g = self.gru(y, mask=mask)
        y, r = self.rnn(y.transpose(0, 1), mask=mask.t())  # time-major
        return y, h, c, g, r


def _inputs(N: int, T: int, kind: str, rng: np.random.Generator, dtype: torch.dtype) -> list[torch.Tensor]:
    return [
        torch.from_numpy(rng.standard_normal((N, T, I))).to(dtype),
        torch.from_numpy(make_mask(kind, T, N, rng, layout=1)),
        torch.from_numpy(rng.standard_normal((4, N, H)) * 0.5).to(dtype),
        torch.from_numpy(rng.standard_normal((4, N, H)) * 0.5).to(dtype),
    ]


def _export(strategy: str, dtype: torch.dtype, path: str) -> tuple[torch.nn.Module, onnx.ModelProto]:
    torch.manual_seed(0)
    model = Stack().to(dtype).eval()
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"x": {0: batch, 1: time}, "mask": {0: batch, 1: time}, "h0": {1: batch}, "c0": {1: batch}}
    args = tuple(_inputs(3, 6, "holes", np.random.default_rng(0), dtype))
    exported = export(model, args, path, dynamic_shapes=dynamic, strategy=strategy)
    assert onnx.load(path) == exported
    return model, exported


# onnxruntime has no float64 LSTM kernel, so the native strategy is tested in float32 only.
@pytest.mark.parametrize(
    "strategy,dtype",
    [(s, torch.float32) for s in STRATEGIES] + [("function", torch.float64)],
    ids=[*STRATEGIES, "function-float64"],
)
def test_exported_model_matches_eager(strategy: str, dtype: torch.dtype, tmp_path) -> None:
    model, exported = _export(strategy, dtype, str(tmp_path / "model.onnx"))
    counts = collections.Counter((n.domain, n.op_type) for n in exported.graph.node)
    masked = {op: counts[(DOMAIN, op)] for op in LAYERS}
    if strategy == "function":
        assert masked == LAYERS, counts
    else:
        assert not any(masked.values()) and {d for d, _ in counts} <= {"", "ai.onnx"}, counts
    x_shape = [d.dim_param or d.dim_value for d in exported.graph.input[0].type.tensor_type.shape.dim]
    assert isinstance(x_shape[0], str) and isinstance(x_shape[1], str) and x_shape[2] == I, x_shape

    session = toolkit.session(exported)
    names = [i.name for i in session.get_inputs()]
    rng = np.random.default_rng(1)
    tol = toolkit.FRAMEWORK_TOLERANCE[str(dtype).removeprefix("torch.")]
    for N, T in [(2, 7), (5, 3)]:
        for kind in MASK_KINDS:
            inputs = _inputs(N, T, kind, rng, dtype)
            with torch.no_grad():
                expected = [t.numpy() for t in model(*inputs)]
            actual = session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
            assert_close(
                f"exported ({strategy}, {dtype}) in onnxruntime vs eager",
                actual,
                expected,
                rtol=tol,
                atol=tol,
            )


def test_translations_alone_in_a_fresh_process() -> None:
    """``torch.onnx.export(..., custom_translation_table=TRANSLATIONS)`` works without
    ``export``: the translations register the schemas themselves."""
    code = """
import numpy as np, onnxruntime as ort, torch
import onnx_masked_rnn
from onnx_masked_rnn.torch import TRANSLATIONS, MaskedRNN
model, x = MaskedRNN(3, 4).eval(), torch.randn(5, 2, 3)
program = torch.onnx.export(model, (x,), dynamo=True, custom_translation_table=TRANSLATIONS, verbose=False)
proto = onnx_masked_rnn.attach_functions(program.model_proto)
session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
(y, _) = session.run(None, {"input": x.numpy()})
np.testing.assert_allclose(y, model(x)[0].detach().numpy(), rtol=1e-5, atol=1e-6)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
