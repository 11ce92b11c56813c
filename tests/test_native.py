"""The native expansion (``onnx_masked_rnn.native``) against the numpy reference, run by onnxruntime.

Every op x direction x layout x ``masked_output`` with every mask kind, optional inputs absent and
present, random attributes (activations with alpha/beta, clip, input_forget, linear_before_reset),
NaN at masked steps, symbolic shapes, and the same through ``inline(model, "native")``. float32 and
float16: onnxruntime has no float64 kernel for LSTM/GRU/RNN (checked by a strict xfail below, so
the day it gains one this file must be extended). Also a smoke test of ``bench --quick`` (the
JSON's structure, not timings).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import toolkit
from oracles import REFERENCE, assert_close
from toolkit import NATIVE_TOLERANCE

from onnx_masked_rnn import testing
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.attributes import ACTIVATIONS, MASKED_OUTPUT_MODES, OP_SPECS, parse_attributes
from onnx_masked_rnn.functions import Configuration
from onnx_masked_rnn.native import build_native_function

OPS = tuple(OP_SPECS)
DIRECTIONS = ("forward", "reverse", "bidirectional")
MODES = MASKED_OUTPUT_MODES
NEWEST_OPSET = onnx.defs.onnx_opset_version()


def _native_model(attrs, inputs: dict[str, np.ndarray], opset: int = 21) -> onnx.ModelProto:
    """The one-node model with the native expansion attached as its model-local function."""
    present = frozenset(inputs) - {"X", "W", "R"}
    model = testing.make_model(
        attrs,
        inputs,
        opset,
        [
            build_native_function(
                Configuration.of(attrs, present, onnx.helper.np_dtype_to_tensor_dtype(inputs["X"].dtype)),
                opset,
            )
        ],
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def _check(session: ort.InferenceSession, attrs, inputs: dict[str, np.ndarray], label: str) -> None:
    expected = REFERENCE[attrs.op_type](**inputs, **attrs.to_onnx())
    actual = session.run(None, inputs)
    try:
        assert not any(np.isnan(a).any() for a in actual), "NaN in an output"
        assert_close("native expansion", actual, expected, **NATIVE_TOLERANCE)
    except AssertionError as error:
        raise AssertionError(f"{label}: {error}") from None


def _masked_x_to_nan(attrs, inputs: dict[str, np.ndarray]) -> None:
    """Put NaN in X at every step the effective mask drops: it must reach no output."""
    x = inputs["X"].transpose(1, 0, 2) if attrs.layout else inputs["X"]  # a view: writes go through
    T, N = x.shape[:2]
    m = inputs["mask"].T if attrs.layout and "mask" in inputs else inputs.get("mask", np.ones((T, N), bool))
    if "sequence_lens" in inputs:
        m = m & (np.arange(T)[:, None] < inputs["sequence_lens"][None, :])
    x[~m] = np.nan


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op_type", OPS)
def test_every_mask_kind(op_type: str, direction: str, mode: str, layout: int) -> None:
    """All optional inputs present, sequence_lens included (0 and T among them), every mask kind,
    NaN at the masked steps."""
    attrs = parse_attributes(op_type, hidden_size=4, direction=direction, masked_output=mode, layout=layout)
    rng = np.random.default_rng([OPS.index(op_type), DIRECTIONS.index(direction), MODES.index(mode), layout])
    T, N = 7, 5
    everything = ("B", "initial_h", "initial_c", "P", "mask")
    session = None
    for kind in testing.MASK_KINDS:
        lengths = np.concatenate([[0, T], rng.integers(0, T + 1, size=N - 2)])
        inputs = testing.random_inputs(
            attrs, T, N, 3, 4, rng=rng, present=everything, mask_kind=kind, sequence_lens=lengths
        )
        _masked_x_to_nan(attrs, inputs)
        session = session or toolkit.session(_native_model(attrs, inputs))
        _check(session, attrs, inputs, f"{kind} mask")


OPTIONAL_SUBSETS = ((), ("mask",), ("sequence_lens",), ("initial_h", "mask"), ("B", "P", "sequence_lens"))


@pytest.mark.parametrize("present", OPTIONAL_SUBSETS, ids="+".join)
@pytest.mark.parametrize("op_type", OPS)
def test_optional_inputs(op_type: str, present: tuple[str, ...]) -> None:
    """Absent optional inputs, including neither mask nor sequence_lens (the native op alone)."""
    rng = np.random.default_rng([OPS.index(op_type), OPTIONAL_SUBSETS.index(present)])
    T, N = 6, 4
    for direction, layout, mode in itertools.product(DIRECTIONS, (0, 1), MODES):
        attrs = parse_attributes(
            op_type, hidden_size=3, direction=direction, masked_output=mode, layout=layout
        )
        lengths = rng.integers(0, T + 1, size=N) if "sequence_lens" in present else None
        inputs = testing.random_inputs(
            attrs, T, N, 2, 3, rng=rng, present=present, mask_kind="one_row_masked", sequence_lens=lengths
        )
        _check(
            toolkit.session(_native_model(attrs, inputs)),
            attrs,
            inputs,
            f"{direction} layout={layout} {mode}",
        )


def _random_attributes(rng: np.random.Generator) -> dict:
    op_type = str(rng.choice(OPS))
    spec = OP_SPECS[op_type]
    direction = str(rng.choice(DIRECTIONS))
    attributes = {
        "hidden_size": int(rng.integers(1, 6)),
        "direction": direction,
        "layout": int(rng.integers(2)),
        "masked_output": str(rng.choice(MODES)),
    }
    if rng.random() < 0.6:
        # LSTM/GRU gates take a bounded function: an unbounded gate (Softplus, Relu, ...) grows the
        # state geometrically, and onnxruntime's Softplus, log(1 + exp(x)), overflows past x = 88.
        bounded = ["Sigmoid", "HardSigmoid", "Tanh", "Softsign", "ScaledTanh"]
        names = [
            str(rng.choice(bounded if i == 0 and op_type != "MaskedRNN" else sorted(ACTIVATIONS)))
            for _ in range(1 + (direction == "bidirectional"))
            for i in range(spec.num_activations)
        ]
        attributes["activations"] = names
        alphas = sum(ACTIVATIONS[n][0] for n in names)
        betas = sum(ACTIVATIONS[n][1] for n in names)
        if alphas:
            attributes["activation_alpha"] = rng.uniform(0.1, 0.9, alphas).tolist()
        if betas:
            attributes["activation_beta"] = rng.uniform(0.1, 0.9, betas).tolist()
    if rng.random() < 0.3:
        attributes["clip"] = float(rng.uniform(0.5, 3))
    if op_type == "MaskedLSTM":
        attributes["input_forget"] = int(rng.integers(2))
    if op_type == "MaskedGRU":
        attributes["linear_before_reset"] = int(rng.integers(2))
    return {"op_type": op_type, **attributes}


@pytest.mark.parametrize("seed", range(100))
def test_random_attributes(seed: int) -> None:
    """Random attributes, shapes (T and N down to 1), optional inputs, mask kind and opset."""
    rng = np.random.default_rng(1000 + seed)
    attributes = _random_attributes(rng)
    attrs = parse_attributes(**attributes)
    T, N, I = (int(v) for v in rng.integers(1, [9, 5, 4]))
    present = [name for name in ("B", "initial_h", "initial_c", "P", "mask") if rng.random() < 0.6]
    lengths = rng.integers(0, T + 1, size=N) if rng.random() < 0.4 else None
    kind = str(rng.choice(testing.MASK_KINDS))
    inputs = testing.random_inputs(
        attrs, T, N, I, attrs.hidden_size, rng=rng, present=present, mask_kind=kind, sequence_lens=lengths
    )
    _masked_x_to_nan(attrs, inputs)
    opset = int(rng.choice([18, 21, NEWEST_OPSET]))
    _check(
        toolkit.session(_native_model(attrs, inputs, opset)),
        attrs,
        inputs,
        f"{attributes} {kind} opset {opset}",
    )


@pytest.mark.parametrize("layout", [0, 1])
def test_symbolic_dims(layout: int) -> None:
    """One session, symbolic seq_length and batch_size, two different shapes."""
    attrs = parse_attributes("MaskedGRU", hidden_size=4, direction="bidirectional", layout=layout)
    rng = np.random.default_rng(layout)
    inputs = testing.random_inputs(attrs, 5, 3, 2, 4, rng=rng, sequence_lens=np.array([5, 2, 0]))
    model = _native_model(attrs, inputs)
    for value in [*model.graph.input, *model.graph.output]:
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            dim.dim_param = f"{value.name}_{axis}"
    session = toolkit.session(model)
    for T, N in ((5, 3), (9, 6)):
        inputs = testing.random_inputs(attrs, T, N, 2, 4, rng=rng, sequence_lens=np.arange(N) % (T + 1))
        _check(session, attrs, inputs, f"T={T} N={N}")


@pytest.mark.parametrize("op_type", OPS)
def test_through_inline(op_type: str) -> None:
    """``inline(model, "native")`` leaves standard ops only and gives the reference's numbers."""
    from onnx_masked_rnn.inline import inline

    rng = np.random.default_rng(OPS.index(op_type))
    for direction, layout in itertools.product(DIRECTIONS, (0, 1)):
        attrs = parse_attributes(op_type, hidden_size=4, direction=direction, layout=layout)
        inputs = testing.random_inputs(attrs, 6, 3, 2, 4, rng=rng, mask_kind="holes")
        inlined = inline(testing.make_model(attrs, inputs), "native")
        onnx.checker.check_model(inlined, full_check=True)
        op_types = {(node.domain, node.op_type) for node in walk_nodes(inlined.graph.node)}
        assert ("", OP_SPECS[op_type].onnx_op_type) in op_types
        assert all(domain in ("", "ai.onnx") for domain, _ in op_types), op_types
        _check(toolkit.session(inlined), attrs, inputs, f"inline {direction} layout={layout}")


