"""The generated graphs on the inputs that broke earlier ones: every path (``attach_functions``,
``inline`` scan in both forms, ``inline`` native) against the numpy reference in onnxruntime.

- a masked node fed by a ``Loop`` output (rank unknown to the graph), in the main graph and in an
  ``If`` branch;
- for every op, two nodes differing only in which optional inputs they supply or in one
  activation's ``alpha`` or ``beta``, and a bidirectional node whose directions differ only in
  ``beta`` (each configuration needs its own body and overload);
- ``batch_size`` 0 and ``seq_length`` 0; a batch with every step masked;
- float16 with ``layout=1``, ``initial_h`` and ``"carry"`` (onnxruntime's optimizer crashed the
  process on the earlier body: run in a child process);
- a mask shaped otherwise than ``X``'s first two axes fails at run time instead of broadcasting;
- Softplus, which onnxruntime's RNN kernel computes differently, and an unbounded LSTM/GRU gate
  keep the Scan body under ``inline(model, "native")``;
- ``inline``/``attach_functions`` refuse inconsistent shapes and wrong types naming the input, and
  take a local function's shapes from its call site.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracles import REFERENCE, assert_close
from toolkit import PATHS, TOLERANCE, run

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, attach_functions, inline
from onnx_masked_rnn._walk import subgraphs, walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.conformance import DATA_DIR
from onnx_masked_rnn.conformance.outcomes import ORT_NO_FLOAT64_KERNEL
from onnx_masked_rnn.functions import Configuration, build_scan_function
from onnx_masked_rnn.testing import make_model, make_node, random_inputs, value_info

OPSET = 21
FLOAT = TensorProto.FLOAT


def check_every_path(
    model: onnx.ModelProto, feeds, expected, label: str, full_check: bool = False, **tolerance
) -> None:
    for path, prepare in PATHS.items():
        prepared = prepare(model)
        onnx.checker.check_model(prepared, full_check=full_check)
        for optimize in (True, False):
            actual = run(prepared, feeds, optimize=optimize)
            assert_close(
                f"{label}, {path}, optimize={optimize}", actual, expected, **(tolerance or TOLERANCE)
            )


def graph_model(
    nodes, inputs: dict[str, np.ndarray], outputs: dict[str, int], functions=()
) -> onnx.ModelProto:
    """A model of ``nodes``; ``outputs`` maps each float output to its rank (dims unknown)."""
    graph = helper.make_graph(
        nodes,
        "g",
        [value_info(k, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, FLOAT, [None] * rank) for o, rank in outputs.items()],
    )
    imports = [helper.make_opsetid("", OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    imports += [helper.make_opsetid("local", 1)] if functions else []
    return helper.make_model(graph, opset_imports=imports, functions=list(functions), ir_version=10)


# --- X from a Loop ------------------------------------------------------------------------------


def _loop_then_masked(attrs, suffix: str) -> list[onnx.NodeProto]:
    """A Loop stacking ``source[i]`` (its body output states no shape, so X's rank is unknown to
    the graph), then the masked node on the stacked X."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], [f"cond_out{suffix}"]),
            helper.make_node("Gather", ["source", "i"], [f"x_t{suffix}"], axis=0),
        ],
        f"stack{suffix}",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info(f"cond_out{suffix}", TensorProto.BOOL, []),
            helper.make_tensor_value_info(f"x_t{suffix}", FLOAT, None),
        ],
    )
    masked = make_node(attrs, ["X", "W", "R", "B", "initial_h", "mask"], name=f"masked{suffix}")
    masked.input[0] = f"X{suffix}"
    masked.output[:] = [f"Y{suffix}"] + [""] * (len(masked.output) - 1)
    return [
        helper.make_node("Shape", ["source"], [f"dims{suffix}"], start=0, end=1),
        helper.make_node("Squeeze", [f"dims{suffix}"], [f"trip{suffix}"]),
        helper.make_node("Loop", [f"trip{suffix}", ""], [f"X{suffix}"], body=body),
        masked,
    ]


