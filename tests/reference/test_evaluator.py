"""``onnx.reference.ReferenceEvaluator(model, new_ops=reference.OPS)`` runs a model holding each
op and gives exactly what the numpy functions give, also when optional outputs are omitted."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from oracles import REFERENCE

from onnx_masked_rnn import reference
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.testing import make_model, random_inputs

T, N, I, H = 5, 3, 2, 4
ATTRIBUTES = {
    "MaskedLSTM": {"direction": "bidirectional", "masked_output": "carry", "input_forget": 1, "clip": 0.7},
    "MaskedGRU": {
        "direction": "reverse",
        "masked_output": "zero",
        "linear_before_reset": 1,
        "layout": 1,
        "activations": ["HardSigmoid", "LeakyRelu"],
        # Not float32 numbers: a node holds them as float32, so must the functions, even in float64.
        "activation_alpha": [0.3, 0.05],
    },
    "MaskedRNN": {"direction": "forward", "masked_output": "zero", "activations": ["Relu"], "hidden_size": H},
}


def _case(op_type: str, seed: int = 0) -> tuple[dict, dict[str, np.ndarray]]:
    attributes = ATTRIBUTES[op_type]
    attrs = parse_attributes(op_type, **attributes)
    inputs = random_inputs(
        attrs,
        T,
        N,
        I,
        H,
        rng=np.random.default_rng(seed),
        mask_kind="one_row_masked",
        sequence_lens=[T, 2, T],
    )
    return attributes, inputs


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op_type", OP_SPECS)
def test_evaluator_equals_function(op_type: str, dtype: type) -> None:
    attributes, inputs = _case(op_type)
    inputs = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    model = make_model(parse_attributes(op_type, **attributes), inputs)
    onnx.checker.check_model(model)
    outputs = ReferenceEvaluator(model, new_ops=reference.OPS).run(None, inputs)
    expected = REFERENCE[op_type](**inputs, **attributes)
    assert len(outputs) == len(expected) == len(OP_SPECS[op_type].outputs)
    for got, want in zip(outputs, expected):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op_type, kept", [(o, k) for o, spec in OP_SPECS.items() for k in spec.outputs])
def test_omitted_optional_outputs(op_type: str, kept: str) -> None:
    """A node that names only one output (the others ``""`` or cut off) still runs."""
    spec = OP_SPECS[op_type]
    attributes, inputs = _case(op_type, seed=1)
    model = make_model(parse_attributes(op_type, **attributes), inputs)
    node = model.graph.node[0]
    index = spec.outputs.index(kept)
    del node.output[:]
    node.output.extend([""] * index + [kept])
    kept_info = [o for o in model.graph.output if o.name == kept]
    del model.graph.output[:]
    model.graph.output.extend(kept_info)
    onnx.checker.check_model(model)
    (got,) = ReferenceEvaluator(model, new_ops=reference.OPS).run(None, inputs)
    np.testing.assert_array_equal(got, REFERENCE[op_type](**inputs, **attributes)[index])


def test_an_omitted_output_does_not_become_a_later_omitted_input() -> None:
    """The evaluator stores outputs by name; a node naming only ``Y_h`` (``Y`` is ``""``) must not
    leave a tensor under ``""``, where the next node's omitted inputs are read (fuzz case 62)."""
    attributes, inputs = _case("MaskedGRU", seed=2)
    attrs = parse_attributes("MaskedGRU", **attributes)
    first = make_model(attrs, inputs)
    node = first.graph.node[0]
    del node.output[:]
    node.output.extend(["", "Y_h_first"])
    second = onnx.helper.make_node(
        "MaskedGRU", ["X", "W", "R", "", "", "", "mask"], ["Y", "Y_h"], domain=node.domain, **attrs.to_onnx()
    )
    first.graph.node.append(second)
    del first.graph.output[:]
    first.graph.output.extend(
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in ("Y_h_first", "Y")]
    )
    Y_h_first, Y = ReferenceEvaluator(first, new_ops=reference.OPS).run(None, inputs)
    np.testing.assert_array_equal(Y_h_first, REFERENCE["MaskedGRU"](**inputs, **attributes)[1])
    bare = {k: inputs[k] for k in ("X", "W", "R", "mask")}
    np.testing.assert_array_equal(Y, REFERENCE["MaskedGRU"](**bare, **attributes)[0])
