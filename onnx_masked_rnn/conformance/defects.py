"""Runtime defects behind the conformance cases that still fail, each proved by a minimal plain-ONNX
model (standard ops only, nothing of this package) whose expected outputs come from numpy or the
numpy reference (with no mask and default ``masked_output`` it computes ONNX's LSTM/GRU/RNN).

``known_limitations.json`` names, per backend, every case of the suite that does not pass and the
defects behind it; the tests check a run of the suite against it exactly and check that every
defect it names still reproduces (:func:`reproduce`), so a fix upstream is noticed too.

A defect's ``status`` is the outcome it causes (``outcomes.STATUSES``); ``workaround`` says how the
package's graphs avoid it (the portable Scan form), so that no case of the suite meets it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnx_masked_rnn._walk import subgraphs, walk_nodes
from onnx_masked_rnn.conformance.backends import resolve
from onnx_masked_rnn.conformance.case import compare
from onnx_masked_rnn.conformance.outcomes import Outcome
from onnx_masked_rnn.reference import masked_lstm, masked_rnn

__all__ = ["DEFECTS", "Defect", "Repro", "reproduce"]

OPSET = 22


@dataclasses.dataclass(frozen=True)
class Repro:
    """A plain-ONNX model, its inputs (in graph-input order) and the outputs ONNX defines."""

    model: onnx.ModelProto
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-6


@dataclasses.dataclass(frozen=True)
class Defect:
    """A defect of one runtime and how to recognise it: an outcome of ``status`` on one of
    ``backends`` whose detail matches ``message`` (a regex) and, when given, whose model satisfies
    ``model_has``."""

    backends: tuple[str, ...]  # the built-in backends (runtime and variant) that show it
    status: str  # the outcome it causes
    summary: str
    repro: Callable[[], Repro]
    message: str = ""
    model_has: Callable[[onnx.ModelProto, list[np.ndarray]], bool] | None = None
    workaround: str = ""
    witness: str = "onnxruntime"  # a backend on which the repro passes: model and expected values are right

    def explains(
        self, backend: str, outcome: Outcome, model: onnx.ModelProto, inputs: list[np.ndarray]
    ) -> bool:
        return (
            backend in self.backends
            and outcome.status == self.status
            and re.search(self.message, outcome.detail) is not None
            and (self.model_has is None or self.model_has(model, inputs))
        )


def _model(
    nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray], **kw: object
) -> onnx.ModelProto:
    """A model of ``nodes`` whose graph inputs and outputs have the types and shapes of the given
    arrays, at ai.onnx opset 22, IR version 10."""

    def infos(arrays: dict[str, np.ndarray]) -> list[onnx.ValueInfoProto]:
        return [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in arrays.items()
        ]

    graph = helper.make_graph(nodes, "repro", infos(inputs), infos(outputs))
    opsets = [helper.make_opsetid("", OPSET), *kw.pop("opsets", [])]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10, **kw)
    onnx.checker.check_model(model)
    return model


def _lstm(dtype: type = np.float32, peepholes: bool = False, **attributes: object) -> Repro:
    """One forward LSTM node, seq_length 3, batch 2, input 2, hidden 3, random weights."""
    rng = np.random.default_rng(0)
    T, N, I, H = 3, 2, 2, 3
    values = {
        "X": rng.standard_normal((T, N, I)),
        "W": rng.standard_normal((1, 4 * H, I)),
        "R": rng.standard_normal((1, 4 * H, H)),
        "B": rng.standard_normal((1, 8 * H)),
    }
    if peepholes:
        values["P"] = rng.standard_normal((1, 3 * H))
    values = {k: v.astype(dtype) for k, v in values.items()}
    names = ["X", "W", "R", "B", "", "", "", "P" if peepholes else ""]
    node = helper.make_node(
        "LSTM", names[: len(names) if peepholes else 4], ["Y", "Y_h", "Y_c"], hidden_size=H, **attributes
    )
    expected = masked_lstm(**values, hidden_size=H, **attributes)
    model = _model([node], values, dict(zip(("Y", "Y_h", "Y_c"), expected)))
    return Repro(model, list(values.values()), list(expected))


def _lstm_batch_2_no_initial_state() -> Repro:
    """One LSTM node, batch 2, no ``initial_h``/``initial_c`` (nor B)."""
    rng = np.random.default_rng(0)
    values = {
        "X": rng.standard_normal((3, 2, 2)).astype(np.float32),
        "W": rng.standard_normal((1, 12, 2)).astype(np.float32),
        "R": rng.standard_normal((1, 12, 3)).astype(np.float32),
    }
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Y_h", "Y_c"], hidden_size=3)
    expected = masked_lstm(**values, hidden_size=3)
    model = _model([node], values, dict(zip(("Y", "Y_h", "Y_c"), expected)))
    return Repro(model, list(values.values()), list(expected))


def _rnn(activation: str, **attributes: object) -> Repro:
    """One forward RNN node with the given activation, seq_length 3, batch 2, input 2, hidden 3."""
    rng = np.random.default_rng(0)
    values = {
        "X": rng.standard_normal((3, 2, 2)).astype(np.float32),
        "W": rng.standard_normal((1, 3, 2)).astype(np.float32),
        "R": rng.standard_normal((1, 3, 3)).astype(np.float32),
    }
    node = helper.make_node(
        "RNN", ["X", "W", "R"], ["Y", "Y_h"], hidden_size=3, activations=[activation], **attributes
    )
    expected = masked_rnn(**values, hidden_size=3, activations=[activation], **attributes)
    model = _model([node], values, dict(zip(("Y", "Y_h"), expected)))
    return Repro(model, list(values.values()), list(expected))


def _float64_tanh() -> Repro:
    x = np.array([0.1, 0.2, 0.3], np.float64)
    node = helper.make_node("Tanh", ["x"], ["y"])
    return Repro(_model([node], {"x": x}, {"y": np.tanh(x)}), [x], [np.tanh(x)], rtol=1e-10, atol=1e-12)


def _float64_sigmoid() -> Repro:
    x = np.array([0.1, 0.2, 0.3], np.float64)
    node = helper.make_node("Sigmoid", ["x"], ["y"])
    return Repro(
        _model([node], {"x": x}, {"y": 1 / (1 + np.exp(-x))}),
        [x],
        [1 / (1 + np.exp(-x))],
        rtol=1e-10,
        atol=1e-12,
    )


def _local_function() -> Repro:
    """A node of a custom domain whose model-local function is ``Add(x, x)``."""
    x = np.array([1.0, 2.0], np.float32)
    function = helper.make_function(
        "repro.domain",
        "Double",
        ["x"],
        ["y"],
        [helper.make_node("Add", ["x", "x"], ["y"])],
        [helper.make_opsetid("", OPSET)],
    )
    node = helper.make_node("Double", ["x"], ["y"], domain="repro.domain")
    model = _model(
        [node],
        {"x": x},
        {"y": 2 * x},
        functions=[function],
        opsets=[helper.make_opsetid("repro.domain", 1)],
    )
    return Repro(model, [x], [2 * x])


def _if_branch_shapes() -> Repro:
    """``If(Size(x) == 0)``: then one row of zeros (``ConstantOfShape([1, ...])``), else ``x``; the
    native expansion's guard that keeps empty sizes off the native op is this If."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)

    def branch(name: str, node: onnx.NodeProto) -> onnx.GraphProto:
        return helper.make_graph(
            [node], name, [], [helper.make_tensor_value_info(node.output[0], 1, [None, None])]
        )

    zero = onnx.numpy_helper.from_array(np.zeros(1, np.float32), "zero")
    nodes = [
        helper.make_node(
            "Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [1], [1])
        ),
        helper.make_node(
            "Constant", [], ["none"], value=helper.make_tensor("none", TensorProto.INT64, [], [0])
        ),
        helper.make_node("Shape", ["x"], ["row"], start=1),
        helper.make_node("Concat", ["one", "row"], ["shape"], axis=0),
        helper.make_node("Size", ["x"], ["size"]),
        helper.make_node("Equal", ["size", "none"], ["empty"]),
        helper.make_node(
            "If",
            ["empty"],
            ["y"],
            then_branch=branch("then", helper.make_node("ConstantOfShape", ["shape"], ["zeros"], value=zero)),
            else_branch=branch("else", helper.make_node("Identity", ["x"], ["x_out"])),
        ),
    ]
    return Repro(_model(nodes, {"x": x}, {"y": x}), [x], [x])


