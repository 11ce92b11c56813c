"""The static errors of ``onnx_masked_rnn.schema_doc.STATIC_ERRORS`` as one-node models.

The cases are the onnx pull request's table, ``upstream/onnx/tests/python/masked_rnn_static_errors.py``
(one list for both sides): onnx's shape-inference tests run it on the C++ schemas, and
``tests/test_static_errors.py`` on the package's. Each :class:`ErrorCase` is a node that commits
one error of the list and nothing else, and the name its error message must carry; every schema
accepts :data:`VALID` for every operator and layout.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_masked_rnn.attributes import OP_SPECS

_TABLE_PATH = Path(__file__).resolve().parents[1] / "upstream/onnx/tests/python/masked_rnn_static_errors.py"
_loader = importlib.util.spec_from_file_location("masked_rnn_static_errors", _TABLE_PATH)
table = sys.modules[_loader.name] = importlib.util.module_from_spec(_loader)  # dataclasses look it up
_loader.loader.exec_module(table)

T, N, I, H = table.T, table.N, table.IN, table.H
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
    :func:`table.input_shapes`), attributes written as given (valid or not); ``sequence_lens`` an
    initializer when ``constant_sequence_lens`` is given."""
    attributes = dict(attributes or {})
    attributes.setdefault("hidden_size", H)
    spec = OP_SPECS[op_type]
    layout = attributes.get("layout", 0)
    direction = attributes.get("direction", "forward")
    all_shapes = table.input_shapes(
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


CASES: tuple[ErrorCase, ...] = tuple(
    ErrorCase(
        op_type,
        case.error,
        f"'{case.name}'",
        tuple(case.attributes.items()),
        tuple(case.shapes.items()),
        tuple(case.types.items()),
        case.sequence_lens,
    )
    for op_type in OP_SPECS
    for case in table.static_errors(op_type)
)
"""Every case, for the three operators."""

VALID: tuple[tuple[str, dict], ...] = tuple(
    (op_type, attributes) for op_type in OP_SPECS for attributes in table.valid(op_type)
)
"""Valid nodes (with :func:`make_model`'s consistent shapes), which shape inference must accept."""


def expected_shapes(op_type: str, attributes: dict) -> dict[str, tuple]:
    """The output shapes of a :data:`VALID` node."""
    return dict(zip(OP_SPECS[op_type].outputs, table.output_shapes(op_type, attributes)))