@pytest.mark.parametrize("op_type", list(OP_SPECS))
def test_x_from_a_loop_output(op_type):
    attrs = parse_attributes(op_type, hidden_size=4, masked_output="carry", direction="bidirectional")
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(1), present=("B", "initial_h", "mask"))
    feeds["source"] = feeds.pop("X")
    expected = REFERENCE[op_type](
        feeds["source"], **{k: v for k, v in feeds.items() if k != "source"}, **attrs.to_onnx()
    )
    model = graph_model(_loop_then_masked(attrs, ""), feeds, {"Y": 4})
    check_every_path(model, feeds, expected[:1], "X from a Loop")

    # The same inside an If branch; the other branch passes an input through.
    then_branch = helper.make_graph(
        _loop_then_masked(attrs, "_then"), "then", [], [helper.make_tensor_value_info("Y_then", FLOAT, None)]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["other"], ["Y_else"])],
        "else",
        [],
        [helper.make_tensor_value_info("Y_else", FLOAT, None)],
    )
    feeds_if = dict(feeds, flag=np.array(True), other=np.zeros((1,), np.float32))
    choose = helper.make_node("If", ["flag"], ["Y"], then_branch=then_branch, else_branch=else_branch)
    check_every_path(
        graph_model([choose], feeds_if, {"Y": 4}), feeds_if, expected[:1], "X from a Loop in an If"
    )


# --- Configurations that need their own bodies --------------------------------------------------
# attach_functions must give each configuration its own body (overload) and inline must expand each
# with its own parameters: two nodes of one op differing in a single detail (which optional inputs
# are present, an activation's alpha or beta), and one bidirectional node whose directions differ
# only in beta.

# op -> activations taking alpha and beta (HardSigmoid, Affine, ScaledTanh) in every slot
ACTIVATIONS = [
    ("MaskedLSTM", ["HardSigmoid", "ScaledTanh", "Affine"]),
    ("MaskedGRU", ["HardSigmoid", "ScaledTanh"]),
    ("MaskedRNN", ["ScaledTanh"]),
    ("MaskedRNN", ["Affine"]),
]