def _cumsum(dtype: type) -> Repro:
    """``CumSum(Cast(mask, dtype), axis=0)``: how the bodies count the processed steps."""
    mask = np.array([[True, False], [True, True], [False, True], [True, True]])
    nodes = [
        helper.make_node("Cast", ["mask"], ["m"], to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype))),
        helper.make_node(
            "Constant", [], ["axis"], value=helper.make_tensor("axis", TensorProto.INT64, [], [0])
        ),
        helper.make_node("CumSum", ["m", "axis"], ["y"]),
    ]
    y = np.cumsum(mask, 0).astype(dtype)
    return Repro(_model(nodes, {"mask": mask}, {"y": y}), [mask], [y])


def _scan_matmul_state() -> Repro:
    """``h_next = x[t] + h @ R`` as a Scan, each step's ``h_next`` also its scan output ``y``."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 3)).astype(np.float32)
    R = rng.standard_normal((3, 3)).astype(np.float32)
    h0 = np.zeros((2, 3), np.float32)
    info = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, [None, None]) for n in ("h", "x_t", "h_next", "y")
    ]
    nodes = [
        helper.make_node("Constant", [], ["R"], value=onnx.numpy_helper.from_array(R, "R")),
        helper.make_node("MatMul", ["h", "R"], ["hR"]),
        helper.make_node("Add", ["x_t", "hR"], ["h_next"]),
        helper.make_node("Identity", ["h_next"], ["y"]),
    ]
    body = helper.make_graph(nodes, "body", info[:2], info[2:])
    scan = helper.make_node("Scan", ["h0", "x"], ["h_last", "Y"], body=body, num_scan_inputs=1)
    h, ys = h0, []
    for t in range(3):
        h = x[t] + h @ R
        ys.append(h)
    Y = np.stack(ys)
    return Repro(_model([scan], {"h0": h0, "x": x}, {"h_last": h, "Y": Y}), [h0, x], [h, Y])


def _untyped(name: str) -> onnx.ValueInfoProto:
    return helper.make_value_info(name, onnx.TypeProto())


def _scan(outer_read: bool = False, typed_body: bool = True) -> Repro:
    """A running sum ``h += x[t] * w`` as a Scan, ``w`` passed through as state; ``outer_read``:
    the body reads ``w`` from the outer graph instead; ``typed_body``: the body's inputs and
    outputs state element type and rank (else they have no type)."""
    h0 = np.zeros(2, np.float32)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    w = np.array([2.0, 3.0], np.float32)

    def info(name: str) -> onnx.ValueInfoProto:
        return (
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [None]) if typed_body else _untyped(name)
        )

    nodes = [
        helper.make_node("Mul", ["x_t", "w" if outer_read else "w_in"], ["xw"]),
        helper.make_node("Add", ["h", "xw"], ["h_next"]),
    ]
    state_in, state_out, outer_state = ["h"], ["h_next"], ["h0"]
    if not outer_read:
        nodes.append(helper.make_node("Identity", ["w_in"], ["w_out"]))
        state_in, state_out, outer_state = ["h", "w_in"], ["h_next", "w_out"], ["h0", "w"]
    body = helper.make_graph(
        nodes, "body", [info(n) for n in [*state_in, "x_t"]], [info(n) for n in state_out]
    )
    scan = helper.make_node(
        "Scan", [*outer_state, "x"], ["h_last", "w_last"][: len(outer_state)], body=body, num_scan_inputs=1
    )
    y = (x * w).sum(axis=0)
    return Repro(_model([scan], {"h0": h0, "x": x, "w": w}, {"h_last": y}), [h0, x, w], [y])


def _scan_slice_times_constant() -> Repro:
    """A running sum ``h += x[t] * w`` as a Scan, ``w`` a ``Constant`` of the body, the step's
    slice ``x_t`` the ``Mul``'s first input."""
    h0 = np.zeros(2, np.float32)
    x = np.arange(1, 9, dtype=np.float32).reshape(4, 2)
    w = np.array([10.0, 100.0], np.float32)
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("h", "x_t", "h_next")]
    nodes = [
        helper.make_node("Constant", [], ["w"], value=onnx.numpy_helper.from_array(w, "w")),
        helper.make_node("Mul", ["x_t", "w"], ["xw"]),
        helper.make_node("Add", ["h", "xw"], ["h_next"]),
    ]
    body = helper.make_graph(nodes, "body", info[:2], info[2:])
    scan = helper.make_node("Scan", ["h0", "x"], ["h_last"], body=body, num_scan_inputs=1)
    y = (x * w).sum(axis=0)
    return Repro(_model([scan], {"h0": h0, "x": x}, {"h_last": y}), [h0, x], [y])


