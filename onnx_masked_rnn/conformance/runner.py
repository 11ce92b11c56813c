"""``onnx-masked-rnn conformance``: run the conformance suite on one or more backends.

Reads a suite in ONNX's backend-test layout (``DIR/node/test_*/``, or one case folder ``DIR``; by
default the suite shipped in the package), runs every case on every chosen backend, each backend in
a worker process of its own (``worker``), compares with the case's ``rtol``/``atol`` the way onnx's
backend-test runner does, classifies each result (``outcomes``: passed, wrong, error, crashed,
unsupported), prints a table (per backend and per variant of the cases: masked node, Scan
expansion, native expansion, a column per outcome), every unsupported reason, every failure (and
which of them ``known_limitations.json`` lists), and ends with the line ``N passed, M failed, K
skipped`` (failed: wrong, error or crashed; skipped: unsupported). Exit status 1 when anything
failed. ``--list`` prints the cases and what each covers instead.

Module-level imports stay light: ``cli`` imports this module to build its parser.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
import unittest
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnx_masked_rnn.conformance.outcomes import STATUSES, Outcome, classify_error, describe_mismatch

if TYPE_CHECKING:
    import numpy as np
    from onnx.backend.test.case.test_case import TestCase

# Without --backend: onnxruntime and the package's two references, on which no case fails.
DEFAULT_BACKENDS = ("onnxruntime", "reference", "onnx-reference")

# What each variant of a case holds (the suffix of its folder's name says which: ``variant_of``).
VARIANTS = {"base": "masked node", "expanded": "Scan expansion", "native": "native expansion"}
_SUFFIXES = {"base": "", "expanded": "_expanded", "native": "_expanded_native"}

# For each built-in runtime and variant, every case of the shipped suite that does not pass, its
# outcome and the defects behind it (``limitations`` measures and checks it).
KNOWN_LIMITATIONS = Path(__file__).with_name("known_limitations.json")

__all__ = [
    "DEFAULT_BACKENDS",
    "KNOWN_LIMITATIONS",
    "VARIANTS",
    "add_arguments",
    "backends_of",
    "compare",
    "describe_case",
    "known_limitation",
    "listing",
    "load_cases",
    "load_data_sets",
    "load_known_limitations",
    "report",
    "run",
    "run_case",
    "run_plan",
    "run_suite",
    "variant_of",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="suite root holding node/test_*/, or one case folder (holding model.onnx) "
        "(default: the suite shipped in the package)",
    )
    parser.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="onnxruntime, onnxruntime-noopt (graph optimizations disabled), openvino, tract, reference, "
        "onnx-reference, all (every one of these whose package is installed), or module:Class, "
        "any object with onnx's Backend interface (prepare(model, device).run(inputs), "
        "supports_device), e.g. onnxruntime.backend.backend:OnnxRuntimeBackend, or a module that has "
        "them (onnxruntime.backend); repeatable (default: onnxruntime, reference and onnx-reference, "
        "on which nothing fails). ALLOW_RELEASED_ONNX_OPSET_ONLY=0 is set unless already set",
    )
    parser.add_argument(
        "--filter", type=_regex, metavar="REGEX", help="run only the cases whose name matches (re.search)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=600.0,
        metavar="SECONDS",
        help="a case running longer on a backend is reported as crashed, and a backend whose module "
        "takes longer to import stops the run (default: 600)",
    )
    parser.add_argument(
        "--unsupported",
        type=_regex,
        action="append",
        default=[],
        metavar="REGEX",
        help="a backend error whose message matches (re.search) is 'unsupported' (skipped), not "
        "'error': how a runtime the runner does not know says it lacks an op or type, beside raising "
        "unittest.SkipTest from prepare(); repeatable",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print the cases (after --filter) and what each covers (variant, op, direction, layout, "
        "masked_output mode, activations and other attributes set, optional inputs, outputs, dtype); "
        "run nothing",
    )


def _regex(text: str) -> re.Pattern[str]:
    """``--filter``'s type: a bad pattern is a usage error (exit status 2) naming it."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid regular expression: {exc}") from None


