"""What ``Y`` holds at a masked step, pinned for each mode on every path: the numpy reference, and
onnxruntime on every path of ``toolkit.PATHS`` (``attach_functions``, ``inline`` in both Scan forms
and native).

- ``"zero"``: ``Y[t]`` is 0 at every masked step;
- ``"carry"``: ``Y[t]`` is exactly ``Y`` of the previous processed step of that direction
  (processing order: backwards for the reverse direction), and 0 before the first.

and everything equals the reference (rtol 1e-4, atol 1e-5). Hypothesis draws the direction, the
layout, the sizes, the mask, ``sequence_lens``, whether initial states are given, and every weight
(float32 arrays, so a failure shrinks to small values); the settings come from the profile in
``conftest.py`` (200 examples, derandomized: a failure replays as it is, and prints its blob).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import toolkit
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from onnx import TensorProto, helper
from oracles import batch_major_inputs, time_major_outputs
from toolkit import PATHS, TOLERANCE

from onnx_masked_rnn import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.attributes import DIRECTIONS, MASKED_OUTPUT_MODES, OP_SPECS
from onnx_masked_rnn.reference import FUNCTIONS

I, H = 2, 3


@functools.cache
def session(op_type: str, direction: str, mode: str, layout: int, present: tuple[str, ...], path: str):
    """An onnxruntime session for one configuration, with symbolic ``T`` and ``N`` so that every
    drawn size reuses it."""
    spec = OP_SPECS[op_type]
    D, G = (2 if direction == "bidirectional" else 1), spec.num_gates
    TN = ["N", "T"] if layout else ["T", "N"]
    state = ["N", D, H] if layout else [D, "N", H]
    shapes = {
        "X": ([*TN, I], TensorProto.FLOAT),
        "W": ([D, G * H, I], TensorProto.FLOAT),
        "R": ([D, G * H, H], TensorProto.FLOAT),
        "B": ([D, 2 * G * H], TensorProto.FLOAT),
        "sequence_lens": (["N"], TensorProto.INT32),
        "initial_h": (state, TensorProto.FLOAT),
        "initial_c": (state, TensorProto.FLOAT),
        "mask": (TN, TensorProto.BOOL),
    }
    names = [n for n in spec.inputs if n in present]
    last = max(spec.inputs.index(n) for n in names)
    node = helper.make_node(
        op_type,
        [n if n in present else "" for n in spec.inputs[: last + 1]],
        list(spec.outputs),
        domain=DOMAIN,
        hidden_size=H,
        direction=direction,
        layout=layout,
        masked_output=mode,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, shapes[n][1], shapes[n][0]) for n in names],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in spec.outputs],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        ir_version=10,
    )
    return toolkit.session(PATHS[path](model))


@st.composite
def problems(draw: st.DrawFn, op_type: str) -> tuple[str, int, dict[str, np.ndarray]]:
    """``(direction, layout, time-major inputs)``."""
    spec = OP_SPECS[op_type]
    direction = draw(st.sampled_from(DIRECTIONS))
    layout = draw(st.integers(0, 1))
    D, G = (2 if direction == "bidirectional" else 1), spec.num_gates
    T, N = draw(st.integers(1, 5)), draw(st.integers(1, 3))

    def floats(*shape: int, bound: float = 1.0) -> np.ndarray:
        return draw(arrays(np.float32, shape, elements=st.floats(-bound, bound, width=32)))

    inputs = {"X": floats(T, N, I, bound=2.0), "W": floats(D, G * H, I), "R": floats(D, G * H, H)}
    inputs["B"] = floats(D, 2 * G * H)
    inputs["mask"] = draw(arrays(np.bool_, (T, N)))
    if draw(st.booleans()):
        inputs["sequence_lens"] = np.array(
            draw(st.lists(st.integers(0, T), min_size=N, max_size=N)), np.int32
        )
    if draw(st.booleans()):
        inputs["initial_h"] = floats(D, N, H)
        if op_type == "MaskedLSTM":
            inputs["initial_c"] = floats(D, N, H)
    return direction, layout, inputs


def assert_masked_steps(Y: np.ndarray, m: np.ndarray, mode: str, direction: str, where: str) -> None:
    """``Y`` ``[T, D, N, H]`` at the masked steps of the effective mask ``m`` ``[T, N]``."""
    T, D, N, _ = Y.shape
    for d in range(D):
        order = range(T - 1, -1, -1) if direction == "reverse" or d == 1 else range(T)
        previous = np.zeros((N, Y.shape[3]), Y.dtype)
        for t in order:
            expected = np.zeros_like(previous) if mode == "zero" else previous
            masked = ~m[t]
            np.testing.assert_array_equal(
                Y[t, d][masked], expected[masked], err_msg=f"{where}: Y at masked steps, t={t}, direction {d}"
            )
            previous = np.where(m[t][:, None], Y[t, d], previous)


def _check(op_type: str, mode: str, direction: str, layout: int, inputs: dict[str, np.ndarray]) -> None:
    T, N = inputs["X"].shape[:2]
    m = inputs["mask"] & (np.arange(T)[:, None] < inputs.get("sequence_lens", np.full(N, T))[None, :])
    attributes = {"hidden_size": H, "direction": direction, "masked_output": mode, "layout": layout}
    feeds = batch_major_inputs(inputs) if layout else inputs
    expected = FUNCTIONS[op_type](**feeds, **attributes)
    expected_tm = time_major_outputs(expected) if layout else expected
    assert_masked_steps(expected_tm[0], m, mode, direction, "reference")
    for path in PATHS:
        actual = session(op_type, direction, mode, layout, tuple(sorted(feeds)), path).run(None, feeds)
        for i, (a, e) in enumerate(zip(actual, expected)):
            np.testing.assert_allclose(a, e, **TOLERANCE, err_msg=f"{path}: output {i}")
        Y = time_major_outputs(actual)[0] if layout else actual[0]
        assert_masked_steps(Y, m, mode, direction, path)


@pytest.mark.parametrize("op_type", sorted(OP_SPECS))
@given(data=st.data())
def test_output_at_masked_steps(op_type: str, data: st.DataObject) -> None:
    """Each drawn problem in every mode."""
    direction, layout, inputs = data.draw(problems(op_type))
    for mode in MASKED_OUTPUT_MODES:
        _check(op_type, mode, direction, layout, inputs)


@pytest.mark.parametrize("mode", MASKED_OUTPUT_MODES)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op_type", sorted(OP_SPECS))
def test_a_mask_starting_with_a_masked_step_and_initial_states(
    op_type: str, direction: str, mode: str
) -> None:
    """Every row's first step in each direction masked, initial states given: Y there is 0 in
    both modes while the state is the initial one; the rest follows the property above."""
    rng = np.random.default_rng(7)
    D, G = (2 if direction == "bidirectional" else 1), OP_SPECS[op_type].num_gates
    T, N = 5, 3
    inputs = {
        "X": rng.standard_normal((T, N, I)).astype(np.float32),
        "W": (rng.standard_normal((D, G * H, I)) * 0.5).astype(np.float32),
        "R": (rng.standard_normal((D, G * H, H)) * 0.5).astype(np.float32),
        "B": (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(np.float32),
        "initial_h": rng.standard_normal((D, N, H)).astype(np.float32),
        "mask": np.array([[0, 0, 0], [1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 0]], bool),
    }
    if op_type == "MaskedLSTM":
        inputs["initial_c"] = rng.standard_normal((D, N, H)).astype(np.float32)
    for layout in (0, 1):
        _check(op_type, mode, direction, layout, inputs)
