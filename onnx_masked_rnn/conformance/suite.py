"""Reading a conformance suite in ONNX's backend-test layout: its cases, their models and data
sets, which variant each folder holds and what each case covers.

A suite root holds ``node/test_*/`` folders (``generate`` writes them); a case folder holds
``model.onnx``, ``test_data_set_*/{input,output}_<i>.pb`` and ``data.json`` with its
``rtol``/``atol``. Anything in the way of comparing a case is a ``ValueError`` naming the file.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.test_case import TestCase

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn.attributes import OP_SPECS, attributes_from_node

__all__ = [
    "VARIANTS",
    "Variant",
    "describe_case",
    "load_cases",
    "load_data_sets",
    "load_model",
    "variant_of",
]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One of the three forms each case is written in."""

    suffix: str  # of its folder's name
    label: str  # short, for the report
    description: str


# name -> variant, in the order ``generate`` writes them.
VARIANTS = {
    "base": Variant("", "masked node", "the masked node with the model-local functions it needs"),
    "expanded": Variant(
        "_expanded", "Scan expansion", "the Scan + Where function body inlined: standard ONNX ops only"
    ),
    "native": Variant(
        "_expanded_native",
        "native expansion",
        "the expansion onto the native LSTM/GRU/RNN kernels: standard ONNX ops only",
    ),
}


def variant_of(case: str) -> str:
    """``base``, ``expanded`` or ``native``: which variant of its case a suite folder holds (the
    suffix of its name; see :data:`VARIANTS`)."""
    by_length = sorted(VARIANTS.items(), key=lambda item: -len(item[1].suffix))
    return next(name for name, variant in by_length if case.endswith(variant.suffix))


def _read_meta(path: Path) -> dict[str, Any]:
    """``data.json`` of one case: its ``rtol``/``atol`` (onnx's defaults when absent)."""
    if not path.exists():
        return {}
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(meta).__name__}")
    for key in ("rtol", "atol"):
        if key in meta and (isinstance(meta[key], bool) or not isinstance(meta[key], int | float)):
            raise ValueError(f"{path}: {key!r} must be a number, got {meta[key]!r}")
    return meta


def _check_data_sets(case_dir: Path) -> None:
    """A case needs at least one ``test_data_set_*`` folder, each with ``output_0.pb`` and numbered
    files without gaps; anything else would compare nothing and pass."""
    folders = sorted(case_dir.glob("test_data_set_*"))
    if not folders:
        raise ValueError(f"{case_dir}: no test_data_set_*/ folder, so nothing to compare")
    for folder in folders:
        for kind in ("input", "output"):
            count = len(list(folder.glob(f"{kind}_*.pb")))
            missing = [f"{kind}_{i}.pb" for i in range(count) if not (folder / f"{kind}_{i}.pb").is_file()]
            if missing:
                raise ValueError(f"{folder}: {count} {kind}_*.pb files but {missing[0]} is missing")
        if not (folder / "output_0.pb").is_file():
            raise ValueError(f"{folder}: no output_0.pb, so nothing to compare")


def load_cases(data_dir: Path) -> list[TestCase]:
    """The suite's cases as onnx ``TestCase`` objects, as onnx's on-disk loader builds them:
    ``model_dir`` set, ``rtol``/``atol`` from ``data.json`` (onnx's defaults when absent).
    ``data_dir`` is a suite root (its ``node/*/`` folders are the cases) or one case folder (it
    holds ``model.onnx``).

    ``onnx.backend.test.loader.load_model_tests(data_dir, kind="node")`` would be the call, but
    since onnx 1.16 it returns onnx's own in-memory node tests for ``kind="node"`` whatever
    ``data_dir`` says; this reads the folder instead, field for field as that loader does. A case
    folder without ``model.onnx`` or test data, or with a ``data.json`` that is not valid, is a
    ``ValueError`` naming the file.
    """
    node_dir = Path(data_dir) / "node"
    if (Path(data_dir) / "model.onnx").is_file():
        case_dirs = [Path(data_dir)]
    elif node_dir.is_dir():
        case_dirs = sorted(p for p in node_dir.iterdir() if p.is_dir())
    else:
        raise ValueError(
            f"{data_dir} holds no node/ folder of conformance cases, nor a model.onnx (one case folder)"
        )
    cases = []
    for case_dir in case_dirs:
        if not (case_dir / "model.onnx").is_file():
            raise ValueError(f"{case_dir}: no model.onnx")
        meta = _read_meta(case_dir / "data.json")
        _check_data_sets(case_dir)
        cases.append(
            TestCase(
                name=case_dir.name,
                model_name=case_dir.name,
                url=None,
                model_dir=str(case_dir),
                model=None,
                data_sets=None,
                kind="node",
                rtol=meta.get("rtol", 1e-3),
                atol=meta.get("atol", 1e-7),
            )
        )
    return cases