def _scan_split_at_run_time() -> Repro:
    """A running sum ``h += x[t] @ w[:, 4:]`` as a Scan with an untyped body, the slice of ``w``
    taken by ``Split(w, [2 * H, H], axis=-1)`` with ``H = Shape(h0)[1]`` computed at run time: the
    graph the expanded MaskedGRU/LSTM bodies build. Without constant folding nothing infers the
    shape of the body's output."""
    h0 = np.zeros((1, 2), np.float32)
    x = np.arange(6, dtype=np.float32).reshape(3, 1, 2)
    w = np.arange(12, dtype=np.float32).reshape(2, 6)
    outer = [
        helper.make_node("Shape", ["h0"], ["H"], start=1),
        helper.make_node(
            "Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [1], [2])
        ),
        helper.make_node("Mul", ["H", "two"], ["H2"]),
        helper.make_node("Concat", ["H2", "H"], ["sizes"], axis=0),
        helper.make_node("Split", ["w", "sizes"], ["w_a", "w_b"], axis=-1),
    ]
    nodes = [
        helper.make_node("MatMul", ["x_t", "w_b"], ["xw"]),
        helper.make_node("Add", ["h", "xw"], ["h_next"]),
    ]
    body = helper.make_graph(nodes, "body", [_untyped("h"), _untyped("x_t")], [_untyped("h_next")])
    outer.append(helper.make_node("Scan", ["h0", "x"], ["h_last"], body=body, num_scan_inputs=1))
    y = sum(x[t] @ w[:, 4:] for t in range(3))
    return Repro(_model(outer, {"h0": h0, "x": x, "w": w}, {"h_last": y}), [h0, x, w], [y])


