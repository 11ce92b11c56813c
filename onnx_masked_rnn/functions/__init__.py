"""The operators' function bodies: one Scan per direction, Where for masked steps.

``build_scan_function(config, opset, form)`` returns the ``FunctionProto`` of one node
:class:`Configuration`: the body is specialised to the node's attributes, to the optional inputs
it supplies, to the outputs it lists and to ``X``'s element type, and holds only standard
``ai.onnx`` ops at ``opset``. It is built with onnxscript's graph builder from plain Python:
:mod:`.cells` holds the three cells (as ``reference.lstm_cell``/``gru_cell``/``rnn_cell``),
:mod:`.masked_scan` the masking (as ``reference.masked_recurrence``), and :func:`op_body` below
the layout and the directions around them (as ``reference``'s ``_run``), and
:func:`nothing_processed` the result when there is no step to process. The native expansion
(``native``) builds its functions from the same parts: :func:`formal_inputs`,
:func:`declared_outputs`, :func:`nothing_processed` and :func:`to_function_proto`.

Edge sizes: ``batch_size`` 0 and ``seq_length`` 0 give an empty ``Y`` and the initial states
(zeros when absent) as ``Y_h``/``Y_c``.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import onnx
import onnx_ir as ir
from onnxscript import build_function

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import RNNAttributes
from onnx_masked_rnn.functions.cells import constant, gru_cell, lstm_cell, rnn_cell
from onnx_masked_rnn.functions.masked_scan import SCAN_FORMS, effective_mask, masked_scan

__all__ = [
    "FLOAT_TYPES",
    "MIN_OPSET",
    "SCAN_FORMS",
    "Configuration",
    "build_scan_function",
    "check_form",
    "check_opset",
    "declared_outputs",
    "formal_inputs",
    "max_opset",
    "nothing_processed",
    "to_function_proto",
]

MIN_OPSET = 18
"""The oldest ai.onnx opset the bodies support (they use Split's ``num_outputs``, new in 18)."""

FLOAT_TYPES = (onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE)
"""The element types of ``X`` the ops admit (their type constraint ``T``)."""


@dataclasses.dataclass(frozen=True)
class Configuration:
    """What a masked node's body depends on: its attributes, the optional inputs it supplies
    (``present``, kept in the op's input order), how many outputs it lists, and ``X``'s element
    type (a ``TensorProto`` code). Frozen, hashable, and with a deterministic ``repr``: it keys the
    build cache and the function overloads."""

    attrs: RNNAttributes
    present: tuple[str, ...]
    num_outputs: int
    dtype: int

    @classmethod
    def of(
        cls,
        attrs: RNNAttributes,
        present=frozenset(),
        dtype: int = onnx.TensorProto.FLOAT,
        num_outputs: int | None = None,
    ) -> Configuration:
        """A configuration listing every output of the op unless ``num_outputs`` is given."""
        outputs = len(attrs.spec.outputs) if num_outputs is None else num_outputs
        return cls(attrs, tuple(present), outputs, dtype)

    def __post_init__(self) -> None:
        spec = self.attrs.spec
        unknown = set(self.present) - set(spec.inputs[3:])
        if unknown:
            raise ValueError(
                f"present names {sorted(unknown)} that are not optional inputs of {spec.op_type} "
                f"({list(spec.inputs[3:])})"
            )
        if not 1 <= self.num_outputs <= len(spec.outputs):
            raise ValueError(f"{spec.op_type} has 1 to {len(spec.outputs)} outputs, got {self.num_outputs}")
        object.__setattr__(self, "present", tuple(n for n in spec.inputs if n in self.present))
        if self.dtype not in FLOAT_TYPES:
            name = onnx.TensorProto.DataType.Name(self.dtype) if self.dtype else "unknown"
            raise ValueError(
                f"input 'X' of {spec.op_type} must be float16, float or double, got element type {name}"
            )


def max_opset() -> int:
    """The newest ai.onnx opset the installed onnx knows."""
    return onnx.defs.onnx_opset_version()


def check_opset(opset: int) -> None:
    """Raise ``ValueError`` unless ``opset`` is an ai.onnx opset the bodies can be built at."""
    if not MIN_OPSET <= opset <= max_opset():
        raise ValueError(
            f"ai.onnx opset {opset} is not supported: the masked RNN functions need an ai.onnx opset "
            f"between {MIN_OPSET} and {max_opset()} (convert the model with onnx.version_converter first)"
        )


def check_form(form: str) -> None:
    """Raise ``ValueError`` unless ``form`` is one of :data:`SCAN_FORMS`."""
    if form not in SCAN_FORMS:
        raise ValueError(f"scan_form must be one of {list(SCAN_FORMS)}, got {form!r}")


def formal_inputs(config: Configuration) -> list[ir.Value]:
    """The function's inputs, typed: ``T`` for the floats, rank from the op's signature."""
    spec, dtype = config.attrs.spec, ir.DataType(config.dtype)
    ranks = {"B": 2, "sequence_lens": 1, "P": 2, "mask": 2}
    types = {"sequence_lens": ir.DataType.INT32, "mask": ir.DataType.BOOL}
    return [
        ir.Value(
            name=name, type=ir.TensorType(types.get(name, dtype)), shape=ir.Shape([None] * ranks.get(name, 3))
        )
        for name in spec.inputs
    ]


def _subgraphs(graph: ir.Graph):
    for node in graph:
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                yield attr.value
            elif attr.type == ir.AttributeType.GRAPHS:
                yield from attr.value


def _defined(graph: ir.Graph) -> list[ir.Value]:
    return [*graph.inputs, *(v for node in graph for v in node.outputs)]


def _all_names(graph: ir.Graph) -> set[str]:
    names = {v.name for v in _defined(graph) if v.name}
    for sub in _subgraphs(graph):
        names |= _all_names(sub)
    return names


def _unshadow(graph: ir.Graph, enclosing: set[str], taken: set[str]) -> None:
    """Rename the values of nested graphs that reuse a name of an enclosing graph. ONNX names are
    unique across nested scopes, and onnxruntime's function inliner rejects a Scan body that
    shadows a value defined after its node (onnx_ir's NameFixPass compares a subgraph only with
    the names its parent defined before it)."""
    visible = enclosing | {v.name for v in _defined(graph) if v.name}
    for sub in _subgraphs(graph):
        for value in _defined(sub):
            if value.name in visible:
                k = 1
                while f"{value.name}_{k}" in taken:
                    k += 1
                value.name = f"{value.name}_{k}"
                taken.add(value.name)
        _unshadow(sub, visible, taken)


def to_function_proto(function: ir.Function, config: Configuration, doc: str) -> onnx.FunctionProto:
    """The ``FunctionProto`` of ``function``: outputs named as the op's, value names made unique
    across the Scan bodies (onnx_ir's ``NameFixPass``), every attribute of the op declared (the
    body reads none), node names and builder metadata dropped."""
    spec = config.attrs.spec
    for value, name in zip(function.outputs, spec.outputs):
        value.name = name
    holder = ir.Model(ir.Graph([], [], nodes=[], opset_imports=dict(function.opset_imports)), ir_version=10)
    holder.functions[function.identifier()] = function
    ir.passes.common.NameFixPass()(holder)
    _unshadow(function.graph, set(), _all_names(function.graph))
    for node in ir.traversal.RecursiveGraphIterator(function.graph):
        node.name = None
        node.metadata_props.clear()
    proto = ir.serde.serialize_function(function)
    proto.attribute.extend(spec.attribute_names)
    proto.doc_string = doc
    return proto


def build_scan_function(config: Configuration, opset: int, form: str = "portable") -> onnx.FunctionProto:
    """The Scan + Where function of a node of configuration ``config`` at ai.onnx ``opset``, its
    Scan bodies in ``form`` (``"portable"`` or ``"capture"``, see :mod:`.masked_scan`).

    The ``FunctionProto`` has domain ``DOMAIN``, the op's name, its full input list, the node's
    ``config.num_outputs`` outputs and every attribute name declared; its body refers to no
    attribute.
    """
    check_opset(opset)
    check_form(form)
    function = onnx.FunctionProto()
    function.CopyFrom(_build(config, opset, form))
    return function


@functools.lru_cache(maxsize=256)
def _build(config: Configuration, opset: int, form: str) -> onnx.FunctionProto:
    spec = config.attrs.spec
    function = build_function(
        lambda op, *values: op_body(op, config, form, *values),
        formal_inputs(config),
        domain=DOMAIN,
        name=spec.op_type,
        opset_imports={"": opset},
    )
    return to_function_proto(function, config, describe(config, form))


def declared_outputs(config: Configuration) -> list[ir.Value]:
    """The op's outputs with their element type and rank, as an ``If`` branch declares them."""
    ranks = (4, 3, 3)
    return [
        ir.Value(name=name, type=ir.TensorType(ir.DataType(config.dtype)), shape=ir.Shape([None] * rank))
        for name, rank in zip(config.attrs.spec.outputs[: config.num_outputs], ranks)
    ]


def nothing_processed(op, config: Configuration, inputs: dict[str, ir.Value]) -> list[ir.Value]:
    """The outputs when no step is processed (``batch_size`` or ``seq_length`` 0, or every step
    masked): zeros for ``Y``, the initial states (zeros when absent) for ``Y_h``/``Y_c``."""
    attrs = config.attrs
    batch_axis, time_axis = (0, 1) if attrs.layout == 1 else (1, 0)
    X = inputs["X"]
    T = op.Shape(X, start=time_axis, end=time_axis + 1)
    N = op.Shape(X, start=batch_axis, end=batch_axis + 1)
    D, H = constant(op, [attrs.num_directions], ir.DataType.INT64), op.Shape(inputs["R"], start=2, end=3)
    zero = ir.tensor(np.zeros(1, dtype=ir.DataType(config.dtype).numpy()))
    outputs = [
        op.ConstantOfShape(
            op.Concat(*((N, T, D, H) if attrs.layout == 1 else (T, D, N, H)), axis=0), value=zero
        )
    ]
    state_shape = op.Concat(*((N, D, H) if attrs.layout == 1 else (D, N, H)), axis=0)
    for name in ("initial_h", "initial_c")[: config.num_outputs - 1]:
        given = inputs.get(name)
        outputs.append(
            op.Identity(given) if given is not None else op.ConstantOfShape(state_shape, value=zero)
        )
    return outputs


def op_body(op, config: Configuration, form: str, *values: ir.Value | None) -> list[ir.Value]:
    """The op's outputs from its inputs (None for absent ones): :func:`nothing_processed` when
    ``X`` has no step or no row (onnxruntime's Scan fails on a sequence of length 0), else
    :func:`recurrence`."""
    spec = config.attrs.spec
    inputs = {n: v for n, v in zip(spec.inputs, values) if n in ("X", "W", "R") or n in config.present}
    # seq_length · batch_size, not Size(X): X of shape [T, N, 0] still has steps to process
    dims = op.Shape(inputs["X"])
    empty = op.Equal(op.Mul(op.Gather(dims, 0), op.Gather(dims, 1)), 0)
    nothing = op.builder.subgraph(
        lambda op: nothing_processed(op, config, inputs),
        [],
        declared_outputs(config),
        name="nothing_processed",
    )
    work = op.builder.subgraph(
        lambda op: recurrence(op, config, form, inputs), [], declared_outputs(config), name="recurrence"
    )
    outputs = op.If(
        empty, then_branch=nothing, else_branch=work, _outputs=list(spec.outputs[: config.num_outputs])
    )
    return list(outputs) if config.num_outputs > 1 else [outputs]


def recurrence(op, config: Configuration, form: str, inputs: dict[str, ir.Value]) -> list[ir.Value]:
    """The effective mask, time-major views for ``layout`` 1, one :func:`masked_scan` per
    direction, outputs concatenated over directions and put back in ``layout``."""
    attrs, dtype = config.attrs, ir.DataType(config.dtype)
    get = inputs.get
    X = inputs["X"]
    m = effective_mask(op, X, get("sequence_lens"), get("mask"), attrs.layout)
    if m is not None:
        m = op.Unsqueeze(m, [2], _outputs=["m"])  # [T, N, 1]: a step's m_t broadcasts over [N, H]
    initial = {n: get(n) for n in ("initial_h", "initial_c") if n in attrs.spec.inputs}
    # onnxruntime 1.32 (ORT_ENABLE_ALL) crashes at session creation on a float16 MatMul fed by a
    # Transpose of its input when a MatMul or Mul follows (MatmulTransposeFusion): batch-major
    # float16 X is projected as it is and the projections are transposed instead.
    project_batch_major = attrs.layout == 1 and dtype == ir.DataType.FLOAT16
    if attrs.layout == 1:
        if not project_batch_major:
            X = op.Transpose(X, perm=[1, 0, 2])
        initial = {n: None if v is None else op.Transpose(v, perm=[1, 0, 2]) for n, v in initial.items()}
    zeros = None
    if None in initial.values():
        batch_axis = 0 if project_batch_major else 1
        shape = op.Concat(
            op.Shape(X, start=batch_axis, end=batch_axis + 1), op.Shape(inputs["R"], start=2, end=3), axis=0
        )
        zeros = op.ConstantOfShape(
            shape, value=ir.tensor(np.zeros(1, dtype=dtype.numpy())), _outputs=["zeros"]
        )
    ys, finals = [], []
    for d in range(attrs.num_directions):
        weights = (X, inputs["W"], inputs["R"], get("B"))
        if attrs.op_type == "MaskedLSTM":
            cell = lstm_cell(op, attrs, d, *weights, get("P"), dtype)
        else:
            cell = (gru_cell if attrs.op_type == "MaskedGRU" else rnn_cell)(op, attrs, d, *weights, dtype)
        if project_batch_major:
            projections = tuple((op.Transpose(v, perm=[1, 0, 2]), name) for v, name in cell.projections)
            cell = dataclasses.replace(cell, projections=projections)
        state = [zeros if v is None else op.Gather(v, d, axis=0) for v in initial.values()]
        Y_d, final = masked_scan(
            op,
            cell,
            state,
            m,
            reverse=attrs.direction == "reverse" or d == 1,
            masked_output=attrs.masked_output,
            zero_initial_h=initial["initial_h"] is None,
            form=form,
            dtype=dtype,
            d=d,
        )
        ys.append(Y_d)
        finals.append([op.Unsqueeze(s, [0]) for s in final])
    outputs = [op.Concat(*ys, axis=1) if len(ys) > 1 else ys[0]]
    outputs += [op.Concat(*states, axis=0) if len(states) > 1 else states[0] for states in zip(*finals)]
    if attrs.layout == 1:
        outputs = [op.Transpose(outputs[0], perm=[2, 0, 1, 3])] + [
            op.Transpose(s, perm=[1, 0, 2]) for s in outputs[1:]
        ]
    return outputs[: config.num_outputs]


def describe(config: Configuration, form: str) -> str:
    """One line naming the specialisation a body was built for."""
    attrs = config.attrs
    acts = ", ".join(f"{a.name}({a.alpha:g},{a.beta:g})" for d in attrs.activations for a in d)
    extra = []
    if attrs.clip is not None:
        extra.append(f"clip={attrs.clip:g}")
    if attrs.op_type == "MaskedLSTM":
        extra.append(f"input_forget={attrs.input_forget}")
    if attrs.op_type == "MaskedGRU":
        extra.append(f"linear_before_reset={attrs.linear_before_reset}")
    present = ", ".join(n for n in attrs.spec.inputs if n in config.present) or "none"
    return (
        f"{attrs.op_type} specialised to direction={attrs.direction}, layout={attrs.layout}, "
        f"masked_output={attrs.masked_output}, activations=[{acts}]"
        + "".join(", " + e for e in extra)
        + f"; optional inputs: {present}; X: {onnx.TensorProto.DataType.Name(config.dtype).lower()}"
        + f"; {form} Scan bodies"
    )