def configurations_model(configurations, feeds) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """One node per ``(attributes, present inputs)``, outputs ``Y_<k>`` and ``Y_h_<k>`` with static
    shapes; returns the model and the reference's outputs in the same order."""
    nodes, outputs, expected = [], [], []
    for k, (attributes, present) in enumerate(configurations):
        attrs = parse_attributes(**attributes)
        node = make_node(attrs, ["X", "W", "R", *present], name=f"node_{k}")
        node.output[:] = [f"Y_{k}", f"Y_h_{k}"] + [""] * (len(node.output) - 2)
        nodes.append(node)
        Y, Y_h, *_ = REFERENCE[attrs.op_type](
            **{n: feeds[n] for n in ["X", "W", "R", *present]}, **attrs.to_onnx()
        )
        expected += [Y, Y_h]
        outputs += [value_info(f"Y_{k}", Y), value_info(f"Y_h_{k}", Y_h)]
    graph = helper.make_graph(nodes, "g", [value_info(n, v) for n, v in feeds.items()], outputs)
    imports = [helper.make_opsetid("", OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    return helper.make_model(graph, opset_imports=imports, ir_version=10), expected


def check_configurations(configurations, feeds, label: str) -> None:
    """Every path against the reference; each configuration its own function and overload."""
    model, expected = configurations_model(configurations, feeds)
    attached = attach_functions(model)
    assert len({n.overload for n in attached.graph.node if n.domain == DOMAIN}) == len(configurations)
    assert len(attached.functions) == len(configurations)
    check_every_path(model, feeds, expected, label, full_check=True)


def configuration_feeds(op_type: str, direction: str = "forward", seed: int = 0) -> dict[str, np.ndarray]:
    attrs = parse_attributes(op_type, direction=direction)
    present = ("B", "initial_h", "initial_c", "mask")
    return random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(seed), present=present)


@pytest.mark.parametrize(
    ("op_type", "extra", "full", "bare"),
    [
        (
            op_type,
            {},
            ["B", "initial_h", "mask"] + (["initial_c"] if op_type == "MaskedLSTM" else []),
            ["B", "mask"],
        )
        for op_type in sorted(OP_SPECS)
    ]
    + [("MaskedGRU", {"linear_before_reset": 1}, ["B", "initial_h", "mask"], ["mask"])],
    ids=["MaskedGRU-state", "MaskedLSTM-state", "MaskedRNN-state", "MaskedGRU-bias-and-state"],
)
def test_nodes_differing_only_in_present_inputs(op_type, extra, full, bare):
    """The same attributes; the second node lacks the initial state (zeros instead), or also B."""
    feeds = configuration_feeds(op_type, seed=1)
    attributes = {"op_type": op_type, "hidden_size": 4, "masked_output": "carry", **extra}
    check_configurations([(attributes, full), (attributes, bare)], feeds, f"present inputs {bare}")


@pytest.mark.parametrize("parameter", ["activation_beta", "activation_alpha"])
@pytest.mark.parametrize(("op_type", "names"), ACTIVATIONS, ids=[f"{o}-{n[-1]}" for o, n in ACTIVATIONS])
def test_nodes_differing_only_in_one_activation_parameter(op_type, names, parameter):
    feeds = configuration_feeds(op_type, seed=2)
    base = {
        "op_type": op_type,
        "hidden_size": 4,
        "activations": names,
        "activation_alpha": [0.3] * len(names),
        "activation_beta": [0.4] * len(names),
    }
    other = dict(base, **{parameter: [0.7] * len(names)})
    present = ["B", "mask"]
    _, expected = configurations_model([(base, present), (other, present)], feeds)
    assert not np.allclose(expected[0], expected[2]), "the parameter changes nothing"
    check_configurations([(base, present), (other, present)], feeds, parameter)


@pytest.mark.parametrize("op_type", sorted(OP_SPECS))
def test_directions_differing_only_in_beta(op_type):
    feeds = configuration_feeds(op_type, direction="bidirectional", seed=3)
    names = next(n for o, n in ACTIVATIONS if o == op_type)
    k = len(names)
    attributes = {
        "op_type": op_type,
        "hidden_size": 4,
        "direction": "bidirectional",
        "activations": names * 2,
        "activation_alpha": [0.3] * 2 * k,
        "activation_beta": [0.4] * k + [0.9] * k,
    }
    model, expected = configurations_model([(attributes, ["B", "mask"])], feeds)
    check_every_path(model, feeds, expected, "directions differing in beta", full_check=True)


# --- Edge sizes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("T", "N"), [(0, 3), (4, 0), (0, 0)])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op_type", list(OP_SPECS))
def test_empty_batch_or_sequence(op_type, layout, T, N):
    """Empty ``Y``; ``Y_h``/``Y_c`` are the initial states (zeros when absent)."""
    attrs = parse_attributes(
        op_type, hidden_size=4, layout=layout, masked_output="carry", direction="bidirectional"
    )
    for present in (("B", "initial_h", "initial_c", "mask"), ()):
        feeds = random_inputs(
            attrs, T, N, 2, 4, rng=np.random.default_rng(4), present=present, mask_kind="all_true"
        )
        expected = REFERENCE[op_type](**feeds, **attrs.to_onnx())
        check_every_path(make_model(attrs, feeds, OPSET), feeds, expected, f"T={T} N={N} {present}")


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("op_type", list(OP_SPECS))
def test_every_step_masked(op_type, layout):
    """A batch with nothing to process: zeros in Y, the initial states in Y_h/Y_c, on every path
    (the native expansion must not hand the native op a sequence of length 0)."""
    for mode in ("zero", "carry"):
        attrs = parse_attributes(
            op_type, hidden_size=4, layout=layout, masked_output=mode, direction="bidirectional"
        )
        feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(5), mask_kind="all_masked")
        feeds["sequence_lens"] = np.array([5, 0, 2], np.int32)
        expected = REFERENCE[op_type](**feeds, **attrs.to_onnx())
        check_every_path(make_model(attrs, feeds, OPSET), feeds, expected, f"all masked {mode}")


# --- float16, layout 1 (a process crash before) -------------------------------------------------

