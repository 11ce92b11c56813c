"""Give a model's MaskedLSTM/GRU/RNN nodes their function bodies, or replace the nodes by them.

``attach_functions(model)`` keeps the masked nodes and adds the model-local ``FunctionProto`` each
calls; ``inline(model, strategy)`` replaces every masked node (main graph, Loop/If/Scan bodies at
any depth, model-local functions) by its body, leaving standard ``ai.onnx`` ops only. Bodies are
built at the model's ai.onnx opset (18 to the newest onnx knows; an older model is refused).

One function per configuration: IR-10 function overloads
---------------------------------------------------------
A body is specialised to its node's attributes and present inputs (:mod:`onnx_masked_rnn.functions`),
so two MaskedLSTM nodes configured differently need two bodies under one op name. Each body is a
model-local function whose ``FunctionProto.overload`` is a key of its configuration, and each node
names its body in ``NodeProto.overload`` (IR version 10; the model's IR version is raised to it).
onnxruntime 1.32 resolves such calls in the main graph and in Loop/If/Scan bodies,
``onnx.checker.check_model(full_check=True)`` and ``onnx.inliner`` accept them, and the nodes keep
their op type and attributes. Rejected alternatives: renaming the op per configuration loses the
op type that schemas, runtimes and readers rely on; one generic body branching on attribute
references cannot express the activation list and costs an ``If`` per step; and
``onnx.inliner`` ignores a function's attribute defaults, which specialised bodies never need.

One onnxruntime 1.32 limitation shapes the rule: it does not resolve overloads for calls made
inside a model-local function ("MaskedRNN(-1) is not a registered function/op"). A configuration
used inside local functions therefore gets the default overload ``""`` when it is the only one of
its op used there; with several, those nodes are replaced by their bodies inside the function (the
one case where ``attach_functions`` does not keep a masked node). Both rules are idempotent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import onnx
import onnx.inliner
from onnx import helper

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn._walk import graphs, walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS, RNNAttributes, parse_node
from onnx_masked_rnn.functions import MIN_OPSET, build_scan_function, check_opset

__all__ = ["attach_functions", "inline"]

Builder = Callable[[RNNAttributes, frozenset[str], int], onnx.FunctionProto]
_OVERLOAD_IR_VERSION = 10
_LOCAL_FUNCTION_IR_VERSION = 8


def _builder(strategy: str) -> Builder:
    if strategy == "scan":
        return build_scan_function
    if strategy == "native":
        from onnx_masked_rnn.native import build_native_function

        return build_native_function
    raise ValueError(f"strategy must be 'scan' or 'native', got {strategy!r}")


def _nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node of the model: main graph, subgraphs, model-local functions and their subgraphs."""
    yield from walk_nodes(model.graph.node)
    for function in model.functions:
        yield from walk_nodes(function.node)


def _is_masked(node: onnx.NodeProto) -> bool:
    return node.domain == DOMAIN and node.op_type in OP_SPECS


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


Configuration = tuple[RNNAttributes, frozenset[str], int]


def _configuration(node: onnx.NodeProto) -> Configuration:
    """The node's attributes, the optional inputs it supplies and how many outputs it lists."""
    try:
        attrs = parse_node(node)
    except ValueError as error:
        raise ValueError(f"node {node.name!r} ({node.op_type}): {error}") from None
    spec = OP_SPECS[node.op_type]
    if len(node.input) > len(spec.inputs) or len(node.input) < 3 or not all(node.input[:3]):
        raise ValueError(
            f"node {node.name!r} ({node.op_type}) must have inputs X, W, R and at most "
            f"{len(spec.inputs)} inputs {list(spec.inputs)}, got {list(node.input)}"
        )
    if not 1 <= len(node.output) <= len(spec.outputs):
        raise ValueError(
            f"node {node.name!r} ({node.op_type}) must have 1 to {len(spec.outputs)} outputs "
            f"{list(spec.outputs)}, got {list(node.output)}"
        )
    present = frozenset(name for name, value in zip(spec.inputs[3:], node.input[3:]) if value)
    return attrs, present, len(node.output)


