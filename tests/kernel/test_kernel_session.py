"""``onnx_masked_rnn.kernel``'s Python side: ``library_path``, ``register``, ``session`` (its model
forms, masked nodes in subgraphs and local functions, the fallback for a node the kernel does not
cover and its message) and what an install without the kernel says."""

from __future__ import annotations

import ctypes
import os
import shutil
import site
import subprocess
import sys
import warnings
from pathlib import Path

import kernel_cases
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

import onnx_masked_rnn
from onnx_masked_rnn import DOMAIN, kernel, reference
from onnx_masked_rnn.kernel import inference_session, library

T, N, I, H = 5, 3, 4, 6


def _weights(rng, gates, inputs):
    return (rng.standard_normal((1, gates * H, inputs)) * 0.4).astype(np.float32)


def chained_model():
    """MaskedLSTM -> Squeeze -> MaskedGRU (the GRU's X type known only by inference), the inputs
    and the reference's outputs."""
    rng = np.random.default_rng(0)
    W1, R1, W2, R2 = _weights(rng, 4, I), _weights(rng, 4, H), _weights(rng, 3, H), _weights(rng, 3, H)
    X = rng.standard_normal((T, N, I)).astype(np.float32)
    mask = rng.random((T, N)) > 0.3
    nodes = [
        helper.make_node(
            "MaskedLSTM",
            ["X", "W1", "R1", "", "", "", "", "", "mask"],
            ["Y1"],
            domain=DOMAIN,
            hidden_size=H,
            name="lstm",
        ),
        helper.make_node("Squeeze", ["Y1", "axis"], ["X2"]),
        helper.make_node(
            "MaskedGRU",
            ["X2", "W2", "R2", "", "", "", "mask"],
            ["Y2", "Y_h2"],
            domain=DOMAIN,
            hidden_size=H,
            name="gru",
        ),
    ]
    weights = {"W1": W1, "R1": R1, "W2": W2, "R2": R2, "axis": np.array([1])}
    graph = helper.make_graph(
        nodes,
        "chained",
        [helper.make_tensor_value_info("X", 1, [T, N, I]), helper.make_tensor_value_info("mask", 9, [T, N])],
        [helper.make_tensor_value_info("Y2", 1, None), helper.make_tensor_value_info("Y_h2", 1, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, 1)], ir_version=10
    )
    Y1 = reference.masked_lstm(X, W1, R1, mask=mask, hidden_size=H)[0][:, 0]
    return model, {"X": X, "mask": mask}, list(reference.masked_gru(Y1, W2, R2, mask=mask, hidden_size=H))


def api_calls() -> dict[str, int]:
    """The library's count of its calls per OrtApi entry (``OnnxMaskedRnnKernelApiCalls``)."""
    lib = ctypes.CDLL(kernel.library_path())
    lib.OnnxMaskedRnnKernelApiCalls.restype = ctypes.c_size_t
    lib.OnnxMaskedRnnKernelApiCalls.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    size = lib.OnnxMaskedRnnKernelApiCalls(None, 0)
    buffer = ctypes.create_string_buffer(size + 1)
    lib.OnnxMaskedRnnKernelApiCalls(buffer, size + 1)
    return {name: int(n) for name, n in (line.split() for line in buffer.value.decode().splitlines() if line)}


def test_library_path_is_the_built_library_in_the_package(monkeypatch):
    monkeypatch.delenv(library.LIBRARY_ENV, raising=False)
    path = Path(kernel.library_path())
    assert path.is_file() and path.is_absolute()
    assert path.name == library.LIBRARY_NAME
    assert path.parent.name == "kernel" and path.parent.parent.name == "onnx_masked_rnn"


