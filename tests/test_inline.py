"""``inline`` and ``attach_functions`` on whole models: masked nodes in Loop and If bodies reading
their weights and input from the outer scope, in model-local functions, several differently
configured nodes of one op, idempotence, the domain import, refusals.

Every model runs in onnxruntime after ``attach_functions`` and after ``inline`` and must equal
the numpy reference (float32: rtol 1e-4, atol 1e-5).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracles import REFERENCE, assert_close
from toolkit import TOLERANCE, run

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, attach_functions, inline
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.attributes import OP_SPECS, RNNAttributes, parse_attributes
from onnx_masked_rnn.functions import MIN_OPSET, max_opset
from onnx_masked_rnn.inline import DEFAULT_SCAN_FORM
from onnx_masked_rnn.testing import make_model, make_node, random_inputs, value_info

T, N, I, H = 6, 3, 4, 5
FLOAT = TensorProto.FLOAT


def all_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return list(walk_nodes(model.graph.node)) + [n for f in model.functions for n in walk_nodes(f.node)]


def assert_standard(model: onnx.ModelProto) -> None:
    """Only standard ops, no import of our domain, value names unique in each scope (the main
    graph with its subgraphs; each function), and the full checker."""
    onnx.checker.check_model(model, full_check=True)
    assert not [n for n in all_nodes(model) if n.domain == DOMAIN]
    assert DOMAIN not in {o.domain for o in model.opset_import}
    for scope in (model.graph.node, *(f.node for f in model.functions)):
        outputs = [o for n in walk_nodes(scope) for o in n.output if o]
        assert len(outputs) == len(set(outputs)), "value names are not unique"


def node(attrs: RNNAttributes, inputs: list[str], outputs: list[str], name: str) -> onnx.NodeProto:
    """A masked node with explicit attributes; ``inputs`` are OpSpec input names (present ones)."""
    n = make_node(attrs, inputs, name=name)
    del n.output[:]
    n.output.extend(outputs)
    return n


def lstm_inputs(attrs: RNNAttributes, seed: int = 0) -> dict[str, np.ndarray]:
    return random_inputs(
        attrs, T, N, I, H, rng=np.random.default_rng(seed), present=("B", "mask"), mask_kind="holes"
    )


def model_of(
    nodes, inputs: dict[str, np.ndarray], outputs: dict[str, tuple], opset: int = MIN_OPSET, functions=()
):
    """A model of ``nodes`` with graph inputs ``inputs`` and float outputs ``{name: shape}``."""
    graph = helper.make_graph(
        nodes,
        "g",
        [value_info(k, v) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, FLOAT, shape) for o, shape in outputs.items()],
    )
    imports = [helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    imports += [helper.make_opsetid("local", 1)] if functions else []
    return helper.make_model(graph, opset_imports=imports, functions=list(functions), ir_version=10)


def both_paths(model: onnx.ModelProto, feeds, expected, oracle: str) -> None:
    attached = attach_functions(model)
    onnx.checker.check_model(attached, full_check=True)
    assert_close(f"{oracle}, attach_functions", run(attached, feeds), expected, **TOLERANCE)
    inlined = inline(model)
    assert_standard(inlined)
    assert_close(f"{oracle}, inline scan", run(inlined, feeds), expected, **TOLERANCE)


def test_loop_body_reads_outer_scope():
    """A MaskedLSTM in a Loop body with X, W, R, B and mask from the outer scope (tf2onnx cannot
    export this, seed 003); the loop adds Y to a carried sum twice."""
    attrs = parse_attributes("MaskedLSTM", masked_output="carry")
    feeds = lstm_inputs(attrs)
    Y, _, _ = REFERENCE["MaskedLSTM"](**feeds, **attrs.to_onnx())
    feeds["acc0"] = np.zeros_like(Y)
    lstm = node(attrs, ["X", "W", "R", "B", "mask"], ["Y", "", ""], "lstm_in_loop")
    body = helper.make_graph(
        [
            lstm,
            helper.make_node("Add", ["acc_in", "Y"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", FLOAT, Y.shape),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", FLOAT, Y.shape),
        ],
    )
    nodes = [
        helper.make_node(
            "Constant", [], ["trip"], value=helper.make_tensor("trip", TensorProto.INT64, [], [2])
        ),
        helper.make_node(
            "Constant", [], ["true"], value=helper.make_tensor("true", TensorProto.BOOL, [], [True])
        ),
        helper.make_node("Loop", ["trip", "true", "acc0"], ["total"], body=body),
    ]
    both_paths(model_of(nodes, feeds, {"total": Y.shape}), feeds, [2 * Y], "Loop body")


def test_if_branches_and_nesting():
    """Two differently configured MaskedLSTMs in the branches of an If, the If inside a Loop body
    (depth 2), all weights from the outer scope; both branch outcomes."""
    forward = parse_attributes("MaskedLSTM", masked_output="carry")
    reverse = parse_attributes("MaskedLSTM", direction="reverse", masked_output="zero", clip=1.0)
    feeds = lstm_inputs(forward, seed=1)

    def branch(attrs, name):
        lstm = node(attrs, ["X", "W", "R", "B", "mask"], [f"Y_{name}", "", ""], f"lstm_{name}")
        y = helper.make_tensor_value_info(f"Y_{name}", FLOAT, (T, 1, N, H))
        return helper.make_graph([lstm], name, [], [y])

    choose = helper.make_node(
        "If", ["flag"], ["chosen"], then_branch=branch(forward, "then"), else_branch=branch(reverse, "else")
    )
    body = helper.make_graph(
        [choose, helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "loop_body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("chosen", FLOAT, (T, 1, N, H)),
        ],
    )
    nodes = [
        helper.make_node(
            "Constant", [], ["trip"], value=helper.make_tensor("trip", TensorProto.INT64, [], [1])
        ),
        helper.make_node(
            "Constant", [], ["true"], value=helper.make_tensor("true", TensorProto.BOOL, [], [True])
        ),
        helper.make_node("Loop", ["trip", "true"], ["stacked"], body=body),
    ]
    for flag, attrs in ((True, forward), (False, reverse)):
        run_feeds = dict(feeds, flag=np.array(flag))
        Y, _, _ = REFERENCE["MaskedLSTM"](**feeds, **attrs.to_onnx())
        model = model_of(nodes, run_feeds, {"stacked": (1, T, 1, N, H)})
        both_paths(model, run_feeds, [Y[None]], f"If branch {flag}")


def test_two_configurations_of_one_op():
    """MaskedGRUs with different attributes and present inputs in one graph: two overloads; a
    third node configured like the first shares its body."""
    a = parse_attributes("MaskedGRU", linear_before_reset=1, masked_output="carry")
    b = parse_attributes("MaskedGRU", direction="bidirectional", activations=["HardSigmoid", "Softsign"] * 2)
    feeds = random_inputs(a, T, N, I, H, rng=np.random.default_rng(2), present=("B", "initial_h", "mask"))
    W2 = random_inputs(b, T, N, I, H, rng=np.random.default_rng(3), present=())
    feeds.update(W2=W2["W"], R2=W2["R"], lens=np.array([T, 1, 0], np.int32))
    nodes = [
        node(a, ["X", "W", "R", "B", "initial_h", "mask"], ["Y_a", "Y_h_a"], "gru_a"),
        helper.make_node("GRU", ["X", "W", "R"], ["Y_native"], hidden_size=H),  # a standard op stays
        make_node(b, ["X", "W", "R", "sequence_lens"], name="gru_b"),
        node(a, ["X", "W", "R", "B", "initial_h", "mask"], ["Y_a2", "Y_h_a2"], "gru_a2"),
    ]
    nodes[2].input[:] = ["X", "W2", "R2", "", "lens"]
    nodes[2].output[:] = ["Y_b", "Y_h_b"]
    expected_a = REFERENCE["MaskedGRU"](
        **{k: feeds[k] for k in ("X", "W", "R", "B", "initial_h", "mask")}, **a.to_onnx()
    )
    expected_b = REFERENCE["MaskedGRU"](
        feeds["X"], feeds["W2"], feeds["R2"], sequence_lens=feeds["lens"], **b.to_onnx()
    )
    names = ["Y_a", "Y_h_a", "Y_b", "Y_h_b", "Y_a2", "Y_h_a2"]
    expected = [*expected_a, *expected_b, *expected_a]
    model = model_of(nodes, feeds, {n: e.shape for n, e in zip(names, expected)})
    both_paths(model, feeds, expected, "two configurations")
    attached = attach_functions(model)
    overloads = [(f.name, f.overload) for f in attached.functions]
    assert len(overloads) == len(set(overloads)) == 2
    assert {n.overload for n in attached.graph.node if n.domain == DOMAIN} == {o for _, o in overloads}


def test_model_local_function_calling_a_masked_op():
    """A masked node inside a model-local function is attached / inlined as well."""
    attrs = parse_attributes("MaskedRNN", direction="reverse", masked_output="carry")
    feeds = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(4), present=("B", "mask"))
    encoder = helper.make_function(
        "local",
        "Encoder",
        ["x", "w", "r", "b", "m"],
        ["y"],
        [
            node(attrs, ["X", "W", "R", "B", "mask"], ["y_all", ""], "rnn"),
            helper.make_node("Relu", ["y_all"], ["y"]),
        ],
        [helper.make_opsetid("", MIN_OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
    )
    encoder.node[0].input[:] = ["x", "w", "r", "b", "", "", "m"]
    call = helper.make_node("Encoder", ["X", "W", "R", "B", "mask"], ["out"], domain="local")
    Y, _ = REFERENCE["MaskedRNN"](**feeds, **attrs.to_onnx())
    model = model_of([call], feeds, {"out": Y.shape}, functions=[encoder])
    both_paths(model, feeds, [np.maximum(Y, 0)], "local function")
    inlined = inline(model)
    assert [f.name for f in inlined.functions] == ["Encoder"]
    assert DOMAIN not in {o.domain for o in inlined.functions[0].opset_import}


@pytest.mark.parametrize("opset", [MIN_OPSET, max_opset()])
def test_attach_is_idempotent_and_inline_drops_the_domain(opset):
    attrs = parse_attributes("MaskedLSTM", layout=1)
    feeds = lstm_inputs(attrs, seed=5)
    model = make_model(attrs, feeds, opset)
    once = attach_functions(model)
    twice = attach_functions(once)
    assert once.SerializeToString() == twice.SerializeToString()
    assert len(once.functions) == 1 and once.functions[0].overload
    assert model.functions == []  # the input model is left alone
    inlined = inline(twice)
    assert_standard(inlined)
    assert [(o.domain, o.version) for o in inlined.opset_import] == [("", opset)]
    assert_close(
        "idempotent", run(inlined, feeds), REFERENCE["MaskedLSTM"](**feeds, **attrs.to_onnx()), **TOLERANCE
    )


def test_a_model_without_masked_nodes_is_unchanged():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", FLOAT, [2])],
        [helper.make_tensor_value_info("y", FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert inline(model) == model
    assert attach_functions(model) == model


@pytest.mark.parametrize("function", [inline, attach_functions])
def test_old_opset_is_refused_with_its_number(function):
    attrs = parse_attributes("MaskedRNN")
    model = make_model(attrs, random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(6)), 17)
    with pytest.raises(ValueError, match="ai.onnx opset 17 is not supported"):
        function(model)


def test_unknown_strategy_is_refused():
    attrs = parse_attributes("MaskedRNN")
    model = make_model(attrs, random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(6)), MIN_OPSET)
    with pytest.raises(ValueError, match="strategy must be 'scan' or 'native', got 'fast'"):
        inline(model, "fast")


def test_invalid_node_is_refused_with_its_name():
    attrs = parse_attributes("MaskedGRU")
    model = make_model(attrs, random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(7)), MIN_OPSET)
    model.graph.node[0].attribute.append(helper.make_attribute("masked_output", "nan"))
    del model.graph.node[0].attribute[[a.name for a in model.graph.node[0].attribute].index("masked_output")]
    with pytest.raises(ValueError, match="node 'MaskedGRU'.*masked_output"):
        attach_functions(model)


def test_attribute_reference_is_refused():
    """A masked node in a local function whose attribute refers to the function's attribute
    cannot be specialised on its own: a clear error, not a wrong body."""
    attrs = parse_attributes("MaskedRNN")
    inner = node(attrs, ["X", "W", "R"], ["y", ""], "rnn")
    direction = [a for a in inner.attribute if a.name == "direction"][0]
    direction.ClearField("s")
    direction.ref_attr_name = "dir"
    wrapper = helper.make_function(
        "local",
        "Wrapped",
        ["X", "W", "R"],
        ["y"],
        [inner],
        [helper.make_opsetid("", MIN_OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        attributes=["dir"],
    )
    feeds = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(8), present=())
    call = helper.make_node("Wrapped", ["X", "W", "R"], ["out"], domain="local", dir="reverse")
    with pytest.raises(ValueError, match="refers to an outer attribute 'dir'"):
        attach_functions(model_of([call], feeds, {"out": (T, 1, N, H)}, functions=[wrapper]))


def test_native_strategy_dispatches(monkeypatch):
    """``strategy="native"`` builds each body with ``onnx_masked_rnn.native.build_native_function``
    (its numbers are tested in tests/test_native*.py)."""
    import importlib

    from onnx_masked_rnn.functions import build_scan_function

    calls = []

    def fake(config, opset, form):
        calls.append((config.attrs.op_type, config.attrs.direction, config.present, opset, form))
        return build_scan_function(config, opset, form)

    monkeypatch.setattr(importlib.import_module("onnx_masked_rnn.inline"), "build_native_function", fake)
    attrs = parse_attributes("MaskedLSTM", direction="bidirectional", hidden_size=H)
    feeds = lstm_inputs(attrs, seed=9)
    inlined = inline(make_model(attrs, feeds, MIN_OPSET), "native")
    assert calls == [("MaskedLSTM", "bidirectional", ("B", "mask"), MIN_OPSET, DEFAULT_SCAN_FORM)]
    assert_standard(inlined)


def test_spec_outputs_are_named():
    """Every op's function names its outputs as the op does (inline binds by position)."""
    for op_type, spec in OP_SPECS.items():
        attrs = parse_attributes(op_type)
        feeds = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(10), present=())
        attached = attach_functions(make_model(attrs, feeds, MIN_OPSET))
        assert tuple(attached.functions[0].output) == spec.outputs


