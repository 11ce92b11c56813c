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

from onnx_masked_rnn.keras.layers import ConvertedLayer, ExportWarning, UnsupportedLayerError, convert_layer
from onnx_masked_rnn.torch import OPS, export

__all__ = ["dynamic_sequential", "recurrent_layers", "routed", "trace"]

# A size per input axis for the example inputs: distinct, and neither 0 nor 1 (torch.export
# specialises those), so every axis Keras leaves None stays symbolic.
_EXAMPLE_SIZES = (2, 3, 5, 7, 11, 13)


def recurrent_layers(model: Any) -> list[Any]:
    """Every Keras RNN layer of ``model`` (the two directions of a ``Bidirectional`` each count)."""
    return [
        layer
        for layer in model._flatten_layers(include_self=False, recursive=True)
        if isinstance(layer, keras.layers.RNN)
    ]


def _time_distributed_layers(model: Any) -> list[Any]:
    layers = model._flatten_layers(include_self=False, recursive=True)
    return [layer for layer in layers if isinstance(layer, keras.layers.TimeDistributed)]


def _loop(layer: Any, converted: ConvertedLayer) -> Callable[..., Any]:
    """A replacement for ``layer.inner_loop``: the masked op with the layer's converted weights,
    returning what Keras' torch ``backend.rnn`` returns, ``(last_output, outputs, states)``."""
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


def _time_distributed(layer: Any) -> Callable[..., Any]:
    """A replacement for ``TimeDistributed.call``: the inner layer on the ``[N*T, ...]`` merge of
    batch and time (what TimeDistributed means), where Keras' torch path loops over a static time
    axis and so fixes it at the example's length."""

    def call(inputs, training=None, mask=None):
        shape = inputs.shape
        kwargs = {}
        if layer.layer._call_has_mask_arg and mask is not None:
            kwargs["mask"] = mask.reshape(-1, *mask.shape[2:])
        if layer.layer._call_has_training_arg:
            kwargs["training"] = training
        outputs = layer.layer.call(inputs.reshape(-1, *shape[2:]), **kwargs)
        return outputs.reshape(shape[0], shape[1], *outputs.shape[1:])

    return call


@contextlib.contextmanager
def routed(layers: Sequence[Any], time_distributed: Sequence[Any] = ()) -> Iterator[None]:
    """Within the block, each recurrent layer's time loop is the masked custom op, and each
    ``TimeDistributed`` maps its layer over batch and time at once."""
    patches = [(layer, "inner_loop", _loop(layer, convert_layer(layer))) for layer in layers]
    patches += [(layer, "call", _time_distributed(layer)) for layer in time_distributed]
    try:
        for layer, name, replacement in patches:
            object.__setattr__(layer, name, replacement)
        yield
    finally:
        for layer, name, _ in patches:
            if name in layer.__dict__:
                object.__delattr__(layer, name)


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


def _first_failing_layer(layers: Sequence[Any], example: torch.Tensor) -> tuple[Any, Exception] | None:
    """The first of ``layers`` (run one after another, eagerly, masks passed on) that fails on
    ``example``, with its error; ``None`` when all run."""
    value: Any = example
    for layer in layers:
        try:
            value = layer(value, training=False) if layer._call_has_training_arg else layer(value)
        except Exception as exc:  # noqa: BLE001 (any failure means: this size does not fit the layer)
            return layer, exc
    return None


