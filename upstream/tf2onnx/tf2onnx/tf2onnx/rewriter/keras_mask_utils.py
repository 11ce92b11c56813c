# SPDX-License-Identifier: Apache-2.0


"""
tf2onnx.rewriter.keras_mask_utils - the masked step of Keras' backend.rnn, for the TF2 RNN rewriters.

Keras (Keras 3 and tf_keras) runs a masked recurrent layer as a while loop whose step selects, with
the step's mask (a TensorListGetItem of a loop input): output = where(mask, h, previous output)
("carry", the previous output a loop variable starting at zeros) or where(mask, h, zeros) ("zero",
the zeros loop-invariant: zero_output_for_mask, which Bidirectional asks for with return_sequences),
and every state where(mask, new, old). The rewriters turn such a loop into one ai.onnx.preview
masked node (tf2onnx/masked_rnn.py).
"""

from tf2onnx import logging, masked_rnn
from tf2onnx.graph_builder import GraphBuilder

logger = logging.getLogger(__name__)

SELECTS = ("Select", "SelectV2")


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
