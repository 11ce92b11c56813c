"""The conformance runner's backends, each with onnx's ``Backend`` interface.

``prepare(model, device)`` returns a representation whose ``run(inputs)`` maps the graph's input
arrays (in order) to its output arrays; ``supports_device(device)``; a backend raises
``unittest.SkipTest(reason)`` from ``prepare`` for a model it does not claim to run (onnx's own
backend-test runner treats that exception the same way). Built in:

- ``onnxruntime``: an ``onnxruntime.InferenceSession`` on the CPU, graph optimizations enabled;
  ``onnxruntime-noopt``: the same with them disabled (``ORT_DISABLE_ALL``).
- ``onnxruntime-kernel``: the same with the package's native kernel registered
  (``onnx_masked_rnn.kernel``): it runs the masked-node variant and skips the expanded ones.
- ``openvino``: OpenVINO's CPU plugin, inference precision pinned to float32.
- ``tract``: tract's ONNX loader and runtime.
- ``reference``: the numpy reference of this package; it runs models whose graph is one masked node
  and skips the expanded variants (standard-op graphs, for which it has no implementation).
- ``onnx-reference``: ``onnx.reference.ReferenceEvaluator`` with ``reference.OPS``: masked nodes
  through ``OPS``, expanded graphs with onnx's own op implementations, skipping graphs that use
  features those implementations lack (their Scan raises, their LSTM/GRU/RNN silently ignore).

``resolve("module:Name")`` loads any other object with that interface, e.g.
``onnxruntime.backend.backend:OnnxRuntimeBackend`` (or the module ``onnxruntime.backend``), or a
vendor's backend.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
import unittest
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

from onnx_masked_rnn import kernel, reference
from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS, attributes_from_node
from onnx_masked_rnn.reference import FUNCTIONS

__all__ = [
    "BUILTIN",
    "OnnxReferenceBackend",
    "OnnxRuntimeBackend",
    "OnnxRuntimeKernelBackend",
    "OnnxRuntimeNoOptBackend",
    "OpenVINOBackend",
    "ReferenceBackend",
    "TractBackend",
    "missing_package",
    "resolve",
]


class _Rep:
    """A prepared model: ``run(inputs)`` -> outputs, as ``onnx.backend.base.BackendRep``."""

    def __init__(self, run: Callable[[list[np.ndarray]], Sequence[np.ndarray]]) -> None:
        self._run = run

    def run(self, inputs: Sequence[np.ndarray], **kwargs: Any) -> list[np.ndarray]:
        return list(self._run(list(inputs)))


class _CPUBackend:
    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


class OnnxRuntimeBackend(_CPUBackend):
    """onnxruntime ``InferenceSession`` on ``CPUExecutionProvider``, one intra-op thread, every
    graph optimization enabled (onnxruntime's default)."""

    requires = "onnxruntime"
    optimization_level = "ORT_ENABLE_ALL"

    @classmethod
    def session_options(cls) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, cls.optimization_level)
        options.log_severity_level = 4  # errors come back as exceptions; do not log them too
        return options

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> _Rep:
        options = cls.session_options()
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return _Rep(lambda inputs: session.run(None, dict(zip(names, inputs))))


class OnnxRuntimeNoOptBackend(OnnxRuntimeBackend):
    """onnxruntime with graph optimizations disabled (``ORT_DISABLE_ALL``): the graph as written,
    without the constant folding and shape propagation that can hide a graph's omissions."""

    optimization_level = "ORT_DISABLE_ALL"