_FLOAT16_CHILD = textwrap.dedent(
    """
    import numpy as np, onnxruntime as ort
    from onnx_masked_rnn import attach_functions, inline
    from onnx_masked_rnn.attributes import parse_attributes
    from onnx_masked_rnn.reference import FUNCTIONS
    from onnx_masked_rnn.testing import make_model, random_inputs

    for op_type in ("MaskedLSTM", "MaskedGRU"):
        attrs = parse_attributes(op_type, hidden_size=4, layout=1, masked_output="carry")
        feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(0), dtype=np.float16,
                              present=("initial_h", "mask"))
        expected = FUNCTIONS[op_type](**feeds, **attrs.to_onnx())
        model = make_model(attrs, feeds, 21)
        for prepared in (attach_functions(model), inline(model), inline(model, scan_form="portable")):
            session = ort.InferenceSession(prepared.SerializeToString(), providers=["CPUExecutionProvider"])
            for a, e in zip(session.run(None, feeds), expected):
                np.testing.assert_allclose(a.astype(np.float32), e.astype(np.float32), rtol=1e-2, atol=1e-2)
    print("ok")
    """
)


def test_float16_batch_major_carry_with_initial_h_in_a_child_process():
    """onnxruntime 1.32's optimizer (NchwcTransformer, level 3) crashed the process on the earlier
    body's float16 ``Where`` after the Scan ("carry" from a cumulative sum); the body now carries
    the previous output as a Scan state."""
    child = subprocess.run(
        [sys.executable, "-c", _FLOAT16_CHILD], capture_output=True, text=True, timeout=300
    )
    assert child.returncode == 0 and child.stdout.strip() == "ok", (child.returncode, child.stderr[-2000:])


# --- The mask's shape is checked at run time ----------------------------------------------------


@pytest.mark.parametrize("layout", [0, 1])
def test_mask_of_another_shape_fails_at_run_time(layout):
    """A mask declared with unknown dims passes the static checks; at run time a ``[T, 1]`` (or
    ``[1, T]``) mask, which would broadcast, and a transposed one both fail on every path."""
    attrs = parse_attributes("MaskedGRU", hidden_size=4, layout=layout)
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(6), present=("mask",))
    model = make_model(attrs, feeds, OPSET)
    for dim in model.graph.input[-1].type.tensor_type.shape.dim:
        dim.ClearField("dim_value")
    good = feeds["mask"]
    wrong = [good[:, :1] if layout == 0 else good[:1, :], good.T.copy()]
    for path, prepare in PATHS.items():
        prepared = prepare(model)
        run(prepared, feeds)  # the right shape runs
        for mask in wrong:
            with pytest.raises(Exception, match="Concat|dimension|shape|Shape"):
                run(prepared, dict(feeds, mask=mask))
            assert mask.shape != good.shape, path


# --- Activations the native kernels compute differently -----------------------------------------


def test_softplus_keeps_the_scan_body_under_native():
    attrs = parse_attributes("MaskedRNN", hidden_size=4, activations=["Softplus"])
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(7), present=("mask",))
    feeds["X"] = feeds["X"] * 200  # Softplus' argument beyond 88.7, where onnxruntime's kernel overflows
    expected = REFERENCE["MaskedRNN"](**feeds, **attrs.to_onnx())
    inlined = inline(make_model(attrs, feeds, OPSET), "native")
    op_types = {n.op_type for n in walk_nodes(inlined.graph.node)}
    assert "Scan" in op_types and "RNN" not in op_types
    actual = run(inlined, feeds)
    assert all(np.isfinite(a).all() for a in actual)
    assert_close("Softplus under native", actual, expected, **TOLERANCE)


