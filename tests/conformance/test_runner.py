"""The conformance runner as a runtime author meets it: a crash or hang of one case is that case's
outcome and the run goes on; errors are classified (unsupported vs error) from the runtime's own
message; a malformed suite is an error naming the file, never a pass."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from toolkit import TESTS

from onnx_masked_rnn import cli
from onnx_masked_rnn.conformance import DATA_DIR, runner
from onnx_masked_rnn.conformance.backends import BUILTIN, missing_package
from onnx_masked_rnn.conformance.outcomes import classify_error
from onnx_masked_rnn.kernel import library

NODE_DIR = DATA_DIR / "node"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    return parser.parse_args(list(argv))


def _suite(tmp_path: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(NODE_DIR / name, tmp_path / "node" / name)
    return tmp_path


CASES = (
    "test_masked_gru_batch_1",
    "test_masked_rnn_batch_1",
    "test_masked_gru_defaults",
    "test_masked_lstm_batch_1",
)


@pytest.mark.parametrize(
    ("backend", "timeout", "detail"),
    [
        ("faulty_backends:Segfaulting", "600", "crashed: the backend's process killed by SIGSEGV"),
        (
            "faulty_backends:Hanging",
            "5",
            "crashed: no result after 5 s: the backend's process hung and was killed",
        ),
        ("faulty_backends:Raising", "600", "error: RuntimeError: the runtime cannot build this graph"),
    ],
)
def test_a_failing_case_costs_only_that_case(
    tmp_path: Path, capsys: pytest.CaptureFixture, backend: str, timeout: str, detail: str
) -> None:
    """The GRU cases die, hang or raise; each is reported so, and the worker process restarted
    after a death runs the RNN and LSTM cases that follow."""
    suite = _suite(tmp_path, *CASES)
    status = runner.run(_args("--backend", backend, "--timeout", timeout, str(suite)))
    out = capsys.readouterr().out
    assert status == 1
    for gru in ("test_masked_gru_batch_1", "test_masked_gru_defaults"):
        assert f"FAILED   {backend}: {gru}: {detail}" in out, out
    assert "2 failures, of which 0 are known limitations (known_limitations.json" in out
    assert out.strip().splitlines()[-1] == "2 passed, 2 failed, 0 skipped"


def test_readme_vendor_example_reports_missing_float64_kernels_as_unsupported(
    capsys: pytest.CaptureFixture,
) -> None:
    """README's command on the float64 cases: onnxruntime has no double LSTM/GRU/RNN kernel, which
    the native expansion needs; that is unsupported (skipped), and the command exits 0."""
    spec = "onnxruntime.backend.backend:OnnxRuntimeBackend"
    assert cli.main(["conformance", "--backend", spec, "--filter", "float64"]) == 0
    out = capsys.readouterr().out
    assert f"skipped  {spec}: 2 x onnxruntime's LSTM kernel does not support double" in out
    assert "1 x onnxruntime's GRU kernel does not support double" in out
    assert "1 x onnxruntime has no kernel for RNN with these types" in out
    assert re.fullmatch(r"\d+ passed, 0 failed, 4 skipped", out.strip().splitlines()[-1])


# Messages as the runtimes print them (onnxruntime 1.32, OpenVINO 2026.4, tract 0.23), shortened.
@pytest.mark.parametrize(
    ("message", "status", "detail"),
    [
        (
            "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : "
            "Could not find an implementation for RNN(14) node with name 'r'",
            "unsupported",
            "onnxruntime has no kernel for RNN with these types",
        ),
        (
            "Non-zero status code returned while running LSTM node. "
            "Status Message: LSTM operator does not support double yet",
            "unsupported",
            "onnxruntime's LSTM kernel does not support double",
        ),
        (
            "Model wasn't fully converted.\nSummary:\n"
            "-- No conversion rule found for operations: io.onnx_masked_rnn.MaskedGRU",
            "unsupported",
            "OpenVINO's ONNX frontend has no conversion for io.onnx_masked_rnn.MaskedGRU",
        ),
        (
            'Failed analyse for node #3 "Y" Unimplemented(MaskedLSTM)',
            "unsupported",
            "tract has no implementation of MaskedLSTM",
        ),
        (
            'Translating node #34 "LSTM" LSTM ToTypedTranslator\n\n'
            "Caused by:\n    Non constant seq_len is not supported",
            "unsupported",
            "tract's LSTM/GRU/RNN accept sequence_lens only as a constant",
        ),
        (
            "Subgraph must have the shape set for all outputs but h_next did not.",
            "error",
            "RuntimeError: Subgraph must have the shape set for all outputs but h_next did not.",
        ),
        (
            "Building node (Scan)\n\nCaused by:\n    graph input `h` has no type\n\n"
            "Stack backtrace:\n   0: x::parse",
            "error",
            "RuntimeError: Building node (Scan) | Caused by: | graph input `h` has no type",
        ),
    ],
)
def test_errors_are_classified_from_the_runtime_message(message: str, status: str, detail: str) -> None:
    outcome = classify_error(RuntimeError(message))
    assert (outcome.status, outcome.detail) == (status, detail)


def test_a_case_without_test_data_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    suite = _suite(tmp_path, "test_masked_rnn_batch_1")
    data = suite / "node" / "test_masked_rnn_batch_1" / "test_data_set_0"
    for pb in data.glob("output_*.pb"):
        pb.unlink()
    assert cli.main(["conformance", "--backend", "reference", str(suite)]) == 1
    assert f"{data}: no output_0.pb, so nothing to compare" in capsys.readouterr().err
    shutil.rmtree(data)
    assert cli.main(["conformance", "--backend", "reference", str(suite)]) == 1
    assert f"{data.parent}: no test_data_set_*/ folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"rtol": 0.001,', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"atol": "1e-3"}', "'atol' must be a number, got '1e-3'"),
    ],
)
def test_a_bad_data_json_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str
) -> None:
    suite = _suite(tmp_path, "test_masked_rnn_batch_1")
    path = suite / "node" / "test_masked_rnn_batch_1" / "data.json"
    path.write_text(text)
    assert cli.main(["conformance", "--backend", "reference", str(suite)]) == 1
    err = capsys.readouterr().err
    assert f"{path}: {message}" in err and len(err.strip().splitlines()) == 1


def test_all_means_every_installed_builtin_backend() -> None:
    names, notes = runner.backends_of(["all", "onnxruntime"])
    installed = [name for name in BUILTIN if missing_package(name) is None]
    assert names == installed
    assert len(notes) == len(BUILTIN) - len(installed)
    assert {"onnxruntime", "onnxruntime-noopt", "openvino", "tract"} <= set(names)  # the test extra has them


@pytest.mark.parametrize("built", [True, False])
def test_all_counts_the_kernel_as_installed_only_with_its_library(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, built: bool
) -> None:
    """With the library (or one named by its variable) the kernel is in ``all``; without it, it is
    left out with a note saying the library was not built."""
    path = tmp_path / library.LIBRARY_NAME
    if built:
        path.write_bytes(b"")
    monkeypatch.setenv(library.LIBRARY_ENV, str(path))
    names, notes = runner.backends_of(["all"])
    kernel_notes = [n for n in notes if "onnxruntime-kernel" in n]
    if built:
        assert "onnxruntime-kernel" in names and not kernel_notes
    else:
        assert "onnxruntime-kernel" not in names
        assert kernel_notes == [
            "--backend all: left out onnxruntime-kernel (its library was not built: "
            f"{library.LIBRARY_ENV}={str(path)!r}: no such file)"
        ]


def test_invalid_filter_and_timeout_are_usage_errors(capsys: pytest.CaptureFixture) -> None:
    for argument, message in (
        (["--filter", "("], "argument --filter: '(' is not a valid regular expression"),
        (["--timeout", "0"], "argument --timeout: must be a positive number of seconds, got '0'"),
        (["--timeout", "nan"], "argument --timeout: must be a positive number of seconds, got 'nan'"),
    ):
        with pytest.raises(SystemExit) as exit_:
            cli.main(["conformance", "--backend", "reference", *argument])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_an_unreadable_case_file_is_an_error_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    suite = _suite(tmp_path, "test_masked_rnn_batch_1", "test_masked_gru_batch_1")
    broken = suite / "node" / "test_masked_rnn_batch_1" / "test_data_set_0" / "output_1.pb"
    broken.write_bytes(b"\xff\xff not a tensor")
    assert cli.main(["conformance", "--backend", "reference", str(suite)]) == 1
    out = capsys.readouterr().out
    assert (
        f"FAILED   reference: test_masked_rnn_batch_1: error: cannot read the case: {broken}: not a readable"
        in out
    )
    assert out.strip().splitlines()[-1] == "1 passed, 1 failed, 0 skipped"


def test_without_backend_the_runner_uses_onnxruntime_and_the_references(
    capsys: pytest.CaptureFixture,
) -> None:
    assert cli.main(["conformance", "--filter", "^test_masked_rnn_batch_1"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:] if not line.startswith(" ")]
    assert rows[:3] == list(runner.DEFAULT_BACKENDS) == ["onnxruntime", "reference", "onnx-reference"]


# --- item 14: a backend module is imported in the backend's worker, once, within --timeout


def _conformance(*argv: str, timeout: float) -> subprocess.CompletedProcess:
    """``onnx-masked-rnn conformance ARGV`` in a child process that finds the test backends;
    ``TimeoutExpired`` when it runs past ``timeout`` seconds."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "onnx_masked_rnn", "conformance", *argv]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def test_a_backend_module_that_hangs_at_import_stops_the_run_within_the_timeout() -> None:
    """Imported in the main process, the module would block the run for its hour; in the worker,
    ``--timeout 3`` bounds it and the run ends with one line naming the module."""
    done = _conformance(
        "--backend",
        "backend_hanging_at_import:Backend",
        "--timeout",
        "3",
        "--filter",
        "_batch_1$",
        timeout=240,
    )
    assert done.returncode == 1, done
    assert done.stderr.splitlines() == [
        "onnx-masked-rnn conformance: error: --backend 'backend_hanging_at_import:Backend': "
        "backend module 'backend_hanging_at_import' did not import within 3 s"
    ], done.stderr


