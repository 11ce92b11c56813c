"""docs/pytorch.md: the end-to-end example it shows is the file the tests run, and it runs
(training on a mask with holes, export, onnxruntime at a new batch size and length == eager)."""

from __future__ import annotations

import re
import runpy

from toolkit import ROOT

EXAMPLE = ROOT / "examples" / "pytorch_masked_tagger.py"


def test_doc_example_is_the_tested_file() -> None:
    blocks = [
        b.strip()
        for b in re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "pytorch.md").read_text(), re.S)
    ]
    assert EXAMPLE.read_text().strip() in blocks


def test_example_runs() -> None:
    runpy.run_path(str(EXAMPLE), run_name="__main__")  # asserts onnxruntime == eager
