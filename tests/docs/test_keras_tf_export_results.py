"""docs/keras.md's comparison with the TensorFlow-backend route (Keras' ``model.export(format="onnx")``,
tf2onnx) shows what ``scripts/bench_keras_tf_export.py`` measured and recorded in
``docs/results/keras_tf_export.json`` (TensorFlow is not in the test extra, so the measurement is
not re-run here: the table must be the record's, and the record must be complete)."""

from __future__ import annotations

import json

from toolkit import ROOT, load_script

RESULTS = ROOT / "docs" / "results" / "keras_tf_export.json"


def _script():
    return load_script("scripts/bench_keras_tf_export.py")


def test_docs_table_is_the_recorded_one() -> None:
    script = _script()
    results = json.loads(RESULTS.read_text())
    assert script.table(results) in (ROOT / "docs" / "keras.md").read_text()


def test_record_names_date_machine_versions_and_checks() -> None:
    """The record says when, where and with what; every export was checked against Keras' predict
    and timed against the same baseline (the tf2onnx row, ratio 1)."""
    script = _script()
    results = json.loads(RESULTS.read_text())
    assert results["date_utc"] and results["machine"]["cpu"] and results["machine"]["nproc"] >= 1
    for package in ("tensorflow", "keras", "tf2onnx", "torch", "onnxruntime"):
        assert package in results["versions"] or f"{package}-cpu" in results["versions"], package
    rows = {row["export"]: row for row in results["rows"]}
    assert set(rows) == {
        script.BASELINE,
        *(f"onnx_masked_rnn.keras.export, {w}" for w in script.STRATEGIES.values()),
    }
    assert rows[script.BASELINE]["latency_ratio"] == 1.0
    for row in rows.values():
        assert row["max_abs_diff_vs_predict"] <= 1e-5, row
        assert row["dynamic_batch_and_time"] and row["max_abs_diff_vs_predict_batch5_length37"] <= 1e-5, row