class OnnxRuntimeKernelBackend(OnnxRuntimeBackend):
    """onnxruntime as ``onnxruntime``, with the package's native kernel registered
    (``onnx_masked_rnn.kernel.session``): the masked nodes run on it. A node the kernel would not
    cover is an error here, not a silent fallback to its expansion; a graph without a masked node
    (the expanded variants) is skipped."""

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this backend cannot run here (the kernel library was not built), or None."""
        try:
            kernel.library_path()
        except kernel.KernelNotBuiltError as error:
            return str(error)
        return None

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> _Rep:
        if not any(n.domain == DOMAIN and n.op_type in OP_SPECS for n in walk_nodes(model.graph.node)):
            raise unittest.SkipTest(
                "expanded variant (standard ops only): no masked node for the kernel to run; "
                "--backend onnxruntime runs these graphs"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("error", kernel.KernelFallbackWarning)
            session = kernel.session(model, cls.session_options(), providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return _Rep(lambda inputs: session.run(None, dict(zip(names, inputs))))


class OpenVINOBackend(_CPUBackend):
    """OpenVINO's CPU plugin through its ONNX frontend, one thread, inference precision pinned to
    float32 (``INFERENCE_PRECISION_HINT``: the plugin otherwise computes in bfloat16 or float16
    where the processor has them)."""

    requires = "openvino"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> _Rep:
        import openvino as ov

        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
        compiled = core.compile_model(core.read_model(model.SerializeToString()), "CPU", config)
        # By name: OpenVINO drops graph inputs that no computation uses.
        names = [i.name for i in model.graph.input]
        kept = {name for port in compiled.inputs for name in port.get_names()}

        def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
            results = compiled({n: v for n, v in zip(names, inputs) if n in kept})
            return [results[output] for output in compiled.outputs]

        return _Rep(run)


class TractBackend(_CPUBackend):
    """tract (sonos/tract, its ``tract`` Python package): ``onnx().load(path).into_model()
    .into_runnable()``, the pipeline its documentation gives."""

    requires = "tract"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> _Rep:
        import tract

        with tempfile.TemporaryDirectory() as folder:  # tract loads ONNX from a path only
            path = os.path.join(folder, "model.onnx")
            onnx.save(model, path)
            runnable = tract.onnx().load(path).into_model().into_runnable()
        return _Rep(lambda inputs: [t.to_numpy() for t in runnable.run(inputs)])


class ReferenceBackend(_CPUBackend):
    """The numpy reference (``onnx_masked_rnn.reference``) applied to a one-masked-node graph."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> _Rep:
        nodes = model.graph.node
        if len(nodes) != 1 or nodes[0].domain != DOMAIN or nodes[0].op_type not in OP_SPECS:
            raise unittest.SkipTest(
                "expanded variant (standard ops only): the numpy reference evaluates the masked node "
                "alone; --backend onnx-reference runs these graphs"
            )
        node = nodes[0]
        spec = OP_SPECS[node.op_type]
        attributes = attributes_from_node(node)
        graph_inputs = [i.name for i in model.graph.input]

        def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
            values = dict(zip(graph_inputs, inputs))
            kwargs = {name: values[v] for name, v in zip(spec.inputs, node.input) if v}
            outputs = FUNCTIONS[node.op_type](**kwargs, **attributes)
            return [o for o, name in zip(outputs, node.output) if name]

        return _Rep(run)


def _nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node the onnx-reference backend evaluates with onnx's own ops: main graph,
    subgraphs, local functions other than the masked ops' bodies (``reference.OPS`` runs those)."""
    yield from walk_nodes(model.graph.node)
    for function in model.functions:
        if not _is_masked_op_body(function):
            yield from walk_nodes(function.node)


def _is_masked_op_body(function: onnx.FunctionProto) -> bool:
    """A MaskedLSTM/GRU/RNN body: the onnx-reference backend runs those ops with reference.OPS."""
    return function.domain == DOMAIN and function.name in OP_SPECS


_DEFAULT_ACTIVATIONS = {s.onnx_op_type: [a.lower() for a in s.default_activations] for s in OP_SPECS.values()}


def onnx_reference_limitation(model: onnx.ModelProto) -> str | None:
    """Why ``onnx.reference`` cannot run this graph, or None.

    Its Scan raises for scan axes or directions other than 0; its LSTM/GRU/RNN silently ignore
    ``sequence_lens``, ``activations`` (always the defaults), ``clip`` and ``input_forget`` (onnx 1.23).
    """
    for node in _nodes(model):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Scan":
            for attr in node.attribute:
                if attr.name.startswith("scan_") and any(attr.ints):
                    return f"onnx.reference's Scan implements only {attr.name} = 0; this graph sets others"
        elif node.op_type in ("LSTM", "GRU", "RNN"):
            if len(node.input) > 4 and node.input[4]:
                return f"onnx.reference's {node.op_type} ignores sequence_lens, which this graph uses"
            defaults = _DEFAULT_ACTIVATIONS[node.op_type]
            for attr in node.attribute:
                names = [a.decode().lower() for a in attr.strings]
                if (
                    attr.name == "clip"
                    or (attr.name == "input_forget" and attr.i)
                    or (attr.name == "activations" and names not in (defaults, defaults * 2))
                ):
                    return f"onnx.reference's {node.op_type} ignores {attr.name}, which this graph sets"
    return None


