# SPDX-License-Identifier: Apache-2.0


"""
tf2onnx.rewriter.keras_rnn_tf2_rewriter - Rewrites the Keras GRU and SimpleRNN steps that rewrite_gru_tf2
does not match: Keras 3's GRU, GRU(reset_after=False) and SimpleRNN, in Keras 3 and tf_keras.

The step is read backwards from what the while body writes to its output list (through the mask's select
of keras_mask_utils, if any): a GRU cell h = z * h_prev + (1 - z) * hh (Keras' gate order z, r, h is
ONNX's; reset_after=True is linear_before_reset=1) or a SimpleRNN cell h = f(x W + b + h_prev R). The
weights are loop-invariant slices of the layer's kernel, recurrent kernel and bias (Identity, Split,
SplitV, Unpack, Squeeze or StridedSlice of a loop input the body passes on unchanged), evaluated on the
constants the While gets, or computed by ONNX ops where the While gets tensors (a layer called in a
tf.while_loop or tf.cond reads its weights from the body's or branch's inputs; keras_lstm_weights and
keras_gru_weights do the same for rewriter_lstm_tf2 and rewrite_gru_tf2). A masked layer becomes a
MaskedGRU or MaskedRNN node (ai.onnx.preview), an unmasked one a GRU or RNN node.

A while loop that runs a Keras recurrent layer (it reads its step from one TensorList and writes its
output to another) and that no rewriter converts keeps tf2onnx's conversion (a Loop), and its name
(the layer's) is logged with the reason.
"""

import numpy as np

from tf2onnx import logging, utils
from tf2onnx.graph_builder import GraphBuilder
from tf2onnx.rewriter import keras_mask_utils
from tf2onnx.rewriter.gru_rewriter import GRUUnitRewriter
from tf2onnx.rewriter.keras_mask_utils import skip_identities
from tf2onnx.rewriter.unit_rnn_rewriter_base import UnitRnnContext
from tf2onnx.tf_loader import find_function

logger = logging.getLogger(__name__)

# pylint: disable=missing-docstring

ADDS = ("Add", "AddV2", "BiasAdd")
# the activations that are ONNX GRU and RNN activation functions with the same definition
ACTIVATIONS = ("Sigmoid", "Tanh", "Relu")
NOT_A_CELL = (
    "its step is not a Keras LSTM, GRU or SimpleRNN cell of %s activations (a custom cell or activation?)"
    % "/".join(a.lower() for a in ACTIVATIONS)
)


def _const_value(node):
    node = skip_identities(node)
    return node.get_tensor_value(as_list=True) if node is not None and node.is_const() else None