def dynamic_sequential(model: Any, report: Callable[[str], None]) -> Any:
    """``model`` itself, or, for a ``Sequential`` built by calling it on data (Keras then fixes its
    input at the first call's shape, batch and time included), the same layers over an input whose
    batch and time are ``None``. An axis stays fixed, with an :class:`ExportWarning` naming the layer
    that needs it, if running the layers at another size of it fails."""
    if not isinstance(model, keras.Sequential) or len(model.inputs) != 1:
        return model
    shape, dtype = tuple(model.inputs[0].shape), model.inputs[0].dtype
    if not shape or any(dim is None for dim in shape):
        return model  # declared by the user (keras.Input): kept as declared
    if isinstance(model.layers[0], keras.layers.Embedding):
        dtype = "int32"  # token ids; Keras declares the compute dtype and casts them
    relaxed = list(shape)
    for axis, what in [(0, "batch"), (1, "time")][: len(shape)]:
        probe = [size + 1 if i <= axis else size for i, size in enumerate(shape)]
        failing = _first_failing_layer(model.layers, _example(probe, dtype))
        if failing:
            layer, error = failing
            warnings.warn(
                f"Sequential {model.name!r}: its input is fixed at the first call's shape {shape}, and "
                f"layer {layer.name!r} ({type(layer).__name__}) fails at another {what} size "
                f"({type(error).__name__}), so the exported {what} axis stays {shape[axis]}; for dynamic "
                f"axes, make that layer size-independent and declare the input with "
                f"keras.Input(shape=...) (None for the dynamic axes)",
                ExportWarning,
                stacklevel=4,
            )
            break
        relaxed[axis] = None
    if relaxed == list(shape):
        return model
    report(
        f"Sequential {model.name!r} was built by calling it on data of shape {shape}: exporting with "
        f"input shape {tuple(relaxed)}"
    )
    inputs = keras.Input(batch_shape=tuple(relaxed), dtype=dtype, name=model.inputs[0].name)
    outputs = inputs
    for layer in model.layers:
        outputs = layer(outputs)
    return keras.Model(inputs, outputs, name=model.name)


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
    targets = list(names.values())
    names = {  # two unrelated time axes: "time_<symbol>" each
        symbol: new if targets.count(new) == 1 else f"{new}_{symbol}" for symbol, new in names.items()
    }
    graph = model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param in names:
                dim.dim_param = names[dim.dim_param]


def _check_outputs(onnx_model: onnx.ModelProto, model: Any) -> None:
    """No axis that Keras leaves ``None`` in an output became a fixed size (a layer whose torch code
    specialises on the example's sizes would make the exported model wrong at other sizes)."""
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        return  # a subclassed model: Keras does not know its output shapes
    for graph_output, keras_output in zip(onnx_model.graph.output, outputs):
        dims = graph_output.type.tensor_type.shape.dim
        fixed = [
            axis
            for axis, dim in enumerate(keras_output.shape)
            if dim is None and axis < len(dims) and dims[axis].HasField("dim_value")
        ]
        if fixed:
            raise ValueError(
                f"output {graph_output.name!r}: the trace fixed the dynamic axes {fixed} at the example's "
                "sizes (a layer's torch code loops over them); the model cannot be exported exactly"
            )


def trace(model: Any, input_signature: Any, strategy: str, report: Callable[[str], None]) -> onnx.ModelProto:
    """The ONNX model of ``model`` with one masked node per recurrent layer direction, in the form
    ``strategy`` asks for (:func:`onnx_masked_rnn.torch.export` does the export and the strategy)."""
    if input_signature is None:
        model = dynamic_sequential(model, report)
    layers = recurrent_layers(model)
    for layer in layers:
        if not layer.built:
            raise ValueError(
                f"layer {layer.name!r} is not built (no weights yet): call the model once, or build it, "
                "before exporting"
            )
        convert_layer(layer)  # refuse before tracing
    if not layers:
        raise UnsupportedLayerError(f"model {model.name!r} has no LSTM, GRU or SimpleRNN layer to export")
    signature = _signature(model, input_signature)
    examples = tuple(_example(shape, dtype) for _, shape, dtype in signature)
    # Axis 0 of every Keras input is the batch: one symbol for all inputs. Other axes are left for
    # torch.export to relate (AUTO), so the time axes of inputs the model combines become one.
    batch = torch.export.Dim("batch")
    dynamic = tuple(
        {axis: batch if axis == 0 else torch.export.Dim.AUTO for axis, dim in enumerate(shape) if dim is None}
        for _, shape, _ in signature
    )
    report(
        f"tracing {len(layers)} recurrent layer directions with torch.onnx.export(dynamo=True), "
        f"strategy {strategy}"
    )
    module = _Call(model, len(signature)).eval()
    with routed(layers, _time_distributed_layers(model)), _quiet():
        onnx_model = export(
            module,
            examples,
            dynamic_shapes=(dynamic,),  # one entry: forward(*inputs)
            strategy=strategy,
            input_names=[name for name, _, _ in signature],
        )
    _name_dynamic_axes(onnx_model, signature)
    _check_outputs(onnx_model, model)
    return onnx_model
