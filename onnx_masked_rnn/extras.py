"""The optional dependencies' extras, and the one-line error for a missing one.

The package is not on the package index: it is installed from a checkout, so the hint is
``pip install '.[EXTRA]'`` run there. torch is named first when it is missing too, because
``torch>=2.13`` from the index is a CUDA build: the user installs the build they want (CPU or
CUDA) before the extra.
"""

from __future__ import annotations

import importlib.util

__all__ = ["install_hint", "installed", "missing_dependency"]

TORCH_FIRST = (
    "install torch first in the build you want (CPU or CUDA: https://pytorch.org/get-started/locally/)"
)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_hint(extra: str) -> str:
    """How to install ``extra`` (``"keras"``, ``"torch"``, ``"bench"``, ``"test"``): one clause."""
    hint = f"pip install '.[{extra}]' in a checkout of onnx-masked-rnn"
    if extra in ("keras", "torch", "test") and not installed("torch"):
        hint = f"{TORCH_FIRST}, then {hint}"
    return hint


def missing_dependency(needed_by: str, package: str, extra: str) -> ImportError:
    """An ``ImportError`` of one line: ``needed_by`` needs ``package``, which is not installed, and
    how to install the extra that brings it."""
    return ImportError(f"{needed_by} needs {package}, which is not installed: {install_hint(extra)}")
