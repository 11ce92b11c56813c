"""The registered OpSchemas: checker, type and shape inference, rejections, idempotency.

Expected output shapes come from the shape formulas written out here and, where ONNX's own
LSTM/GRU/RNN inference applies (no mask), from onnx itself.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, register_schemas
from onnx_masked_rnn.attributes import DIRECTIONS, OP_SPECS, parse_attributes
from onnx_masked_rnn.schemas import ONNX_BASE_VERSION
from onnx_masked_rnn.testing import make_node

OPS = tuple(OP_SPECS)
T, N, I, H = 5, 3, 4, 6


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    register_schemas()


def shapes_for(op_type: str, direction: str, layout: int, T=T, N=N, I=I, H=H) -> dict[str, tuple]:
    """Consistent input shapes for every input of the op (dims may be symbolic strings)."""
    spec = OP_SPECS[op_type]
    D, G = (2 if direction == "bidirectional" else 1), spec.num_gates
    gh = G * H if isinstance(H, int) else None
    state = (N, D, H) if layout else (D, N, H)
    all_shapes = {
        "X": (N, T, I) if layout else (T, N, I),
        "W": (D, gh, I),
        "R": (D, gh, H),
        "B": (D, 2 * gh if gh else None),
        "sequence_lens": (N,),
        "initial_h": state,
        "initial_c": state,
        "P": (D, 3 * H if isinstance(H, int) else None),
        "mask": (N, T) if layout else (T, N),
    }
    return {name: all_shapes[name] for name in spec.inputs}


def expected_outputs(op_type: str, direction: str, layout: int, T=T, N=N, H=H) -> list[tuple]:
    D = 2 if direction == "bidirectional" else 1
    state = (N, D, H) if layout else (D, N, H)
    Y = (N, T, D, H) if layout else (T, D, N, H)
    return [Y, state, state][: len(OP_SPECS[op_type].outputs)]


def elem_type_of(name: str, float_type: int) -> int:
    return {"sequence_lens": TensorProto.INT32, "mask": TensorProto.BOOL}.get(name, float_type)


def build_model(
    op_type: str,
    shapes: dict[str, tuple | None],
    *,
    float_type: int = TensorProto.FLOAT,
    types: dict[str, int] | None = None,
    outputs: tuple[str, ...] | None = None,
    initializers: tuple[TensorProto, ...] = (),
    **attributes,
) -> onnx.ModelProto:
    """One masked node reading graph inputs ``shapes`` (``None``: rank unknown); graph outputs
    declare only their rank, so their shapes come from inference."""
    attrs = parse_attributes(op_type, **attributes)
    spec = attrs.spec
    node = make_node(attrs, list(shapes))
    if outputs is not None:
        del node.output[:]
        node.output.extend(outputs)
    types = types or {}

    def value_info(name: str, shape: tuple | None, default_type: int) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, types.get(name, default_type), shape)

    ranks = {"Y": 4, "Y_h": 3, "Y_c": 3}
    graph = helper.make_graph(
        [node],
        "g",
        [value_info(n, s, elem_type_of(n, float_type)) for n, s in shapes.items()],
        [value_info(o, (None,) * ranks[o], float_type) for o in node.output if o],
        initializer=list(initializers),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        ir_version=10,
    )
    assert spec.op_type == op_type
    return model


def inferred_outputs(model: onnx.ModelProto) -> dict[str, tuple[int, tuple]]:
    """Run strict shape inference; return each graph output's (elem_type, dims)."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    out = {}
    for vi in inferred.graph.output:
        dims = tuple(
            d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
            for d in vi.type.tensor_type.shape.dim
        )
        out[vi.name] = (vi.type.tensor_type.elem_type, dims)
    return out


@pytest.mark.parametrize(("op_type", "direction", "layout"), list(itertools.product(OPS, DIRECTIONS, (0, 1))))
def test_static_shapes_every_input_present(op_type: str, direction: str, layout: int) -> None:
    model = build_model(
        op_type, shapes_for(op_type, direction, layout), direction=direction, layout=layout, hidden_size=H
    )
    onnx.checker.check_model(model, full_check=True)
    got = inferred_outputs(model)
    want = expected_outputs(op_type, direction, layout)
    assert [got[o] for o in OP_SPECS[op_type].outputs] == [(TensorProto.FLOAT, s) for s in want]


