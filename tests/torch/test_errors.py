"""Bad input to the torch modules, ops and export: a clear error naming what is wrong."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from onnx_masked_rnn.torch import MaskedGRU, MaskedLSTM, MaskedRNN, export, masked_gru, masked_lstm

T, N, I, H = 5, 3, 2, 4


def test_mask_dtype() -> None:
    with pytest.raises(
        ValueError, match=r"mask must be a bool tensor, got torch.float32 \(use mask.bool\(\)"
    ):
        MaskedLSTM(I, H)(torch.randn(T, N, I), mask=torch.ones(T, N))


@pytest.mark.parametrize("batch_first", [False, True])
def test_mask_shape(batch_first: bool) -> None:
    x = torch.randn((N, T, I) if batch_first else (T, N, I))
    wrong = torch.ones((T, N) if batch_first else (N, T), dtype=torch.bool)  # the other layout's
    expected = r"\[N, T\] \(batch_first=True\)" if batch_first else r"\[T, N\] \(batch_first=False\)"
    with pytest.raises(ValueError, match=f"mask must have the shape of input's first two axes {expected}"):
        MaskedGRU(I, H, batch_first=batch_first)(x, mask=wrong)


def test_mask_rank() -> None:
    with pytest.raises(ValueError, match="mask must have the shape"):
        MaskedRNN(I, H)(torch.randn(T, N, I), mask=torch.ones(T, N, 1, dtype=torch.bool))


def test_proj_size_refused() -> None:
    with pytest.raises(ValueError, match="does not support proj_size=2"):
        MaskedLSTM(I, H, proj_size=2)
    with pytest.raises(ValueError, match="does not support proj_size=2"):
        MaskedLSTM.from_module(nn.LSTM(I, H, proj_size=2))


def test_from_module_wrong_class() -> None:
    with pytest.raises(TypeError, match=r"MaskedGRU.from_module takes an nn.GRU, got LSTM"):
        MaskedGRU.from_module(nn.LSTM(I, H))


@pytest.mark.parametrize("mode", ["state", "carry_on", ""])
def test_masked_output_values(mode: str) -> None:
    """Contract v2: "zero" and "carry" only ("state" was removed)."""
    with pytest.raises(ValueError, match="attribute 'masked_output' must be one of"):
        MaskedLSTM(I, H, masked_output=mode)


def test_packed_sequence_with_mask() -> None:
    packed = pack_padded_sequence(torch.randn(T, N, I), torch.tensor([5, 3, 2]))
    with pytest.raises(ValueError, match=r"either a PackedSequence \(its lengths are the mask\) or a mask"):
        MaskedLSTM(I, H)(packed, mask=torch.ones(T, N, dtype=torch.bool))


def test_input_rank() -> None:
    with pytest.raises(ValueError, match=r"input must have 3 dimensions \(2 unbatched\), got shape \[5\]"):
        MaskedRNN(I, H)(torch.randn(T))


def test_hidden_state_shape() -> None:
    """torch's own message (the module runs nn.LSTM's check_forward_args)."""
    with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(1, 3, 4\), got \[2, 3, 4\]"):
        MaskedLSTM(I, H)(torch.randn(T, N, I), (torch.zeros(2, N, H), torch.zeros(2, N, H)))


def test_input_size() -> None:
    with pytest.raises(
        RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 2, got 3"
    ):
        MaskedGRU(I, H)(torch.randn(T, N, 3))


def _lstm_inputs() -> tuple[torch.Tensor, ...]:
    return torch.randn(T, N, I), torch.randn(1, 4 * H, I), torch.randn(1, 4 * H, H)


def test_op_attribute_errors() -> None:
    X, W, R = _lstm_inputs()
    with pytest.raises(ValueError, match="attribute 'direction' must be one of"):
        masked_lstm(X, W, R, direction="backward")
    with pytest.raises(ValueError, match="attribute 'activations' has unknown function 'Swish'"):
        masked_lstm(X, W, R, activations=["Sigmoid", "Swish", "Tanh"])
    with pytest.raises(ValueError, match="attribute 'activations' must list 3 functions"):
        masked_lstm(X, W, R, activations=["Sigmoid"])
    with pytest.raises(ValueError, match="attribute 'clip' must be a positive number"):
        masked_lstm(X, W, R, clip=-1.0)
    with pytest.raises(ValueError, match=r"attribute 'layout' must be one of \[0, 1\]"):
        masked_lstm(X, W, R, layout=2)
    with pytest.raises(ValueError, match="attribute 'masked_output' must be one of"):
        masked_lstm(X, W, R, masked_output="state")


def test_op_input_errors() -> None:
    X, W, R = _lstm_inputs()
    with pytest.raises(ValueError, match="input 'mask' must be a bool tensor, got torch.int64"):
        masked_lstm(X, W, R, mask=torch.ones(T, N, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"input 'mask' must have the shape of the first two axes of X"):
        masked_lstm(X, W, R, mask=torch.ones(N, T, dtype=torch.bool))
    with pytest.raises(
        ValueError, match=r"input 'W' must have the dtype of X \(torch.float32\), got torch.float64"
    ):
        masked_lstm(X, W.double(), R)
    with pytest.raises(ValueError, match="input 'R' has size 4 on axis 2, expected 3 \\(hidden_size\\)"):
        masked_lstm(X, W, R, hidden_size=3)
    with pytest.raises(ValueError, match="input 'X' must be a floating-point tensor, got torch.int64"):
        masked_gru(X.long(), W[:, : 3 * H], R[:, : 3 * H])


def test_op_errors_while_tracing() -> None:
    """The fake implementation validates too: a bad call fails at export with the same message."""

    class Bad(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return masked_lstm(x, torch.ones(1, 4 * H, I), torch.ones(1, 4 * H, H), hidden_size=3)[0]

    with pytest.raises(Exception, match="input 'R' has size 4 on axis 2, expected 3"):
        torch.export.export(Bad(), (torch.randn(T, N, I),))


def test_export_strategy() -> None:
    with pytest.raises(
        ValueError, match=r"strategy must be one of \['function', 'scan', 'native'\], got 'loop'"
    ):
        export(MaskedRNN(I, H), (torch.randn(T, N, I),), strategy="loop")


def test_export_path_that_cannot_be_written(tmp_path) -> None:
    """The file is written whole or not at all, like every file the package writes: a path under a
    regular file is an ``OSError`` naming it, and nothing is left behind."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "model.onnx"
    with pytest.raises(OSError, match="cannot write here") as error:
        export(MaskedRNN(I, H), (torch.randn(T, N, I),), target)
    assert error.value.filename == str(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
