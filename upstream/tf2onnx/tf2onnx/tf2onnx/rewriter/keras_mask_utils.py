# SPDX-License-Identifier: Apache-2.0


"""
tf2onnx.rewriter.keras_mask_utils - the masked step of Keras' backend.rnn, for the TF2 RNN rewriters.

Keras (Keras 3 and tf_keras) runs a masked recurrent layer as a while loop whose step selects, with
the step's mask (a TensorListGetItem of a loop input): output = where(mask, h, previous output)
("carry", the previous output a loop variable starting at zeros) or where(mask, h, zeros) ("zero",
the zeros loop-invariant: zero_output_for_mask, which Bidirectional asks for with return_sequences),
and every state where(mask, new, old). The rewriters turn such a loop into one ai.onnx.preview
masked node (tf2onnx/masked_rnn.py).

A layer with stateful=True keeps tf2onnx's conversion: the state it carries from one call to the next is
frozen into a constant initial state, which the graph cannot tell from a layer's zeros, so
tf2onnx.convert.from_keras names those layers (stateful_layers) and tf2onnx.convert.from_function (which
Keras 3's model.export(format="onnx") calls) names the while loops whose outputs the traced function
assigns to variables (stateful_loops), and the rewriters decline those loops.
"""

import contextlib
import re

from tf2onnx import logging, masked_rnn
from tf2onnx.graph_builder import GraphBuilder

logger = logging.getLogger(__name__)

SELECTS = ("Select", "SelectV2")

# (the names of the stateful recurrent layers, the names of all recurrent layers) of the Keras model that
# tf2onnx.convert.from_keras converts
_keras_layers = (frozenset(), frozenset())
# the names of the while loops whose outputs the function that tf2onnx.convert.from_function converts
# assigns to variables (a stateful layer's state for its next call)
_stateful_loops = frozenset()


def _recurrent_layers(layer, found):
    """Appends (name, stateful) of the recurrent layers in ``layer`` (a Keras layer or model) to ``found``."""
    if hasattr(layer, "cell") and hasattr(layer, "stateful"):
        found.append((layer.name, bool(layer.stateful)))
    # Bidirectional's two layers, and the layers of a model (nested models included)
    for sub in [getattr(layer, "forward_layer", None), getattr(layer, "backward_layer", None)]:
        if sub is not None:
            _recurrent_layers(sub, found)
    for sub in getattr(layer, "layers", None) or []:
        _recurrent_layers(sub, found)
    return found


@contextlib.contextmanager
def stateful_layers(model):
    """While converting the Keras ``model``: its recurrent layers with stateful=True keep their loops."""
    global _keras_layers  # pylint: disable=global-statement
    layers = _recurrent_layers(model, [])
    previous = _keras_layers
    _keras_layers = (frozenset(name for name, stateful in layers if stateful), frozenset(name for name, _ in layers))
    try:
        yield
    finally:
        _keras_layers = previous


def _assigned_loops(graph_def):
    """The names of the While ops of ``graph_def`` (its own nodes) one of whose outputs, through Identity ops,
    an AssignVariableOp writes to a variable."""
    nodes = {node.name: node for node in graph_def.node}
    found = set()
    for node in graph_def.node:
        if node.op != "AssignVariableOp" or len(node.input) < 2:
            continue
        source = nodes.get(node.input[1].lstrip("^").split(":")[0])
        while source is not None and source.op == "Identity" and source.input:
            source = nodes.get(source.input[0].lstrip("^").split(":")[0])
        if source is not None and source.op in ("While", "StatelessWhile"):
            found.add(source.name)
    return found


@contextlib.contextmanager
def stateful_loops(concrete_func):
    """While converting the traced ``concrete_func``: the while loops whose outputs it assigns to variables (a
    Keras layer with stateful=True stores its last state so) keep their loops."""
    global _stateful_loops  # pylint: disable=global-statement
    previous = _stateful_loops
    _stateful_loops = frozenset(_assigned_loops(concrete_func.graph.as_graph_def()))
    try:
        yield
    finally:
        _stateful_loops = previous


def stateful_layer(while_op):
    """The name of the stateful Keras layer that runs ``while_op``, or None: the innermost part of its name
    scope that names a recurrent layer of the model (as it is, or without the suffix _N that makes it unique),
    or, for a loop whose outputs the converted function assigns to variables, the innermost part of its name
    scope (the scope Keras gives the layer's call)."""
    if while_op.name in _stateful_loops:
        scopes = while_op.name.split("/")[:-1]
        return scopes[-1] if scopes else while_op.name
    stateful, names = _keras_layers
    if not stateful:
        return None
    for scope in reversed(while_op.name.split("/")[:-1]):
        if scope not in names:
            scope = re.sub(r"_[0-9]+$", "", scope)
        if scope in names:
            return scope if scope in stateful else None
    return None


