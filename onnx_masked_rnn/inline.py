"""Give a model's MaskedLSTM/GRU/RNN nodes their function bodies, or replace the nodes by them.

``attach_functions(model)`` keeps the masked nodes and adds the model-local ``FunctionProto`` each
calls; ``inline(model, strategy)`` replaces every masked node (main graph, Loop/If/Scan bodies at
any depth, model-local functions) by its body, leaving standard ``ai.onnx`` ops only. Bodies are
built at the model's ai.onnx opset (18 to the newest onnx knows; an older model is refused).
Both take ``ai.onnx.preview`` masked nodes (what patched tf2onnx emits) as the package's
(``preview.from_preview``).

Before anything is built, every masked node is checked where its inputs' types and shapes are
known (by onnx's shape inference with the package's schemas, so that types flow from one masked
node to the next; ``onnx.defs`` is left as it was found; in the scope the node is in: a node
inside a model-local function is checked with the types of the function's call site): the op's
own shape rules (``attributes.infer_shapes``), ``X`` of a float type, the float inputs of ``X``'s
type, ``sequence_lens`` int32, ``mask`` bool. Errors name the node and the input. ``X``'s element
type must be known: the bodies' Scan graphs state it.

One function per configuration: IR-10 function overloads
---------------------------------------------------------
A body is specialised to its node's :class:`~onnx_masked_rnn.functions.Configuration`, so two
MaskedLSTM nodes configured differently need two bodies under one op name. Each body is a
model-local function whose ``FunctionProto.overload`` is a key derived from the configuration,
and each node names its body in ``NodeProto.overload`` (IR version 10; the model's IR version is
raised to it). onnxruntime 1.32 resolves such calls in the main graph and in Loop/If/Scan bodies,
``onnx.checker.check_model(full_check=True)`` and ``onnx.inliner`` accept them, and the nodes keep
their op type and attributes. Rejected alternatives: renaming the op per configuration loses the
op type that schemas, runtimes and readers rely on; one generic body branching on attribute
references cannot express the activation list and costs an ``If`` per step.

One onnxruntime 1.32 limitation shapes the rule: it does not resolve overloads for calls made
inside a model-local function ("MaskedRNN(-1) is not a registered function/op"). A configuration
used inside local functions therefore gets the default overload ``""`` when it is the only one of
its op used there; with several, those nodes are replaced by their bodies inside the function (the
one case where ``attach_functions`` does not keep a masked node). Both rules are idempotent.

Scan forms
----------
``scan_form="portable"`` (the default) passes the cell's weights to each Scan body as pass-through
Scan state and types the body's inputs and outputs: the form the specification prints, which every
runtime tried accepts (OpenVINO rejects outer-scope reads, OpenVINO and tract need typed body
inputs). ``"capture"`` lets the body read the weights from the enclosing graph, which spares
onnxruntime a copy of each weight per step (docs/speed.md has the recorded numbers). The
default is the portable form because the Scan body's job is to run everywhere: onnxruntime users
deploy with ``inline(model, "native")``, which is faster than either form.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator

import onnx
import onnx.inliner
import onnx_ir as ir
from onnx import helper

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn._walk import graphs, walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS, infer_shapes, parse_node
from onnx_masked_rnn.functions import (
    FLOAT_TYPES,
    MIN_OPSET,
    Configuration,
    build_scan_function,
    check_form,
    check_opset,
)
from onnx_masked_rnn.native import build_native_function
from onnx_masked_rnn.preview import from_preview
from onnx_masked_rnn.schemas import registered_schemas

__all__ = ["DEFAULT_SCAN_FORM", "attach_functions", "inline"]

DEFAULT_SCAN_FORM = "portable"
"""The Scan form ``inline`` and ``attach_functions`` build unless told otherwise (see above)."""

Builder = Callable[[Configuration, int, str], onnx.FunctionProto]
Types = dict[str, tuple[int, list[int | str | None] | None]]  # value name -> (element type, dims)
_OVERLOAD_IR_VERSION = 10
_LOCAL_FUNCTION_IR_VERSION = 8


def _builder(strategy: str) -> Builder:
    if strategy == "scan":
        return build_scan_function
    if strategy == "native":
        return build_native_function
    raise ValueError(f"strategy must be 'scan' or 'native', got {strategy!r}")


def _is_masked(node: onnx.NodeProto) -> bool:
    return node.domain == DOMAIN and node.op_type in OP_SPECS


def _is_body(function: onnx.FunctionProto) -> bool:
    """Whether ``function`` is the body of a masked op (which this module generates)."""
    return function.domain == DOMAIN and function.name in OP_SPECS


def _model_opset(model: onnx.ModelProto) -> int:
    """The model's ai.onnx opset, checked to be one the bodies can be built at."""
    versions = {o.domain: o.version for o in model.opset_import}
    domain_version = versions.get(DOMAIN, OPSET_VERSION)
    if domain_version != OPSET_VERSION:
        raise ValueError(
            f"the model imports domain {DOMAIN!r} at version {domain_version}; "
            f"only version {OPSET_VERSION} is defined"
        )
    opset = versions.get("", versions.get("ai.onnx", MIN_OPSET))
    check_opset(opset)
    return opset


