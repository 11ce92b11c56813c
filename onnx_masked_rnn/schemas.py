"""OpSchemas for MaskedLSTM, MaskedGRU and MaskedRNN, with type and shape inference.

Each schema is built from its ONNX counterpart's opset-22 schema (LSTM, GRU, RNN) as the installed
onnx defines it: the same inputs, outputs, type constraints, attributes, defaults and
descriptions, plus the optional ``mask`` input and the ``masked_output`` attribute; the doc string
and those two descriptions are :mod:`onnx_masked_rnn.schema_doc`'s (the operators' one normative
text). The shape rules are :func:`onnx_masked_rnn.attributes.infer_shapes`, the attribute rules
:func:`onnx_masked_rnn.attributes.parse_attributes`, so the schemas, the reference and the
function bodies cannot disagree.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator

import onnx
import onnx.defs
import onnx.numpy_helper
from onnx.defs import OpSchema

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.attributes import (
    MASKED_OUTPUT_MODES,
    OP_SPECS,
    Dim,
    OpSpec,
    infer_shapes,
    parse_node,
)
from onnx_masked_rnn.schema_doc import descriptions, doc

__all__ = [
    "ONNX_BASE_VERSION",
    "MaskedRNNInferenceError",
    "build_schema",
    "register_schemas",
    "registered_schemas",
]

ONNX_BASE_VERSION = 22
"""The ai.onnx version of LSTM/GRU/RNN that the masked operators extend."""


class MaskedRNNInferenceError(onnx.shape_inference.InferenceError, ValueError):
    """Raised by shape inference for an inconsistent node; the message names the input."""


def build_schema(op_type: str) -> OpSchema:
    """The OpSchema of one masked operator (domain ``DOMAIN``, version ``OPSET_VERSION``)."""
    spec = OP_SPECS[op_type]
    base = onnx.defs.get_schema(spec.onnx_op_type, ONNX_BASE_VERSION, "")
    extra = descriptions(op_type)
    formal = OpSchema.FormalParameter
    optional = OpSchema.FormalParameterOption.Optional

    def parameter(p: OpSchema.FormalParameter) -> OpSchema.FormalParameter:
        return formal(
            p.name,
            p.type_str,
            p.description,  # as the counterpart has it: what masking changes is in the doc string
            param_option=p.option,
            is_homogeneous=p.is_homogeneous,
            min_arity=p.min_arity,
            differentiation_category=p.differentiation_category,
        )

    inputs = [parameter(p) for p in base.inputs]
    inputs.append(
        formal(
            "mask",
            "T2",
            extra["mask"],
            param_option=optional,
            differentiation_category=OpSchema.DifferentiationCategory.NonDifferentiable,
        )
    )
    outputs = [parameter(p) for p in base.outputs]
    if tuple(p.name for p in inputs) != spec.inputs or tuple(p.name for p in outputs) != spec.outputs:
        raise AssertionError(f"OP_SPECS[{op_type!r}] disagrees with {spec.onnx_op_type}-{ONNX_BASE_VERSION}")

    attributes = []
    for name, attr in sorted(base.attributes.items()):
        if attr.default_value.name:
            attributes.append(OpSchema.Attribute(name, attr.default_value, attr.description))
        else:
            attributes.append(OpSchema.Attribute(name, attr.type, attr.description, required=attr.required))
    attributes.append(
        OpSchema.Attribute(
            "masked_output",
            onnx.helper.make_attribute("masked_output", MASKED_OUTPUT_MODES[0]),
            extra["masked_output"],
        )
    )
    type_constraints = [
        (c.type_param_str, list(c.allowed_type_strs), c.description) for c in base.type_constraints
    ]
    type_constraints.append(("T2", ["tensor(bool)"], "Constrain mask to boolean tensor."))
    schema = OpSchema(
        op_type,
        DOMAIN,
        OPSET_VERSION,
        doc(op_type, base.doc),
        inputs=inputs,
        outputs=outputs,
        type_constraints=type_constraints,
        attributes=attributes,
    )
    schema.set_type_and_shape_inference_function(_inference_function(op_type))
    return schema


def _dims(type_proto: onnx.TypeProto | None) -> tuple[Dim, ...] | None:
    if type_proto is None or not type_proto.tensor_type.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
        for d in type_proto.tensor_type.shape.dim
    )


def _type_name(elem_type: int) -> str:
    return f"tensor({onnx.helper.tensor_dtype_to_string(elem_type).removeprefix('TensorProto.').lower()})"


def _inference_function(op_type: str) -> Callable[[onnx.shape_inference.InferenceContext], None]:
    spec = OP_SPECS[op_type]
    allowed = {
        c.type_param_str: set(c.allowed_type_strs)
        for c in onnx.defs.get_schema(spec.onnx_op_type, ONNX_BASE_VERSION, "").type_constraints
    }
    allowed["T2"] = {"tensor(bool)"}
    type_params = {name: "T" for name in spec.inputs} | {"sequence_lens": "T1", "mask": "T2"}

    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        try:
            _infer(ctx)
        except ValueError as error:
            raise MaskedRNNInferenceError(f"({ctx.get_display_name()}) {error}") from None

    def _infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        node = onnx.NodeProto(op_type=op_type, domain=DOMAIN)
        for name in spec.attribute_names:
            attribute = ctx.get_attribute(name)
            if attribute is not None:
                node.attribute.append(attribute)
        attrs = parse_node(node)

        present = [i < ctx.get_num_inputs() and ctx.has_input(i) for i in range(len(spec.inputs))]
        types = [ctx.get_input_type(i) if present[i] else None for i in range(len(spec.inputs))]
        elem_type, first = 0, ""
        for name, type_proto in zip(spec.inputs, types):
            if type_proto is None or not type_proto.tensor_type.elem_type:
                continue
            actual = _type_name(type_proto.tensor_type.elem_type)
            param = type_params[name]
            if actual not in allowed[param]:
                raise ValueError(f"input {name!r} must be one of {sorted(allowed[param])}, got {actual}")
            if param == "T":
                if elem_type and type_proto.tensor_type.elem_type != elem_type:
                    raise ValueError(
                        f"input {name!r} has type {actual}, but {first!r} has {_type_name(elem_type)}; "
                        "all float inputs must share one type"
                    )
                elem_type, first = type_proto.tensor_type.elem_type, first or name

        output_shapes = infer_shapes(attrs, [_dims(t) for t in types])
        _check_sequence_lens(ctx, spec, output_shapes[0][1 if attrs.layout else 0])
        if not elem_type:
            return
        for index, shape in enumerate(output_shapes):
            if index >= ctx.get_num_outputs() or not ctx.has_output(index):
                continue
            out = onnx.TypeProto()
            out.tensor_type.elem_type = elem_type
            out.tensor_type.shape.SetInParent()
            for size in shape:
                dim = out.tensor_type.shape.dim.add()
                if isinstance(size, int):
                    dim.dim_value = size
                elif isinstance(size, str):
                    dim.dim_param = size
            ctx.set_output_type(index, out)

    return infer


def _check_sequence_lens(ctx: onnx.shape_inference.InferenceContext, spec: OpSpec, seq_length: Dim) -> None:
    """Check constant ``sequence_lens`` values against a known ``seq_length``."""
    index = spec.inputs.index("sequence_lens")
    if not isinstance(seq_length, int) or index >= ctx.get_num_inputs() or not ctx.has_input(index):
        return
    data = ctx.get_input_data(index)
    if data is None:
        return
    values = onnx.numpy_helper.to_array(data)
    if ((values < 0) | (values > seq_length)).any():
        raise ValueError(
            f"input 'sequence_lens' must lie in [0, seq_length={seq_length}], got {values.tolist()}"
        )


_LOCK = threading.Lock()
_registered_explicitly = False  # register_schemas() was called: the schemas stay
_borrowers = 0  # registered_schemas() blocks running
_borrowed: set[str] = set()  # the op types those blocks registered, to deregister after the last


def _register(op_types: Iterable[str]) -> None:
    for op_type in op_types:
        schema = build_schema(op_type)
        if onnx.defs.has(op_type, OPSET_VERSION, DOMAIN):
            onnx.defs.deregister_schema(op_type, OPSET_VERSION, DOMAIN)
        onnx.defs.register_schema(schema)


def register_schemas() -> None:
    """Register the three OpSchemas with ``onnx.defs`` (checker, type and shape inference).

    Idempotent: a schema already registered under the same name, domain and version is replaced.
    """
    global _registered_explicitly
    with _LOCK:
        _register(OP_SPECS)
        _registered_explicitly = True


@contextlib.contextmanager
def registered_schemas() -> Iterator[None]:
    """Run the block with the three schemas registered, leaving ``onnx.defs`` as it was found:
    the schemas that were not registered on entry are deregistered on exit, unless
    :func:`register_schemas` has been called (its registration is for good). ``inline`` and
    ``attach_functions`` infer types in such a block. Reentrant and thread-safe (concurrent blocks
    share one registration)."""
    global _borrowers
    with _LOCK:
        if not _borrowers:
            _borrowed.update(o for o in OP_SPECS if not onnx.defs.has(o, OPSET_VERSION, DOMAIN))
            _register(_borrowed)
        _borrowers += 1
    try:
        yield
    finally:
        with _LOCK:
            _borrowers -= 1
            if not _borrowers:
                for op_type in () if _registered_explicitly else _borrowed:
                    onnx.defs.deregister_schema(op_type, OPSET_VERSION, DOMAIN)
                _borrowed.clear()
