# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""What the shape-inference tests of MaskedLSTM, MaskedGRU and MaskedRNN share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from shape_inference_test import TestShapeInferenceHelper

import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.defs import AI_ONNX_PREVIEW_DOMAIN, ONNX_DOMAIN

if TYPE_CHECKING:
    from collections.abc import Sequence

    from onnx import GraphProto

OPSET_IMPORTS = [
    helper.make_opsetid(ONNX_DOMAIN, 22),
    helper.make_opsetid(AI_ONNX_PREVIEW_DOMAIN, 1),
]
NUM_GATES = {"MaskedLSTM": 4, "MaskedGRU": 3, "MaskedRNN": 1}
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
NUM_ACTIVATIONS = {"MaskedLSTM": 3, "MaskedGRU": 2, "MaskedRNN": 1}
T, N, IN, H = 5, 3, 4, 6  # seq_length, batch_size, input_size, hidden_size


def full_shapes(
    op_type: str, num_directions: int = 1, layout: int = 0
) -> dict[str, tuple[int, ...]]:
    """Consistent shapes for every input of ``op_type``."""
    g, d = NUM_GATES[op_type], num_directions
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


def static_errors(op_type: str) -> list[Any]:
    """One node per static error of the operator's doc string (its "Errors" list), as
    ``pytest.param(attributes, shapes, types, sequence_lens, name)``: the attributes,
    input shapes and element types that differ from a valid node, the values of a
    constant ``sequence_lens`` (or None) and the name the error message must carry.
    """
    g, n = NUM_GATES[op_type], NUM_ACTIVATIONS[op_type]
    cases = [
        ("direction", {"direction": "both"}, {}, {}, None, "direction"),
        ("layout", {"layout": 2}, {}, {}, None, "layout"),
        ("masked_output", {"masked_output": "state"}, {}, {}, None, "masked_output"),
        ("clip", {"clip": float("nan")}, {}, {}, None, "clip"),
        ("hidden_size", {"hidden_size": 0}, {}, {}, None, "hidden_size"),
        (
            "activations_length",
            {"activations": ["Tanh"] * (n + 2)},
            {},
            {},
            None,
            "activations",
        ),
        (
            "activations_name",
            {"activations": ["Swish"] * n},
            {},
            {},
            None,
            "activations",
        ),
        (
            "activation_alpha_left_over",
            {"activation_alpha": [0.5]},
            {},
            {},
            None,
            "activation_alpha",
        ),
        ("mask_type", {}, {}, {"mask": TensorProto.FLOAT}, None, "mask"),
        (
            "sequence_lens_type",
            {},
            {},
            {"sequence_lens": TensorProto.INT64},
            None,
            "sequence_lens",
        ),
        ("float_types_differ", {}, {}, {"R": TensorProto.DOUBLE}, None, "R"),
        ("B_rank", {}, {"B": (2 * g * H,)}, {}, None, "B"),
        ("mask_rank", {}, {"mask": (T,)}, {}, None, "mask"),
        ("W_input_size", {}, {"W": (1, g * H, IN + 1)}, {}, None, "W"),
        (
            "R_num_directions",
            {"direction": "bidirectional"},
            {
                "W": (2, g * H, IN),
                "B": (2, 2 * g * H),
                "initial_h": (2, N, H),
                "initial_c": (2, N, H),
                "P": (2, 3 * H),
            },
            {},
            None,
            "R",
        ),
        ("R_hidden_size", {"hidden_size": H + 1}, {}, {}, None, "R"),
        ("B_size", {}, {"B": (1, g * H)}, {}, None, "B"),
        (
            "initial_h_batch_size",
            {},
            {"initial_h": (1, N + 1, H)},
            {},
            None,
            "initial_h",
        ),
        (
            "sequence_lens_batch_size",
            {},
            {"sequence_lens": (N + 1,)},
            {},
            None,
            "sequence_lens",
        ),
        ("mask_layout_1", {"layout": 1}, {"mask": (T, N)}, {}, None, "mask"),
        ("sequence_lens_value", {}, {}, {}, [T, T + 1, 0], "sequence_lens"),
    ]
    if op_type == "MaskedLSTM":
        cases += [
            ("input_forget", {"input_forget": 2}, {}, {}, None, "input_forget"),
            ("P_size", {}, {"P": (1, 4 * H)}, {}, None, "P"),
        ]
    if op_type == "MaskedGRU":
        cases.append(
            (
                "linear_before_reset",
                {"linear_before_reset": 2},
                {},
                {},
                None,
                "linear_before_reset",
            )
        )
    return [pytest.param(*case[1:], id=case[0]) for case in cases]


class MaskedRNNShapeInferenceHelper(TestShapeInferenceHelper):
    def _masked_rnn_graph(
        self,
        op_type: str,
        x_shape: Sequence[int | str | None],
        mask: tuple[TensorProto.DataType, Sequence[int | str | None]],
        **attributes: Any,
    ) -> GraphProto:
        """A graph with one MaskedLSTM/GRU/RNN node: input_size 5, hidden_size 4."""
        gates = NUM_GATES[op_type]
        directions = 2 if attributes.get("direction") == "bidirectional" else 1
        mask_index = 8 if op_type == "MaskedLSTM" else 6
        inputs = ["x", "w", "r"] + [""] * (mask_index - 3) + ["mask"]
        outputs = ["y", "y_h", "y_c"] if op_type == "MaskedLSTM" else ["y", "y_h"]
        return self._make_graph(
            [
                ("x", TensorProto.FLOAT, x_shape),
                ("w", TensorProto.FLOAT, (directions, gates * 4, 5)),
                ("r", TensorProto.FLOAT, (directions, gates * 4, 4)),
                ("mask", *mask),
            ],
            [
                helper.make_node(
                    op_type,
                    inputs,
                    outputs,
                    domain=AI_ONNX_PREVIEW_DOMAIN,
                    hidden_size=4,
                    **attributes,
                )
            ],
            [],
        )

    def _strictly_inferred(self, graph: GraphProto) -> onnx.ModelProto:
        """Shape inference with type checks and errors raised (what the error tests need)."""
        model = helper.make_model(graph, opset_imports=OPSET_IMPORTS)
        return onnx.shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True
        )

    def _full_graph(
        self,
        op_type: str,
        attributes: dict[str, Any],
        shapes: dict[str, tuple[int, ...]],
        types: dict[str, int],
        sequence_lens: list[int] | None,
    ) -> GraphProto:
        """One node reading every input of ``op_type``, consistent unless ``attributes``,
        ``shapes`` or ``types`` say otherwise; ``sequence_lens`` an initializer if given.
        """
        attributes = {"hidden_size": H, **attributes}
        layout = (
            attributes.get("layout", 0) if attributes.get("layout") in (0, 1) else 0
        )
        all_shapes = {**full_shapes(op_type, layout=layout), **shapes}
        types = {"sequence_lens": TensorProto.INT32, "mask": TensorProto.BOOL, **types}
        inputs = INPUTS[op_type]
        outputs = ["Y", "Y_h", "Y_c"] if op_type == "MaskedLSTM" else ["Y", "Y_h"]
        node = helper.make_node(
            op_type, inputs, outputs, domain=AI_ONNX_PREVIEW_DOMAIN, **attributes
        )
        initializer = []
        if sequence_lens is not None:
            values = np.array(sequence_lens, dtype=np.int32)
            initializer.append(numpy_helper.from_array(values, "sequence_lens"))
        graph_inputs = [
            (name, types.get(name, TensorProto.FLOAT), all_shapes[name])
            for name in inputs
        ]
        return self._make_graph(graph_inputs, [node], [], initializer=initializer)
