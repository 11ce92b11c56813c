"""Defects of ``inline`` and ``attach_functions`` found by real models and hostile input (issue 19,
items 19 to 21): chained masked nodes with no declared intermediate types, an int32 ``X`` inside a
model-local function, and ThresholdedRelu exactly at its threshold.

Every model runs in onnxruntime and is compared with the numpy reference (float32: rtol 1e-4,
atol 1e-5).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracles import REFERENCE, assert_close
from toolkit import PATHS, TOLERANCE, run

from onnx_masked_rnn import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.functions import MIN_OPSET
from onnx_masked_rnn.schemas import registered_schemas
from onnx_masked_rnn.testing import make_mask, make_model, random_inputs, value_info

T, N, I, H = 6, 3, 4, 5


# Item 19: MaskedRNN -> Squeeze -> MaskedRNN, nothing declared between them ----------------------

# Runs in a fresh interpreter, where nothing has called register_schemas() (other tests of the
# session may have): every surface on each chained model, then which schemas are registered.
_CHAINED_CHILD = """
import sys
import numpy as np, onnx, onnxruntime as ort
from onnx_masked_rnn import DOMAIN, OPSET_VERSION, attach_functions, inline, register_schemas
from onnx_masked_rnn.attributes import OP_SPECS
from onnx_masked_rnn.cli import main
from onnx_masked_rnn.schemas import registered_schemas

folder, scopes = sys.argv[1], sys.argv[2:]
feeds = dict(np.load(f"{folder}/feeds.npz"))

def registered():
    return [op for op in OP_SPECS if onnx.defs.has(op, OPSET_VERSION, DOMAIN)]

def run(m):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]

before, outputs = registered(), {}
for scope in scopes:
    source = f"{folder}/{scope}.onnx"
    model = onnx.load(source)
    outputs[f"{scope}, attach_functions"] = run(attach_functions(model))
    outputs[f"{scope}, inline scan"] = run(inline(model))
    outputs[f"{scope}, inline native"] = run(inline(model, "native"))
    for strategy in ("scan", "native"):
        path = f"{folder}/{scope}_{strategy}.onnx"
        if main(["inline", source, path, "--strategy", strategy]) != 0:
            sys.exit(f"the inline CLI failed on {scope} (--strategy {strategy})")
        outputs[f"{scope}, CLI inline --strategy {strategy}"] = run(onnx.load(path))
after = registered()
with registered_schemas():
    register_schemas()
