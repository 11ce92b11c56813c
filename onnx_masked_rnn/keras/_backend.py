"""Which Keras backend a process gets, and a clear error when it is not installed.

Keras 3 picks its backend once, at ``import keras``: ``KERAS_BACKEND`` if set, else ``keras.json``'s
(``$KERAS_HOME`` or ``~/.keras``), else ``"tensorflow"``. The ``[keras]`` and ``[test]`` extras install
torch, not TensorFlow, so on a fresh machine ``import keras`` fails with ``No module named
'tensorflow'`` unless ``KERAS_BACKEND=torch`` is set. :func:`default_backend` (run when
``onnx_masked_rnn.keras`` is imported) sets it in exactly that case; :func:`import_keras` turns a
missing backend into one line naming ``KERAS_BACKEND``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from onnx_masked_rnn.extras import install_hint, installed, missing_dependency

__all__ = ["BACKEND_MODULES", "configured_backend", "default_backend", "import_keras"]

# Keras backend name -> the module it imports.
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", "numpy": "numpy"}


def configured_backend() -> str:
    """The backend ``import keras`` would choose in this process, without importing Keras."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json")) as file:
            return str(json.load(file).get("backend", "tensorflow"))
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def default_backend() -> str | None:
    """Set ``KERAS_BACKEND=torch`` when Keras is not imported yet, nothing chose a backend but
    Keras' own default (``"tensorflow"``: no ``KERAS_BACKEND``, ``keras.json`` absent or saying
    ``"tensorflow"``), TensorFlow is not installed and torch is. Returns the backend set, or ``None``
    (an explicit choice, an installed TensorFlow or an imported Keras is left alone)."""
    if "keras" in sys.modules or os.environ.get("KERAS_BACKEND"):
        return None
    if configured_backend() != "tensorflow" or installed("tensorflow") or not installed("torch"):
        return None
    os.environ["KERAS_BACKEND"] = "torch"
    return "torch"


def import_keras() -> Any:
    """``import keras``, or an ``ImportError`` of one line: Keras not installed (naming the
    ``[keras]`` extra), or the backend that is missing and ``KERAS_BACKEND``."""
    try:
        import keras
    except ModuleNotFoundError as exc:
        backend = configured_backend()
        missing = (exc.name or "").split(".")[0]
        if missing == "keras":
            raise missing_dependency("the Keras export (onnx_masked_rnn.keras)", "Keras 3", "keras") from None
        if missing == "torch" and backend == "torch":
            raise missing_dependency("Keras on its torch backend", "torch", "keras") from None
        if missing != BACKEND_MODULES.get(backend, backend):
            raise
        raise ImportError(
            f"Keras cannot import its backend {backend!r} (No module named {exc.name!r}): set "
            f"KERAS_BACKEND=torch before Keras is imported (torch: {install_hint('keras')}), "
            f"or install {backend}"
        ) from None
    return keras
