"""The native expansion: MaskedLSTM/GRU/RNN on the standard LSTM/GRU/RNN kernels, for any mask.

The native ops only skip a suffix of each row (``sequence_lens``). Any mask is turned into one:

1. move each row's unmasked steps to the front, in time order (a stable partition, by a
   ``ScatterElements`` of each step to its rank), and gather ``X`` in that order, keeping only the
   first ``max(counts)`` steps (at least one): no row processes more;
2. run the native op with ``sequence_lens`` = each row's count of unmasked steps (at least 1: ONNX
   does not define a length of 0, so a row with nothing to process runs one step whose results
   are discarded). It computes the masked recurrence exactly: a masked step leaves the state
   untouched, so dropping it changes nothing, and the reverse direction runs each row from its
   last unmasked step down;
3. gather ``Y`` back to the original time positions. With ``c = CumSum(m)`` (inclusive, per row),
   unmasked step ``t`` sits at compacted position ``c[t] - 1``. In ``"carry"`` mode a masked step
   holds the output of the previous processed step of its direction (forward: the last unmasked
   step before ``t``, position ``c[t] - 1``; reverse: the first one after ``t``, position
   ``c[t]``), or a zero pad row when there is none; in ``"zero"`` mode it always takes the pad;
4. select ``initial_h``/``initial_c`` (zeros when absent) as ``Y_h``/``Y_c`` for rows with no
   unmasked step.

The native op never sees a sequence of length 0 or an empty batch: the compacted input keeps at
least one step, and when ``X`` has no step or no row (``batch_size`` or ``seq_length`` 0) an ``If``
hands it one step of zeros instead, whose results are discarded. Only the inputs are inside that
``If``: onnxruntime runs the expansion slower with all of it inside (side by side:
``scripts/ab_graphs.py``). A node whose native kernel would not compute the specification gets
the Scan body instead: one with ``Softplus``, which onnxruntime's kernels overflow above about
88.7, and an LSTM or GRU with an unbounded gate function (not Sigmoid, HardSigmoid, Tanh,
ScaledTanh or Softsign), whose state can grow past what onnxruntime's kernels compute as the
specification says. ``CumSum`` is int32 (tract miscomputes it in int64).

Batch-major models (``layout=1``; onnxruntime's CPU kernels refuse it) are gathered straight from
and into the batch-major tensors: the transposes of ``X`` and ``Y`` ride on the two gathers.
The body is specialised in Python to the node's attributes and present inputs, with onnxscript's
graph builder: it has no attribute references. Without ``mask`` and ``sequence_lens`` it is the
native op alone, ``If`` ``X`` has a step and a row (else the empty result).

onnxruntime 1.32 has no float64 kernel for LSTM, GRU or RNN on CPU: there, float64 models need the
Scan expansion (float16 runs, computed in float32 like the reference).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import onnx_ir as ir
from onnxscript import build_function

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions import (
    Configuration,
    build_scan_function,
    check_opset,
    declared_outputs,
    formal_inputs,
    nothing_processed,
    to_function_proto,
)
from onnx_masked_rnn.functions.cells import constant
from onnx_masked_rnn.functions.masked_scan import effective_mask

__all__ = ["build_native_function"]

_INT64 = ir.DataType.INT64
_INT32 = ir.DataType.INT32
_UNLIKE_THE_SPECIFICATION = {"Softplus"}
"""Activations onnxruntime's LSTM/GRU/RNN kernels compute differently from the specification."""
_BOUNDED = {"Sigmoid", "HardSigmoid", "Tanh", "ScaledTanh", "Softsign"}
"""Gate functions under which onnxruntime's LSTM/GRU kernels follow the specification. With an
unbounded gate (Relu, LeakyRelu, Elu, Affine, ...) the state can grow geometrically, and there they
do not: past float32's range they give the largest finite value for inf and -inf for NaN, and
short of it their error reaches 1e-3 relative where the formulas in float32 give 1e-7 (measured
by ``onnx-masked-rnn fuzz``; ``tests/test_fuzz.py`` pins the overflow)."""


