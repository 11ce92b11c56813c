"""Write the operators' doc text into the C++ schemas of the onnx pull request (``upstream/``).

The doc strings are composed in C++ as the package composes them (``onnx_masked_rnn/schema_doc.py``,
the one source of the text): the op's head, the part restated from its ONNX counterpart, then one
tail template shared by the three operators with the op's values of its placeholders. Between
``// BEGIN GENERATED doc`` and ``// END GENERATED doc`` lines this script writes the raw-string
constants: ``kDocTail`` (``schema_doc.tail_template()``) and ``kMaskDoc`` (the description of ``mask``) into
``upstream/onnx/onnx/defs/preview/masked_rnn_utils.cc``, and into each op's source
(``masked_<op>.cc``) ``kDoc``, its ``DocText``: the head, the values of ``schema_doc.TAIL_FIELDS``
and the description of ``masked_output``. A raw string starts and ends with a newline
that the schema strips (so that clang-format leaves the lines as they are).
``upstream/tests/test_doc_text.py`` checks the built onnx's doc strings against the package's.

Usage: ``python scripts/generate_upstream_doc.py`` rewrites the sources; ``--check`` prints the
stale ones and exits 1.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # run from a checkout without installing the package (not when tests import it)
    sys.path.insert(0, str(ROOT))

from onnx_masked_rnn.schema_doc import TAIL_FIELDS, descriptions, doc_parts, tail_fields, tail_template  # noqa: E402

PREVIEW = ROOT / "upstream" / "onnx" / "onnx" / "defs" / "preview"
SOURCES = {
    "MaskedLSTM": "masked_lstm.cc",
    "MaskedGRU": "masked_gru.cc",
    "MaskedRNN": "masked_rnn.cc",
    None: "masked_rnn_utils.cc",  # the shared tail
}
BEGIN = (
    "// BEGIN GENERATED doc by scripts/generate_upstream_doc.py from onnx_masked_rnn/schema_doc.py;"
    " do not edit"
)
END = "// END GENERATED doc"
_BLOCK = re.compile(r"^// BEGIN GENERATED doc[^\n]*\n.*?^// END GENERATED doc$", re.S | re.M)


def raw(text: str) -> str:
    if ")DOC" in text:
        raise ValueError("the text holds ')DOC', which ends a raw string")
    return f'R"DOC(\n{text}\n)DOC"'


def literal(text: str) -> str:
    if any(c in text for c in '"\\\n'):
        raise ValueError(f"{text!r}: not a plain C string")
    return f'"{text}"'


def block(op_type: str | None) -> str:
    """The generated constants of ``op_type``'s source (None: masked_rnn_utils.cc's tail)."""
    if op_type is None:
        (mask,) = {descriptions(op)["mask"] for op in SOURCES if op}  # the same for the three
        constants = f"constexpr const char* kDocTail = {raw(tail_template())};\n"
        constants += f"constexpr const char* kMaskDoc = {raw(mask)};"
    else:
        fields = tail_fields(op_type)
        added = descriptions(op_type)
        values = [raw(doc_parts(op_type)[0])]
        paragraphs = ("cell", "static_errors")
        values += [raw(fields[n]) if n in paragraphs else literal(fields[n]) for n in TAIL_FIELDS]
        values.append(raw(added["masked_output"]))
        constants = "constexpr DocText kDoc{\n" + ",\n".join("    " + v for v in values) + "};"
    return "\n".join([BEGIN, constants, END])


def updated(op_type: str | None, text: str) -> str:
    if len(_BLOCK.findall(text)) != 1:
        raise ValueError(f"{SOURCES[op_type]}: expected one '// BEGIN GENERATED doc' ... '{END}' block")
    return _BLOCK.sub(lambda _: block(op_type), text)


def stale() -> dict[Path, str]:
    """Each source whose block differs from what the text gives, with its new content."""
    result = {}
    for op_type, name in SOURCES.items():
        path = PREVIEW / name
        text = path.read_text()
        new = updated(op_type, text)
        if new != text:
            result[path] = new
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale sources, write nothing")
    args = parser.parse_args()
    changed = stale()
    for path, new in changed.items():
        print(f"{'stale' if args.check else 'updated'} {path.relative_to(ROOT)}")
        if not args.check:
            path.write_text(new)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
