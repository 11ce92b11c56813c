"""The documentation onnx's own tools generate for the patched onnx.

onnx's source distribution ships no ``docs/`` folder, so the series cannot patch
``docs/Operators.md``, ``docs/Changelog.md`` and ``docs/TestCoverage.md``; ``check.sh`` regenerates
them (``stat_coverage.py``, ``gen_doc.py``, as onnx's ``tools/update_doc.sh`` does) into the
unpacked source, and these tests check the new operators' entries there. The entries are also kept
in ``upstream/docs/`` for review; a test fails when they are stale (``UPDATE_DOCS=1 check.sh``
rewrites them).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

OPS = ("MaskedGRU", "MaskedLSTM", "MaskedRNN")
GENERATED = Path(os.environ.get("ONNX_UPSTREAM_SRC", "/nonexistent")) / "docs"
# upstream/docs for the sdist, upstream/docs/main for `check.sh --source` (set by check.sh)
KEPT = Path(os.environ.get("ONNX_UPSTREAM_KEPT_DOCS", Path(__file__).resolve().parent.parent / "docs"))

# file -> the heading that starts an operator's section, as the generator writes it
HEADINGS = {
    "Operators.md": '### <sub>experimental</sub> <a name="ai.onnx.preview.{op}">',
    "Changelog.md": '### <a name="ai.onnx.preview.{op}-1">',
    "TestCoverage.md": "### {op}\n",
}
# The sections of ai.onnx operators the series change (3-rnn-doc-clarification, 1-reference-scan).
CHANGED = {
    "Operators.md": ['### <a name="{op}"></a><a name="{lower}">**{op}**</a>', ("GRU", "LSTM", "RNN", "Scan")],
    "Changelog.md": ['### <a name="{op}-22"></a>**{op}-22**</a>', ("GRU", "LSTM", "RNN")],
    "TestCoverage.md": ["### {op}\n", ("Scan",)],
}


def section(text: str, heading: str) -> str:
    """The section of ``text`` from ``heading`` to the next heading of level 2 or 3 (a line starting
    with ``# `` may be a comment in an example's code)."""
    start = text.index(heading)
    following = re.compile(r"^#{2,3} ", re.MULTILINE).search(text, start + len(heading))
    return text[start : following.start() if following else len(text)].rstrip() + "\n"


def generated(name: str) -> str:
    path = GENERATED / name
    if not path.exists():
        pytest.fail(f"{path} was not generated (see the docs step of check.sh)")
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(HEADINGS))
def test_sections_match_the_kept_copy(name: str) -> None:
    text = generated(name)
    sections = "\n".join(section(text, HEADINGS[name].format(op=op)) for op in OPS)
    heading, ops = CHANGED[name]
    sections += "\n" + "\n".join(section(text, heading.format(op=op, lower=op.lower())) for op in ops)
    kept = KEPT / name
    if os.environ.get("UPDATE_DOCS") == "1":
        KEPT.mkdir(exist_ok=True)
        kept.write_text(sections, encoding="utf-8")
    assert kept.exists() and kept.read_text(encoding="utf-8") == sections, (
        f"{kept} is stale: rerun check.sh with UPDATE_DOCS=1"
    )


@pytest.mark.parametrize("op", OPS)
def test_operator_entry(op: str) -> None:
    entry = section(generated("Operators.md"), HEADINGS["Operators.md"].format(op=op))
    for part in ("#### Attributes", "masked_output", "#### Inputs", "mask", "#### Examples", "Masking"):
        assert part in entry
    summary = re.search(r"There are (\d+) test cases", generated("TestCoverage.md").split(f"### {op}\n")[1])
    assert summary and int(summary.group(1)) >= 3


def test_scan_examples() -> None:
    entry = section(generated("Operators.md"), '### <a name="Scan"></a><a name="scan">**Scan**</a>')
    for example in ("scan_9_reverse", "scan_9_mixed_directions", "scan_9_axes"):
        assert f"<summary>{example}</summary>" in entry
