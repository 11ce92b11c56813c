"""Gradients of the custom ops and modules: finite differences, PyTorch's packed sequences, and a
short training run on a masked task."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracles import assert_close
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.testing import random_inputs
from onnx_masked_rnn.torch import OPS, MaskedGRU, MaskedLSTM, MaskedRNN

T, N, I, H = 4, 3, 2, 3
ATTRIBUTES = {
    "MaskedLSTM": {"direction": "bidirectional", "clip": 5.0},
    "MaskedGRU": {"direction": "bidirectional", "linear_before_reset": 1},
    "MaskedRNN": {"direction": "reverse", "activations": ["Tanh"]},
}


def _op_case(op_type: str, masked_output: str, seed: int) -> tuple[list[str], list[torch.Tensor], dict]:
    attributes = dict(ATTRIBUTES[op_type], masked_output=masked_output, hidden_size=H, layout=1)
    attrs = parse_attributes(op_type, **attributes)
    inputs = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(seed), dtype=np.float64)
    names = [n for n in inputs if n != "mask"]
    tensors = [torch.from_numpy(inputs[n]).requires_grad_() for n in names]
    attributes["mask"] = torch.from_numpy(inputs["mask"])
    return names, tensors, attributes


@pytest.mark.parametrize("masked_output", ["zero", "carry"])
@pytest.mark.parametrize("op_type", list(OPS))
def test_gradcheck(op_type: str, masked_output: str) -> None:
    """``torch.autograd.gradcheck`` (fast mode) on every float input, holed mask, float64; and
    the gradient of a random projection of all outputs against central differences."""
    names, tensors, attributes = _op_case(op_type, masked_output, seed=len(op_type) + len(masked_output))
    op = OPS[op_type]

    def f(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return op(**dict(zip(names, args)), **attributes)

    assert torch.autograd.gradcheck(f, tuple(tensors), eps=1e-6, atol=1e-7, rtol=1e-6, fast_mode=True)

    # The recorded number: directional central differences of a random projection of all outputs.
    weights = [torch.randn_like(o) for o in f(*tensors)]

    def loss(*args: torch.Tensor) -> torch.Tensor:
        return sum((o * w).sum() for o, w in zip(f(*args), weights))

    analytic = torch.autograd.grad(loss(*tensors), tensors)
    eps = 1e-6
    for _ in range(4):
        directions = [torch.randn_like(t) for t in tensors]
        with torch.no_grad():
            plus = loss(*(t + eps * v for t, v in zip(tensors, directions)))
            minus = loss(*(t - eps * v for t, v in zip(tensors, directions)))
        numeric = (plus - minus) / (2 * eps)
        predicted = sum((g * v).sum() for g, v in zip(analytic, directions))
        assert_close(
            "finite differences (torch ops)", [predicted.numpy()], [numeric.numpy()], rtol=1e-6, atol=1e-7
        )


@pytest.mark.parametrize("cls", [MaskedLSTM, MaskedGRU, MaskedRNN], ids=lambda c: c.__name__)
def test_gradients_equal_packed_sequence(cls: type) -> None:
    """Parameter and input gradients of "zero" mode on a right-padded mask == the torch
    module's on the packed sequence (two layers, bidirectional)."""
    torch.manual_seed(5)
    module = cls.torch_class(I, H, num_layers=2, bidirectional=True, batch_first=True).double()
    masked = cls.from_module(module)
    lengths = torch.tensor([4, 1, 3])
    x = torch.randn(N, T, I, dtype=torch.float64)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    target = torch.randn(N, T, 2 * H, dtype=torch.float64)
    grads = []
    for net, packed in ((module, True), (masked, False)):
        x_leaf = x.clone().requires_grad_()
        if packed:
            out, state = net(pack_padded_sequence(x_leaf, lengths, batch_first=True, enforce_sorted=False))
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
        else:
            out, state = net(x_leaf, mask=mask)
        h = state[0] if isinstance(state, tuple) else state
        ((out - target) ** 2).sum().add(h.square().sum()).backward()
        grads.append([x_leaf.grad.numpy()] + [p.grad.numpy() for p in net.parameters()])
    assert_close(
        f"nn.{cls.torch_class.__name__} packed gradients", grads[1], grads[0], rtol=1e-10, atol=1e-12
    )


def test_training_decreases_loss() -> None:
    """A masked task no packed sequence can express: predict, at every unmasked step, the sum of
    the unmasked inputs so far (holes anywhere). Thirty Adam steps cut the loss by more than half."""
    torch.manual_seed(6)
    model = MaskedLSTM(1, 16, batch_first=True, masked_output="carry")
    head = torch.nn.Linear(16, 1)
    optimizer = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=0.03)
    x = torch.randn(32, 10, 1)
    mask = torch.rand(32, 10) > 0.3
    target = torch.cumsum(x.squeeze(-1) * mask, dim=1)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        output, _ = model(x, mask=mask)
        loss = ((head(output).squeeze(-1) - target) ** 2)[mask].mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_dropout_between_layers_only_in_training() -> None:
    """``dropout`` acts between layers in training and not in eval, as in torch."""
    torch.manual_seed(7)
    model = MaskedGRU(I, H, num_layers=2, dropout=0.5)
    x = torch.randn(T, N, I)
    model.eval()
    first, _ = model(x)
    second, _ = model(x)
    assert torch.equal(first, second)
    model.train()
    third, _ = model(x)
    assert not torch.equal(first, third)


@pytest.mark.parametrize("batch_first", [False, True], ids=["time_major", "batch_first"])
@pytest.mark.parametrize("cls", [MaskedLSTM, MaskedGRU, MaskedRNN], ids=lambda c: c.__name__)
def test_dropout_placement_equals_torch(cls: type, batch_first: bool) -> None:
    """In training, dropout acts on the output of every layer but the last, as ``nn.LSTM``'s
    documentation says: the module equals one-layer torch modules with ``F.dropout`` between them,
    drawn from the same seed (three layers, bidirectional), and, time-major, the torch module
    itself (its CPU kernel draws the same masks). No output of the last layer is dropped."""
    torch.manual_seed(8)
    p, layers = 0.5, 3
    module = cls.torch_class(
        4, 6, num_layers=layers, dropout=p, bidirectional=True, batch_first=batch_first
    ).double()
    masked = cls.from_module(module).train()
    singles = []
    for layer in range(layers):
        single = cls.torch_class(4 if layer == 0 else 12, 6, bidirectional=True, batch_first=batch_first)
        single.load_state_dict(
            {k.replace(f"_l{layer}", "_l0"): v for k, v in module.state_dict().items() if f"_l{layer}" in k}
        )
        singles.append(single.double())
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    torch.manual_seed(9)
    expected = x
    for layer, single in enumerate(singles):
        expected, _ = single(expected)
        if layer < layers - 1:
            # contiguous: dropout draws its mask in memory order; batch_first torch outputs are
            # transposed views
            expected = torch.nn.functional.dropout(expected.contiguous(), p, training=True)
    torch.manual_seed(9)
    actual, _ = masked(x)
    assert_close(
        "one-layer torch modules with dropout", [actual.detach()], [expected.detach()], rtol=1e-12, atol=1e-12
    )
    assert not (actual == 0).any()
    if not batch_first:
        torch.manual_seed(9)
        reference, _ = module.train()(x)
        assert_close(
            f"nn.{cls.torch_class.__name__} in training",
            [actual.detach()],
            [reference.detach()],
            rtol=1e-12,
            atol=1e-12,
        )
