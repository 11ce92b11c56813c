"""The specification in ``spec/`` agrees with the code.

- The generated sections (schema entries, function bodies, activation table) are checked with
  every other generated section, against what ``scripts/generate_docs.py`` writes, by
  ``tests/docs/test_generate_docs.py``.
- The attribute, input and output lists of each page are exactly ``OP_SPECS``'s.
- Every example runs with the conformance suite's ``expect``: its own assertions hold, its model
  passes the checker and shape inference, and onnxruntime gives its outputs on the model with the
  functions attached and after inlining by either strategy.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnx.parser
import pytest
import toolkit
from toolkit import ROOT, load_script

from onnx_masked_rnn import register_schemas
from onnx_masked_rnn.attributes import ACTIVATIONS, MASKED_OUTPUT_MODES, OP_SPECS
from onnx_masked_rnn.conformance.expect import Case, expect, recording

generate_docs = load_script("scripts/generate_docs.py")

OPS = tuple(OP_SPECS)


@pytest.fixture(scope="module", autouse=True)
def _registered() -> None:
    register_schemas()


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def _terms(section: str) -> list[str]:
    return re.findall(r"<dt><tt>(\w+)</tt>", section)


@pytest.mark.parametrize("op_type", OPS)
def test_tables_list_every_attribute_input_and_output(op_type: str) -> None:
    spec = OP_SPECS[op_type]
    text = (ROOT / "spec" / f"{op_type}.md").read_text()
    assert _terms(_section(text, "#### Attributes", "#### Inputs")) == sorted(spec.attribute_names)
    assert _terms(_section(text, "#### Inputs", "#### Outputs")) == list(spec.inputs)
    assert _terms(_section(text, "#### Outputs", "#### Type Constraints")) == list(spec.outputs)
    assert "<dt><tt>masked_output</tt> : string (default is zero)</dt>" in text
    assert "<dt><tt>mask</tt> (optional, non-differentiable) : T2</dt>" in text
    assert "<dt><tt>T2</tt> : tensor(bool)</dt>" in text


def test_semantics_names_every_mode_and_activation() -> None:
    text = generate_docs.SEMANTICS.read_text()
    modes = _section(text, "## 4.", "## 5.")
    documented = re.findall(r'^\| `"(\w+)"`', modes, re.M)
    assert documented == ["zero", "carry"] and set(documented) <= set(MASKED_OUTPUT_MODES)
    table = _section(text, "<!-- BEGIN GENERATED activations", "<!-- END GENERATED activations")
    assert re.findall(r"^\| (\w+) \|", table, re.M)[1:] == list(ACTIVATIONS)


def _examples(op_type: str) -> list[tuple[str, str]]:
    text = (ROOT / "spec" / f"{op_type}.md").read_text()
    blocks = re.findall(r"<summary>(\w+)</summary>\s*```python\n(.*?)```", text, re.S)
    assert blocks, f"no examples in {op_type}.md"
    return blocks


EXAMPLES = [(op, name, code) for op in OPS for name, code in _examples(op)]


def _run_example(name: str, code: str) -> Case:
    """Execute an example with the conformance suite's ``expect``; return the case it records."""
    with recording(f"spec example {name}") as cases:
        exec(compile(code, f"<spec example {name}>", "exec"), {"np": np, "onnx": onnx, "expect": expect})  # noqa: S102
    assert len(cases) == 1, f"example {name} must call expect() once"
    return cases[0]


