# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""MaskedLSTM (ai.onnx.preview, version 1): LSTM-22's cell in the masked recurrence."""

from __future__ import annotations

import numpy as np

from onnx.reference.ops.aionnx_preview._op_common_masked_rnn import (
    CommonMaskedRNN,
    clipper,
)


class MaskedLSTM(CommonMaskedRNN):
    num_gates = 4
    default_activations = ("Sigmoid", "Tanh", "Tanh")

    def _cell(self, R, Rb, P, functions, clip, input_forget, linear_before_reset):  # noqa: ARG002
        """LSTM-22: gates i, o, f, c; peepholes P = [Pi, Po, Pf]; input_forget couples f = 1 - i."""
        f, g, h = functions
        clipped = clipper(clip)
        p_i, p_o, p_f = np.split(P, 3) if P is not None else (0, 0, 0)

        def step(xw, state):
            h_prev, c_prev = state
            x_i, x_o, x_f, x_c = np.split(xw + h_prev @ R.T, 4, axis=-1)
            i = f(clipped(x_i + p_i * c_prev))
            forget = 1 - i if input_forget else f(clipped(x_f + p_f * c_prev))
            c = forget * c_prev + i * g(clipped(x_c))
            o = f(clipped(x_o + p_o * c))
            return o * h(c), c

        return step

    def _run(
        self,
        X,
        W,
        R,
        B=None,
        sequence_lens=None,
        initial_h=None,
        initial_c=None,
        P=None,
        mask=None,
        activation_alpha=None,
        activation_beta=None,
        activations=None,
        clip=None,
        direction=None,
        hidden_size=None,  # noqa: ARG002
        input_forget=None,
        layout=None,
        masked_output=None,
    ):
        n_outputs = len(self.onnx_node.output)
        return self._common(
            X, W, R, B, sequence_lens, initial_h, initial_c, P, mask,
            activation_alpha, activation_beta, activations, clip, direction or "forward",
            input_forget or 0, layout or 0, 0, masked_output or "zero",
        )[: max(n_outputs, 1)]  # fmt: skip
