"""The native expansion: MaskedLSTM/GRU/RNN on the standard LSTM/GRU/RNN kernels, for any mask.

The native ops only skip a suffix of each row (``sequence_lens``). Any mask is turned into one:

1. move each row's unmasked steps to the front, in time order (a stable partition, by a
   ``ScatterElements`` of each step to its rank), and gather ``X`` in that order, keeping only the
   first ``max(counts)`` steps: no row processes more;
2. run the native op with ``sequence_lens`` = each row's count of unmasked steps. It computes the
   masked recurrence exactly: a masked step leaves the state untouched, so dropping it changes
   nothing, and the reverse direction runs each row from its last unmasked step down;
3. gather ``Y`` back to the original time positions. With ``c = CumSum(m)`` (inclusive, per row),
   unmasked step ``t`` sits at compacted position ``c[t] - 1``. In ``"carry"`` mode a masked step
   holds the output of the previous processed step of its direction (forward: the last unmasked
   step before ``t``, position ``c[t] - 1``; reverse: the first one after ``t``, position
   ``c[t]``), or a zero pad row when there is none; in ``"zero"`` mode it always takes the pad;
4. put ``initial_h``/``initial_c`` back into ``Y_h``/``Y_c`` for rows with no unmasked step (the
   native op leaves them undefined; onnxruntime returns zeros).

Batch-major models (``layout=1``; onnxruntime's CPU kernels refuse it) are gathered straight from
and into the batch-major tensors: the transposes of ``X`` and ``Y`` ride on the two gathers.
The body is specialised in Python to the node's attributes and present inputs, with onnxscript's
graph builder: it has no attribute references and no ``If``. Without ``mask`` and
``sequence_lens`` it is the native op alone.

onnxruntime 1.32 has no float64 kernel for LSTM, GRU or RNN on CPU: there, float64 models need the
Scan expansion (float16 runs, computed in float32 like the reference).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Set

import onnx
import onnx_ir as ir
from onnxscript import build_function

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import ACTIVATIONS, RNNAttributes
from onnx_masked_rnn.functions import check_opset

__all__ = ["build_native_function"]

_INT64 = ir.DataType.INT64
_INT32 = ir.DataType.INT32


def build_native_function(attrs: RNNAttributes, present: Set[str], opset: int) -> onnx.FunctionProto:
    """The native expansion of a node with attributes ``attrs`` whose present optional inputs are
    ``present``, as a FunctionProto in :data:`DOMAIN` named after the op, using ``ai.onnx`` ops at
    ``opset`` only.

    Its inputs and outputs are the op's full lists; it declares every attribute of the op but its
    body reads none. ``attrs.hidden_size`` must be set: the native kernels need it as an attribute
    (take it from ``R``'s shape when the node omits it).
    """
    spec = attrs.spec
    optional = set(spec.inputs) - {"X", "W", "R"}
    unknown = set(present) - optional
    if unknown:
        raise ValueError(
            f"present names {sorted(unknown)} that are not optional inputs of {spec.op_type} "
            f"(those are {sorted(optional)})"
        )
    if attrs.hidden_size is None:
        raise ValueError(
            f"the native expansion of {spec.op_type} needs attribute 'hidden_size' (the native "
            "kernels require it); set it from the last axis of input 'R'"
        )
    check_opset(opset)

    # Type what the contract fixes, so the builder types the index arithmetic (X's float type is open).
    fixed = {"mask": ir.TensorType(ir.DataType.BOOL), "sequence_lens": ir.TensorType(_INT32)}
    formals = [ir.Value(name=name, type=fixed.get(name)) for name in spec.inputs]

    def body(op, *values: ir.Value) -> list[ir.Value]:
        inputs = {n: v for n, v in zip(spec.inputs, values) if n in {"X", "W", "R"} | set(present)}
        return _MaskedToNative(op, attrs, inputs).outputs()

    function = build_function(body, formals, domain=DOMAIN, name=spec.op_type, opset_imports={"": opset})
    for value, name in zip(function.outputs, spec.outputs):
        value.name = name
    proto = ir.serde.serialize_function(function)
    proto.attribute.extend(spec.attribute_names)
    return proto


def _ambiguous_rnn_parameters(attrs: RNNAttributes) -> bool:
    """Whether a bidirectional RNN's ``activation_alpha``/``activation_beta`` mean different
    things to the ONNX specification and to onnxruntime's RNN kernel.

    The specification consumes the values in the order of the activations, only by those that
    take them (as onnxruntime's LSTM and GRU kernels do); onnxruntime's RNN kernel reads value
    ``d`` for direction ``d``. The two agree unless exactly one direction's activation takes the
    parameter; then the expansion runs the directions as two RNNs, where they agree again.
    """
    if attrs.op_type != "MaskedRNN" or attrs.num_directions == 1:
        return False
    for which in (0, 1):  # alpha, beta
        takes = [ACTIVATIONS[acts[0].name][which] for acts in attrs.activations]
        if takes[0] != takes[1]:
            return True
    return False


class _MaskedToNative:
    """Builds the body with ``op`` (an onnxscript OpBuilder). Index tensors are time-major
    ``[T, N]`` throughout; ``layout`` only changes how ``X``, ``Y`` and the states are addressed."""

    def __init__(self, op, attrs: RNNAttributes, inputs: dict[str, ir.Value]) -> None:
        self.op, self.attrs, self.inputs = op, attrs, inputs
        self.batch_major = attrs.layout == 1
        dims = op.Shape(inputs["X"])
        dims.type = ir.TensorType(_INT64)  # not inferred: X's type is open
        self.T = op.Gather(dims, 1 if self.batch_major else 0, _outputs=["T"])  # scalars
        self.N = op.Gather(dims, 0 if self.batch_major else 1, _outputs=["N"])
        self.steps = op.Unsqueeze(op.Range(0, self.T, 1), [1], _outputs=["steps"])  # [T, 1]
        self.rows = op.Range(0, self.N, 1, _outputs=["rows"])  # [N]
        # initial_h/initial_c direction-major [D, N, H] (absent: None)
        self.initial = {
            name: self.transpose_state(inputs[name]) if self.batch_major else inputs[name]
            for name in ("initial_h", "initial_c")
            if name in inputs
        }

    def outputs(self) -> list[ir.Value]:
        op = self.op
        m = self.effective_mask()
        if m is None:  # nothing is masked: the native op is the whole story
            Y, *states = self.native(self.time_major(self.inputs["X"]), None)
            if self.batch_major:
                return [op.Transpose(Y, perm=[2, 0, 1, 3])] + [self.transpose_state(s) for s in states]
            return [op.Identity(v) for v in (Y, *states)]

        m_int = op.Cast(m, to=_INT64)
        cumsum = op.CumSum(m_int, 0, _outputs=["cumsum"])  # [T, N]: unmasked steps up to t, included
        counts = op.Gather(cumsum, -1, axis=0, _outputs=["counts"])  # [N]: unmasked steps per row
        rank = op.Sub(cumsum, 1, _outputs=["rank"])  # an unmasked step's position once compacted
        if "mask" in self.inputs:
            X, lens = self.compacted_x(m, rank, cumsum, counts), op.Cast(counts, to=_INT32)
        else:  # sequence_lens alone: every row is compact already
            X, lens = self.time_major(self.inputs["X"]), self.inputs["sequence_lens"]
        Y_compact, *states = self.native(X, lens, outputs=["Y_compact", "Y_h_native", "Y_c_native"])

        # Y[t, d, n] = padded[source[t, d, n], d, n], with the pad row last (source -1):
        # one Gather on `padded` flattened to [(T+1)·D·N, H], addressed by source·D·N + d·N + n.
        padded = op.Pad(Y_compact, [0, 0, 0, 0, 1, 0, 0, 0], _outputs=["padded"])  # zeros
        D = self.attrs.num_directions
        lanes = op.Mul(self.N, D)
        flat = op.Add(
            op.Mul(self.source_steps(m_int, rank, cumsum, counts), lanes),
            op.Reshape(op.Range(0, lanes, 1), [D, -1]),
            _outputs=["Y_rows"],
        )
        if self.batch_major:
            flat = op.Transpose(flat, perm=[2, 0, 1])
        Y = op.Gather(op.Flatten(padded, axis=3), flat, axis=0, _outputs=["Y"])

        # A row with no unmasked step keeps its initial state (the native op leaves it undefined).
        outputs = [Y]
        if self.initial:
            processed = op.Unsqueeze(op.Greater(counts, 0), [1])  # [N, 1]: broadcasts over [D, N, H]
        for state, name in zip(states, ("initial_h", "initial_c")):
            if name in self.initial:
                state = op.Where(processed, state, self.initial[name])
            outputs.append(self.transpose_state(state) if self.batch_major else op.Identity(state))
        return outputs

    def effective_mask(self) -> ir.Value | None:
        """``mask AND t < sequence_lens`` as ``[T, N]`` bool; None when both are absent."""
        op = self.op
        mask, lens = self.inputs.get("mask"), self.inputs.get("sequence_lens")
        if mask is not None and self.batch_major:
            mask = op.Transpose(mask, perm=[1, 0])
        if lens is None:
            return mask
        within = op.Less(self.steps, op.Cast(lens, to=_INT64))
        return within if mask is None else op.And(mask, within)

    def compacted_x(self, m: ir.Value, rank: ir.Value, cumsum: ir.Value, counts: ir.Value) -> ir.Value:
        """``X`` time-major with each row's unmasked steps first, then its masked ones, each
        group in time order (a stable sort of the steps by ``!m``)."""
        op, steps, rows = self.op, self.steps, self.rows
        # Step t moves to its rank among the unmasked steps, or, after all of them, its rank among
        # the masked ones (t - cumsum[t] masked steps precede it).
        destination = op.Where(m, rank, op.Add(counts, op.Sub(steps, cumsum)), _outputs=["destination"])
        # Each step's row in X flattened to [T·N, I] (batch-major: [N·T, I]), sent to its destination.
        source = (
            op.Add(op.Mul(rows, self.T), steps) if self.batch_major else op.Add(op.Mul(steps, self.N), rows)
        )
        order = op.ScatterElements(source, destination, source, axis=0)
        # Only the first max(counts) compacted steps are ever processed.
        order = op.Slice(order, [0], op.ReduceMax(counts, keepdims=1), [0], _outputs=["order"])
        return op.Gather(op.Flatten(self.inputs["X"], axis=2), order, axis=0, _outputs=["X_compact"])

    def source_steps(self, m_int: ir.Value, rank: ir.Value, cumsum: ir.Value, counts: ir.Value) -> ir.Value:
        """``[T, D, N]``: the compacted step whose output ``Y`` holds at each step, per direction;
        -1 (the pad row) where there is none."""
        op = self.op
        directions = {"forward": ["forward"], "reverse": ["reverse"], "bidirectional": ["forward", "reverse"]}
        sources = []
        for direction in directions[self.attrs.direction]:
            if self.attrs.masked_output == "zero":  # an unmasked step's own output, else the pad
                source = op.Sub(op.Mul(m_int, cumsum), 1)
            elif direction == "forward":  # the last unmasked step at or before t
                source = rank
            else:  # the first unmasked step at or after t
                following = op.Sub(cumsum, m_int)
                source = op.Where(op.Less(following, counts), following, -1)
            sources.append(op.Unsqueeze(source, [1]))
        return sources[0] if len(sources) == 1 else op.Concat(*sources, axis=1)

    def native(
        self, X: ir.Value, lens: ir.Value | None, outputs: int | list[str] | None = None
    ) -> list[ir.Value]:
        """The native op on time-major ``X`` with ``sequence_lens`` = ``lens``."""
        spec = self.attrs.spec
        given = {**self.inputs, **self.initial, "X": X, "sequence_lens": lens}
        outputs = len(spec.outputs) if outputs is None else outputs[: len(spec.outputs)]
        if _ambiguous_rnn_parameters(self.attrs):
            return self.native_per_direction(given)
        return self.native_op(self.attrs, given, outputs)

    def native_op(
        self, attrs: RNNAttributes, given: dict[str, ir.Value | None], outputs: int | list[str]
    ) -> list[ir.Value]:
        spec = attrs.spec
        args = [given.get(name) for name in spec.inputs[: spec.mask_index]]
        while args[-1] is None:
            args.pop()
        attributes = attrs.to_onnx(include_masked_output=False) | {"layout": 0}
        return getattr(self.op, spec.onnx_op_type)(*args, **attributes, _outputs=outputs)

    def native_per_direction(self, given: dict[str, ir.Value | None]) -> list[ir.Value]:
        """A bidirectional RNN as a forward and a reverse RNN, each with its own weights and
        activation (see :func:`_ambiguous_rnn_parameters`), concatenated."""
        op = self.op
        halves = []
        for d, direction in enumerate(("forward", "reverse")):
            one = dataclasses.replace(
                self.attrs, direction=direction, activations=(self.attrs.activations[d],)
            )
            weights = {
                name: op.Slice(given[name], [d], [d + 1], [0]) if given.get(name) is not None else None
                for name in ("W", "R", "B", "initial_h")
            }
            halves.append(self.native_op(one, {**given, **weights}, 2))
        (Y_f, Y_h_f), (Y_b, Y_h_b) = halves
        return [op.Concat(Y_f, Y_b, axis=1), op.Concat(Y_h_f, Y_h_b, axis=0)]

    def time_major(self, X: ir.Value) -> ir.Value:
        return self.op.Transpose(X, perm=[1, 0, 2]) if self.batch_major else X

    def transpose_state(self, state: ir.Value) -> ir.Value:
        return self.op.Transpose(state, perm=[1, 0, 2])