def _overload(configuration: Configuration) -> str:
    """A short stable key naming one configuration."""
    attrs, present, num_outputs = configuration
    key = repr((attrs, sorted(present), num_outputs))
    return f"{attrs.direction}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _body(builder: Builder, configuration: Configuration, opset: int, overload: str) -> onnx.FunctionProto:
    """The function a node of this configuration calls. A function may not declare more
    outputs than its caller lists, so the trailing outputs the node omits are dropped."""
    attrs, present, num_outputs = configuration
    body = builder(attrs, present, opset)
    del body.output[num_outputs:]
    body.overload = overload
    return body


def _is_body(function: onnx.FunctionProto) -> bool:
    """Whether ``function`` is the body of a masked op (which this module generates)."""
    return function.domain == DOMAIN and function.name in OP_SPECS


def _set_overload(node: onnx.NodeProto, overload: str) -> None:
    if overload:
        node.overload = overload
    else:
        node.ClearField("overload")


def _expand_in_functions(model: onnx.ModelProto, op_types: set[str], builder: Builder, opset: int) -> None:
    """Replace the ``op_types`` nodes inside model-local functions by their bodies, in place."""
    for index, function in enumerate(model.functions):
        nodes = [n for n in walk_nodes(function.node) if _is_masked(n) and n.op_type in op_types]
        if _is_body(function) or not nodes:
            continue
        bodies = {}
        for node in nodes:
            configuration = _configuration(node)
            node.overload = _overload(configuration)
            if node.overload not in bodies:
                bodies[node.overload] = _body(builder, configuration, opset, node.overload)
        scratch = helper.make_model(
            helper.make_graph([], "scratch", [], []),
            opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
            functions=[function, *bodies.values()],
            ir_version=_OVERLOAD_IR_VERSION,
        )
        inlined = onnx.inliner.inline_selected_functions(scratch, [(DOMAIN, op) for op in op_types])
        model.functions[index].CopyFrom(inlined.functions[0])


