"""Scripting machinery shared by the function builders.

The bodies are written as onnxscript ``@script`` functions, specialised at Python level: every
builder is a factory whose closure holds the node's structural attributes, and onnxscript resolves
a Python ``if`` on such a closure flag when it scripts the function. Reusable pieces (activations,
the effective mask, the masked outputs, one direction of a recurrence) are scripted as helper
functions in a private domain and called like ops; :meth:`Parts.finish` inlines them, so the
returned ``FunctionProto`` holds standard ``ai.onnx`` ops only.
"""

from __future__ import annotations

import re

import onnx
import onnx.inliner
from onnx import helper
from onnxscript import script, values

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn._walk import subgraphs, walk_nodes
from onnx_masked_rnn.attributes import Activation, RNNAttributes

PARTS_DOMAIN = DOMAIN + ".parts"
"""Domain of the helper functions; never visible outside :mod:`onnx_masked_rnn.functions`."""

PARTS = values.Opset(PARTS_DOMAIN, 1)
OPS = values.Opset(DOMAIN, OPSET_VERSION)


class Parts:
    """The helper functions of one build, at one ai.onnx opset.

    ``op`` is the ai.onnx opset every script of this build uses; :meth:`add` names a scripted
    helper uniquely and records it; :meth:`finish` inlines the helpers into the op's function.
    """

    def __init__(self, opset: int) -> None:
        self.opset = opset
        self.op = values.Opset("", opset)
        self._functions: dict[str, values.OnnxFunction] = {}

    def add(self, function: values.OnnxFunction, name: str) -> values.OnnxFunction:
        """Give ``function`` the unique ``name`` (callers refer to it by this name)."""
        if name in self._functions:
            raise AssertionError(f"helper function {name!r} built twice")
        function._name = name  # noqa: SLF001 - onnxscript names the call node after Op.name
        function.function_ir.name = name
        self._functions[name] = function
        return function

    def get(self, name: str) -> values.OnnxFunction | None:
        return self._functions.get(name)

    def finish(self, function: values.OnnxFunction, attrs: RNNAttributes) -> onnx.FunctionProto:
        """The op's ``FunctionProto``: helpers inlined, standard ops only, attributes declared."""
        main = function.to_function_proto()
        main.name, main.domain = attrs.op_type, DOMAIN
        model = helper.make_model(
            helper.make_graph([], "scratch", [], []),
            opset_imports=[helper.make_opsetid("", self.opset), helper.make_opsetid(PARTS_DOMAIN, 1)],
            functions=[main, *(f.to_function_proto() for f in self._functions.values())],
            ir_version=10,
        )
        ids = [(PARTS_DOMAIN, name) for name in self._functions]
        inlined = onnx.inliner.inline_selected_functions(model, ids, exclude=False)
        (body,) = [f for f in inlined.functions if f.domain == DOMAIN]
        del body.opset_import[:]
        body.opset_import.append(helper.make_opsetid("", self.opset))
        del body.attribute[:]
        body.attribute.extend(attrs.spec.attribute_names)
        body.doc_string = describe(attrs)
        _tidy_names(body, attrs.spec.outputs)
        return body


def _tidy_names(function: onnx.FunctionProto, outputs: tuple[str, ...]) -> None:
    """Name the outputs ``outputs`` (the op's output names), drop the suffixes the inliner appends
    (``xw__2`` becomes ``xw``) where that keeps every name unique, and drop the node names, so that
    the printed body reads like its source."""
    nodes = list(walk_nodes(function.node))
    graphs = [g for n in nodes for g in subgraphs(n)]
    defined = [v.name for g in graphs for v in g.input] + [o for n in nodes for o in n.output if o]

    def strip(name: str) -> str:
        return re.sub(r"(__\d+(_\d+)*)+$", "", name) or name

    renamed = dict(zip(function.output, outputs))
    taken = set(function.input) | set(outputs)
    taken |= {n for n in defined if strip(n) == n and n not in renamed and n not in outputs}
    for name in defined:
        if name in renamed or (name in taken and name not in outputs):
            continue
        base = strip(name)
        candidate, k = base, 0
        while candidate in taken:
            k += 1
            candidate = f"{base}_{k}"
        renamed[name] = candidate
        taken.add(candidate)

    def rename(values) -> None:
        for i, v in enumerate(values):
            if v in renamed:
                values[i] = renamed[v]

    rename(function.output)

    for node in nodes:
        node.ClearField("name")
        rename(node.input)
        rename(node.output)
    for g in graphs:
        for value in (*g.input, *g.output):
            value.name = renamed.get(value.name, value.name)


