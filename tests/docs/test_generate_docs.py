"""Every generated section of README.md, proposal.md, docs/*.md and spec/*.md is what
``scripts/generate_docs.py`` writes from the code and the committed records (``docs/results/``,
``known_limitations.json``): a hand-edited number, or a record updated without regenerating, fails
here. CI does not re-measure; the records are checked for their provenance instead."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from toolkit import ROOT

_loader = importlib.util.spec_from_file_location("generate_docs", ROOT / "scripts" / "generate_docs.py")
generate_docs = importlib.util.module_from_spec(_loader)
_loader.loader.exec_module(generate_docs)

DOCUMENTS = generate_docs.documents()
RECORDS = sorted(generate_docs.RESULTS.glob("*.json"))
# Recorded before onnx_masked_rnn.record existed, by a script that needs TensorFlow (not in the test
# extra), so it cannot be re-recorded here: it names its script instead of a command and has no
# load average after the run.
EARLIER_FORMAT = {"keras_tf_export.json"}


def _without_versions(text: str, versions: set[str]) -> str:
    for version in versions:
        text = text.replace(version, "<versions>")
    return text


@pytest.mark.parametrize("path", DOCUMENTS, ids=[str(p.relative_to(ROOT)) for p in DOCUMENTS])
def test_document_equals_what_the_generator_writes(path: Path) -> None:
    """The markers of the code sections record the onnx/onnxscript versions that rendered them; a
    version change alone is no difference, but a rendering that changed with it fails."""
    text = path.read_text()
    rendered = generate_docs.updated(text, path)
    versions = generate_docs.recorded_versions(text) | {generate_docs.generator_versions()}
    assert _without_versions(rendered, versions) == _without_versions(text, versions), (
        f"{path.relative_to(ROOT)} differs from what the generator writes:\n"
        + generate_docs.diff(path, text, rendered)
        + "\nrun python scripts/generate_docs.py"
    )


def test_the_documents_hold_the_measured_sections() -> None:
    """Each record feeds at least one document, and the measured tables are in place."""
    placed = {name for p in DOCUMENTS for name in generate_docs.section_names(p.read_text())}
    for name in ("runtimes", "runtimes-summary", "known-limitations", "speed-summary", "keras-tf-export"):
        assert name in placed, name


def test_a_hand_edit_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing a number inside a generated section makes the document stale: ``--check`` prints the
    diff and exits 1; writing restores it."""
    source = ROOT / "docs" / "runtimes.md"
    text = source.read_text()
    begin = text.index("<!-- BEGIN GENERATED runtimes ")
    row = text.index("| onnxruntime | base | ", begin)
    edited = text[:row] + text[row:].replace("| onnxruntime | base | ", "| onnxruntime | base | 1", 1)
    copy = tmp_path / "runtimes.md"
    copy.write_text(edited)
    stale = generate_docs.stale([copy])
    assert list(stale) == [copy]
    assert "| onnxruntime | base | 1" in generate_docs.diff(copy, *stale[copy])
    monkeypatch.setattr(generate_docs, "documents", lambda: [copy])  # the CLI on the copy alone
    assert generate_docs.main(["--check"]) == 1
    assert "+| onnxruntime | base | " in capsys.readouterr().out
    assert copy.read_text() == edited  # --check writes nothing
    assert generate_docs.main([]) == 0
    assert copy.read_text() == text
    assert generate_docs.main(["--check"]) == 0


def test_an_unknown_section_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "x.md"
    path.write_text("<!-- BEGIN GENERATED no-such-table -->\n<!-- END GENERATED no-such-table -->\n")
    with pytest.raises(ValueError, match="unknown generated section 'no-such-table'"):
        generate_docs.updated(path.read_text(), path)


@pytest.mark.parametrize("path", RECORDS, ids=[p.name for p in RECORDS])
def test_record_names_date_command_machine_and_versions(path: Path) -> None:
    data = json.loads(path.read_text())
    assert data["date_utc"] and data["machine"]["cpu"]
    assert data["versions"]["onnxruntime"] and data["versions"]["onnx"]
    if path.name in EARLIER_FORMAT:
        assert data["script"] and data["machine"]["nproc"] >= 1
        return
    assert data["kind"] and data["command"]
    assert data["machine"]["cores"] >= 1 and data["versions"]["python"]
    assert data["machine"]["load_average_before"] is not None
    assert data["machine"]["load_average_after"] is not None


def test_record_upstream_reads_the_summary(tmp_path: Path) -> None:
    summary = tmp_path / "summary.txt"
    summary.write_text(
        "==> done in 181 s\n"
        "backend_reference: 98 passed, 0 failed, 100 skipped\n"
        "upstream: no report (the run crashed): 1 failed\n"
        "98 passed, 1 failed\n"
    )
    data = generate_docs.record_upstream(summary, "upstream/check.sh")
    assert data["suites"] == [
        {"name": "backend_reference", "passed": 98, "failed": 0, "skipped": 100},
        {"name": "upstream", "passed": 0, "failed": 1, "skipped": 0},
    ]
    assert data["total"] == {"passed": 98, "failed": 1} and data["seconds"] == 181
    summary.write_text("nothing here\n")
    with pytest.raises(ValueError, match="summary.txt: no 'suite: N passed"):
        generate_docs.record_upstream(summary, "upstream/check.sh")


def test_record_pytest_times_sums_per_file(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" tests="3" skipped="1" failures="0" errors="0" time="12.5" '
        'timestamp="2026-12-02T11:00:00">'
        '<testcase classname="tests.docs.test_spec" name="a" time="1.5"/>'
        '<testcase classname="tests.docs.test_spec.TestX" name="b" time="2.0"/>'
        '<testcase classname="tests.test_native" name="c" time="0.25"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    data = generate_docs.record_pytest_times(junit, "pytest -n 2")
    assert data["files"] == [
        {"file": "tests/docs/test_spec.py", "tests": 2, "seconds": 3.5},
        {"file": "tests/test_native.py", "tests": 1, "seconds": 0.25},
    ]
    assert data["totals"] == {"tests": 3, "skipped": 1, "failed": 0, "wall_seconds": 12.5}
    assert data["command"] == "pytest -n 2" and data["date_utc"] == "2026-12-02T11:00:00"
