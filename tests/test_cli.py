"""The command line's own work: ``inline`` reads, expands and writes a model; ``generate-tests``
writes whole case folders and deletes only what it wrote. Every failure is one line on stderr
naming the file or argument, exit status 2 for usage and 1 for failures, no traceback, and no file
left behind. (``generate-tests`` also runs in the conformance tests' stale-data check,
``conformance`` in the runner tests, ``bench --quick`` in the native tests.)"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper
from toolkit import run, same_output

from onnx_masked_rnn import DOMAIN, cli
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.conformance import DATA_DIR
from onnx_masked_rnn.conformance.generate import MANIFEST

CASE = "test_masked_lstm_reverse_zero"


@pytest.mark.parametrize(
    "options",
    [["--strategy", "scan"], ["--strategy", "scan", "--scan-form", "capture"], ["--strategy", "native"]],
    ids=["scan-portable", "scan-capture", "native"],
)
def test_inline_writes_a_standard_model_with_the_same_outputs(tmp_path, options, capsys):
    case = DATA_DIR / "node" / CASE
    out = tmp_path / "inlined.onnx"
    assert cli.main(["inline", str(case / "model.onnx"), str(out), *options]) == 0
    assert str(out) in capsys.readouterr().out
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert all(node.domain != DOMAIN for node in model.graph.node)
    scans = [n for n in walk_nodes(model.graph.node) if n.op_type == "Scan"]
    if "--scan-form" in options:  # capture: the Scan body reads values it does not define
        body = next(a.g for a in scans[0].attribute if a.name == "body")
        defined = {i.name for i in body.input} | {o for n in body.node for o in n.output}
        assert {i for n in body.node for i in n.input if i} - defined
    elif scans:  # portable: every body input typed
        bodies = [a.g for n in scans for a in n.attribute if a.name == "body"]
        assert all(i.type.tensor_type.elem_type for g in bodies for i in g.input)
    data = case / "test_data_set_0"
    inputs = {
        i.name: numpy_helper.to_array(onnx.load_tensor(data / f"input_{k}.pb"))
        for k, i in enumerate(model.graph.input)
    }
    expected = [
        numpy_helper.to_array(onnx.load_tensor(data / f"output_{k}.pb"))
        for k in range(len(model.graph.output))
    ]
    actual = run(out, inputs)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert abs(a - e).max() <= 1e-5


MODEL = DATA_DIR / "node" / CASE / "model.onnx"


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _denied(*args, **kwargs):
    raise PermissionError(errno.EACCES, "Permission denied")


def _runtime_failure(*args, **kwargs):
    raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL : first line\nStack trace:\n  frame 1\n  frame 2")


# kind -> (argv with {d} for the test's folder, set-up of the folder, monkeypatch or None,
#          exit status, text the one-line message must hold)
FAILURES = {
    "missing input": (["inline", "{d}/missing.onnx", "{d}/out.onnx"], {}, None, 1, "missing.onnx"),
    "directory input": (["inline", "{d}/dir", "{d}/out.onnx"], {"dir/": b""}, None, 1, "dir: is a directory"),
    "corrupt input": (
        ["inline", "{d}/bad.onnx", "{d}/out.onnx"],
        {"bad.onnx": bytes(range(256)) * 3},
        None,
        1,
        "bad.onnx: not an ONNX model",
    ),
    "text input": (
        ["inline", "{d}/text.onnx", "{d}/out.onnx"],
        {"text.onnx": b"hello, not a model\n"},
        None,
        1,
        "text.onnx: not an ONNX model",
    ),
    "empty input": (
        ["inline", "{d}/empty.onnx", "{d}/out.onnx"],
        {"empty.onnx": b""},
        None,
        1,
        "empty.onnx: not an ONNX model",
    ),
    "output under a file": (
        ["inline", str(MODEL), "{d}/file/out.onnx"],
        {"file": b"x"},
        None,
        1,
        "out.onnx: cannot write here",
    ),
    "output folder missing": (
        ["inline", str(MODEL), "{d}/nowhere/out.onnx"],
        {},
        None,
        1,
        "out.onnx: cannot write here",
    ),
    "output is a directory": (
        ["inline", str(MODEL), "{d}/dir"],
        {"dir/": b""},
        None,
        1,
        "dir: is a directory",
    ),
    "output not writable": (
        ["inline", str(MODEL), "{d}/out.onnx"],
        {},
        ("tempfile.mkstemp", _denied),
        1,
        "out.onnx: Permission denied",
    ),
    "full disk on inline": (
        ["inline", str(MODEL), "{d}/out.onnx"],
        {},
        ("os.fsync", _no_space),
        1,
        "out.onnx: No space left on device",
    ),
    "an unexpected error of many lines": (
        ["inline", str(MODEL), "{d}/out.onnx"],
        {},
        (cli, "inline", _runtime_failure),
        1,
        "unexpected RuntimeError: [ONNXRuntimeError] : 1 : FAIL : first line",
    ),
    "invalid --filter": (["conformance", "--filter", "("], {}, None, 2, "argument --filter"),
    "unknown --strategy": (
        ["inline", str(MODEL), "{d}/out.onnx", "--strategy", "fast"],
        {},
        None,
        2,
        "argument --strategy: invalid choice: 'fast'",
    ),
    "generate-tests into a file": (
        ["generate-tests", "{d}/file"],
        {"file": b"x"},
        None,
        1,
        "file: is a file, not a directory",
    ),
    "generate-tests over a folder it did not write": (
        ["generate-tests", "{d}"],
        {"node/test_masked_lstm_defaults/keep.txt": b"mine"},
        None,
        1,
        "test_masked_lstm_defaults: not written by generate-tests",
    ),
    "full disk on generate-tests": (
        ["generate-tests", "{d}/suite"],
        {},
        ("os.fsync", _no_space),
        1,
        f"suite/{MANIFEST}: No space left on device",
    ),
}


@pytest.mark.usefixtures("shared_suite_build")
@pytest.mark.parametrize("kind", list(FAILURES))
def test_a_failure_is_one_line_naming_the_file_or_argument(kind, tmp_path, monkeypatch, capsys):
    argv, files, patch, status, message = FAILURES[kind]
    for name, data in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir() if name.endswith("/") else path.write_bytes(data)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    if patch:
        monkeypatch.setattr(*patch)
    argv = [a.format(d=tmp_path) for a in argv]
    with pytest.raises(SystemExit) if status == 2 else _returns() as outcome:
        outcome.value = cli.main(argv)
    code = outcome.value.code if status == 2 else outcome.value
    out, err = capsys.readouterr()
    assert code == status, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"onnx-masked-rnn {argv[0]}: error:"), err
    assert message in err, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before, "files changed"
    assert {p for p in tmp_path.rglob("*")} == {tmp_path / n.rstrip("/") for n in _parents(files)}, (
        "a file or folder was left behind"
    )


class _returns:
    """``with _returns() as r: r.value = f()``: the counterpart of ``pytest.raises`` for a return."""

    value = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _parents(files: dict[str, bytes]) -> set[str]:
    names = set()
    for name in files:
        parts = Path(name.rstrip("/")).parts
        names.update(str(Path(*parts[: i + 1])) for i in range(len(parts)))
    return names


def test_the_command_line_prints_no_traceback_on_a_corrupt_model(tmp_path):
    """The same through the installed entry point, in a child process: one line on stderr, status 1."""
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage" * 10)
    done = subprocess.run(
        [sys.executable, "-m", "onnx_masked_rnn", "inline", str(bad), str(tmp_path / "out.onnx")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [done.stderr.strip()] and "bad.onnx" in done.stderr
    assert not (tmp_path / "out.onnx").exists()


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True
    )
    return done.returncode == 0


@pytest.mark.usefixtures("shared_suite_build")
def test_a_real_full_disk_leaves_no_partial_output(tmp_path, capsys):
    """On a 300 kB tmpfs, ``generate-tests`` fails after some cases and ``inline`` onto the filled
    disk fails: every file left is whole (a case folder complete, or absent), no temporary file stays."""
    disk = tmp_path / "disk"
    if not _mount_tmpfs(disk, "300k"):
        pytest.skip("mounting a tmpfs needs root and mount(8); the monkeypatched full-disk cases still ran")
    try:
        assert cli.main(["generate-tests", str(disk / "suite")]) == 1
        err = capsys.readouterr().err
        assert "No space left on device" in err and str(disk / "suite") in err, err
        node = disk / "suite" / "node"
        written = [d for d in node.iterdir() if d.is_dir()]
        assert written, "the disk should have held a few cases"
        for case_dir in written:
            assert not case_dir.name.startswith("."), f"temporary folder left: {case_dir}"
            shipped = DATA_DIR / "node" / case_dir.name
            assert _files(case_dir) == _files(shipped), f"{case_dir.name} is incomplete"
            for name in _files(case_dir):
                if (case_dir / name).is_file():
                    fresh, kept = (case_dir / name).read_bytes(), (shipped / name).read_bytes()
                    # outputs are the reference's: reproducible within ulps across numpy versions
                    is_output = Path(name).name.startswith("output_")
                    assert fresh == kept or (is_output and same_output(fresh, kept)), name
        shutil.rmtree(disk / "suite")
        with pytest.raises(OSError, match="No space"):  # fill the disk up
            with open(disk / "filler", "wb") as filler:
                for _ in range(1000):
                    filler.write(b"\0" * 4096)
                    filler.flush()
        assert cli.main(["inline", str(MODEL), str(disk / "out.onnx")]) == 1
        assert "out.onnx: No space left on device" in capsys.readouterr().err
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.usefixtures("shared_suite_build")
def test_generate_tests_replaces_only_its_own_folders(tmp_path):
    """A second run replaces the folders the first wrote and removes those it no longer writes;
    a folder and a file of the user's in ``node/`` are left alone."""
    from unittest import mock

    from onnx_masked_rnn.conformance import generate as generate_module

    node = tmp_path / "node"
    (node / "test_mine").mkdir(parents=True)
    (node / "test_mine" / "model.onnx").write_bytes(b"the user's")
    (node / "notes.txt").write_text("the user's")
    cases = generate_module.collect_cases()
    with mock.patch.object(generate_module, "collect_cases", return_value=cases[:2]):
        assert generate_module.generate(tmp_path) == 6
    first = sorted((tmp_path / MANIFEST).read_text().split())
    assert len(first) == 6 and all((node / n / "model.onnx").is_file() for n in first)
    with mock.patch.object(generate_module, "collect_cases", return_value=cases[1:2]):
        assert generate_module.generate(tmp_path) == 3
    second = sorted((tmp_path / MANIFEST).read_text().split())
    assert len(second) == 3 and set(second) < set(first)
    assert sorted(p.name for p in node.iterdir()) == sorted([*second, "test_mine", "notes.txt"])
    assert (node / "test_mine" / "model.onnx").read_bytes() == b"the user's"


def test_inline_says_when_there_is_nothing_to_expand(tmp_path, capsys):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph), tmp_path / "plain.onnx")
    assert cli.main(["inline", str(tmp_path / "plain.onnx"), str(tmp_path / "out.onnx")]) == 0
    out = capsys.readouterr().out
    assert "has no masked node: nothing to expand" in out, out
    assert onnx.load(tmp_path / "out.onnx").graph == graph


def test_bench_help_shows_user_text_only(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "issue" not in text.lower() and "--shapes" in text and "100,32,64,128" in text