@pytest.mark.parametrize(
    ("op_type", "gates", "native"),
    [
        ("MaskedLSTM", ["Sigmoid", "Tanh", "Tanh"], "LSTM"),
        ("MaskedLSTM", ["Relu", "Relu", "Relu"], None),
        ("MaskedGRU", ["HardSigmoid", "Tanh"], "GRU"),
        ("MaskedGRU", ["Relu", "Relu"], None),
        ("MaskedGRU", ["LeakyRelu", "Sigmoid"], None),
    ],
)
def test_an_unbounded_gate_keeps_the_scan_body_under_native(op_type, gates, native):
    """onnxruntime's LSTM/GRU kernels leave IEEE arithmetic once an unbounded gate lets the state
    overflow, and amplify their own error past the formulas' in float32 short of it (fuzz seed 0:
    cases 312, 9826, 11685; tests/test_fuzz.py pins the overflow): the native expansion keeps the
    Scan body for such a node, and the native op for a bounded gate."""
    attrs = parse_attributes(op_type, hidden_size=4, activations=gates, direction="forward")
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(8), present=("mask",))
    inlined = inline(make_model(attrs, feeds, OPSET), "native")
    op_types = {n.op_type for n in walk_nodes(inlined.graph.node)}
    assert (native in op_types) if native else ("Scan" in op_types and not {"LSTM", "GRU"} & op_types)
    expected = REFERENCE[op_type](**feeds, **attrs.to_onnx())
    assert_close(f"{gates} under native", run(inlined, feeds), expected, **TOLERANCE)


# --- Static checks before anything is built -----------------------------------------------------


def _lstm_model(**changes: np.ndarray) -> onnx.ModelProto:
    """A consistent bidirectional MaskedLSTM model whose graph inputs ``changes`` then declare
    another type or shape."""
    attrs = parse_attributes("MaskedLSTM", direction="bidirectional", hidden_size=4)
    rng = np.random.default_rng(8)
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=rng, present=("B", "mask"), sequence_lens=[5, 1, 0])
    model = make_model(attrs, feeds, OPSET)
    for value in model.graph.input:
        if value.name in changes:
            value.CopyFrom(value_info(value.name, changes[value.name]))
    return model


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"W": np.zeros((1, 16, 2), np.float32)},
            "input 'W' has size 1 on axis 0",
        ),  # one direction's weights
        ({"R": np.zeros((2, 16, 5), np.float32)}, "input 'R' has size 5 on axis 2, expected 4"),
        (
            {"sequence_lens": np.array([5, 1, 0], np.int64)},
            "input 'sequence_lens' .* is int64, expected int32",
        ),
        (
            {"sequence_lens": np.array([5, 1, 0], np.float32)},
            "input 'sequence_lens' .* is float, expected int32",
        ),
        ({"B": np.zeros((2, 32), np.float64)}, "input 'B' .* is double, expected float"),
        ({"mask": np.zeros((3, 5), bool)}, "input 'mask' must have the shape"),
    ],
)
def test_inconsistent_inputs_are_refused_naming_the_input(changes, message):
    model = _lstm_model(**changes)
    for prepare in PATHS.values():
        with pytest.raises(ValueError, match=message):
            prepare(model)


def test_bfloat16_is_refused_naming_the_type():
    model = _lstm_model()
    for value in model.graph.input:
        if value.type.tensor_type.elem_type == FLOAT:
            value.type.tensor_type.elem_type = TensorProto.BFLOAT16
    for prepare in PATHS.values():
        with pytest.raises(ValueError, match="input 'X' .* must be float16, float or double, got .*BFLOAT16"):
            prepare(model)


