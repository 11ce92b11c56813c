"""The operators' static description: inputs, outputs, attributes, and their validation.

One place decides what a well-formed MaskedLSTM/GRU/RNN node is. The numpy reference, the
function builders, the native expansion and the OpSchemas all read it, so they cannot disagree on a
default, a gate count or an activation's parameters.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Sequence
from typing import Any

import onnx

__all__ = [
    "ACTIVATIONS",
    "DIRECTIONS",
    "MASKED_OUTPUT_MODES",
    "OP_SPECS",
    "Activation",
    "Dim",
    "OpSpec",
    "RNNAttributes",
    "attributes_from_node",
    "infer_shapes",
    "parse_attributes",
    "parse_node",
    "round_to_float32",
]

DIRECTIONS = ("forward", "reverse", "bidirectional")
MASKED_OUTPUT_MODES = ("zero", "carry")
"""The values of ``masked_output``; the first is the default (the ops then extend LSTM/GRU/RNN-22)."""


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """Static facts about one masked operator and its ONNX counterpart."""

    op_type: str
    onnx_op_type: str
    num_gates: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    default_activations: tuple[str, ...]
    extra_attributes: tuple[str, ...]

    @property
    def mask_index(self) -> int:
        return self.inputs.index("mask")

    @property
    def num_activations(self) -> int:
        return len(self.default_activations)

    @property
    def attribute_names(self) -> tuple[str, ...]:
        common = (
            "activation_alpha",
            "activation_beta",
            "activations",
            "clip",
            "direction",
            "hidden_size",
            "layout",
            "masked_output",
        )
        return tuple(sorted(common + self.extra_attributes))


OP_SPECS: dict[str, OpSpec] = {
    "MaskedLSTM": OpSpec(
        "MaskedLSTM",
        "LSTM",
        4,
        ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P", "mask"),
        ("Y", "Y_h", "Y_c"),
        ("Sigmoid", "Tanh", "Tanh"),
        ("input_forget",),
    ),
    "MaskedGRU": OpSpec(
        "MaskedGRU",
        "GRU",
        3,
        ("X", "W", "R", "B", "sequence_lens", "initial_h", "mask"),
        ("Y", "Y_h"),
        ("Sigmoid", "Tanh"),
        ("linear_before_reset",),
    ),
    "MaskedRNN": OpSpec(
        "MaskedRNN",
        "RNN",
        1,
        ("X", "W", "R", "B", "sequence_lens", "initial_h", "mask"),
        ("Y", "Y_h"),
        ("Tanh",),
        (),
    ),
}

# name -> (takes alpha, takes beta, default alpha, default beta). A function that is an ONNX operator
# has that operator's defaults (onnx.defs.get_schema(name).attributes); Affine and ScaledTanh, no
# longer operators, have the defaults spec/semantics.md section 9 gives them (Affine: those of the
# former experimental Affine-1; ScaledTanh-1 declared none: 1.0 and 1.0 make it Tanh). Each function
# takes the next unused value of `activation_alpha`/`activation_beta` only when it has that
# parameter, and its default when the list is exhausted.
ACTIVATIONS: dict[str, tuple[bool, bool, float, float]] = {
    "Relu": (False, False, 0.0, 0.0),
    "Tanh": (False, False, 0.0, 0.0),
    "Sigmoid": (False, False, 0.0, 0.0),
    "Affine": (True, True, 1.0, 0.0),
    "LeakyRelu": (True, False, 0.01, 0.0),
    "ThresholdedRelu": (True, False, 1.0, 0.0),
    "ScaledTanh": (True, True, 1.0, 1.0),
    "HardSigmoid": (True, True, 0.2, 0.5),
    "Elu": (True, False, 1.0, 0.0),
    "Softsign": (False, False, 0.0, 0.0),
    "Softplus": (False, False, 0.0, 0.0),
}
_ACTIVATION_BY_LOWER = {name.lower(): name for name in ACTIVATIONS}


@dataclasses.dataclass(frozen=True)
class Activation:
    """One activation function with its parameters resolved (unused ones are 0)."""

    name: str
    alpha: float = 0.0
    beta: float = 0.0


@dataclasses.dataclass(frozen=True)
class RNNAttributes:
    """A node's attributes, validated and with every default applied.

    ``activations[d]`` holds direction ``d``'s functions in ONNX order (LSTM: f, g, h; GRU: f, g;
    RNN: f). ``clip`` is ``None`` when absent. ``hidden_size`` is ``None`` when absent (it is then
    read from ``R``). ``input_forget``/``linear_before_reset`` are 0 for ops that lack them.
    """

    op_type: str
    direction: str = "forward"
    layout: int = 0
    activations: tuple[tuple[Activation, ...], ...] = ()
    clip: float | None = None
    hidden_size: int | None = None
    input_forget: int = 0
    linear_before_reset: int = 0
    masked_output: str = MASKED_OUTPUT_MODES[0]

    @property
    def spec(self) -> OpSpec:
        return OP_SPECS[self.op_type]

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def to_onnx(self, *, include_masked_output: bool = True) -> dict[str, Any]:
        """The attributes as explicit ONNX node attributes (defaults bound, nothing omitted
        except an absent ``clip``/``hidden_size``), in the form ``onnx.helper.make_node`` takes."""
        names = [a.name for acts in self.activations for a in acts]
        alphas = [a.alpha for acts in self.activations for a in acts if ACTIVATIONS[a.name][0]]
        betas = [a.beta for acts in self.activations for a in acts if ACTIVATIONS[a.name][1]]
        out: dict[str, Any] = {"direction": self.direction, "layout": self.layout, "activations": names}
        if alphas:
            out["activation_alpha"] = alphas
        if betas:
            out["activation_beta"] = betas
        if self.clip is not None:
            out["clip"] = self.clip
        if self.hidden_size is not None:
            out["hidden_size"] = self.hidden_size
        if self.op_type == "MaskedLSTM":
            out["input_forget"] = self.input_forget
        if self.op_type == "MaskedGRU":
            out["linear_before_reset"] = self.linear_before_reset
        if include_masked_output:
            out["masked_output"] = self.masked_output
        return out


def _as_str(name: str, value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode()
    if not isinstance(value, str):
        raise ValueError(f"attribute {name!r} must be a string, got {value!r}")
    return value


def _as_int(name: str, value: Any, allowed: Sequence[int]) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValueError(f"attribute {name!r} must be an integer in {list(allowed)}, got {value!r}")
    value = int(value)
    if value not in allowed:
        raise ValueError(f"attribute {name!r} must be one of {list(allowed)}, got {value}")
    return value


def round_to_float32(value: float) -> float:
    """``value`` rounded to float32: an ONNX float attribute holds no more, so a node and a direct
    call with the same Python float compute the same thing."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def _as_floats(name: str, value: Any) -> list[float]:
    try:
        values = [float(v) for v in value]
    except TypeError:
        raise ValueError(f"attribute {name!r} must be a list of floats, got {value!r}") from None
    return values