class OnnxReferenceBackend(_CPUBackend):
    """``onnx.reference.ReferenceEvaluator(model, new_ops=reference.OPS)``."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> _Rep:
        reason = onnx_reference_limitation(model)
        if reason:
            raise unittest.SkipTest(reason)
        # The masked ops' bodies are never called (OPS takes precedence), but the evaluator would
        # still load them and trip over their reverse Scans: drop them.
        model = onnx.ModelProto.FromString(model.SerializeToString())
        kept = [f for f in model.functions if not _is_masked_op_body(f)]
        del model.functions[:]
        model.functions.extend(kept)
        evaluator = ReferenceEvaluator(model, new_ops=reference.OPS)
        names = [i.name for i in model.graph.input]
        return _Rep(lambda inputs: evaluator.run(None, dict(zip(names, inputs))))


BUILTIN: dict[str, Any] = {
    "onnxruntime": OnnxRuntimeBackend,
    "onnxruntime-noopt": OnnxRuntimeNoOptBackend,
    "onnxruntime-kernel": OnnxRuntimeKernelBackend,
    "openvino": OpenVINOBackend,
    "tract": TractBackend,
    "reference": ReferenceBackend,
    "onnx-reference": OnnxReferenceBackend,
}


def missing_package(spec: str) -> str | None:
    """The Python package a built-in backend needs and that is not installed, or None (for
    ``onnxruntime-kernel``, whose package is this one: its library when that was not built)."""
    backend = BUILTIN.get(spec)
    package = getattr(backend, "requires", None)
    if package and importlib.util.find_spec(package) is None:
        return package
    unavailable = getattr(backend, "unavailable", None)
    return "onnx_masked_rnn's kernel library" if unavailable and unavailable() else None


def resolve(spec: str) -> Any:
    """A built-in backend by name, or ``module:Name`` (``module`` alone when the module itself has
    ``prepare``) for any object with onnx's ``Backend`` interface.

    Sets ``ALLOW_RELEASED_ONNX_OPSET_ONLY=0`` unless already set, before importing the module:
    ``onnxruntime.backend`` otherwise refuses every model with a custom domain. A module that
    cannot be imported (or raises while it loads) is a ``ValueError`` naming it. The runner calls
    this in each backend's worker process (``worker``), where a module that hangs costs the
    ``--timeout``, not the run.
    """
    if spec in BUILTIN:
        unavailable = getattr(BUILTIN[spec], "unavailable", None)
        reason = unavailable() if unavailable else None
        if reason:
            raise ValueError(f"--backend {spec!r}: {reason}")
        package = missing_package(spec)
        if package:
            raise ValueError(f"--backend {spec!r} needs the {package!r} package: pip install {package}")
        return BUILTIN[spec]
    module_name, _, attr = spec.partition(":")
    os.environ.setdefault("ALLOW_RELEASED_ONNX_OPSET_ONLY", "0")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"--backend {spec!r}: cannot import {module_name!r}: {exc}") from None
    except Exception as exc:  # the module raised while it loaded; its first line says what
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(
            f"--backend {spec!r}: cannot import {module_name!r}: {type(exc).__name__}: {first}"
        ) from None
    backend = getattr(module, attr, None) if attr else module
    if backend is None:
        raise ValueError(f"--backend {spec!r}: module {module_name!r} has no attribute {attr!r}")
    missing = [m for m in ("prepare", "supports_device") if not callable(getattr(backend, m, None))]
    if missing:
        raise ValueError(f"--backend {spec!r} lacks {missing} of onnx's Backend interface")
    return backend