def _attach(model: onnx.ModelProto, builder: Builder) -> tuple[onnx.ModelProto, bool]:
    """A copy of ``model`` whose masked nodes call local functions built by ``builder``, and
    whether ``model`` had any masked node.

    onnxruntime 1.32 resolves ``NodeProto.overload`` in graphs and their subgraphs but not inside
    model-local functions. So a configuration used inside a local function gets the default
    overload ``""`` when it is the only configuration of its op used inside local functions;
    when there are several, those nodes are replaced by their bodies (the only case in which
    ``attach_functions`` does not keep a masked node). Every other configuration has its key.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    if not any(map(_is_masked, _nodes(out))):
        return out, False
    opset = _model_opset(model)
    in_functions: dict[str, set] = {}
    for function in out.functions:
        if not _is_body(function):
            for node in filter(_is_masked, walk_nodes(function.node)):
                in_functions.setdefault(node.op_type, set()).add(_configuration(node))
    crowded = {op_type for op_type, configurations in in_functions.items() if len(configurations) > 1}
    if crowded:
        _expand_in_functions(out, crowded, builder, opset)
    default = {
        (op, c) for op, configurations in in_functions.items() if op not in crowded for c in configurations
    }

    bodies: dict[tuple[str, str], onnx.FunctionProto] = {}
    for node in filter(_is_masked, _nodes(out)):
        configuration = _configuration(node)
        overload = "" if (node.op_type, configuration) in default else _overload(configuration)
        _set_overload(node, overload)
        if (node.op_type, overload) not in bodies:
            bodies[node.op_type, overload] = _body(builder, configuration, opset, overload)
    # Bodies already in the model (from an earlier call) are replaced, not duplicated.
    kept = [f for f in out.functions if not _is_body(f)]
    del out.functions[:]
    out.functions.extend(kept + [bodies[key] for key in sorted(bodies)])
    if bodies:
        imports = {o.domain for o in out.opset_import}
        if "" not in imports and "ai.onnx" not in imports:
            out.opset_import.append(helper.make_opsetid("", opset))
        if DOMAIN not in imports:
            out.opset_import.append(helper.make_opsetid(DOMAIN, OPSET_VERSION))
        overloaded = any(overload for _, overload in bodies)
        out.ir_version = max(
            out.ir_version, _OVERLOAD_IR_VERSION if overloaded else _LOCAL_FUNCTION_IR_VERSION
        )
    return out, True


def _static_shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """Every value's shape the model states or onnx's shape inference derives, by name, in the
    main graph and its subgraphs (unknown dims are ``None``)."""
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a best effort; the shapes the model states still count
        pass
    shapes: dict[str, list[int | None]] = {}
    for graph in graphs(model.graph):
        for initializer in graph.initializer:
            shapes[initializer.name] = list(initializer.dims)
        for info in (*graph.input, *graph.value_info, *graph.output):
            if info.type.tensor_type.HasField("shape"):
                dims = info.type.tensor_type.shape.dim
                shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return shapes


def _with_hidden_sizes(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose masked nodes all state ``hidden_size``, which the native kernels
    require: a node that omits it gets the last axis of its ``R``, which must be static."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    missing = [n for n in _nodes(out) if _is_masked(n) and "hidden_size" not in {a.name for a in n.attribute}]
    if not missing:
        return out
    shapes = _static_shapes(out)
    for node in missing:
        r_shape = shapes.get(node.input[2]) if len(node.input) > 2 else None
        if not r_shape or len(r_shape) != 3 or not r_shape[2]:
            raise ValueError(
                f"node {node.name!r} ({node.op_type}): the native expansion needs attribute "
                f"'hidden_size', which the node omits, and the last axis of its input R "
                f"{node.input[2]!r} is not static (shape {r_shape}); set hidden_size on the node"
            )
        node.attribute.append(helper.make_attribute("hidden_size", r_shape[2]))
    return out


def attach_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return ``model`` with its masked nodes kept and the Scan + Where functions they call added
    as model-local functions (one overload per configuration), so onnxruntime runs it as is.

    Idempotent. Raises ``ValueError`` for an ai.onnx opset outside the supported range (naming
    it) or a masked node with invalid attributes.
    """
    return _attach(model, build_scan_function)[0]


def inline(model: onnx.ModelProto, strategy: str = "scan") -> onnx.ModelProto:
    """Return ``model`` with every masked node replaced by standard ``ai.onnx`` ops.

    ``strategy="scan"``: the operators' function bodies (Scan + Where); ``"native"``: the
    expansion onto the native LSTM/GRU/RNN kernels. Nodes in Loop/If/Scan bodies at any depth and
    in model-local functions are replaced too; every attribute is bound; names stay unique; the
    domain import is dropped once unused. Raises ``ValueError`` for an unknown strategy or an
    ai.onnx opset outside the supported range.
    """
    builder = _builder(strategy)
    if strategy == "native":
        model = _with_hidden_sizes(model)
    attached, had_masked_nodes = _attach(model, builder)
    if not had_masked_nodes:
        return attached
    ids = [(DOMAIN, op_type) for op_type in OP_SPECS]
    out = onnx.inliner.inline_selected_functions(attached, ids, exclude=False)
    kept = [f for f in out.functions if not _is_body(f)]
    del out.functions[:]
    out.functions.extend(kept)
    if not any(node.domain == DOMAIN for node in _nodes(out)):
        for owner in (out, *out.functions):
            imports = [o for o in owner.opset_import if o.domain != DOMAIN]
            del owner.opset_import[:]
            owner.opset_import.extend(imports)
    return out
