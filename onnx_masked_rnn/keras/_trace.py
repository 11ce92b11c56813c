"""The torch side of :func:`onnx_masked_rnn.keras.export` (imported only on Keras' torch backend).

:func:`trace` replaces each recurrent layer's time loop by the masked custom op for the duration of
``torch.onnx.export(dynamo=True)`` and returns the ONNX model with one masked node per layer
direction.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import keras
import numpy as np
import onnx
import torch

from onnx_masked_rnn.keras.layers import ConvertedLayer, UnsupportedLayerError, convert_layer

__all__ = ["recurrent_layers", "routed", "trace"]

# A size per input axis for the example inputs: distinct, and neither 0 nor 1 (torch.export
# specialises those), so every axis Keras leaves None stays symbolic.
_EXAMPLE_SIZES = (2, 3, 5, 7, 11, 13)


def recurrent_layers(model: Any) -> list[Any]:
    """Every Keras RNN layer of ``model`` (the two directions of a ``Bidirectional`` each count),
    converted or refused up front so a refusal comes before any tracing."""
    found = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.RNN):
            found.append(layer)
    return found


def _loop(layer: Any, converted: ConvertedLayer) -> Callable[..., Any]:
    """A replacement for ``layer.inner_loop``: the masked op with the layer's converted weights,
    returning what Keras' torch ``backend.rnn`` returns, ``(last_output, outputs, states)``."""
    from onnx_masked_rnn.torch import OPS

    op = OPS[converted.op_type]
    dtype = getattr(torch, keras.backend.standardize_dtype(layer.compute_dtype))
    weights = {name: torch.from_numpy(value).to(dtype) for name, value in converted.weights.items()}
    attributes = dict(converted.attributes, layout=1)
    reverse = attributes["direction"] == "reverse"

    def inner_loop(sequences, initial_state, mask, training=False):  # noqa: ARG001 (Keras' signature)
        if isinstance(mask, list | tuple):
            mask = mask[0]
        states = {"initial_h": initial_state[0][:, None]}
        if converted.op_type == "MaskedLSTM":
            states["initial_c"] = initial_state[1][:, None]
        if mask is not None:
            mask = mask.to(torch.bool)
        Y, *finals = op(sequences, **weights, **states, mask=mask, **attributes)
        outputs = Y[:, :, 0]
        if reverse:  # Keras returns a go_backwards layer's outputs in processing order
            outputs = torch.flip(outputs, [1])
        return outputs[:, -1], outputs, [state[:, 0] for state in finals]

    return inner_loop


@contextlib.contextmanager
def routed(layers: Sequence[Any]) -> Iterator[None]:
    """Within the block, each layer's time loop is the masked custom op."""
    loops = {id(layer): _loop(layer, convert_layer(layer)) for layer in layers}
    try:
        for layer in layers:
            object.__setattr__(layer, "inner_loop", loops[id(layer)])
        yield
    finally:
        for layer in layers:
            if "inner_loop" in layer.__dict__:
                object.__delattr__(layer, "inner_loop")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporter's warnings and log lines ("torchvision is not installed", ...)."""
    log = logging.getLogger("torch.onnx")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        log.setLevel(level)


class _Call(torch.nn.Module):
    """``model(inputs)`` with flat positional tensors, as ``torch.export`` needs them."""

    def __init__(self, model: Any, num_inputs: int) -> None:
        super().__init__()
        self.model = model
        self.num_inputs = num_inputs

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs = self.model(inputs[0] if self.num_inputs == 1 else list(inputs), training=False)
        return tuple(outputs) if isinstance(outputs, list | tuple) else (outputs,)


def _signature(model: Any, given: Sequence[tuple[Sequence[int | None], str]] | None) -> list[tuple]:
    """``[(name, shape, dtype)]`` of the model's inputs."""
    if given is not None:
        return [(f"input_{i}", tuple(shape), dtype) for i, (shape, dtype) in enumerate(given)]
    try:
        inputs = model.inputs
    except (AttributeError, ValueError):
        inputs = None
    if not inputs:
        raise ValueError(
            "MODEL: Keras does not know this model's inputs (a subclassed model, or never built); "
            "pass input_signature=[(shape, dtype), ...] with None for the dynamic axes"
        )
    return [(t.name, tuple(t.shape), t.dtype) for t in inputs]


def _example(shape: Sequence[int | None], dtype: str) -> torch.Tensor:
    """An example input with distinct sizes for its dynamic axes; integer inputs (token ids) are 1,
    a real id that is not Embedding's mask value."""
    sizes = [_EXAMPLE_SIZES[axis] if dim is None else dim for axis, dim in enumerate(shape)]
    return torch.from_numpy(np.ones(sizes, dtype=keras.backend.standardize_dtype(dtype)))


def _name_dynamic_axes(model: onnx.ModelProto, signature: Sequence[tuple]) -> None:
    """Check that every axis Keras leaves ``None`` is dynamic in the exported model, and name the
    symbols torch.export chose (``s21``): ``batch`` for axis 0, ``time`` for axis 1, else
    ``<input>_<axis>``."""
    names: dict[str, str] = {}
    for graph_input, (name, shape, _) in zip(model.graph.input, signature):
        dims = graph_input.type.tensor_type.shape.dim
        fixed = [axis for axis, dim in enumerate(shape) if dim is None and not dims[axis].dim_param]
        if fixed:
            raise ValueError(
                f"input {name!r}: torch.export fixed the dynamic axes {fixed} (the model's code "
                "specialises on them); the exported model would accept only the example sizes"
            )
        for axis, dim in enumerate(shape):
            if dim is None and dims[axis].dim_param not in names:
                names[dims[axis].dim_param] = ("batch", "time")[axis] if axis < 2 else f"{name}_{axis}"
    if len(set(names.values())) < len(names):  # two inputs with unrelated batch or time axes
        names = {symbol: f"{new}_{symbol}" for symbol, new in names.items()}
    graph = model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param in names:
                dim.dim_param = names[dim.dim_param]


def trace(model: Any, input_signature: Any, report: Callable[[str], None]) -> onnx.ModelProto:
    """The ONNX model of ``model`` with one masked node per recurrent layer direction."""
    from onnx_masked_rnn.schemas import register_schemas
    from onnx_masked_rnn.torch import TRANSLATIONS

    register_schemas()  # the exporter builds the masked nodes against registered schemas

    layers = recurrent_layers(model)
    for layer in layers:
        convert_layer(layer)  # refuse before tracing
    if not layers:
        raise UnsupportedLayerError(f"model {model.name!r} has no LSTM, GRU or SimpleRNN layer to export")
    signature = _signature(model, input_signature)
    examples = tuple(_example(shape, dtype) for _, shape, dtype in signature)
    dynamic = tuple(
        {axis: torch.export.Dim.AUTO for axis, dim in enumerate(shape) if dim is None}
        for _, shape, _ in signature
    )
    report(f"tracing {len(layers)} recurrent layer directions with torch.onnx.export(dynamo=True)")
    module = _Call(model, len(signature)).eval()
    with routed(layers), _quiet():
        program = torch.onnx.export(
            module,
            examples,
            dynamo=True,
            dynamic_shapes=(dynamic,),  # one entry: forward(*inputs)
            input_names=[name for name, _, _ in signature],
            custom_translation_table=TRANSLATIONS,
            optimize=True,
            verbose=False,
        )
    onnx_model = program.model_proto
    _name_dynamic_axes(onnx_model, signature)
    return onnx_model