def _lstm_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in walk_nodes(model.graph.node) if n.op_type == "LSTM" and n.domain in ("", "ai.onnx")]


def _has_peepholes(model: onnx.ModelProto, inputs: list[np.ndarray]) -> bool:
    return any(len(n.input) > 7 and n.input[7] for n in _lstm_nodes(model))


def _has_input_forget(model: onnx.ModelProto, inputs: list[np.ndarray]) -> bool:
    return any(a.name == "input_forget" and a.i for n in _lstm_nodes(model) for a in n.attribute)


def _is_float64(model: onnx.ModelProto, inputs: list[np.ndarray]) -> bool:
    return inputs[0].dtype == np.float64


def _has_a_scan_without_where(model: onnx.ModelProto, inputs: list[np.ndarray]) -> bool:
    """A Scan body with no ``Where``: no mask and no sequence_lens, each step's state is its output."""
    return any(
        n.op_type == "Scan"
        and not any(b.op_type == "Where" for g in subgraphs(n) for b in walk_nodes(g.node))
        for n in walk_nodes(model.graph.node)
    )


def _has_a_slice_meeting_a_constant(model: onnx.ModelProto, inputs: list[np.ndarray]) -> bool:
    """A Scan body's Add/Sub/Mul/Div whose first input is a step's slice of a scan input and whose
    second is a constant (a ``Constant`` node's output or an initializer)."""
    constants = {i.name for i in model.graph.initializer}
    constants |= {o for n in walk_nodes(model.graph.node) if n.op_type == "Constant" for o in n.output}
    for scan in (n for n in walk_nodes(model.graph.node) if n.op_type == "Scan"):
        k = next(a.i for a in scan.attribute if a.name == "num_scan_inputs")
        for body in subgraphs(scan):
            slices = {i.name for i in body.input[len(body.input) - k :]}
            if any(
                n.op_type in ("Add", "Sub", "Mul", "Div")
                and len(n.input) == 2
                and n.input[0] in slices
                and n.input[1] in constants
                for n in body.node
            ):
                return True
    return False


