"""Record Keras 3 on the JAX backend into ``tests/fixtures/keras_jax_state.npz``.

Keras 3's JAX backend runs a masked RNN as a ``lax.scan`` that emits the carried hidden state at a
masked step: ``initial_state`` before the first processed step, where ``masked_output="carry"``
gives zeros. ``tests/reference/test_keras_jax_fixture.py`` checks that the spec's recipe on top of "carry"
reproduces what this script records, without needing JAX. Needs keras and jax (``pip install
'.[record]'``, best in a separate venv), not this package::

    python scripts/record_keras_jax.py [--out tests/fixtures/keras_jax_state.npz]

The file holds, per case ``<name>``: ``<name>/x`` ``[N, T, I]`` float32, ``<name>/mask``
``[N, T]`` bool, ``<name>/initial_state_<k>`` (the Keras ``initial_state`` list, absent when the
case has none), the weights in Keras layout ``<name>/{kernel,recurrent_kernel,bias}_<d>`` per
direction ``d`` (0 forward, 1 backward of a Bidirectional), and the layer's outputs with
``return_sequences=True, return_state=True`` as ``<name>/output_<k>``. ``meta`` is a JSON string:
the versions of keras, jax and numpy and each case's layer configuration.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

T, N, I, H = 6, 4, 3, 4
OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "keras_jax_state.npz"


def _mask(kind: str, rng: np.random.Generator) -> np.ndarray:
    """``[N, T]``: holes anywhere, each row keeping a step; ``one_row_masked`` also masks row 0
    fully; ``masked_start`` masks every row's first two steps (where the JAX backend differs from "carry")."""
    mask = rng.random((N, T)) >= 0.35
    mask[np.arange(N), rng.integers(0, T, N)] = True
    if kind == "one_row_masked":
        mask[0] = False
    elif kind == "masked_start":
        mask[:, :2] = False
        mask[:, -1] = True
    return mask


# name -> (Keras class, layer arguments, mask kind, with initial_state, Bidirectional)
CASES = {
    "lstm_holes": ("LSTM", {}, "holes", False, False),
    "lstm_one_row_masked_initial_state": ("LSTM", {}, "one_row_masked", True, False),
    "lstm_go_backwards": ("LSTM", {"go_backwards": True}, "masked_start", True, False),
    "lstm_activations": (
        "LSTM",
        {"activation": "softsign", "recurrent_activation": "hard_sigmoid"},
        "holes",
        True,
        False,
    ),
    "gru_reset_after_initial_state": ("GRU", {"reset_after": True}, "masked_start", True, False),
    "gru_reset_before_one_row_masked": ("GRU", {"reset_after": False}, "one_row_masked", False, False),
    "gru_go_backwards_initial_state": ("GRU", {"go_backwards": True}, "one_row_masked", True, False),
    "simple_rnn_initial_state": ("SimpleRNN", {}, "masked_start", True, False),
    "simple_rnn_relu_one_row_masked": ("SimpleRNN", {"activation": "relu"}, "one_row_masked", True, False),
    "simple_rnn_go_backwards": ("SimpleRNN", {"go_backwards": True}, "holes", False, False),
    "bidirectional_lstm_initial_state": ("LSTM", {}, "one_row_masked", True, True),
    "bidirectional_gru": ("GRU", {}, "holes", False, True),
}


def record(
    name: str, cls: str, kwargs: dict, mask_kind: str, with_state: bool, bidirectional: bool, seed: int
):
    rng = np.random.default_rng(seed)
    layer = getattr(keras.layers, cls)(H, return_sequences=True, return_state=True, **kwargs)
    if bidirectional:
        layer = keras.layers.Bidirectional(layer, merge_mode=None)
    layer.build((None, None, I))
    layer.set_weights([(rng.standard_normal(w.shape) * 0.6).astype(np.float32) for w in layer.get_weights()])
    x = rng.standard_normal((N, T, I)).astype(np.float32)
    mask = _mask(mask_kind, rng)
    num_states = (2 if cls == "LSTM" else 1) * (2 if bidirectional else 1)
    states = (
        [(rng.standard_normal((N, H)) * 0.5).astype(np.float32) for _ in range(num_states)]
        if with_state
        else None
    )
    outputs = layer(x, mask=mask, initial_state=states)
    arrays = {"x": x, "mask": mask}
    for k, s in enumerate(states or ()):
        arrays[f"initial_state_{k}"] = s
    directions = (layer.forward_layer, layer.backward_layer) if bidirectional else (layer,)
    for d, lay in enumerate(directions):
        cell = lay.cell
        arrays[f"kernel_{d}"] = np.asarray(cell.kernel)
        arrays[f"recurrent_kernel_{d}"] = np.asarray(cell.recurrent_kernel)
        arrays[f"bias_{d}"] = np.asarray(cell.bias)
    for k, o in enumerate(outputs):
        arrays[f"output_{k}"] = np.asarray(o)
    config = directions[0].get_config()
    meta = {
        "class": cls,
        "bidirectional": bidirectional,
        "go_backwards": config["go_backwards"],
        "activation": config["activation"],
        "recurrent_activation": config.get("recurrent_activation"),
        "reset_after": config.get("reset_after"),
        "unroll": config["unroll"],
        "zero_output_for_mask": bool(directions[0].zero_output_for_mask),
        "num_outputs": len(outputs),
    }
    return {f"{name}/{k}": v for k, v in arrays.items()}, meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    assert keras.backend.backend() == "jax", keras.backend.backend()
    arrays, cases = {}, {}
    for seed, (name, case) in enumerate(CASES.items()):
        case_arrays, cases[name] = record(name, *case, seed=seed)
        arrays.update(case_arrays)
    meta = {
        "versions": {"keras": keras.__version__, "jax": jax.__version__, "numpy": np.__version__},
        "shape": {"T": T, "N": N, "I": I, "H": H},
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, meta=np.array(json.dumps(meta, indent=1)), **arrays)
    print(f"wrote {len(cases)} cases to {args.out} (keras {keras.__version__}, jax {jax.__version__})")


if __name__ == "__main__":
    main()
