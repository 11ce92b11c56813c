"""The constructs the package emits, pinned where a runtime broke on them (issue 19, items 3 and 18).

- float16, batch-major (``layout=1``, PyTorch's ``batch_first``), followed by a ``MatMul`` or
  ``Mul`` (a tagger's ``Linear`` head): onnxruntime 1.32 crashed the process at session creation
  under ``ORT_ENABLE_ALL`` (its ``MatmulTransposeFusion`` on the float16 ``MatMul`` fed by a
  ``Transpose`` of ``X``) on the Scan body and the attached functions. Each session is created in
  a child process, so a crash is a failure of this test, not of pytest.
- Every emitted graph (each strategy and Scan form, the shipped suite): no ``Constant`` with a
  ``value_int(s)``/``value_float(s)``/``value_string(s)`` attribute (a ``value`` tensor works on
  every runtime; TVM rejects the others), and no emptiness test by ``ReduceProd`` of a ``Shape``.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from toolkit import PATHS, run

import onnx_masked_rnn.conformance
from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.reference import FUNCTIONS
from onnx_masked_rnn.testing import make_model, random_inputs

OPSET = 21
SUITE = pathlib.Path(onnx_masked_rnn.conformance.__file__).parent / "data"

_RUN_CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np, onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
    feeds = dict(np.load(sys.argv[2]))
    np.savez(sys.argv[3], *session.run(None, feeds))
    """
)


def run_in_child(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp: pathlib.Path) -> list[np.ndarray]:
    """The model's outputs from onnxruntime (``ORT_ENABLE_ALL``) in a child process."""
    onnx.save(model, tmp / "model.onnx")
    np.savez(tmp / "feeds.npz", **feeds)
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _RUN_CHILD,
            str(tmp / "model.onnx"),
            str(tmp / "feeds.npz"),
            str(tmp / "out.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == 0, (
        f"onnxruntime's child exited with {child.returncode}: {child.stderr[-2000:]}"
    )
    with np.load(tmp / "out.npz") as outputs:
        return [outputs[f"arr_{i}"] for i in range(len(outputs.files))]


def with_heads(model: onnx.ModelProto, H: int, dtype) -> onnx.ModelProto:
    """``model`` with ``Y`` (batch-major ``[N, T, D, H]``) followed by a ``MatMul`` and by a ``Mul``
    with constants, whose results are its outputs."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    weights = {"MatMul": np.linspace(-1, 1, H * 3).reshape(H, 3), "Mul": np.linspace(-1, 1, H)}
    del graph.output[:]
    for op_type, weight in weights.items():
        graph.initializer.append(numpy_helper.from_array(weight.astype(dtype), f"{op_type}_weight"))
        graph.node.append(helper.make_node(op_type, ["Y", f"{op_type}_weight"], [op_type]))
        element = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        graph.output.append(helper.make_tensor_value_info(op_type, element, None))
    return model


@pytest.mark.parametrize("op_type", ["MaskedLSTM", "MaskedGRU", "MaskedRNN"])
def test_float16_batch_major_followed_by_products_runs_under_ort_enable_all(op_type, tmp_path):
    H = 4
    attrs = parse_attributes(op_type, hidden_size=H, layout=1, direction="bidirectional")
    feeds = random_inputs(
        attrs, 5, 3, 2, H, rng=np.random.default_rng(0), dtype=np.float16, present=("B", "mask")
    )
    model = with_heads(make_model(attrs, feeds, OPSET), H, np.float16)
    Y = FUNCTIONS[op_type](**feeds, **attrs.to_onnx())[0].astype(np.float32)
    weights = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in model.graph.initializer}
    expected = [Y @ weights["MatMul_weight"], Y * weights["Mul_weight"]]
    for path, prepare in PATHS.items():
        for actual, wanted in zip(run_in_child(prepare(model), feeds, tmp_path), expected, strict=True):
            np.testing.assert_allclose(actual.astype(np.float32), wanted, atol=1e-2, rtol=1e-2, err_msg=path)


def test_float16_tagger_exported_from_torch_runs_under_ort_enable_all(tmp_path):
    """The issue's reproduction: a float16 ``MaskedLSTM`` + ``Linear`` tagger, dynamic batch and
    time, the strategies that emit the Scan body, equal to eager float16 within float16's rounding."""
    torch = pytest.importorskip("torch", reason="the torch export needs torch (the [test] extra)")
    from onnx_masked_rnn.torch import MaskedLSTM, export

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = MaskedLSTM(8, 16, batch_first=True)
            self.head = torch.nn.Linear(16, 5)

        def forward(self, x, mask):
            return self.head(self.rnn(x, mask=mask)[0])

    torch.manual_seed(0)
    tagger = Tagger().eval().half()
    x = torch.randn(3, 7, 8).half()
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 2] = False
    with torch.no_grad():
        eager = tagger(x, mask).float().numpy()
    batch, time = torch.export.Dim("batch"), torch.export.Dim("time")
    dynamic = {"x": {0: batch, 1: time}, "mask": {0: batch, 1: time}}
    for strategy in ("function", "scan"):  # "native" runs the native kernel (covered above)
        model = export(
            tagger, (x, mask), strategy=strategy, dynamic_shapes=dynamic, input_names=["x", "mask"]
        )
        (actual,) = run_in_child(model, {"x": x.numpy(), "mask": mask.numpy()}, tmp_path)
        np.testing.assert_allclose(actual.astype(np.float32), eager, atol=2e-3, rtol=2e-3, err_msg=strategy)


