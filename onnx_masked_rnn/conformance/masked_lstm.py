"""Node tests for MaskedLSTM, in the style of ``onnx/backend/test/case/node/lstm.py``.

Unless a case says otherwise: float32, seq_length 3, batch 2, input 2, hidden 3, direction forward,
mask with holes, masked_output "zero" (the default), and B, initial_h, initial_c and P present
(random inputs seeded by the case name; expected outputs from the numpy reference).
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from onnx_masked_rnn import reference
from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import ACTIVATIONS, DIRECTIONS, MASKED_OUTPUT_MODES
from onnx_masked_rnn.conformance.expect import expect, random_case
from onnx_masked_rnn.testing import MASK_KINDS


def _case(name: str, **kwargs: object) -> None:
    random_case("MaskedLSTM", f"test_masked_lstm_{name}", **kwargs)


class MaskedLSTM:
    @staticmethod
    def export_directions_and_modes() -> None:
        """Every direction with every masked_output mode, on a mask with holes and non-zero
        initial states: masked steps leave (h, c) untouched; Y holds zeros ("zero") or the
        previous output ("carry") there."""
        for direction in DIRECTIONS:
            for mode in MASKED_OUTPUT_MODES:
                _case(f"{direction}_{mode}", direction=direction, masked_output=mode)

    @staticmethod
    def export_batchwise() -> None:
        """layout=1: X, mask, states and outputs batch-major; mask is [batch, seq]."""
        for direction, mode in (("forward", "carry"), ("reverse", "zero"), ("bidirectional", "carry")):
            _case(f"batchwise_{direction}_{mode}", layout=1, direction=direction, masked_output=mode)

    @staticmethod
    def export_mask_patterns() -> None:
        """Every mask pattern, both directions: all true (plain LSTM), right-padded,
        left-padded, one fully masked row (Y_h/Y_c are its initial states), all masked."""
        for kind in MASK_KINDS:
            if kind != "holes":
                _case(f"mask_{kind}", T=4, N=3, mask_kind=kind, direction="bidirectional")

    @staticmethod
    def export_mask_patterns_modes() -> None:
        """Left padding and a fully masked row in both modes: before the first
        unmasked step Y is zero in both modes."""
        for kind in ("left_padded", "one_row_masked"):
            for mode in MASKED_OUTPUT_MODES:
                _case(f"mask_{kind}_{mode}", T=4, N=3, mask_kind=kind, masked_output=mode)

    @staticmethod
    def export_sequence_lens() -> None:
        """sequence_lens alone (a length of 0 keeps the initial state) and combined with a mask
        (effective mask = mask AND t < sequence_lens)."""
        _case("sequence_lens", T=4, N=3, present=("B", "initial_h", "initial_c"), sequence_lens=[2, 0, 4])
        _case(
            "sequence_lens_reverse_zero",
            T=4,
            N=3,
            present=("B",),
            sequence_lens=[3, 1, 4],
            direction="reverse",
            masked_output="zero",
        )
        _case("sequence_lens_and_mask", T=4, N=3, sequence_lens=[3, 4, 2], direction="bidirectional")
        _case(
            "sequence_lens_and_mask_carry",
            T=4,
            N=3,
            sequence_lens=[0, 4, 3],
            mask_kind="left_padded",
            masked_output="carry",
        )

    @staticmethod
    def export_optional_inputs() -> None:
        """Optional inputs absent: none (a plain LSTM with every attribute at its default), mask
        only, states only, initial_h without initial_c, B and P only."""
        _case("defaults", present=())
        _case("mask_only", present=("mask",))
        _case("initial_states_only", present=("initial_h", "initial_c"), direction="bidirectional")
        _case("initial_h_only", present=("initial_h", "mask"), masked_output="carry")
        _case("initial_c_only", present=("initial_c", "mask"), direction="reverse")
        _case(
            "bias_and_peepholes", present=("B", "P", "mask"), direction="bidirectional", masked_output="zero"
        )

    @staticmethod
    def export_optional_outputs() -> None:
        """Only some outputs requested: Y_h alone, Y alone, Y_c alone."""
        _case("output_y_h", outputs=("Y_h",), direction="bidirectional")
        _case("output_y", outputs=("Y",), direction="reverse", masked_output="carry")
        _case("output_y_c", outputs=("Y_c",))

    @staticmethod
    def export_cell_attributes() -> None:
        """The LSTM cell's own attributes under a mask: input_forget (f = 1 - i), clip on the
        gate pre-activations, and non-default activations with their alpha/beta
        (HardSigmoid, ScaledTanh, Softsign forward; Sigmoid, Elu, Affine reverse)."""
        _case("input_forget", input_forget=1, direction="bidirectional")
        _case("clip", clip=0.5, direction="bidirectional", masked_output="carry")
        _case(
            "activations",
            direction="bidirectional",
            activations=["HardSigmoid", "ScaledTanh", "Softsign", "Sigmoid", "Elu", "Affine"],
            activation_alpha=[0.3, 1.1, 0.7, 0.8],
            activation_beta=[0.45, 0.9, 0.05],
        )

    @staticmethod
    def export_without_peepholes() -> None:
        """No P: clip, input_forget, both, and every activation function in some slot, so that
        a defect of the cell is not hidden behind the peephole terms (the body computes the
        three sigmoid gates in one call when P is absent)."""
        no_p = ("B", "initial_h", "initial_c", "mask")
        _case("no_peepholes_clip", present=no_p, clip=0.4, direction="bidirectional", masked_output="carry")
        _case("no_peepholes_input_forget", present=no_p, input_forget=1, direction="reverse")
        _case(
            "no_peepholes_clip_input_forget",
            present=no_p,
            clip=0.6,
            input_forget=1,
            direction="bidirectional",
        )
        names = sorted(ACTIVATIONS)  # 11 functions, in two bidirectional cases of 6 slots each
        for k, chosen in enumerate((names[:6], [*names[6:], "Sigmoid"])):
            alphas = [round(0.3 + 0.1 * i, 2) for i, n in enumerate(chosen) if ACTIVATIONS[n][0]]
            betas = [round(0.2 + 0.1 * i, 2) for i, n in enumerate(chosen) if ACTIVATIONS[n][1]]
            _case(
                f"no_peepholes_activations_{k}",
                present=no_p,
                direction="bidirectional",
                masked_output="carry",
                activations=chosen,
                **({"activation_alpha": alphas} if alphas else {}),
                **({"activation_beta": betas} if betas else {}),
            )

    @staticmethod
    def export_starts_masked() -> None:
        """The first step of each direction masked, with initial states, every direction and
        mode: before any processed step Y is zero in both modes while the state is the initial
        one (a body that writes the state there, or reverses the carry the wrong way, fails)."""
        for direction in DIRECTIONS:
            for mode in MASKED_OUTPUT_MODES:
                _case(
                    f"starts_masked_{direction}_{mode}",
                    T=4,
                    N=3,
                    present=("B", "initial_h", "initial_c", "mask"),
                    mask_kind="starts_masked",
                    direction=direction,
                    masked_output=mode,
                )

    @staticmethod
    def export_shapes() -> None:
        """Edge sizes: batch 1, seq_length 1 (with a masked row), and a larger bidirectional
        batch-major case."""
        _case("batch_1", N=1, T=4, direction="bidirectional")
        _case("seq_length_1", T=1, N=3, direction="bidirectional", masked_output="zero")
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
        _case("float64", dtype=np.float64, direction="bidirectional")
        _case("float64_batchwise_zero", dtype=np.float64, layout=1, direction="reverse", masked_output="zero")
        _case("float16", dtype=np.float16, rtol=5e-3, atol=5e-3, direction="bidirectional")
        # float16, batch-major, initial_h, "carry": onnxruntime 1.32's optimizer crashed on an earlier body
        _case(
            "float16_batchwise_carry", dtype=np.float16, rtol=5e-3, atol=5e-3, layout=1, masked_output="carry"
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
            masked_output="carry",
        )

    @staticmethod
    def export_seed000_embedding_carry() -> None:
        """The onnxruntime issue 12492 scenario: a Keras ``Embedding(mask_zero=True)`` mask on a
        right-padded batch-major batch (ids 0 are padding), LSTM with return_sequences and
        return_state, "carry": the padded step of row 0 repeats the previous output, as
        TensorFlow does, where ONNX LSTM with sequence_lens gives zeros."""
        rng = np.random.default_rng(0)
        ids = np.array([[1, 2, 3, 0], [1, 2, 3, 4], [1, 2, 3, 4]])
        embeddings = rng.standard_normal((5, 5)).astype(np.float32)
        X = embeddings[ids]  # [batch, seq, input]: the padding id still has an embedding
        mask = ids != 0
        hidden_size = 3
        W = (rng.standard_normal((1, 4 * hidden_size, 5)) * 0.5).astype(np.float32)
        R = (rng.standard_normal((1, 4 * hidden_size, hidden_size)) * 0.5).astype(np.float32)
        B = np.concatenate(
            [rng.standard_normal((1, 4 * hidden_size)) * 0.5, np.zeros((1, 4 * hidden_size))], 1
        )
        B = B.astype(np.float32)
        node = helper.make_node(
            "MaskedLSTM",
            inputs=["X", "W", "R", "B", "", "", "", "", "mask"],
            outputs=["Y", "Y_h", "Y_c"],
            domain=DOMAIN,
            hidden_size=hidden_size,
            layout=1,
            masked_output="carry",
        )
        Y, Y_h, Y_c = reference.masked_lstm(
            X, W, R, B, mask=mask, hidden_size=hidden_size, layout=1, masked_output="carry"
        )
        assert np.array_equal(Y[0, 3], Y[0, 2]) and np.array_equal(Y_h[0, 0], Y[0, 2, 0])
        expect(node, [X, W, R, B, mask], [Y, Y_h, Y_c], name="test_masked_lstm_seed000_embedding_carry")
