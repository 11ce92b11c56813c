"""The tests' shared toolkit: running a model in onnxruntime, the paths that make a model holding
masked nodes runnable, the tolerances of a result against its oracle (each named with its reason),
where the checkout and the test tree are, and how a regenerated conformance output is compared with
the shipped one, and how a script of the repository is imported."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from onnx_masked_rnn import attach_functions, inline

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def load_script(path: str) -> ModuleType:
    """The repository's script at ``path`` (relative to the checkout, e.g. ``scripts/x.py``),
    imported as a module named after its file."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# name -> what makes a model with masked nodes runnable in onnxruntime: the function bodies attached
# as model-local functions, and ``inline`` in each of its forms (the Scan body in the "capture" and
# the "portable" form, and the native expansion).
PATHS: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto]] = {
    "attach_functions": lambda model: attach_functions(model),
    "inline scan capture": lambda model: inline(model, "scan", scan_form="capture"),
    "inline scan portable": lambda model: inline(model, "scan", scan_form="portable"),
    "inline native": lambda model: inline(model, "native"),
}

# Tolerances (keyword arguments of ``assert_allclose``/``oracles.assert_close``).
# A float32 model in onnxruntime against the numpy reference: onnxruntime's matrix products sum in
# another order than numpy's BLAS, and the recurrence carries the difference from step to step.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}
# The same in float64, where only the summation order differs and nothing accumulates visibly.
FLOAT64_TOLERANCE = {"rtol": 1e-9, "atol": 1e-12}
# float16 outputs: one rounding to float16 is already 2**-11 relative.
FLOAT16_TOLERANCE = {"rtol": 1e-2, "atol": 1e-2}
BY_DTYPE = {np.float32: TOLERANCE, np.float64: FLOAT64_TOLERANCE, np.float16: FLOAT16_TOLERANCE}
# The native expansion (test_native.py): onnxruntime's LSTM/GRU/RNN kernels on short sequences stay
# within 1e-5 of the reference, and test_native.py holds them to it (a tighter check than the bodies').
NATIVE_TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}
# A framework's own run (PyTorch eager, Keras ``predict``) against the same model exported to
# onnxruntime or against the reference, by dtype name (rtol = atol): one model, one precision.
FRAMEWORK_TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def session(
    model: onnx.ModelProto | bytes | str | os.PathLike, *, optimize: bool = True
) -> ort.InferenceSession:
    """An onnxruntime CPU session of ``model`` (a ModelProto, its bytes or a file's path), its
    warnings silenced; ``optimize=False`` turns every graph optimization off (``ORT_DISABLE_ALL``:
    a Scan body must then state the shapes of its outputs itself).

    One thread: the tests' models are tiny, and a thread pool per session cost more than it gained
    (20 x 2 sessions of a bidirectional MaskedLSTM, 3 runs each: 0.9 to 2.7 s on one thread, 2.6 to
    3.8 s with the default pool, on the shared 2-core machine)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    data = model if isinstance(model, bytes) else os.fspath(model)
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def run(
    model: onnx.ModelProto | bytes | str | os.PathLike,
    feeds: Mapping[str, np.ndarray],
    *,
    optimize: bool = True,
) -> list[np.ndarray]:
    """``model``'s outputs in onnxruntime on ``feeds`` (those the model does not take are left out)."""
    runner = session(model, optimize=optimize)
    names = {i.name for i in runner.get_inputs()}
    return runner.run(None, {k: v for k, v in feeds.items() if k in names})


# Expected outputs come from the numpy reference, whose matrix products go through the BLAS numpy
# was built with; builds differ in summation order. Measured: up to 4 ulps (float32, batch 1,
# OpenBLAS vs the build that wrote the shipped files). 16 ulps of the output's own type leaves room
# for longer recurrences and stays far below every case's tolerance (1e-5 relative at float32).
OUTPUT_ULPS = 16


def parse_tensor(data: bytes) -> onnx.TensorProto:
    """The TensorProto serialised in ``data``."""
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return proto


def same_output(fresh: bytes, shipped: bytes) -> bool:
    """Same name, type and shape; NaN at the same places; values within OUTPUT_ULPS ulps."""
    a, b = parse_tensor(fresh), parse_tensor(shipped)
    if (a.name, a.data_type, list(a.dims)) != (b.name, b.data_type, list(b.dims)):
        return False
    x, y = numpy_helper.to_array(a), numpy_helper.to_array(b)
    if not np.array_equal(np.isnan(x), np.isnan(y)):
        return False
    ulp = np.spacing(np.abs(y)).astype(np.float64)
    return bool(np.all(np.abs(x.astype(np.float64) - y) <= OUTPUT_ULPS * ulp, where=~np.isnan(y)))