def _resolve_activations(
    spec: OpSpec, num_directions: int, names: Any, alphas: Any, betas: Any
) -> tuple[tuple[Activation, ...], ...]:
    expected = spec.num_activations * num_directions
    # RNN-22 declares the default ["Tanh", "Tanh"] even for one direction, and onnxruntime's RNN
    # takes the first of two functions given to a one-direction node: so does MaskedRNN.
    rnn_pair = spec.op_type == "MaskedRNN" and num_directions == 1
    if names is None:
        names = list(spec.default_activations) * num_directions
    else:
        names = [_as_str("activations", n) for n in names]
        if len(names) != expected and not (rnn_pair and len(names) == 2):
            raise ValueError(
                f"attribute 'activations' must list {expected} functions "
                f"({spec.num_activations} per direction x {num_directions} direction(s)) "
                f"for {spec.op_type}, got {len(names)}: {names}"
            )
    alpha_values = _as_floats("activation_alpha", alphas) if alphas is not None else []
    beta_values = _as_floats("activation_beta", betas) if betas is not None else []
    resolved = []
    for raw in names:
        canonical = _ACTIVATION_BY_LOWER.get(raw.lower())
        if canonical is None:
            raise ValueError(
                f"attribute 'activations' has unknown function {raw!r}; expected one of {sorted(ACTIVATIONS)}"
            )
        takes_alpha, takes_beta, alpha, beta = ACTIVATIONS[canonical]
        if takes_alpha and alpha_values:
            alpha = alpha_values.pop(0)
        if takes_beta and beta_values:
            beta = beta_values.pop(0)
        alpha = round_to_float32(alpha) if takes_alpha else 0.0
        beta = round_to_float32(beta) if takes_beta else 0.0
        resolved.append(Activation(canonical, alpha, beta))
    for attr, left in (("activation_alpha", alpha_values), ("activation_beta", beta_values)):
        if left:
            raise ValueError(
                f"attribute {attr!r} has {len(left)} value(s) that no activation in "
                f"{[a.name for a in resolved]} takes"
            )
    k = spec.num_activations
    return tuple(tuple(resolved[d * k : (d + 1) * k]) for d in range(num_directions))  # drops a pair's second


