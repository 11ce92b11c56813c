"""The three custom ops: MaskedLSTM, MaskedGRU and MaskedRNN as ``torch.library`` ops.

Each op IS the ONNX op: its tensor inputs are the ONNX inputs in ONNX layout and gate order
(``sequence_lens`` omitted: fold it into ``mask``), its attributes are the ONNX attributes by their
ONNX names and defaults, and it returns what the ONNX op returns. Namespace ``onnx_masked_rnn``::

    torch.ops.onnx_masked_rnn.masked_lstm(
        X, W, R, B=None, initial_h=None, initial_c=None, P=None, mask=None, *,
        direction="forward", hidden_size=None, activations=None, activation_alpha=None,
        activation_beta=None, clip=None, input_forget=0, layout=0, masked_output="zero",
    ) -> (Y, Y_h, Y_c)
    torch.ops.onnx_masked_rnn.masked_gru(
        X, W, R, B=None, initial_h=None, mask=None, *,
        direction="forward", hidden_size=None, activations=None, activation_alpha=None,
        activation_beta=None, clip=None, linear_before_reset=0, layout=0, masked_output="zero",
    ) -> (Y, Y_h)
    torch.ops.onnx_masked_rnn.masked_rnn(
        X, W, R, B=None, initial_h=None, mask=None, *,
        direction="forward", hidden_size=None, activations=None, activation_alpha=None,
        activation_beta=None, clip=None, layout=0, masked_output="zero",
    ) -> (Y, Y_h)

Shapes (``D`` directions, ``G`` gates: 4, 3, 1): ``X`` ``[T, N, I]`` (``layout=0``) or ``[N, T, I]``
(``layout=1``); ``W`` ``[D, G*H, I]``; ``R`` ``[D, G*H, H]``; ``B`` ``[D, 2*G*H]`` (``[Wb, Rb]``);
``initial_h``/``initial_c`` ``[D, N, H]`` or ``[N, D, H]``; ``P`` ``[D, 3*H]``; ``mask`` bool
``[T, N]`` or ``[N, T]``; ``Y`` ``[T, D, N, H]`` or ``[N, T, D, H]``. Gate orders are ONNX's:
LSTM i, o, f, c; GRU z, r, h. ``activations`` is a list of ONNX activation names (LSTM: f, g, h per
direction), ``activation_alpha``/``activation_beta`` float lists consumed as ONNX does;
``masked_output`` is ``"zero"`` or ``"carry"``. Attributes are validated by
:func:`onnx_masked_rnn.attributes.parse_attributes`, shapes by ``attributes.infer_shapes``; bad input
raises ``ValueError`` naming it, in eager mode and while tracing.

Autograd: the backward pass recomputes the forward with autograd on (the eager implementation is
differentiable torch ops) and differentiates it, so the op stays one opaque node for
``torch.export`` and the ONNX exporter while modules built on it train. Under
``create_graph=True`` that backward is itself recorded, so gradients of gradients (double backward,
gradient penalties) are exact, for every configuration. ``seq_length`` 0 gives an empty ``Y`` and
the initial states. The ONNX translations are in :mod:`onnx_masked_rnn.torch.translations`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from onnx_masked_rnn.attributes import OP_SPECS, RNNAttributes, infer_shapes, parse_attributes
from onnx_masked_rnn.torch import eager

__all__ = ["NAMESPACE", "OPS", "masked_gru", "masked_lstm", "masked_rnn", "validate"]

NAMESPACE = "onnx_masked_rnn"

_COMMON = (
    "str direction='forward', int? hidden_size=None, str[]? activations=None, "
    "float[]? activation_alpha=None, float[]? activation_beta=None, float? clip=None"
)
_TAIL = "int layout=0, str masked_output='zero'"
_SCHEMAS = {
    "MaskedLSTM": "(Tensor X, Tensor W, Tensor R, Tensor? B=None, Tensor? initial_h=None, "
    "Tensor? initial_c=None, Tensor? P=None, Tensor? mask=None, *, "
    f"{_COMMON}, int input_forget=0, {_TAIL}) -> (Tensor, Tensor, Tensor)",
    "MaskedGRU": "(Tensor X, Tensor W, Tensor R, Tensor? B=None, Tensor? initial_h=None, "
    f"Tensor? mask=None, *, {_COMMON}, int linear_before_reset=0, {_TAIL}) -> (Tensor, Tensor)",
    "MaskedRNN": "(Tensor X, Tensor W, Tensor R, Tensor? B=None, Tensor? initial_h=None, "
    f"Tensor? mask=None, *, {_COMMON}, {_TAIL}) -> (Tensor, Tensor)",
}
# The op's tensor inputs: the ONNX inputs without sequence_lens.
_INPUTS = {op: tuple(n for n in spec.inputs if n != "sequence_lens") for op, spec in OP_SPECS.items()}


def validate(
    op_type: str, tensors: Sequence[torch.Tensor | None], attributes: dict[str, Any]
) -> tuple[RNNAttributes, tuple[tuple[Any, ...], ...]]:
    """Check one call's inputs (in the op's order) and attributes; return the parsed attributes
    and the output shapes.

    Raises ``ValueError`` naming the attribute or input that is wrong. Works on fake tensors with
    symbolic sizes (only known sizes are compared).
    """
    attrs = parse_attributes(op_type, **attributes)
    named = dict(zip(_INPUTS[op_type], tensors))
    X = named["X"]
    if not X.is_floating_point():
        raise ValueError(f"input 'X' must be a floating-point tensor, got {X.dtype}")
    for name, value in named.items():
        if value is None or name == "X":
            continue
        if name != "mask" and value.dtype != X.dtype:
            raise ValueError(f"input {name!r} must have the dtype of X ({X.dtype}), got {value.dtype}")
        if value.device != X.device:
            raise ValueError(f"input {name!r} must be on the device of X ({X.device}), got {value.device}")
    mask = named["mask"]
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"input 'mask' must be a bool tensor, got {mask.dtype}")
    shapes = [None if named.get(n) is None else tuple(named[n].shape) for n in OP_SPECS[op_type].inputs]
    return attrs, infer_shapes(attrs, shapes)


def _run_inputs(op_type: str, tensors: Sequence[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """The op's inputs as ``eager.run``'s ``(X, W, R, B, initial_h, initial_c, P, mask)``."""
    named = dict(zip(_INPUTS[op_type], tensors))
    return [named.get(n) for n in ("X", "W", "R", "B", "initial_h", "initial_c", "P", "mask")]


class _MaskedOp:
    """One op's kernels: eager, fake (shapes only) and autograd, on arguments bound to the schema."""

    def __init__(self, op_type: str, name: str) -> None:
        self.op_type, self.inputs = op_type, _INPUTS[op_type]
        arguments = torch._C.parse_schema(f"{name}{_SCHEMAS[op_type]}").arguments
        self.names = [a.name for a in arguments]
        # The dispatcher omits keyword arguments equal to their default: bind the schema's
        # defaults (ONNX's, except masked_output: the contract's "zero").
        self.defaults = {a.name: a.default_value for a in arguments if a.kwarg_only}

    def split(self, args: tuple, kwargs: dict[str, Any]) -> tuple[list, dict[str, Any]]:
        """(tensor inputs in the op's order, attributes by name with defaults bound)."""
        bound = {**self.defaults, **dict(zip(self.names, args)), **kwargs}
        return [bound.get(n) for n in self.inputs], {k: v for k, v in bound.items() if k not in self.inputs}

    def eager(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        tensors, attributes = self.split(args, kwargs)
        attrs, _ = validate(self.op_type, tensors, attributes)
        return tuple(out.contiguous() for out in eager.run(attrs, *_run_inputs(self.op_type, tensors)))

    def fake(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        tensors, attributes = self.split(args, kwargs)
        _, shapes = validate(self.op_type, tensors, attributes)
        return tuple(tensors[0].new_empty(shape) for shape in shapes)

    def setup_context(
        self, ctx: Any, inputs: tuple, keyword_only_inputs: dict[str, Any], output: Any
    ) -> None:
        ctx.save_for_backward(*inputs)
        ctx.attributes = {**self.defaults, **keyword_only_inputs}

    def backward(self, ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """Recompute the forward with autograd on, and differentiate it.

        Under ``create_graph=True`` (grad mode on here) the recomputation runs on aliases of the
        saved inputs, so the returned gradients are functions of the inputs and of ``grads`` that
        autograd differentiates again (double backward). Otherwise it runs on detached copies and
        builds no graph beyond this call.
        """
        create_graph = torch.is_grad_enabled()
        saved = ctx.saved_tensors  # every input, defaults filled in
        # Trailing inputs the caller omitted (equal to their default, None) have no entry in
        # needs_input_grad and get no gradient.
        needs = [*ctx.needs_input_grad, *[False] * (len(saved) - len(ctx.needs_input_grad))]
        with torch.enable_grad():
            inputs = [
                None if t is None else _differentiable(t, need, create_graph) for t, need in zip(saved, needs)
            ]
            attrs, _ = validate(self.op_type, inputs, ctx.attributes)
            outputs = eager.run(attrs, *_run_inputs(self.op_type, inputs))
            wanted = [i for i, (t, need) in enumerate(zip(inputs, needs)) if t is not None and need]
            # An output that depends on no input (Y when seq_length is 0) has no graph.
            connected = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad]
            found = (
                torch.autograd.grad(
                    [o for o, _ in connected],
                    [inputs[i] for i in wanted],
                    [g for _, g in connected],
                    allow_unused=True,
                    create_graph=create_graph,
                )
                if wanted and connected
                else ()
            )
        gradients: list[torch.Tensor | None] = [None] * len(ctx.needs_input_grad)
        for i, gradient in zip(wanted, found):
            gradients[i] = gradient
        return tuple(gradients)


def _differentiable(t: torch.Tensor, need: bool, create_graph: bool) -> torch.Tensor:
    """The tensor the backward's recomputation runs on for the saved input ``t``.

    A gradient is taken with respect to a fresh tensor per input (one tensor passed as two inputs
    gets each input's own gradient). With ``create_graph`` that tensor is a view of ``t``, which
    keeps the recomputation connected to ``t``'s graph; without, a detached copy.
    """
    if not (need and t.is_floating_point()):
        return t.detach()
    if create_graph:
        return t.view_as(t)
    return t.detach().requires_grad_()


def _define(op_type: str, name: str) -> torch._library.custom_ops.CustomOpDef:
    kernels = _MaskedOp(op_type, name)
    op = torch.library.custom_op(
        f"{NAMESPACE}::{name}", kernels.eager, mutates_args=(), schema=_SCHEMAS[op_type]
    )
    op.register_fake(kernels.fake)
    op.register_autograd(kernels.backward, setup_context=kernels.setup_context)
    return op


masked_lstm = _define("MaskedLSTM", "masked_lstm")
masked_gru = _define("MaskedGRU", "masked_gru")
masked_rnn = _define("MaskedRNN", "masked_rnn")

OPS = {"MaskedLSTM": masked_lstm, "MaskedGRU": masked_gru, "MaskedRNN": masked_rnn}
"""The custom op of each ONNX op type (``torch.ops.onnx_masked_rnn.<name>`` is the same op)."""