def _strided_slice(node):
    """The index of the StridedSlice ``node`` as a tuple of slices, or None if its bounds are not constant or
    it uses an ellipsis, new axis or shrink axis mask."""
    bounds = [_const_value(i) for i in node.inputs[1:4]]
    if any(b is None for b in bounds):
        return None
    if any(node.get_attr_value(m, 0) for m in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        return None
    begin_mask, end_mask = node.get_attr_value("begin_mask", 0), node.get_attr_value("end_mask", 0)
    return tuple(
        slice(None if begin_mask >> i & 1 else b, None if end_mask >> i & 1 else e, s)
        for i, (b, e, s) in enumerate(zip(*bounds))
    )


def _axis(node, name):
    axis = _const_value(node.inputs[name]) if isinstance(name, int) else node.get_attr_value(name, 0)
    return axis if isinstance(axis, int) else None


def _split_sizes(node):
    """The sizes of the parts of a SplitV ``node`` (one may be -1), or None."""
    sizes = _const_value(node.inputs[1])
    return sizes if isinstance(sizes, list) and sizes.count(-1) <= 1 else None


def _numpy_step(node, index):
    """A function computing output ``index`` of ``node`` from its data input with numpy, or None."""
    op = node.type
    if op == "Identity":
        return lambda v: v
    if op == "Squeeze":
        dims = node.get_attr_value("squeeze_dims", [])
        return lambda v: np.squeeze(v, axis=tuple(dims)) if dims else np.squeeze(v)
    if op == "Split":
        axis, count = _axis(node, 0), node.get_attr_value("num_split")
        return None if axis is None else lambda v: np.split(v, count, axis=axis)[index]
    if op == "SplitV":
        axis, sizes = _axis(node, 2), _split_sizes(node)
        if axis is None or sizes is None:
            return None

        def split_v(v):
            known = [s if s != -1 else v.shape[axis] - sum(sizes) - 1 for s in sizes]
            return np.split(v, np.cumsum(known)[:-1], axis=axis)[index]

        return split_v
    if op == "Unpack":
        axis = node.get_attr_value("axis", 0)
        return lambda v: np.take(v, index, axis=axis)
    if op == "StridedSlice":
        index_slices = _strided_slice(node)
        return None if index_slices is None else lambda v: v[index_slices]
    return None


def _onnx_step(node, index):
    """A function making ONNX ops of a graph g that compute output ``index`` of ``node`` from a tensor name,
    (g, name) -> name, or None."""
    op = node.type
    if op == "Identity":
        return lambda g, name: name
    if op == "Squeeze":
        dims = node.get_attr_value("squeeze_dims", [])
        return (lambda g, name: GraphBuilder(g).make_squeeze({"data": name, "axes": dims})) if dims else None
    if op == "Unpack":
        axis = node.get_attr_value("axis", 0)

        def unpack(g, name):
            position = g.make_const(utils.make_name("index"), np.array(index, dtype=np.int64)).output[0]
            return g.make_node("Gather", [name, position], attr={"axis": axis}).output[0]

        return unpack
    if op == "StridedSlice":
        index_slices = _strided_slice(node)
        if index_slices is None or any(s.step is not None and s.step <= 0 for s in index_slices):
            return None
        slices = {
            "starts": [s.start or 0 for s in index_slices],
            "ends": [np.iinfo(np.int64).max if s.stop is None else s.stop for s in index_slices],
            "axes": list(range(len(index_slices))),
            "steps": [s.step or 1 for s in index_slices],
        }
        return lambda g, name: GraphBuilder(g).make_slice({"data": name, **slices})
    if op in ("Split", "SplitV"):
        axis = _axis(node, 0 if op == "Split" else 2)
        sizes = _split_sizes(node) if op == "SplitV" else None
        if axis is None or sizes is not None and -1 in sizes:
            return None
        count = node.get_attr_value("num_split") if sizes is None else len(sizes)

        def split(g, name):
            # opset 18: the sizes as an input, or num_outputs
            if g.opset < 18:
                return None
            if sizes is None:
                parts = g.make_node("Split", [name], attr={"axis": axis, "num_outputs": count}, output_count=count)
            else:
                sizes_input = g.make_const(utils.make_name("sizes"), np.array(sizes, dtype=np.int64)).output[0]
                parts = g.make_node("Split", [name, sizes_input], attr={"axis": axis}, output_count=count)
            return parts.output[index]

        return split
    return None


# the data input of the ops _numpy_step computes (0 if not listed)
DATA_INPUT = {"Split": 1}


def _invariant(g, name):
    """How the tensor ``name`` of the while body ``g`` is computed from a loop input that the body passes on
    unchanged: (the input's index, the ops to apply in order: (numpy function, ONNX function or None)), or
    None."""
    steps = []
    node = g.get_node_by_output(name)
    while node is not None and not node.is_graph_input():
        index = list(node.output).index(name)
        step = _numpy_step(node, index)
        if step is None:
            return None
        # read now: the handlers convert the body's ops before the rewriter replaces the While
        steps.append((step, _onnx_step(node, index)))
        name = node.input[DATA_INPUT.get(node.type, 0)]
        node = g.get_node_by_output(name)
    if node is None:
        return None
    idx = g.input_names.index(name)
    if skip_identities(g.get_node_by_output(g.outputs[idx])) is not node:
        return None
    return idx, steps[::-1]


def _gate_part(g, name, units):
    """(m, k) if the tensor ``name`` of ``g`` is the k-th of the three parts [k units, (k + 1) units) of the
    last axis of a rank-2 tensor (m its node, Identity skipped), else None."""
    node = g.get_node_by_output(name)
    while node is not None and node.type == "Identity":
        name = node.input[0]
        node = g.get_node_by_output(name)
    if node is None:
        return None
    if node.type == "Split" and node.get_attr_value("num_split") == 3 and _axis(node, 0) in (1, -1):
        return skip_identities(node.inputs[1]), list(node.output).index(name)
    if node.type == "SplitV" and _axis(node, 2) in (1, -1):
        sizes = _split_sizes(node)
        if sizes is not None and len(sizes) == 3 and sizes[0] == sizes[1] == units:
            return skip_identities(node.inputs[0]), list(node.output).index(name)
    if node.type == "StridedSlice":
        index = _strided_slice(node)
        if index is not None and len(index) == 2 and index[0] == slice(None, None, 1):
            start, stop, step = index[1].start or 0, index[1].stop, index[1].step
            k = start // units
            if step == 1 and start % units == 0 and (stop == start + units or stop is None and k == 2):
                return skip_identities(node.inputs[0]), k
    return None


class _Cell(object):
    """The while body ``g``, the step input ``x`` and previous state ``h_prev`` (nodes) and the units."""

    def __init__(self, g, x, h_prev, units):
        self.g, self.x, self.h_prev, self.units = g, x, h_prev, units

    def node(self, name):
        return skip_identities(self.g.get_node_by_output(name))

    def pairs(self, node, types):
        """The two inputs of ``node`` (names) in both orders, if its type is one of ``types``."""
        if node is None or node.type not in types or len(node.input) != 2:
            return []
        if node.type == "BiasAdd" and node.data_format != "NHWC":
            return []
        a, b = node.input
        return [(a, b), (b, a)]

    def part(self, name):
        return _gate_part(self.g, name, self.units)

    def matmul(self, name):
        """(a, b) (names) if ``name`` is a MatMul a @ b, else None."""
        node = self.node(name)
        if node is None or node.type != "MatMul":
            return None
        if node.get_attr_value("transpose_a", 0) or node.get_attr_value("transpose_b", 0):
            return None
        return node.input[0], node.input[1]

    def projection(self, node, of_x):
        """(kernel, bias) (bias None when absent) if ``node`` is ``x @ kernel [+ bias]`` (of_x) or
        ``h_prev @ kernel [+ bias]``, else None."""
        if node is None:
            return None
        source = self.x if of_x else self.h_prev
        for a, b in self.pairs(node, ADDS) or [(node.output[0], None)]:
            mm = self.matmul(a)
            if mm is not None and self.node(mm[0]) is source:
                return mm[1], b
        return None

    def gate(self, node, k, x_side, h_side):
        """(f, h part) if ``node`` is f(x_part_k + h_part) with x_part the k-th part of the node ``x_side``
        and h_part the k-th part of ``h_side`` (any tensor if h_side is None), else None."""
        if node is None or len(node.input) != 1:
            return None
        for a, b in self.pairs(self.node(node.input[0]), ("Add", "AddV2")):
            xa = self.part(a)
            if xa is None or xa != (x_side, k):
                continue
            if h_side is None or self.part(b) == (h_side, k):
                return node.type, b
        return None


def _is_one(node):
    value = _const_value(node)
    return value is not None and np.all(np.array(value) == 1)


def match_gru(cell, h):
    """The GRU of the cell output ``h`` (a node): {"kind", "activations", "linear_before_reset", weights
    (tensor names)}, or None."""
    for zh, one_z_hh in cell.pairs(h, ("Add", "AddV2")):
        for z, h_prev in cell.pairs(cell.node(zh), ("Mul",)):
            if cell.node(h_prev) is not cell.h_prev:
                continue
            for one_z, hh in cell.pairs(cell.node(one_z_hh), ("Mul",)):
                one_z = cell.node(one_z)
                if one_z is None or one_z.type != "Sub" or not _is_one(one_z.inputs[0]):
                    continue
                if cell.node(one_z.input[1]) is not cell.node(z):
                    continue
                found = _match_gru_gates(cell, cell.node(z), cell.node(hh))
                if found is not None:
                    return found
    return None


def _match_gru_gates(cell, z, hh):
    if z is None or hh is None or len(z.input) != 1:
        return None
    # the x projection: the operand of z's sum that is the first part of x @ kernel [+ bias]
    x_side = None
    for a, _ in cell.pairs(cell.node(z.input[0]), ("Add", "AddV2")):
        part = cell.part(a)
        if part is not None and part[1] == 0 and cell.projection(part[0], True) is not None:
            x_side = part[0]
    if x_side is None:
        return None
    z_gate = cell.gate(z, 0, x_side, None)
    h_z = cell.part(z_gate[1]) if z_gate is not None else None
    if h_z is None or h_z[1] != 0:
        return None
    h_side = h_z[0]
    h_projection = cell.projection(h_side, False)
    hh_gate = cell.gate(hh, 2, x_side, None)
    if h_projection is None or hh_gate is None:
        return None
    kernel, bias = cell.projection(x_side, True)
    recurrent_kernel, recurrent_bias = h_projection
    recurrent_h = cell.node(hh_gate[1])
    r = None
    for a, b in cell.pairs(recurrent_h, ("Mul",)):
        # reset_after=True: r * (h_prev @ recurrent_kernel + recurrent_bias)[:, 2 units:]
        if cell.part(b) == (h_side, 2):
            r, reset_after, recurrent_kernel_h = cell.node(a), True, None
    if r is None:
        # reset_after=False: (r * h_prev) @ recurrent_kernel[:, 2 units:]
        mm = cell.matmul(recurrent_h.output[0]) if recurrent_h is not None else None
        if mm is None or recurrent_bias is not None:
            return None
        for a, b in cell.pairs(cell.node(mm[0]), ("Mul",)):
            if cell.node(b) is cell.h_prev:
                r, reset_after, recurrent_kernel_h = cell.node(a), False, mm[1]
    r_gate = cell.gate(r, 1, x_side, h_side)
    if r_gate is None or r_gate[0] != z_gate[0]:
        return None
    return {
        "kind": "GRU",
        "activations": [z_gate[0], hh_gate[0]],
        "linear_before_reset": int(reset_after),
        "kernel": kernel,
        "bias": bias,
        "recurrent_kernel": recurrent_kernel,
        "recurrent_kernel_h": recurrent_kernel_h,
        "recurrent_bias": recurrent_bias,
    }


def match_simple_rnn(cell, h):
    """The SimpleRNN of the cell output ``h``: f(x @ kernel [+ bias] + h_prev @ recurrent_kernel), or None."""
    if len(h.input) != 1:
        return None
    for a, b in cell.pairs(cell.node(h.input[0]), ("Add", "AddV2")):
        x_projection = cell.projection(cell.node(a), True)
        h_mm = cell.matmul(b)
        if x_projection is None or h_mm is None or cell.node(h_mm[0]) is not cell.h_prev:
            continue
        return {
            "kind": "RNN",
            "activations": [h.type],
            "kernel": x_projection[0],
            "bias": x_projection[1],
            "recurrent_kernel": h_mm[1],
        }
    return None


WEIGHTS = ("kernel", "bias", "recurrent_kernel", "recurrent_kernel_h", "recurrent_bias")


def _match_body(g):
    """The Keras GRU or SimpleRNN step of the while body ``g``: its context, {"reason"} if the body runs a
    Keras recurrent layer that cannot be rewritten, or None if it runs none."""
    set_items = [n for n in g.get_nodes() if n.type == "TensorListSetItem" and n.inputs[0].is_graph_input()]
    get_items = [n for n in g.get_nodes() if n.type == "TensorListGetItem" and n.inputs[0].is_graph_input()]
    if not set_items or not get_items:
        return None
    not_a_cell = {"reason": NOT_A_CELL}
    if len(set_items) != 1:
        return not_a_cell
    set_item = set_items[0]
    out_idx = g.input_names.index(set_item.input[0])
    written = skip_identities(set_item.inputs[2])
    select = written if keras_mask_utils.is_mask_select(written) else None
    h = skip_identities(select.inputs[1]) if select is not None else written
    # the step input: the TensorListGetItem of the inputs' list that feeds a MatMul
    for get_item in get_items:
        x = get_item
        for h_prev in [n for n in g.get_nodes() if n.is_graph_input()]:
            shape = g.get_shape(h_prev.output[0])
            units = shape[-1] if shape and len(shape) == 2 else -1
            if units is None or units <= 0:
                continue
            cell = _Cell(g, x, h_prev, units)
            found = match_gru(cell, h) or match_simple_rnn(cell, h)
            if found is None:
                continue
            if any(a not in ACTIVATIONS for a in found["activations"]):
                return {"reason": "its activation %s has no exact ONNX form" % found["activations"]}
            weights = {}
            for name in WEIGHTS:
                if found.get(name) is None:
                    continue
                weights[name] = _invariant(g, found[name])
                if weights[name] is None:
                    return {"reason": "its %s is not loop-invariant" % name}
            op_type = "Masked" + found["kind"]
            mask_info = None
            if select is not None:
                mask_info = keras_mask_utils.match_keras_mask(g, op_type, select, h, [(h_prev, h)])
                if mask_info is None:
                    return g.keras_rnn_rewriter_context  # logged
            elif written is not h or any(
                n.type in keras_mask_utils.SELECTS for n in g.find_output_consumers(h.output[0])
            ):
                return not_a_cell
            state_idx = g.input_names.index(h_prev.output[0])
            # the state the body passes on is the cell output (through the mask's select)
            passed_on = skip_identities(g.get_node_by_output(g.outputs[state_idx]))
            if passed_on is not h and (select is None or passed_on.type not in keras_mask_utils.SELECTS):
                return not_a_cell
            return {
                "kind": found["kind"],
                "activations": found["activations"],
                "linear_before_reset": found.get("linear_before_reset"),
                "weights": weights,
                "x_idx": g.input_names.index(x.input[0]),
                "out_idx": out_idx,
                "state_idx": state_idx,
                "units": units,
                "mask": mask_info,
            }
    return not_a_cell


def _value(g, op, weight):
    idx, steps = weight
    name = op.input[idx]
    if not g.is_const(name):
        return None
    value = g.get_tensor_value(name, as_list=False)
    for step, _ in steps:
        value = step(value)
    return value


def _tensor(g, op, weight):
    """The weight (a tensor of ``g``) that the body of the While ``op`` computes from a loop input that is no
    constant (a layer called in a tf.while_loop or tf.cond: the body's or branch's input), or None."""
    idx, steps = weight
    name = op.input[idx]
    for _, step in steps:
        name = step(g, name) if step is not None else None
        if name is None:
            return None
    return name


def _make_rnn_node(g, context, x, initial_state, weights):
    """An ONNX RNN node of the Keras SimpleRNN weights."""
    kernel, bias, recurrent_kernel = weights["kernel"], weights.get("bias"), weights["recurrent_kernel"]
    units = recurrent_kernel.shape[-1]
    if bias is None:
        bias = np.zeros([units], dtype=kernel.dtype)
    w = g.make_const(utils.make_name("W"), np.expand_dims(kernel.T, 0)).output[0]
    r = g.make_const(utils.make_name("R"), np.expand_dims(recurrent_kernel.T, 0)).output[0]
    b = g.make_const(utils.make_name("B"), np.concatenate([bias, np.zeros_like(bias)])[None]).output[0]
    return _rnn_node(g, context, x, initial_state, w, r, b)


def _rnn_node(g, context, x, initial_state, w, r, b):
    """An ONNX RNN node of the ONNX inputs W, R, B (tensor names)."""
    units = context["units"]
    x_shape = g.get_shape(x)
    attr = {"direction": "forward", "hidden_size": units, "activations": context["activations"]}
    return g.make_node(
        "RNN",
        [x, w, r, b, utils.ONNX_EMPTY_INPUT, initial_state],
        attr=attr,
        output_count=2,
        shapes=[[x_shape[0], 1, x_shape[1], units], [1, x_shape[1], units]],
        dtypes=[g.get_dtype(x)] * 2,
    )


def _onnx_weights(g, context, weights):
    """The ONNX inputs W, R, B (tensor names) of the Keras weights ``weights`` (tensor names), by ONNX ops."""
    units, dtype = context["units"], utils.map_onnx_to_numpy_type(g.get_dtype(weights["kernel"]))
    gates = 3 if context["kind"] == "GRU" else 1

    def zeros():
        return g.make_const(utils.make_name("zeros"), np.zeros([gates * units], dtype=dtype)).output[0]

    bias = weights.get("bias") or zeros()
    if context["kind"] == "GRU":
        recurrent_kernel = weights["recurrent_kernel"]
        if "recurrent_kernel_h" in weights:
            recurrent_kernel = g.make_node(
                "Concat", [recurrent_kernel, weights["recurrent_kernel_h"]], attr={"axis": 1}
            ).output[0]
        return keras_gru_weights(g, weights["kernel"], recurrent_kernel, bias, weights.get("recurrent_bias") or zeros())
    builder = GraphBuilder(g)

    def transposed(name):
        return builder.make_unsqueeze(
            {"data": g.make_node("Transpose", [name], attr={"perm": [1, 0]}).output[0], "axes": [0]}
        )

    b = builder.make_unsqueeze(
        {"data": g.make_node("Concat", [bias, zeros()], attr={"axis": 0}).output[0], "axes": [0]}
    )
    return transposed(weights["kernel"]), transposed(weights["recurrent_kernel"]), b


def _gru_node(g, context, x, initial_state, w, r, b):
    """An ONNX GRU node of the ONNX inputs W, R, B (tensor names)."""
    unit_context = UnitRnnContext()
    unit_context.attributes["activations"] = context["activations"]
    unit_context.attributes["linear_before_reset"] = context["linear_before_reset"]
    unit_context.onnx_input_ids.update(
        {"X": x, "sequence_lens": "", "initial_state": initial_state, "W": w, "R": r, "B": b}
    )
    unit_context.hidden_size = context["units"]
    return GRUUnitRewriter(g).create_rnn_node(unit_context)


def _make_gru_node(g, context, x, initial_state, weights):
    """An ONNX GRU node of the Keras GRU weights (GRUUnitRewriter's Keras layout)."""
    kernel, recurrent_kernel = weights["kernel"], weights["recurrent_kernel"]
    if "recurrent_kernel_h" in weights:
        recurrent_kernel = np.concatenate([recurrent_kernel, weights["recurrent_kernel_h"]], axis=1)
    units = recurrent_kernel.shape[0]
    zeros = np.zeros([3 * units], dtype=kernel.dtype)
    unit_context = UnitRnnContext()
    unit_context.from_keras = True
    unit_context.weights.update(
        {
            "gate_kernel": kernel,
            "hidden_kernel": recurrent_kernel,
            "gate_bias": weights.get("bias", zeros),
            "hidden_bias": weights.get("recurrent_bias", zeros),
        }
    )
    unit_context.attributes["activations"] = context["activations"]
    unit_context.attributes["linear_before_reset"] = context["linear_before_reset"]
    unit_context.onnx_input_ids["X"] = x
    unit_context.onnx_input_ids["sequence_lens"] = ""
    unit_context.onnx_input_ids["initial_state"] = initial_state
    gru_rewriter = GRUUnitRewriter(g)
    gru_rewriter.process_weights_and_bias(unit_context)
    return gru_rewriter.create_rnn_node(unit_context)


def keras_lstm_weights(g, wx, wh, b, units):
    """The ONNX LSTM inputs W, R, B (tensor names) of a Keras LSTM's kernel ``wx`` [input, 4 units], recurrent
    kernel ``wh`` [units, 4 units] and bias ``b`` [4 units] (or None), tensors of ``g`` that need not be
    constants (a layer called in a tf.while_loop or tf.cond reads its weights from the body's or branch's
    inputs): the gates reordered from Keras' i, f, c, o to ONNX's i, o, f, c by a Gather, the kernels
    transposed, as rewriter_lstm_tf2 does with numpy on constants."""
    dtype = utils.map_onnx_to_numpy_type(g.get_dtype(wx))
    gate = [np.arange(k * units, (k + 1) * units) for k in range(4)]
    order = g.make_const(utils.make_name("iofc"), np.concatenate([gate[0], gate[3], gate[1], gate[2]])).output[0]
    builder = GraphBuilder(g)

    def kernel(name):
        columns = g.make_node("Gather", [name, order], attr={"axis": 1}).output[0]
        transposed = g.make_node("Transpose", [columns], attr={"perm": [1, 0]}).output[0]
        return builder.make_unsqueeze({"data": transposed, "axes": [0]})

    rb = g.make_const(utils.make_name("Rb"), np.zeros([4 * units], dtype=dtype)).output[0]
    wb = g.make_node("Gather", [b, order], attr={"axis": 0}).output[0] if b is not None else rb
    bias = g.make_node("Concat", [wb, rb], attr={"axis": 0}).output[0]
    return kernel(wx), kernel(wh), builder.make_unsqueeze({"data": bias, "axes": [0]})


def keras_gru_weights(g, kernel, recurrent_kernel, bias, recurrent_bias):
    """The ONNX GRU inputs W, R, B (tensor names) of a Keras GRU's kernel [input, 3 units], recurrent kernel
    [units, 3 units], bias and recurrent bias [3 units], tensors of ``g`` that need not be constants (Keras'
    gate order z, r, h is ONNX's): the kernels transposed, as GRUUnitRewriter does with numpy on constants."""
    builder = GraphBuilder(g)

    def unsqueeze(name):
        return builder.make_unsqueeze({"data": name, "axes": [0]})

    def transposed(name):
        return unsqueeze(g.make_node("Transpose", [name], attr={"perm": [1, 0]}).output[0])

    bias = g.make_node("Concat", [bias, recurrent_bias], attr={"axis": 0}).output[0]
    return transposed(kernel), transposed(recurrent_kernel), unsqueeze(bias)


def _rewrite(g, op, context):
    """Replaces the While ``op`` by the node of ``context``; the reason it cannot, or None."""
    weights = {name: _value(g, op, weight) for name, weight in context["weights"].items()}
    if any(value is None for value in weights.values()):
        # a layer called in a tf.while_loop or tf.cond: ONNX ops compute the weights
        weights = {name: _tensor(g, op, weight) for name, weight in context["weights"].items()}
        missing = [name for name, value in weights.items() if value is None]
        if missing:
            return "its %s is neither a constant nor a slice of a tensor ONNX ops take" % missing[0]
        weights = _onnx_weights(g, context, weights)
    tensor_array_inp = op.inputs[context["x_idx"]]
    if tensor_array_inp.type != "TensorListFromTensor":
        return "its input is not a tensor unstacked into a TensorList"
    mask_info = context["mask"]
    mask = keras_mask_utils.outer_mask(g, op, mask_info) if mask_info is not None else None
    if mask_info is not None and mask is None:
        return "its mask is not a tensor unstacked into a TensorList"
    initial_state = GraphBuilder(g).make_unsqueeze({"data": op.input[context["state_idx"]], "axes": [0]})
    if isinstance(weights, tuple):
        make = _gru_node if context["kind"] == "GRU" else _rnn_node
        node = make(g, context, tensor_array_inp.input[0], initial_state, *weights)
    else:
        make = _make_gru_node if context["kind"] == "GRU" else _make_rnn_node
        node = make(g, context, tensor_array_inp.input[0], initial_state, weights)
    if mask is not None:
        keras_mask_utils.make_masked(g, node, "Masked" + context["kind"], 6, mask, mask_info["masked_output"])
    output_ys = [
        n.output[0] for n in g.find_output_consumers(op.output[context["out_idx"]]) if n.type == "TensorListStack"
    ]
    squeeze_output = GraphBuilder(g).make_squeeze({"data": node.output[0], "axes": [1]})
    for output in output_ys:
        g.replace_all_inputs(output, squeeze_output)
    state_squeeze = GraphBuilder(g).make_squeeze({"data": node.output[1], "axes": [0]})
    g.replace_all_inputs(op.output[context["state_idx"]], state_squeeze)
    return None


def rewrite_keras_rnn_tf2(g, ops):
    # a body whose masked layer the LSTM or GRU rewriter kept as a loop has its context (logged) already
    if g.keras_rnn_rewriter_context is None and any(n.type == "TensorListGetItem" for n in ops):
        g.keras_rnn_rewriter_context = _match_body(g)
    for op in ops:
        if not op.is_while():
            continue
        body_graph = find_function(op.get_attr_str("body"))
        context = body_graph.keras_rnn_rewriter_context
        if body_graph.lstm_rewriter_context is not None or body_graph.gru_rewriter_context is not None:
            # an LSTM or GRU step: rewriter_lstm_tf2's or rewrite_gru_tf2's
            continue
        if context is None or not any(g.find_output_consumers(out) for out in op.output):
            # not a recurrent layer, or one that another rewriter converted
            continue
        if "logged" in context:
            continue
        if context.get("reason") is None and keras_mask_utils.keeps_stateful(op):
            continue
        reason = context.get("reason") or _rewrite(g, op, context)
        if reason is not None:
            logger.info("recurrent layer %s kept as a loop: %s", op.name, reason)
    return g.get_nodes()
