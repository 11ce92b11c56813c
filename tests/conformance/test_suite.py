"""The conformance suite: shipped data is current and covers what it claims; the runner counts,
filters and loads vendor backends; onnx's own backend-test machinery runs the suite on
``onnxruntime.backend``, as onnxruntime's CI runs onnx's node tests."""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import sys
import unittest
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from toolkit import parse_tensor, same_output

from onnx_masked_rnn import cli
from onnx_masked_rnn.attributes import ACTIVATIONS, MASKED_OUTPUT_MODES, parse_node, round_to_float32
from onnx_masked_rnn.conformance import DATA_DIR, runner
from onnx_masked_rnn.conformance.generate import MANIFEST, generate
from onnx_masked_rnn.conformance.suite import VARIANTS, load_cases

NODE_DIR = DATA_DIR / "node"
BASE_CASES = sorted(
    p.name for p in NODE_DIR.iterdir() if not p.name.endswith(("_expanded", "_expanded_native"))
)
OPS = ("MaskedLSTM", "MaskedGRU", "MaskedRNN")


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_shipped_data_is_current(regenerated_suite: tuple[Path, int, str]) -> None:
    """Regenerating with ``onnx-masked-rnn generate-tests`` gives the shipped suite: models,
    inputs and data.json byte for byte, outputs within ``toolkit.OUTPUT_ULPS`` ulps (see there)."""
    folder, status, out = regenerated_suite
    assert status == 0
    assert f"wrote {len(BASE_CASES) * len(VARIANTS)} test cases" in out
    fresh, shipped = _tree(folder), _tree(DATA_DIR)
    assert sorted(fresh) == sorted(shipped), "case files differ: run `onnx-masked-rnn generate-tests`"
    stale = [
        name
        for name in fresh
        if fresh[name] != shipped[name]
        and not (Path(name).name.startswith("output_") and same_output(fresh[name], shipped[name]))
    ]
    assert not stale, f"{len(stale)} stale files, e.g. {stale[:3]}: run `onnx-masked-rnn generate-tests`"


def test_shipped_outputs_are_compared_within_ulps() -> None:
    """The output comparison accepts a last-bits difference and nothing a case could notice."""
    target = NODE_DIR / "test_masked_rnn_batch_1" / "test_data_set_0" / "output_0.pb"
    tensor = parse_tensor(target.read_bytes())
    y = numpy_helper.to_array(tensor)

    def changed(values: np.ndarray) -> bytes:
        return numpy_helper.from_array(values.astype(y.dtype), tensor.name).SerializeToString()

    assert same_output(changed(y + 4 * np.spacing(np.abs(y))), target.read_bytes())
    assert not same_output(changed(y + 64 * np.spacing(np.abs(y))), target.read_bytes())
    assert not same_output(changed(y * (1 + 1e-5)), target.read_bytes())
    assert not same_output(
        changed(np.where(np.arange(y.size).reshape(y.shape) == 0, np.nan, y)), target.read_bytes()
    )
    assert not same_output(numpy_helper.from_array(y, "renamed").SerializeToString(), target.read_bytes())


def test_generate_removes_stale_cases(tmp_path: Path) -> None:
    """A case folder an earlier run wrote (listed in its manifest) and this run does not is removed."""
    (tmp_path / "node" / "test_masked_gone").mkdir(parents=True)
    (tmp_path / "node" / "test_masked_gone" / "model.onnx").write_bytes(b"")
    (tmp_path / MANIFEST).write_text("test_masked_gone\n")
    with mock.patch("onnx_masked_rnn.conformance.generate.collect_cases", return_value=[]):
        assert generate(tmp_path) == 0
    assert not (tmp_path / "node" / "test_masked_gone").exists()


def _mask_patterns(m: np.ndarray) -> set[str]:
    """The patterns a time-major [T, N] mask shows."""
    if m.all():
        return {"all_true"}
    if not m.any():
        return {"all_masked"}
    kinds = set()
    if (~m).all(axis=0).any():
        kinds.add("one_row_masked")
    if (m[:-1] >= m[1:]).all():
        kinds.add("right_padded")
    elif (m[:-1] <= m[1:]).all():
        kinds.add("left_padded")
    else:
        kinds.add("holes")
    return kinds


