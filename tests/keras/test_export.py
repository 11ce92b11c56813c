"""``onnx_masked_rnn.keras.export`` on real architectures: each model is exported once (strategy
"function", one trace), its "scan" and "native" forms are what ``export`` makes of the same trace
(``inline``), and all three run in onnxruntime at two batch sizes and two lengths on right-padded,
left-padded, holed and one-row-fully-masked batches, equal to Keras' own ``predict`` (torch backend,
float32, atol = rtol = 1e-5). ``export(strategy=...)`` end to end, from a ``.keras`` file through the
CLI and from another Keras backend, is in ``test_export_cli.py``.

Bidirectional: one masked node per direction (each direction is its own Keras layer), so strategy
"function" has exactly one masked node per recurrent layer direction.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np
import onnx
import pytest
from keras_architectures import ARCHITECTURES, batch, build
from oracles import assert_close
from toolkit import session

from onnx_masked_rnn import DOMAIN, inline
from onnx_masked_rnn.keras import export

if keras.backend.backend() != "torch":
    pytest.skip("export runs on Keras' torch backend (tests/conftest.py sets it)", allow_module_level=True)

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation doesn't accept a copy:DeprecationWarning"
)

ORACLE = "Keras predict vs onnxruntime, export"
SHAPES = ((2, 4), (5, 9))  # (batch, time): two batch sizes, two lengths
MASK_KINDS = ("right_padded", "left_padded", "holes", "one_row_masked")
STRATEGIES = ("function", "scan", "native")


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def exported(request, tmp_path_factory) -> tuple[str, keras.Model, dict[str, onnx.ModelProto]]:
    """One architecture exported once, in each strategy's form."""
    name = request.param
    model = build(name)
    path = Path(tmp_path_factory.mktemp(name)) / "model.onnx"
    export(model, path)
    function = onnx.load(path)
    forms = {"function": function, **{s: inline(function, strategy=s) for s in ("scan", "native")}}
    return name, model, forms


def test_one_masked_node_per_layer_direction(exported) -> None:
    name, _, forms = exported
    masked = [n.op_type for n in forms["function"].graph.node if n.domain == DOMAIN]
    assert len(masked) == ARCHITECTURES[name][1], masked
    for strategy in ("scan", "native"):
        assert not any(n.domain == DOMAIN for n in forms[strategy].graph.node)


def test_batch_and_time_are_dynamic(exported) -> None:
    """Axis 0 is one "batch" for all inputs; a time axis is "time" (or "time_<symbol>" when
    the trace does not relate two inputs' time axes, e.g. an explicit mask and the features)."""
    _, model, forms = exported
    for graph_input, keras_input in zip(forms["function"].graph.input, model.inputs):
        dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        assert dims[0] == "batch", dims
        if keras_input.name in ("ids", "mask", "x"):
            assert dims[1].startswith("time"), dims
        assert dims[2:] == list(keras_input.shape[2:]), dims


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_equals_keras_predict(exported, kind: str) -> None:
    name, model, forms = exported
    sessions = {strategy: session(form) for strategy, form in forms.items()}
    rng = np.random.default_rng(len(name) + MASK_KINDS.index(kind))
    for n, t in SHAPES:
        inputs = batch(model, n, t, kind, rng)
        expected = model.predict(inputs if len(inputs) > 1 else inputs[0], verbose=0)
        expected = expected if isinstance(expected, list) else [expected]
        for strategy, runner in sessions.items():
            feeds = {i.name: value for i, value in zip(runner.get_inputs(), inputs)}
            actual = runner.run(None, feeds)
            assert_close(f"{ORACLE} ({strategy})", actual, expected, rtol=1e-5, atol=1e-5)
