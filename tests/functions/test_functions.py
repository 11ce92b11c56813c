"""The Scan + Where function bodies against the numpy reference.

For each op, a matrix of cases in which every value of every attribute appears (direction, layout,
masked_output, each activation with non-default alpha/beta, clip, input_forget, linear_before_reset,
each optional input present and absent, float32 and float64, ai.onnx opset 18 and the newest):
onnxruntime on ``attach_functions(model)`` and on ``inline(model, "scan")``, and
``onnx.reference.ReferenceEvaluator`` on the inlined model, must equal the reference. X holds NaN
at every masked step, which must reach no output. The ReferenceEvaluator's Scan refuses Scan's
direction attributes, which the reverse direction uses: for those cases it gets a Scan that
honours them (:class:`onnx_masked_rnn.testing.Scan`).

Tolerances: ``toolkit.BY_DTYPE`` (float32 rtol 1e-4, atol 1e-5; float64 rtol 1e-9, atol 1e-12).
alpha, beta and clip are dyadic, so their float32 attribute encoding is exact in float64 too.
"""

from __future__ import annotations

import functools
import itertools
import zlib
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from oracles import REFERENCE, assert_close
from toolkit import BY_DTYPE, FLOAT16_TOLERANCE, FLOAT64_TOLERANCE, run

from onnx_masked_rnn import DOMAIN, attach_functions, inline
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.attributes import (
    ACTIVATIONS,
    DIRECTIONS,
    MASKED_OUTPUT_MODES,
    OP_SPECS,
    parse_attributes,
)
from onnx_masked_rnn.functions import MIN_OPSET, Configuration, build_scan_function, max_opset
from onnx_masked_rnn.testing import Scan, make_model, random_inputs

T, N, I, H = 5, 3, 4, 6
NEWEST = max_opset()
ALPHAS, BETAS = (0.75, 0.5, 1.25, 0.25), (0.5, 0.25, -0.5, 0.125)
OPTIONAL = ("B", "sequence_lens", "initial_h", "initial_c", "P", "mask")


@dataclass(frozen=True)
class Case:
    op_type: str
    attributes: tuple[tuple[str, object], ...]
    present: frozenset[str]
    dtype: type
    opset: int

    @property
    def id(self) -> str:
        a = dict(self.attributes)
        acts = "-".join(a["activations"])
        extra = "".join(f"-{k}{a[k]}" for k in ("clip", "input_forget", "linear_before_reset") if a.get(k))
        inputs = "+".join(sorted(self.present)) or "none"
        return (
            f"{self.op_type}-{a['direction']}-layout{a['layout']}-{a['masked_output']}-{acts}{extra}"
            f"-{inputs}-{np.dtype(self.dtype).name}-opset{self.opset}"
        )