def describe(attrs: RNNAttributes) -> str:
    """One line naming the specialisation a body was built for."""
    acts = ", ".join(f"{a.name}({a.alpha:g},{a.beta:g})" for d in attrs.activations for a in d)
    extra = []
    if attrs.clip is not None:
        extra.append(f"clip={attrs.clip:g}")
    if attrs.op_type == "MaskedLSTM":
        extra.append(f"input_forget={attrs.input_forget}")
    if attrs.op_type == "MaskedGRU":
        extra.append(f"linear_before_reset={attrs.linear_before_reset}")
    return (
        f"{attrs.op_type} specialised to direction={attrs.direction}, layout={attrs.layout}, "
        f"masked_output={attrs.masked_output}, activations=[{acts}]" + "".join(", " + e for e in extra)
    )


def _number(x: float) -> str:
    return repr(float(x)).replace("-", "m").replace(".", "p").replace("+", "")


def activation(parts: Parts, act: Activation) -> values.OnnxFunction:
    """The ONNX RNN activation ``act`` as a helper function ``y = act(x)``, for the float types.

    Relu, Tanh and Sigmoid are the ONNX ops. Affine and ScaledTanh are not ONNX ops and are
    decomposed; so are the other six, as their ONNX function bodies define them, because
    onnxruntime 1.32 has no float64 kernel for them in models of ai.onnx opset 21 or newer.
    """
    name = f"{act.name}_{_number(act.alpha)}_{_number(act.beta)}"
    if (existing := parts.get(name)) is not None:
        return existing
    op = parts.op
    ALPHA, BETA = act.alpha, act.beta
    RELU, TANH, SIGMOID = act.name == "Relu", act.name == "Tanh", act.name == "Sigmoid"
    AFFINE, LEAKY_RELU, THRESHOLDED_RELU = (
        act.name == "Affine",
        act.name == "LeakyRelu",
        act.name == "ThresholdedRelu",
    )
    SCALED_TANH, HARD_SIGMOID, ELU = act.name == "ScaledTanh", act.name == "HardSigmoid", act.name == "Elu"
    SOFTSIGN = act.name == "Softsign"

    @script(PARTS, default_opset=op)
    def apply(x):
        if RELU:
            y = op.Relu(x)
        elif TANH:
            y = op.Tanh(x)
        elif SIGMOID:
            y = op.Sigmoid(x)
        elif AFFINE:
            y = op.Add(op.Mul(op.CastLike(ALPHA, x), x), op.CastLike(BETA, x))
        elif LEAKY_RELU:
            y = op.Where(op.GreaterOrEqual(x, op.CastLike(0.0, x)), x, op.Mul(op.CastLike(ALPHA, x), x))
        elif THRESHOLDED_RELU:
            y = op.Where(op.Greater(x, op.CastLike(ALPHA, x)), x, op.CastLike(0.0, x))
        elif SCALED_TANH:
            y = op.Mul(op.CastLike(ALPHA, x), op.Tanh(op.Mul(op.CastLike(BETA, x), x)))
        elif HARD_SIGMOID:
            linear = op.Add(op.Mul(op.CastLike(ALPHA, x), x), op.CastLike(BETA, x))
            y = op.Max(op.CastLike(0.0, x), op.Min(op.CastLike(1.0, x), linear))
        elif ELU:
            negative = op.Mul(op.CastLike(ALPHA, x), op.Sub(op.Exp(x), op.CastLike(1.0, x)))
            y = op.Where(op.GreaterOrEqual(x, op.CastLike(0.0, x)), x, negative)
        elif SOFTSIGN:
            y = op.Div(x, op.Add(op.CastLike(1.0, x), op.Abs(x)))
        else:  # Softplus: log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), which cannot overflow
            y = op.Add(op.Relu(x), op.Log(op.Add(op.CastLike(1.0, x), op.Exp(op.Neg(op.Abs(x))))))
        return y

    return parts.add(apply, name)
