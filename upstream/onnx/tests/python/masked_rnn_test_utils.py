# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""What the shape-inference tests of MaskedLSTM, MaskedGRU and MaskedRNN share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shape_inference_test import TestShapeInferenceHelper

import onnx
from onnx import TensorProto, helper
from onnx.defs import AI_ONNX_PREVIEW_DOMAIN, ONNX_DOMAIN

if TYPE_CHECKING:
    from collections.abc import Sequence

    from onnx import GraphProto

OPSET_IMPORTS = [
    helper.make_opsetid(ONNX_DOMAIN, 22),
    helper.make_opsetid(AI_ONNX_PREVIEW_DOMAIN, 1),
]
NUM_GATES = {"MaskedLSTM": 4, "MaskedGRU": 3, "MaskedRNN": 1}


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