def _needs_the_scan_body(attrs: RNNAttributes) -> bool:
    """A node whose native kernel would not compute the specification: an activation in
    :data:`_UNLIKE_THE_SPECIFICATION`, or an LSTM/GRU gate function outside :data:`_BOUNDED`."""
    if any(a.name in _UNLIKE_THE_SPECIFICATION for acts in attrs.activations for a in acts):
        return True
    return attrs.op_type != "MaskedRNN" and any(acts[0].name not in _BOUNDED for acts in attrs.activations)


def build_native_function(config: Configuration, opset: int, form: str = "portable") -> onnx.FunctionProto:
    """The native expansion of a node of configuration ``config``, as a FunctionProto in
    :data:`DOMAIN` named after the op, using ``ai.onnx`` ops at ``opset`` only; the Scan body
    (in ``form``) for a node whose native kernel would not compute the specification
    (:func:`_needs_the_scan_body`).

    Its inputs are the op's full list, its outputs the node's; it declares every attribute of the
    op but its body reads none. ``config.attrs.hidden_size`` must be set: the native kernels need
    it as an attribute (take it from ``R``'s shape when the node omits it).
    """
    attrs = config.attrs
    if _needs_the_scan_body(attrs):
        return build_scan_function(config, opset, form)
    if attrs.hidden_size is None:
        raise ValueError(
            f"the native expansion of {attrs.op_type} needs attribute 'hidden_size' (the native "
            "kernels require it); set it from the last axis of input 'R'"
        )
    check_opset(opset)
    spec = attrs.spec

    def body(op, *values: ir.Value) -> list[ir.Value]:
        inputs = {n: v for n, v in zip(spec.inputs, values) if n in {"X", "W", "R"} | set(config.present)}
        every_output = dataclasses.replace(config, num_outputs=len(spec.outputs))
        return _MaskedToNative(op, every_output, inputs).outputs()[: config.num_outputs]

    function = build_function(
        body, formal_inputs(config), domain=DOMAIN, name=spec.op_type, opset_imports={"": opset}
    )
    return to_function_proto(function, config, f"the native expansion of {attrs.op_type}")


