"""The reference's "state" mode against Keras 3 on the JAX backend, recorded by
``scripts/record_keras_jax.py`` into ``tests/fixtures/keras_jax_state.npz`` (no JAX needed here).

Keras's JAX backend emits the carried hidden state at a masked step (``initial_state`` or zeros
before the first unmasked one); ``Bidirectional`` with ``return_sequences`` forces zeros instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracles import REFERENCE, assert_close

from onnx_masked_rnn.keras import (
    OP_TYPES,
    activation_names,
    convert_weights,
    initial_state_to_onnx,
    onnx_activations,
    outputs_to_keras,
)

FIXTURE = Path(__file__).parent / "fixtures" / "keras_jax_state.npz"
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


def _case(name: str) -> tuple[str, dict[str, Any], dict[str, np.ndarray]]:
    """``(op_type, attributes without masked_output, inputs)`` of a recorded case (``layout=1``)."""
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
    attributes = {"direction": direction, **onnx_activations(names), "layout": 1}
    if kind == "GRU":
        attributes["linear_before_reset"] = int(case["reset_after"])
    assert not case["unroll"]
    assert case["zero_output_for_mask"] == case["bidirectional"]
    states = _case_arrays(name, "initial_state")
    inputs = {"X": ARRAYS[f"{name}/x"], "mask": ARRAYS[f"{name}/mask"], **weights}
    inputs.update(initial_state_to_onnx(op_type, states) if states else {})
    return op_type, attributes, inputs


@pytest.mark.parametrize("name", sorted(CASES))
def test_state_mode(name: str) -> None:
    op_type, attributes, inputs = _case(name)
    # The mode Keras's JAX backend computes: "state", except where Bidirectional forces zeros.
    mode = "zero" if CASES[name]["zero_output_for_mask"] else "state"
    outputs = REFERENCE[op_type](**inputs, **attributes, masked_output=mode)
    expected = _case_arrays(name, "output")
    assert len(expected) == CASES[name]["num_outputs"]
    assert_close(ORACLE, outputs_to_keras(outputs, attributes["direction"]), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if not c["zero_output_for_mask"]))
def test_carry_with_the_docs_recipe(name: str) -> None:
    """docs/keras.md's recipe for Keras 3 on JAX/NumPy on top of "carry": per direction
    ``Y = Where(seen, Y, initial_h)``, ``seen`` the cumulative OR of the mask in processing order."""
    op_type, attributes, inputs = _case(name)
    Y, *states = REFERENCE[op_type](**inputs, **attributes, masked_output="carry")
    mask = inputs["mask"].astype(np.int32)  # [N, T]
    reverse = attributes["direction"] == "reverse"
    seen = (np.cumsum(mask[:, ::-1], axis=1)[:, ::-1] if reverse else np.cumsum(mask, axis=1)) > 0
    initial_h = inputs.get("initial_h", np.zeros_like(Y[:, 0]))  # [N, 1, H]
    Y = np.where(seen[:, :, None, None], Y, initial_h[:, None])
    expected = _case_arrays(name, "output")
    assert_close(
        ORACLE, outputs_to_keras([Y, *states], attributes["direction"]), expected, rtol=1e-5, atol=1e-5
    )


def test_state_mode_differs_from_carry() -> None:
    """The fixture distinguishes the modes: "carry" would not reproduce a state-mode case."""
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
