"""The spec's Keras 3 JAX/NumPy recipe against Keras 3 on the JAX backend, recorded by
``scripts/record_keras_jax.py`` into ``tests/fixtures/keras_jax_state.npz`` (no JAX needed here).

Keras's JAX backend (``unroll=False``) emits the carried hidden state at a masked step, so before
the first processed step it emits ``initial_state`` where the TensorFlow and torch backends (and
``"carry"``) emit zeros; ``Bidirectional`` with ``return_sequences`` forces zeros instead. The spec
reproduces it with three ops on top of ``"carry"``, per direction::

    seen = CumSum(Cast(m, int32), axis=time, reverse=<direction is reverse>) > 0
    Y    = Where(seen, Y_carry, initial_h)
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from oracles import REFERENCE, assert_close
from toolkit import TESTS

from onnx_masked_rnn.keras import (
    OP_TYPES,
    activation_names,
    convert_weights,
    initial_state_to_onnx,
    onnx_activations,
    outputs_to_keras,
)

FIXTURE = TESTS / "fixtures" / "keras_jax_state.npz"
ORACLE = "Keras JAX fixture float32"


def _load() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    with np.load(FIXTURE) as data:
        return json.loads(str(data["meta"])), {k: data[k] for k in data.files if k != "meta"}


META, ARRAYS = _load()
CASES = META["cases"]


def _case_arrays(name: str, prefix: str) -> list[np.ndarray]:
    keys = sorted(
        (k for k in ARRAYS if k.startswith(f"{name}/{prefix}_")), key=lambda k: int(k.rsplit("_", 1)[1])
    )
    return [ARRAYS[k] for k in keys]


def test_fixture_is_complete() -> None:
    assert META["versions"]["keras"].startswith("3."), META["versions"]
    assert {c["class"] for c in CASES.values()} == set(OP_TYPES)
    assert any(c["go_backwards"] for c in CASES.values())
    assert any(c["bidirectional"] for c in CASES.values())
    assert any(not ARRAYS[f"{n}/mask"].any(axis=1).all() for n in CASES), "no fully masked row"
    assert any(_case_arrays(n, "initial_state") for n in CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_carry_with_recipe_reproduces_keras_jax(name: str) -> None:
    case = CASES[name]
    kind = case["class"]
    op_type = OP_TYPES[kind]
    directions = 2 if case["bidirectional"] else 1
    names = activation_names(kind, case["activation"], case["recurrent_activation"]) * directions
    per_direction = [
        convert_weights(
            kind,
            ARRAYS[f"{name}/kernel_{d}"],
            ARRAYS[f"{name}/recurrent_kernel_{d}"],
            ARRAYS[f"{name}/bias_{d}"],
        )
        for d in range(directions)
    ]
    weights = {k: np.concatenate([w[k] for w in per_direction]) for k in per_direction[0]}
    direction = "bidirectional" if case["bidirectional"] else "reverse" if case["go_backwards"] else "forward"
    attributes = {"direction": direction, **onnx_activations(names)}
    if kind == "GRU":
        attributes["linear_before_reset"] = int(case["reset_after"])
    # Bidirectional forces zeros; otherwise the JAX backend's loop is "carry" plus the recipe.
    assert not case["unroll"]
    attributes["masked_output"] = "zero" if case["zero_output_for_mask"] else "carry"
    assert case["zero_output_for_mask"] == case["bidirectional"]

    states = _case_arrays(name, "initial_state")
    inputs = {"X": ARRAYS[f"{name}/x"], "mask": ARRAYS[f"{name}/mask"], **weights}
    inputs.update(initial_state_to_onnx(op_type, states) if states else {})
    outputs = REFERENCE[op_type](**inputs, **attributes, layout=1)
    if attributes["masked_output"] == "carry":
        Y, *final = outputs
        outputs = (keras_jax_recipe(Y, inputs["mask"], inputs.get("initial_h"), direction), *final)
    expected = _case_arrays(name, "output")
    assert len(expected) == case["num_outputs"]
    assert_close(ORACLE, outputs_to_keras(outputs, direction), expected, rtol=1e-5, atol=1e-5)


def keras_jax_recipe(Y: np.ndarray, mask: np.ndarray, initial_h: np.ndarray | None, direction: str):
    """The spec's recipe for ``layout=1`` (Y ``[N, T, 1, H]``, mask ``[N, T]``, initial_h
    ``[N, 1, H]``): ``Where(seen, Y, initial_h)``, ``seen`` a cumulative count of the mask in
    processing order, greater than 0."""
    if initial_h is None:  # zeros before the first processed step: "carry" already
        return Y
    reverse = direction == "reverse"
    seen = np.cumsum(mask[:, ::-1] if reverse else mask, axis=1, dtype=np.int32)
    seen = (seen[:, ::-1] if reverse else seen) > 0
    return np.where(seen[:, :, None, None], Y, initial_h[:, None, :, :])


def test_recipe_is_needed() -> None:
    """The fixture distinguishes the JAX backend from "carry": without the recipe a case with a
    non-zero initial state and a masked first step is not reproduced."""
    name = "simple_rnn_initial_state"
    kernel, recurrent, bias = (ARRAYS[f"{name}/{k}_0"] for k in ("kernel", "recurrent_kernel", "bias"))
    inputs = {
        "X": ARRAYS[f"{name}/x"],
        "mask": ARRAYS[f"{name}/mask"],
        **convert_weights("SimpleRNN", kernel, recurrent, bias),
        **initial_state_to_onnx("MaskedRNN", _case_arrays(name, "initial_state")),
    }
    Y, _ = REFERENCE["MaskedRNN"](**inputs, layout=1, masked_output="carry")
    assert not np.allclose(Y[:, :, 0], ARRAYS[f"{name}/output_0"], atol=1e-3)
