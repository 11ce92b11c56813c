"""The static errors of ``onnx_masked_rnn.schema_doc.STATIC_ERRORS`` as one-node models.

Each :class:`ErrorCase` is a node that commits one error of the list and nothing else, and the
name its error message must carry. The package's schemas (``tests/test_static_errors.py``) and the
C++ schemas of the onnx pull request (``upstream/tests/test_static_errors.py``, on the patched
onnx) must reject every case, and accept :func:`valid_model` for every operator and layout.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_masked_rnn.attributes import OP_SPECS

T, N, I, H = 5, 3, 4, 6
FLOAT = TensorProto.FLOAT


@dataclasses.dataclass(frozen=True)
class ErrorCase:
    """A node of ``op_type`` committing the static error ``error`` (a key of STATIC_ERRORS)."""

    op_type: str
    error: str
    names: str  # what the message must name, e.g. "'W'"
    attributes: tuple[tuple[str, object], ...] = ()
    shapes: tuple[tuple[str, tuple], ...] = ()
    types: tuple[tuple[str, int], ...] = ()
    constant_sequence_lens: tuple[int, ...] | None = None

    @property
    def id(self) -> str:
        changed = [k for k, _ in self.attributes + self.shapes + self.types]
        if self.constant_sequence_lens is not None:
            changed.append("constant")
        return f"{self.op_type}-{self.error}-{'-'.join(changed)}"


def shapes_for(op_type: str, direction: str = "forward", layout: int = 0) -> dict[str, tuple]:
    """Consistent shapes for every input of ``op_type``."""
    D, G = (2 if direction == "bidirectional" else 1), OP_SPECS[op_type].num_gates
    state = (N, D, H) if layout else (D, N, H)
    every = {
        "X": (N, T, I) if layout else (T, N, I),
        "W": (D, G * H, I),
        "R": (D, G * H, H),
        "B": (D, 2 * G * H),
        "sequence_lens": (N,),
        "initial_h": state,
        "initial_c": state,
        "P": (D, 3 * H),
        "mask": (N, T) if layout else (T, N),
    }
    return {name: every[name] for name in OP_SPECS[op_type].inputs}


def make_model(
    op_type: str,
    domain: str,
    *,
    attributes: dict | None = None,
    shapes: dict[str, tuple] | None = None,
    types: dict[str, int] | None = None,
    constant_sequence_lens: tuple[int, ...] | None = None,
    opset: int = 22,
) -> onnx.ModelProto:
    """One node of ``op_type`` in ``domain`` reading every input (``shapes`` over
    :func:`shapes_for`), attributes written as given (valid or not); ``sequence_lens`` an
    initializer when ``constant_sequence_lens`` is given."""
    attributes = dict(attributes or {})
    attributes.setdefault("hidden_size", H)
    spec = OP_SPECS[op_type]
    layout = attributes.get("layout", 0)
    direction = attributes.get("direction", "forward")
    all_shapes = shapes_for(
        op_type,
        direction if direction in ("forward", "reverse", "bidirectional") else "forward",
        layout if layout in (0, 1) else 0,
    ) | dict(shapes or {})
    types = {"sequence_lens": TensorProto.INT32, "mask": TensorProto.BOOL} | dict(types or {})
    node = helper.make_node(op_type, list(spec.inputs), list(spec.outputs), domain=domain, **attributes)
    initializers, graph_inputs = [], []
    for name in spec.inputs:
        if name == "sequence_lens" and constant_sequence_lens is not None:
            values = np.array(constant_sequence_lens, dtype=np.int32)
            initializers.append(numpy_helper.from_array(values, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, types.get(name, FLOAT), all_shapes[name]))
    ranks = {"Y": 4, "Y_h": 3, "Y_c": 3}
    outputs = [helper.make_tensor_value_info(o, FLOAT, (None,) * ranks[o]) for o in spec.outputs]
    graph = helper.make_graph([node], "static_error", graph_inputs, outputs, initializer=initializers)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(domain, 1)], ir_version=10
    )


def case_model(case: ErrorCase, domain: str) -> onnx.ModelProto:
    return make_model(
        case.op_type,
        domain,
        attributes=dict(case.attributes),
        shapes=dict(case.shapes),
        types=dict(case.types),
        constant_sequence_lens=case.constant_sequence_lens,
    )


def _cases(op_type: str) -> list[ErrorCase]:
    spec = OP_SPECS[op_type]
    G = spec.num_gates
    lstm = op_type == "MaskedLSTM"
    c = ErrorCase
    cases = [
        c(op_type, "direction", "'direction'", attributes=(("direction", "both"),)),
        c(op_type, "layout", "'layout'", attributes=(("layout", 2),)),
        c(op_type, "masked_output", "'masked_output'", attributes=(("masked_output", "state"),)),
        c(op_type, "clip", "'clip'", attributes=(("clip", 0.0),)),
        c(op_type, "clip", "'clip'", attributes=(("clip", -1.0),)),
        c(op_type, "clip", "'clip'", attributes=(("clip", float("nan")),)),
        c(op_type, "hidden_size", "'hidden_size'", attributes=(("hidden_size", 0),)),
        c(op_type, "hidden_size", "'hidden_size'", attributes=(("hidden_size", -H),)),
        c(
            op_type,
            "activations",
            "'activations'",
            attributes=(("activations", ["Tanh"] * (spec.num_activations + 2)),),
        ),
        c(
            op_type,
            "activations",
            "'activations'",
            attributes=(("activations", ["Swish"] * spec.num_activations),),
        ),
        c(op_type, "activation_parameters", "'activation_alpha'", attributes=(("activation_alpha", [0.5]),)),
        c(
            op_type,
            "activation_parameters",
            "'activation_beta'",
            attributes=(("activations", ["LeakyRelu"] * spec.num_activations), ("activation_beta", [0.5])),
        ),
        c(op_type, "types", "'mask'", types=(("mask", FLOAT),)),
        c(op_type, "types", "'sequence_lens'", types=(("sequence_lens", TensorProto.INT64),)),
        c(op_type, "types", "'R'", types=(("R", TensorProto.DOUBLE),)),
        c(op_type, "types", "'X'", types=(("X", TensorProto.INT32),)),
        c(op_type, "ranks", "'X'", shapes=(("X", (T, N)),)),
        c(op_type, "ranks", "'W'", shapes=(("W", (G * H, I)),)),
        c(op_type, "ranks", "'R'", shapes=(("R", (G * H, H)),)),
        c(op_type, "ranks", "'B'", shapes=(("B", (2 * G * H,)),)),
        c(op_type, "ranks", "'sequence_lens'", shapes=(("sequence_lens", (N, 1)),)),
        c(op_type, "ranks", "'initial_h'", shapes=(("initial_h", (N, H)),)),
        c(op_type, "ranks", "'mask'", shapes=(("mask", (T,)),)),
        c(op_type, "dims", "'W'", shapes=(("W", (1, G * H, I + 1)),)),
        c(op_type, "dims", "'W'", shapes=(("W", (1, G * H + 1, I)),)),
        c(
            op_type,
            "dims",
            "'W'",
            attributes=(("direction", "bidirectional"),),
            shapes=(("W", (1, G * H, I)),),
        ),
        c(op_type, "dims", "'R'", shapes=(("R", (1, G * H, H + 1)),)),
        c(op_type, "dims", "'R'", shapes=(("R", (1, G * H + 1, H)),)),
        c(op_type, "dims", "'R'", attributes=(("hidden_size", H + 1),)),
        c(op_type, "dims", "'B'", shapes=(("B", (1, G * H)),)),
        c(op_type, "dims", "'initial_h'", shapes=(("initial_h", (1, N + 1, H)),)),
        c(op_type, "dims", "'sequence_lens'", shapes=(("sequence_lens", (N + 1,)),)),
        c(op_type, "dims", "'mask'", shapes=(("mask", (T + 1, N)),)),
        c(op_type, "dims", "'mask'", attributes=(("layout", 1),), shapes=(("mask", (T, N)),)),
        c(op_type, "sequence_lens_values", "'sequence_lens'", constant_sequence_lens=(T, T + 1, 0)),
        c(op_type, "sequence_lens_values", "'sequence_lens'", constant_sequence_lens=(-1, 1, 2)),
    ]
    if lstm:
        cases += [
            c(op_type, "input_forget", "'input_forget'", attributes=(("input_forget", 2),)),
            c(op_type, "ranks", "'initial_c'", shapes=(("initial_c", (N, H)),)),
            c(op_type, "ranks", "'P'", shapes=(("P", (3 * H,)),)),
            c(op_type, "dims", "'P'", shapes=(("P", (1, 4 * H)),)),
            c(
                op_type,
                "dims",
                "'initial_c'",
                attributes=(("layout", 1),),
                shapes=(("initial_c", (1, N, H)),),
            ),
        ]
    if op_type == "MaskedGRU":
        cases.append(
            c(
                op_type,
                "linear_before_reset",
                "'linear_before_reset'",
                attributes=(("linear_before_reset", 2),),
            )
        )
    return cases


CASES: tuple[ErrorCase, ...] = tuple(case for op_type in OP_SPECS for case in _cases(op_type))
"""Every case, for the three operators."""

VALID: tuple[tuple[str, dict], ...] = tuple(
    (op_type, attributes)
    for op_type in OP_SPECS
    for attributes in (
        {},
        {"layout": 1, "direction": "bidirectional", "masked_output": "carry"},
        {
            "direction": "reverse",
            "clip": 1.5,
            "activations": ["LeakyRelu"] * OP_SPECS[op_type].num_activations,
        },
    )
)
"""Valid nodes (with :func:`make_model`'s consistent shapes), which shape inference must accept."""


def expected_shapes(op_type: str, attributes: dict) -> dict[str, tuple]:
    """The output shapes of a :data:`VALID` node."""
    D = 2 if attributes.get("direction") == "bidirectional" else 1
    layout = attributes.get("layout", 0)
    state = (N, D, H) if layout else (D, N, H)
    Y = (N, T, D, H) if layout else (T, D, N, H)
    return dict(zip(OP_SPECS[op_type].outputs, (Y, state, state)))
