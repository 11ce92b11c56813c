# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

import numpy as np

from onnx.backend.test.case.base import Base
from onnx.backend.test.case.node.masked_rnn_common import (
    expect_masked,
    make_inputs,
    masked_node,
)


class MaskedGRU(Base):
    @staticmethod
    def export_masked_gru() -> None:
        """Defaults (forward, masked_output "zero", linear_before_reset 0) with a mask with holes."""
        node = masked_node(
            "MaskedGRU",
        )
        expect_masked(node, make_inputs(node), name="test_masked_gru")

    @staticmethod
    def export_reverse_carry() -> None:
        """Direction "reverse" with masked_output "carry"."""
        node = masked_node(
            "MaskedGRU",
            direction="reverse",
            masked_output="carry",
        )
        expect_masked(node, make_inputs(node), name="test_masked_gru_reverse_carry")

    @staticmethod
    def export_linear_before_reset() -> None:
        """linear_before_reset 1, bidirectional, "carry"."""
        node = masked_node(
            "MaskedGRU",
            direction="bidirectional",
            linear_before_reset=1,
            masked_output="carry",
        )
        expect_masked(
            node, make_inputs(node), name="test_masked_gru_linear_before_reset"
        )

    @staticmethod
    def export_batchwise_sequence_lens() -> None:
        """Layout 1 with sequence_lens and mask, no initial_h."""
        node = masked_node(
            "MaskedGRU",
            inputs=["X", "W", "R", "B", "sequence_lens", "", "mask"],
            layout=1,
        )
        inputs = make_inputs(node, sequence_lens=[2, 4, 0])
        expect_masked(node, inputs, name="test_masked_gru_batchwise_sequence_lens")

    @staticmethod
    def export_activations_double() -> None:
        """float64, clip, and the activation functions ThresholdedRelu (alpha 0.1), Softsign,
        Softplus and Relu.
        """
        node = masked_node(
            "MaskedGRU",
            direction="bidirectional",
            clip=1.5,
            activations=["ThresholdedRelu", "Softsign", "Softplus", "Relu"],
            activation_alpha=[0.1],
        )
        inputs = make_inputs(node, dtype=np.float64)
        expect_masked(node, inputs, name="test_masked_gru_activations_double")

    @staticmethod
    def export_bidirectional() -> None:
        """Direction "bidirectional", "zero": both directions skip the same steps; the reverse
        direction of a row starts at its last processed step.
        """
        node = masked_node(
            "MaskedGRU",
            direction="bidirectional",
        )
        expect_masked(node, make_inputs(node), name="test_masked_gru_bidirectional")