@pytest.mark.parametrize(("op_type", "direction", "layout"), list(itertools.product(OPS, DIRECTIONS, (0, 1))))
def test_symbolic_dims_carried_through(op_type: str, direction: str, layout: int) -> None:
    # hidden_size absent: read from R; seq_length and batch_size symbolic; input_size unknown.
    shapes = shapes_for(op_type, direction, layout, T="seq", N="batch", I=None)
    model = build_model(op_type, shapes, float_type=TensorProto.DOUBLE, direction=direction, layout=layout)
    onnx.checker.check_model(model, full_check=True)
    got = inferred_outputs(model)
    want = expected_outputs(op_type, direction, layout, T="seq", N="batch")
    assert [got[o] for o in OP_SPECS[op_type].outputs] == [(TensorProto.DOUBLE, s) for s in want]


@pytest.mark.parametrize("op_type", OPS)
def test_hidden_size_from_attribute_when_weights_unranked(op_type: str) -> None:
    shapes = {"X": ("seq", "batch", I), "W": None, "R": None, "mask": ("seq", "batch")}
    model = build_model(op_type, shapes, float_type=TensorProto.FLOAT16, hidden_size=H, direction="reverse")
    got = inferred_outputs(model)
    assert got["Y"] == (TensorProto.FLOAT16, ("seq", 1, "batch", H))
    assert got["Y_h"] == (TensorProto.FLOAT16, (1, "batch", H))


@pytest.mark.parametrize(("op_type", "direction", "layout"), list(itertools.product(OPS, DIRECTIONS, (0, 1))))
def test_agrees_with_onnx_inference_for_the_unmasked_op(op_type: str, direction: str, layout: int) -> None:
    """Without mask, the output shapes equal those onnx infers for LSTM/GRU/RNN-22 itself."""
    shapes = shapes_for(op_type, direction, layout, T="seq", N=2)
    shapes.pop("mask")
    masked = build_model(op_type, shapes, direction=direction, layout=layout, hidden_size=H)
    plain = onnx.ModelProto()
    plain.CopyFrom(masked)
    node = plain.graph.node[0]
    node.op_type, node.domain = OP_SPECS[op_type].onnx_op_type, ""
    node.attribute.remove(next(a for a in node.attribute if a.name == "masked_output"))
    plain.opset_import[0].version = ONNX_BASE_VERSION
    assert inferred_outputs(masked) == inferred_outputs(plain)


@pytest.mark.parametrize("op_type", OPS)
@pytest.mark.parametrize("kept", [("Y",), ("", "Y_h"), ("Y", "")])
def test_optional_outputs_omitted(op_type: str, kept: tuple[str, ...]) -> None:
    model = build_model(op_type, shapes_for(op_type, "forward", 0), outputs=kept)
    onnx.checker.check_model(model, full_check=True)
    got = inferred_outputs(model)
    want = dict(zip(OP_SPECS[op_type].outputs, expected_outputs(op_type, "forward", 0)))
    assert got == {o: (TensorProto.FLOAT, want[o]) for o in kept if o}


def test_optional_inputs_omitted_in_the_middle() -> None:
    shapes = shapes_for("MaskedLSTM", "forward", 0)
    shapes = {n: shapes[n] for n in ("X", "W", "R", "mask")}  # B .. P become ""
    model = build_model("MaskedLSTM", shapes)
    assert list(model.graph.node[0].input) == ["X", "W", "R", "", "", "", "", "", "mask"]
    onnx.checker.check_model(model, full_check=True)
    assert inferred_outputs(model)["Y_c"] == (TensorProto.FLOAT, (1, N, H))


def _with(op_type: str, direction: str = "forward", layout: int = 0, **changes) -> dict[str, tuple]:
    shapes = shapes_for(op_type, direction, layout)
    shapes.update(changes)
    return shapes


