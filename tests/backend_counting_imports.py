"""A backend module that records each import of it (the importing process's id, one line in the
file ``CONFORMANCE_IMPORT_LOG`` names), for the conformance runner's tests; its ``Backend`` is the
built-in onnxruntime backend."""

import os

from onnx_masked_rnn.conformance.backends import OnnxRuntimeBackend as Backend

with open(os.environ["CONFORMANCE_IMPORT_LOG"], "a") as log:
    log.write(f"{os.getpid()}\n")

__all__ = ["Backend"]