def _positive_seconds(text: str) -> float:
    """``--timeout``'s type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _read_meta(path: Path) -> dict[str, Any]:
    """``data.json`` of one case: its ``rtol``/``atol`` (onnx's defaults when absent)."""
    import json

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
    from onnx.backend.test.case.test_case import TestCase

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
    import onnx
    from onnx import numpy_helper

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


def variant_of(case: str) -> str:
    """``base``, ``expanded`` or ``native``: which variant of its case a suite folder holds (the
    suffix of its name; see :data:`VARIANTS`)."""
    return (
        "native"
        if case.endswith("_expanded_native")
        else "expanded"
        if case.endswith("_expanded")
        else "base"
    )


def _masked_node(model: Any) -> Any:
    """The first MaskedLSTM/GRU/RNN node of the model's main graph, or None."""
    from onnx_masked_rnn._domain import DOMAIN
    from onnx_masked_rnn.attributes import OP_SPECS

    return next((n for n in model.graph.node if n.domain == DOMAIN and n.op_type in OP_SPECS), None)


def describe_case(case_dir: Path, model: Any = None) -> dict[str, str]:
    """What a case covers: ``variant`` (:data:`VARIANTS`), then, read off its masked node (an
    expanded variant's from the masked-node variant beside it, when there is one): ``op``,
    ``direction``, ``layout``, ``mode`` (``masked_output``), ``activations`` (``default`` unless
    set), ``attributes`` (the others set: ``clip``, ``input_forget``, ``linear_before_reset``),
    ``inputs`` (the optional inputs given), ``outputs``; and ``dtype`` (of ``X``). ``model``: the
    case's model when already loaded. A case without a masked node to read has the keys its graph
    tells (variant, inputs, outputs, dtype)."""
    import onnx

    from onnx_masked_rnn.attributes import OP_SPECS, attributes_from_node

    case_dir = Path(case_dir)
    variant = variant_of(case_dir.name)
    if model is None:
        model = _load_model(case_dir / "model.onnx")
    node, base = _masked_node(model), case_dir.parent / case_dir.name.removesuffix(_SUFFIXES[variant])
    if node is None and variant != "base" and (base / "model.onnx").is_file():
        try:
            node = _masked_node(_load_model(base / "model.onnx"))
        except ValueError:
            node = None
    info = {"variant": VARIANTS[variant]}
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


def listing(cases: Sequence[TestCase]) -> str:
    """``--list``: a row per case, what it covers (:func:`describe_case`) in aligned columns."""
    rows = [{"case": c.name, **describe_case(Path(c.model_dir))} for c in cases]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    widths = {k: max(len(k), *(len(row.get(k, "-")) for row in rows)) for k in columns}
    lines = ["  ".join(f"{k:<{widths[k]}}" for k in columns).rstrip()]
    lines += ["  ".join(f"{row.get(k, '-'):<{widths[k]}}" for k in columns).rstrip() for row in rows]
    return "\n".join(lines)


def _load_model(path: Path) -> Any:
    import onnx

    try:
        return onnx.load(str(path))
    except Exception as exc:  # protobuf's DecodeError
        raise ValueError(f"{path}: not a readable ONNX model: {exc}") from None


def run_case(
    backend: Any, case: TestCase, device: str = "CPU", unsupported: Sequence[re.Pattern[str]] = ()
) -> Outcome:
    """Prepare and run one case on ``backend`` in this process (see :func:`compare`; the layout
    a *wrong* case's first difference is read with comes from :func:`describe_case`). A case file
    that cannot be read is an ``error`` naming the file."""
    try:
        model = _load_model(Path(case.model_dir) / "model.onnx")
        data_sets = load_data_sets(case)
    except ValueError as exc:
        return Outcome("error", f"cannot read the case: {exc}")
    layout = describe_case(Path(case.model_dir), model).get("layout")
    return compare(
        backend,
        model,
        data_sets,
        case.rtol,
        case.atol,
        device,
        unsupported=unsupported,
        layout=None if layout is None else int(layout),
    )


def compare(
    backend: Any,
    model: Any,
    data_sets: list[tuple[list[np.ndarray], list[np.ndarray]]],
    rtol: float,
    atol: float,
    device: str = "CPU",
    unsupported: Sequence[re.Pattern[str]] = (),
    layout: int | None = None,
) -> Outcome:
    """Run ``model`` on ``backend`` for each ``(inputs, expected)``; compare as onnx's backend-test
    runner does; classify the result (see ``outcomes``: an error matching one of ``unsupported`` is
    unsupported; a *wrong* result names the first output that differs and where, reading its axes
    by the masked op's ``layout`` when given)."""
    import numpy as np
    from onnx.backend.test.runner import Runner

    start = time.perf_counter()

    def done(outcome: Outcome) -> Outcome:
        return dataclasses.replace(outcome, seconds=time.perf_counter() - start)

    try:
        if hasattr(backend, "is_compatible") and not backend.is_compatible(model):
            return done(Outcome("unsupported", "the backend's is_compatible() returned False"))
        rep = backend.prepare(model, device)
        results = [(expected, [np.asarray(o) for o in rep.run(inputs)]) for inputs, expected in data_sets]
    except unittest.SkipTest as exc:
        return done(Outcome("unsupported", str(exc) or "skipped by the backend"))
    except Exception as exc:  # any error of the backend is the case's outcome
        return done(classify_error(exc, unsupported))
    worst = 0.0
    for expected, outputs in results:
        try:
            Runner.assert_similar_outputs(expected, outputs, rtol=rtol, atol=atol)
        except (AssertionError, TypeError):
            names = [o.name for o in model.graph.output]
            return done(Outcome("wrong", describe_mismatch(expected, outputs, rtol, atol, names, layout)))
        for out, ref in zip(outputs, expected):
            diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
            worst = max(worst, float(np.max(diff, initial=0.0, where=~np.isnan(diff))))
    return done(Outcome("passed", error=worst))


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        sys.stderr.write("\r\033[K" + text[:120])
        sys.stderr.flush()


def load_known_limitations() -> dict[str, Any]:
    """``known_limitations.json``: ``{"versions": ..., "checked": {backend: [variant, ...]},
    "counts": {backend: {variant: {status: n}}}, "backends": {backend: {case: {"status": ...,
    "defects": [...]}}}}`` (see ``limitations``)."""
    import json

    return json.loads(KNOWN_LIMITATIONS.read_text())


def known_limitation(known: dict[str, Any], backend: str, case: TestCase, outcome: Outcome) -> list[str]:
    """The defects ``known`` (:func:`load_known_limitations`) lists for this outcome of a case of
    the shipped suite on a built-in backend; empty when it lists none (a new failure)."""
    from onnx_masked_rnn.conformance import DATA_DIR

    if Path(case.model_dir).resolve().parent != (DATA_DIR / "node").resolve():
        return []
    entry = known.get("backends", {}).get(backend, {}).get(case.name)
    return list(entry["defects"]) if entry and entry["status"] == outcome.status else []


def _row(label: str, width: int, outcomes: Sequence[Outcome]) -> str:
    counts = Counter(o.status for o in outcomes)
    errors = [o.error for o in outcomes if o.status == "passed"]
    worst = f"{max(errors):9.1e}" if errors else f"{'-':>9}"
    seconds = sum(o.seconds for o in outcomes)
    row = f"{label:<{width}}" + "".join(f"  {counts[s]:>{max(6, len(s))}}" for s in STATUSES)
    return row + f"  {worst}  {seconds:>5.1f}s"


def report(
    results: dict[str, list[tuple[str, Outcome]]], known: dict[tuple[str, str], list[str]] | None = None
) -> str:
    """The table (a row per backend, then one per variant of the cases it ran, as
    ``docs/runtimes.md``'s: a column per outcome, the largest error among passed cases, the time),
    every unsupported reason with its count, and every failed case, with the defects that
    ``known`` (``(backend, case) -> defects``) lists for it."""
    known = known or {}
    labels = [f"  {VARIANTS[v]}" for v in VARIANTS]
    width = max(len("backend"), *(len(b) for b in results), *(len(label) for label in labels))
    header = f"{'backend':<{width}}" + "".join(f"  {s:>{max(6, len(s))}}" for s in STATUSES)
    lines = [header + f"  {'max |err|':>9}  {'time':>6}"]
    for backend, outcomes in results.items():
        lines.append(_row(backend, width, [o for _, o in outcomes]))
        for variant, label in VARIANTS.items():
            chosen = [o for name, o in outcomes if variant_of(name) == variant]
            if chosen:
                lines.append(_row(f"  {label}", width, chosen))
    for backend, outcomes in results.items():
        reasons = Counter(o.detail for _, o in outcomes if o.verdict == "skipped")
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"skipped  {backend}: {count} x {reason}")
    for backend, outcomes in results.items():
        for name, outcome in outcomes:
            if outcome.verdict == "failed":
                defects = known.get((backend, name))
                listed = f" (known limitation: {', '.join(defects)})" if defects else ""
                lines.append(f"FAILED   {backend}: {name}: {outcome.status}: {outcome.detail}{listed}")
    return "\n".join(lines)