def test_native_takes_hidden_size_from_the_call_site_of_a_local_function():
    """A local function's ``R`` is read with the call site's shape, not with the shape of a value
    of the same name in the main graph."""
    attrs = parse_attributes("MaskedGRU")  # no hidden_size: the native expansion takes R's
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(9), present=("mask",))
    inner = make_node(attrs, ["X", "W", "R", "mask"], name="inner")
    inner.output[:] = ["y", ""]
    wrapper = helper.make_function(
        "local",
        "wrapper",
        ["X", "W", "R", "mask"],
        ["y"],
        [inner],
        [helper.make_opsetid("", OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )
    other = random_inputs(
        parse_attributes("MaskedGRU"), 5, 3, 2, 7, rng=np.random.default_rng(10), present=()
    )
    feeds_main = {"X": feeds["X"], "W4": feeds["W"], "R4": feeds["R"], "mask": feeds["mask"], "R": other["R"]}
    nodes = [
        helper.make_node("wrapper", ["X", "W4", "R4", "mask"], ["Y"], domain="local"),
        helper.make_node("Identity", ["R"], ["R_out"]),  # a main-graph R of hidden size 7
    ]
    model = graph_model(nodes, feeds_main, {"Y": 4, "R_out": 3}, functions=[wrapper])
    expected = [REFERENCE["MaskedGRU"](**feeds, **attrs.to_onnx())[0], other["R"]]
    check_every_path(model, feeds_main, expected, "local function")


def test_masked_node_in_a_function_called_by_a_function():
    """Types reach a masked node two local functions deep (``X``'s element type is needed)."""
    attrs = parse_attributes("MaskedRNN", hidden_size=4, masked_output="carry")
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(11), present=("initial_h", "mask"))
    masked = make_node(attrs, ["X", "W", "R", "initial_h", "mask"], name="masked")
    masked.output[:] = ["y", ""]
    imports = [helper.make_opsetid("", OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    inner = helper.make_function("local", "inner", list(feeds), ["y"], [masked], imports)
    call_inner = helper.make_node("inner", list(feeds), ["y"], domain="local")
    outer = helper.make_function(
        "local", "outer", list(feeds), ["y"], [call_inner], [*imports, helper.make_opsetid("local", 1)]
    )
    model = graph_model(
        [helper.make_node("outer", list(feeds), ["Y"], domain="local")], feeds, {"Y": 4}, [outer, inner]
    )
    expected = REFERENCE["MaskedRNN"](**feeds, **attrs.to_onnx())[:1]
    check_every_path(model, feeds, expected, "two functions deep")


def test_shipped_suite_without_graph_optimizations():
    """Every shipped conformance model runs in onnxruntime with its graph optimizations disabled
    (``ORT_DISABLE_ALL``: a Scan body must state its outputs' shapes itself) and matches its
    outputs; only onnxruntime's missing float64 LSTM/GRU/RNN kernels are let through."""
    cases = sorted((DATA_DIR / "node").iterdir())
    assert len(cases) > 300
    no_kernel = 0
    for case in cases:
        model = onnx.load(case / "model.onnx")
        data = case / "test_data_set_0"
        feeds = {
            value.name: numpy_helper.to_array(onnx.load_tensor(data / f"input_{i}.pb"))
            for i, value in enumerate(model.graph.input)
        }
        expected = [numpy_helper.to_array(onnx.load_tensor(p)) for p in sorted(data.glob("output_*.pb"))]
        try:
            actual = run(model, feeds, optimize=False)
        except Exception as error:
            if ORT_NO_FLOAT64_KERNEL.search(str(error)):
                no_kernel += 1
                continue
            raise AssertionError(f"{case.name}: {error}") from None
        tolerance = json.loads((case / "data.json").read_text())
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(
                a, e, rtol=tolerance["rtol"], atol=tolerance["atol"], err_msg=case.name
            )
    assert no_kernel < len(cases) // 10


def test_no_scan_body_value_shadows_an_enclosing_name():
    """Found by the fuzz (seed 0, case 708): a bidirectional MaskedLSTM with peepholes and clip got a
    Scan body value named like a value its enclosing graph defines after the Scan, and onnxruntime's
    function inliner rejected the model (not in SSA form). Names are unique across nested scopes."""
    attrs = parse_attributes(
        "MaskedLSTM",
        direction="bidirectional",
        hidden_size=2,
        clip=0.796,
        activations=["Softplus", "Softsign", "Softsign", "ThresholdedRelu", "LeakyRelu", "HardSigmoid"],
        activation_alpha=[1.067, 1.018],
        activation_beta=[0.405],
    )
    function = build_scan_function(Configuration.of(attrs, present=("B", "sequence_lens", "P")), 19)

    def check(nodes, enclosing: set[str]) -> None:
        defined = {o for n in nodes for o in n.output if o}
        for node in nodes:
            for graph in subgraphs(node):
                inner = {i.name for i in graph.input} | {o for n in graph.node for o in n.output if o}
                assert not inner & (enclosing | defined), sorted(inner & (enclosing | defined))
                check(graph.node, enclosing | defined | {i.name for i in graph.input})

    check(function.node, set(function.input))