# --- Constants as tensors, emptiness without ReduceProd -----------------------------------------

_SCALAR_ATTRIBUTES = {
    "value_int",
    "value_ints",
    "value_float",
    "value_floats",
    "value_string",
    "value_strings",
}


def graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from graphs(attribute.g)
            for sub in attribute.graphs:
                yield from graphs(sub)


def every_graph(model: onnx.ModelProto):
    yield from graphs(model.graph)
    for function in model.functions:
        yield from graphs(helper.make_graph(function.node, function.name, [], []))


def offending_constructs(model: onnx.ModelProto) -> list[str]:
    """Constants not given as a ``value`` tensor, and ``ReduceProd`` of a ``Shape``."""
    found = []
    for graph in every_graph(model):
        shapes = {o for node in graph.node if node.op_type == "Shape" for o in node.output}
        for node in graph.node:
            if node.op_type == "Constant":
                found += [f"Constant {a.name}" for a in node.attribute if a.name in _SCALAR_ATTRIBUTES]
            if node.op_type == "ReduceProd" and node.input[0] in shapes:
                found.append("ReduceProd(Shape(...))")
    return found


CONFIGURATIONS = [
    ("MaskedLSTM", {"direction": "bidirectional"}, ("B", "initial_h", "initial_c", "P", "mask")),
    ("MaskedLSTM", {"layout": 1, "masked_output": "carry"}, ("initial_h", "mask")),
    ("MaskedGRU", {"linear_before_reset": 1, "direction": "reverse"}, ("B", "sequence_lens", "mask")),
    ("MaskedRNN", {"activations": ["Relu"]}, ("B",)),
    ("MaskedRNN", {"layout": 1}, ()),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("op_type", "extra", "present"), CONFIGURATIONS)
def test_every_path_emits_constants_as_tensors_and_no_reduce_prod(op_type, extra, present, dtype):
    attrs = parse_attributes(op_type, hidden_size=3, **extra)
    feeds = random_inputs(attrs, 4, 2, 2, 3, rng=np.random.default_rng(0), dtype=dtype, present=present)
    if "sequence_lens" in present:
        feeds["sequence_lens"] = np.array([4, 1], np.int32)
    model = make_model(attrs, feeds, OPSET)
    for path, prepare in PATHS.items():
        assert offending_constructs(prepare(model)) == [], path


def test_the_shipped_suite_emits_constants_as_tensors():
    """(tests/conformance/test_regenerated_suite.py checks that the generator writes the shipped bytes.)"""
    shipped = sorted(SUITE.glob("node/*/model.onnx"))
    assert len(shipped) > 100, f"the shipped suite is missing from {SUITE}"
    for path in shipped:
        assert offending_constructs(onnx.load(path)) == [], path


def test_empty_check_keeps_an_input_size_of_zero():
    """``Size(X)`` would call ``X`` of shape ``[T, N, 0]`` empty; the recurrence still runs there
    (the biases and ``R`` move the state), so the emptiness test is on ``T·N`` only."""
    attrs = parse_attributes("MaskedLSTM", hidden_size=3)
    feeds = random_inputs(attrs, 4, 2, 0, 3, rng=np.random.default_rng(0), present=("B", "mask"))
    expected = FUNCTIONS["MaskedLSTM"](**feeds, **attrs.to_onnx())
    assert np.abs(expected[1]).max() > 0.01
    for path, prepare in PATHS.items():
        for actual, wanted in zip(run(prepare(make_model(attrs, feeds, OPSET)), feeds), expected):
            np.testing.assert_allclose(actual, wanted, rtol=1e-5, atol=1e-6, err_msg=path)
