"""ONNX translations of the custom ops for ``torch.onnx.export(..., dynamo=True)``.

Each custom op becomes one MaskedLSTM/GRU/RNN node in ``onnx_masked_rnn.DOMAIN`` with the same
inputs (``sequence_lens`` left empty) and every attribute stated explicitly, as
:func:`onnx_masked_rnn.attributes.parse_attributes` resolves them, so the node says exactly what the eager op
computed. Pass :data:`TRANSLATIONS` as ``custom_translation_table`` to ``torch.onnx.export``; the
translations register the ops' schemas (onnxscript builds nodes against registered schemas), and
:func:`onnx_masked_rnn.torch.export` also attaches or inlines the bodies.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from onnxscript.values import Opset

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.schemas import register_schemas
from onnx_masked_rnn.torch import ops

__all__ = ["TRANSLATIONS", "masked_gru", "masked_lstm", "masked_rnn"]

_MASKED = Opset(DOMAIN, OPSET_VERSION)


def _node(op_type: str, inputs: dict[str, Any], attributes: dict[str, Any]) -> Any:
    """One masked node; ``inputs`` by ONNX name, absent ones ``None``."""
    register_schemas()  # idempotent
    spec = OP_SPECS[op_type]
    node_attributes = parse_attributes(op_type, **attributes).to_onnx()
    tensors = [inputs.get(name) for name in spec.inputs]
    return getattr(_MASKED, op_type)(*tensors, **node_attributes, _outputs=len(spec.outputs))


def masked_lstm(
    X: Any,
    W: Any,
    R: Any,
    B: Any = None,
    initial_h: Any = None,
    initial_c: Any = None,
    P: Any = None,
    mask: Any = None,
    *,
    direction: str = "forward",
    hidden_size: int | None = None,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    input_forget: int = 0,
    layout: int = 0,
    masked_output: str = "zero",
) -> Any:
    """``onnx_masked_rnn::masked_lstm`` as one MaskedLSTM node."""
    return _node(
        "MaskedLSTM",
        dict(X=X, W=W, R=R, B=B, initial_h=initial_h, initial_c=initial_c, P=P, mask=mask),
        dict(
            direction=direction,
            hidden_size=hidden_size,
            activations=activations,
            activation_alpha=activation_alpha,
            activation_beta=activation_beta,
            clip=clip,
            input_forget=input_forget,
            layout=layout,
            masked_output=masked_output,
        ),
    )


def masked_gru(
    X: Any,
    W: Any,
    R: Any,
    B: Any = None,
    initial_h: Any = None,
    mask: Any = None,
    *,
    direction: str = "forward",
    hidden_size: int | None = None,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    linear_before_reset: int = 0,
    layout: int = 0,
    masked_output: str = "zero",
) -> Any:
    """``onnx_masked_rnn::masked_gru`` as one MaskedGRU node."""
    return _node(
        "MaskedGRU",
        dict(X=X, W=W, R=R, B=B, initial_h=initial_h, mask=mask),
        dict(
            direction=direction,
            hidden_size=hidden_size,
            activations=activations,
            activation_alpha=activation_alpha,
            activation_beta=activation_beta,
            clip=clip,
            linear_before_reset=linear_before_reset,
            layout=layout,
            masked_output=masked_output,
        ),
    )


def masked_rnn(
    X: Any,
    W: Any,
    R: Any,
    B: Any = None,
    initial_h: Any = None,
    mask: Any = None,
    *,
    direction: str = "forward",
    hidden_size: int | None = None,
    activations: Sequence[str] | None = None,
    activation_alpha: Sequence[float] | None = None,
    activation_beta: Sequence[float] | None = None,
    clip: float | None = None,
    layout: int = 0,
    masked_output: str = "zero",
) -> Any:
    """``onnx_masked_rnn::masked_rnn`` as one MaskedRNN node."""
    return _node(
        "MaskedRNN",
        dict(X=X, W=W, R=R, B=B, initial_h=initial_h, mask=mask),
        dict(
            direction=direction,
            hidden_size=hidden_size,
            activations=activations,
            activation_alpha=activation_alpha,
            activation_beta=activation_beta,
            clip=clip,
            layout=layout,
            masked_output=masked_output,
        ),
    )


TRANSLATIONS: dict[Any, Callable[..., Any]] = {
    ops.masked_lstm._opoverload: masked_lstm,
    ops.masked_gru._opoverload: masked_gru,
    ops.masked_rnn._opoverload: masked_rnn,
}
"""``custom_translation_table`` for ``torch.onnx.export``: each op's overload -> its translation."""