def test_a_backend_module_that_raises_at_import_is_one_line_naming_it(capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["conformance", "--backend", "backend_raising_at_import:Backend"]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "onnx-masked-rnn conformance: error: --backend 'backend_raising_at_import:Backend': cannot import "
        "'backend_raising_at_import': RuntimeError: the runtime found no device to initialise"
    ]
    assert "passed" not in captured.out  # no case ran


def test_a_backend_module_is_imported_once_per_backend_and_not_by_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The counting module writes the importing process's id to the log each time it is imported:
    one line for four cases, from a process other than this one."""
    log = tmp_path / "imports.log"
    monkeypatch.setenv("CONFORMANCE_IMPORT_LOG", str(log))
    suite = _suite(tmp_path, *CASES)
    assert cli.main(["conformance", "--backend", "backend_counting_imports:Backend", str(suite)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "4 passed, 0 failed, 0 skipped"
    pids = log.read_text().split()
    assert len(pids) == 1 and int(pids[0]) != os.getpid(), pids
    assert "backend_counting_imports" not in sys.modules


# --- item 15: --unsupported REGEX for a runtime the runner does not know


def test_unsupported_regex_classifies_a_runtimes_own_message(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """``faulty_backends:Lacking`` says "operator 'MaskedGRU' is not implemented", which no built-in
    pattern knows: an error, unless ``--unsupported`` matches it (then skipped, with its reason)."""
    suite = _suite(tmp_path, *CASES)
    assert cli.main(["conformance", "--backend", "faulty_backends:Lacking", str(suite)]) == 1
    out = capsys.readouterr().out
    assert (
        "FAILED   faulty_backends:Lacking: test_masked_gru_batch_1: error: RuntimeError: Failed to compile"
        in out
    )
    assert out.strip().splitlines()[-1] == "2 passed, 2 failed, 0 skipped"

    pattern = r"operator '\w+' is not implemented"
    argv = ["--unsupported", "no such text", "--unsupported", pattern]
    assert cli.main(["conformance", "--backend", "faulty_backends:Lacking", *argv, str(suite)]) == 0
    out = capsys.readouterr().out
    reason = f"matches --unsupported {pattern!r}: operator 'MaskedGRU' is not implemented"
    assert f"skipped  faulty_backends:Lacking: 2 x {reason}" in out.splitlines(), out
    assert out.strip().splitlines()[-1] == "2 passed, 0 failed, 2 skipped"


def test_unsupported_patterns_come_before_the_builtin_ones_and_only_match() -> None:
    pattern = re.compile(r"kernel \w+ missing")
    lacking = classify_error(RuntimeError("load failed:\nkernel Scan missing"), [pattern])
    assert (lacking.status, lacking.detail) == (
        "unsupported",
        f"matches --unsupported {pattern.pattern!r}: kernel Scan missing",
    )
    assert classify_error(RuntimeError("kernel crashed"), [pattern]).status == "error"
    # before the built-in patterns: onnxruntime's own message, given as unsupported by the user
    text = "Could not find an implementation for RNN(14) node"
    assert (
        classify_error(RuntimeError(text), [re.compile("RNN")]).detail == "matches --unsupported 'RNN': RNN"
    )


def test_an_invalid_unsupported_regex_is_a_usage_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["conformance", "--unsupported", "[a"])
    assert exit_.value.code == 2
    assert "argument --unsupported: '[a' is not a valid regular expression" in capsys.readouterr().err


# --- item 16: the report per variant, and which failures are known limitations


def _rows(out: str) -> dict[tuple[str, str], list[int]]:
    """The report's table: ``(backend, variant or "") -> [passed, wrong, error, crashed, unsupported]``."""
    rows, backend = {}, ""
    for line in out.splitlines():
        match = re.match(r"^(\S.*?|  \S.*?) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) ", line)
        if match:
            label = match.group(1)
            if not label.startswith(" "):
                backend = label
            rows[(backend, label.strip() if label.startswith(" ") else "")] = [
                int(n) for n in match.groups()[1:]
            ]
    return rows