def test_function_contract() -> None:
    """Full input/output lists, every attribute declared, no attribute references, ai.onnx only; no
    mask and no sequence_lens: the native op alone."""
    attrs = parse_attributes("MaskedGRU", hidden_size=3, layout=1, masked_output="carry")
    function = build_native_function(Configuration.of(attrs, frozenset({"B", "mask"})), 18)
    spec = OP_SPECS["MaskedGRU"]
    assert (function.domain, function.name) == ("io.onnx_masked_rnn", "MaskedGRU")
    assert tuple(function.input) == spec.inputs
    assert tuple(function.output) == spec.outputs
    assert sorted(function.attribute) == sorted(spec.attribute_names)
    assert [(o.domain, o.version) for o in function.opset_import] == [("", 18)]
    assert all(node.domain == "" for node in function.node)
    assert not any(a.ref_attr_name for node in function.node for a in node.attribute)
    plain = build_native_function(
        Configuration.of(parse_attributes("MaskedLSTM", hidden_size=3), frozenset({"B"})), 21
    )
    (choice,) = [n for n in plain.node if n.op_type == "If"]
    branches = {a.name: [n.op_type for n in a.g.node if n.op_type != "Constant"] for a in choice.attribute}
    assert branches["else_branch"] == ["LSTM", "Identity", "Identity", "Identity"]
    assert "LSTM" not in branches["then_branch"]  # nothing to process: no native op


