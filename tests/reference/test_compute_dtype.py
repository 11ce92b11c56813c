"""The reference's ``compute_dtype``: the dtype every operation of the recurrence computes in (the
fuzz's float16-throughout result uses it), by default float32 for float16 and bfloat16 ``X`` and
``X``'s own otherwise; the outputs keep ``X``'s dtype."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_masked_rnn.reference import masked_lstm, masked_rnn
from onnx_masked_rnn.testing import make_mask

# MaskedRNN with the identity (Affine 1, 0) and unit weights: Y_t is the running sum of X, rounded
# as the dtype it is computed in rounds it.
SUMMING = {"hidden_size": 1, "activations": ["Affine"], "activation_alpha": [1.0], "activation_beta": [0.0]}
X = np.array([2048, 1, 1, 1, 1], np.float16).reshape(5, 1, 1)
ONES = np.ones((1, 1, 1), np.float16)


def _running_sum(dtype: type) -> list[float]:
    """The running sums of ``X`` computed in ``dtype``, rounded to float16 at the end."""
    total, sums = dtype(0), []
    for x in X.ravel():
        total = dtype(dtype(x) + total)
        sums.append(float(np.float16(total)))
    return sums


def test_float16_computed_in_float16_rounds_at_every_step() -> None:
    """In float16, 2048 + 1 rounds back to 2048 at each step; in float32 (the default) the sum grows
    and is rounded once: [2048, 2048, 2050, 2052, 2052]."""
    in_float16 = masked_rnn(X, ONES, ONES, compute_dtype=np.float16, **SUMMING)[0]
    default = masked_rnn(X, ONES, ONES, **SUMMING)[0]
    assert in_float16.dtype == default.dtype == np.float16
    assert in_float16.ravel().tolist() == _running_sum(np.float16) == [2048.0] * 5
    assert default.ravel().tolist() == _running_sum(np.float32) == [2048.0, 2048.0, 2050.0, 2052.0, 2052.0]
    assert masked_rnn(X, ONES, ONES, compute_dtype="float32", **SUMMING)[0].tolist() == default.tolist()


def test_float32_computed_in_float64_is_the_float64_result_rounded() -> None:
    """``compute_dtype=float64`` on float32 inputs gives exactly the float64 inputs' result rounded
    to float32 (every input is exact in float64, so the two compute the same numbers)."""
    rng = np.random.default_rng(3)
    T, N, I, H = 7, 3, 4, 5
    inputs = {
        "X": rng.standard_normal((T, N, I)),
        "W": rng.standard_normal((1, 4 * H, I)) * 0.5,
        "R": rng.standard_normal((1, 4 * H, H)) * 0.5,
        "B": rng.standard_normal((1, 8 * H)) * 0.1,
    }
    single = {k: v.astype(np.float32) for k, v in inputs.items()}
    double = {k: v.astype(np.float64) for k, v in single.items()}
    mask = make_mask("holes", T, N, np.random.default_rng(4))
    wide = masked_lstm(**single, mask=mask, hidden_size=H, compute_dtype=np.float64)
    exact = masked_lstm(**double, mask=mask, hidden_size=H)
    default = masked_lstm(**single, mask=mask, hidden_size=H)
    for w, e, d in zip(wide, exact, default):
        assert w.dtype == d.dtype == np.float32
        assert np.array_equal(w, e.astype(np.float32))
    assert any(not np.array_equal(w, d) for w, d in zip(wide, default))  # it did compute otherwise


@pytest.mark.parametrize("bad", ["int32", "bogus", np.complex64])
def test_a_compute_dtype_that_is_not_a_float_is_a_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match=r"compute_dtype must be float16, bfloat16, float32 or float64"):
        masked_rnn(X, ONES, ONES, compute_dtype=bad, **SUMMING)
