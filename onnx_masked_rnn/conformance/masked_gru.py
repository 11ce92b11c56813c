"""Node tests for MaskedGRU, in the style of ``onnx/backend/test/case/node/gru.py``.

Unless a case says otherwise: float32, seq_length 3, batch 2, input 2, hidden 3, direction forward,
linear_before_reset 0, mask with holes, masked_output "zero" (the default), and B and initial_h
present (random inputs seeded by the case name; expected outputs from the numpy reference).
"""

from __future__ import annotations

import numpy as np

from onnx_masked_rnn.attributes import DIRECTIONS, MASKED_OUTPUT_MODES
from onnx_masked_rnn.conformance.expect import random_case
from onnx_masked_rnn.testing import MASK_KINDS


def _case(name: str, **kwargs: object) -> None:
    random_case("MaskedGRU", f"test_masked_gru_{name}", **kwargs)


class MaskedGRU:
    @staticmethod
    def export_directions_and_modes() -> None:
        """Every direction with every masked_output mode, on a mask with holes and a non-zero
        initial state: masked steps leave h untouched; Y holds zeros ("zero") or the previous
        output ("carry") there."""
        for direction in DIRECTIONS:
            for mode in MASKED_OUTPUT_MODES:
                _case(f"{direction}_{mode}", direction=direction, masked_output=mode)

    @staticmethod
    def export_linear_before_reset() -> None:
        """linear_before_reset=1 (the cuDNN / Keras reset_after form) in every direction, and
        explicitly 0."""
        for direction, mode in (("forward", "carry"), ("reverse", "zero"), ("bidirectional", "carry")):
            _case(
                f"linear_before_reset_{direction}_{mode}",
                linear_before_reset=1,
                direction=direction,
                masked_output=mode,
            )
        _case("linear_before_reset_0", linear_before_reset=0, direction="bidirectional")

    @staticmethod
    def export_batchwise() -> None:
        """layout=1: X, mask, states and outputs batch-major; mask is [batch, seq]."""
        for direction, mode in (("forward", "zero"), ("reverse", "carry"), ("bidirectional", "carry")):
            _case(f"batchwise_{direction}_{mode}", layout=1, direction=direction, masked_output=mode)

    @staticmethod
    def export_mask_patterns() -> None:
        """Every mask pattern, both directions: all true (plain GRU), right-padded, left-padded,
        one fully masked row (Y_h is its initial state), all masked."""
        for kind in MASK_KINDS:
            if kind != "holes":
                _case(f"mask_{kind}", T=4, N=3, mask_kind=kind, direction="bidirectional")

    @staticmethod
    def export_mask_patterns_modes() -> None:
        """Left padding and a fully masked row in both modes."""
        for kind in ("left_padded", "one_row_masked"):
            for mode in MASKED_OUTPUT_MODES:
                _case(f"mask_{kind}_{mode}", T=4, N=3, mask_kind=kind, masked_output=mode)

    @staticmethod
    def export_sequence_lens() -> None:
        """sequence_lens alone (a length of 0 keeps the initial state) and combined with a mask."""
        _case("sequence_lens", T=4, N=3, present=("B", "initial_h"), sequence_lens=[2, 0, 4])
        _case(
            "sequence_lens_reverse_zero",
            T=4,
            N=3,
            present=("B",),
            sequence_lens=[3, 1, 4],
            direction="reverse",
            masked_output="zero",
            linear_before_reset=1,
        )
        _case("sequence_lens_and_mask", T=4, N=3, sequence_lens=[3, 4, 2], direction="bidirectional")

    @staticmethod
    def export_optional_inputs() -> None:
        """Optional inputs absent: none (a plain GRU with every attribute at its default), mask
        only, initial state only, bias and mask."""
        _case("defaults", present=())
        _case("mask_only", present=("mask",))
        _case("initial_h_only", present=("initial_h",), direction="bidirectional")
        _case("bias_and_mask", present=("B", "mask"), direction="reverse", masked_output="carry")

    @staticmethod
    def export_optional_outputs() -> None:
        """Only some outputs requested: Y_h alone, Y alone."""
        _case("output_y_h", outputs=("Y_h",), direction="bidirectional")
        _case("output_y", outputs=("Y",), masked_output="carry")

    @staticmethod
    def export_cell_attributes() -> None:
        """The GRU cell's own attributes under a mask: clip, and non-default activations with
        their alpha/beta (HardSigmoid and Softplus forward; Sigmoid and ScaledTanh reverse)."""
        _case("clip", clip=0.4, direction="bidirectional", linear_before_reset=1)
        _case(
            "activations",
            direction="bidirectional",
            activations=["HardSigmoid", "Softplus", "Sigmoid", "ScaledTanh"],
            activation_alpha=[0.25, 0.9],
            activation_beta=[0.55, 1.3],
        )

    @staticmethod
    def export_shapes() -> None:
        """Edge sizes: batch 1, seq_length 1, and a larger bidirectional batch-major case."""
        _case("batch_1", N=1, T=4, direction="bidirectional")
        _case("seq_length_1", T=1, N=3, direction="bidirectional", masked_output="carry")
        _case(
            "larger_batchwise_carry",
            T=7,
            N=4,
            I=3,
            H=5,
            layout=1,
            direction="bidirectional",
            masked_output="carry",
        )

    @staticmethod
    def export_dtypes() -> None:
        """float64 (rtol 1e-10, atol 1e-12) and float16 (rtol = atol = 5e-3, about five float16
        ulps at 1: the reference computes in float32 and rounds once, a runtime may round at
        every step), also batch-major with initial_h in "carry" mode."""
        _case("float64", dtype=np.float64, direction="bidirectional", linear_before_reset=1)
        _case("float16", dtype=np.float16, rtol=5e-3, atol=5e-3, direction="bidirectional")
        # float16, batch-major, initial_h, "carry": onnxruntime 1.32's optimizer crashed on an earlier body
        _case(
            "float16_batchwise_carry", dtype=np.float16, rtol=5e-3, atol=5e-3, layout=1, masked_output="carry"
        )

    @staticmethod
    def export_nan_at_masked_steps() -> None:
        """X is NaN at every masked step (mask holes, and steps beyond sequence_lens): nothing
        of it may reach any output."""
        _case(
            "nan_at_masked_steps", nan_at_masked_steps=True, direction="bidirectional", linear_before_reset=1
        )
        _case(
            "nan_beyond_sequence_lens",
            T=4,
            N=3,
            nan_at_masked_steps=True,
            sequence_lens=[2, 4, 3],
            mask_kind="all_true",
            masked_output="zero",
        )
