# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from typing import Any

import pytest
from masked_rnn_static_errors import StaticError, valid
from masked_rnn_test_utils import MaskedRNNShapeInferenceHelper, static_error_params

import onnx
from onnx import TensorProto


class TestMaskedLSTMShapeInference(MaskedRNNShapeInferenceHelper):
    def test_masked_lstm(self) -> None:
        graph = self._masked_rnn_graph(
            "MaskedLSTM", ("T", "N", 5), (TensorProto.BOOL, ("T", "N"))
        )
        self._assert_outputs(
            graph,
            ["y", "y_h", "y_c"],
            [("T", 1, "N", 4), (1, "N", 4), (1, "N", 4)],
        )

    def test_masked_lstm_float_mask_fails(self) -> None:
        graph = self._masked_rnn_graph(
            "MaskedLSTM", (7, 3, 5), (TensorProto.FLOAT, (7, 3))
        )
        # _strictly_inferred passes check_type=True, without which this is no error.
        with pytest.raises(onnx.shape_inference.InferenceError, match="'mask'"):
            self._strictly_inferred(graph)

    @pytest.mark.parametrize("attributes", valid("MaskedLSTM"))
    def test_masked_lstm_valid(self, attributes: dict[str, Any]) -> None:
        self._assert_valid("MaskedLSTM", attributes)

    @pytest.mark.parametrize("case", static_error_params("MaskedLSTM"))
    def test_masked_lstm_static_error(self, case: StaticError) -> None:
        self._assert_static_error("MaskedLSTM", case)

    def test_masked_lstm_static_errors_cover_the_doc(self) -> None:
        self._assert_cases_cover_the_doc("MaskedLSTM")
