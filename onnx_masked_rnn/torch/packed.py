"""Packed sequences during export: ``pack_padded_sequence`` -> masked module -> ``pad_packed_sequence``
traced as padded data with a mask built from the lengths.

``torch.export`` cannot trace a ``PackedSequence`` (its ``batch_sizes`` and ``data`` have
data-dependent sizes). Inside :func:`packed_as_mask`, ``pack_padded_sequence`` returns a
:class:`PaddedSequence` (the padded input, its lengths and its layout) instead; a masked module
given one runs on the padded input with ``mask = step < length`` and returns a
:class:`PaddedSequence`; ``pad_packed_sequence`` turns it back into torch's result: the padded
steps set to ``padding_value``, the time axis cut to the longest row (``max(lengths)``, a
data-dependent size in the graph) or to ``total_length``, rows in the input's order. The
functions are replaced in ``torch.nn.utils.rnn`` (for ``nn.utils.rnn.pack_padded_sequence(...)``)
and wherever a loaded module outside torch binds them by name
(``from torch.nn.utils.rnn import pack_padded_sequence``); anything else that builds or reads a
packed sequence is an error naming the one-line change.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.nn.utils import rnn

from onnx_masked_rnn.torch.modules import MaskedGRU, MaskedLSTM, MaskedRNN

__all__ = ["MASK_FROM_LENGTHS", "PackedSequenceError", "PaddedSequence", "packed_as_mask", "packed_error"]

Tensor = torch.Tensor

MASKED = (MaskedLSTM, MaskedGRU, MaskedRNN)

MASK_FROM_LENGTHS = (
    "build the mask from the lengths instead of packing, one line: "
    "`mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]` ([N, T] for batch_first; "
    "`.t()` of it for time-major), then `output, h = rnn(x, mask=mask)` with a masked module "
    "(docs/pytorch.md, 'Exporting a model with packed sequences')"
)

# Packages whose modules keep the real functions: torch's own, and this package (whose modules
# run the real PackedSequence path in eager mode).
_KEEP = ("torch", "onnx_masked_rnn")


class PackedSequenceError(RuntimeError):
    """A packed sequence in a form :func:`packed_as_mask` does not trace."""


class PaddedSequence:
    """What ``pack_padded_sequence`` gives inside :func:`packed_as_mask`: the padded tensor (time
    axis 1 if ``batch_first`` else 0), the int64 lengths ``[N]`` and the layout. Not a tuple, so
    code that unpacks or indexes a ``PackedSequence`` fails instead of reading other fields."""

    __slots__ = ("batch_first", "lengths", "padded")

    def __init__(self, padded: Tensor, lengths: Tensor, batch_first: bool) -> None:
        self.padded, self.lengths, self.batch_first = padded, lengths, batch_first

    def mask(self, batch_first: bool) -> Tensor:
        """``step < length``, ``[N, T]`` if ``batch_first`` else ``[T, N]``."""
        steps = torch.arange(self.padded.shape[1 if self.batch_first else 0], device=self.padded.device)
        mask = steps[None, :] < self.lengths.to(self.padded.device)[:, None]
        return mask if batch_first else mask.t()

    def transposed(self, batch_first: bool) -> Tensor:
        """``padded`` in the layout ``batch_first``."""
        return self.padded if batch_first == self.batch_first else self.padded.transpose(0, 1)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # probes by Python and torch internals
            raise AttributeError(name)
        raise PackedSequenceError(
            f"the packed sequence has no {name!r} during onnx_masked_rnn.torch.export: "
            "pack_padded_sequence is traced as padded data with a mask there, which only "
            "MaskedLSTM/MaskedGRU/MaskedRNN and pad_packed_sequence take (a PackedSequence's "
            f"data and batch_sizes have data-dependent sizes); {MASK_FROM_LENGTHS}"
        )


def pack_padded_sequence(
    input: Tensor, lengths: Tensor | list[int], batch_first: bool = False, enforce_sorted: bool = True
) -> PaddedSequence:
    """Stand-in for ``torch.nn.utils.rnn.pack_padded_sequence``. Rows keep their order: a masked
    module needs no sorting, so ``enforce_sorted`` changes nothing (and unsorted lengths are not
    refused)."""
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    return PaddedSequence(input, lengths, bool(batch_first))


def pad_packed_sequence(
    sequence: Any, batch_first: bool = False, padding_value: float = 0.0, total_length: int | None = None
) -> tuple[Tensor, Tensor]:
    """Stand-in for ``torch.nn.utils.rnn.pad_packed_sequence``: torch's result for a
    :class:`PaddedSequence` (a real ``PackedSequence`` goes to torch's function)."""
    if not isinstance(sequence, PaddedSequence):
        return _ORIGINALS["pad_packed_sequence"](sequence, batch_first, padding_value, total_length)
    padded = sequence.transposed(batch_first)
    mask = sequence.mask(batch_first)
    time = 1 if batch_first else 0
    steps = padded.shape[time]
    padded = padded.masked_fill(~mask.reshape(*mask.shape, *[1] * (padded.dim() - 2)), padding_value)
    if total_length is None:
        longest = sequence.lengths.max().item()  # data-dependent: an unbacked size in the graph
        torch._check(longest >= 0)
        torch._check(longest <= steps)
        padded = padded.narrow(time, 0, longest)
    elif not statically_known_true(total_length == steps):
        # Padded to total_length, or cut to it when the input was longer (without a guard).
        block = list(padded.shape)
        block[time] = total_length
        padded = torch.cat([padded, padded.new_full(block, padding_value)], time).narrow(
            time, 0, total_length
        )
    return padded, sequence.lengths


_ORIGINALS = {
    "pack_padded_sequence": rnn.pack_padded_sequence,
    "pad_packed_sequence": rnn.pad_packed_sequence,
}
_STAND_INS = {"pack_padded_sequence": pack_padded_sequence, "pad_packed_sequence": pad_packed_sequence}


def _masked_forward(module: nn.Module, name: str) -> Any:
    bound = module.forward

    def forward(input: Any, hx: Any = None, mask: Tensor | None = None) -> Any:
        if isinstance(input, rnn.PackedSequence):
            raise PackedSequenceError(
                f"model.{name} got a PackedSequence, which torch.export cannot trace (its sizes depend "
                "on the lengths' values): export traces pack_padded_sequence as a mask only when it is "
                "called through torch.nn.utils.rnn or by a name bound at a module's top level, not when "
                "kept in an attribute or built with the PackedSequence constructor; "
                f"{MASK_FROM_LENGTHS}"
            )
        if not isinstance(input, PaddedSequence):
            return bound(input, hx, mask)
        if mask is not None:
            raise ValueError("pass either a packed sequence (its lengths are the mask) or a mask, not both")
        output, state = bound(input.transposed(module.batch_first), hx, input.mask(module.batch_first))
        return PaddedSequence(output, input.lengths, module.batch_first), state

    return forward


def _refusing_forward(module: nn.Module, name: str) -> Any:
    bound = module.forward
    masked = {nn.LSTM: "MaskedLSTM", nn.GRU: "MaskedGRU", nn.RNN: "MaskedRNN"}.get(type(module))
    swap = (
        f"swap it before exporting: `model.{name} = {masked}.from_module(model.{name})` "
        "(from onnx_masked_rnn.torch)"
        if masked
        else "use MaskedLSTM/MaskedGRU/MaskedRNN there"
    )

    def forward(input: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(input, (PaddedSequence, rnn.PackedSequence)):
            raise PackedSequenceError(
                f"model.{name} is a {type(module).__name__}, which cannot trace a packed sequence "
                f"(torch.export fails on its data-dependent sizes): {swap}"
            )
        return bound(input, *args, **kwargs)

    return forward


def _namespaces() -> list[dict[str, Any]]:
    """``torch.nn.utils.rnn`` and the global namespaces of every loaded module outside torch and
    this package: the model's modules, and the helpers and libraries they call."""
    namespaces = [vars(rnn)]
    for name, module in list(sys.modules.items()):
        if isinstance(module, types.ModuleType) and name.split(".")[0] not in _KEEP:
            namespaces.append(vars(module))
    return namespaces


@contextlib.contextmanager
def packed_as_mask(model: nn.Module) -> Iterator[None]:
    """Within the block, ``pack_padded_sequence``/``pad_packed_sequence`` and ``model``'s masked
    modules trace packed sequences as masks (module docstring); ``model``'s torch recurrent modules
    given one raise an error naming the swap. Everything is restored on exit, also on
    error. Not thread-safe: the functions are replaced process-wide."""
    replaced: list[tuple[dict[str, Any], str]] = []
    wrapped: list[tuple[nn.Module, Any]] = []
    try:
        for namespace in _namespaces():
            for name, original in _ORIGINALS.items():
                if namespace.get(name) is original:
                    namespace[name] = _STAND_INS[name]
                    replaced.append((namespace, name))
        for name, module in model.named_modules():
            if not name:  # the model itself: its inputs come from outside, never packed here
                continue
            if isinstance(module, MASKED):
                forward = _masked_forward(module, name)
            elif isinstance(module, nn.RNNBase):
                forward = _refusing_forward(module, name)
            else:
                continue
            wrapped.append((module, module.__dict__.get("forward")))
            module.forward = forward
        yield
    finally:
        for namespace, name in replaced:
            namespace[name] = _ORIGINALS[name]
        for module, previous in wrapped:
            if previous is None:
                del module.forward
            else:
                module.forward = previous


def packed_error(error: BaseException) -> PackedSequenceError | None:
    """The :class:`PackedSequenceError` raised while tracing, if ``error`` (from
    ``torch.onnx.export``) wraps one."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, PackedSequenceError):
            return current
        seen.add(id(current))
        pending += [current.__cause__, current.__context__]
    return None