# Types and shapes, by scope -------------------------------------------------------------------


def _collect(graph: onnx.GraphProto) -> Types:
    """The element type and shape of every value ``graph`` and its subgraphs declare."""
    types: Types = {}
    for g in graphs(graph):
        for initializer in g.initializer:
            types[initializer.name] = (initializer.data_type, list(initializer.dims))
        for info in (*g.input, *g.value_info, *g.output):
            tensor = info.type.tensor_type
            dims = None
            if tensor.HasField("shape"):
                dims = [
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in tensor.shape.dim
                ]
            types[info.name] = (tensor.elem_type, dims)
    return types


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's shape inference with the package's schemas, so that types flow through masked nodes
    (a masked node fed by another); ``onnx.defs`` is left as it was."""
    with registered_schemas():
        try:
            return onnx.shape_inference.infer_shapes(model)
        except Exception:  # inference is a best effort; the types the model states still count
            return model


def _scope_types(model: onnx.ModelProto) -> tuple[Types, dict[tuple[str, str], Types]]:
    """What is known of the values of the main graph (with its subgraphs) and of each model-local
    function, the latter inferred from the function's first call site (in the main graph, or in a
    function already inferred) with the types known there."""
    main = _collect(_infer(model).graph)
    local: dict[tuple[str, str], Types] = {}
    functions = {(f.domain, f.name): f for f in model.functions if not _is_body(f)}
    scopes = [(walk_nodes(model.graph.node), main)]
    while scopes:
        nodes, types = scopes.pop()
        for call in nodes:
            function = functions.get((call.domain, call.op_type))
            if function is None or (call.domain, call.op_type) in local:
                continue
            inputs = [
                helper.make_tensor_value_info(formal, *types.get(actual, (0, None)))
                for formal, actual in zip(function.input, call.input)
            ]
            scope = helper.make_model(
                helper.make_graph(list(function.node), "scope", inputs, []),
                opset_imports=list(function.opset_import) or list(model.opset_import),
                ir_version=model.ir_version,
            )
            scope.functions.extend(model.functions)
            local[call.domain, call.op_type] = _collect(_infer(scope).graph)
            scopes.append((walk_nodes(function.node), local[call.domain, call.op_type]))
    return main, local


# Configurations --------------------------------------------------------------------------------


def _configuration(node: onnx.NodeProto, types: Types, strategy: str) -> Configuration:
    """The node's configuration, after checking what is known of its inputs (errors name the node
    and the input). For ``strategy="native"``, ``hidden_size`` comes from ``R`` when omitted."""
    where = f"node {node.name!r} ({node.op_type})"
    try:
        attrs = parse_node(node)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    spec = attrs.spec
    if len(node.input) > len(spec.inputs) or len(node.input) < 3 or not all(node.input[:3]):
        raise ValueError(
            f"{where} must have inputs X, W, R and at most {len(spec.inputs)} inputs "
            f"{list(spec.inputs)}, got {list(node.input)}"
        )
    if not 1 <= len(node.output) <= len(spec.outputs):
        raise ValueError(
            f"{where} must have 1 to {len(spec.outputs)} outputs {list(spec.outputs)}, "
            f"got {list(node.output)}"
        )
    given = {name: value for name, value in zip(spec.inputs, node.input) if value}
    known = {name: types.get(value, (0, None)) for name, value in given.items()}
    dtype = known["X"][0]
    if not dtype:
        raise ValueError(
            f"{where}: the element type of input 'X' ({given['X']!r}) is unknown; the function body "
            "states it (declare the type of the value that feeds X)"
        )
    wanted = {"sequence_lens": onnx.TensorProto.INT32, "mask": onnx.TensorProto.BOOL}
    # A float input is compared with X only once X's type is one the op admits (Configuration
    # below refuses any other, naming X): an int32 X is X's fault, not W's.
    compare_with_x = dtype in FLOAT_TYPES
    for name, (elem, _) in known.items():
        expected = wanted.get(name, dtype)
        if elem and elem != expected and (compare_with_x or name in wanted):
            got, want = (onnx.TensorProto.DataType.Name(t).lower() for t in (elem, expected))
            what = "X's element type" if name not in wanted else "the op's type constraint"
            raise ValueError(f"{where}: input {name!r} ({given[name]!r}) is {got}, expected {want} ({what})")
    try:
        infer_shapes(attrs, [known[n][1] if n in known else None for n in spec.inputs])
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    if strategy == "native" and attrs.hidden_size is None:
        r_shape = known["R"][1]
        if not r_shape or len(r_shape) != 3 or not isinstance(r_shape[2], int) or not r_shape[2]:
            raise ValueError(
                f"{where}: the native expansion needs attribute 'hidden_size', which the node omits, "
                f"and the last axis of its input R {given['R']!r} is not static (shape {r_shape}); "
                "set hidden_size on the node"
            )
        attrs = dataclasses.replace(attrs, hidden_size=r_shape[2])
    present = tuple(name for name in given if name not in ("X", "W", "R"))
    num_outputs = max((i + 1 for i, name in enumerate(node.output) if name), default=1)
    try:
        return Configuration(attrs, present, num_outputs, dtype)
    except ValueError as error:  # an element type the op does not admit (bfloat16, ...)
        raise ValueError(f"{where}: {error}") from None


def _overload(configuration: Configuration) -> str:
    """A short stable key naming one configuration (a digest of the frozen dataclass's repr)."""
    digest = hashlib.sha256(repr(configuration).encode()).hexdigest()[:12]
    return f"{configuration.attrs.direction}_{digest}"


def _set_overload(node: onnx.NodeProto, overload: str) -> None:
    if overload:
        node.overload = overload
    else:
        node.ClearField("overload")


class _Attacher:
    """Checks every masked node of a model, then attaches the bodies ``builder`` makes."""

    def __init__(self, model: onnx.ModelProto, strategy: str, form: str) -> None:
        check_form(form)
        self.builder, self.strategy, self.form = _builder(strategy), strategy, form
        self.model = from_preview(model)  # a copy, tf2onnx's ai.onnx.preview nodes made the package's
        self.has_masked_nodes = any(True for _ in self.scopes())
        if self.has_masked_nodes:
            self.opset = _model_opset(self.model)
            self.main_types, self.local_types = _scope_types(self.model)
            for _, node, configuration in self.configured():  # every node is checked first
                del node.output[configuration.num_outputs :]  # trailing omitted outputs: the body has none

    def scopes(self) -> Iterator[tuple[onnx.FunctionProto | None, onnx.NodeProto]]:
        """Every masked node with the local function it is in (None: the main graph)."""
        for node in filter(_is_masked, walk_nodes(self.model.graph.node)):
            yield None, node
        for function in self.model.functions:
            if not _is_body(function):
                for node in filter(_is_masked, walk_nodes(function.node)):
                    yield function, node

    def configured(self) -> Iterator[tuple[onnx.FunctionProto | None, onnx.NodeProto, Configuration]]:
        for function, node in self.scopes():
            types = (
                self.main_types
                if function is None
                else self.local_types.get((function.domain, function.name), {})
            )
            yield function, node, _configuration(node, types, self.strategy)

    def body(self, configuration: Configuration, overload: str) -> onnx.FunctionProto:
        body = self.builder(configuration, self.opset, self.form)
        body.overload = overload
        return body

    def expand_in_functions(self, op_types: set[str]) -> None:
        """Replace the ``op_types`` nodes inside model-local functions by their bodies."""
        bodies: dict[tuple[str, str], dict[str, onnx.FunctionProto]] = {}
        for function, node, configuration in self.configured():
            if function is not None and node.op_type in op_types:
                node.overload = _overload(configuration)
                found = bodies.setdefault((function.domain, function.name), {})
                found.setdefault(node.overload, self.body(configuration, node.overload))
        for index, function in enumerate(self.model.functions):
            if (function.domain, function.name) not in bodies:
                continue
            holder = helper.make_model(
                helper.make_graph([], "holder", [], []),
                opset_imports=[
                    helper.make_opsetid("", self.opset),
                    helper.make_opsetid(DOMAIN, OPSET_VERSION),
                ],
                functions=[function, *bodies[function.domain, function.name].values()],
                ir_version=_OVERLOAD_IR_VERSION,
            )
            inlined = onnx.inliner.inline_selected_functions(holder, [(DOMAIN, op) for op in op_types])
            self.model.functions[index].CopyFrom(inlined.functions[0])

    def attach(self) -> onnx.ModelProto:
        """The model whose masked nodes call local functions (see the module docstring)."""
        out = self.model
        in_functions: dict[str, set[Configuration]] = {}
        for function, node, configuration in self.configured():
            if function is not None:
                in_functions.setdefault(node.op_type, set()).add(configuration)
        crowded = {op_type for op_type, configurations in in_functions.items() if len(configurations) > 1}
        if crowded:
            self.expand_in_functions(crowded)
        default = {
            c for op, configurations in in_functions.items() if op not in crowded for c in configurations
        }
        bodies: dict[tuple[str, str], onnx.FunctionProto] = {}
        for _, node, configuration in self.configured():
            overload = "" if configuration in default else _overload(configuration)
            _set_overload(node, overload)
            if (node.op_type, overload) not in bodies:
                bodies[node.op_type, overload] = self.body(configuration, overload)
        # Bodies already in the model (from an earlier call) are replaced, not duplicated.
        kept = [f for f in out.functions if not _is_body(f)]
        del out.functions[:]
        out.functions.extend(kept + [bodies[key] for key in sorted(bodies)])
        imports = {o.domain for o in out.opset_import}
        if "" not in imports and "ai.onnx" not in imports:
            out.opset_import.append(helper.make_opsetid("", self.opset))
        if DOMAIN not in imports:
            out.opset_import.append(helper.make_opsetid(DOMAIN, OPSET_VERSION))
        overloaded = any(overload for _, overload in bodies)
        out.ir_version = max(
            out.ir_version, _OVERLOAD_IR_VERSION if overloaded else _LOCAL_FUNCTION_IR_VERSION
        )
        return out


def attach_functions(model: onnx.ModelProto, *, scan_form: str = DEFAULT_SCAN_FORM) -> onnx.ModelProto:
    """Return ``model`` with its masked nodes kept and the Scan + Where functions they call added
    as model-local functions (one overload per configuration), so onnxruntime runs it as is.

    ``scan_form``: ``"portable"`` or ``"capture"`` Scan bodies (module docstring). Idempotent.
    ``ai.onnx.preview`` masked nodes (tf2onnx's) become the package's first, their preview bodies
    replaced (:func:`~onnx_masked_rnn.preview.from_preview`).
    Raises ``ValueError`` for an ai.onnx opset outside the supported range (naming it), a masked
    node with invalid attributes, or inputs whose known types or shapes the op rejects (naming the
    node and the input).
    """
    attacher = _Attacher(model, "scan", scan_form)
    return attacher.attach() if attacher.has_masked_nodes else attacher.model


def inline(
    model: onnx.ModelProto, strategy: str = "scan", *, scan_form: str = DEFAULT_SCAN_FORM
) -> onnx.ModelProto:
    """Return ``model`` with every masked node replaced by standard ``ai.onnx`` ops.

    ``strategy="scan"``: the operators' function bodies (Scan + Where), in ``scan_form``;
    ``"native"``: the expansion onto the native LSTM/GRU/RNN kernels (a node whose activations a
    native kernel computes differently gets the Scan body). Nodes in Loop/If/Scan bodies at any
    depth and in model-local functions are replaced too, and so are ``ai.onnx.preview`` masked
    nodes (tf2onnx's, :func:`~onnx_masked_rnn.preview.from_preview`); names stay unique; the domain
    import is dropped once unused. Raises ``ValueError`` as :func:`attach_functions` does, and for an
    unknown strategy.
    """
    attacher = _Attacher(model, strategy, scan_form)
    if not attacher.has_masked_nodes:
        return attacher.model
    attached = ir.serde.deserialize_model(attacher.attach())
    ir.passes.common.InlinePass(criteria=lambda f: f.domain == DOMAIN and f.name in OP_SPECS)(attached)
    ir.passes.common.NameFixPass()(attached)  # names the body values a node's empty output left unnamed
    ir.passes.common.RemoveUnusedOpsetsPass()(attached)
    return ir.serde.serialize_model(attached)
