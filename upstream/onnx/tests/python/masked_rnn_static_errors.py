# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""The static errors of MaskedLSTM, MaskedGRU and MaskedRNN as one-node cases.

Each case commits one error of its operator's doc string list ("Errors:") and nothing
else, on a node reading every input with consistent shapes (:func:`input_shapes`). The
shape-inference tests (masked_*_shape_inference_test.py) check that inference rejects
every case with a message naming the input or attribute, and accepts :data:`VALID`.
Plain data: it imports nothing but onnx's TensorProto.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from onnx import TensorProto

T, N, IN, H = 5, 3, 4, 6  # seq_length, batch_size, input_size, hidden_size
NUM_GATES = {"MaskedLSTM": 4, "MaskedGRU": 3, "MaskedRNN": 1}
NUM_ACTIVATIONS = {"MaskedLSTM": 3, "MaskedGRU": 2, "MaskedRNN": 1}
INPUTS = {
    "MaskedLSTM": [
        "X",
        "W",
        "R",
        "B",
        "sequence_lens",
        "initial_h",
        "initial_c",
        "P",
        "mask",
    ],
    "MaskedGRU": ["X", "W", "R", "B", "sequence_lens", "initial_h", "mask"],
    "MaskedRNN": ["X", "W", "R", "B", "sequence_lens", "initial_h", "mask"],
}
OUTPUTS = {
    "MaskedLSTM": ["Y", "Y_h", "Y_c"],
    "MaskedGRU": ["Y", "Y_h"],
    "MaskedRNN": ["Y", "Y_h"],
}
# The errors of the doc strings' lists, in their order, and the operators they apply to.
ERRORS = {
    "direction": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "layout": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "masked_output": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "input_forget": ("MaskedLSTM",),
    "linear_before_reset": ("MaskedGRU",),
    "clip": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "hidden_size": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "activations": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "activation_parameters": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "types": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "ranks": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "dims": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
    "sequence_lens_values": ("MaskedLSTM", "MaskedGRU", "MaskedRNN"),
}


@dataclasses.dataclass(frozen=True)
class StaticError:
    """A node committing the error ``error`` (a key of :data:`ERRORS`): what differs
    from a valid node, and the input or attribute its message must name.
    """

    error: str
    name: str
    attributes: dict[str, Any] = dataclasses.field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    types: dict[str, int] = dataclasses.field(default_factory=dict)
    sequence_lens: tuple[int, ...] | None = None  # a constant sequence_lens

    @property
    def id(self) -> str:
        changed = [*self.attributes, *self.shapes, *self.types]
        if self.sequence_lens is not None:
            changed.append("constant")
        return "-".join([self.error, *changed])


def input_shapes(
    op_type: str, direction: str = "forward", layout: int = 0
) -> dict[str, tuple[int, ...]]:
    """Consistent shapes for every input of ``op_type``."""
    g, d = NUM_GATES[op_type], 2 if direction == "bidirectional" else 1
    state = (N, d, H) if layout else (d, N, H)
    shapes = {
        "X": (N, T, IN) if layout else (T, N, IN),
        "W": (d, g * H, IN),
        "R": (d, g * H, H),
        "B": (d, 2 * g * H),
        "sequence_lens": (N,),
        "initial_h": state,
        "initial_c": state,
        "P": (d, 3 * H),
        "mask": (N, T) if layout else (T, N),
    }
    return {name: shapes[name] for name in INPUTS[op_type]}


