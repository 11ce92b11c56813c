"""Helpers shared by the oracle tests: layout conversion, calling the reference by op type, and a
record of the worst difference seen against each oracle (printed at the end of the session)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onnx_masked_rnn.reference import FUNCTIONS as REFERENCE  # noqa: F401 (the tests' name for it)

_STATE_INPUTS = ("initial_h", "initial_c")


def batch_major_inputs(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Time-major (``layout=0``) inputs rewritten for ``layout=1``: X ``[N, T, I]``, mask ``[N, T]``,
    initial states ``[N, D, H]``; the other inputs are unchanged."""
    out = dict(inputs)
    out["X"] = inputs["X"].transpose(1, 0, 2)
    if "mask" in inputs:
        out["mask"] = inputs["mask"].T
    for name in _STATE_INPUTS:
        if name in inputs:
            out[name] = inputs[name].transpose(1, 0, 2)
    return out


def time_major_outputs(outputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """``layout=1`` outputs (Y ``[N, T, D, H]``, states ``[N, D, H]``) rewritten for ``layout=0``."""
    Y, *states = outputs
    return (Y.transpose(1, 2, 0, 3), *(s.transpose(1, 0, 2) for s in states))


_WORST: dict[str, float] = {}


def assert_close(
    oracle: str, actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], *, rtol: float, atol: float
) -> None:
    """``assert_allclose`` on each pair of outputs, recording the worst absolute difference
    under the name ``oracle`` for the end-of-session summary."""
    assert len(actual) == len(expected), (len(actual), len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        a, e = np.asarray(a), np.asarray(e)
        assert a.shape == e.shape, f"output {i}: shape {a.shape} != {e.shape}"
        if a.size:
            diff = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64))))
            _WORST[oracle] = max(_WORST.get(oracle, 0.0), diff)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, err_msg=f"output {i} vs {oracle}")


def worst_differences() -> dict[str, float]:
    """The worst absolute difference recorded per oracle in this session."""
    return dict(_WORST)
