"""The operators' normative text is one text: ``onnx_masked_rnn/schema_doc.py``.

- each package schema's doc string is ``schema_doc.doc`` and holds every section of the text, the
  static-error list included, written for that operator;
- ``spec/semantics.md`` holds every section as a ``normative-<name>`` block (their content is
  checked, with every other generated section, against ``scripts/generate_docs.py``);
- what the text says the function body checks at run time (the mask's shape), the body does;
- the C++ schemas of ``upstream/`` hold the same text as the constants
  ``scripts/generate_upstream_doc.py`` writes (``upstream/tests/test_doc_text.py`` compares the
  built onnx's doc strings).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import onnx.defs
import pytest
from toolkit import run

from onnx_masked_rnn import inline
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.schema_doc import SECTIONS, STATIC_ERRORS, doc, markdown
from onnx_masked_rnn.schemas import build_schema
from onnx_masked_rnn.testing import make_model, random_inputs

ROOT = Path(__file__).resolve().parents[2]
_loader = importlib.util.spec_from_file_location(
    "generate_upstream_doc", ROOT / "scripts" / "generate_upstream_doc.py"
)
generate_upstream_doc = importlib.util.module_from_spec(_loader)
_loader.loader.exec_module(generate_upstream_doc)


@pytest.mark.parametrize("op_type", OP_SPECS)
def test_schema_doc_is_the_text(op_type: str) -> None:
    counterpart = onnx.defs.get_schema(OP_SPECS[op_type].onnx_op_type, 22, "")
    text = build_schema(op_type).doc
    assert text == doc(op_type, counterpart.doc)
    for title, _ in SECTIONS.values():
        assert title in text
    listed = re.findall(r"^\* (.*)$", text.split("Errors:", 1)[1], re.M)
    applicable = [e for applies, e in STATIC_ERRORS.values() if OP_SPECS[op_type].onnx_op_type in applies]
    assert len(listed) == len(applicable)
    assert "rows of length 0" not in text and "a row of\nlength 0" in text  # the one exception


def test_semantics_holds_every_section() -> None:
    text = (ROOT / "spec" / "semantics.md").read_text()
    for name in SECTIONS:
        block = re.search(
            rf"<!-- BEGIN GENERATED normative-{name} [^>]*-->\n(.*?)<!-- END GENERATED normative-{name} -->",
            text,
            re.S,
        )
        assert block is not None, name
        assert block.group(1).strip() == markdown(name).strip()


def test_cpp_sources_hold_the_text() -> None:
    assert generate_upstream_doc.stale() == {}


def test_body_rejects_a_mask_of_another_shape_as_the_text_says() -> None:
    """The errors section says the body rejects a wrongly shaped mask at run time (it used to say a
    body cannot check it); the body does: a transposed mask, its dims unknown to the checks, fails
    in onnxruntime, the right one runs."""
    assert "The\nfunction body rejects at run time a `mask` that is not the shape" in markdown("errors")
    attrs = parse_attributes("MaskedLSTM", hidden_size=4)
    feeds = random_inputs(attrs, 5, 3, 2, 4, rng=np.random.default_rng(0), present=("mask",))
    model = make_model(attrs, feeds, 21)
    for dim in model.graph.input[-1].type.tensor_type.shape.dim:
        dim.ClearField("dim_value")
    body = inline(model, "scan")
    run(body, feeds)
    with pytest.raises(Exception, match="Concat|dimension|shape|Shape"):
        run(body, dict(feeds, mask=feeds["mask"].T.copy()))