def test_local_functions_with_several_configurations():
    """onnxruntime 1.32 does not resolve overloads for calls inside local functions: one
    configuration per op there keeps its node (default overload); with two, ``attach_functions``
    expands them into the function. Either way the model runs, and attaching is idempotent."""
    a = parse_attributes("MaskedRNN", masked_output="zero")
    b = parse_attributes("MaskedRNN", direction="reverse", activations=["Softplus"])
    feeds = random_inputs(a, T, N, I, H, rng=np.random.default_rng(11), present=("B", "mask"))
    rnn_inputs = ["x", "w", "r", "b", "", "", "m"]

    def wrapper(name, attrs):
        rnn = node(attrs, ["X", "W", "R"], ["y", ""], f"rnn_{name}")
        rnn.input[:] = rnn_inputs
        return helper.make_function(
            "local",
            name,
            ["x", "w", "r", "b", "m"],
            ["y"],
            [rnn],
            [helper.make_opsetid("", MIN_OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        )

    args = ["X", "W", "R", "B", "mask"]
    nodes = [
        helper.make_node("A", args, ["out_a"], domain="local"),
        helper.make_node("B", args, ["out_b"], domain="local"),
        node(b, args, ["out_main", ""], "rnn_main"),  # b in the main graph too
    ]
    expected_a = REFERENCE["MaskedRNN"](**feeds, **a.to_onnx())[0]
    expected_b = REFERENCE["MaskedRNN"](**feeds, **b.to_onnx())[0]
    shapes = {"out_a": expected_a.shape, "out_b": expected_b.shape, "out_main": expected_b.shape}
    crowded = model_of(nodes, feeds, shapes, functions=[wrapper("A", a), wrapper("B", b)])
    both_paths(crowded, feeds, [expected_a, expected_b, expected_b], "local functions, two configurations")
    attached = attach_functions(crowded)
    assert attach_functions(attached).SerializeToString() == attached.SerializeToString()
    user = [f for f in attached.functions if f.domain == "local"]
    assert not [n for f in user for n in f.node if n.domain == DOMAIN]  # expanded
    assert [n.overload for n in attached.graph.node if n.domain == DOMAIN] != [""]

    single = model_of(
        nodes[:1] + nodes[2:],
        feeds,
        {"out_a": shapes["out_a"], "out_main": shapes["out_main"]},
        functions=[wrapper("A", a)],
    )
    both_paths(single, feeds, [expected_a, expected_b], "local function and main graph")
    attached = attach_functions(single)
    (kept,) = [n for f in attached.functions if f.domain == "local" for n in f.node]
    assert (kept.domain, kept.overload) == (DOMAIN, "")  # the node stays, default overload
    assert attach_functions(attached).SerializeToString() == attached.SerializeToString()


@pytest.mark.parametrize("op_type", list(OP_SPECS))
def test_nodes_listing_fewer_outputs(op_type):
    """A node may list only its leading outputs (``[Y]``, ``[Y, Y_h]``) or leave one empty: the
    attached function declares no more outputs than its caller lists, which onnxruntime and the
    full checker require; the two nodes get different overloads."""
    attrs = parse_attributes(op_type, direction="bidirectional")
    feeds = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(5), present=("B", "mask"))
    expected = REFERENCE[op_type](**feeds, **attrs.to_onnx())
    present = ["X", "W", "R", "B", "mask"]
    nodes = [node(attrs, present, ["Y_only"], "only_y"), node(attrs, present, ["", "Y_h_only"], "only_h")]
    model = model_of(nodes, feeds, {"Y_only": expected[0].shape, "Y_h_only": expected[1].shape})
    both_paths(model, feeds, expected[:2], f"{op_type} output subsets")
    attached = attach_functions(model)
    assert sorted(len(f.output) for f in attached.functions) == [1, 2]


def test_native_strategy_takes_hidden_size_from_a_static_R():
    """The native kernels need ``hidden_size``; a node that omits it gets R's last axis when R's
    shape is static, and a clear error naming the attribute and R when it is not."""
    attrs = parse_attributes("MaskedLSTM", direction="reverse")
    feeds = lstm_inputs(attrs)
    expected = REFERENCE["MaskedLSTM"](**feeds, **attrs.to_onnx())
    model = make_model(attrs, feeds)
    assert "hidden_size" not in {a.name for a in model.graph.node[0].attribute}
    inlined = inline(model, "native")
    assert_standard(inlined)
    assert_close("native, hidden_size from R", run(inlined, feeds), expected, **TOLERANCE)
    for dim in model.graph.input[2].type.tensor_type.shape.dim:
        dim.dim_param = "unknown"
    with pytest.raises(ValueError, match=r"hidden_size.*'R'"):
        inline(model, "native")