np.savez(f"{folder}/outputs.npz", **outputs)
print(before, after, registered())
"""


def _chained_models() -> tuple[dict[str, onnx.ModelProto], dict[str, np.ndarray], np.ndarray]:
    """Two MaskedRNN layers joined by a Squeeze, in the main graph and in a model-local function:
    the second layer's ``X`` has no declared type, only the one the first layer's schema infers.
    Returns the models by scope, their feeds and the reference output."""
    rng = np.random.default_rng(19)
    attrs = parse_attributes("MaskedRNN", hidden_size=H)
    first = random_inputs(attrs, T, N, I, H, rng=rng, present=("B", "mask"), mask_kind="holes")
    second = random_inputs(attrs, T, N, H, H, rng=rng, present=("B",))
    feeds = {"X": first["X"], "mask": first["mask"]}
    feeds |= {f"{k}1": first[k] for k in "WRB"} | {f"{k}2": second[k] for k in "WRB"}
    layer = {"domain": DOMAIN, "hidden_size": H}
    nodes = [
        helper.make_node("MaskedRNN", ["X", "W1", "R1", "B1", "", "", "mask"], ["y1"], name="rnn1", **layer),
        helper.make_node(
            "Constant", [], ["axes"], value=onnx.numpy_helper.from_array(np.array([1], np.int64))
        ),
        helper.make_node("Squeeze", ["y1", "axes"], ["x2"]),
        helper.make_node("MaskedRNN", ["x2", "W2", "R2", "B2", "", "", "mask"], ["y2"], name="rnn2", **layer),
    ]
    imports = [helper.make_opsetid("", MIN_OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    inputs = [value_info(k, v) for k, v in feeds.items()]
    output = [helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)]
    encoder = helper.make_function("local", "Encoder", list(feeds), ["y2"], nodes, imports)
    call = helper.make_node("Encoder", list(feeds), ["y2"], domain="local")
    models = {
        "main_graph": helper.make_model(
            helper.make_graph(nodes, "chained", inputs, output), opset_imports=imports, ir_version=10
        ),
        "local_function": helper.make_model(
            helper.make_graph([call], "chained", inputs, output),
            opset_imports=[*imports, helper.make_opsetid("local", 1)],
            functions=[encoder],
            ir_version=10,
        ),
    }
    y1, _ = REFERENCE["MaskedRNN"](**first, hidden_size=H)
    y2, _ = REFERENCE["MaskedRNN"](
        y1[:, 0], second["W"], second["R"], second["B"], mask=first["mask"], hidden_size=H
    )
    return models, feeds, y2


def test_chained_masked_nodes_without_value_info_in_a_fresh_interpreter(tmp_path: Path):
    """``attach_functions``, ``inline`` (both strategies) and the ``inline`` CLI infer through the
    first masked node with the package's schemas although nothing registered them, in the main
    graph and in a local function, and leave ``onnx.defs`` as they found it (``register_schemas()``
    inside ``registered_schemas()`` keeps them)."""
    models, feeds, expected = _chained_models()
    for scope, model in models.items():
        assert not model.graph.value_info
        onnx.save(model, tmp_path / f"{scope}.onnx")
    np.savez(tmp_path / "feeds.npz", **feeds)
    child = subprocess.run(
        [sys.executable, "-c", _CHAINED_CHILD, str(tmp_path), *models],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.splitlines()[-1] == f"[] [] {list(OP_SPECS)}"
    outputs = np.load(tmp_path / "outputs.npz")
    assert len(outputs.files) == 5 * len(models)
    for surface in outputs.files:
        assert_close(f"chained MaskedRNN, {surface}", [outputs[surface]], [expected], **TOLERANCE)


def test_registered_schemas_nests_and_restores_what_it_found():
    """Whatever the session registered before, the schemas are there inside (nested) blocks and
    ``onnx.defs`` is as it was after them."""

    def registered() -> list[bool]:
        return [onnx.defs.has(op, OPSET_VERSION, DOMAIN) for op in OP_SPECS]

    before = registered()
    with registered_schemas():
        with registered_schemas():
            assert all(registered())
        assert all(registered())
    assert registered() == before


# Item 20: an int32 X is X's fault ---------------------------------------------------------------


def _int32_gru_models() -> dict[str, onnx.ModelProto]:
    """MaskedGRU with an int32 ``X`` and float weights, in the main graph and in a local function."""
    inputs = [
        helper.make_tensor_value_info("X", TensorProto.INT32, [T, N, I]),
        helper.make_tensor_value_info("W", TensorProto.FLOAT, [1, 3 * H, I]),
        helper.make_tensor_value_info("R", TensorProto.FLOAT, [1, 3 * H, H]),
    ]
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)]
    imports = [helper.make_opsetid("", MIN_OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    gru = helper.make_node("MaskedGRU", ["x", "w", "r"], ["y"], domain=DOMAIN, name="gru", hidden_size=H)
    encoder = helper.make_function("local", "Encoder", ["x", "w", "r"], ["y"], [gru], imports)
    call = helper.make_node("Encoder", ["X", "W", "R"], ["Y"], domain="local")
    local = helper.make_model(
        helper.make_graph([call], "g", inputs, outputs),
        opset_imports=[*imports, helper.make_opsetid("local", 1)],
        functions=[encoder],
        ir_version=10,
    )
    main = helper.make_node("MaskedGRU", ["X", "W", "R"], ["Y"], domain=DOMAIN, name="gru", hidden_size=H)
    return {
        "local function": local,
        "main graph": helper.make_model(
            helper.make_graph([main], "g", inputs, outputs), opset_imports=imports
        ),
    }


@pytest.mark.parametrize("scope", ["local function", "main graph"])
@pytest.mark.parametrize("path", PATHS)
def test_int32_x_is_refused_naming_x_and_the_allowed_types(scope: str, path: str):
    with pytest.raises(ValueError) as error:
        PATHS[path](_int32_gru_models()[scope])
    message = str(error.value)
    assert "node 'gru' (MaskedGRU): input 'X'" in message, message
    assert "must be float16, float or double, got element type INT32" in message, message
    assert "'W'" not in message, message


# Item 21: ThresholdedRelu at x == alpha is 0 ---------------------------------------------------

# (op, activations, activation_alpha, the gate whose pre-activation is alpha). The native expansion
# runs onnxruntime's RNN, GRU (h) and LSTM (g) kernels on the first three; an LSTM gate function
# that is ThresholdedRelu (unbounded) keeps the Scan body.
AT_THRESHOLD = [
    ("MaskedRNN", ["ThresholdedRelu"], [0.5], 0),
    ("MaskedGRU", ["Sigmoid", "ThresholdedRelu"], [0.5], 2),
    ("MaskedLSTM", ["Sigmoid", "ThresholdedRelu", "Tanh"], None, 3),  # alpha: the default, 1.0
    ("MaskedLSTM", ["ThresholdedRelu", "Tanh", "Tanh"], [0.25], 0),
]


def _at_threshold(
    op_type: str, activations: list[str], alphas: list[float] | None, gate: int, nudge: bool = False
):
    """Random inputs where the first two units of ``gate`` get the pre-activation alpha exactly
    (zero rows of ``W`` and ``R``, ``Wb`` = alpha, ``Rb`` = 0), or the next float32 above it."""
    extra = {"activation_alpha": alphas} if alphas else {}
    attrs = parse_attributes(op_type, hidden_size=H, activations=activations, **extra)
    feeds = random_inputs(
        attrs, T, N, I, H, rng=np.random.default_rng(21), present=("B", "initial_h", "mask")
    )
    feeds["mask"] = make_mask("holes", T, N, np.random.default_rng(22))
    alpha = np.float32(alphas[0] if alphas else 1.0)
    units = gate * H + np.arange(2)
    feeds["W"][:, units] = 0
    feeds["R"][:, units] = 0
    feeds["B"][:, units] = np.nextafter(alpha, np.float32(np.inf)) if nudge else alpha
    feeds["B"][:, OP_SPECS[op_type].num_gates * H + units] = 0
    return attrs, feeds


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op_type, activations, alphas, gate", AT_THRESHOLD)
def test_thresholded_relu_at_alpha_is_zero(
    op_type: str, activations: list[str], alphas, gate: int, path: str
):
    """ThresholdedRelu is ``x > alpha`` (the operator's definition; LSTM-22's list writes ``>=``):
    at ``x == alpha`` it gives 0 on every path. The case sits on the boundary: one float32 above
    alpha the reference differs by far more than the tolerance."""
    attrs, feeds = _at_threshold(op_type, activations, alphas, gate)
    expected = REFERENCE[op_type](**feeds, **attrs.to_onnx())
    _, nudged = _at_threshold(op_type, activations, alphas, gate, nudge=True)
    above = REFERENCE[op_type](**nudged, **attrs.to_onnx())
    assert np.abs(above[0] - expected[0]).max() > 0.05
    model = PATHS[path](make_model(attrs, feeds, opset=MIN_OPSET))
    assert_close(f"ThresholdedRelu at alpha, {path}", run(model, feeds), expected, **TOLERANCE)