def keeps_stateful(while_op):
    """Whether ``while_op`` runs a stateful Keras layer (logged): its rewrite is declined."""
    name = stateful_layer(while_op)
    if name is not None:
        logger.info("recurrent layer %s kept as a loop: stateful=True (%s)", name, while_op.name)
    return name is not None


def skip_identities(node):
    while node is not None and node.type == "Identity":
        node = node.inputs[0]
    return node


def is_zeros(g, name):
    """Whether the tensor ``name`` of ``g`` is all zeros by construction (ZerosLike, a zero constant or Fill)."""
    node = skip_identities(g.get_node_by_output(name))
    if node is None:
        return False
    if node.type == "ZerosLike":
        return True
    if node.is_const():
        return not node.get_tensor_value(as_list=False).any()
    if node.type == "Fill" and node.inputs[1].is_const():
        return not node.inputs[1].get_tensor_value(as_list=False).any()
    return False


def is_mask_select(node):
    """Whether ``node`` selects with a step of a mask (a TensorListGetItem)."""
    return node.type in SELECTS and node.inputs[0].type == "TensorListGetItem"


def match_keras_mask(g, op_type, output_select, output, states):
    """The mask of a Keras while body ``g`` for an ``op_type`` layer, or None (logged) when the body is
    not a Keras masked step or the operator cannot be emitted.

    ``output_select`` selects the step's output ``output`` (a node); ``states`` lists (old, new) nodes,
    old a loop input. Returns {"mask_idx", "zeros_idx", "masked_output"}.
    """
    reason = masked_rnn.unavailable(op_type, g.opset)
    info = None if reason else _match(g, output_select, output, states)
    if info is None:
        # the reason is logged once: rewrite_keras_rnn_tf2 does not log the loop again
        g.keras_rnn_rewriter_context = {"logged": reason}
        logger.info(
            "masked %s %s kept as a loop: %s",
            op_type,
            output.name,
            reason or "its while body is not a Keras masked step",
        )
    return info


def _match(g, output_select, output, states):
    cond = output_select.inputs[0]
    if not cond.inputs[0].is_graph_input() or output_select.input[1] != output.output[0]:
        return None
    for old, new in states:
        if not old.is_graph_input():
            return None
        state = skip_identities(g.get_node_by_output(g.outputs[g.input_names.index(old.output[0])]))
        if (
            state is None
            or state.type not in SELECTS
            or state.input[0] != cond.output[0]
            or state.input[1] != new.output[0]
            or state.input[2] != old.output[0]
        ):
            return None
    other = skip_identities(output_select.inputs[2])
    info = {"mask_idx": g.input_names.index(cond.input[0]), "zeros_idx": None}
    if other.is_graph_input():
        # a loop input starting at zeros: the previous output ("carry") if the step passes on its
        # output, zeros throughout ("zero") if the step passes the input on unchanged
        idx = g.input_names.index(other.output[0])
        passed_on = skip_identities(g.get_node_by_output(g.outputs[idx]))
        if passed_on is output_select:
            info["masked_output"] = "carry"
        elif passed_on is other:
            info["masked_output"] = "zero"
        else:
            return None
        info["zeros_idx"] = idx
    elif is_zeros(g, other.output[0]):
        info["masked_output"] = "zero"
    else:
        return None
    return info


def outer_mask(g, while_op, info):
    """The mask tensor ([T, N, 1], time-major) that ``while_op`` unstacks, or None if it is not one or the
    previous output does not start at zeros."""
    mask_list = while_op.inputs[info["mask_idx"]]
    if mask_list.type != "TensorListFromTensor":
        return None
    if info["zeros_idx"] is not None and not is_zeros(g, while_op.input[info["zeros_idx"]]):
        return None
    return mask_list.input[0]


def make_masked(g, node, op_type, mask_index, mask, masked_output):
    """Turns the ONNX recurrent ``node`` into the ai.onnx.preview ``op_type`` with ``mask`` ([T, N, 1])
    as input ``mask_index``."""
    mask_tn = GraphBuilder(g).make_squeeze({"data": mask, "axes": [2]})
    node.type = op_type
    node.domain = masked_rnn.PREVIEW_DOMAIN
    inputs = list(node.input) + [""] * (mask_index - len(node.input))
    g.replace_inputs(node, inputs[:mask_index] + [mask_tn])
    node.set_attr("masked_output", masked_output)
