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


class MaskedLSTM(Base):
    @staticmethod
    def export_masked_lstm() -> None:
        """Defaults (forward, masked_output "zero") with a mask with holes: a masked step keeps
        (h, c) and its Y is 0.
        """
        node = masked_node(
            "MaskedLSTM",
            hidden_size=3,
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm")

    @staticmethod
    def export_carry() -> None:
        """masked_output "carry": Y at a masked step repeats the previous output, 0 before the
        first processed step (Keras masking).
        """
        node = masked_node(
            "MaskedLSTM",
            masked_output="carry",
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm_carry")

    @staticmethod
    def export_reverse_carry() -> None:
        """Direction "reverse" with "carry": steps run from the last to the first, the output is
        time-aligned and "previous" means the later step.
        """
        node = masked_node(
            "MaskedLSTM",
            direction="reverse",
            masked_output="carry",
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm_reverse_carry")

    @staticmethod
    def export_bidirectional() -> None:
        """Direction "bidirectional": both directions skip the same steps."""
        node = masked_node(
            "MaskedLSTM",
            direction="bidirectional",
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm_bidirectional")

    @staticmethod
    def export_batchwise() -> None:
        """Layout 1: X, mask ([batch_size, seq_length]), states and outputs batch-major."""
        node = masked_node(
            "MaskedLSTM",
            direction="bidirectional",
            layout=1,
            masked_output="carry",
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm_batchwise")

    @staticmethod
    def export_sequence_lens() -> None:
        """sequence_lens and mask together: step t of row b is processed when
        mask[t, b] and t < sequence_lens[b]; a row of length 0 keeps its initial state.
        """
        node = masked_node(
            "MaskedLSTM",
            inputs=[
                "X",
                "W",
                "R",
                "B",
                "sequence_lens",
                "initial_h",
                "initial_c",
                "",
                "mask",
            ],
            direction="bidirectional",
            masked_output="carry",
        )
        inputs = make_inputs(node, sequence_lens=[3, 0, 4])
        expect_masked(node, inputs, name="test_masked_lstm_sequence_lens")

    @staticmethod
    def export_peepholes_input_forget() -> None:
        """Peepholes P and input_forget 1 (f = 1 - i)."""
        node = masked_node(
            "MaskedLSTM",
            inputs=["X", "W", "R", "B", "", "initial_h", "initial_c", "P", "mask"],
            input_forget=1,
        )
        expect_masked(
            node, make_inputs(node), name="test_masked_lstm_peepholes_input_forget"
        )

    @staticmethod
    def export_clip_activations() -> None:
        """Clip and six activation functions with their alpha and beta values, consumed in
        order by the functions that take them (HardSigmoid: 0.3, 0.4; LeakyRelu: 0.2;
        ScaledTanh: 1.5, 0.7; Affine: 0.9, 0.1; Elu: 1.1).
        """
        node = masked_node(
            "MaskedLSTM",
            direction="bidirectional",
            clip=0.8,
            activations=[
                "HardSigmoid",
                "LeakyRelu",
                "ScaledTanh",
                "Sigmoid",
                "Affine",
                "Elu",
            ],
            activation_alpha=[0.3, 0.2, 1.5, 0.9, 1.1],
            activation_beta=[0.4, 0.7, 0.1],
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm_clip_activations")

    @staticmethod
    def export_no_mask() -> None:
        """No mask and no optional input: MaskedLSTM computes LSTM-22."""
        node = masked_node(
            "MaskedLSTM",
            inputs=["X", "W", "R"],
        )
        expect_masked(node, make_inputs(node), name="test_masked_lstm_no_mask")

    @staticmethod
    def export_mask_kinds() -> None:
        """Right-padded (what sequence_lens expresses), left-padded, one row without any step
        (Y_h, Y_c are its initial states) and every step masked, in "carry" mode.
        """
        node = masked_node(
            "MaskedLSTM",
            masked_output="carry",
        )
        for kind in ("right_padded", "left_padded", "one_row_masked", "all_masked"):
            inputs = make_inputs(node, mask=kind)
            expect_masked(node, inputs, name=f"test_masked_lstm_mask_{kind}")

    @staticmethod
    def export_empty() -> None:
        """seq_length 0 and batch_size 0: no step is processed, Y is empty and Y_h, Y_c are the
        initial states.
        """
        node = masked_node(
            "MaskedLSTM",
            masked_output="carry",
        )
        inputs = make_inputs(node, mask="all_masked", seq_length=0)
        expect_masked(node, inputs, name="test_masked_lstm_seq_length_0")
        inputs = make_inputs(node, batch_size=0)
        expect_masked(node, inputs, name="test_masked_lstm_batch_size_0")

    @staticmethod
    def export_nan_at_masked_steps() -> None:
        """NaN in X at every masked step: a masked step's input reaches no output, so every
        output is finite.
        """
        node = masked_node(
            "MaskedLSTM",
            direction="bidirectional",
            masked_output="carry",
        )
        inputs = make_inputs(node)
        inputs["X"][~inputs["mask"]] = np.nan
        expect_masked(node, inputs, name="test_masked_lstm_nan_at_masked_steps")

    @staticmethod
    def export_float16() -> None:
        """float16 inputs and outputs. The inputs are multiples of 0.5 and the activations Relu,
        so that every intermediate value is exact in float16 and any implementation, whether
        it computes in float16 or in a wider type, gives these outputs exactly.
        """
        node = masked_node(
            "MaskedLSTM",
            activations=["Relu", "Relu", "Relu"],
            masked_output="carry",
        )
        inputs = make_inputs(node, seq_length=2, hidden_size=2)
        for name, value in inputs.items():
            if value.dtype == np.float32:
                inputs[name] = (np.round(value * 2) / 2).astype(np.float16)
        expect_masked(node, inputs, name="test_masked_lstm_float16")

    @staticmethod
    def export_seq_length_0_sequence_lens() -> None:
        """seq_length 0 with sequence_lens, all 0: Y is empty, Y_h and Y_c the initial states."""
        node = masked_node(
            "MaskedLSTM",
            inputs=["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c"],
        )
        inputs = make_inputs(node, sequence_lens=[0, 0, 0], seq_length=0)
        expect_masked(node, inputs, name="test_masked_lstm_seq_length_0_sequence_lens")