def static_errors(op_type: str) -> list[StaticError]:
    """Every error of ``op_type``'s list, at least one case each."""
    gh, n = NUM_GATES[op_type] * H, NUM_ACTIVATIONS[op_type]
    e = StaticError
    cases = [
        e("direction", "direction", {"direction": "both"}),
        e("layout", "layout", {"layout": 2}),
        e("masked_output", "masked_output", {"masked_output": "state"}),
        e("clip", "clip", {"clip": 0.0}),
        e("clip", "clip", {"clip": -1.0}),
        e("clip", "clip", {"clip": float("nan")}),
        e("hidden_size", "hidden_size", {"hidden_size": 0}),
        e("hidden_size", "hidden_size", {"hidden_size": -H}),
        e("activations", "activations", {"activations": ["Tanh"] * (n + 2)}),
        e("activations", "activations", {"activations": ["Swish"] * n}),
        e("activation_parameters", "activation_alpha", {"activation_alpha": [0.5]}),
        e(
            "activation_parameters",
            "activation_beta",
            {"activations": ["LeakyRelu"] * n, "activation_beta": [0.5]},
        ),
        e("types", "mask", types={"mask": TensorProto.FLOAT}),
        e("types", "sequence_lens", types={"sequence_lens": TensorProto.INT64}),
        e("types", "R", types={"R": TensorProto.DOUBLE}),
        e("types", "X", types={"X": TensorProto.INT32}),
        e("ranks", "X", shapes={"X": (T, N)}),
        e("ranks", "W", shapes={"W": (gh, IN)}),
        e("ranks", "R", shapes={"R": (gh, H)}),
        e("ranks", "B", shapes={"B": (2 * gh,)}),
        e("ranks", "sequence_lens", shapes={"sequence_lens": (N, 1)}),
        e("ranks", "initial_h", shapes={"initial_h": (N, H)}),
        e("ranks", "mask", shapes={"mask": (T,)}),
        e("dims", "W", shapes={"W": (1, gh, IN + 1)}),
        e("dims", "W", shapes={"W": (1, gh + 1, IN)}),
        e("dims", "W", {"direction": "bidirectional"}, {"W": (1, gh, IN)}),
        e("dims", "R", shapes={"R": (1, gh, H + 1)}),
        e("dims", "R", shapes={"R": (1, gh + 1, H)}),
        e("dims", "R", {"hidden_size": H + 1}),
        e("dims", "B", shapes={"B": (1, gh)}),
        e("dims", "initial_h", shapes={"initial_h": (1, N + 1, H)}),
        e("dims", "sequence_lens", shapes={"sequence_lens": (N + 1,)}),
        e("dims", "mask", shapes={"mask": (T + 1, N)}),
        e("dims", "mask", {"layout": 1}, {"mask": (T, N)}),
        e("sequence_lens_values", "sequence_lens", sequence_lens=(T, T + 1, 0)),
        e("sequence_lens_values", "sequence_lens", sequence_lens=(-1, 1, 2)),
    ]
    if op_type == "MaskedLSTM":
        cases += [
            e("input_forget", "input_forget", {"input_forget": 2}),
            e("ranks", "initial_c", shapes={"initial_c": (N, H)}),
            e("ranks", "P", shapes={"P": (3 * H,)}),
            e("dims", "P", shapes={"P": (1, 4 * H)}),
            e("dims", "initial_c", {"layout": 1}, {"initial_c": (1, N, H)}),
        ]
    if op_type == "MaskedGRU":
        cases.append(
            e("linear_before_reset", "linear_before_reset", {"linear_before_reset": 2})
        )
    return cases


def valid(op_type: str) -> list[dict[str, Any]]:
    """Attributes of valid nodes (with :func:`input_shapes`), which inference accepts."""
    return [
        {},
        {"layout": 1, "direction": "bidirectional", "masked_output": "carry"},
        {
            "direction": "reverse",
            "clip": 1.5,
            "activations": ["LeakyRelu"] * NUM_ACTIVATIONS[op_type],
        },
    ]


def output_shapes(op_type: str, attributes: dict[str, Any]) -> list[tuple[int, ...]]:
    """The output shapes of a :func:`valid` node."""
    d = 2 if attributes.get("direction") == "bidirectional" else 1
    layout = attributes.get("layout", 0)
    state = (N, d, H) if layout else (d, N, H)
    y = (N, T, d, H) if layout else (T, d, N, H)
    return [y, state, state][: len(OUTPUTS[op_type])]
