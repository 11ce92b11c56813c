"""The conformance runner as a runtime author meets it: a crash or hang of one case is that case's
outcome and the run goes on; errors are classified (unsupported vs error) from the runtime's own
message; a malformed suite is an error naming the file, never a pass."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

from onnx_masked_rnn import cli
from onnx_masked_rnn.conformance import DATA_DIR, runner
from onnx_masked_rnn.conformance.backends import BUILTIN, missing_package
from onnx_masked_rnn.conformance.outcomes import classify_error

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
    assert names == installed and not notes
    assert {"onnxruntime", "onnxruntime-noopt", "openvino", "tract"} <= set(names)  # the test extra has them


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
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:5]]
    assert rows == list(runner.DEFAULT_BACKENDS) == ["onnxruntime", "reference", "onnx-reference"]
