"""Inputs and one-node models for tests, conformance cases and benchmarks.

Mask patterns, random well-scaled inputs for any attribute combination, and a model holding one
masked node, so every consumer builds them the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper
from onnx.reference.ops.op_scan import Scan as _OnnxReferenceScan

from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn.attributes import RNNAttributes, infer_shapes

MASK_KINDS = (
    "all_true",
    "right_padded",
    "left_padded",
    "holes",
    "one_row_masked",
    "all_masked",
    "starts_masked",
)


def make_mask(kind: str, T: int, N: int, rng: np.random.Generator, layout: int = 0) -> np.ndarray:
    """A ``[T, N]`` (``layout=0``) or ``[N, T]`` (``layout=1``) boolean mask of the named kind.

    ``right_padded``/``left_padded``: each row keeps a random-length prefix/suffix (at least one
    step, and one row of full length); ``holes``: about 30% of steps masked anywhere, every row
    keeping at least one step; ``one_row_masked``: holes, but row 0 fully masked; ``starts_masked``:
    holes, but the first step of each direction (``t = 0`` and ``t = T - 1``) masked in every row,
    so that ``Y`` there shows what a mode writes before any processed step (every row keeps a step
    when ``T >= 3``).
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"mask kind must be one of {MASK_KINDS}, got {kind!r}")
    t = np.arange(T)[:, None]
    if kind == "all_true":
        m = np.ones((T, N), bool)
    elif kind == "all_masked":
        m = np.zeros((T, N), bool)
    elif kind in ("right_padded", "left_padded"):
        lengths = rng.integers(1, T + 1, size=N)
        lengths[-1] = T
        m = t < lengths if kind == "right_padded" else t >= T - lengths
    else:
        m = rng.random((T, N)) >= 0.3
        m[rng.integers(0, T, size=N), np.arange(N)] = True
        if kind == "one_row_masked":
            m[:, 0] = False
        if kind == "starts_masked":
            if T >= 3:
                m[rng.integers(1, T - 1, size=N), np.arange(N)] = True
            m[0] = m[-1] = False
    return m.T.copy() if layout == 1 else m


def random_inputs(
    attrs: RNNAttributes,
    T: int,
    N: int,
    I: int,
    H: int,
    *,
    rng: np.random.Generator,
    dtype: np.dtype | type = np.float32,
    present: Sequence[str] = ("B", "initial_h", "initial_c", "P", "mask"),
    mask_kind: str = "holes",
    sequence_lens: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs for a node with these attributes, keyed by ONNX input name.

    ``present`` names the optional inputs to include (those the op lacks are ignored);
    ``sequence_lens`` is included when given. Weights are scaled so activations stay in range.
    """
    spec = attrs.spec
    D, G = attrs.num_directions, spec.num_gates
    scale = 1 / np.sqrt(H)

    def normal(*shape: int, s: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(dtype)

    batch_first = attrs.layout == 1
    out: dict[str, np.ndarray] = {
        "X": normal(*((N, T, I) if batch_first else (T, N, I))),
        "W": normal(D, G * H, I, s=scale),
        "R": normal(D, G * H, H, s=scale),
    }
    state_shape = (N, D, H) if batch_first else (D, N, H)
    optional = {
        "B": lambda: normal(D, 2 * G * H, s=0.5),
        "initial_h": lambda: normal(*state_shape, s=0.5),
        "initial_c": lambda: normal(*state_shape, s=0.5),
        "P": lambda: normal(D, 3 * H, s=0.5),
        "mask": lambda: make_mask(mask_kind, T, N, rng, attrs.layout),
    }
    for name in present:
        if name in spec.inputs and name in optional:
            out[name] = optional[name]()
    if sequence_lens is not None:
        out["sequence_lens"] = np.asarray(sequence_lens, dtype=np.int32)
    return out


def value_info(name: str, array: np.ndarray) -> onnx.ValueInfoProto:
    """A graph input/output declaration with ``array``'s element type and static shape."""
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), array.shape)


def make_node(attrs: RNNAttributes, input_names: Sequence[str], name: str = "") -> onnx.NodeProto:
    """The masked node with every attribute explicit; ``input_names`` are the present inputs'
    ONNX names (absent optional inputs in between become ``""``)."""
    spec = attrs.spec
    last = max(spec.inputs.index(n) for n in input_names)
    inputs = [n if n in input_names else "" for n in spec.inputs[: last + 1]]
    return helper.make_node(
        attrs.op_type,
        inputs,
        list(spec.outputs),
        name=name or attrs.op_type,
        domain=DOMAIN,
        **attrs.to_onnx(),
    )


def make_model(
    attrs: RNNAttributes, inputs: dict[str, np.ndarray], opset: int = 21, functions: Sequence = ()
) -> onnx.ModelProto:
    """A model whose graph is the one masked node; graph inputs are ``inputs`` (name -> array)
    and outputs ``Y``, ``Y_h`` (and ``Y_c``), with static shapes. No function bodies attached."""
    spec = attrs.spec
    node = make_node(attrs, list(inputs))
    shapes = infer_shapes(attrs, [inputs[n].shape if n in inputs else None for n in spec.inputs])
    dtype = helper.np_dtype_to_tensor_dtype(inputs["X"].dtype)
    graph = helper.make_graph(
        [node],
        f"{attrs.op_type}_graph",
        [value_info(n, v) for n, v in inputs.items()],
        [helper.make_tensor_value_info(o, dtype, s) for o, s in zip(spec.outputs, shapes)],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        functions=list(functions),
        ir_version=10,
    )


class Scan(_OnnxReferenceScan):
    """onnx.reference's Scan plus ``scan_input_directions``/``scan_output_directions``, which it
    refuses ("Scan is not implemented for other output input_direction than 0"): a reversed scan
    input is read back to front, a reversed scan output written back to front. Pass it as
    ``ReferenceEvaluator(model, new_ops=[Scan])`` to run the bodies' reverse direction."""

    op_domain = ""
    _DIRECTIONS = ("scan_input_directions", "scan_output_directions")

    def __init__(self, onnx_node: onnx.NodeProto, run_params: dict) -> None:
        node = onnx.NodeProto()
        node.CopyFrom(onnx_node)
        self.directions = {a.name: list(a.ints) for a in node.attribute if a.name in self._DIRECTIONS}
        kept = [a for a in node.attribute if a.name not in self._DIRECTIONS]
        del node.attribute[:]
        node.attribute.extend(kept)
        super().__init__(node, run_params)

    def _run(self, *args, **kwargs):
        states = len(args) - self.num_scan_inputs

        def flip(values, directions):
            return [v[::-1] if i >= states and directions[i - states] else v for i, v in enumerate(values)]

        inputs = self.directions.get("scan_input_directions", [0] * self.num_scan_inputs)
        outputs = super()._run(*flip(args, inputs), **kwargs)
        return tuple(flip(outputs, self.directions.get("scan_output_directions", [0] * len(outputs))))