def load_data_sets(case: TestCase) -> list[tuple[list[np.ndarray], list[np.ndarray]]]:
    """``(inputs, expected outputs)`` of each ``test_data_set_*`` folder of the case."""

    def read(path: Path) -> np.ndarray:
        tensor = onnx.TensorProto()
        try:
            tensor.ParseFromString(path.read_bytes())
            return numpy_helper.to_array(tensor)
        except Exception as exc:  # protobuf's DecodeError, or a tensor numpy cannot hold
            raise ValueError(f"{path}: not a readable TensorProto: {exc}") from None

    data_sets = []
    for folder in sorted(Path(case.model_dir).glob("test_data_set_*")):
        count = {kind: len(list(folder.glob(f"{kind}_*.pb"))) for kind in ("input", "output")}
        data_sets.append(
            tuple(
                [read(folder / f"{kind}_{i}.pb") for i in range(count[kind])] for kind in ("input", "output")
            )
        )
    return data_sets  # type: ignore[return-value]


def load_model(path: Path) -> onnx.ModelProto:
    """The model in ``path``; ``ValueError`` naming the file when it is not a readable model."""
    try:
        return onnx.load(str(path))
    except Exception as exc:  # protobuf's DecodeError
        raise ValueError(f"{path}: not a readable ONNX model: {exc}") from None


def _masked_node(model: onnx.ModelProto) -> onnx.NodeProto | None:
    """The first MaskedLSTM/GRU/RNN node of the model's main graph, or None."""
    return next((n for n in model.graph.node if n.domain == DOMAIN and n.op_type in OP_SPECS), None)


def describe_case(case_dir: Path, model: onnx.ModelProto | None = None) -> dict[str, str]:
    """What a case covers: ``variant`` (its :data:`VARIANTS` label), then, read off its masked node
    (an expanded variant's from the masked-node variant beside it, when there is one): ``op``,
    ``direction``, ``layout``, ``mode`` (``masked_output``), ``activations`` (``default`` unless
    set), ``attributes`` (the others set: ``clip``, ``input_forget``, ``linear_before_reset``),
    ``inputs`` (the optional inputs given), ``outputs``; and ``dtype`` (of ``X``). ``model``: the
    case's model when already loaded. A case without a masked node to read has the keys its graph
    tells (variant, inputs, outputs, dtype)."""
    case_dir = Path(case_dir)
    variant = variant_of(case_dir.name)
    if model is None:
        model = load_model(case_dir / "model.onnx")
    node = _masked_node(model)
    base = case_dir.parent / case_dir.name.removesuffix(VARIANTS[variant].suffix)
    if node is None and variant != "base" and (base / "model.onnx").is_file():
        try:
            node = _masked_node(load_model(base / "model.onnx"))
        except ValueError:
            node = None
    info = {"variant": VARIANTS[variant].label}
    x = model.graph.input[0] if model.graph.input else None
    elem_type = x.type.tensor_type.elem_type if x else 0
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type).name if elem_type else "-"
    try:
        attributes = attributes_from_node(node) if node is not None else {}
    except ValueError:  # an attribute referring to an outer one: not a node to read
        node = None
    if node is None:
        info["inputs"] = ",".join(i.name for i in model.graph.input[3:]) or "-"
        info["outputs"] = ",".join(o.name for o in model.graph.output)
        info["dtype"] = dtype
        return info
    spec = OP_SPECS[node.op_type]
    others = [
        f"{name}={attributes[name]:g}"
        for name in ("clip", "input_forget", "linear_before_reset")
        if attributes.get(name)
    ]
    info |= {
        "op": node.op_type,
        "direction": str(attributes.get("direction", "forward")),
        "layout": str(attributes.get("layout", 0)),
        "mode": str(attributes.get("masked_output", "zero")),
        "activations": ",".join(attributes.get("activations", [])) or "default",
        "attributes": " ".join(others) or "-",
        "inputs": ",".join(n for n, v in zip(spec.inputs[3:], node.input[3:]) if v) or "-",
        "outputs": ",".join(n for n, v in zip(spec.outputs, node.output) if v),
        "dtype": dtype,
    }
    return info