DEFECTS: dict[str, Defect] = {
    "onnxruntime-no-float64-rnn-kernels": Defect(
        ("onnxruntime", "onnxruntime-noopt"),
        "unsupported",
        "onnxruntime's CPU LSTM/GRU kernels refuse double when run, and it has no double RNN kernel; "
        "ONNX defines all three for double. Hits the native expansion of the float64 cases.",
        lambda: _lstm(np.float64),
        message=r"onnxruntime('s (LSTM|GRU) kernel does not support double| has no kernel for RNN)",
        witness="onnx-reference",
    ),
    "onnxruntime-noopt-scan-output-shape": Defect(
        ("onnxruntime-noopt",),
        "error",
        "With graph optimizations disabled, onnxruntime's Scan needs the shape of every body output, "
        "declared or inferred ('Subgraph must have the shape set for all outputs'); ONNX does not ask "
        "for it, and with optimizations enabled (constant folding) the same model runs.",
        _scan_split_at_run_time,
        message=r"Subgraph must have the shape set for all outputs",
        workaround="the portable bodies state their outputs' element type and rank",
    ),
    "openvino-lstm-peepholes": Defect(
        ("openvino",),
        "wrong",
        "OpenVINO's LSTM ignores the peephole input P (ONNX LSTM input 7): results as if P were zero.",
        lambda: _lstm(peepholes=True),
        model_has=_has_peepholes,
    ),
    "openvino-lstm-input-forget": Defect(
        ("openvino",),
        "wrong",
        "OpenVINO's LSTM ignores input_forget=1 (coupled input and forget gates).",
        lambda: _lstm(input_forget=1),
        model_has=_has_input_forget,
    ),
    "openvino-float64-in-float32": Defect(
        ("openvino",),
        "wrong",
        "OpenVINO's CPU plugin computes float64 graphs in float32 (about 1e-8 relative error), whatever "
        "INFERENCE_PRECISION_HINT says; the float64 cases allow 1e-10.",
        _float64_tanh,
        model_has=_is_float64,
    ),
    "openvino-scan-state-as-output": Defect(
        ("openvino",),
        "wrong",
        "OpenVINO's Scan goes wrong from the second step on when the body's new state is also its scan "
        "output and comes from a MatMul (h_next = x[t] + h @ R; y = h_next); with an elementwise Mul, "
        "or the output computed by a separate op (as the masked bodies' Where does), it is right.",
        _scan_matmul_state,
        model_has=_has_a_scan_without_where,
    ),
    "openvino-scan-slice-with-constant": Defect(
        ("openvino",),
        "wrong",
        "OpenVINO's Scan computes with the state replaced by the step's slice of a scan input when an "
        "elementwise op of the body takes that slice first and a Constant second and its result meets "
        "the state: h_next = h + x_t * w gives x_t + x_t * w ([77, 808] for [160, 2000]); likewise "
        "x_t * w + h, h + (x_t + w), h - x_t * w; with the Constant first (h + w * x_t) it is right.",
        _scan_slice_times_constant,
        model_has=_has_a_slice_meeting_a_constant,
        workaround="the masked bodies apply no Constant to a scan input's slice (the slices meet MatMul "
        "outputs and the state)",
    ),
    "openvino-rnn-activations": Defect(
        ("openvino",),
        "unsupported",
        "OpenVINO's LSTM/GRU/RNN implement only Sigmoid, Tanh and Relu of ONNX's activations "
        "('Unknown activation function: elu').",
        lambda: _rnn("Elu"),
        message=r"OpenVINO's (LSTM/GRU/RNN have no activation|RNN cell lacks an activation)",
    ),
    "openvino-no-local-functions": Defect(
        ("openvino",),
        "unsupported",
        "OpenVINO's ONNX frontend does not expand the model-local function of a custom-domain node "
        "('No conversion rule found').",
        _local_function,
        message=r"OpenVINO's ONNX frontend has no conversion for",
    ),
    "openvino-scan-outer-scope-read": Defect(
        ("openvino",),
        "error",
        "OpenVINO's ONNX frontend rejects a Scan body that reads a value of the outer graph other "
        "than a constant (a graph input or a node output), which ONNX allows: its Scan importer counts "
        "the parameters it makes for outer values as body inputs ('num_scan_outputs can't be "
        "negative', 'Number of Scan node inputs (3) is less than required (4)'); an initializer or "
        "Constant it hands to the body as it is, and that read it accepts.",
        lambda: _scan(outer_read=True),
        message=r"num_scan_outputs can.t be negative|Number of Scan node inputs \(\d+\) is less than",
        workaround="the portable bodies pass outer values in as pass-through Scan state",
    ),
    "openvino-scan-untyped-body": Defect(
        ("openvino",),
        "error",
        "OpenVINO fails on a Scan whose body inputs and outputs carry no type ('Memory has not been "
        "allocated'); IR.md lets subgraph inputs omit their type.",
        lambda: _scan(typed_body=False),
        message=r"Memory has not been allocated",
        workaround="the portable bodies type their inputs and outputs",
    ),
    "tract-no-local-functions": Defect(
        ("tract",),
        "unsupported",
        "tract does not expand model-local functions ('Unimplemented(<op>)').",
        _local_function,
        message=r"tract has no implementation of",
    ),
    "tract-if-branch-shapes": Defect(
        ("tract",),
        "error",
        "tract's If requires its two branches' outputs to have the same shape; ONNX does not (the "
        "native expansion's If that keeps empty sizes off the native op gives one step of zeros in "
        "one branch). It fails when it infers facts ('Unifying shapes 3,2 and 1,2') or, where the "
        "shapes are known later, when it types the If ('then_body.output_fact(i) == "
        "else_body.output_fact(i)').",
        _if_branch_shapes,
        message=r'" If (\| Caused by: \| 0: Infering facts .*Unifying shapes|ToTypedTranslator .*'
        r"then_body\.output_fact\(i\).*else_body\.output_fact\(i\))",
    ),
    "tract-lstm-batch-without-initial-state": Defect(
        ("tract",),
        "error",
        "tract fails on an LSTM of batch 2 or more without initial_h/initial_c ('Clashing resolution "
        "for expression. 1=1 != 2'); batch 1, or the initial states given, work.",
        _lstm_batch_2_no_initial_state,
        message=r"Clashing resolution for expression",
    ),
    "tract-no-float64-sigmoid": Defect(
        ("tract",),
        "unsupported",
        "tract's Sigmoid has no float64 implementation ('Sigmoid does not support F64').",
        _float64_sigmoid,
        message=r"tract's Sigmoid does not support F64",
    ),
    "tract-scan-untyped-body": Defect(
        ("tract",),
        "error",
        "tract rejects a Scan body whose inputs do not state their type ('graph input has no type').",
        lambda: _scan(typed_body=False),
        message=r"graph input `[^`]+` has no type",
        workaround="the portable bodies type their inputs and outputs",
    ),
    "tract-cumsum-int64": Defect(
        ("tract",),
        "error",
        "tract fails to evaluate CumSum over int64 ('TDim is not a number': it takes int64 values for "
        "symbolic dimensions); int32 works.",
        lambda: _cumsum(np.int64),
        message=r"CumSum .*TDim is not a number",
        workaround="the portable bodies count processed steps with an int32 CumSum",
    ),
}


def reproduce(defect_id: str, backend: str) -> Outcome:
    """Run the defect's repro on the built-in ``backend`` in this process; the outcome it has
    there (the defect still reproduces when that is the defect's ``status``)."""
    repro = DEFECTS[defect_id].repro()
    return compare(resolve(backend), repro.model, [(repro.inputs, repro.expected)], repro.rtol, repro.atol)
