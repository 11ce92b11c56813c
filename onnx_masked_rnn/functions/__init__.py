"""The operators' function bodies: one Scan per direction, Where for masked steps.

``build_scan_function(attrs, present, opset)`` returns the ``FunctionProto`` of one node's
configuration: the body is specialised to the node's attributes and to the optional inputs it
supplies, and holds only standard ``ai.onnx`` ops at ``opset``. The builders are onnxscript
functions; :mod:`.masking` holds what the three ops share, :mod:`.lstm`, :mod:`.gru` and
:mod:`.rnn` their cells.
"""

from __future__ import annotations

import functools

import onnx

from onnx_masked_rnn.attributes import OP_SPECS, RNNAttributes

__all__ = ["MIN_OPSET", "build_scan_function", "max_opset"]

MIN_OPSET = 18
"""The oldest ai.onnx opset the bodies support (they use Split's ``num_outputs``, new in 18)."""


def max_opset() -> int:
    """The newest ai.onnx opset the installed onnx knows."""
    return onnx.defs.onnx_opset_version()


def check_opset(opset: int) -> None:
    """Raise ``ValueError`` unless ``opset`` is an ai.onnx opset the bodies can be built at."""
    if not MIN_OPSET <= opset <= max_opset():
        raise ValueError(
            f"ai.onnx opset {opset} is not supported: the masked RNN functions need an ai.onnx opset "
            f"between {MIN_OPSET} and {max_opset()} (convert the model with onnx.version_converter first)"
        )


def build_scan_function(attrs: RNNAttributes, present: frozenset[str], opset: int) -> onnx.FunctionProto:
    """The Scan + Where function of a node with attributes ``attrs`` supplying the optional inputs
    ``present``, at ai.onnx ``opset``.

    The ``FunctionProto`` has domain ``DOMAIN``, the op's name, its full input and output lists
    and every attribute name declared; its body refers to no attribute.
    """
    spec = OP_SPECS[attrs.op_type]
    unknown = set(present) - set(spec.inputs[3:])
    if unknown:
        raise ValueError(
            f"present names {sorted(unknown)} that are not optional inputs of {attrs.op_type} "
            f"({list(spec.inputs[3:])})"
        )
    check_opset(opset)
    function = onnx.FunctionProto()
    function.CopyFrom(_build(attrs, frozenset(present), opset))
    return function


@functools.lru_cache(maxsize=256)
def _build(attrs: RNNAttributes, present: frozenset[str], opset: int) -> onnx.FunctionProto:
    # onnxscript is imported on first use only: importing the package stays cheap.
    from onnx_masked_rnn.functions import gru, lstm, rnn
    from onnx_masked_rnn.functions._builder import Parts

    builders = {"MaskedLSTM": lstm.masked_lstm, "MaskedGRU": gru.masked_gru, "MaskedRNN": rnn.masked_rnn}
    parts = Parts(opset)
    return parts.finish(builders[attrs.op_type](parts, attrs, present), attrs)