def test_register_registers_once_per_options_and_the_session_runs_the_node():
    model, feeds, expected = chained_model()
    options = ort.SessionOptions()
    assert kernel.register(options) == kernel.library_path()
    kernel.register(options)  # a second registration of the domain would fail the session
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_without_the_kernel_onnxruntime_refuses_the_node():
    model, feeds, _ = chained_model()
    with pytest.raises(Exception, match="MaskedLSTM"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("form", ["model", "bytes", "path"])
def test_session_takes_a_model_its_bytes_or_a_path(tmp_path, form):
    model, feeds, expected = chained_model()
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    given = {"model": model, "bytes": model.SerializeToString(), "path": str(path)}[form]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the kernel covers every node: no fallback warning
        session = kernel.session(given, providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _local_function_model():
    """The chain's MaskedLSTM inside a model-local function ``Encode``, called from an ``If``
    branch: the kernel runs masked nodes wherever onnxruntime inlines them to."""
    model, feeds, expected = chained_model()
    lstm = model.graph.node[0]
    function = helper.make_function(
        "local",
        "Encode",
        ["X", "W1", "R1", "mask"],
        ["Y1"],
        [lstm],
        [helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, 1)],
    )
    call = helper.make_node("Encode", ["X", "W1", "R1", "mask"], ["Y1"], domain="local")
    branch = helper.make_graph([call], "then", [], [helper.make_tensor_value_info("Y1", 1, None)])
    other = helper.make_graph(
        [
            helper.make_node("Identity", ["X"], ["X_id"]),
            helper.make_node("Unsqueeze", ["X_id", "axis"], ["Y1e"]),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("Y1e", 1, None)],
    )
    true = numpy_helper.from_array(np.array(True), "true")
    nodes = [
        helper.make_node("If", ["true"], ["Y1"], then_branch=branch, else_branch=other),
        *model.graph.node[1:],
    ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.append(true)
    model.functions.append(function)
    model.opset_import.append(helper.make_opsetid("local", 1))
    return model, feeds, expected


def test_masked_nodes_in_subgraphs_and_local_functions_run_on_the_kernel():
    model, feeds, expected = _local_function_model()
    before = api_calls()["KernelContext_GetInput"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session = kernel.session(model, providers=["CPUExecutionProvider"])
    for got, want in zip(session.run(None, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert api_calls()["KernelContext_GetInput"] > before


def test_a_node_the_kernel_does_not_cover_is_inlined_with_a_warning_naming_it(monkeypatch):
    """coverage.uncovered refuses nothing today; refusing MaskedGRU here shows the fallback: the
    GRU is rewritten by inline (its X's type known by inference through the LSTM), the LSTM stays
    on the kernel, the result is the reference's."""
    refuse = "a reason stated by coverage.uncovered"
    monkeypatch.setattr(
        inference_session, "uncovered", lambda node, x_type: refuse if node.op_type == "MaskedGRU" else None
    )
    model, feeds, expected = chained_model()
    message = f"node 'gru' (MaskedGRU) runs as inline(model, 'native'), not on the kernel: {refuse}"
    calls = api_calls()["KernelContext_GetInput"]
    with pytest.warns(kernel.KernelFallbackWarning) as caught:
        session = kernel.session(model, providers=["CPUExecutionProvider"])
    assert [str(w.message) for w in caught] == [f"onnx_masked_rnn.kernel.session: {message}"]
    assert caught[0].filename == __file__  # the warning points at the caller's line
    for got, want in zip(session.run(None, feeds), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert api_calls()["KernelContext_GetInput"] > calls  # the LSTM ran on the kernel


def test_uncovered_refuses_nothing_the_operators_admit():
    node = helper.make_node("MaskedLSTM", ["X", "W", "R"], ["Y"], domain=DOMAIN)
    for elem in kernel.COVERED_TYPES:
        assert kernel.uncovered(node, elem) is None
    assert kernel.uncovered(node) is None
    assert "int32" in kernel.uncovered(node, onnx.TensorProto.INT32)
    assert kernel.uncovered(helper.make_node("LSTM", ["X", "W", "R"], ["Y"])) is None


def test_the_library_variable_names_the_library_to_use(monkeypatch, tmp_path):
    copy = tmp_path / "elsewhere.so"
    shutil.copy(kernel.library_path(), copy)
    monkeypatch.setenv(library.LIBRARY_ENV, str(copy))
    assert kernel.library_path() == str(copy)


def test_the_library_variable_naming_a_missing_file_is_an_error_naming_it(monkeypatch, tmp_path):
    monkeypatch.setenv(library.LIBRARY_ENV, str(tmp_path / "nothing.so"))
    with pytest.raises(kernel.KernelNotBuiltError, match=f"{library.LIBRARY_ENV}=.*nothing.so.*no such file"):
        kernel.library_path()
    with pytest.raises(kernel.KernelNotBuiltError):
        kernel.session(chained_model()[0])


NO_KERNEL_CHILD = r"""
import onnx_masked_rnn, sys
from onnx_masked_rnn import kernel
from onnx_masked_rnn.conformance.backends import missing_package, resolve
assert onnx_masked_rnn.__file__.startswith(sys.argv[1]), onnx_masked_rnn.__file__
try:
    kernel.library_path()
except kernel.KernelNotBuiltError as error:
    print(error)
print(missing_package("onnxruntime-kernel"))
try:
    resolve("onnxruntime-kernel")
except ValueError as error:
    print(error)
"""


def test_an_install_without_the_kernel_imports_and_says_the_library_was_not_built(tmp_path):
    """The package as an install made with ONNX_MASKED_RNN_NO_KERNEL=1 leaves it: no library, the
    build's marker file with its reason (the suite's data left out, which nothing here reads)."""
    package = Path(onnx_masked_rnn.__file__).parent
    shutil.copytree(
        package,
        tmp_path / "onnx_masked_rnn",
        ignore=shutil.ignore_patterns(library.LIBRARY_NAME, library.NO_KERNEL_MARKER, "data", "__pycache__"),
    )
    reason = f"{library.NO_KERNEL_ENV}=1 at install time"
    (tmp_path / "onnx_masked_rnn" / "kernel" / library.NO_KERNEL_MARKER).write_text(reason + "\n")
    env = {k: v for k, v in os.environ.items() if k != library.LIBRARY_ENV}
    # -S: no .pth files, so no editable install's finder puts the checkout first
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *site.getsitepackages()])
    done = subprocess.run(
        [sys.executable, "-S", "-c", NO_KERNEL_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,  # not the checkout, which -c would put first on the path
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    not_built, missing, refused = done.stdout.strip().splitlines()
    assert not_built.startswith("the onnx-masked-rnn kernel library was not built: ")
    assert f"({reason})" in not_built and "inline(model, 'native')" in not_built
    assert missing == "onnx_masked_rnn's kernel library"
    assert refused == f"--backend 'onnxruntime-kernel': {not_built}"


def test_the_kernel_cases_helper_compares_bfloat16_through_io_binding():
    one = kernel_cases.job("GRU", dtype="bfloat16")
    assert kernel_cases.run_job(one) is None
