# Copyright (c) ONNX Project Contributors
#
# SPDX-License-Identifier: Apache-2.0
"""MaskedGRU (ai.onnx.preview, version 1): GRU-22's cell in the masked recurrence."""

from __future__ import annotations

import numpy as np

from onnx.reference.ops.aionnx_preview._op_common_masked_rnn import (
    CommonMaskedRNN,
    clipper,
)


class MaskedGRU(CommonMaskedRNN):
    num_gates = 3
    default_activations = ("Sigmoid", "Tanh")

    def _cell(self, R, Rb, P, functions, clip, input_forget, linear_before_reset):  # noqa: ARG002
        """GRU-22: gates z, r, h; with linear_before_reset the h gate's recurrent bias Rbh is
        added to Ht-1·Rhᵀ before the reset gate applies.
        """
        f, g = functions
        clipped = clipper(clip)
        H = R.shape[1]
        R_zr, R_h = R[: 2 * H], R[2 * H :]
        Rb_h = Rb[2 * H :]

        def step(xw, state):
            (h_prev,) = state
            x_z, x_r, x_h = np.split(xw, 3, axis=-1)
            h_z, h_r = np.split(h_prev @ R_zr.T, 2, axis=-1)
            z = f(clipped(x_z + h_z))
            r = f(clipped(x_r + h_r))
            if linear_before_reset:
                candidate = g(clipped(x_h + r * (h_prev @ R_h.T + Rb_h)))
            else:
                candidate = g(clipped(x_h + (r * h_prev) @ R_h.T))
            return ((1 - z) * candidate + z * h_prev,)

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
        linear_before_reset=None,
        masked_output=None,
    ):
        n_outputs = len(self.onnx_node.output)
        return self._common(
            X, W, R, B, sequence_lens, initial_h, None, None, mask,
            activation_alpha, activation_beta, activations, clip, direction or "forward",
            0, layout or 0, linear_before_reset or 0, masked_output or "zero",
        )[: max(n_outputs, 1)]  # fmt: skip
