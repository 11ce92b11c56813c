"""``MaskedLSTM``, ``MaskedGRU``, ``MaskedRNN``: ``nn.LSTM``/``nn.GRU``/``nn.RNN`` that take a mask.

Each is a subclass of its torch module with the same constructor, parameter names and
``state_dict`` (an ``nn.LSTM`` state dict loads unchanged), plus ``masked_output="zero"|"carry"``
and ``forward(input, hx=None, mask=None)``. ``mask`` is bool, ``[N, T]`` when ``batch_first`` else
``[T, N]`` (``[T]`` for an unbatched input); a false step leaves the state untouched and gives zeros
("zero", what packed sequences give) or the previous output ("carry") in ``output``. ``h_n``
(``c_n``) is each row's state after its last unmasked step.

Each layer converts its torch-layout weights to ONNX gate order with differentiable torch ops
(the exporter folds them into initializers) and calls its custom op once.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.torch import ops

__all__ = ["MaskedGRU", "MaskedLSTM", "MaskedRNN"]

Tensor = torch.Tensor


class _Masked:
    """What the three modules share: the torch module is the second base class."""

    op_type: ClassVar[str]
    torch_class: ClassVar[type[nn.RNNBase]]
    gate_order: ClassVar[tuple[int, ...]]  # the torch gate block of each ONNX gate, in ONNX order

    def _init_masked(self, masked_output: str) -> None:
        if getattr(self, "proj_size", 0):
            raise ValueError(
                f"{type(self).__name__} does not support proj_size={self.proj_size}: ONNX LSTM has no "
                "projection (an LSTM with proj_size has no MaskedLSTM equivalent)"
            )
        parse_attributes(self.op_type, masked_output=masked_output)
        self.masked_output = masked_output

    @classmethod
    def from_module(cls, module: nn.RNNBase, *, masked_output: str = "zero") -> Any:
        """A masked module with ``module``'s configuration, parameters (copied), device, dtype
        and training mode."""
        if not isinstance(module, cls.torch_class):
            raise TypeError(
                f"{cls.__name__}.from_module takes an nn.{cls.torch_class.__name__}, got {module}"
            )
        if getattr(module, "proj_size", 0):
            raise ValueError(
                f"{cls.__name__} does not support proj_size={module.proj_size}: ONNX LSTM has none"
            )
        kwargs = dict(
            num_layers=module.num_layers,
            bias=module.bias,
            batch_first=module.batch_first,
            dropout=module.dropout,
            bidirectional=module.bidirectional,
        )
        if cls.torch_class is nn.RNN:
            kwargs["nonlinearity"] = module.nonlinearity
        first = next(module.parameters())
        masked = cls(
            module.input_size,
            module.hidden_size,
            **kwargs,
            masked_output=masked_output,
            device=first.device,
            dtype=first.dtype,
        )
        masked.load_state_dict(module.state_dict())
        return masked.train(module.training)

    def __prepare_scriptable__(self) -> Any:
        # torch.jit.script calls this on every submodule before compiling; without it the
        # compiler fails inside forward with an unrelated message.
        raise RuntimeError(
            f"{type(self).__name__} does not support torch.jit.script: TorchScript (deprecated by "
            "torch) cannot compile its forward, Python code around a custom op (mask or "
            "PackedSequence input, per-layer weight conversion). Use torch.export instead "
            "(onnx_masked_rnn.torch.export for ONNX)."
        )

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, masked_output={self.masked_output!r}"

    def onnx_attributes(self) -> dict[str, Any]:
        """The op's attributes for every layer (``layout`` follows ``batch_first``)."""
        attributes: dict[str, Any] = {
            "direction": "bidirectional" if self.bidirectional else "forward",
            "hidden_size": self.hidden_size,
            "layout": int(self.batch_first),
            "masked_output": self.masked_output,
        }
        if self.op_type == "MaskedGRU":
            attributes["linear_before_reset"] = 1  # torch applies the reset gate after R·h + Rb
        if self.op_type == "MaskedRNN":
            attributes["activations"] = [self.nonlinearity.capitalize()] * (2 if self.bidirectional else 1)
        return attributes

    def onnx_weights(self, layer: int) -> tuple[Tensor, Tensor, Tensor | None]:
        """Layer ``layer``'s ``(W, R, B)`` in ONNX layout and gate order (``B`` is ``None``
        without bias), computed from the parameters with differentiable ops."""
        suffixes = ("", "_reverse") if self.bidirectional else ("",)

        def onnx_order(name: str, suffix: str) -> Tensor:
            # Slices rather than chunk: the exporter's optimizer folds Slice + Concat of an
            # initializer into one initializer, but not a multi-output Split.
            w, H = getattr(self, f"{name}_l{layer}{suffix}"), self.hidden_size
            return torch.cat([w[k * H : (k + 1) * H] for k in self.gate_order])

        W = torch.stack([onnx_order("weight_ih", s) for s in suffixes])
        R = torch.stack([onnx_order("weight_hh", s) for s in suffixes])
        if not self.bias:
            return W, R, None
        B = torch.stack([torch.cat([onnx_order("bias_ih", s), onnx_order("bias_hh", s)]) for s in suffixes])
        return W, R, B

    def forward(self, input: Tensor | PackedSequence, hx: Any = None, mask: Tensor | None = None) -> Any:
        """``(output, h_n)``, or ``(output, (h_n, c_n))`` for LSTM, as the torch module returns
        them; ``mask`` as described in the module docstring. A ``PackedSequence`` input is
        taken as the mask of its lengths and gives a ``PackedSequence`` output."""
        if isinstance(input, PackedSequence):
            if mask is not None:
                raise ValueError(
                    "pass either a PackedSequence (its lengths are the mask) or a mask, not both"
                )
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"input must have 3 dimensions (2 unbatched), got shape {list(input.shape)}")
        batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)
            if mask is not None:
                mask = mask.unsqueeze(batch_dim)
            if hx is not None:
                hx = tuple(h.unsqueeze(1) for h in hx) if isinstance(hx, tuple) else hx.unsqueeze(1)
        self._check_mask(input, mask)
        if hx is None:
            self.check_input(input, None)
        else:
            self.check_forward_args(input, hx, None)
        output, states = self._run_layers(input, hx, mask)
        if not batched:
            output = output.squeeze(batch_dim)
            states = [s.squeeze(1) for s in states]
        return output, (states[0], states[1]) if self.op_type == "MaskedLSTM" else states[0]

    def _check_mask(self, input: Tensor, mask: Tensor | None) -> None:
        if mask is None:
            return
        if not isinstance(mask, Tensor) or mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor, got {getattr(mask, 'dtype', type(mask).__name__)}"
                " (use mask.bool() for a 0/1 mask)"
            )
        axes = "[N, T] (batch_first=True)" if self.batch_first else "[T, N] (batch_first=False)"
        if mask.dim() != 2 or mask.shape[0] != input.shape[0] or mask.shape[1] != input.shape[1]:
            raise ValueError(
                f"mask must have the shape of input's first two axes {axes} = {list(input.shape[:2])}, "
                f"got {list(mask.shape)}"
            )

    def _run_layers(self, input: Tensor, hx: Any, mask: Tensor | None) -> tuple[Tensor, list[Tensor]]:
        D = 2 if self.bidirectional else 1
        is_lstm = self.op_type == "MaskedLSTM"
        if hx is None:
            initial = None
        else:
            initial = list(hx) if is_lstm else [hx]  # each [L * D, N, H]
        op = ops.OPS[self.op_type]
        attributes = self.onnx_attributes()
        x = input
        finals: list[list[Tensor]] = [[] for _ in range(2 if is_lstm else 1)]
        for layer in range(self.num_layers):
            W, R, B = self.onnx_weights(layer)
            states: list[Tensor | None] = [None] * len(finals)
            if initial is not None:
                states = [s[layer * D : (layer + 1) * D] for s in initial]  # [D, N, H]
                if self.batch_first:
                    states = [s.transpose(0, 1) for s in states]  # [N, D, H] for layout 1
            if is_lstm:
                Y, *out_states = op(x, W, R, B, states[0], states[1], None, mask, **attributes)
            else:
                Y, *out_states = op(x, W, R, B, states[0], mask, **attributes)
            # ONNX Y is [N, T, D, H] (layout 1) or [T, D, N, H]: torch wants D*H last.
            x = Y.flatten(2) if self.batch_first else Y.permute(0, 2, 1, 3).flatten(2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = nn.functional.dropout(x, self.dropout, training=True)
            for acc, s in zip(finals, out_states):
                acc.append(s.transpose(0, 1) if self.batch_first else s)
        return x, [torch.cat(acc) for acc in finals]

    def _forward_packed(self, packed: PackedSequence, hx: Any) -> tuple[PackedSequence, Any]:
        padded, lengths = pad_packed_sequence(packed, batch_first=self.batch_first)
        steps = torch.arange(padded.shape[1 if self.batch_first else 0])
        mask = (steps[None, :] < lengths[:, None]).to(padded.device)  # [N, T]
        output, state = self.forward(padded, hx, mask if self.batch_first else mask.t())
        # Re-pack in the input's row order so data and batch_sizes equal torch's.
        order = packed.sorted_indices
        if order is not None:
            output = output.index_select(0 if self.batch_first else 1, order.to(output.device))
            lengths = lengths[order.cpu()]
        repacked = pack_padded_sequence(output, lengths, batch_first=self.batch_first, enforce_sorted=True)
        return PackedSequence(
            repacked.data, repacked.batch_sizes, packed.sorted_indices, packed.unsorted_indices
        ), state


class MaskedLSTM(_Masked, nn.LSTM):
    """``nn.LSTM`` with ``mask=`` in ``forward`` and ``masked_output``; one MaskedLSTM node per
    layer when exported. ``proj_size`` is refused (ONNX LSTM has no projection)."""

    op_type = "MaskedLSTM"
    torch_class = nn.LSTM
    gate_order = (0, 3, 1, 2)  # torch i, f, g, o -> ONNX i, o, f, c

    def __init__(self, *args: Any, masked_output: str = "zero", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_masked(masked_output)


class MaskedGRU(_Masked, nn.GRU):
    """``nn.GRU`` with ``mask=`` in ``forward`` and ``masked_output``; one MaskedGRU node
    (``linear_before_reset=1``, torch's GRU) per layer when exported."""

    op_type = "MaskedGRU"
    torch_class = nn.GRU
    gate_order = (1, 0, 2)  # torch r, z, n -> ONNX z, r, h

    def __init__(self, *args: Any, masked_output: str = "zero", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_masked(masked_output)


class MaskedRNN(_Masked, nn.RNN):
    """``nn.RNN`` (``nonlinearity`` tanh or relu) with ``mask=`` in ``forward`` and
    ``masked_output``; one MaskedRNN node per layer when exported."""

    op_type = "MaskedRNN"
    torch_class = nn.RNN
    gate_order = (0,)

    def __init__(self, *args: Any, masked_output: str = "zero", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_masked(masked_output)
