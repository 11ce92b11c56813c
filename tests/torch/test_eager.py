"""``onnx_masked_rnn.torch`` in eager mode against two independent oracles.

- PyTorch's own ``nn.LSTM``/``nn.GRU``/``nn.RNN`` on ``pack_padded_sequence``: a right-padded mask
  is a packed sequence, and "zero" mode must equal it (outputs and final states), for every layer
  count, direction, layout and dtype, with and without an initial state.
- The numpy reference on masks with holes, both modes, every attribute the ops take.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch
from oracles import REFERENCE, assert_close
from toolkit import FRAMEWORK_TOLERANCE
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.testing import MASK_KINDS, random_inputs
from onnx_masked_rnn.torch import OPS, MaskedGRU, MaskedLSTM, MaskedRNN

T, N, I, H = 6, 4, 3, 5
LENGTHS = torch.tensor([6, 2, 4, 1])  # unsorted, one full row; torch refuses a length of 0
CLASSES = {
    "LSTM": (MaskedLSTM, {}),
    "GRU": (MaskedGRU, {}),
    "RNN-tanh": (MaskedRNN, {"nonlinearity": "tanh"}),
    "RNN-relu": (MaskedRNN, {"nonlinearity": "relu"}),
}


def _random_hx(cls: type, num_states: int, dtype: torch.dtype) -> object:
    states = tuple(
        torch.randn(num_states, N, H, dtype=dtype) * 0.5 for _ in range(2 if cls is MaskedLSTM else 1)
    )
    return states if cls is MaskedLSTM else states[0]


def _flat(output: object, state: object) -> list[np.ndarray]:
    states = state if isinstance(state, tuple) else (state,)
    return [t.detach().numpy() for t in (output, *states)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True], ids=["time_major", "batch_first"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
@pytest.mark.parametrize("name", CLASSES)
def test_equals_packed_sequence(
    name: str, bidirectional: bool, num_layers: int, batch_first: bool, dtype: torch.dtype
) -> None:
    """Right-padded mask, "zero" mode == torch module on a packed sequence, with and without hx."""
    cls, kwargs = CLASSES[name]
    torch.manual_seed(list(CLASSES).index(name) * 8 + 4 * bidirectional + 2 * (num_layers - 1) + batch_first)
    module = cls.torch_class(
        I, H, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first, **kwargs
    )
    module = module.to(dtype)
    masked = cls.from_module(module)
    x = torch.randn((N, T, I) if batch_first else (T, N, I), dtype=dtype)
    mask = torch.arange(T)[None, :] < LENGTHS[:, None]  # [N, T]
    if not batch_first:
        mask = mask.t()
    for hx in (None, _random_hx(cls, num_layers * (2 if bidirectional else 1), dtype)):
        with torch.no_grad():
            packed = pack_padded_sequence(x, LENGTHS, batch_first, enforce_sorted=False)
            expected_output, expected_state = module(packed, hx)
            expected_output, _ = pad_packed_sequence(expected_output, batch_first, total_length=T)
            output, state = masked(x, hx, mask)
        tol = FRAMEWORK_TOLERANCE[str(dtype).removeprefix("torch.")]
        assert_close(
            f"nn.{name} packed (torch modules)",
            _flat(output, state),
            _flat(expected_output, expected_state),
            rtol=tol,
            atol=tol,
        )


@pytest.mark.parametrize("name", CLASSES)
def test_without_bias_equals_packed_sequence(name: str) -> None:
    """``bias=False`` (the op gets no ``B``) == the torch module on a packed sequence."""
    cls, kwargs = CLASSES[name]
    torch.manual_seed(9)
    module = cls.torch_class(I, H, num_layers=2, bias=False, bidirectional=True, **kwargs).double()
    x = torch.randn(T, N, I, dtype=torch.float64)
    with torch.no_grad():
        expected_output, expected_state = module(pack_padded_sequence(x, LENGTHS, enforce_sorted=False))
        expected_output, _ = pad_packed_sequence(expected_output, total_length=T)
        output, state = cls.from_module(module)(x, mask=(torch.arange(T)[:, None] < LENGTHS[None, :]))
    assert_close(
        f"nn.{name} packed (torch modules)",
        _flat(output, state),
        _flat(expected_output, expected_state),
        rtol=1e-12,
        atol=1e-12,
    )


@pytest.mark.parametrize("name", CLASSES)
def test_packed_sequence_input(name: str) -> None:
    """A PackedSequence in (with hx) gives a PackedSequence out, equal to the torch module's
    (data, batch_sizes, row order) and the same final state."""
    cls, kwargs = CLASSES[name]
    torch.manual_seed(1)
    module = cls.torch_class(I, H, num_layers=2, bidirectional=True, **kwargs).double()
    masked = cls.from_module(module)
    packed = pack_padded_sequence(torch.randn(T, N, I, dtype=torch.float64), LENGTHS, enforce_sorted=False)
    hx = _random_hx(cls, 4, torch.float64)  # in the batch's row order, as torch takes it
    with torch.no_grad():
        expected, expected_state = module(packed, hx)
        actual, state = masked(packed, hx)
    assert torch.equal(actual.batch_sizes, expected.batch_sizes)
    assert torch.equal(actual.sorted_indices, expected.sorted_indices)
    assert_close(
        f"nn.{name} packed (torch modules)",
        _flat(actual.data, state),
        _flat(expected.data, expected_state),
        rtol=1e-12,
        atol=1e-12,
    )


def test_unbatched_input() -> None:
    """A 2-D input (no batch axis) with a 1-D mask is row 0 of the batched call."""
    torch.manual_seed(2)
    masked = MaskedLSTM(I, H, num_layers=2, masked_output="carry").double()
    x = torch.randn(T, N, I, dtype=torch.float64)
    mask = torch.rand(T, N) > 0.4
    hx = _random_hx(MaskedLSTM, 2, torch.float64)
    with torch.no_grad():
        output, (h, c) = masked(x, hx, mask)
        output0, (h0, c0) = masked(x[:, 0], (hx[0][:, 0], hx[1][:, 0]), mask[:, 0])
    torch.testing.assert_close(output0, output[:, 0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(h0, h[:, 0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c0, c[:, 0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", CLASSES)
def test_state_dict_and_parameters_are_torchs(name: str) -> None:
    """Same parameter names and state dict as the torch module; a torch state dict loads as is."""
    cls, kwargs = CLASSES[name]
    module = cls.torch_class(I, H, num_layers=2, bidirectional=True, bias=True, **kwargs)
    masked = cls(I, H, num_layers=2, bidirectional=True, **kwargs)
    assert [n for n, _ in masked.named_parameters()] == [n for n, _ in module.named_parameters()]
    masked.load_state_dict(module.state_dict())
    for key, value in module.state_dict().items():
        assert torch.equal(masked.state_dict()[key], value), key
    assert isinstance(masked, cls.torch_class)


def test_layers_match_their_one_layer_ops() -> None:
    """A module is its op applied layer by layer, weights converted to ONNX order."""
    torch.manual_seed(3)
    masked = MaskedGRU(I, H, num_layers=2, bidirectional=True, masked_output="carry").double()
    x = torch.randn(T, N, I, dtype=torch.float64)
    mask = torch.rand(T, N) > 0.4
    with torch.no_grad():
        output, h_n = masked(x, mask=mask)
        inputs = x
        for layer in range(2):
            W, R, B = masked.onnx_weights(layer)
            Y, Y_h = REFERENCE["MaskedGRU"](
                inputs.numpy(), W.numpy(), R.numpy(), B.numpy(), mask=mask.numpy(), **masked.onnx_attributes()
            )
            inputs = torch.from_numpy(Y.transpose(0, 2, 1, 3).reshape(T, N, 2 * H))
            torch.testing.assert_close(
                h_n[2 * layer : 2 * layer + 2], torch.from_numpy(Y_h), rtol=1e-12, atol=1e-12
            )
    torch.testing.assert_close(output, inputs, rtol=1e-12, atol=1e-12)


# The ops against the numpy reference: every attribute, both modes, holed masks.
CONFIGS = {
    "MaskedLSTM": [
        {},
        {"input_forget": 1, "clip": 1.5},
        {
            "activations": ["HardSigmoid", "LeakyRelu", "Softplus"],
            "activation_alpha": [0.3, 0.2],
            "activation_beta": [0.4],
        },
    ],
    "MaskedGRU": [
        {"linear_before_reset": 0},
        {"linear_before_reset": 1, "clip": 2.0},
        {"activations": ["Sigmoid", "Elu"], "activation_alpha": [0.7]},
    ],
    "MaskedRNN": [
        {},
        {"activations": ["Relu"], "clip": 3.0},
        {"activations": ["ScaledTanh"], "activation_alpha": [1.2], "activation_beta": [0.8]},
    ],
}
CASES = [(op, i) for op, configs in CONFIGS.items() for i in range(len(configs))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("masked_output", ["zero", "carry"])
@pytest.mark.parametrize("op_type,config", CASES, ids=[f"{op}-{i}" for op, i in CASES])
def test_ops_equal_reference(op_type: str, config: int, masked_output: str, dtype: type) -> None:
    """Each op == the numpy reference, both layouts and all directions, every mask kind."""
    rng = np.random.default_rng(
        CASES.index((op_type, config)) * 4 + 2 * (dtype == np.float64) + (masked_output == "zero")
    )
    extra = dict(CONFIGS[op_type][config])
    for direction, layout in itertools.product(("forward", "reverse", "bidirectional"), (0, 1)):
        attributes = dict(
            extra, direction=direction, layout=layout, masked_output=masked_output, hidden_size=H
        )
        if "activations" in extra and direction == "bidirectional":
            attributes["activations"] = extra["activations"] * 2
            for key in ("activation_alpha", "activation_beta"):
                if key in extra:
                    attributes[key] = extra[key] * 2
        attrs = parse_attributes(op_type, **attributes)
        for kind in MASK_KINDS:
            inputs = random_inputs(attrs, T, N, I, H, rng=rng, dtype=dtype, mask_kind=kind)
            expected = REFERENCE[op_type](**inputs, **attributes)
            actual = OPS[op_type](**{k: torch.from_numpy(v) for k, v in inputs.items()}, **attributes)
            tol = 2e-5 if dtype == np.float32 else 1e-12
            assert_close("reference (torch ops)", [a.numpy() for a in actual], expected, rtol=tol, atol=tol)


def test_nan_at_masked_steps_reaches_nothing() -> None:
    """NaN in X at masked steps changes no output and no gradient."""
    torch.manual_seed(4)
    masked = MaskedLSTM(I, H, bidirectional=True, masked_output="carry").double()
    x = torch.randn(T, N, I, dtype=torch.float64)
    mask = torch.rand(T, N) > 0.4
    poisoned = x.masked_fill(~mask.unsqueeze(-1), float("nan"))
    outputs = []
    for inputs in (x, poisoned):
        masked.zero_grad()
        output, (h, c) = masked(inputs, mask=mask)
        (output.sum() + h.sum() + c.sum()).backward()
        outputs.append(
            [output.detach(), h.detach(), c.detach()] + [p.grad.clone() for p in masked.parameters()]
        )
    for clean, dirty in zip(*outputs):
        assert torch.isfinite(dirty).all()
        torch.testing.assert_close(dirty, clean, rtol=0, atol=0)


EMPTY = [(0, N), (T, 0), (0, 0)]  # (seq_length, batch_size)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op_type", list(OPS))
def test_ops_empty_sequence_or_batch_equal_reference(op_type: str, layout: int) -> None:
    """``seq_length`` 0 (empty ``Y``, states = initial states), ``batch_size`` 0, or both: each
    op == the numpy reference, bidirectional, in both layouts."""
    attributes = {"direction": "bidirectional", "hidden_size": H, "layout": layout}
    attrs = parse_attributes(op_type, **attributes)
    for steps, batch in EMPTY:
        inputs = random_inputs(
            attrs,
            steps,
            batch,
            I,
            H,
            rng=np.random.default_rng(steps + batch),
            dtype=np.float64,
            present=("B", "initial_h", "initial_c", "P"),
        )
        inputs["mask"] = np.ones((batch, steps) if layout else (steps, batch), dtype=bool)
        expected = REFERENCE[op_type](**inputs, **attributes)
        actual = OPS[op_type](**{k: torch.from_numpy(v) for k, v in inputs.items()}, **attributes)
        assert_close("reference (torch ops)", [a.numpy() for a in actual], expected, rtol=0, atol=0)


@pytest.mark.parametrize("batch_first", [False, True], ids=["time_major", "batch_first"])
@pytest.mark.parametrize("name", CLASSES)
def test_modules_empty_sequence(name: str, batch_first: bool) -> None:
    """A module on ``seq_length`` 0 (which the torch module refuses) returns an empty output and
    ``hx`` (zeros without it) as final states; the states' gradient reaches ``hx`` unchanged.
    ``batch_size`` 0 gives empty outputs and states."""
    cls, kwargs = CLASSES[name]
    torch.manual_seed(10)
    masked = cls(I, H, num_layers=2, bidirectional=True, batch_first=batch_first, **kwargs).double()
    x = torch.randn((N, 0, I) if batch_first else (0, N, I), dtype=torch.float64)
    mask = torch.ones(x.shape[:2], dtype=torch.bool)
    with pytest.raises(RuntimeError, match="sequence length"):
        cls.torch_class(I, H, batch_first=batch_first, **kwargs).double()(x)
    hx = _random_hx(cls, 4, torch.float64)
    leaves = hx if isinstance(hx, tuple) else (hx,)
    for leaf in leaves:
        leaf.requires_grad_()
    output, state = masked(x, hx, mask)
    assert output.shape == x.shape[:2] + (2 * H,)
    states = state if isinstance(state, tuple) else (state,)
    for s, h in zip(states, leaves):
        assert torch.equal(s, h)
    weights = [torch.randn_like(s) for s in states]
    sum((s * w).sum() for s, w in zip(states, weights)).backward()
    for leaf, w in zip(leaves, weights):
        assert torch.equal(leaf.grad, w)
    output, state = masked(x, mask=mask)
    assert not any(s.any() for s in (state if isinstance(state, tuple) else (state,)))
    output, state = masked(torch.randn((0, T, I) if batch_first else (T, 0, I), dtype=torch.float64))
    assert output.shape == ((0, T, 2 * H) if batch_first else (T, 0, 2 * H))
    states = state if isinstance(state, tuple) else (state,)
    assert all(s.shape == (4, 0, H) for s in states)


def test_unbatched_empty_sequence() -> None:
    """A 2-D input of length 0 with a 1-D mask gives an empty output and the initial state."""
    masked = MaskedGRU(I, H, num_layers=2).double()
    h0 = torch.randn(2, H, dtype=torch.float64)
    output, h_n = masked(torch.randn(0, I, dtype=torch.float64), h0, torch.ones(0, dtype=torch.bool))
    assert output.shape == (0, H)
    assert torch.equal(h_n, h0)


@pytest.mark.parametrize("cls", [MaskedLSTM, MaskedGRU, MaskedRNN], ids=lambda c: c.__name__)
def test_jit_script_names_the_limitation(cls: type) -> None:
    """``torch.jit.script`` of a module, or of a model holding one, raises an error that names
    the class, TorchScript, and what to use instead (``torch.jit.script`` of the torch module
    works: the masked modules are not TorchScript)."""
    torch.jit.script(cls.torch_class(I, H))

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = cls(I, H)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.rnn(x)[0]

    for target in (cls(I, H), Model()):
        with pytest.raises(RuntimeError, match=rf"{cls.__name__} does not support torch.jit.script") as info:
            torch.jit.script(target)
        assert "torch.export" in str(info.value) and "onnx_masked_rnn.torch.export" in str(info.value)


def test_import_onnx_masked_rnn_does_not_import_torch() -> None:
    code = "import sys, onnx_masked_rnn; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_torch_module_class_is_the_base() -> None:
    assert issubclass(MaskedLSTM, nn.LSTM) and issubclass(MaskedGRU, nn.GRU) and issubclass(MaskedRNN, nn.RNN)