def test_errors_name_the_problem() -> None:
    attrs = parse_attributes("MaskedLSTM", hidden_size=3)
    with pytest.raises(ValueError, match="hidden_size"):
        build_native_function(Configuration.of(parse_attributes("MaskedLSTM"), frozenset()), 21)
    with pytest.raises(ValueError, match="initial_c"):
        build_native_function(
            Configuration.of(parse_attributes("MaskedGRU", hidden_size=3), frozenset({"initial_c"})), 21
        )
    with pytest.raises(ValueError, match="opset"):
        build_native_function(Configuration.of(attrs, frozenset()), 17)


@pytest.mark.parametrize("op_type", OPS)
def test_float16(op_type: str) -> None:
    """float16 in and out (onnxruntime computes in float32, as the reference does)."""
    rng = np.random.default_rng(OPS.index(op_type))
    for direction, mode in itertools.product(DIRECTIONS, MODES):
        attrs = parse_attributes(op_type, hidden_size=3, direction=direction, masked_output=mode)
        inputs = testing.random_inputs(
            attrs, 6, 3, 2, 3, rng=rng, dtype=np.float16, mask_kind="one_row_masked"
        )
        expected = REFERENCE[op_type](**inputs, **attrs.to_onnx())
        actual = toolkit.session(_native_model(attrs, inputs)).run(None, inputs)
        assert [a.dtype for a in actual] == [np.float16] * len(expected)
        assert_close("native expansion, float16", actual, expected, rtol=1e-3, atol=1e-3)


