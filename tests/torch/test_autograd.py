"""Double backward through the custom ops and modules: ``gradgradcheck`` in float64 on holed masks,
and a gradient penalty against PyTorch's own modules on packed sequences (right padding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oracles import assert_close
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.testing import random_inputs
from onnx_masked_rnn.torch import OPS, MaskedGRU, MaskedLSTM, MaskedRNN

T, N, I, H = 4, 3, 2, 2
# [N, T] (layout 1): holes inside rows, a row that starts masked, a row that ends masked.
HOLED = torch.tensor([[1, 0, 1, 1], [0, 1, 0, 1], [1, 1, 1, 0]], dtype=torch.bool)
CASES = {
    "MaskedLSTM": {"direction": "bidirectional", "clip": 5.0},  # with peepholes P
    "MaskedGRU": {"direction": "bidirectional", "linear_before_reset": 1},
    "MaskedRNN": {"direction": "reverse", "activations": ["Tanh"]},
}


@pytest.mark.parametrize("masked_output", ["zero", "carry"])
@pytest.mark.parametrize("op_type", list(CASES))
def test_gradgradcheck(op_type: str, masked_output: str) -> None:
    """Second derivatives of every output with respect to every float input (and to the incoming
    gradients) equal finite differences of the first: ``gradgradcheck``, float64, holed mask."""
    attributes = dict(CASES[op_type], masked_output=masked_output, hidden_size=H, layout=1)
    attrs = parse_attributes(op_type, **attributes)
    rng = np.random.default_rng(len(op_type) + len(masked_output))
    inputs = random_inputs(
        attrs, T, N, I, H, rng=rng, dtype=np.float64, present=("B", "initial_h", "initial_c", "P")
    )
    names = list(inputs)
    tensors = tuple(torch.from_numpy(inputs[n]).requires_grad_() for n in names)
    op = OPS[op_type]

    def f(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return op(**dict(zip(names, args)), mask=HOLED, **attributes)

    assert torch.autograd.gradgradcheck(f, tensors, eps=1e-6, atol=1e-6, rtol=1e-5, fast_mode=True)


def test_one_tensor_as_two_inputs() -> None:
    """A tensor passed as both ``initial_h`` and ``initial_c`` (positionally, the trailing inputs
    omitted) gets the sum of the two inputs' gradients, with and without ``create_graph``, and
    its second derivatives pass ``gradgradcheck``."""
    attrs = parse_attributes("MaskedLSTM", hidden_size=H)
    inputs = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(3), dtype=np.float64, present=("B",))
    X, W, R, B = (torch.from_numpy(inputs[n]).requires_grad_() for n in ("X", "W", "R", "B"))
    state = torch.randn(1, N, H, dtype=torch.float64, requires_grad=True)

    def f(X: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return OPS["MaskedLSTM"](X, W, R, B, h, c, hidden_size=H)

    def total(*args: torch.Tensor) -> torch.Tensor:
        return sum((o * o).sum() for o in f(*args))

    h, c = state.detach().clone().requires_grad_(), state.detach().clone().requires_grad_()
    expected = sum(torch.autograd.grad(total(X, h, c), (h, c)))
    for create_graph in (False, True):
        (actual,) = torch.autograd.grad(total(X, state, state), state, create_graph=create_graph)
        assert actual.requires_grad == create_graph
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradgradcheck(
        lambda X, s: f(X, s, s), (X, state), eps=1e-6, atol=1e-6, rtol=1e-5, fast_mode=True
    )


@pytest.mark.parametrize("cls", [MaskedLSTM, MaskedGRU, MaskedRNN], ids=lambda c: c.__name__)
def test_gradient_penalty_equals_packed_sequence(cls: type) -> None:
    """A gradient penalty (the gradient of the output with respect to the input, taken with
    ``create_graph=True``, in the loss) gives the parameter, input and initial-state gradients
    of the torch module on the packed sequence: two layers, bidirectional, float64."""
    torch.manual_seed(11)
    module = cls.torch_class(I, H, num_layers=2, bidirectional=True, batch_first=True).double()
    masked = cls.from_module(module)
    lengths = torch.tensor([4, 1, 3])
    mask = torch.arange(T)[None, :] < lengths[:, None]
    x = torch.randn(N, T, I, dtype=torch.float64)
    h0 = torch.randn(4, N, H, dtype=torch.float64) * 0.5
    results = []
    for net, packed in ((module, True), (masked, False)):
        x_leaf, h_leaf = x.clone().requires_grad_(), h0.clone().requires_grad_()
        hx = (h_leaf, h_leaf * 0.5) if cls is MaskedLSTM else h_leaf
        if packed:
            out, state = net(
                pack_padded_sequence(x_leaf, lengths, batch_first=True, enforce_sorted=False), hx
            )
            out, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
        else:
            out, state = net(x_leaf, hx, mask)
        h_n = state[0] if isinstance(state, tuple) else state
        (g,) = torch.autograd.grad(out.square().sum() + h_n.square().sum(), x_leaf, create_graph=True)
        assert g.requires_grad
        loss = out.sum() + 10 * g.square().sum()
        loss.backward()
        results.append([g.detach(), x_leaf.grad, h_leaf.grad] + [p.grad for p in net.parameters()])
    assert_close(
        f"nn.{cls.torch_class.__name__} packed gradient penalty",
        [t.numpy() for t in results[1]],
        [t.numpy() for t in results[0]],
        rtol=1e-10,
        atol=1e-12,
    )
