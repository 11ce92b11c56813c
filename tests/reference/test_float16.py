"""float16 in the numpy reference: computed in float32 and rounded to float16 once, at the outputs.

The check is exact: the reference's float16 outputs must equal an independent float32 computation
written here (plain ONNX LSTM/GRU/RNN cells with the default activations, the masking
recurrence), rounded to float16 at the same point. Float32 summation order may differ between the
two by an ulp, so an element whose float32 value lies within a few float32 ulps of a float16
rounding boundary (absolutely, as sums that cancel have an absolute error) may round either way;
those are few, and checked to lie within that noise.
A reference that computed in float16 (rounding at every operation) differs by float16 ulps far from
any boundary and fails.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnx_masked_rnn.reference import FUNCTIONS
from onnx_masked_rnn.testing import make_mask

T, N, I, H = 6, 4, 3, 5


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def recurrence_float32(op_type, X, W, R, B, h0, c0, P, mask, mode, linear_before_reset):
    """One ONNX recurrence per direction in float32; returns ``Y [T, D, N, H]`` and the final
    states ``[D, N, H]``. Everything is float32 from the (float16-exact) inputs on."""
    D = W.shape[0]
    Y = np.zeros((T, D, N, H), np.float32)
    h_out, c_out = np.zeros((D, N, H), np.float32), np.zeros((D, N, H), np.float32)
    for d in range(D):
        w_bias, r_bias = B[d][: B.shape[1] // 2], B[d][B.shape[1] // 2 :]
        h, c = h0[d].copy(), c0[d].copy()
        carried = np.zeros((N, H), np.float32)
        for t in range(T - 1, -1, -1) if d == 1 else range(T):
            x = X[t]
            if op_type == "MaskedLSTM":
                gates = x @ W[d].T + h @ R[d].T + w_bias + r_bias
                gi, go, gf, gc = (gates[:, k * H : (k + 1) * H] for k in range(4))
                pi, po, pf = P[d][:H], P[d][H : 2 * H], P[d][2 * H :]
                i = sigmoid(gi + pi * c)
                f = sigmoid(gf + pf * c)
                c_new = f * c + i * np.tanh(gc)
                o = sigmoid(go + po * c_new)
                h_new = o * np.tanh(c_new)
            elif op_type == "MaskedGRU":
                xz, xr, xh = (x @ W[d][k * H : (k + 1) * H].T + w_bias[k * H : (k + 1) * H] for k in range(3))
                rz, rr, rh = (R[d][k * H : (k + 1) * H] for k in range(3))
                bz, br, bh = (r_bias[k * H : (k + 1) * H] for k in range(3))
                z = sigmoid(xz + h @ rz.T + bz)
                r = sigmoid(xr + h @ rr.T + br)
                if linear_before_reset:
                    candidate = np.tanh(xh + r * (h @ rh.T + bh))
                else:
                    candidate = np.tanh(xh + (r * h) @ rh.T + bh)
                h_new = (1 - z) * candidate + z * h
                c_new = c
            else:
                h_new = np.tanh(x @ W[d].T + h @ R[d].T + w_bias + r_bias)
                c_new = c
            m = mask[t][:, None]
            h, c = np.where(m, h_new, h), np.where(m, c_new, c)
            carried = np.where(m, h_new, carried)
            Y[t, d] = carried if mode == "carry" else np.where(m, h_new, 0)
        h_out[d], c_out[d] = h, c
    return Y, h_out, c_out


def assert_rounded_once(actual: np.ndarray, exact32: np.ndarray, name: str) -> None:
    assert actual.dtype == np.float16
    rounded = exact32.astype(np.float16)
    # float32 noise: a few ulps of the O(1) terms (absolute, for sums that cancel) or of the value
    noise = np.float32(2.5e-7) + np.float32(1e-6) * np.abs(exact32)
    below, above = (exact32 - noise).astype(np.float16), (exact32 + noise).astype(np.float16)
    # float32 noise could move these to the other float16 neighbour (an exact 0, a masked step, cannot move)
    boundary = (below != above) & (exact32 != 0)
    assert boundary.sum() <= max(2, 0.1 * boundary.size), f"{name}: {boundary.sum()} elements near a boundary"
    np.testing.assert_array_equal(actual[~boundary], rounded[~boundary], err_msg=name)
    near = actual[boundary]
    assert ((near >= below[boundary]) & (near <= above[boundary])).all(), name


@pytest.mark.parametrize("mode", ["zero", "carry"])
@pytest.mark.parametrize(
    "op_type, linear_before_reset",
    [("MaskedLSTM", 0), ("MaskedGRU", 0), ("MaskedGRU", 1), ("MaskedRNN", 0)],
)
def test_float16_is_float32_rounded_once(op_type: str, linear_before_reset: int, mode: str) -> None:
    rng = np.random.default_rng(16)
    G = {"MaskedLSTM": 4, "MaskedGRU": 3, "MaskedRNN": 1}[op_type]

    def half(*shape: int, s: float) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(np.float16)

    X, W, R = half(T, N, I, s=1.0), half(2, G * H, I, s=0.6), half(2, G * H, H, s=0.6)
    B, h0, c0, P = (
        half(2, 2 * G * H, s=0.5),
        half(2, N, H, s=0.5),
        half(2, N, H, s=0.5),
        half(2, 3 * H, s=0.5),
    )
    mask = make_mask("holes", T, N, rng)
    inputs = {"X": X, "W": W, "R": R, "B": B, "initial_h": h0, "mask": mask}
    attributes = {"direction": "bidirectional", "masked_output": mode}
    if op_type == "MaskedLSTM":
        inputs.update(initial_c=c0, P=P)
    if op_type == "MaskedGRU":
        attributes["linear_before_reset"] = linear_before_reset
    actual = FUNCTIONS[op_type](**inputs, **attributes)
    f32 = [a.astype(np.float32) for a in (X, W, R, B, h0, c0, P)]
    Y, Y_h, Y_c = recurrence_float32(op_type, *f32, mask, mode, linear_before_reset)
    for name, got, exact in zip(("Y", "Y_h", "Y_c"), actual, (Y, Y_h, Y_c)):
        assert_rounded_once(got, exact, f"{op_type} {name}")
