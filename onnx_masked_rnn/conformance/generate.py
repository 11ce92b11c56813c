"""Write the conformance suite in ONNX's backend-test layout (``onnx-masked-rnn generate-tests DIR``).

Every case of the case files becomes three folders under ``DIR/node/`` (see the package docstring).
The output is a pure function of the case files and the builders: regenerating gives the same
bytes, which the test suite checks against the copy shipped in the package.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import onnx
from onnx import numpy_helper

from onnx_masked_rnn.conformance.expect import Case, recording

__all__ = ["CASE_MODULES", "VARIANTS", "collect_cases", "generate", "variants"]

CASE_MODULES = ("masked_lstm", "masked_gru", "masked_rnn")

# Suffix of each variant's name -> what it holds.
VARIANTS = {
    "": "the masked node with the model-local functions it needs",
    "_expanded": "the Scan + Where function body inlined: standard ONNX ops only",
    "_expanded_native": "the expansion onto the native LSTM/GRU/RNN kernels: standard ONNX ops only",
}


def collect_cases() -> list[Case]:
    """Run every ``export_*`` function of the case files, in file order; return their cases."""
    cases: list[Case] = []
    for module_name in CASE_MODULES:
        module = importlib.import_module(f"{__package__}.{module_name}")
        classes = [
            v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__
        ]
        for cls in classes:
            for attr in vars(cls):
                if attr.startswith("export"):
                    export = getattr(cls, attr)
                    with recording(export.__doc__ or "") as recorded:
                        export()
                    cases.extend(recorded)
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate conformance case names: {duplicates}")
    return cases


def variants(case: Case) -> list[tuple[str, onnx.ModelProto]]:
    """The case's models: ``(test name, model)`` for each of :data:`VARIANTS`."""
    from onnx_masked_rnn.inline import attach_functions, inline

    return [
        (case.name, attach_functions(case.model, scan_form="portable")),
        (case.name + "_expanded", inline(case.model, "scan", scan_form="portable")),
        (case.name + "_expanded_native", inline(case.model, "native", scan_form="portable")),
    ]


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_case(case_dir: Path, model: onnx.ModelProto, case: Case) -> None:
    """One folder of the backend-test layout: model, data set 0, and ``data.json`` holding the
    tolerances (the keys onnx's on-disk loader reads) and the case's description. Replaces
    whatever the folder held."""
    shutil.rmtree(case_dir, ignore_errors=True)
    _write(case_dir / "model.onnx", model.SerializeToString(deterministic=True))
    data_set = case_dir / "test_data_set_0"
    for kind, infos, arrays in (
        ("input", model.graph.input, case.inputs),
        ("output", model.graph.output, case.outputs),
    ):
        for i, (info, array) in enumerate(zip(infos, arrays, strict=True)):
            tensor = numpy_helper.from_array(array, info.name)
            _write(data_set / f"{kind}_{i}.pb", tensor.SerializeToString(deterministic=True))
    meta = {"rtol": case.rtol, "atol": case.atol, "description": case.description}
    _write(case_dir / "data.json", (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())


def generate(out_dir: Path) -> int:
    """Write every variant of every case under ``out_dir/node/``; return the number written.

    Case folders left there by an earlier run that this run does not produce are removed.
    """
    node_dir = Path(out_dir) / "node"
    written: set[str] = set()
    for case in collect_cases():
        for name, model in variants(case):
            write_case(node_dir / name, model, case)
            written.add(name)
    for stale in node_dir.iterdir() if node_dir.is_dir() else ():
        if stale.name not in written and (stale / "model.onnx").exists():
            shutil.rmtree(stale)
    return len(written)