@pytest.mark.xfail(
    strict=True, reason="onnxruntime has no float64 LSTM kernel ('does not support double yet')"
)
def test_float64_runs_in_onnxruntime() -> None:
    attrs = parse_attributes("MaskedLSTM", hidden_size=3)
    inputs = testing.random_inputs(attrs, 4, 2, 2, 3, rng=np.random.default_rng(0), dtype=np.float64)
    _check(toolkit.session(_native_model(attrs, inputs)), attrs, inputs, "float64")


def test_bench_quick(tmp_path) -> None:
    """``onnx-masked-rnn bench --quick`` runs every variant, checks each against the reference and
    writes the JSON it promises (structure only: no timing is asserted)."""
    from onnx_masked_rnn.bench import GEMM_FLOOR, VARIANTS
    from onnx_masked_rnn.cli import main

    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--json", str(path), "--plot", str(tmp_path / "bench.png")]) == 0
    report = json.loads(path.read_text())
    header = {"kind", "date_utc", "command", "machine", "versions"}
    assert header | {"config", "results", "memory"} <= set(report)
    assert report["kind"] == "bench" and report["machine"]["load_average_after"] is not None
    for rows, variants in (
        (report["results"], VARIANTS),
        (report["memory"], [v for v in VARIANTS if v != GEMM_FLOOR]),  # a computed floor: no memory
    ):
        keys = {row["key"] for row in rows}
        assert keys and {(k, v) for k in keys for v in variants} == {(r["key"], r["variant"]) for r in rows}
        assert not [row for row in rows if row.get("error")]
    for row in report["results"]:
        assert (
            row["median_ms"] > 0 and row["ratio"] > 0 and len(row["times_ms"]) == report["config"]["repeat"]
        )
        if row["max_abs_diff"] is not None:  # every variant but the floor on a masked case
            assert row["max_abs_diff"] < 1e-5, row
        if row["variant"] == "native op":
            assert row["ratio"] == 1.0
        if row["variant"] == "kernel":
            assert row["ratio_to_gemm_floor"] > 0 and len(row["ratio_quartiles"]) == 2
    assert all(row["peak_mb"] >= 0 for row in report["memory"])
    try:
        import matplotlib  # noqa: F401
    except ImportError:  # the plot is optional (the 'bench' extra): bench says so and goes on
        assert not (tmp_path / "bench.png").exists()
    else:
        assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("activations", "alpha", "beta", "rnn_nodes"),
    [
        (["Tanh", "LeakyRelu"], [0.25], None, 1),
        (["Affine", "Relu"], [0.5], [0.125], 1),
        (["Elu", "Affine"], [2.0, 0.5], [1.0], 1),  # both take alpha, only Affine beta
        (["Elu", "LeakyRelu"], [2.0, 0.5], None, 1),
    ],
)
@pytest.mark.parametrize("layout", [0, 1])
def test_rnn_parameters_of_one_direction(activations, alpha, beta, rnn_nodes, layout) -> None:
    """A bidirectional RNN where only one direction's activation takes alpha (or beta): the
    specification gives it the first value, and one bidirectional RNN with the explicit lists
    computes that in onnxruntime 1.32 (its RNN kernel consumes the lists in order, like its LSTM
    and GRU; an earlier reading of value ``d`` for direction ``d`` would fail here)."""
    attrs = parse_attributes(
        "MaskedRNN",
        hidden_size=4,
        direction="bidirectional",
        layout=layout,
        activations=activations,
        activation_alpha=alpha,
        activation_beta=beta,
    )
    rng = np.random.default_rng(7)
    inputs = testing.random_inputs(attrs, 5, 3, 2, 4, rng=rng, present=("B", "initial_h", "mask"))
    model = _native_model(attrs, inputs)
    _check(toolkit.session(model), attrs, inputs, "native expansion, RNN parameters per direction")
    assert sum(node.op_type == "RNN" for node in walk_nodes(model.functions[0].node)) == rnn_nodes