def _facts(case: str) -> set[str]:
    """What one shipped non-expanded case exercises, read from its model and data."""
    model = onnx.load(str(NODE_DIR / case / "model.onnx"))
    (node,) = model.graph.node
    attrs = parse_node(node)
    data = NODE_DIR / case / "test_data_set_0"
    values = {
        info.name: numpy_helper.to_array(onnx.load_tensor(str(data / f"input_{i}.pb")))
        for i, info in enumerate(model.graph.input)
    }
    named = {spec_name: values[v] for spec_name, v in zip(attrs.spec.inputs, node.input) if v}
    op = node.op_type
    facts = {
        f"{op}:direction={attrs.direction}",
        f"{op}:layout={attrs.layout}",
        f"{op}:masked_output={attrs.masked_output}",
        f"{op}:dtype={named['X'].dtype}",
    }
    facts |= {f"{op}:has_{n}" if n in named else f"{op}:lacks_{n}" for n in attrs.spec.inputs[3:]}
    facts |= {f"{op}:omits_{o}" for o in attrs.spec.outputs if o not in node.output}
    X = named["X"] if attrs.layout == 0 else named["X"].transpose(1, 0, 2)
    T, N = X.shape[:2]
    facts |= {f"{op}:batch_1"} if N == 1 else set()
    facts |= {f"{op}:seq_length_1"} if T == 1 else set()
    effective = np.ones((T, N), bool)
    if "mask" in named:
        mask = named["mask"] if attrs.layout == 0 else named["mask"].T
        facts |= {f"{op}:mask={kind}" for kind in _mask_patterns(mask)}
        effective &= mask
    if "sequence_lens" in named:
        facts.add(f"{op}:sequence_lens_with_mask" if "mask" in named else f"{op}:sequence_lens_alone")
        effective &= np.arange(T)[:, None] < named["sequence_lens"][None, :]
    nan = np.isnan(X).any(axis=-1)
    if nan.any() and not (nan & effective).any():
        facts.add(f"{op}:nan_at_masked_steps")
    facts |= {f"{op}:nonzero_{s}" for s in ("initial_h", "initial_c") if s in named and named[s].any()}
    if attrs.clip is not None:
        facts.add(f"{op}:clip")
    if op == "MaskedLSTM":
        facts.add(f"{op}:input_forget={attrs.input_forget}")
    if op == "MaskedGRU":
        facts.add(f"{op}:linear_before_reset={attrs.linear_before_reset}")
    given = {attribute.name for attribute in node.attribute}
    for act in (a for acts in attrs.activations for a in acts):
        facts.add(f"activation={act.name}")
        takes_alpha, takes_beta, alpha, beta = ACTIVATIONS[act.name]
        if not (takes_alpha or takes_beta):
            continue
        if not {"activation_alpha", "activation_beta"} & given:
            facts.add(f"activation={act.name}:default_parameters")
        elif (takes_alpha and act.alpha != round_to_float32(alpha)) or (
            takes_beta and act.beta != round_to_float32(beta)
        ):
            facts.add(f"activation={act.name}:non_default_parameters")
    if case == "test_masked_lstm_seed000_embedding_carry":
        if attrs.layout == 1 and attrs.masked_output == "carry" and _mask_patterns(mask) == {"right_padded"}:
            facts.add("seed000")
    return facts


def _required() -> set[str]:
    required = {"seed000"}
    for op in OPS:
        inputs = {"MaskedLSTM": ("B", "sequence_lens", "initial_h", "initial_c", "P", "mask")}.get(
            op, ("B", "sequence_lens", "initial_h", "mask")
        )
        required |= {f"{op}:direction={d}" for d in ("forward", "reverse", "bidirectional")}
        required |= {f"{op}:layout={i}" for i in (0, 1)}
        required |= {f"{op}:masked_output={m}" for m in MASKED_OUTPUT_MODES}
        required |= {f"{op}:{p}_{n}" for n in inputs for p in ("has", "lacks")}
        required |= {f"{op}:mask={k}" for k in ("all_true", "right_padded", "left_padded", "holes")}
        required |= {f"{op}:mask={k}" for k in ("one_row_masked", "all_masked")}
        required |= {
            f"{op}:sequence_lens_alone",
            f"{op}:sequence_lens_with_mask",
            f"{op}:nan_at_masked_steps",
        }
        required |= {f"{op}:nonzero_initial_h", f"{op}:batch_1", f"{op}:seq_length_1", f"{op}:clip"}
        required |= {f"{op}:dtype={t}" for t in ("float16", "float32", "float64")}
        required |= {f"{op}:omits_Y", f"{op}:omits_Y_h"}
    required |= {"MaskedLSTM:nonzero_initial_c", "MaskedLSTM:input_forget=1", "MaskedLSTM:has_P"}
    required |= {"MaskedGRU:linear_before_reset=0", "MaskedGRU:linear_before_reset=1"}
    required |= {f"activation={a}" for a in ACTIVATIONS}
    required |= {
        f"activation={a}:{kind}_parameters"
        for a, (ta, tb, *_) in ACTIVATIONS.items()
        if ta or tb
        for kind in ("default", "non_default")
    }
    return required


