"""The reference's reduced-precision types: float16 and bfloat16 inputs are computed in float32 and
the outputs rounded once to the input type (the ops' type constraint is LSTM-22's, bfloat16
included)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from oracles import REFERENCE

from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.testing import random_inputs

T, N, I, H = 5, 3, 2, 4


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("op_type", OP_SPECS)
@pytest.mark.parametrize("masked_output", ["zero", "carry"])
def test_reduced_precision_is_float32_rounded_once(op_type: str, dtype: type, masked_output: str) -> None:
    attrs = parse_attributes(op_type, direction="bidirectional", masked_output=masked_output)
    inputs = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(7), dtype=np.float32)
    low = {k: v.astype(dtype) if v.dtype == np.float32 else v for k, v in inputs.items()}
    wide = {k: v.astype(np.float32) if v.dtype == dtype else v for k, v in low.items()}
    actual = REFERENCE[op_type](**low, direction="bidirectional", masked_output=masked_output)
    expected = REFERENCE[op_type](**wide, direction="bidirectional", masked_output=masked_output)
    for a, e in zip(actual, expected):
        assert a.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, e.astype(dtype))