class _MaskedToNative:
    """Builds the body with ``op`` (an onnxscript OpBuilder). Index tensors are time-major
    ``[T, N]`` throughout; ``layout`` only changes how ``X``, ``Y`` and the states are addressed."""

    def __init__(self, op, config: Configuration, inputs: dict[str, ir.Value]) -> None:
        self.op, self.config, self.attrs, self.inputs = op, config, config.attrs, inputs
        self.dtype = ir.DataType(config.dtype)
        self.batch_major = config.attrs.layout == 1
        dims = op.Shape(inputs["X"])
        self.T = op.Gather(dims, 1 if self.batch_major else 0, _outputs=["T"])  # scalars
        self.N = op.Gather(dims, 0 if self.batch_major else 1, _outputs=["N"])
        self.zero, self.one = constant(op, 0, _INT64), constant(op, 1, _INT64)
        # initial_h/initial_c direction-major [D, N, H] (absent: None)
        self.initial = {
            name: self.transpose_state(inputs[name]) if self.batch_major else inputs[name]
            for name in ("initial_h", "initial_c")
            if name in inputs
        }

    def outputs(self) -> list[ir.Value]:
        """The op's outputs: the native op alone when nothing is masked (``If`` there is no step or
        no row, the empty result instead), else the four steps on the compacted input."""
        op = self.op
        m = effective_mask(
            op, self.inputs["X"], self.inputs.get("sequence_lens"), self.inputs.get("mask"), self.attrs.layout
        )
        if m is not None:
            return self.masked(op, m)
        declared = declared_outputs(self.config)
        empty = op.builder.subgraph(
            lambda op: nothing_processed(op, self.config, self.inputs), [], declared, name="nothing_processed"
        )
        work = op.builder.subgraph(lambda op: self.unmasked(op), [], declared, name="native")
        return op.If(
            self.no_step(op), then_branch=empty, else_branch=work, _outputs=list(self.attrs.spec.outputs)
        )

    def no_step(self, op) -> ir.Value:
        """Whether ``X`` has no step or no row."""
        return op.Equal(op.Mul(self.T, self.N), self.zero)

    def unmasked(self, op) -> list[ir.Value]:
        """Nothing masked: the native op is the whole story."""
        Y, *states = self.native(op, self.time_major(op, self.inputs["X"]), None, list(self.initial.values()))
        if self.batch_major:
            return [op.Transpose(Y, perm=[2, 0, 1, 3])] + [self.transpose_state(s, op) for s in states]
        return [op.Identity(v) for v in (Y, *states)]

    def masked(self, op, m: ir.Value) -> list[ir.Value]:
        """The four steps of the module docstring."""
        m_int = op.Cast(m, to=_INT64)
        counts = op.ReduceSum(m_int, constant(op, [0], _INT64), keepdims=0, _outputs=["counts"])  # [N]
        # [T, N]: unmasked steps up to t. CumSum in int32 (tract miscomputes it in int64); the
        # indices in int64 (onnxruntime's Gather is slower with int32 ones).
        cumsum = op.Cast(op.CumSum(op.Cast(m, to=_INT32), self.zero), to=_INT64, _outputs=["cumsum"])
        rank = op.Sub(cumsum, self.one, _outputs=["rank"])  # an unmasked step's position once compacted

        def compacted(op) -> list[ir.Value]:
            if "mask" in self.inputs:
                X = self.compacted_x(op, m, rank, cumsum, counts)
            elif self.batch_major:  # sequence_lens alone: every row is compact already
                X = self.time_major(op, self.inputs["X"])
            else:  # a branch output must be computed inside the branch
                X = op.Identity(self.inputs["X"])
            # A row with no unmasked step runs one step, discarded.
            lens = op.Cast(op.Max(counts, self.one), to=_INT32)
            return [X, lens, *(op.Identity(state) for state in self.initial.values())]

        X, lens, *initial = self.never_empty(op, compacted)
        Y_compact, *states = self.native(op, X, lens, initial)

        # Y[t, d, n] = padded[source[t, d, n], d, n], with the pad row last (source -1):
        # one Gather on `padded` flattened to [(T+1)·D·N, H], addressed by source·D·N + d·N + n.
        padded = op.Pad(Y_compact, [0, 0, 0, 0, 1, 0, 0, 0], _outputs=["padded"])  # zeros
        D = constant(op, self.attrs.num_directions, _INT64)
        lanes = op.Mul(self.N, D)
        flat = op.Add(
            op.Mul(self.source_steps(op, m_int, rank, cumsum, counts), lanes),
            op.Reshape(op.Range(self.zero, lanes, self.one), [self.attrs.num_directions, -1]),
            _outputs=["Y_rows"],
        )
        if self.batch_major:
            flat = op.Transpose(flat, perm=[2, 0, 1])
        outputs = [op.Gather(op.Flatten(padded, axis=3), flat, axis=0, _outputs=["Y_gathered"])]

        # A row with no unmasked step keeps its initial state (zeros when absent).
        processed = op.Unsqueeze(op.Greater(counts, self.zero), [1])  # [N, 1]: broadcasts over [D, N, H]
        for state, name in zip(states, ("initial_h", "initial_c")):
            initial = self.initial.get(name)
            if initial is None:
                initial = op.Constant(value=ir.tensor(np.zeros(1, dtype=self.dtype.numpy())))
            state = op.Where(processed, state, initial)
            outputs.append(self.transpose_state(state, op) if self.batch_major else state)
        return outputs

    def compacted_x(self, op, m: ir.Value, rank: ir.Value, cumsum: ir.Value, counts: ir.Value) -> ir.Value:
        """``X`` time-major with each row's unmasked steps first, then its masked ones, each
        group in time order (a stable sort of the steps by ``!m``)."""
        steps = op.Unsqueeze(op.Range(self.zero, self.T, self.one), [1])  # [T, 1]
        rows = op.Range(self.zero, self.N, self.one)  # [N]
        # Step t moves to its rank among the unmasked steps, or, after all of them, its rank among
        # the masked ones (t - cumsum[t] masked steps precede it).
        destination = op.Where(m, rank, op.Add(counts, op.Sub(steps, cumsum)), _outputs=["destination"])
        # Each step's row in X flattened to [T·N, I] (batch-major: [N·T, I]), sent to its destination.
        source = (
            op.Add(op.Mul(rows, self.T), steps) if self.batch_major else op.Add(op.Mul(steps, self.N), rows)
        )
        order = op.ScatterElements(source, destination, source, axis=0)
        # Only the first max(counts) compacted steps are ever processed (one when none is).
        longest = op.Max(op.ReduceMax(counts, keepdims=1), self.one)
        order = op.Slice(
            order, op.Reshape(self.zero, [1]), longest, op.Reshape(self.zero, [1]), _outputs=["order"]
        )
        return op.Gather(op.Flatten(self.inputs["X"], axis=2), order, axis=0, _outputs=["X_compact"])

    def source_steps(
        self, op, m_int: ir.Value, rank: ir.Value, cumsum: ir.Value, counts: ir.Value
    ) -> ir.Value:
        """``[T, D, N]``: the compacted step whose output ``Y`` holds at each step, per direction;
        -1 (the pad row) where there is none."""
        directions = {"forward": ["forward"], "reverse": ["reverse"], "bidirectional": ["forward", "reverse"]}
        minus_one = op.Neg(self.one)
        sources = []
        for direction in directions[self.attrs.direction]:
            if self.attrs.masked_output == "zero":  # an unmasked step's own output, else the pad
                source = op.Sub(op.Mul(m_int, cumsum), self.one)
            elif direction == "forward":  # the last unmasked step at or before t
                source = rank
            else:  # the first unmasked step at or after t
                following = op.Sub(cumsum, m_int)
                source = op.Where(op.Less(following, counts), following, minus_one)
            sources.append(op.Unsqueeze(source, [1]))
        return sources[0] if len(sources) == 1 else op.Concat(*sources, axis=1)

    def never_empty(self, op, build) -> list[ir.Value]:
        """The native op's inputs ``build(op)`` returns (time-major ``X``, ``sequence_lens``, the
        present initial states), or, ``If`` ``X`` has no step or no row, one step of zeros for
        ``max(N, 1)`` rows from zero states, whose results the caller discards: the native ops
        are not defined on an empty sequence or batch."""
        dtype, zero = self.dtype, ir.tensor(np.zeros(1, dtype=self.dtype.numpy()))
        declared = [
            ir.Value(name="X_native", type=ir.TensorType(dtype), shape=ir.Shape([None] * 3)),
            ir.Value(name="lens", type=ir.TensorType(_INT32), shape=ir.Shape([None])),
        ] + [
            ir.Value(name=f"{n}_native", type=ir.TensorType(dtype), shape=ir.Shape([None] * 3))
            for n in self.initial
        ]

        def placeholder(op) -> list[ir.Value]:
            rows = op.Reshape(op.Max(self.N, self.one), [1])
            X = op.ConstantOfShape(
                op.Concat([1], rows, op.Shape(self.inputs["X"], start=2, end=3), axis=0), value=zero
            )
            lens = op.ConstantOfShape(rows, value=ir.tensor(np.ones(1, dtype=np.int32)))
            state_shape = op.Concat(
                [self.attrs.num_directions], rows, op.Shape(self.inputs["R"], start=2, end=3), axis=0
            )
            return [X, lens, *(op.ConstantOfShape(state_shape, value=zero) for _ in self.initial)]

        return op.If(
            self.no_step(op),
            then_branch=op.builder.subgraph(placeholder, [], declared, name="placeholder"),
            else_branch=op.builder.subgraph(build, [], declared, name="compacted"),
            _outputs=[v.name for v in declared],
        )

    def native(self, op, X: ir.Value, lens: ir.Value | None, initial: list[ir.Value]) -> list[ir.Value]:
        """The native op on time-major ``X`` with ``sequence_lens`` = ``lens`` and the present
        initial states ``initial`` (direction-major), every attribute explicit
        (``activation_alpha``/``beta`` included)."""
        spec = self.attrs.spec
        given = {**self.inputs, **dict(zip(self.initial, initial)), "X": X, "sequence_lens": lens}
        args = [given.get(name) for name in spec.inputs[: spec.mask_index]]
        while args[-1] is None:
            args.pop()
        attributes = self.attrs.to_onnx(include_masked_output=False) | {"layout": 0}
        return getattr(op, spec.onnx_op_type)(*args, **attributes, _outputs=len(spec.outputs))

    def time_major(self, op, X: ir.Value) -> ir.Value:
        return op.Transpose(X, perm=[1, 0, 2]) if self.batch_major else X

    def transpose_state(self, state: ir.Value, op=None) -> ir.Value:
        return (op or self.op).Transpose(state, perm=[1, 0, 2])
