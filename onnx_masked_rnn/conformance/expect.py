"""``expect``: what the case files call, as ``onnx.backend.test.case.node.expect`` is for onnx's ops.

``expect(node, inputs, outputs, name)`` records one case: a model whose graph is the one masked
node, its input and expected output arrays, and its tolerances. :func:`random_case` builds the
common kind of case (random well-scaled inputs from ``onnx_masked_rnn.testing``, expected outputs
from the numpy reference) in one call. ``generate`` turns the recorded cases into the variants.
"""

from __future__ import annotations

import contextlib
import dataclasses
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from onnx_masked_rnn import reference
from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes
from onnx_masked_rnn.testing import random_inputs, value_info

__all__ = ["ONNX_OPSET", "TOLERANCES", "Case", "expect", "random_case", "recording"]

# The ai.onnx opset of every case model: the one IR version 10 was released with.
ONNX_OPSET = 21

# (rtol, atol) by the dtype of X. float32/float64 leave room for a different summation order
# (X·Wᵀ hoisted out of the loop, fused gates); float16 for rounding at every step of a runtime
# that computes in float16, where the reference computes in float32 and rounds once at the end.
TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float16): (5e-3, 5e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-10, 1e-12),
}


@dataclasses.dataclass(frozen=True)
class Case:
    """One conformance case: a one-node model (no function bodies), its data and tolerances."""

    name: str
    model: onnx.ModelProto
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray, ...]
    rtol: float
    atol: float
    description: str


@dataclasses.dataclass
class _Recorder:
    description: str
    cases: list[Case]


_recorders: list[_Recorder] = []


@contextlib.contextmanager
def recording(description: str) -> Iterator[list[Case]]:
    """Collect the cases ``expect`` records inside the block, described by ``description``
    (the docstring of the ``export_*`` function that makes them)."""
    recorder = _Recorder(" ".join(description.split()), [])
    _recorders.append(recorder)
    try:
        yield recorder.cases
    finally:
        _recorders.pop()


def expect(
    node: onnx.NodeProto,
    inputs: Sequence[np.ndarray],
    outputs: Sequence[np.ndarray],
    name: str,
    *,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """Record the case ``name``: ``node`` applied to ``inputs`` gives ``outputs``.

    As in onnx's ``expect``, ``inputs``/``outputs`` hold values only for the node's present
    (non-empty) inputs/outputs, in order. Tolerances default to :data:`TOLERANCES` of the first
    input's dtype. Must be called inside :func:`recording`.
    """
    if not _recorders:
        raise RuntimeError("expect() records cases only inside conformance.expect.recording()")
    if not name.startswith("test_"):
        raise ValueError(f"case name must start with 'test_', got {name!r}")
    present_inputs = [n for n in node.input if n]
    present_outputs = [n for n in node.output if n]
    if len(present_inputs) != len(inputs) or len(present_outputs) != len(outputs):
        raise ValueError(
            f"case {name!r}: node has {len(present_inputs)} inputs and {len(present_outputs)} outputs, "
            f"got {len(inputs)} input and {len(outputs)} output arrays"
        )
    default_rtol, default_atol = TOLERANCES[np.dtype(inputs[0].dtype)]
    graph = helper.make_graph(
        [node],
        name,
        [value_info(n, a) for n, a in zip(present_inputs, inputs)],
        [value_info(n, a) for n, a in zip(present_outputs, outputs)],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", ONNX_OPSET), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        ir_version=10,
        producer_name="onnx-masked-rnn conformance",
    )
    recorder = _recorders[-1]
    recorder.cases.append(
        Case(
            name=name,
            model=model,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            rtol=default_rtol if rtol is None else rtol,
            atol=default_atol if atol is None else atol,
            description=recorder.description,
        )
    )


def random_case(
    op_type: str,
    name: str,
    *,
    T: int = 3,
    N: int = 2,
    I: int = 2,
    H: int = 3,
    dtype: type = np.float32,
    present: Sequence[str] = ("B", "initial_h", "initial_c", "P", "mask"),
    mask_kind: str = "holes",
    sequence_lens: Sequence[int] | None = None,
    outputs: Sequence[str] | None = None,
    nan_at_masked_steps: bool = False,
    rtol: float | None = None,
    atol: float | None = None,
    **attributes: Any,
) -> None:
    """Record a case of ``op_type`` on random inputs (``testing.random_inputs``, seeded by the
    case name) with the expected outputs of the numpy reference.

    The node carries ``hidden_size=H`` and exactly ``attributes`` (the rest keep their defaults);
    ``present`` names the optional inputs it supplies, ``outputs`` the outputs it asks for (all by
    default). ``nan_at_masked_steps`` sets ``X`` to NaN wherever the effective mask is false.
    """
    spec = OP_SPECS[op_type]
    attrs = parse_attributes(op_type, hidden_size=H, **attributes)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    values = random_inputs(
        attrs,
        T,
        N,
        I,
        H,
        rng=rng,
        dtype=dtype,
        present=present,
        mask_kind=mask_kind,
        sequence_lens=sequence_lens,
    )
    if nan_at_masked_steps:
        effective = np.ones((T, N), bool) if "mask" not in values else values["mask"]
        if attrs.layout == 1:
            effective = effective.T
        if sequence_lens is not None:
            effective = effective & (np.arange(T)[:, None] < np.asarray(sequence_lens)[None, :])
        X = values["X"] if attrs.layout == 0 else values["X"].transpose(1, 0, 2)  # a view: writes go through
        X[~effective] = np.nan
    expected = dict(zip(spec.outputs, reference.FUNCTIONS[op_type](**values, hidden_size=H, **attributes)))
    wanted = spec.outputs if outputs is None else tuple(outputs)
    last = max(spec.outputs.index(o) for o in wanted)
    node = helper.make_node(
        op_type,
        [n if n in values else "" for n in spec.inputs[: max(spec.inputs.index(n) for n in values) + 1]],
        [o if o in wanted else "" for o in spec.outputs[: last + 1]],
        domain=DOMAIN,
        hidden_size=H,
        **attributes,
    )
    expect(
        node,
        [values[n] for n in node.input if n],
        [expected[o] for o in node.output if o],
        name,
        rtol=rtol,
        atol=atol,
    )
