"""The numpy reference against onnxruntime's own LSTM, GRU and RNN (CPU, opset 22).

Every attribute onnxruntime supports appears in some case: the three directions, all eleven
activations with ``activation_alpha``/``activation_beta`` given in full, in part or not at all,
``clip``, ``input_forget``, peepholes, ``linear_before_reset``, initial states and ``B`` present or
absent. Each case runs without a mask (the outputs must agree) and with a right-padded mask in
``"zero"`` mode against onnxruntime given the same lengths as ``sequence_lens``; a row of length 0
is where the contract differs from onnxruntime (``Y_h``/``Y_c`` are ``initial_h``/``initial_c`` here,
zeros there). onnxruntime's CPU kernels refuse ``layout=1``, so the reference runs each case in
both layouts and its batch-major outputs, transposed, are compared with onnxruntime's.
onnxruntime has only float32 kernels for these ops (float64 is checked against PyTorch).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracles import REFERENCE, assert_close, batch_major_inputs, time_major_outputs
from toolkit import run

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, attach_functions, inline
from onnx_masked_rnn.attributes import ACTIVATIONS, DIRECTIONS, OP_SPECS, parse_attributes
from onnx_masked_rnn.testing import random_inputs, value_info

OPSET = 22
T, N, I, H = 6, 5, 3, 4
NAMES = sorted(ACTIVATIONS)
# A gate (LSTM/GRU's first activation) multiplies the state: an unbounded one makes the state grow
# super-exponentially, and float32 rounding with it, unless `clip` bounds its argument.
BOUNDED = {"Sigmoid", "HardSigmoid", "Tanh", "ScaledTanh", "Softsign"}
CASES_PER_OP = 12
# Functions whose parameter defaults in onnxruntime's kernels (0) are not the specification's
# (spec/semantics.md section 9 and its note): a case that leaves one of them a default gives
# onnxruntime every parameter explicitly, as the native expansion does.
ONNXRUNTIME_OTHER_DEFAULTS = {"ThresholdedRelu", "Affine", "ScaledTanh"}


def _case(op_type: str, i: int, first_activation: int) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Case ``i`` of ``op_type``: its ONNX attributes and present optional inputs. Attribute values
    rotate with different periods so that every value appears and combinations vary."""
    spec = OP_SPECS[op_type]
    direction = DIRECTIONS[i % 3]
    num_names = spec.num_activations * (2 if direction == "bidirectional" else 1)
    attributes: dict[str, Any] = {"hidden_size": H, "direction": direction}
    if i:  # case 0 keeps the default activations
        names = [NAMES[(first_activation + j) % len(NAMES)] for j in range(num_names)]
        attributes["activations"] = names
        rng = np.random.default_rng(i)
        num_alpha = sum(ACTIVATIONS[n][0] for n in names)
        num_beta = sum(ACTIVATIONS[n][1] for n in names)
        # All parameters given, the first half (the rest take their defaults), or none.
        given = (num_alpha, num_alpha // 2, 0)[i // 3 % 3], (num_beta, num_beta // 2, 0)[i // 3 % 3]
        if given[0]:
            attributes["activation_alpha"] = rng.uniform(0.5, 1.5, given[0]).round(3).tolist()
        if given[1]:
            attributes["activation_beta"] = rng.uniform(0.1, 0.9, given[1]).round(3).tolist()
    gates = attributes.get("activations", ())[:: spec.num_activations] if op_type != "MaskedRNN" else ()
    if i % 4 == 1 or not BOUNDED.issuperset(gates):
        attributes["clip"] = 0.8
    present = ["initial_h", "initial_c"] if i % 4 != 3 else []
    if i % 4 != 2:
        present.append("B")
    if op_type == "MaskedLSTM":
        attributes["input_forget"] = i % 2
        if i % 4 != 0:
            present.append("P")
    if op_type == "MaskedGRU":
        attributes["linear_before_reset"] = i % 2
    return attributes, tuple(present)


def _all_cases() -> list[tuple[str, int, dict[str, Any], tuple[str, ...]]]:
    cases = []
    for op_type in OP_SPECS:
        first = 0
        for i in range(CASES_PER_OP):
            attributes, present = _case(op_type, i, first)
            cases.append((op_type, i, attributes, present))
            first += len(attributes.get("activations", ()))
    return cases


CASES = _all_cases()


def test_every_attribute_value_is_covered() -> None:
    """The rotation above really reaches every activation in every op and every direction."""
    for op_type in OP_SPECS:
        ops = [c for c in CASES if c[0] == op_type]
        names = {n for _, _, a, _ in ops for n in a.get("activations", ())}
        assert names == set(NAMES), (op_type, set(NAMES) - names)
        assert {a["direction"] for _, _, a, _ in ops} == set(DIRECTIONS)
        assert any("activation_alpha" in a for _, _, a, _ in ops)
        assert {"clip" in a for _, _, a, _ in ops} == {True, False}
        for direction in DIRECTIONS:  # each optional input present and absent in every direction
            present = [p for _, _, a, p in ops if a["direction"] == direction]
            for name in set(OP_SPECS[op_type].inputs) & {"B", "initial_h", "initial_c", "P"}:
                assert {name in p for p in present} == {True, False}, (op_type, direction, name)


def one_node_model(
    op_type: str, attributes: dict[str, Any], inputs: dict[str, np.ndarray], *, masked: bool = False
) -> onnx.ModelProto:
    """A model of one node on ``inputs`` (ONNX names; no mask): ``op_type``'s ONNX counterpart
    (LSTM/GRU/RNN-22), or with ``masked`` the masked op itself with the same inputs and attributes."""
    spec = OP_SPECS[op_type]
    names = [n for n in spec.inputs if n != "mask"]
    last = max(names.index(n) for n in inputs)
    node = helper.make_node(
        op_type if masked else spec.onnx_op_type,
        [n if n in inputs else "" for n in names[: last + 1]],
        list(spec.outputs),
        domain=DOMAIN if masked else "",
        **attributes,
    )
    graph = helper.make_graph(
        [node],
        "one_node",
        [value_info(n, v) for n, v in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in spec.outputs],
    )
    opsets = [helper.make_opsetid("", OPSET)]
    if masked:
        opsets.append(helper.make_opsetid(DOMAIN, OPSET_VERSION))
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def run_onnxruntime(op_type: str, attributes: dict[str, Any], inputs: dict[str, np.ndarray]) -> list:
    """onnxruntime's native op for ``op_type`` (layout 0) on ``inputs`` (ONNX names; no mask)."""
    if ONNXRUNTIME_OTHER_DEFAULTS & set(attributes.get("activations", ())):
        explicit = parse_attributes(op_type, **attributes).to_onnx()
        attributes = {**attributes} | {
            k: explicit[k] for k in ("activation_alpha", "activation_beta") if k in explicit
        }
    return run(one_node_model(op_type, attributes, inputs), inputs)


def run_reference_both_layouts(op_type: str, attributes: dict[str, Any], inputs: dict[str, np.ndarray]):
    """The reference on time-major ``inputs`` in layout 0, and in layout 1 on the same inputs
    transposed, with the layout-1 outputs transposed back; both must agree exactly."""
    reference = REFERENCE[op_type]
    time_major = reference(**inputs, **attributes, layout=0)
    batch_major = time_major_outputs(reference(**batch_major_inputs(inputs), **attributes, layout=1))
    for a, b in zip(time_major, batch_major):
        np.testing.assert_array_equal(a, b)
    return time_major


@pytest.mark.parametrize(
    "op_type, i, attributes, present", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]['direction']}" for c in CASES]
)
def test_no_mask(op_type: str, i: int, attributes: dict[str, Any], present: tuple[str, ...]) -> None:
    inputs = random_inputs(
        parse_attributes(op_type, **attributes),
        T,
        N,
        I,
        H,
        rng=np.random.default_rng(100 + i),
        present=present,
    )
    expected = run_onnxruntime(op_type, attributes, inputs)
    actual = run_reference_both_layouts(op_type, attributes, inputs)
    assert_close("onnxruntime float32", actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "op_type, i, attributes, present", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]['direction']}" for c in CASES]
)
def test_right_padded_mask_is_sequence_lens(
    op_type: str, i: int, attributes: dict[str, Any], present: tuple[str, ...]
) -> None:
    rng = np.random.default_rng(200 + i)
    inputs = random_inputs(parse_attributes(op_type, **attributes), T, N, I, H, rng=rng, present=present)
    lengths = rng.integers(0, T + 1, N).astype(np.int32)
    lengths[:2] = 0, T
    mask = np.arange(T)[:, None] < lengths[None, :]
    expected = run_onnxruntime(op_type, attributes, {**inputs, "sequence_lens": lengths})

    masked = run_reference_both_layouts(
        op_type, {**attributes, "masked_output": "zero"}, {**inputs, "mask": mask}
    )
    with_lens = run_reference_both_layouts(
        op_type, {**attributes, "masked_output": "zero"}, {**inputs, "sequence_lens": lengths}
    )
    for a, b in zip(masked, with_lens):
        np.testing.assert_array_equal(a, b)

    # Rows of length 0: the contract keeps the initial state where onnxruntime returns zeros.
    empty = lengths == 0
    for name, ours, theirs in zip(("initial_h", "initial_c"), masked[1:], expected[1:]):
        initial = inputs.get(name, np.zeros_like(ours))
        np.testing.assert_array_equal(ours[:, empty], initial[:, empty])
        np.testing.assert_array_equal(theirs[:, empty], 0)
        theirs[:, empty] = ours[:, empty]
    assert_close("onnxruntime float32", masked, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("activations", [["Tanh", "Tanh"], ["Relu", "Sigmoid"], ["LeakyRelu", "Elu"]])
def test_rnn_takes_the_first_of_two_activations_on_one_direction(direction: str, activations: list) -> None:
    """RNN-22's default ``activations`` is ``["Tanh", "Tanh"]`` even for one direction, and
    onnxruntime's RNN uses the first of two functions there: MaskedRNN accepts every RNN-22
    node and means the same."""
    attributes = {"hidden_size": H, "direction": direction, "activations": activations}
    inputs = random_inputs(
        parse_attributes("MaskedRNN", **attributes), T, N, I, H, rng=np.random.default_rng(3), present=("B",)
    )
    expected = run_onnxruntime("MaskedRNN", attributes, inputs)
    assert_close(
        "onnxruntime float32",
        run_reference_both_layouts("MaskedRNN", attributes, inputs),
        expected,
        rtol=1e-5,
        atol=1e-5,
    )
    single = REFERENCE["MaskedRNN"](**inputs, **{**attributes, "activations": activations[:1]})
    for a, b in zip(REFERENCE["MaskedRNN"](**inputs, **attributes), single):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op_type", list(OP_SPECS))
def test_superset_of_the_onnx_op(op_type: str) -> None:
    """Contract v2's superset property: an LSTM/GRU/RNN-22 node renamed to its masked op, with no
    mask and ``masked_output`` left at its default, computes what onnxruntime's native op computes,
    ``sequence_lens`` included (rows of length >= 1; a length of 0 is the one place ONNX leaves
    open). Checked for the reference and for the node run in onnxruntime through
    ``attach_functions`` and both ``inline`` strategies, on every attribute combination above."""
    for _, i, attributes, present in (c for c in CASES if c[0] == op_type):
        rng = np.random.default_rng(300 + i)
        inputs = random_inputs(parse_attributes(op_type, **attributes), T, N, I, H, rng=rng, present=present)
        lengths = rng.integers(1, T + 1, N).astype(np.int32)
        lengths[0] = T
        inputs["sequence_lens"] = lengths
        expected = run_onnxruntime(op_type, attributes, inputs)
        assert_close(
            "onnxruntime float32 (superset)",
            REFERENCE[op_type](**inputs, **attributes),
            expected,
            rtol=1e-5,
            atol=1e-5,
        )
        model = one_node_model(op_type, attributes, inputs, masked=True)  # the swap
        for path, built in (
            ("attach_functions", attach_functions(model)),
            ("inline scan", inline(model, "scan")),
            ("inline native", inline(model, "native")),
        ):
            assert_close(
                f"onnxruntime float32 (superset, {path})",
                run(built, inputs),
                expected,
                rtol=1e-5,
                atol=1e-5,
            )
