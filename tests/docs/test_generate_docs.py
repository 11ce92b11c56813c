"""Every generated section of README.md, proposal.md, docs/*.md and spec/*.md is what
``scripts/generate_docs.py`` writes from the code and the committed records (``docs/results/``,
``known_limitations.json``): a hand-edited number, or a record updated without regenerating, fails
here. CI does not re-measure; the records are checked for their provenance instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolkit import ROOT, load_script

generate_docs = load_script("scripts/generate_docs.py")

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


def test_upstream_record_is_what_summarize_prints(tmp_path: Path, monkeypatch, capsys) -> None:
    """upstream/summarize.py writes what it prints (one format), and the docs render that record."""
    summarize = load_script("upstream/summarize.py")
    (tmp_path / "1-scan.xml").write_text(
        '<testsuites><testsuite tests="200" failures="1" errors="1" skipped="100"/></testsuites>'
    )
    out = tmp_path / "upstream.json"
    argv = [str(tmp_path / "1-scan.xml"), str(tmp_path / "2-crashed.xml"), "--json", str(out)]
    argv += ["--onnx", "onnx 1.23.2 (source distribution)", "--base", "1.23.2", "--seconds", "181"]
    assert summarize.main([*argv, "--revision", "abc1234"]) == 1
    printed = capsys.readouterr().out.splitlines()
    assert printed == [
        "1-scan: 98 passed, 2 failed, 100 skipped",
        "2-crashed: no report (the run crashed): 1 failed",
        "98 passed, 3 failed",
    ]
    data = json.loads(out.read_text())
    assert data["kind"] == "upstream" and data["seconds"] == 181 and data["base"] == "1.23.2"
    assert data["suites"] == [
        {"name": "1-scan", "passed": 98, "failed": 2, "skipped": 100},
        {"name": "2-crashed", "passed": 0, "failed": 1, "skipped": 0},
    ]
    assert data["total"] == {"passed": 98, "failed": 3}
    monkeypatch.setattr(generate_docs, "RESULTS", tmp_path)
    table = generate_docs.render_upstream(tmp_path)
    assert "| 1-scan | 98 | 2 | 100 |" in table and "| **total** | 98 | 3 | |" in table
    assert "onnx 1.23.2 (source distribution) with the series at revision `abc1234` in 181 s" in table


def test_record_pytest_times_sums_per_file_and_renders(tmp_path: Path, monkeypatch) -> None:
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
    (tmp_path / "pytest_times.json").write_text(json.dumps(data))
    monkeypatch.setattr(generate_docs, "RESULTS", tmp_path)
    summary = generate_docs.render_pytest_times_summary(tmp_path)
    assert summary.startswith("3 tests (1 skipped, 0 failed) in 12 s wall; the slowest files: ")
    assert "`tests/docs/test_spec.py` 4 s, `tests/test_native.py` 0 s" in summary
    table = generate_docs.render_pytest_times(tmp_path)
    assert table.index("| `tests/docs/test_spec.py` | 2 | 3.5 |") < table.index(
        "| `tests/test_native.py` | 1 | 0.2 |"
    )


def test_kernel_speed_renders_the_targets_of_a_kernel_bench_record(tmp_path: Path, monkeypatch) -> None:
    """A small synthetic ``bench --variants kernel 'gemm floor' --json`` record: each target's worst
    ratio per op and thread count with its quartiles and verdict, the Gemm floor's range, memory."""

    def row(op, shape, mask, ratio, quartiles, floor):
        key = f"{op} {'x'.join(map(str, shape))} {mask} 1t"
        common = {"key": key, "op": op, "shape": list(shape), "mask": mask, "threads": 1}
        return [
            common | {"variant": "native op", "median_ms": 10.0, "ratio": 1.0},
            common
            | {"variant": "kernel", "median_ms": 10.0 * ratio, "ratio": ratio}
            | {"ratio_quartiles": quartiles, "ratio_to_gemm_floor": floor},
        ]

    results = [
        *row("LSTM", (100, 32, 64, 128), "right_padded", 0.70, [0.68, 0.72], 1.9),
        *row("LSTM", (100, 32, 64, 128), "all_true", 1.02, [0.98, 1.05], 1.5),
        *row("LSTM", (1000, 1, 64, 256), "all_true", 1.20, [1.10, 1.30], 3.4),
        *row("GRU", (100, 32, 64, 128), "all_true", 0.85, [0.80, 0.90], 1.6),
    ]
    memory = [
        {"key": "LSTM 100x32x64x128 holes 1t", "op": "LSTM", "shape": [100, 32, 64, 128], "mask": "holes"}
        | {"threads": 1, "variant": variant, "peak_mb": mb, "ratio": mb / 10.0}
        for variant, mb in (("native op", 10.0), ("kernel", 10.5))
    ]
    record = {
        "kind": "bench",
        "date_utc": "2026-12-02T19:40:00Z",
        "command": "onnx-masked-rnn bench --variants kernel 'gemm floor'",
        "machine": {"cpu": "a CPU", "cores": 2, "load_average_before": 0.1, "load_average_after": 0.2},
        "versions": {"onnxruntime": "1.32.0"},
        "config": {"shapes": [[100, 32, 64, 128], [1000, 1, 64, 256]], "masks": ["all_true", "right_padded"]}
        | {"threads": [1], "repeat": 20, "warmup": 3},
        "results": results,
        "memory": memory,
    }
    (tmp_path / "kernel_bench.json").write_text(json.dumps(record))
    monkeypatch.setattr(generate_docs, "RESULTS", tmp_path)
    lines = generate_docs.render_kernel_speed(tmp_path).splitlines()
    assert lines[0] == "| target | threads | LSTM | GRU |"
    assert "| right-padded, N >= 32: <= 0.80x the native op | 1 | 0.70x [0.68, 0.72] met | - |" in lines
    assert (
        "| all true, N > 1: <= 1.00x the native op | 1 | 1.02x [0.98, 1.05] within the noise "
        "| 0.85x [0.80, 0.90] met |"
    ) in lines
    assert "| batch 1: <= 1.05x the native op | 1 | 1.20x [1.10, 1.30] MISSED | - |" in lines
    assert "| ratio to the Gemm floor (goal <= 1.25x) | 1 | 1.50x to 3.40x | 1.60x |" in lines
    assert "| peak memory: <= 1.10x the native op's | 1 | 1.05x met | - |" in lines
    assert (
        "Recorded 2026-12-02 by `onnx-masked-rnn bench --variants kernel 'gemm floor'` on a CPU" in lines[-1]
    )