def test_coverage() -> None:
    """The suite covers every attribute value, optional input, mask pattern, dtype and edge case
    the issue lists, read from the shipped cases themselves, in all three variants."""
    assert len(BASE_CASES) >= 100
    for case in BASE_CASES:
        for suffix in (v.suffix for v in VARIANTS.values()):
            assert (NODE_DIR / f"{case}{suffix}" / "model.onnx").is_file(), f"{case}{suffix} missing"
    facts = set().union(*(_facts(case) for case in BASE_CASES))
    missing = sorted(_required() - facts)
    assert not missing, f"the conformance suite no longer covers {missing}"


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    return parser.parse_args(list(argv))


def _copy_cases(tmp_path: Path, pattern: str) -> Path:
    for case in NODE_DIR.iterdir():
        if re.search(pattern, case.name):
            shutil.copytree(case, tmp_path / "node" / case.name)
    return tmp_path


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_runner_counts_a_corrupted_output_as_failed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    suite = _copy_cases(tmp_path, r"^test_masked_gru_(forward_carry|defaults)(_expanded)?$")
    target = suite / "node" / "test_masked_gru_forward_carry" / "test_data_set_0" / "output_1.pb"
    tensor = onnx.load_tensor(str(target))
    target.write_bytes(
        numpy_helper.from_array(numpy_helper.to_array(tensor) + 0.01, tensor.name).SerializeToString()
    )
    status = runner.run(_args("--backend", "onnxruntime", "--backend", "reference", str(suite)))
    out = capsys.readouterr().out
    assert status == 1
    # onnxruntime: 3 passed, 1 failed; reference: 1 passed, 1 failed, the 2 expanded variants skipped
    assert _last_line(out) == "4 passed, 2 failed, 2 skipped"
    for backend in ("onnxruntime", "reference"):
        case = f"{backend}: test_masked_gru_forward_carry"
        line = (
            rf"^FAILED +{case}: wrong: output 1 \(Y_h\): 6/6 elements off, max \|err\| 0\.01, "
            r"first at row 0, direction 0, hidden 0: expected \S+, got \S+$"
        )
        assert re.search(line, out, re.M), out


