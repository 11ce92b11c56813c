# SPDX-License-Identifier: Apache-2.0


"""
tf2onnx.masked_rnn - the ai.onnx.preview masked recurrent operators (MaskedLSTM).

A Keras recurrent layer given a mask (Masking, Embedding(mask_zero=True) or an explicit mask) keeps
the state at a masked step; its output there repeats the previous output ("carry") or is zero. ONNX's
LSTM can only skip the steps at the end of a row (sequence_lens), so the rewriters used to leave such
a layer as a Loop. The ai.onnx.preview operators take the mask as an input. Each emitted node gets
its function body from onnx's own schema (a context-dependent function), attached as a model-local
function, so that a runtime without a kernel for the operator runs the body.

The bodies are built at the model's ai.onnx opset and need opset 18 or newer: at a lower opset (or
with an onnx that has no such schema) the rewriter keeps the Loop and logs why.
"""

import onnx
from onnx import FunctionProto, TypeProto, defs, helper, shape_inference

from tf2onnx import logging

logger = logging.getLogger(__name__)

PREVIEW_DOMAIN = "ai.onnx.preview"
PREVIEW_VERSION = 1
MIN_OPSET = 18
# Model-local functions with overloads (one per node configuration) need IR version 10.
MIN_IR_VERSION = 10


def unavailable(op_type, opset):
    """Why ``op_type`` of ai.onnx.preview cannot be emitted at ai.onnx ``opset`` (None if it can)."""
    if opset < MIN_OPSET:
        return "its function body needs ai.onnx opset %d or newer (converting at %d)" % (MIN_OPSET, opset)
    if not defs.has(op_type, PREVIEW_DOMAIN):
        return "the installed onnx %s has no %s.%s schema" % (onnx.__version__, PREVIEW_DOMAIN, op_type)
    return None


def _masked_nodes(graph):
    """The ai.onnx.preview nodes of ``graph`` and of its subgraphs, each with the graph holding it."""
    for node in graph.node:
        if node.domain == PREVIEW_DOMAIN:
            yield node, graph
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _masked_nodes(subgraph)


def _types(model):
    """The type of every value of ``model`` that shape inference knows, subgraphs included."""
    inferred = shape_inference.infer_shapes(model)
    types = {}

    def collect(graph):
        for value in list(graph.input) + list(graph.value_info) + list(graph.output):
            types[value.name] = value.type
        for initializer in graph.initializer:
            types[initializer.name] = helper.make_tensor_type_proto(initializer.data_type, initializer.dims)
        for node in graph.node:
            for attribute in node.attribute:
                for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                    collect(subgraph)

    collect(inferred.graph)
    return types


def attach_functions(model):
    """Adds to ``model`` (in place) the ai.onnx.preview import and, for each masked node, its function
    body from onnx's schema as a model-local function (one overload per node)."""
    nodes = list(_masked_nodes(model.graph))
    if not nodes:
        return model
    if not any(opset.domain == PREVIEW_DOMAIN for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(PREVIEW_DOMAIN, PREVIEW_VERSION))
    model.ir_version = max(model.ir_version, MIN_IR_VERSION)
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    types = _types(model)
    known = {}
    for node, _ in nodes:
        schema = defs.get_schema(node.op_type, PREVIEW_VERSION, PREVIEW_DOMAIN)
        input_types = [types.get(name, TypeProto()) if name else TypeProto() for name in node.input]
        unknown = [name for name in node.input if name and name not in types]
        if unknown:
            raise ValueError("%s node %s: the types of inputs %s are unknown" % (node.op_type, node.name, unknown))
        body = schema.get_context_dependent_function(
            node.SerializeToString(), [t.SerializeToString() for t in input_types]
        )
        function = FunctionProto()
        function.ParseFromString(body)
        key = function.SerializeToString()
        if key not in known:
            function.domain = PREVIEW_DOMAIN
            function.name = node.op_type
            function.overload = "%s_%d" % (node.op_type, len(known))
            if not any(o.domain in ("", "ai.onnx") for o in function.opset_import):
                function.opset_import.append(helper.make_opsetid("", opset))
            known[key] = function
            model.functions.append(function)
        node.overload = known[key].overload
    logger.info("attached the function bodies of %d ai.onnx.preview nodes (%d overloads)", len(nodes), len(known))
    return model
