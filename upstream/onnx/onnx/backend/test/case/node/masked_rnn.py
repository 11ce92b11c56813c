# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
from __future__ import annotations

from onnx.backend.test.case.base import Base
from onnx.backend.test.case.node.masked_rnn_common import (
    expect_masked,
    make_inputs,
    masked_node,
)


class MaskedRNN(Base):
    @staticmethod
    def export_masked_rnn() -> None:
        """Defaults (forward, masked_output "zero", Tanh) with a mask with holes."""
        node = masked_node(
            "MaskedRNN",
        )
        expect_masked(node, make_inputs(node), name="test_masked_rnn")

    @staticmethod
    def export_bidirectional_carry() -> None:
        """Direction "bidirectional" with "carry" and Relu, Tanh."""
        node = masked_node(
            "MaskedRNN",
            direction="bidirectional",
            activations=["Relu", "Tanh"],
            masked_output="carry",
        )
        expect_masked(
            node, make_inputs(node), name="test_masked_rnn_bidirectional_carry"
        )

    @staticmethod
    def export_batchwise_reverse() -> None:
        """Layout 1, direction "reverse", sequence_lens and mask, clip."""
        node = masked_node(
            "MaskedRNN",
            inputs=["X", "W", "R", "B", "sequence_lens", "initial_h", "mask"],
            direction="reverse",
            layout=1,
            clip=0.6,
        )
        inputs = make_inputs(node, sequence_lens=[4, 1, 3])
        expect_masked(node, inputs, name="test_masked_rnn_batchwise_reverse")

    @staticmethod
    def export_sequence_lens() -> None:
        """sequence_lens without mask, the RNN-22 node's meaning: Y is 0 from a row's length on;
        a row of length 0 keeps its initial state as Y_h.
        """
        node = masked_node(
            "MaskedRNN",
            inputs=["X", "W", "R", "B", "sequence_lens", "initial_h"],
            direction="reverse",
        )
        inputs = make_inputs(node, sequence_lens=[2, 0, 4])
        expect_masked(node, inputs, name="test_masked_rnn_sequence_lens")
