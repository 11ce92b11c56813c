# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""MaskedRNN (ai.onnx.preview, version 1): RNN-22's cell in the masked recurrence."""

from __future__ import annotations

from onnx.reference.ops.aionnx_preview._op_common_masked_rnn import (
    CommonMaskedRNN,
    clipper,
)


class MaskedRNN(CommonMaskedRNN):
    num_gates = 1
    default_activations = ("Tanh",)

    def _cell(self, R, Rb, P, functions, clip, input_forget, linear_before_reset):  # noqa: ARG002
        """RNN-22: Ht = f(Xt·Wᵀ + Ht-1·Rᵀ + Wb + Rb)."""
        (f,) = functions
        clipped = clipper(clip)

        def step(xw, state):
            return (f(clipped(xw + state[0] @ R.T)),)

        return step

    def _run(
        self,
        X,
        W,
        R,
        B=None,
        sequence_lens=None,
        initial_h=None,
        mask=None,
        activation_alpha=None,
        activation_beta=None,
        activations=None,
        clip=None,
        direction=None,
        hidden_size=None,  # noqa: ARG002
        layout=None,
        masked_output=None,
    ):
        n_outputs = len(self.onnx_node.output)
        return self._common(
            X, W, R, B, sequence_lens, initial_h, None, None, mask,
            activation_alpha, activation_beta, activations, clip, direction or "forward",
            0, layout or 0, 0, masked_output or "zero",
        )[: max(n_outputs, 1)]  # fmt: skip
