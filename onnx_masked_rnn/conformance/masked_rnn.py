"""Node tests for MaskedRNN, in the style of ``onnx/backend/test/case/node/rnn.py``.

Unless a case says otherwise: float32, seq_length 3, batch 2, input 2, hidden 3, direction forward,
Tanh, mask with holes, masked_output "zero" (the default), and B and initial_h present (random
inputs seeded by the case name; expected outputs from the numpy reference).
"""

from __future__ import annotations

import numpy as np

from onnx_masked_rnn.attributes import ACTIVATIONS, DIRECTIONS, MASKED_OUTPUT_MODES
from onnx_masked_rnn.conformance.expect import random_case
from onnx_masked_rnn.testing import MASK_KINDS

# Non-default parameters for the activations that take them (ACTIVATIONS lists which do).
_ALPHA_BETA = {
    "Affine": (0.7, 0.2),
    "LeakyRelu": (0.2, None),
    "ThresholdedRelu": (0.3, None),
    "ScaledTanh": (1.5, 0.6),
    "HardSigmoid": (0.3, 0.45),
    "Elu": (0.6, None),
}


def _case(name: str, **kwargs: object) -> None:
    random_case("MaskedRNN", f"test_masked_rnn_{name}", **kwargs)


class MaskedRNN:
    @staticmethod
    def export_directions_and_modes() -> None:
        """Every direction with every masked_output mode, on a mask with holes and a non-zero
        initial state: masked steps leave h untouched; Y holds zeros ("zero") or the previous
        output ("carry") there."""
        for direction in DIRECTIONS:
            for mode in MASKED_OUTPUT_MODES:
                _case(f"{direction}_{mode}", direction=direction, masked_output=mode)

    @staticmethod
    def export_activations() -> None:
        """Each of the 11 activation functions as the cell's f, forward on a mask
        with holes, with non-default alpha/beta where the function takes them."""
        for name, (takes_alpha, takes_beta, _, _) in ACTIVATIONS.items():
            alpha, beta = _ALPHA_BETA.get(name, (None, None))
            assert (alpha is not None) == takes_alpha and (beta is not None) == takes_beta, name
            params = {"activation_alpha": [alpha]} if takes_alpha else {}
            if takes_beta:
                params["activation_beta"] = [beta]
            _case(f"activation_{name.lower()}", T=4, N=3, mask_kind="holes", activations=[name], **params)

    @staticmethod
    def export_activation_defaults() -> None:
        """Each activation that takes alpha or beta, with neither given: the defaults of the ONNX
        operator of the same name (ThresholdedRelu alpha 1.0, LeakyRelu 0.01, HardSigmoid 0.2 and
        0.5, Elu 1.0), and for Affine (1.0, 0.0) and ScaledTanh (1.0, 1.0) the specification's."""
        for name, (takes_alpha, takes_beta, _, _) in ACTIVATIONS.items():
            if takes_alpha or takes_beta:
                _case(f"activation_{name.lower()}_defaults", T=4, N=3, mask_kind="holes", activations=[name])

    @staticmethod
    def export_activations_bidirectional() -> None:
        """Different activations per direction: LeakyRelu forward, Softsign reverse."""
        _case(
            "activations_bidirectional",
            direction="bidirectional",
            activations=["LeakyRelu", "Softsign"],
            activation_alpha=[0.05],
        )

    @staticmethod
    def export_batchwise() -> None:
        """layout=1: X, mask, states and outputs batch-major; mask is [batch, seq]."""
        for direction, mode in (("forward", "carry"), ("reverse", "zero"), ("bidirectional", "carry")):
            _case(f"batchwise_{direction}_{mode}", layout=1, direction=direction, masked_output=mode)

    @staticmethod
    def export_mask_patterns() -> None:
        """Every mask pattern, both directions: all true (plain RNN), right-padded, left-padded,
        one fully masked row (Y_h is its initial state), all masked."""
        for kind in MASK_KINDS:
            if kind != "holes":
                _case(f"mask_{kind}", T=4, N=3, mask_kind=kind, direction="bidirectional")

    @staticmethod
    def export_mask_patterns_modes() -> None:
        """Left padding in both modes, reverse."""
        for mode in MASKED_OUTPUT_MODES:
            _case(
                f"mask_left_padded_{mode}",
                T=4,
                N=3,
                mask_kind="left_padded",
                direction="reverse",
                masked_output=mode,
            )

    @staticmethod
    def export_sequence_lens() -> None:
        """sequence_lens alone (a length of 0 keeps the initial state) and combined with a mask."""
        _case("sequence_lens", T=4, N=3, present=("B", "initial_h"), sequence_lens=[2, 0, 4])
        _case(
            "sequence_lens_and_mask",
            T=4,
            N=3,
            sequence_lens=[3, 4, 1],
            direction="bidirectional",
            masked_output="carry",
        )

    @staticmethod
    def export_optional_inputs() -> None:
        """Optional inputs absent: none (a plain RNN with every attribute at its default), mask
        only, initial state only."""
        _case("defaults", present=())
        _case("mask_only", present=("mask",), direction="reverse")
        _case("initial_h_only", present=("initial_h",), direction="bidirectional", masked_output="zero")

    @staticmethod
    def export_optional_outputs() -> None:
        """Only some outputs requested: Y_h alone, Y alone."""
        _case("output_y_h", outputs=("Y_h",), direction="bidirectional")
        _case("output_y", outputs=("Y",), direction="reverse", masked_output="zero")

    @staticmethod
    def export_clip() -> None:
        """clip bounds the pre-activation; with Relu it bounds the output too."""
        _case(
            "clip", clip=0.3, activations=["Relu", "Relu"], direction="bidirectional", masked_output="carry"
        )

    @staticmethod
    def export_shapes() -> None:
        """Edge sizes: batch 1, seq_length 1, and a larger bidirectional batch-major case."""
        _case("batch_1", N=1, T=4, direction="bidirectional")
        _case("seq_length_1", T=1, N=3, masked_output="carry")
        _case(
            "larger_batchwise_zero",
            T=7,
            N=4,
            I=3,
            H=5,
            layout=1,
            direction="bidirectional",
            masked_output="zero",
        )

    @staticmethod
    def export_dtypes() -> None:
        """float64 (rtol 1e-10, atol 1e-12) and float16 (rtol = atol = 5e-3, about five float16
        ulps at 1: the reference computes in float32 and rounds once, a runtime may round at
        every step)."""
        _case("float64", dtype=np.float64, direction="bidirectional")
        _case(
            "float16",
            dtype=np.float16,
            rtol=5e-3,
            atol=5e-3,
            direction="bidirectional",
            masked_output="carry",
        )

    @staticmethod
    def export_nan_at_masked_steps() -> None:
        """X is NaN at every masked step (mask holes, and steps beyond sequence_lens): nothing
        of it may reach any output."""
        _case("nan_at_masked_steps", nan_at_masked_steps=True, direction="bidirectional")
        _case(
            "nan_beyond_sequence_lens",
            T=4,
            N=3,
            nan_at_masked_steps=True,
            sequence_lens=[2, 4, 3],
            mask_kind="all_true",
            direction="reverse",
        )