def parse_attributes(op_type: str, **attributes: Any) -> RNNAttributes:
    """Validate a node's attributes (by their ONNX names) and apply every default.

    Raises ``ValueError`` naming the attribute for an unknown attribute or an invalid value.
    """
    if op_type not in OP_SPECS:
        raise ValueError(f"unknown operator {op_type!r}; expected one of {sorted(OP_SPECS)}")
    spec = OP_SPECS[op_type]
    attributes = {k: v for k, v in attributes.items() if v is not None}
    unknown = sorted(set(attributes) - set(spec.attribute_names))
    if unknown:
        raise ValueError(
            f"{op_type} has no attribute(s) {unknown}; its attributes are {list(spec.attribute_names)}"
        )
    direction = _as_str("direction", attributes.get("direction", "forward"))
    if direction not in DIRECTIONS:
        raise ValueError(f"attribute 'direction' must be one of {list(DIRECTIONS)}, got {direction!r}")
    masked_output = _as_str("masked_output", attributes.get("masked_output", MASKED_OUTPUT_MODES[0]))
    if masked_output not in MASKED_OUTPUT_MODES:
        raise ValueError(
            f"attribute 'masked_output' must be one of {list(MASKED_OUTPUT_MODES)}, got {masked_output!r}"
        )
    layout = _as_int("layout", attributes.get("layout", 0), (0, 1))
    input_forget = _as_int("input_forget", attributes.get("input_forget", 0), (0, 1))
    linear_before_reset = _as_int("linear_before_reset", attributes.get("linear_before_reset", 0), (0, 1))
    clip = attributes.get("clip")
    if clip is not None:
        try:
            clip = round_to_float32(float(clip))
        except (TypeError, ValueError):
            raise ValueError(f"attribute 'clip' must be a float, got {clip!r}") from None
        if math.isnan(clip) or clip <= 0:
            raise ValueError(f"attribute 'clip' must be a positive number, got {clip}")
    hidden_size = attributes.get("hidden_size")
    if hidden_size is not None:
        if isinstance(hidden_size, bool) or not hasattr(hidden_size, "__index__") or int(hidden_size) <= 0:
            raise ValueError(f"attribute 'hidden_size' must be a positive integer, got {hidden_size!r}")
        hidden_size = int(hidden_size)
    num_directions = 2 if direction == "bidirectional" else 1
    activations = _resolve_activations(
        spec,
        num_directions,
        attributes.get("activations"),
        attributes.get("activation_alpha"),
        attributes.get("activation_beta"),
    )
    return RNNAttributes(
        op_type=op_type,
        direction=direction,
        layout=layout,
        activations=activations,
        clip=clip,
        hidden_size=hidden_size,
        input_forget=input_forget,
        linear_before_reset=linear_before_reset,
        masked_output=masked_output,
    )


def attributes_from_node(node: Any) -> dict[str, Any]:
    """A NodeProto's attributes as a ``{name: python value}`` dict (strings decoded)."""
    out: dict[str, Any] = {}
    for attr in node.attribute:
        if attr.ref_attr_name:
            raise ValueError(
                f"attribute {attr.name!r} of node {node.name!r} refers to an outer attribute "
                f"{attr.ref_attr_name!r}; bind it before use"
            )
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode()
        elif isinstance(value, list):
            value = [v.decode() if isinstance(v, bytes) else v for v in value]
        out[attr.name] = value
    return out


def parse_node(node: Any) -> RNNAttributes:
    """``parse_attributes`` for a NodeProto."""
    return parse_attributes(node.op_type, **attributes_from_node(node))


Dim = int | str | None  # a known size, a symbolic name, or unknown


def _same(a: Dim, b: Dim) -> bool:
    """True unless both sizes are known integers and differ."""
    return not (isinstance(a, int) and isinstance(b, int) and a != b)