# (op_type, input shapes, attributes, element-type overrides, the input the message must name)
REJECTIONS = [
    ("MaskedLSTM", _with("MaskedLSTM", X=(T, N)), {}, {}, "'X'"),
    ("MaskedGRU", _with("MaskedGRU", W=(1, 3 * H, I + 1)), {}, {}, "'W'"),
    ("MaskedRNN", _with("MaskedRNN", W=(1, H + 1, I)), {}, {}, "'W'"),
    ("MaskedLSTM", _with("MaskedLSTM", R=(1, 4 * H, H + 1)), {"hidden_size": H}, {}, "'R'"),
    ("MaskedGRU", _with("MaskedGRU", R=(1, 3 * H)), {}, {}, "'R'"),
    ("MaskedLSTM", _with("MaskedLSTM", B=(1, 4 * H)), {}, {}, "'B'"),
    ("MaskedRNN", _with("MaskedRNN", initial_h=(1, N + 1, H)), {}, {}, "'initial_h'"),
    ("MaskedLSTM", _with("MaskedLSTM", layout=1, initial_c=(1, N, H)), {"layout": 1}, {}, "'initial_c'"),
    ("MaskedLSTM", _with("MaskedLSTM", P=(1, 4 * H)), {}, {}, "'P'"),
    ("MaskedGRU", _with("MaskedGRU", sequence_lens=(N + 1,)), {}, {}, "'sequence_lens'"),
    ("MaskedRNN", _with("MaskedRNN", mask=(T + 1, N)), {}, {}, "'mask'"),
    ("MaskedLSTM", _with("MaskedLSTM", mask=(N,)), {}, {}, "'mask'"),
    # layout 1 wants [batch_size, seq_length]; a time-major mask is wrong there.
    ("MaskedGRU", _with("MaskedGRU", layout=1, mask=(T, N)), {"layout": 1}, {}, "'mask'"),
    # bidirectional needs num_directions = 2 on W (R is right, so W is the one named).
    (
        "MaskedLSTM",
        _with("MaskedLSTM", "bidirectional", W=(1, 4 * H, I)),
        {"direction": "bidirectional"},
        {},
        "'W'",
    ),
    (
        "MaskedRNN",
        _with("MaskedRNN", "bidirectional", R=(1, H, H)),
        {"direction": "bidirectional"},
        {},
        "'R'",
    ),
    ("MaskedGRU", _with("MaskedGRU"), {"hidden_size": H + 1}, {}, "'R'"),
    ("MaskedLSTM", _with("MaskedLSTM"), {}, {"mask": TensorProto.FLOAT}, "'mask'"),
    ("MaskedRNN", _with("MaskedRNN"), {}, {"mask": TensorProto.INT32}, "'mask'"),
    ("MaskedGRU", _with("MaskedGRU"), {}, {"sequence_lens": TensorProto.INT64}, "'sequence_lens'"),
    ("MaskedLSTM", _with("MaskedLSTM"), {}, {"R": TensorProto.DOUBLE}, "'R'"),
    ("MaskedLSTM", _with("MaskedLSTM"), {}, {"X": TensorProto.INT32}, "'X'"),
    ("MaskedRNN", _with("MaskedRNN"), {"masked_output": "last"}, {}, "'masked_output'"),
    ("MaskedGRU", _with("MaskedGRU"), {"activations": ["Sigmoid"]}, {}, "'activations'"),
    ("MaskedLSTM", _with("MaskedLSTM"), {"direction": "both"}, {}, "'direction'"),
]


@pytest.mark.parametrize(
    ("op_type", "shapes", "attributes", "types", "named"),
    REJECTIONS,
    ids=[f"{r[0]}-{r[4].strip(chr(39))}-{i}" for i, r in enumerate(REJECTIONS)],
)
def test_rejects_inconsistent_node(op_type, shapes, attributes, types, named) -> None:
    model = build_node_model_unvalidated(op_type, shapes, attributes, types)
    with pytest.raises(onnx.shape_inference.InferenceError, match=named) as info:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    assert isinstance(info.value, ValueError)
    assert op_type in str(info.value)


def build_node_model_unvalidated(op_type, shapes, attributes, types) -> onnx.ModelProto:
    """``build_model``; attributes our parser rejects are written onto the node as given."""
    try:
        parse_attributes(op_type, **attributes)
    except ValueError:
        model = build_model(op_type, shapes, types=types)
        node = model.graph.node[0]
        for name, value in attributes.items():
            for existing in [a for a in node.attribute if a.name == name]:
                node.attribute.remove(existing)
            node.attribute.append(helper.make_attribute(name, value))
        return model
    return build_model(op_type, shapes, types=types, **attributes)


def test_checker_rejects_a_float_mask_naming_it() -> None:
    model = build_model("MaskedGRU", shapes_for("MaskedGRU", "forward", 0), types={"mask": TensorProto.FLOAT})
    with pytest.raises((onnx.checker.ValidationError, onnx.shape_inference.InferenceError), match="mask"):
        onnx.checker.check_model(model, full_check=True)