def test_the_report_counts_each_variant(capsys: pytest.CaptureFixture) -> None:
    """Three cases in three variants each on the numpy reference, which runs the masked node and
    skips the expansions: the variant rows say so, and add up to the backend's row."""
    assert (
        cli.main(["conformance", "--backend", "reference", "--filter", "^test_masked_(gru|rnn|lstm)_batch_1"])
        == 0
    )
    rows = _rows(capsys.readouterr().out)
    assert rows == {
        ("reference", ""): [3, 0, 0, 0, 6],
        ("reference", "masked node"): [3, 0, 0, 0, 0],
        ("reference", "Scan expansion"): [0, 0, 0, 0, 3],
        ("reference", "native expansion"): [0, 0, 0, 0, 3],
    }


def test_the_report_says_which_failures_are_known_limitations(capsys: pytest.CaptureFixture) -> None:
    """OpenVINO on two Scan-expansion RNN cases of the shipped suite: ``defaults`` is wrong, a known
    limitation (known_limitations.json lists it with its defect), ``batch_1`` passes."""
    if missing_package("openvino"):
        pytest.skip("openvino is not installed (the test extra installs it)")
    status = cli.main(
        ["conformance", "--backend", "openvino", "--filter", "^test_masked_rnn_(defaults|batch_1)_expanded$"]
    )
    out = capsys.readouterr().out
    assert status == 1
    assert (
        "FAILED   openvino: test_masked_rnn_defaults_expanded: wrong: " in out
        and "(known limitation: openvino-scan-state-as-output)" in out
    ), out
    assert "1 failures, of which 1 are known limitations (known_limitations.json" in out
    assert _rows(out)[("openvino", "Scan expansion")] == [1, 1, 0, 0, 0]
    assert out.strip().splitlines()[-1] == "1 passed, 1 failed, 0 skipped"


