"""Write the conformance suite in ONNX's backend-test layout (``onnx-masked-rnn generate-tests DIR``).

Every case of the case files becomes three folders under ``DIR/node/`` (see the package docstring).
The output is a pure function of the case files and the builders: regenerating gives the same
bytes, which the test suite checks against the copy shipped in the package.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import shutil
from pathlib import Path

import onnx
from onnx import numpy_helper

from onnx_masked_rnn._files import replace_dir, write_atomic
from onnx_masked_rnn.conformance.expect import Case, recording
from onnx_masked_rnn.conformance.suite import VARIANTS
from onnx_masked_rnn.inline import attach_functions, inline

__all__ = ["CASE_MODULES", "MANIFEST", "collect_cases", "generate", "variants", "write_case"]

CASE_MODULES = ("masked_lstm", "masked_gru", "masked_rnn")


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
    """The case's models: ``(test name, model)`` for each of ``suite.VARIANTS``."""
    models = {
        "base": attach_functions(case.model, scan_form="portable"),
        "expanded": inline(case.model, "scan", scan_form="portable"),
        "native": inline(case.model, "native", scan_form="portable"),
    }
    return [(case.name + variant.suffix, models[name]) for name, variant in VARIANTS.items()]


MANIFEST = "generated-cases.txt"
"""The file ``DIR/generated-cases.txt`` lists the folders of ``DIR/node/`` that ``generate`` wrote:
the only folders a later run may replace or remove. (Beside ``node/``, not in it, so that a runner
reading ``node/`` sees case folders only.)"""


def write_case(case_dir: Path, model: onnx.ModelProto, case: Case) -> None:
    """One folder of the backend-test layout: model, data set 0, and ``data.json`` holding the
    tolerances (the keys onnx's on-disk loader reads) and the case's description. Built beside
    ``case_dir`` and then put in its place, so a failure leaves the old folder whole."""

    def fill(folder: Path) -> None:
        (folder / "model.onnx").write_bytes(model.SerializeToString(deterministic=True))
        data_set = folder / "test_data_set_0"
        data_set.mkdir()
        for kind, infos, arrays in (
            ("input", model.graph.input, case.inputs),
            ("output", model.graph.output, case.outputs),
        ):
            for i, (info, array) in enumerate(zip(infos, arrays, strict=True)):
                tensor = numpy_helper.from_array(array, info.name)
                (data_set / f"{kind}_{i}.pb").write_bytes(tensor.SerializeToString(deterministic=True))
        meta = {"rtol": case.rtol, "atol": case.atol, "description": case.description}
        (folder / "data.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")

    replace_dir(case_dir, fill)


def _read_manifest(out_dir: Path) -> set[str]:
    path = out_dir / MANIFEST
    return set(path.read_text().split()) if path.is_file() else set()


def _write_manifest(out_dir: Path, names: set[str]) -> None:
    write_atomic(out_dir / MANIFEST, "".join(f"{n}\n" for n in sorted(names)).encode())


def generate(out_dir: Path) -> int:
    """Write every variant of every case under ``out_dir/node/``; return the number written.

    Only folders listed in ``generated-cases.txt`` (written by an earlier run) are replaced
    or, when this run no longer produces them, removed; anything else in ``node/`` is left alone,
    and a folder in the way of a case is an error. Raises ``OSError`` naming the path when
    ``out_dir`` is a file or cannot be written.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(20, "is a file, not a directory", str(out_dir))
    node_dir = out_dir / "node"
    if node_dir.exists() and not node_dir.is_dir():
        raise NotADirectoryError(20, "is a file, not a directory", str(node_dir))
    models = [(name, model, case) for case in collect_cases() for name, model in variants(case)]
    ours = _read_manifest(out_dir)
    written = {name for name, _, _ in models}
    foreign = sorted(n for n in written - ours if (node_dir / n).exists())
    if foreign:
        raise FileExistsError(
            17,
            f"not written by generate-tests ({MANIFEST} does not list it); move it away or choose another "
            f"directory ({len(foreign)} such folder(s))",
            str(node_dir / foreign[0]),
        )
    created = [d for d in (out_dir, node_dir) if not d.exists()]
    node_dir.mkdir(parents=True, exist_ok=True)
    try:
        # List every folder about to be written before writing it, so an interrupted run can be redone.
        _write_manifest(out_dir, ours | written)
        for name, model, case in models:
            write_case(node_dir / name, model, case)
        for stale in sorted(ours - written):
            shutil.rmtree(node_dir / stale, ignore_errors=True)
        _write_manifest(out_dir, written)
    except BaseException:
        for folder in reversed(created):  # folders this run made, if it wrote nothing in them
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return len(written)
