# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from typing import Any

import pytest
from masked_rnn_static_errors import StaticError, valid
from masked_rnn_test_utils import MaskedRNNShapeInferenceHelper, static_error_params

from onnx import TensorProto


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
        self._assert_outputs(graph, ["y", "y_h"], [(3, 7, 2, 4), (3, 2, 4)])

    @pytest.mark.parametrize("attributes", valid("MaskedGRU"))
    def test_masked_gru_valid(self, attributes: dict[str, Any]) -> None:
        self._assert_valid("MaskedGRU", attributes)

    @pytest.mark.parametrize("case", static_error_params("MaskedGRU"))
    def test_masked_gru_static_error(self, case: StaticError) -> None:
        self._assert_static_error("MaskedGRU", case)

    def test_masked_gru_static_errors_cover_the_doc(self) -> None:
        self._assert_cases_cover_the_doc("MaskedGRU")
