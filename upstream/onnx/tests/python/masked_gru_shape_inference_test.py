# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from typing import Any

import pytest
from masked_rnn_test_utils import (
    OPSET_IMPORTS,
    H,
    MaskedRNNShapeInferenceHelper,
    N,
    T,
    full_shapes,
    static_errors,
)

import onnx
from onnx import TensorProto
from onnx.helper import make_tensor_value_info


class TestMaskedGRUShapeInference(MaskedRNNShapeInferenceHelper):
    def test_masked_gru_batchwise_bidirectional(self) -> None:
        # layout 1: mask is [batch_size, seq_length] like the first two axes of X.
        graph = self._masked_rnn_graph(
            "MaskedGRU",
            (3, 7, 5),
            (TensorProto.BOOL, (3, 7)),
            layout=1,
            direction="bidirectional",
            masked_output="carry",
        )
        self._assert_inferred(
            graph,
            [
                make_tensor_value_info("y", TensorProto.FLOAT, (3, 7, 2, 4)),
                make_tensor_value_info("y_h", TensorProto.FLOAT, (3, 2, 4)),
            ],
            opset_imports=OPSET_IMPORTS,
        )

    @pytest.mark.parametrize(
        ("x_shape", "mask_shape", "attributes"),
        [
            pytest.param((7, 3, 5), (3, 7), {}, id="batch_major_mask_for_layout_0"),
            pytest.param(
                (3, 7, 5), (7, 3), {"layout": 1}, id="time_major_mask_for_layout_1"
            ),
            pytest.param((7, 3, 5), (7, 3, 1), {}, id="mask_of_rank_3"),
            pytest.param(
                (7, 3, 5), (7, 3), {"masked_output": "state"}, id="masked_output_state"
            ),
        ],
    )
    def test_masked_gru_invalid(
        self,
        x_shape: tuple[int, ...],
        mask_shape: tuple[int, ...],
        attributes: dict[str, Any],
    ) -> None:
        graph = self._masked_rnn_graph(
            "MaskedGRU", x_shape, (TensorProto.BOOL, mask_shape), **attributes
        )
        with pytest.raises(onnx.shape_inference.InferenceError):
            self._strictly_inferred(graph)

    def test_masked_gru_every_input(self) -> None:
        # Every input present and consistent, batch-major and bidirectional.
        graph = self._full_graph(
            "MaskedGRU",
            {"layout": 1, "direction": "bidirectional"},
            full_shapes("MaskedGRU", num_directions=2, layout=1),
            {},
            [T, 0, 2],
        )
        state = (N, 2, H)
        expected = [(N, T, 2, H), state, state]
        self._assert_inferred(
            graph,
            [
                make_tensor_value_info(name, TensorProto.FLOAT, shape)
                for name, shape in zip(["Y", "Y_h"], expected, strict=False)
            ],
            opset_imports=OPSET_IMPORTS,
        )

    @pytest.mark.parametrize(
        ("attributes", "shapes", "types", "sequence_lens", "name"),
        static_errors("MaskedGRU"),
    )
    def test_masked_gru_static_error(
        self,
        attributes: dict[str, Any],
        shapes: dict[str, tuple[int, ...]],
        types: dict[str, int],
        sequence_lens: list[int] | None,
        name: str,
    ) -> None:
        # Each error of the doc string's list is rejected, naming its input or attribute.
        graph = self._full_graph("MaskedGRU", attributes, shapes, types, sequence_lens)
        with pytest.raises(onnx.shape_inference.InferenceError, match=f"'{name}'"):
            self._strictly_inferred(graph)
