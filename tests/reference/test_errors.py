"""Every malformed input is a ``ValueError`` whose message names the input or attribute at fault.

Shapes are checked against ``X``, ``hidden_size`` and ``direction`` for every input, ``mask``
included, in both layouts; then types, ranges and attribute values.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from oracles import REFERENCE

from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.testing import random_inputs

T, N, I, H = 4, 3, 2, 5


def valid_inputs(op_type: str, layout: int = 0, dtype: type = np.float32) -> dict[str, np.ndarray]:
    attrs = parse_attributes(op_type, layout=layout)
    return random_inputs(
        attrs, T, N, I, H, rng=np.random.default_rng(0), dtype=dtype, sequence_lens=np.full(N, T, np.int32)
    )


def assert_rejected(op_type: str, inputs: dict[str, Any], name: str, **attributes: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(f"'{name}'")):
        REFERENCE[op_type](**inputs, **attributes)


@pytest.mark.parametrize("op_type", OP_SPECS)
@pytest.mark.parametrize("layout", [0, 1])
def test_valid_inputs_run(op_type: str, layout: int) -> None:
    """The inputs the other tests break are valid as they are."""
    outputs = REFERENCE[op_type](**valid_inputs(op_type, layout), layout=layout)
    assert len(outputs) == len(OP_SPECS[op_type].outputs)


def _wrong_shapes(op_type: str, layout: int) -> list[tuple[str, tuple[int, ...]]]:
    """(input, a wrong shape for it) for every input the op has: wrong rank, then each axis wrong."""
    G = OP_SPECS[op_type].num_gates
    TN = (N, T) if layout else (T, N)
    state = (N, 1, H) if layout else (1, N, H)
    good = {
        "X": (*TN, I),
        "W": (1, G * H, I),
        "R": (1, G * H, H),
        "B": (1, 2 * G * H),
        "sequence_lens": (N,),
        "initial_h": state,
        "initial_c": state,
        "P": (1, 3 * H),
        "mask": TN,
    }
    cases = []
    for name in OP_SPECS[op_type].inputs:
        shape = good[name]
        cases.append((name, (*shape, 1)))
        for axis in range(len(shape)):
            if name == "X" and axis < 2:
                continue  # X defines seq_length and batch_size
            wrong = list(shape)
            wrong[axis] += 1  # on a leading 1 this tests num_directions
            cases.append((name, tuple(wrong)))
    cases.append(("mask", TN[::-1]))  # the other layout's mask
    return cases


SHAPE_CASES = [(o, l, n, s) for o in OP_SPECS for l in (0, 1) for n, s in _wrong_shapes(o, l)]


@pytest.mark.parametrize("hidden_size", [H, None], ids=["hidden_size", "no_hidden_size"])
@pytest.mark.parametrize(
    "op_type, layout, name, shape",
    SHAPE_CASES,
    ids=[f"{o}-layout{l}-{n}-{list(s)}" for o, l, n, s in SHAPE_CASES],
)
def test_wrong_shape(
    op_type: str, layout: int, name: str, shape: tuple[int, ...], hidden_size: int | None
) -> None:
    inputs = valid_inputs(op_type, layout)
    inputs[name] = np.ones(shape, inputs[name].dtype)
    # X's input_size is W's business; without hidden_size, R's last axis defines it, so W is then
    # the input that disagrees.
    named = {"X": "'X'|'W'", "R": "'R'" if hidden_size else "'R'|'W'"}.get(name, re.escape(f"'{name}'"))
    with pytest.raises(ValueError, match=named):
        REFERENCE[op_type](**inputs, layout=layout, hidden_size=hidden_size)


@pytest.mark.parametrize("op_type", OP_SPECS)
def test_weights_disagree_with_hidden_size(op_type: str) -> None:
    assert_rejected(op_type, valid_inputs(op_type), "R", hidden_size=H + 1)


@pytest.mark.parametrize("op_type", OP_SPECS)
def test_weights_disagree_with_direction(op_type: str) -> None:
    assert_rejected(op_type, valid_inputs(op_type), "R", direction="bidirectional")


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32])
@pytest.mark.parametrize("op_type", OP_SPECS)
def test_mask_not_boolean(op_type: str, dtype: type) -> None:
    inputs = valid_inputs(op_type)
    inputs["mask"] = inputs["mask"].astype(dtype)
    assert_rejected(op_type, inputs, "mask")


@pytest.mark.parametrize(
    "lengths", [[-1, T, T], [0, T + 1, 1], [1.0, 2.0, 3.0]], ids=["negative", "too_long", "float"]
)
@pytest.mark.parametrize("op_type", OP_SPECS)
def test_bad_sequence_lens(op_type: str, lengths: list) -> None:
    inputs = valid_inputs(op_type)
    inputs["sequence_lens"] = np.array(lengths, np.float32 if isinstance(lengths[0], float) else np.int32)
    assert_rejected(op_type, inputs, "sequence_lens")


@pytest.mark.parametrize("name", ["W", "R", "B", "initial_h"])
@pytest.mark.parametrize("op_type", OP_SPECS)
def test_dtype_mismatch(op_type: str, name: str) -> None:
    inputs = valid_inputs(op_type)
    inputs[name] = inputs[name].astype(np.float64)
    assert_rejected(op_type, inputs, name)


@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_x_not_float(dtype: type) -> None:
    inputs = valid_inputs("MaskedRNN")
    inputs["X"] = inputs["X"].astype(dtype)
    assert_rejected("MaskedRNN", inputs, "X")


@pytest.mark.parametrize(
    "op_type, attribute, value",
    [
        ("MaskedLSTM", "activations", ["Sigmoid", "Tanh", "Swish"]),
        ("MaskedGRU", "activations", ["Sigmoid", "gelu"]),
        ("MaskedRNN", "activations", ["NoSuch"]),
        ("MaskedLSTM", "activations", ["Sigmoid", "Tanh"]),  # too few
        ("MaskedGRU", "activations", ["Sigmoid"]),
        ("MaskedRNN", "activations", []),
        ("MaskedLSTM", "direction", "sideways"),
        ("MaskedRNN", "direction", "Forward"),
        ("MaskedGRU", "layout", 2),
        ("MaskedRNN", "layout", -1),
        ("MaskedLSTM", "masked_output", "keep"),
        ("MaskedGRU", "masked_output", "Zero"),
        ("MaskedLSTM", "input_forget", 2),
        ("MaskedLSTM", "input_forget", -1),
        ("MaskedGRU", "linear_before_reset", 2),
        ("MaskedGRU", "linear_before_reset", -1),
        ("MaskedRNN", "clip", float("nan")),
        ("MaskedLSTM", "clip", -1.0),
        ("MaskedGRU", "clip", 0.0),
        ("MaskedRNN", "hidden_size", 0),
        ("MaskedRNN", "activation_alpha", [0.5]),  # Tanh takes no alpha
        ("MaskedRNN", "input_forget", 0),  # an LSTM-only attribute
        ("MaskedLSTM", "linear_before_reset", 1),  # a GRU-only attribute
    ],
)
def test_bad_attribute(op_type: str, attribute: str, value: Any) -> None:
    assert_rejected(op_type, valid_inputs(op_type), attribute, **{attribute: value})


@pytest.mark.parametrize("name", ["W", "R"])
def test_missing_required_input(name: str) -> None:
    inputs = valid_inputs("MaskedGRU")
    inputs[name] = None
    assert_rejected("MaskedGRU", inputs, name)


@pytest.mark.parametrize("op_type", OP_SPECS)
@pytest.mark.parametrize("value", ["state", "carry ", "ZERO", ""])
def test_masked_output_outside_the_two_modes_is_rejected_everywhere(op_type: str, value: str) -> None:
    """Contract v2 has two modes; "state" (version 1's third) and anything else is an error naming
    the attribute and the allowed values: in the reference, at shape inference and in ``inline``/
    ``attach_functions``."""
    import onnx

    from onnx_masked_rnn import attach_functions, inline, register_schemas
    from onnx_masked_rnn.testing import make_model

    message = re.escape("attribute 'masked_output' must be one of ['zero', 'carry']")
    inputs = valid_inputs(op_type)
    with pytest.raises(ValueError, match=message):
        REFERENCE[op_type](**inputs, masked_output=value)
    model = make_model(parse_attributes(op_type), inputs)
    (attribute,) = [a for a in model.graph.node[0].attribute if a.name == "masked_output"]
    attribute.s = value.encode()
    register_schemas()
    with pytest.raises(onnx.shape_inference.InferenceError, match=message):
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for build in (attach_functions, inline, lambda m: inline(m, "native")):
        with pytest.raises(ValueError, match=message):
            build(model)