def infer_shapes(attrs: RNNAttributes, shapes: Sequence[Sequence[Dim] | None]) -> tuple[tuple[Dim, ...], ...]:
    """Check input shapes against each other and the attributes; return the output shapes.

    ``shapes[i]`` is the shape of input ``i`` (``OpSpec.inputs`` order), ``None`` when the input is
    absent or its rank unknown. Dims may be symbolic (a string) or unknown (``None``): only known
    integers are compared. Raises ``ValueError`` naming the offending input. Returns ``(Y, Y_h)``
    and, for LSTM, ``Y_c``'s shape.
    """
    spec = attrs.spec
    shapes = list(shapes) + [None] * (len(spec.inputs) - len(shapes))
    named = dict(zip(spec.inputs, shapes))
    D = attrs.num_directions
    G = spec.num_gates

    def rank(name: str, r: int) -> tuple[Dim, ...] | None:
        shape = named[name]
        if shape is None:
            return None
        shape = tuple(shape)
        if len(shape) != r:
            raise ValueError(f"input {name!r} must have rank {r}, got shape {list(shape)}")
        return shape

    def expect(name: str, axis: int, actual: Dim, wanted: Dim, what: str) -> None:
        if not _same(actual, wanted):
            raise ValueError(f"input {name!r} has size {actual} on axis {axis}, expected {wanted} ({what})")

    X = rank("X", 3)
    W = rank("W", 3)
    R = rank("R", 3)
    if X is None:
        X = (None, None, None)
    T, N = (X[1], X[0]) if attrs.layout == 1 else (X[0], X[1])
    I = X[2]
    H: Dim = attrs.hidden_size
    if R is not None:
        expect("R", 0, R[0], D, f"num_directions of direction={attrs.direction!r}")
        if H is not None:
            expect("R", 2, R[2], H, "hidden_size")
        else:
            H = R[2]
        if isinstance(H, int):
            expect("R", 1, R[1], G * H, f"{G} gates x hidden_size")
    if W is not None:
        expect("W", 0, W[0], D, f"num_directions of direction={attrs.direction!r}")
        expect("W", 2, W[2], I, "input_size, the last axis of X")
        if H is None and isinstance(W[1], int):
            if W[1] % G:
                raise ValueError(f"input 'W' has size {W[1]} on axis 1, not a multiple of {G} gates")
            H = W[1] // G
    gh = G * H if isinstance(H, int) else None
    if W is not None:
        expect("W", 1, W[1], gh, f"{G} gates x hidden_size")
    if R is not None:
        expect("R", 1, R[1], gh, f"{G} gates x hidden_size")
        expect("R", 2, R[2], H, "hidden_size")
    B = rank("B", 2)
    if B is not None:
        expect("B", 0, B[0], D, "num_directions")
        expect("B", 1, B[1], 2 * gh if gh is not None else None, f"2 x {G} gates x hidden_size")
    seq = rank("sequence_lens", 1)
    if seq is not None:
        expect("sequence_lens", 0, seq[0], N, "batch_size")
    state_dims = (N, D, H) if attrs.layout == 1 else (D, N, H)
    state_what = ("batch_size", "num_directions", "hidden_size")
    if attrs.layout == 0:
        state_what = ("num_directions", "batch_size", "hidden_size")
    for name in ("initial_h", "initial_c"):
        if name in named:
            s = rank(name, 3)
            if s is not None:
                for axis in range(3):
                    expect(name, axis, s[axis], state_dims[axis], state_what[axis])
    if "P" in named:
        p = rank("P", 2)
        if p is not None:
            expect("P", 0, p[0], D, "num_directions")
            expect("P", 1, p[1], 3 * H if isinstance(H, int) else None, "3 x hidden_size")
    m = rank("mask", 2)
    if m is not None:
        first = ("batch_size", "seq_length") if attrs.layout == 1 else ("seq_length", "batch_size")
        want = (N, T) if attrs.layout == 1 else (T, N)
        for axis in range(2):
            if not _same(m[axis], want[axis]):
                raise ValueError(
                    f"input 'mask' must have the shape of the first two axes of X "
                    f"[{first[0]}, {first[1]}] = {list(want)}, got {list(m)}"
                )
    Y = (N, T, D, H) if attrs.layout == 1 else (T, D, N, H)
    outs = (Y, state_dims)
    if spec.op_type == "MaskedLSTM":
        outs = (*outs, state_dims)
    return outs