def make_cases(op_type: str) -> list[Case]:
    """direction x layout x masked_output in full; the other attributes cycle through their values
    at different strides so that each value meets several others."""
    spec = OP_SPECS[op_type]
    names = list(ACTIVATIONS)
    cases = []
    for i, (direction, layout, mode) in enumerate(itertools.product(DIRECTIONS, (0, 1), MASKED_OUTPUT_MODES)):
        D = 2 if direction == "bidirectional" else 1
        activations = [
            names[(5 * i + 3 * k + len(op_type)) % len(names)] for k in range(spec.num_activations * D)
        ]
        takes = [ACTIVATIONS[a] for a in activations]
        alphas = [ALPHAS[(i + k) % 4] for k, t in enumerate(takes) if t[0]]
        betas = [BETAS[(i + k) % 4] for k, t in enumerate(takes) if t[1]]
        attributes = {
            "direction": direction,
            "layout": layout,
            "masked_output": mode,
            "activations": activations,
            "hidden_size": H,
        }
        if alphas:
            attributes["activation_alpha"] = alphas
        if betas:
            attributes["activation_beta"] = betas
        if i % 3 != 1:
            attributes["clip"] = 2.5 if i % 2 else 1.5
        if op_type == "MaskedLSTM":
            attributes["input_forget"] = (i // 2) % 2
        if op_type == "MaskedGRU":
            attributes["linear_before_reset"] = (i // 2) % 2
        present = frozenset(
            name for k, name in enumerate(OPTIONAL) if name in spec.inputs and (i >> (k % 4)) % 2 == k % 2
        )
        cases.append(
            Case(
                op_type,
                tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in attributes.items()),
                present,
                np.float32 if (i // 3) % 2 else np.float64,
                MIN_OPSET if i % 2 else NEWEST,
            )
        )
    return cases


CASES = [case for op_type in OP_SPECS for case in make_cases(op_type)]


def test_cases_cover_every_value():
    """The matrix holds every value of every attribute, every optional input present and absent."""
    seen: dict[str, set] = {}
    for case in CASES:
        for key, value in case.attributes:
            values = value if isinstance(value, tuple) and key == "activations" else (value,)
            seen.setdefault(key, set()).update(values)
        for name in OP_SPECS[case.op_type].inputs[3:]:
            seen.setdefault(f"{case.op_type}.{name}", set()).add(name in case.present)
        seen.setdefault("dtype", set()).add(case.dtype)
        seen.setdefault("opset", set()).add(case.opset)
    assert seen["direction"] == set(DIRECTIONS)
    assert seen["layout"] == {0, 1}
    assert seen["masked_output"] == set(MASKED_OUTPUT_MODES)
    assert seen["activations"] == set(ACTIVATIONS)
    assert {1.5, 2.5} <= seen["clip"]
    assert seen["input_forget"] == seen["linear_before_reset"] == {0, 1}
    assert seen["dtype"] == {np.float32, np.float64}
    assert seen["opset"] == {MIN_OPSET, NEWEST}
    for op_type, spec in OP_SPECS.items():
        for name in spec.inputs[3:]:
            assert seen[f"{op_type}.{name}"] == {True, False}, name
    assert any(c.op_type == "MaskedLSTM" and not dict(c.attributes).get("clip") for c in CASES)


@functools.cache
def prepared(case: Case) -> tuple[onnx.ModelProto, dict[str, np.ndarray], tuple[np.ndarray, ...]]:
    """The one-node model, its inputs (NaN in X at every masked step) and the reference outputs."""
    attrs = parse_attributes(case.op_type, **dict(case.attributes))
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    lens = rng.integers(0, T + 1, size=N) if "sequence_lens" in case.present else None
    inputs = random_inputs(
        attrs, T, N, I, H, rng=rng, dtype=case.dtype, present=sorted(case.present), sequence_lens=lens
    )
    effective = np.ones((T, N), bool)
    if "mask" in inputs:
        effective &= inputs["mask"].T if attrs.layout else inputs["mask"]
    if lens is not None:
        effective &= np.arange(T)[:, None] < lens[None, :]
    x = inputs["X"].transpose(1, 0, 2) if attrs.layout else inputs["X"]
    x[~effective] = np.nan  # a view: writes through to inputs["X"]
    expected = REFERENCE[case.op_type](**inputs, **dict(case.attributes))
    return make_model(attrs, inputs, case.opset), inputs, expected


def check(oracle: str, case: Case, actual, expected) -> None:
    dtype = np.dtype(case.dtype).name
    assert all(np.isfinite(a).all() for a in actual), "a NaN of a masked step reached an output"
    assert_close(f"{oracle} {dtype}", actual, expected, **BY_DTYPE[case.dtype])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_onnxruntime_attached(case):
    model, inputs, expected = prepared(case)
    for form in ("capture", "portable"):
        attached = attach_functions(model, scan_form=form)
        onnx.checker.check_model(attached, full_check=True)
        for optimize in (True, False):
            actual = run(attached, inputs, optimize=optimize)
            check(f"onnxruntime, attach_functions {form} optimize={optimize}", case, actual, expected)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_onnxruntime_inlined(case):
    model, inputs, expected = prepared(case)
    for form in ("capture", "portable"):
        inlined = inline(model, "scan", scan_form=form)
        onnx.checker.check_model(inlined, full_check=True)
        for optimize in (True, False):
            actual = run(inlined, inputs, optimize=optimize)
            check(f"onnxruntime, inline scan {form} optimize={optimize}", case, actual, expected)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reference_evaluator_inlined(case):
    """onnx's ReferenceEvaluator runs the inlined portable body; the reverse direction needs
    testing.Scan."""
    model, inputs, expected = prepared(case)
    reverse = dict(case.attributes)["direction"] != "forward"
    inlined = inline(model, "scan", scan_form="portable")
    evaluator = ReferenceEvaluator(inlined, new_ops=[Scan] if reverse else None)
    check("onnx ReferenceEvaluator, inline scan", case, evaluator.run(None, inputs), expected)


def test_reference_evaluator_scan_lacks_directions():
    """Why the test above extends the ReferenceEvaluator's Scan. (When this fails, onnx gained
    Scan directions and the extension can go.)"""
    attrs = parse_attributes("MaskedRNN", direction="reverse")
    inputs = random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(0), present=())
    with pytest.raises(RuntimeError, match="not implemented for other output input_direction than 0"):
        ReferenceEvaluator(inline(make_model(attrs, inputs, MIN_OPSET))).run(None, inputs)


# --- The function's contract ---------------------------------------------------------------


def _scans(function: onnx.FunctionProto) -> list[onnx.NodeProto]:
    return [n for n in walk_nodes(function.node) if n.op_type == "Scan"]


@pytest.mark.parametrize("op_type", OP_SPECS)
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_function_contract(op_type, direction):
    """Domain, name, full input/output lists, declared attributes, standard ops only at the
    requested opset, no attribute references, one Scan per direction."""
    spec = OP_SPECS[op_type]
    attrs = parse_attributes(op_type, direction=direction, clip=3.0)
    for opset in (MIN_OPSET, NEWEST):
        function = build_scan_function(Configuration.of(attrs, frozenset(spec.inputs[3:])), opset)
        assert (function.domain, function.name) == (DOMAIN, op_type)
        assert tuple(function.input) == spec.inputs
        assert tuple(function.output) == spec.outputs
        assert sorted(function.attribute) == sorted(spec.attribute_names)
        assert [(o.domain, o.version) for o in function.opset_import] == [("", opset)]
        nodes = list(walk_nodes(function.node))
        assert {n.domain for n in nodes} == {""}
        assert not [a for n in nodes for a in n.attribute if a.ref_attr_name]
        assert len(_scans(function)) == (2 if direction == "bidirectional" else 1)
        for node in nodes:
            assert onnx.defs.has(node.op_type), node.op_type


@pytest.mark.parametrize("op_type", OP_SPECS)
def test_portable_scan_bodies(op_type):
    """In the portable form every Scan body reads only its own inputs (no outer-scope value), and
    states the element type and rank of each input and output; every activation, peepholes,
    clip, each dtype and masked_output."""
    spec = OP_SPECS[op_type]
    names = list(ACTIVATIONS)
    per_direction = len(spec.default_activations)
    for k, (mode, dtype) in enumerate(itertools.product(("zero", "carry"), (1, 10, 11))):
        acts = [names[(k + i) % len(names)] for i in range(2 * per_direction)]
        attrs = parse_attributes(
            op_type, direction="bidirectional", activations=acts, clip=2.0, masked_output=mode
        )
        config = Configuration(attrs, tuple(spec.inputs[3:]), len(spec.outputs), dtype)
        scans = _scans(build_scan_function(config, NEWEST, "portable"))
        assert len(scans) == 2
        for scan in scans:
            body = next(a.g for a in scan.attribute if a.name == "body")
            known = {v.name for v in body.input}
            for node in walk_nodes(body.node):
                assert set(filter(None, node.input)) <= known, (node.op_type, list(node.input))
                known.update(node.output)
            for value in (*body.input, *body.output):
                tensor = value.type.tensor_type
                assert tensor.elem_type and tensor.HasField("shape"), value.name


@pytest.mark.parametrize("form", ["portable", "capture"])
@pytest.mark.parametrize(
    ("op_type", "attributes", "matmuls", "weights"),
    [
        ("MaskedLSTM", {}, 2, 2),  # i, o, f (activation f) and c (activation g); R_iof, R_c
        ("MaskedLSTM", {"clip": 1.0, "input_forget": 1}, 2, 2),
        ("MaskedGRU", {"linear_before_reset": 1}, 2, 3),  # z, r (activation f) and h; R_zr, R_h, Rb_h
        ("MaskedGRU", {"linear_before_reset": 0}, 2, 2),
        ("MaskedRNN", {}, 1, 1),
    ],
)
def test_scan_body_is_lean(op_type, attributes, matmuls, weights, form):
    """The step computes H·Rᵀ in one MatMul per activation (so no Split of a product of all
    gates), no transposes, and nothing that does not depend on the state: X·Wᵀ + Wb + Rb is
    computed before the Scan. The only copies are the portable form's pass-through weights: one
    Where per state, and one more for the step's output in "zero" mode (the default)."""
    attrs = parse_attributes(op_type, **attributes)
    config = Configuration.of(attrs, frozenset({"B", "mask"}))
    (scan,) = _scans(build_scan_function(config, MIN_OPSET, form))
    body = next(a.g for a in scan.attribute if a.name == "body")
    ops = [n.op_type for n in walk_nodes(body.node)]
    assert ops.count("MatMul") == matmuls
    assert "Transpose" not in ops and "Gather" not in ops
    assert ops.count("Identity") == (weights if form == "portable" else 0)
    assert ops.count("Where") == (2 if op_type == "MaskedLSTM" else 1) + (attrs.masked_output == "zero")
    assert ops.count("Split") == (0 if op_type == "MaskedRNN" else 1)


def test_reverse_uses_scan_directions():
    attrs = parse_attributes("MaskedRNN", direction="bidirectional")
    forward, backward = _scans(build_scan_function(Configuration.of(attrs, frozenset()), MIN_OPSET))
    directions = {a.name: list(a.ints) for a in backward.attribute if a.name.endswith("directions")}
    assert directions == {"scan_input_directions": [1], "scan_output_directions": [1]}
    directions = {a.name: list(a.ints) for a in forward.attribute if a.name.endswith("directions")}
    assert directions == {"scan_input_directions": [0], "scan_output_directions": [0]}


@pytest.mark.parametrize("opset", [MIN_OPSET - 1, NEWEST + 1])
def test_unsupported_opset_is_refused(opset):
    with pytest.raises(ValueError, match=f"ai.onnx opset {opset} is not supported"):
        build_scan_function(Configuration.of(parse_attributes("MaskedRNN"), frozenset()), opset)


def test_unknown_present_input_is_refused():
    with pytest.raises(ValueError, match="initial_c"):
        build_scan_function(
            Configuration.of(parse_attributes("MaskedGRU"), frozenset({"initial_c"})), MIN_OPSET
        )


@pytest.mark.parametrize("opset", range(MIN_OPSET, NEWEST + 1))
def test_every_opset_runs(opset):
    """The function is built at each ai.onnx opset and onnxruntime runs it there."""
    attrs = parse_attributes("MaskedGRU", direction="bidirectional", activations=["HardSigmoid", "Elu"] * 2)
    rng = np.random.default_rng(opset)
    inputs = random_inputs(attrs, T, N, I, H, rng=rng, dtype=np.float64, present=("B", "mask"))
    model = attach_functions(make_model(attrs, inputs, opset))
    onnx.checker.check_model(model, full_check=True)
    expected = REFERENCE["MaskedGRU"](**inputs, **attrs.to_onnx())
    assert_close(
        "onnxruntime, attach_functions float64",
        run(model, inputs),
        expected,
        **FLOAT64_TOLERANCE,
    )


@pytest.mark.parametrize("op_type", OP_SPECS)
def test_float16(op_type):
    """onnxruntime 1.32's CPU provider has float16 kernels for every op the bodies use. The
    reference computes float16 inputs in float32; the bodies compute in float16 (as ONNX LSTM
    does), hence the tolerance of a few float16 ulps of O(1) values."""
    attrs = parse_attributes(op_type, direction="bidirectional", clip=2.0)
    rng = np.random.default_rng(16)
    inputs = random_inputs(attrs, T, N, I, H, rng=rng, dtype=np.float16, sequence_lens=[T, 2, 0])
    expected = REFERENCE[op_type](**inputs, **attrs.to_onnx())
    model = make_model(attrs, inputs, MIN_OPSET)
    for prepared_model in (attach_functions(model), inline(model)):
        actual = run(prepared_model, inputs)
        assert all(a.dtype == np.float16 for a in actual)
        assert_close("onnxruntime float16", actual, expected, **FLOAT16_TOLERANCE)


@pytest.mark.parametrize(
    "name", ["HardSigmoid", "LeakyRelu", "ThresholdedRelu", "Elu", "Softsign", "Softplus"]
)
def test_onnxruntime_lacks_float64_kernels_of_named_activations(name):
    """Why the bodies decompose these six activations: onnxruntime 1.32 has no float64 kernel for
    them in a model of ai.onnx opset 21 or newer. (When this fails, onnxruntime gained the kernels.)"""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node(name, ["x"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.DOUBLE, [2])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    with pytest.raises(Exception, match="NOT_IMPLEMENTED|Could not find an implementation"):
        run(model, {"x": np.array([0.5, -1.0])})
