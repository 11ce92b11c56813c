"""Where the kernel's custom-op library is, and registering it with onnxruntime.

The build (``pip install .``, CMake) installs the shared library beside this module, in the
package directory ``onnx_masked_rnn/kernel/``; an editable install leaves the Python files in the
checkout and the library in the build's install tree, which the package's search path
(``__path__``) then names. ``ONNX_MASKED_RNN_KERNEL_LIBRARY=/path/to/library`` takes
precedence over both (a library built elsewhere). An install made with the no-kernel environment
variable has no library: :func:`library_path` then raises :class:`KernelNotBuiltError` saying so.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "LIBRARY_ENV",
    "LIBRARY_NAME",
    "NO_KERNEL_ENV",
    "NO_KERNEL_MARKER",
    "REGISTERED_KEY",
    "KernelNotBuiltError",
    "library_path",
    "register",
]

LIBRARY_ENV = "ONNX_MASKED_RNN_KERNEL_LIBRARY"
"""An explicit path to the library, used instead of the installed one."""

NO_KERNEL_ENV = "ONNX_MASKED_RNN_NO_KERNEL"
"""Set to 1 at ``pip install`` time, the build skips the kernel (the pure-Python package)."""

NO_KERNEL_MARKER = "BUILT_WITHOUT_KERNEL"
"""The file such an install leaves in place of the library (one line: why)."""

LIBRARY_NAME = {"win32": "onnx_masked_rnn_kernel.dll", "darwin": "libonnx_masked_rnn_kernel.dylib"}.get(
    sys.platform, "libonnx_masked_rnn_kernel.so"
)
"""The library's file name on this platform."""

REGISTERED_KEY = "io.onnx_masked_rnn.kernel_registered"
"""The session-config entry :func:`register` sets, so that registering one ``SessionOptions``
twice registers the library once (onnxruntime refuses a custom domain registered twice)."""


class KernelNotBuiltError(RuntimeError):
    """The package was installed without the kernel's library (or it was removed)."""


def _candidates() -> list[Path]:
    """Where the library may be, in the order searched: beside this module, then each directory
    of the package's search path (an editable install adds its install tree there)."""
    spec = importlib.util.find_spec(__package__)
    places = [Path(__file__).parent, *(Path(p) for p in (spec.submodule_search_locations or []))]
    return [place / LIBRARY_NAME for place in dict.fromkeys(places)]


def library_path() -> str:
    """The absolute path of the kernel's custom-op library (for
    ``SessionOptions.register_custom_ops_library``).

    Raises :class:`KernelNotBuiltError` when the library is not there: the package was installed
    with ``ONNX_MASKED_RNN_NO_KERNEL=1``, or its build did not produce it; and when
    ``ONNX_MASKED_RNN_KERNEL_LIBRARY`` names a file that does not exist.
    """
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        if not os.path.isfile(explicit):
            raise KernelNotBuiltError(f"{LIBRARY_ENV}={explicit!r}: no such file")
        return os.path.abspath(explicit)
    candidates = _candidates()
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate.resolve())
    for candidate in candidates:
        marker = candidate.with_name(NO_KERNEL_MARKER)
        if marker.is_file():
            reason = marker.read_text().strip() or f"{NO_KERNEL_ENV}=1"
            raise KernelNotBuiltError(
                f"the onnx-masked-rnn kernel library was not built: the package was installed without "
                f"it ({reason}). Reinstall without {NO_KERNEL_ENV} (the build needs a C++17 compiler "
                f"and CMake), or set {LIBRARY_ENV} to a built library. Without the kernel, deploy with "
                "onnx_masked_rnn.inline(model, 'native') or attach_functions(model)."
            )
    raise KernelNotBuiltError(
        f"the onnx-masked-rnn kernel library was not built: no {LIBRARY_NAME} in "
        f"{', '.join(str(c.parent) for c in candidates)}, and no {NO_KERNEL_MARKER} either (its build "
        f"did not finish, or the library was removed); reinstall with a C++17 compiler and CMake "
        f"(`pip install onnx-masked-rnn` without {NO_KERNEL_ENV}), or set {LIBRARY_ENV} to a built "
        "library. Without the kernel, deploy with onnx_masked_rnn.inline(model, 'native') or "
        "attach_functions(model)."
    )


def register(session_options: Any) -> str:
    """Register the kernel's library with an ``onnxruntime.SessionOptions``; return its path.

    Registering the same options again does nothing. Raises :class:`KernelNotBuiltError` (see
    :func:`library_path`), and onnxruntime's error when the library refuses the runtime (it checks
    that onnxruntime serves the C API version it was built for).
    """
    path = library_path()
    try:
        registered = session_options.get_session_config_entry(REGISTERED_KEY)
    except RuntimeError:  # onnxruntime raises for a key never set
        registered = None
    if registered != path:
        session_options.register_custom_ops_library(path)
        session_options.add_session_config_entry(REGISTERED_KEY, path)
    return path