def backends_of(specs: Sequence[str]) -> tuple[list[str], list[str]]:
    """The backends ``--backend`` names (``all`` expanded) and the notes on built-in backends
    ``all`` leaves out because their package is not installed. Nothing is imported here: each
    backend is loaded and checked (importable, with the Backend interface, supporting the CPU) in
    its worker process, within the time limit, when the run starts (``worker.run_cases``)."""
    from onnx_masked_rnn.conformance.backends import BUILTIN, missing_package

    names: list[str] = []
    notes: list[str] = []
    for spec in specs:
        if spec != "all":
            names.append(spec)
            continue
        for name in BUILTIN:
            package = missing_package(name)
            if package:
                notes.append(f"--backend all: left out {name} ({package} is not installed)")
            else:
                names.append(name)
    return list(dict.fromkeys(names)), notes


def run_suite(
    specs: Sequence[str],
    cases: Sequence[TestCase],
    timeout: float = 600.0,
    progress: bool = False,
    unsupported: Sequence[re.Pattern[str]] = (),
) -> dict[str, list[tuple[str, Outcome]]]:
    """Every case on every backend: ``{backend: [(case name, outcome), ...]}`` in case order."""
    return run_plan({spec: cases for spec in specs}, timeout, progress, unsupported)


def run_plan(
    plan: dict[str, Sequence[TestCase]],
    timeout: float = 600.0,
    progress: bool = False,
    unsupported: Sequence[re.Pattern[str]] = (),
) -> dict[str, list[tuple[str, Outcome]]]:
    """Each backend's cases (``plan``: backend -> cases), each backend in a worker process of its
    own (see ``worker``: ``ValueError`` when a backend does not load), all backends at once:
    ``{backend: [(case name, outcome), ...]}``. An error matching one of ``unsupported`` is
    unsupported."""
    from onnx_masked_rnn.conformance.worker import run_cases

    results: dict[str, list[Any]] = {spec: [None] * len(cases) for spec, cases in plan.items()}
    total, done = sum(len(cases) for cases in plan.values()), 0
    for spec, index, outcome in run_cases(plan, timeout, unsupported):
        name = plan[spec][index].name
        results[spec][index] = (name, outcome)
        done += 1
        _progress(progress, f"{done}/{total} {spec}: {name}")
    _progress(progress, "")
    return results


