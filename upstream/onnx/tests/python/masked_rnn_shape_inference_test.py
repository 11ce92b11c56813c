# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from typing import Any

import pytest
from masked_rnn_static_errors import StaticError, valid
from masked_rnn_test_utils import MaskedRNNShapeInferenceHelper, static_error_params

from onnx import TensorProto


class TestMaskedRNNShapeInference(MaskedRNNShapeInferenceHelper):
    def test_masked_rnn_mask_unknown_dims(self) -> None:
        graph = self._masked_rnn_graph(
            "MaskedRNN", (7, 3, 5), (TensorProto.BOOL, (None, "N"))
        )
        self._assert_outputs(graph, ["y", "y_h"], [(7, 1, 3, 4), (1, 3, 4)])

    @pytest.mark.parametrize("attributes", valid("MaskedRNN"))
    def test_masked_rnn_valid(self, attributes: dict[str, Any]) -> None:
        self._assert_valid("MaskedRNN", attributes)

    @pytest.mark.parametrize("case", static_error_params("MaskedRNN"))
    def test_masked_rnn_static_error(self, case: StaticError) -> None:
        self._assert_static_error("MaskedRNN", case)

    def test_masked_rnn_static_errors_cover_the_doc(self) -> None:
        self._assert_cases_cover_the_doc("MaskedRNN")
