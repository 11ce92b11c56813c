"""What the kernel covers: one function, :func:`uncovered`, that :func:`~onnx_masked_rnn.kernel.session`
asks of every masked node before the session is made.

onnxruntime never falls back from a registered kernel to the node's model-local function: a node
the kernel refuses fails the session, and a type it does not handle would reach it anyway. So a
node outside the kernel's coverage must be rewritten (``inline``) before onnxruntime sees it.

The kernel covers the whole specification (every direction, layout, ``masked_output`` mode,
activation with its ``activation_alpha``/``activation_beta``, ``clip``, ``input_forget``,
``linear_before_reset``, optional inputs and outputs, empty batch or sequence) in the element
types :data:`COVERED_TYPES`, which are all the types the operators admit. A node :func:`uncovered`
refuses would therefore be one the operators refuse too; the function is the one place to state an
exception should a kernel version ever lack something.
"""

from __future__ import annotations

import onnx

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import OP_SPECS

__all__ = ["COVERED_TYPES", "uncovered"]

COVERED_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.DOUBLE,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
    }
)
"""The element types of ``X`` (and the other float inputs) the kernel computes."""


def uncovered(node: onnx.NodeProto, x_type: int = onnx.TensorProto.UNDEFINED) -> str | None:
    """Why the kernel does not run ``node``, a MaskedLSTM/GRU/RNN node whose ``X`` has element type
    ``x_type`` (``UNDEFINED``: not known before the run), or None when it does (and for any node
    that is not a masked one)."""
    if node.domain != DOMAIN or node.op_type not in OP_SPECS:
        return None
    if x_type != onnx.TensorProto.UNDEFINED and x_type not in COVERED_TYPES:
        name = onnx.TensorProto.DataType.Name(x_type).lower()
        return f"its input X is {name}; the kernel computes {sorted(_names(COVERED_TYPES))}"
    return None


def _names(types: frozenset[int]) -> list[str]:
    return [onnx.TensorProto.DataType.Name(t).lower() for t in types]
