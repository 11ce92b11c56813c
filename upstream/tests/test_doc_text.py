"""The C++ schemas' doc strings are the operators' normative text, sentence for sentence.

On the patched onnx (``check.sh``'s venv): each masked operator's ``OpSchema.doc`` is what the
package's ``onnx_masked_rnn.schema_doc.doc`` composes from the (patched) counterpart's doc string,
and its own part (everything but the part restated from LSTM-22/GRU-22/RNN-22) is the doc printed in
``spec/<op>.md``; the descriptions of ``mask`` and ``masked_output`` are the package's.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from pathlib import Path

import onnx.defs
import pytest
from upstream_testing import MASKED_OPS, PREVIEW

from onnx_masked_rnn.attributes import OP_SPECS
from onnx_masked_rnn.schema_doc import descriptions, doc, doc_parts

SPEC = Path(__file__).resolve().parents[2] / "spec"


def sentences(text: str) -> list[str]:
    """``text``'s sentences (and list items), whitespace normalised."""
    flat = re.sub(r"\s+", " ", text).strip()
    return [s for s in re.split(r"(?<=[.;:])\s+(?=\S)|\s(?=\* )", flat) if s]


def assert_same_sentences(actual: str, expected: str, what: str) -> None:
    a, e = sentences(actual), sentences(expected)
    diff = "\n".join(difflib.unified_diff(e, a, "expected", what, lineterm="", n=1))
    assert a == e, f"{what} differs from the text:\n{diff}"


def own_part(op_type: str, text: str) -> str:
    """``text`` (a doc string) without the part restated from the ONNX counterpart."""
    tail_start = doc_parts(op_type)[1].splitlines()[0]
    return text[: text.index("Notations:")] + text[text.index(tail_start) :]


def spec_doc(op_type: str) -> str:
    """The doc string printed in ``spec/<op>.md``'s generated schema entry."""
    text = (SPEC / f"{op_type}.md").read_text(encoding="utf-8")
    entry = text.split("<!-- BEGIN GENERATED schema", 1)[1].split("\n#### Version", 1)[0]
    return textwrap.dedent(entry.split("</a>\n", 1)[1])


@pytest.mark.parametrize("op_type", MASKED_OPS)
def test_cpp_doc_is_the_package_text(op_type: str) -> None:
    cpp = onnx.defs.get_schema(op_type, 1, PREVIEW).doc
    counterpart = onnx.defs.get_schema(OP_SPECS[op_type].onnx_op_type, 22, "").doc
    expected = doc(op_type, counterpart)
    assert_same_sentences(cpp, expected, f"{op_type}'s C++ doc string")
    assert cpp.strip() == expected.strip()


@pytest.mark.parametrize("op_type", MASKED_OPS)
def test_cpp_doc_is_the_spec_text(op_type: str) -> None:
    cpp = onnx.defs.get_schema(op_type, 1, PREVIEW).doc
    spec = own_part(op_type, spec_doc(op_type))
    assert_same_sentences(own_part(op_type, cpp), spec, f"{op_type}'s C++ doc")
    assert "Errors:" in cpp and "Empty inputs:" in cpp and "Element types:" in cpp


@pytest.mark.parametrize("op_type", MASKED_OPS)
def test_cpp_descriptions_are_the_package_text(op_type: str) -> None:
    schema = onnx.defs.get_schema(op_type, 1, PREVIEW)
    added = descriptions(op_type)
    (mask,) = [i for i in schema.inputs if i.name == "mask"]
    assert mask.description == added["mask"].strip()
    assert schema.attributes["masked_output"].description == added["masked_output"].strip()


def test_sentences_splits_items_and_sentences() -> None:
    assert sentences("A b. C d;\n* e f\n* g: h") == ["A b.", "C d;", "* e f", "* g:", "h"]