def run(args: argparse.Namespace) -> int:
    """Run the suite per ``args`` (see :func:`add_arguments`); print the report; 1 on any failure
    (``--list``: print the cases, 0)."""
    from onnx_masked_rnn.conformance import DATA_DIR

    data_dir = Path(args.directory) if args.directory else DATA_DIR
    cases = load_cases(data_dir)
    if args.filter:
        cases = [c for c in cases if args.filter.search(c.name)]
    if not cases:
        matching = f" matches --filter {args.filter.pattern!r}" if args.filter else ""
        raise ValueError(f"no conformance case under {data_dir}{matching}")
    if args.list:
        print(listing(cases))
        print(f"{len(cases)} case{'' if len(cases) == 1 else 's'}")
        return 0
    names, notes = backends_of(args.backend or list(DEFAULT_BACKENDS))

    print(f"conformance suite: {data_dir} ({len(cases)} cases)")
    for note in notes:
        print(note)
    results = run_suite(names, cases, args.timeout, sys.stderr.isatty(), args.unsupported)
    listed = load_known_limitations()
    by_name = {c.name: c for c in cases}
    known = {
        (backend, name): defects
        for backend, outcomes in results.items()
        for name, outcome in outcomes
        if outcome.verdict == "failed"
        and (defects := known_limitation(listed, backend, by_name[name], outcome))
    }
    print(report(results, known))
    verdicts = Counter(o.verdict for outcomes in results.values() for _, o in outcomes)
    if verdicts["failed"]:
        print(
            f"{verdicts['failed']} failures, of which {len(known)} are known limitations "
            f"({KNOWN_LIMITATIONS.name}: the runtime defects behind them are in conformance/defects.py)"
        )
    print(f"{verdicts['passed']} passed, {verdicts['failed']} failed, {verdicts['skipped']} skipped")
    return 1 if verdicts["failed"] else 0
