"""The conformance suite regenerated from the current builders and run in onnxruntime: a defect of
a function body or of an expansion fails here even before the shipped files are regenerated (the
byte comparison with the shipped copy says only that something changed)."""

from __future__ import annotations

import re

from onnx_masked_rnn import cli


def test_the_regenerated_suite_passes_on_onnxruntime(regenerated_suite, capsys):
    folder, generated, _ = regenerated_suite
    assert generated == 0
    status = cli.main(["conformance", str(folder), "--backend", "onnxruntime"])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    last = out.rstrip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed, 0 failed, \d+ skipped", last), out[-3000:]
    # what is skipped is only what onnxruntime lacks (float64 kernels), each with its reason
    skipped = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert skipped and all("onnxruntime" in line and "kernel" in line for line in skipped), skipped
