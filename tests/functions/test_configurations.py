"""Two nodes of one op in one model that differ in a single detail (which optional inputs are
present, an activation's ``beta`` or ``alpha``), and one bidirectional node whose directions differ
only in ``beta``: ``attach_functions`` must give each configuration its own body (overload) and
``inline`` must expand each with its own parameters. End to end in onnxruntime, against the numpy
reference, for every op."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, attach_functions, inline
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.reference import FUNCTIONS
from onnx_masked_rnn.testing import make_node, random_inputs, value_info

T, N, I, H = 5, 3, 2, 4
PATHS = ("attach_functions", "inline scan", "inline native")
# op -> activations taking alpha and beta (HardSigmoid, Affine, ScaledTanh) in every slot
ACTIVATIONS = {
    "MaskedLSTM": ["HardSigmoid", "ScaledTanh", "Affine"],
    "MaskedGRU": ["HardSigmoid", "ScaledTanh"],
    "MaskedRNN": ["ScaledTanh"],
}


def _run(model: onnx.ModelProto, path: str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    if path == "attach_functions":
        runnable = attach_functions(model)
    else:
        runnable = inline(model, path.split()[1])
    onnx.checker.check_model(runnable, full_check=True)
    session = ort.InferenceSession(runnable.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _model(configurations, feeds):
    """One node per ``(attributes, present inputs)``; outputs ``Y_<k>`` and ``Y_h_<k>``; returns
    the model and the reference's outputs in the same order."""
    nodes, outputs, expected = [], [], []
    for k, (attributes, present) in enumerate(configurations):
        op_type = attributes["op_type"]
        kwargs = {a: v for a, v in attributes.items() if a != "op_type"}
        attrs = parse_attributes(op_type, **kwargs)
        node = make_node(attrs, ["X", "W", "R", *present], name=f"node_{k}")
        del node.output[:]
        node.output.extend([f"Y_{k}", f"Y_h_{k}"])
        nodes.append(node)
        Y, Y_h, *_ = FUNCTIONS[op_type](**{n: feeds[n] for n in ["X", "W", "R", *present]}, **kwargs)
        expected += [Y, Y_h]
        outputs += [value_info(f"Y_{k}", Y), value_info(f"Y_h_{k}", Y_h)]
    graph = helper.make_graph(nodes, "g", [value_info(n, v) for n, v in feeds.items()], outputs)
    imports = [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)]
    return helper.make_model(graph, opset_imports=imports, ir_version=10), expected


def _check(configurations, feeds, path):
    model, expected = _model(configurations, feeds)
    actual = _run(model, path, feeds)
    for k, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5, err_msg=f"{path}: output {k}")
    if path == "attach_functions":
        attached = attach_functions(model)
        overloads = {n.overload for n in attached.graph.node if n.domain == DOMAIN}
        assert len(overloads) == len(configurations), "each configuration needs its own overload"


def _feeds(op_type: str, direction: str = "forward", seed: int = 0) -> dict[str, np.ndarray]:
    attrs = parse_attributes(op_type, direction=direction)
    present = ("B", "initial_h", "initial_c", "mask")
    return random_inputs(attrs, T, N, I, H, rng=np.random.default_rng(seed), present=present)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op_type", sorted(OP_SPECS))
def test_nodes_differing_only_in_present_inputs(op_type: str, path: str) -> None:
    feeds = _feeds(op_type, seed=1)
    attributes = {"op_type": op_type, "hidden_size": H, "masked_output": "carry"}
    with_state = ["B", "initial_h", "mask"] + (["initial_c"] if op_type == "MaskedLSTM" else [])
    # the same attributes; the second node lacks initial_h (and initial_c): zeros instead
    without_state = ["B", "mask"]
    _check([(attributes, with_state), (attributes, without_state)], feeds, path)


@pytest.mark.parametrize("parameter", ["activation_beta", "activation_alpha"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op_type", sorted(OP_SPECS))
def test_nodes_differing_only_in_one_activation_parameter(op_type: str, path: str, parameter: str) -> None:
    feeds = _feeds(op_type, seed=2)
    names = ACTIVATIONS[op_type]
    base = {
        "op_type": op_type,
        "hidden_size": H,
        "activations": names,
        "activation_alpha": [0.3] * len(names),
        "activation_beta": [0.4] * len(names),
    }
    other = dict(base, **{parameter: [0.7] * len(names)})
    present = ["B", "mask"]
    _check([(base, present), (other, present)], feeds, path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("op_type", sorted(OP_SPECS))
def test_directions_differing_only_in_beta(op_type: str, path: str) -> None:
    feeds = _feeds(op_type, direction="bidirectional", seed=3)
    names = ACTIVATIONS[op_type] * 2
    k = len(ACTIVATIONS[op_type])
    attributes = {
        "op_type": op_type,
        "hidden_size": H,
        "direction": "bidirectional",
        "activations": names,
        "activation_alpha": [0.3] * 2 * k,
        "activation_beta": [0.4] * k + [0.9] * k,
    }
    model, expected = _model([(attributes, ["B", "mask"])], feeds)
    actual = _run(model, path, feeds)
    for i, (a, e) in enumerate(zip(actual, expected)):
        np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5, err_msg=f"{path}: output {i}")
