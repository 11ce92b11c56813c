"""Write the operators' doc text into the C++ schemas of the onnx pull request (``upstream/``).

Each op's source (``upstream/onnx/onnx/defs/preview/masked_<op>.cc``) holds, between
``// BEGIN GENERATED doc`` and ``// END GENERATED doc`` lines, the raw-string constants its schema
is built from: ``kDocHead`` and ``kDocTail`` (the doc string around the part it restates from its
ONNX counterpart's), ``kMaskDoc`` and ``kMaskedOutputDoc`` (the descriptions of the input and the
attribute it adds), each starting and ending with a newline that the schema strips (so that
clang-format leaves the lines as they are). They are rendered from
``onnx_masked_rnn/schema_doc.py``, the one source of the doc text, so the C++ and the package's
schemas carry the same text (``upstream/tests`` compares the built onnx's doc strings with the
package's).

Usage: ``python scripts/generate_upstream_doc.py`` rewrites the sources; ``--check`` prints the
stale ones and exits 1.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

from onnx_masked_rnn.schema_doc import descriptions, doc_parts  # noqa: E402

PREVIEW = ROOT / "upstream" / "onnx" / "onnx" / "defs" / "preview"
SOURCES = {"MaskedLSTM": "masked_lstm.cc", "MaskedGRU": "masked_gru.cc", "MaskedRNN": "masked_rnn.cc"}
BEGIN = (
    "// BEGIN GENERATED doc by scripts/generate_upstream_doc.py from onnx_masked_rnn/schema_doc.py;"
    " do not edit"
)
END = "// END GENERATED doc"
_BLOCK = re.compile(r"^// BEGIN GENERATED doc[^\n]*\n.*?^// END GENERATED doc$", re.S | re.M)


def raw(name: str, text: str) -> str:
    if ")DOC" in text:
        raise ValueError(f"{name}: the text holds ')DOC', which ends a raw string")
    return f'constexpr const char* {name} = R"DOC(\n{text}\n)DOC";'


def block(op_type: str) -> str:
    head, tail = doc_parts(op_type)
    added = descriptions(op_type)
    constants = [
        raw("kDocHead", head),
        raw("kDocTail", tail),
        raw("kMaskDoc", added["mask"]),
        raw("kMaskedOutputDoc", added["masked_output"]),
    ]
    return "\n".join([BEGIN, *constants, END])


def updated(op_type: str, text: str) -> str:
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
