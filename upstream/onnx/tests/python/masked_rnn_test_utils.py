# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""What the shape-inference tests of MaskedLSTM, MaskedGRU and MaskedRNN share: the
graphs they infer and the checks each operator's test runs (one builder per kind of
test, parametrised by the operator).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from masked_rnn_static_errors import (
    ERRORS,
    INPUTS,
    NUM_GATES,
    OUTPUTS,
    H,
    StaticError,
    T,
    input_shapes,
    output_shapes,
    static_errors,
)
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


def static_error_params(op_type: str) -> list[Any]:
    """:func:`static_errors` of ``op_type`` as pytest parameters, one test each."""
    return [pytest.param(case, id=case.id) for case in static_errors(op_type)]


class MaskedRNNShapeInferenceHelper(TestShapeInferenceHelper):
    def _masked_rnn_graph(
        self,
        op_type: str,
        x_shape: Sequence[int | str | None],
        mask: tuple[TensorProto.DataType, Sequence[int | str | None]],
        **attributes: Any,
    ) -> GraphProto:
        """A graph with one node reading X, W, R and mask: input_size 5, hidden_size 4."""
        gates = NUM_GATES[op_type]
        directions = 2 if attributes.get("direction") == "bidirectional" else 1
        mask_index = INPUTS[op_type].index("mask")
        inputs = ["x", "w", "r"] + [""] * (mask_index - 3) + ["mask"]
        outputs = [name.lower() for name in OUTPUTS[op_type]]
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
        shapes: dict[str, tuple[int, ...]] | None = None,
        types: dict[str, int] | None = None,
        sequence_lens: Sequence[int] | None = None,
    ) -> GraphProto:
        """One node reading every input of ``op_type``, consistent unless ``attributes``,
        ``shapes`` or ``types`` say otherwise; ``sequence_lens`` an initializer if given.
        """
        attributes = {"hidden_size": H, **attributes}
        direction = attributes.get("direction", "forward")
        layout = attributes.get("layout", 0)
        all_shapes = {
            **input_shapes(
                op_type,
                direction if direction in ("reverse", "bidirectional") else "forward",
                layout if layout in (0, 1) else 0,
            ),
            **(shapes or {}),
        }
        types = {
            "sequence_lens": TensorProto.INT32,
            "mask": TensorProto.BOOL,
            **(types or {}),
        }
        node = helper.make_node(
            op_type,
            INPUTS[op_type],
            OUTPUTS[op_type],
            domain=AI_ONNX_PREVIEW_DOMAIN,
            **attributes,
        )
        initializer = []
        if sequence_lens is not None:
            values = np.array(sequence_lens, dtype=np.int32)
            initializer.append(numpy_helper.from_array(values, "sequence_lens"))
        graph_inputs = [
            (name, types.get(name, TensorProto.FLOAT), all_shapes[name])
            for name in INPUTS[op_type]
        ]
        return self._make_graph(graph_inputs, [node], [], initializer=initializer)

    def _assert_outputs(
        self,
        graph: GraphProto,
        names: Sequence[str],
        shapes: Sequence[Sequence[int | str | None]],
    ) -> None:
        self._assert_inferred(
            graph,
            [
                helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
                for name, shape in zip(names, shapes, strict=True)
            ],
            opset_imports=OPSET_IMPORTS,
        )

    def _assert_valid(self, op_type: str, attributes: dict[str, Any]) -> None:
        """A node reading every input with consistent shapes is accepted, its outputs
        inferred; with a constant sequence_lens that holds 0 and seq_length.
        """
        graph = self._full_graph(op_type, attributes, sequence_lens=(T, 0, 2))
        self._assert_outputs(
            graph, OUTPUTS[op_type], output_shapes(op_type, attributes)
        )

    def _assert_static_error(self, op_type: str, case: StaticError) -> None:
        """The node of ``case`` is rejected, the message naming its input or attribute."""
        graph = self._full_graph(
            op_type, case.attributes, case.shapes, case.types, case.sequence_lens
        )
        with pytest.raises(onnx.shape_inference.InferenceError, match=f"'{case.name}'"):
            self._strictly_inferred(graph)

    def _assert_cases_cover_the_doc(self, op_type: str) -> None:
        """Every error of the doc string's list has a case, and the list has no other."""
        doc = onnx.defs.get_schema(op_type, 1, AI_ONNX_PREVIEW_DOMAIN).doc
        errors = doc.split("\nErrors:\n", 1)[1].split("\nAt run time", 1)[0]
        listed = re.findall(r"^\* ", errors, re.MULTILINE)
        applicable = [error for error, ops in ERRORS.items() if op_type in ops]
        assert len(listed) == len(applicable)
        assert [
            error
            for error in applicable
            if error in {case.error for case in static_errors(op_type)}
        ] == applicable
