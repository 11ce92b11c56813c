"""The conformance suite regenerated from the current builders and run in onnxruntime: a defect of
a function body or of an expansion fails here even before the shipped files are regenerated (the
byte comparison with the shipped copy says only that something changed)."""

from __future__ import annotations

from onnx_masked_rnn import cli


def test_the_regenerated_suite_passes_on_onnxruntime(tmp_path, capsys):
    assert cli.main(["generate-tests", str(tmp_path)]) == 0
    status = cli.main(["conformance", str(tmp_path), "--backend", "onnxruntime"])
    out = capsys.readouterr().out
    assert status == 0, out[-3000:]
    assert out.rstrip().splitlines()[-1].endswith(" 0 failed"), out[-3000:]