@pytest.mark.parametrize(("op_type", "name", "code"), EXAMPLES, ids=[f"{e[0]}-{e[1]}" for e in EXAMPLES])
def test_example_runs_and_its_model_is_valid(op_type: str, name: str, code: str) -> None:
    case = _run_example(name, code)
    assert case.name.startswith(f"test_{op_type[:6].lower()}_{op_type[6:].lower()}_")
    assert case.model.graph.node[0].op_type == op_type
    onnx.checker.check_model(case.model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(case.model, strict_mode=True)
    for value_info, array in zip(inferred.graph.output, case.outputs):
        dims = tuple(d.dim_value for d in value_info.type.tensor_type.shape.dim)
        assert dims == array.shape, value_info.name


def test_example_names_are_unique() -> None:
    names = re.findall(r'name="(test_\w+)"', "".join(code for _, _, code in EXAMPLES))
    assert len(names) == len(EXAMPLES) == len(set(names))


@pytest.mark.parametrize("strategy", ["attach_functions", "scan", "native"])
@pytest.mark.parametrize(("op_type", "name", "code"), EXAMPLES, ids=[f"{e[0]}-{e[1]}" for e in EXAMPLES])
def test_example_outputs_match_onnxruntime(op_type: str, name: str, code: str, strategy: str) -> None:
    """onnxruntime runs the example's model with the functions attached, and after inlining by
    either strategy, and gives the example's outputs."""
    import onnxruntime

    from onnx_masked_rnn.inline import attach_functions, inline

    case = _run_example(name, code)
    model = case.model
    runnable = attach_functions(model) if strategy == "attach_functions" else inline(model, strategy=strategy)
    session = toolkit.session(runnable)
    feeds = {vi.name: a for vi, a in zip(model.graph.input, case.inputs)}
    try:
        got = session.run([vi.name for vi in model.graph.output], feeds)
    except onnxruntime.capi.onnxruntime_pybind11_state.RuntimeException as error:
        if strategy == "native" and "does not support double" in str(error):
            pytest.skip(f"onnxruntime lacks the native kernel the expansion calls: {error}")
        raise
    for expected, actual, vi in zip(case.outputs, got, model.graph.output):
        np.testing.assert_allclose(actual, expected, rtol=case.rtol, atol=case.atol, err_msg=vi.name)


@pytest.mark.parametrize("op_type", OPS)
def test_printed_function_body_has_the_operators_signature(op_type: str) -> None:
    """The body the spec prints takes the op's inputs and attributes and returns its outputs, by
    their names, so it reads next to the schema."""
    spec = OP_SPECS[op_type]
    text = (ROOT / "spec" / f"{op_type}.md").read_text()
    body = _section(text, "<!-- BEGIN GENERATED function-body", "<!-- END GENERATED function-body")
    signature = f"{op_type} <{','.join(sorted(spec.attribute_names))}>({', '.join(spec.inputs)})"
    assert f"{signature} => ({', '.join(spec.outputs)})" in body


@pytest.mark.parametrize("op_type", OPS)
def test_printed_function_body_computes_the_reference(op_type: str) -> None:
    """The body as printed in the spec, parsed back from the text, runs in onnxruntime and gives
    the reference's outputs for its configuration: what a reader reads is what the op computes."""

    from onnx_masked_rnn.reference import FUNCTIONS
    from onnx_masked_rnn.testing import make_model, random_inputs

    text = (ROOT / "spec" / f"{op_type}.md").read_text()
    printed = _section(text, "<!-- BEGIN GENERATED function-body", "<!-- END GENERATED function-body")
    function = onnx.parser.parse_function(printed.split("```\n")[1])
    attrs = generate_docs.body_attributes(op_type)
    present = generate_docs.BODY_CONFIGURATIONS[op_type][1]
    T, N = 5, 3
    rng = np.random.default_rng(0)
    lens = rng.integers(0, T + 1, size=N) if "sequence_lens" in present else None
    inputs = random_inputs(
        attrs, T, N, 4, 3, rng=rng, present=sorted(present - {"sequence_lens"}), sequence_lens=lens
    )
    model = make_model(attrs, inputs, opset=generate_docs.FUNCTION_OPSET, functions=[function])
    got = toolkit.run(model, inputs)
    expected = FUNCTIONS[op_type](**inputs, **attrs.to_onnx())
    for name, actual, want in zip(OP_SPECS[op_type].outputs, got, expected):
        np.testing.assert_allclose(actual, want, rtol=1e-5, atol=1e-6, err_msg=name)