def test_constant_sequence_lens_out_of_range() -> None:
    lens = onnx.numpy_helper.from_array(np.array([T, T + 1, 0], np.int32), "sequence_lens")
    shapes = shapes_for("MaskedLSTM", "forward", 0)
    model = build_model("MaskedLSTM", shapes, initializers=(lens,))
    with pytest.raises(onnx.shape_inference.InferenceError, match=r"'sequence_lens'.*\[5, 6, 0\]"):
        onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    lens.CopyFrom(onnx.numpy_helper.from_array(np.array([T, 1, 0], np.int32), "sequence_lens"))
    model.graph.initializer[0].CopyFrom(lens)
    assert inferred_outputs(model)["Y"][1] == (T, 1, N, H)


def test_register_is_idempotent_and_replaces() -> None:
    register_schemas()
    register_schemas()
    for op_type, spec in OP_SPECS.items():
        schema = onnx.defs.get_schema(op_type, OPSET_VERSION, DOMAIN)
        assert schema.since_version == OPSET_VERSION and schema.has_type_and_shape_inference_function
        assert [p.name for p in schema.inputs] == list(spec.inputs)
    model = build_model("MaskedRNN", shapes_for("MaskedRNN", "reverse", 1), direction="reverse", layout=1)
    assert inferred_outputs(model)["Y"] == (TensorProto.FLOAT, (N, T, 1, H))


@pytest.mark.parametrize("op_type", OPS)
def test_schema_is_a_superset_of_the_onnx_op(op_type: str) -> None:
    spec = OP_SPECS[op_type]
    ours = onnx.defs.get_schema(op_type, OPSET_VERSION, DOMAIN)
    base = onnx.defs.get_schema(spec.onnx_op_type, ONNX_BASE_VERSION, "")

    def params(schema_params):
        return [(p.name, p.type_str, p.option) for p in schema_params]

    assert params(ours.inputs) == params(base.inputs) + [
        ("mask", "T2", onnx.defs.OpSchema.FormalParameterOption.Optional)
    ]
    assert params(ours.outputs) == params(base.outputs)
    constraints = {c.type_param_str: list(c.allowed_type_strs) for c in ours.type_constraints}
    assert constraints == {c.type_param_str: list(c.allowed_type_strs) for c in base.type_constraints} | {
        "T2": ["tensor(bool)"]
    }
    assert set(ours.attributes) == set(base.attributes) | {"masked_output"} == set(spec.attribute_names)
    for name, attr in base.attributes.items():
        mine = ours.attributes[name]
        assert (mine.type, mine.required) == (attr.type, attr.required), name
        assert mine.default_value == attr.default_value, name
    default = ours.attributes["masked_output"].default_value
    assert helper.get_attribute_value(default) == b"zero"


def _in_if_branch(shapes: dict[str, tuple]) -> onnx.ModelProto:
    """The masked GRU node in the then-branch of an If, reading X, W, R, ... from the outer scope."""
    inner = build_model("MaskedGRU", shapes, direction="bidirectional")
    branch = helper.make_graph(
        list(inner.graph.node), "then", [], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["Y_else"], ["Y2"])],
        "else",
        [],
        [helper.make_tensor_value_info("Y2", TensorProto.FLOAT, None)],
    )
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y_else = helper.make_tensor_value_info("Y_else", TensorProto.FLOAT, (T, 2, N, H))
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["out"], then_branch=branch, else_branch=other)],
        "outer",
        [cond, y_else, *inner.graph.input],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, (None,) * 4)],
    )
    return helper.make_model(graph, opset_imports=inner.opset_import, ir_version=10)


def test_node_inside_an_if_branch_reads_outer_scope_shapes() -> None:
    """Inference runs where tf2onnx's LSTM rewriter fails: in a branch, weights from outside."""
    model = _in_if_branch(shapes_for("MaskedGRU", "bidirectional", 0))
    onnx.checker.check_model(model, full_check=True)
    assert inferred_outputs(model)["out"] == (TensorProto.FLOAT, (T, 2, N, H))
    bad = _in_if_branch(_with("MaskedGRU", "bidirectional", W=(2, 3 * H, I + 1)))
    with pytest.raises(onnx.shape_inference.InferenceError, match="'W'"):
        onnx.shape_inference.infer_shapes(bad, strict_mode=True)