# --- item 17: --list, one case folder, where a wrong case first differs


def _listing(out: str) -> dict[str, dict[str, str]]:
    """``--list``'s table (aligned columns under one-word headings): case -> {column: value}."""
    lines = out.strip().splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])] + [None]
    header = lines[0].split()
    rows = [{h: row[a:b].strip() for h, a, b in zip(header, starts, starts[1:])} for row in lines[1:-1]]
    return {row["case"]: row for row in rows}


def test_list_prints_what_each_case_covers(capsys: pytest.CaptureFixture) -> None:
    """The rows agree with how the case files define the cases (masked_lstm.py, masked_gru.py)."""
    assert (
        cli.main(
            [
                "conformance",
                "--list",
                "--filter",
                "^test_masked_(lstm_batchwise_reverse_zero|lstm_sequence_lens_reverse_zero|gru_float64)",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = _listing(out)
    assert out.strip().splitlines()[-1] == f"{len(rows)} cases" and len(rows) == 9
    lstm = rows["test_masked_lstm_batchwise_reverse_zero_expanded"]
    assert {k: lstm[k] for k in ("variant", "op", "direction", "layout", "mode", "activations", "dtype")} == {
        "variant": "Scan expansion",
        "op": "MaskedLSTM",
        "direction": "reverse",
        "layout": "1",
        "mode": "zero",
        "activations": "default",
        "dtype": "float32",
    }
    assert rows["test_masked_lstm_sequence_lens_reverse_zero"]["inputs"] == "B,sequence_lens"
    assert rows["test_masked_gru_float64_expanded_native"]["dtype"] == "float64"
    assert rows["test_masked_gru_float64_expanded_native"]["variant"] == "native expansion"


def test_dir_may_be_one_case_folder(capsys: pytest.CaptureFixture) -> None:
    folder = NODE_DIR / "test_masked_rnn_batch_1_expanded"
    assert cli.main(["conformance", "--backend", "onnxruntime", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "(1 cases)" in out and out.strip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
    assert cli.main(["conformance", "--list", str(folder)]) == 0
    assert list(_listing(capsys.readouterr().out)) == ["test_masked_rnn_batch_1_expanded"]


def test_a_wrong_case_says_which_output_step_and_row_differ_first(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A batch-major case (layout 1: Y is [batch, seq, directions, hidden]) whose expected Y is
    changed at (row 0, step 2) and (row 1, step 1): the first difference is the earlier step, row 1,
    read with the layout its masked node (beside the expanded variant) states."""
    names = ("test_masked_lstm_batchwise_forward_carry", "test_masked_lstm_batchwise_forward_carry_expanded")
    suite = _suite(tmp_path, *names)
    target = suite / "node" / names[1] / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(target))
    y = numpy_helper.to_array(tensor)
    expected = y.copy()
    expected[0, 2, 0, 1] += 1
    expected[1, 1, 0, 2] += 1
    target.write_bytes(numpy_helper.from_array(expected, tensor.name).SerializeToString())
    assert cli.main(["conformance", "--backend", "onnxruntime", str(suite)]) == 1
    out = capsys.readouterr().out
    want = f"{np.float32(expected[1, 1, 0, 2]).item():.9g}"
    line = next(ln for ln in out.splitlines() if ln.startswith("FAILED"))
    prefix = (
        f"FAILED   onnxruntime: {names[1]}: wrong: output 0 (Y): 2/{y.size} elements off, max |err| 1, "
        f"first at step 1, row 1, direction 0, hidden 2: expected {want}, got "
    )
    assert line.startswith(prefix), out
    assert np.isclose(float(line.removeprefix(prefix)), y[1, 1, 0, 2], rtol=1e-5, atol=1e-6)