def test_runner_applies_the_case_tolerance(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """data.json's atol decides: a 1e-3 deviation fails at the shipped tolerance, passes at 1e-2."""
    suite = _copy_cases(tmp_path, r"^test_masked_rnn_defaults$")
    case = suite / "node" / "test_masked_rnn_defaults"
    target = case / "test_data_set_0" / "output_0.pb"
    tensor = onnx.load_tensor(str(target))
    target.write_bytes(
        numpy_helper.from_array(numpy_helper.to_array(tensor) + 1e-3, tensor.name).SerializeToString()
    )
    assert runner.run(_args("--backend", "reference", str(suite))) == 1
    (case / "data.json").write_text('{"rtol": 0, "atol": 1e-2}')
    assert runner.run(_args("--backend", "reference", str(suite))) == 0
    assert _last_line(capsys.readouterr().out) == "1 passed, 0 failed, 0 skipped"


def test_runner_filter_and_skips(capsys: pytest.CaptureFixture) -> None:
    backends = ["--backend", "onnxruntime", "--backend", "reference", "--backend", "onnx-reference"]
    status = cli.main(["conformance", *backends, "--filter", r"^test_masked_lstm_reverse_zero"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "(3 cases)" in out
    assert re.search(r"^reference +1 +0 +0 +0 +2 ", out, re.M)  # passed wrong error crashed unsupported
    assert "skipped  reference: 2 x expanded variant" in out
    passed, skipped = (int(n) for n in re.findall(r"\d+", _last_line(out))[::2])
    assert _last_line(out) == f"{passed} passed, 0 failed, {skipped} skipped"
    assert passed + skipped == 9 and passed >= 5


@pytest.mark.parametrize("spec", ["onnxruntime.backend.backend:OnnxRuntimeBackend", "onnxruntime.backend"])
def test_runner_loads_a_vendor_backend(spec: str, capsys: pytest.CaptureFixture) -> None:
    """--backend module:Class (or a module) with onnx's Backend interface: onnxruntime's own."""
    status = runner.run(_args("--backend", spec, "--filter", "_gru_batch_1"))
    out = capsys.readouterr().out
    assert status == 0, out
    assert re.search(rf"^{re.escape(spec)} +3 +0 +0 +0 +0 ", out, re.M)
    assert _last_line(out) == "3 passed, 0 failed, 0 skipped"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "no_such_module:Backend"], "cannot import"),
        (["--backend", "onnx:Backend2"], "has no attribute"),
        (["--backend", "onnx:load"], "lacks ['prepare', 'supports_device']"),
        (["--filter", "^nothing$"], "no conformance case"),
    ],
)
def test_runner_rejects_bad_arguments(argv: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        runner.run(_args(*argv))


def test_backend_test_machinery_runs_the_suite_on_onnxruntime_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """onnx's ``BackendTest`` (what onnxruntime's CI runs onnx's node tests with), fed the shipped
    suite through onnx's loader interface, runs every variant on ``onnxruntime.backend``."""
    import onnx.backend.test.runner as backend_runner
    import onnxruntime.backend
    from onnx.backend.test import BackendTest

    # What ALLOW_RELEASED_ONNX_OPSET_ONLY=0 does when set before onnxruntime.backend is imported
    # (the runner sets it; here the module may already be imported): accept the custom domain.
    monkeypatch.setattr(onnxruntime.backend.backend.OnnxRuntimeBackend, "allowReleasedOpsetsOnly", False)
    cases = load_cases(DATA_DIR)

    def load_model_tests(data_dir: str = "", kind: str | None = None) -> list:
        return cases if kind == "node" else []

    with mock.patch.object(backend_runner, "load_model_tests", load_model_tests):
        backend_test = BackendTest(onnxruntime.backend, __name__)
    # As onnxruntime's CI excludes onnx node tests it cannot run: its CPU LSTM/GRU/RNN kernels have
    # no double implementation, which the native expansion of a float64 case needs.
    no_double = r"_float64.*_expanded_native_cpu$"
    backend_test.exclude(no_double)
    with open(os.devnull, "w") as devnull:
        result = unittest.TextTestRunner(stream=devnull, verbosity=0).run(backend_test.test_suite)
    problems = [
        f"{test.id()}: {err.strip().splitlines()[-1]}" for test, err in result.failures + result.errors
    ]
    assert not problems, problems
    excluded = [c.name for c in cases if re.search(no_double, c.name + "_cpu")]
    assert result.testsRun == 2 * len(cases)  # a CPU and a CUDA test per case
    assert excluded and len(result.skipped) == len(cases) + len(excluded)  # + CUDA: unsupported device


def test_every_shipped_model_passes_the_onnx_checker() -> None:
    """Each model is valid ONNX as onnx's full checker (with shape inference) sees it."""
    problems = []
    for case in sorted(NODE_DIR.iterdir()):
        try:
            onnx.checker.check_model(onnx.load(str(case / "model.onnx")), full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
            problems.append(f"{case.name}: {str(exc).splitlines()[0]}")
    assert not problems, problems


def test_runner_shows_progress_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, expected in ((io.StringIO(), ""), (Terminal(), "1/3 reference: test_masked_rnn_batch_1")):
        monkeypatch.setattr(sys, "stderr", stream)
        assert runner.run(_args("--backend", "reference", "--filter", "rnn_batch_1")) == 0
        assert expected in stream.getvalue() and (expected or not stream.getvalue())
