"""docs/keras.md's tf2onnx models table is what ``scripts/bench_tf2onnx_models.py`` recorded in
``docs/results/tf2onnx_models.json`` (TensorFlow is not in the test extra, so the measurement is not
re-run here: the table must be the record's, and the record must be complete)."""

from __future__ import annotations

import json

from toolkit import ROOT, load_script

RESULTS = ROOT / "docs" / "results" / "tf2onnx_models.json"


def _script():
    return load_script("scripts/bench_tf2onnx_models.py")


def test_docs_table_is_the_recorded_one() -> None:
    script = _script()
    results = json.loads(RESULTS.read_text())
    assert script.table(results) in (ROOT / "docs" / "keras.md").read_text()


def test_record_is_complete_and_exact() -> None:
    """Every model in every form, against Keras' predict, timed against the unpatched Loop."""
    script = _script()
    results = json.loads(RESULTS.read_text())
    assert results["date_utc"] and results["machine"]["cpu"] and results["command"]
    assert set(results["versions"]["converters"]) == {"unpatched", "patched"}
    rows = {(r["model"], r["form"]): r for r in results["rows"]}
    assert set(rows) == {(m, f) for m in script.TITLES for f in script.FORMS}
    for (_, form), row in rows.items():
        assert row["max_abs_diff"] <= 1e-5, row
        if form == script.FORMS[0]:
            assert row["ratio"] == 1.0
        else:
            assert row["preview_ops"], row
