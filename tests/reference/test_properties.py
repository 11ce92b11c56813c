"""Properties of the masking semantics, checked with hypothesis on the numpy reference for all
three ops (each a test of its own); hypothesis draws the direction, the layout, the attributes, the
sizes, the mask and every weight (float64 arrays, so a failure shrinks to small values), with the
settings of the profile in ``conftest.py`` (200 examples, derandomized, replay blob printed).

- an all-true mask is no mask;
- values of ``X`` at masked steps (NaN and Inf included) reach no output;
- a row run with its masked steps deleted gives the same final state, and the same ``Y`` at the
  kept steps;
- outputs at unmasked steps and the final states do not depend on ``masked_output``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from oracles import REFERENCE, batch_major_inputs, time_major_outputs

from onnx_masked_rnn.attributes import DIRECTIONS, MASKED_OUTPUT_MODES, OP_SPECS

I, H = 2, 3


@dataclasses.dataclass
class Problem:
    """One node's attributes and time-major float64 inputs; ``mask`` and ``sequence_lens`` may be
    absent. ``run`` executes it in ``layout`` and returns time-major outputs."""

    op_type: str
    attributes: dict[str, Any]
    layout: int
    inputs: dict[str, np.ndarray]

    @property
    def effective_mask(self) -> np.ndarray:
        T, N = self.inputs["X"].shape[:2]
        m = self.inputs.get("mask", np.ones((T, N), bool))
        if "sequence_lens" in self.inputs:
            m = m & (np.arange(T)[:, None] < self.inputs["sequence_lens"][None, :])
        return m

    def run(self, inputs: dict[str, np.ndarray] | None = None, **attributes: Any) -> tuple[np.ndarray, ...]:
        inputs = self.inputs if inputs is None else inputs
        attributes = {**self.attributes, **attributes, "layout": self.layout}
        if self.layout == 1:
            return time_major_outputs(REFERENCE[self.op_type](**batch_major_inputs(inputs), **attributes))
        return REFERENCE[self.op_type](**inputs, **attributes)


@st.composite
def problems(draw: st.DrawFn, op_type: str) -> Problem:
    spec = OP_SPECS[op_type]
    direction = draw(st.sampled_from(DIRECTIONS))
    layout = draw(st.integers(0, 1))
    attributes: dict[str, Any] = {
        "direction": direction,
        "masked_output": draw(st.sampled_from(MASKED_OUTPUT_MODES)),
    }
    if op_type == "MaskedLSTM":
        attributes["input_forget"] = draw(st.integers(0, 1))
    if op_type == "MaskedGRU":
        attributes["linear_before_reset"] = draw(st.integers(0, 1))
    if draw(st.booleans()):
        attributes["clip"] = 1.0
    T, N = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    D, G = (2 if direction == "bidirectional" else 1), spec.num_gates

    def floats(*shape: int) -> np.ndarray:
        return draw(arrays(np.float64, shape, elements=st.floats(-1.5, 1.5)))

    inputs = {"X": floats(T, N, I), "W": floats(D, G * H, I), "R": floats(D, G * H, H)}
    shapes = {"B": (D, 2 * G * H), "initial_h": (D, N, H), "initial_c": (D, N, H), "P": (D, 3 * H)}
    for name in sorted(draw(st.sets(st.sampled_from(sorted(shapes))))):
        if name in spec.inputs:
            inputs[name] = floats(*shapes[name])
    if draw(st.booleans()):
        inputs["mask"] = draw(arrays(np.bool_, (T, N)))
    if draw(st.booleans()):
        inputs["sequence_lens"] = np.array(
            draw(st.lists(st.integers(0, T), min_size=N, max_size=N)), np.int32
        )
    return Problem(op_type, attributes, layout, inputs)


OPS = pytest.mark.parametrize("op_type", sorted(OP_SPECS))


def _equal(actual: tuple[np.ndarray, ...], expected: tuple[np.ndarray, ...]) -> None:
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        np.testing.assert_array_equal(a, e, err_msg=f"output {i}")


@OPS
@given(data=st.data())
def test_all_true_mask_is_no_mask(op_type: str, data: st.DataObject) -> None:
    problem = data.draw(problems(op_type))
    without = {k: v for k, v in problem.inputs.items() if k != "mask"}
    with_ones = {**without, "mask": np.ones(problem.inputs["X"].shape[:2], bool)}
    _equal(problem.run(with_ones), problem.run(without))


@OPS
@given(data=st.data())
def test_masked_steps_of_x_reach_no_output(op_type: str, data: st.DataObject) -> None:
    problem = data.draw(problems(op_type))
    value = data.draw(st.sampled_from([np.nan, np.inf, -np.inf, 1e30]))
    masked = ~problem.effective_mask
    X = problem.inputs["X"].copy()
    X[masked] = value
    changed = problem.run({**problem.inputs, "X": X})
    for output in changed:
        assert np.isfinite(output).all()
    _equal(changed, problem.run())


@OPS
@given(data=st.data())
def test_deleting_masked_steps_keeps_states_and_kept_outputs(op_type: str, data: st.DataObject) -> None:
    problem = data.draw(problems(op_type))
    Y, *states = problem.run()
    m = problem.effective_mask
    names = OP_SPECS[problem.op_type].outputs[1:]
    initial = {"Y_h": "initial_h", "Y_c": "initial_c"}
    for b in range(m.shape[1]):
        keep = m[:, b]
        if not keep.any():  # nothing to run: the row ends in its initial state
            for name, state in zip(names, states):
                start = problem.inputs.get(initial[name], np.zeros_like(state))
                np.testing.assert_array_equal(state[:, b], start[:, b], err_msg=name)
            continue
        row = {k: v for k, v in problem.inputs.items() if k not in ("mask", "sequence_lens")}
        row["X"] = problem.inputs["X"][keep, b : b + 1]
        for name in ("initial_h", "initial_c"):
            if name in row:
                row[name] = row[name][:, b : b + 1]
        Y_row, *states_row = problem.run(row)
        np.testing.assert_allclose(Y[keep][:, :, b], Y_row[:, :, 0], rtol=1e-12, atol=1e-12, err_msg="Y")
        for name, state, state_row in zip(names, states, states_row):
            np.testing.assert_allclose(state[:, b], state_row[:, 0], rtol=1e-12, atol=1e-12, err_msg=name)


@OPS
@given(data=st.data())
def test_unmasked_outputs_do_not_depend_on_masked_output(op_type: str, data: st.DataObject) -> None:
    problem = data.draw(problems(op_type))
    m = problem.effective_mask  # [T, N]; Y is [T, D, N, H]
    unmasked = m[:, None, :, None]
    runs = {mode: problem.run(masked_output=mode) for mode in MASKED_OUTPUT_MODES}
    Y, *states = runs["carry"]
    for mode, (Y_mode, *states_mode) in runs.items():
        np.testing.assert_array_equal(np.where(unmasked, Y_mode, 0), np.where(unmasked, Y, 0), err_msg=mode)
        _equal(tuple(states_mode), tuple(states))
    np.testing.assert_array_equal(np.where(unmasked, 0, runs["zero"][0]), 0)
