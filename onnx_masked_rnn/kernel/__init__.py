"""The native onnxruntime kernel of MaskedLSTM, MaskedGRU and MaskedRNN.

A custom-op library (C++, onnxruntime's C API, built when the package is installed) runs the masked
nodes as they are, without rewriting the model::

    options = onnxruntime.SessionOptions()
    onnx_masked_rnn.kernel.register(options)
    session = onnxruntime.InferenceSession("model.onnx", options)

or, in one call that also checks every node is one the kernel covers (``coverage``),
``onnx_masked_rnn.kernel.session("model.onnx")``.

- :func:`library_path`: the library's path (``library``);
- :func:`register`: register it with a ``SessionOptions`` (``library``);
- :func:`session`: an ``InferenceSession`` with it registered (``inference_session``);
- :func:`uncovered`: why the kernel would not run a node, or None (``coverage``).
"""

from onnx_masked_rnn.kernel.coverage import COVERED_TYPES, uncovered
from onnx_masked_rnn.kernel.inference_session import KernelFallbackWarning, session
from onnx_masked_rnn.kernel.library import KernelNotBuiltError, library_path, register

__all__ = [
    "COVERED_TYPES",
    "KernelFallbackWarning",
    "KernelNotBuiltError",
    "library_path",
    "register",
    "session",
    "uncovered",
]
