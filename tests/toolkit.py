"""The tests' shared toolkit: where the checkout and the test tree are, and how a regenerated
conformance output is compared with the shipped one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


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
