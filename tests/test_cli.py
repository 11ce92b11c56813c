"""The command line's own work: ``inline`` reads, expands and writes a model; bad arguments end
with a message and status 2, not a traceback. (``generate-tests`` runs in the conformance tests'
stale-data check, ``conformance`` in the runner tests, ``bench --quick`` in the native tests.)"""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnx_masked_rnn import DOMAIN, cli
from onnx_masked_rnn.conformance import DATA_DIR

CASE = "test_masked_lstm_reverse_zero"


@pytest.mark.parametrize("strategy", ["scan", "native"])
def test_inline_writes_a_standard_model_with_the_same_outputs(tmp_path, strategy, capsys):
    case = DATA_DIR / "node" / CASE
    out = tmp_path / "inlined.onnx"
    assert cli.main(["inline", str(case / "model.onnx"), str(out), "--strategy", strategy]) == 0
    assert str(out) in capsys.readouterr().out
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert all(node.domain != DOMAIN for node in model.graph.node)
    data = case / "test_data_set_0"
    inputs = {
        i.name: numpy_helper.to_array(onnx.load_tensor(data / f"input_{k}.pb"))
        for k, i in enumerate(model.graph.input)
    }
    expected = [
        numpy_helper.to_array(onnx.load_tensor(data / f"output_{k}.pb"))
        for k in range(len(model.graph.output))
    ]
    actual = ort.InferenceSession(out.read_bytes(), providers=["CPUExecutionProvider"]).run(None, inputs)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert abs(a - e).max() <= 1e-5


def test_a_missing_model_ends_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["inline", "missing.onnx", "out.onnx"]) == 2
    err = capsys.readouterr().err
    assert "onnx-masked-rnn inline: error:" in err and "missing.onnx" in err
    assert not (tmp_path / "out.onnx").exists()


def test_an_unknown_strategy_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["inline", "in.onnx", "out.onnx", "--strategy", "fast"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'fast'" in capsys.readouterr().err
