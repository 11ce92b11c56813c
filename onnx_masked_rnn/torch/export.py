"""``export``: a PyTorch model with masked modules (or the custom ops) to ONNX.

``torch.onnx.export(..., dynamo=True)`` with :data:`~onnx_masked_rnn.torch.translations.TRANSLATIONS`
emits one MaskedLSTM/GRU/RNN node per layer; the strategy then decides what the file holds:

- ``"function"``: the masked nodes, with the model-local functions they call
  (:func:`onnx_masked_rnn.attach_functions`); any runtime with local functions runs it.
- ``"scan"``: the nodes replaced by the specification's Scan + Where body (standard ops only).
- ``"native"``: the nodes replaced by the expansion onto the native LSTM/GRU/RNN kernels (standard
  ops only; the fast deployment path on onnxruntime for LSTM and GRU; float32).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import onnx
import torch

from onnx_masked_rnn._files import write_atomic
from onnx_masked_rnn.inline import attach_functions, inline
from onnx_masked_rnn.schemas import register_schemas
from onnx_masked_rnn.torch.packed import packed_as_mask, packed_error
from onnx_masked_rnn.torch.translations import TRANSLATIONS

__all__ = ["STRATEGIES", "export"]

STRATEGIES = ("function", "scan", "native")


def export(
    model: torch.nn.Module,
    args: tuple[Any, ...],
    path: str | os.PathLike | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    strategy: str = "function",
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    opset_version: int | None = None,
) -> onnx.ModelProto:
    """Export ``model`` called on ``args`` (and ``kwargs``) to ONNX; save it to ``path`` if given.

    ``dynamic_shapes`` is ``torch.export``'s (e.g. ``{"x": {0: batch, 1: time}, "mask": {0: batch,
    1: time}}`` with ``batch = torch.export.Dim("batch")``); example sizes of 0 or 1 on a dynamic axis
    get specialised by ``torch.export``, so trace with at least 2. ``strategy`` is ``"function"``,
    ``"scan"`` or ``"native"`` (see the module docstring). Put the model in ``eval()`` mode first
    unless you mean to export dropout. Returns the model, checked by ``onnx.checker`` (full check).

    Model code that keeps ``pack_padded_sequence`` -> masked module -> ``pad_packed_sequence`` is
    traced as a mask (:mod:`onnx_masked_rnn.torch.packed`); other packed-sequence forms raise a
    :class:`~onnx_masked_rnn.torch.packed.PackedSequenceError` naming the one-line change. An
    input axis given a named ``Dim`` that the exported model fixes is an error.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {list(STRATEGIES)}, got {strategy!r}")
    register_schemas()
    try:
        with packed_as_mask(model):
            program = torch.onnx.export(
                model,
                args,
                kwargs=kwargs,
                dynamo=True,
                dynamic_shapes=dynamic_shapes,
                custom_translation_table=TRANSLATIONS,
                input_names=input_names,
                output_names=output_names,
                opset_version=opset_version,
                verbose=False,
            )
    except Exception as error:
        packed = packed_error(error)
        if packed is None:
            raise
        raise packed from None  # its own traceback says where; torch's report would only bury it
    exported = program.model_proto
    _check_dynamic(exported, dynamic_shapes)
    exported = attach_functions(exported) if strategy == "function" else inline(exported, strategy)
    onnx.checker.check_model(exported, full_check=True)
    if path is not None:
        write_atomic(Path(path), exported.SerializeToString())  # whole or not at all
    return exported


def _check_dynamic(model: onnx.ModelProto, dynamic_shapes: Any) -> None:
    """Refuse a fixed axis where ``dynamic_shapes`` (a dict keyed by the graph's input names) asked
    for a named ``Dim``: when the model's code specialises such an axis, ``torch.onnx.export``
    retries with ``torch.export``'s suggested fix, which fixes the axis without saying so."""
    if not isinstance(dynamic_shapes, dict):
        return
    inputs = {i.name: list(i.type.tensor_type.shape.dim) for i in model.graph.input}
    for name, axes in dynamic_shapes.items():
        if name not in inputs or not isinstance(axes, dict):
            continue
        for axis, dim in axes.items():
            if not isinstance(dim, torch.export.Dim) or not -len(inputs[name]) <= axis < len(inputs[name]):
                continue
            if inputs[name][axis].HasField("dim_value"):
                raise ValueError(
                    f"input {name!r} axis {axis} was given the dynamic dimension {dim.__name__!r}, but "
                    f"the exported model fixes it at {inputs[name][axis].dim_value}: some code of the "
                    "model needs a fixed size there (torch.export.export(model, args, dynamic_shapes=..., "
                    "strict=False) raises where), and torch.onnx.export then exports a fixed size "
                    "without saying so"
                )
