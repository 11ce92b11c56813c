"""The masking shared by MaskedLSTM, MaskedGRU and MaskedRNN, mirroring ``reference.masked_recurrence``.

- :func:`effective_mask`: ``m[t, n] = mask[t, n] AND t < sequence_lens[n]``, time-major.
- :func:`masked_scan`: one direction of the recurrence as one ``Scan``. Per step, with the cell's
  new state ``new``::

      state = Where(m_t, new, state)             # a masked step leaves the state untouched
      y_t   = Where(m_t, new_h, 0)               # "zero"
      y_t   = Where(m_t, new_h, y_prev)          # "carry": the previous output, 0 before the first

  ``Where``, unlike a multiplication, never lets a NaN or Inf of a masked step through. When the
  initial ``h`` is zero (``initial_h`` absent) the "carry" output *is* the state (it changes at
  processed steps only, and is zero before the first), so no ``y_prev`` is carried.

The Scan body is portable: its inputs and outputs state element type and rank, and in the
``"portable"`` form it reads nothing from the enclosing graph (the cell's weights are pass-through
Scan state variables, as the Scan specification asks of outer values); constants are built inside
it. The ``"capture"`` form lets the body read the weights from the enclosing graph instead, which
spares onnxruntime a copy of each weight per step; some runtimes (OpenVINO) reject it.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from onnx_masked_rnn.functions.cells import Cell, constant

__all__ = ["SCAN_FORMS", "effective_mask", "masked_scan"]

SCAN_FORMS = ("portable", "capture")
"""How a Scan body gets the cell's weights: as pass-through state variables, or from the enclosing graph."""


def effective_mask(op, X: ir.Value, sequence_lens: ir.Value | None, mask: ir.Value | None, layout: int):
    """``[T, N]`` bool, time-major whatever ``layout`` is; None when both inputs are absent.

    ``mask`` must have exactly the shape of ``X``'s first two axes: it is concatenated, along a new
    axis, with a tensor of that shape, which fails at run time otherwise (no silent broadcast).
    """
    m = None
    if mask is not None:
        like_x = op.ConstantOfShape(op.Shape(X, start=0, end=2), value=ir.tensor([True]))
        checked = op.Concat(op.Unsqueeze(mask, [0]), op.Unsqueeze(like_x, [0]), axis=0)  # [2, .., ..]
        m = op.Gather(checked, 0, axis=0)
        if layout == 1:
            m = op.Transpose(m, perm=[1, 0])
    if sequence_lens is not None:
        time_axis = 1 if layout == 1 else 0
        T = op.Squeeze(op.Shape(X, start=time_axis, end=time_axis + 1))
        steps = op.Unsqueeze(op.Range(0, T, 1), [1])  # [T, 1]
        within = op.Less(steps, op.Unsqueeze(op.Cast(sequence_lens, to=ir.DataType.INT64), [0]))
        m = within if m is None else op.And(m, within)
    return m


def masked_scan(
    op,
    cell: Cell,
    initial_state: list[ir.Value],
    m: ir.Value | None,
    *,
    reverse: bool,
    masked_output: str,
    zero_initial_h: bool,
    form: str,
    dtype: ir.DataType,
    d: int,
) -> tuple[ir.Value, list[ir.Value]]:
    """Run direction ``d`` of the masked recurrence of ``cell`` from ``initial_state`` (``[N, H]``
    each, h first) under the effective mask ``m`` (``[T, N, 1]``; None: nothing masked).

    Returns ``Y_d`` ``[T, 1, N, H]`` (time-aligned) and the final state.
    """
    carry_y = masked_output == "carry" and not zero_initial_h and m is not None
    portable = form == "portable"

    def typed(name: str, rank: int, element: ir.DataType = dtype) -> ir.Value:
        return ir.Value(name=name, type=ir.TensorType(element), shape=ir.Shape([None] * rank))

    state_names = ("h", "c")[: len(initial_state)]
    weight_names = [(name, rank) for _, name, rank in cell.weights] if portable else []
    inputs = (
        [typed(f"{s}_prev", 2) for s in state_names]
        + ([typed("y_prev", 2)] if carry_y else [])
        + [typed(name, rank) for name, rank in weight_names]
        + [typed(name, 2) for _, name in cell.projections]
        + ([typed("m_t", 2, ir.DataType.BOOL)] if m is not None else [])
    )
    outputs = (
        [typed(f"{s}_next", 2) for s in state_names]
        + ([typed("y_next", 2)] if carry_y else [])
        + [typed(f"{name}_next", rank) for name, rank in weight_names]
        + [typed("y_t", 3)]
    )

    def step(op, *values: ir.Value) -> list[ir.Value]:
        values = list(values)
        state = [values.pop(0) for _ in state_names]
        y_prev = values.pop(0) if carry_y else None
        weights = [values.pop(0) for _ in weight_names] if portable else [w for w, _, _ in cell.weights]
        xs = [values.pop(0) for _ in cell.projections]
        m_t = values.pop(0) if m is not None else None
        new = cell.step(op, xs, weights, state)
        if m_t is None:
            next_state, y = new, new[0]
        else:
            next_state = [op.Where(m_t, n, s) for n, s in zip(new, state)]
            if masked_output == "zero":
                y = op.Where(m_t, new[0], constant(op, 0.0, dtype))
            elif carry_y:
                y = op.Where(m_t, new[0], y_prev)
            else:  # "carry" from a zero initial h: the state is the previous output
                y = next_state[0]
        # The scan output is a value of its own: onnxruntime 1.32 miscomputes a body output that
        # is both a state and a scan output.
        y_t = op.Unsqueeze(y, constant(op, [0], ir.DataType.INT64))
        passed = [op.Identity(w) for w in weights] if portable else []
        return [*next_state, *([y] if carry_y else []), *passed, y_t]

    body = op.builder.subgraph(step, inputs, outputs, name=f"step_{d}")
    scan_inputs = [v for v, _ in cell.projections] + ([m] if m is not None else [])
    initial_y = []
    if carry_y:
        zeros = ir.tensor(np.zeros(1, dtype=dtype.numpy()))
        initial_y = [op.ConstantOfShape(op.Shape(initial_state[0]), value=zeros)]
    names = [f"{s}_last_{d}" for s in state_names] + [f"y_last_{d}"] * carry_y
    names += [f"{name}_last_{d}" for name, _ in weight_names] + [f"Y_{d}"]
    results = op.Scan(
        *initial_state,
        *initial_y,
        *([w for w, _, _ in cell.weights] if portable else []),
        *scan_inputs,
        body=body,
        num_scan_inputs=len(scan_inputs),
        scan_input_directions=[int(reverse)] * len(scan_inputs),
        scan_output_directions=[int(reverse)],
        _outputs=names,
    )
    return results[-1], list(results[: len(state_names)])
