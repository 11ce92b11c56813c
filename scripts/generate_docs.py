"""Write every generated section of the documents from the code and the recorded measurements.

README.md, proposal.md, docs/*.md and spec/*.md hold hand-written text and sections between
``<!-- BEGIN GENERATED name ... -->`` and ``<!-- END GENERATED name -->`` markers (each on a line of
its own). This script writes each section (:data:`SECTIONS`) from one source, so no number and no
schema can drift from what was measured or built:

- the code: ``schema`` and ``function-body`` (each op's spec page: onnx's own ``gen_doc`` rendering
  of the registered OpSchema, and the portable Scan + Where function of one configuration) and
  ``activations`` (``spec/semantics.md``);
- the records under ``docs/results/`` (JSON, each with its date, command, machine with the load
  average before and after, and versions: ``onnx_masked_rnn.record``) and
  ``onnx_masked_rnn/conformance/known_limitations.json``. A section whose record is missing says so
  and names the command that records it.

Usage::

    python scripts/generate_docs.py            # rewrite the stale documents
    python scripts/generate_docs.py --check    # print the diff of each stale document; exit 1 if any
    python scripts/generate_docs.py record-pytest-times JUNIT.xml [--command CMD]

The records come from (``docs/results/``): ``bench.json`` from ``onnx-masked-rnn bench --json``;
``conformance.json`` from ``python -m onnx_masked_rnn.conformance.limitations --record`` (which also
rewrites ``known_limitations.json``); ``fuzz.json`` from ``onnx-masked-rnn fuzz --json``;
``keras_export.json``, ``torch_export.json``, ``ab_graphs.json``, ``keras_tf_export.json`` from the
scripts of the same names (``scripts/bench_*.py``, ``scripts/ab_graphs.py``); ``upstream.json`` and
``upstream_main.json`` from ``upstream/check.sh --record`` (``upstream/summarize.py`` writes what
it prints); ``pytest_times.json`` from the subcommand above (a JUnit XML, e.g.
``pytest --junitxml=JUNIT.xml``).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib.util
import io
import json
import re
import sys
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import onnx.printer
import onnxscript

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # document the checkout's code, installed or not (not when tests import it)
    sys.path.insert(0, str(ROOT))

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, bench, record, register_schemas, schema_doc  # noqa: E402
from onnx_masked_rnn.attributes import ACTIVATIONS, OP_SPECS, RNNAttributes, parse_attributes  # noqa: E402
from onnx_masked_rnn.conformance import limitations  # noqa: E402
from onnx_masked_rnn.conformance.outcomes import STATUSES  # noqa: E402
from onnx_masked_rnn.functions import Configuration, build_scan_function  # noqa: E402

SCRIPT = "scripts/generate_docs.py"
RESULTS = ROOT / "docs" / "results"
SPEC_DIR = ROOT / "spec"
SEMANTICS = SPEC_DIR / "semantics.md"
FUNCTION_OPSET = 22
"""The ai.onnx opset of the printed function bodies."""

# How each record is made, for the note a section shows when its record is missing.
RECORDERS = {
    "bench.json": "onnx-masked-rnn bench --ops LSTM GRU RNN --repeat 10 --no-memory --json "
    "docs/results/bench.json",
    "conformance.json": "python -m onnx_masked_rnn.conformance.limitations --record "
    "docs/results/conformance.json",
    "fuzz.json": "onnx-masked-rnn fuzz --cases 300 --seed 0 --json docs/results/fuzz.json",
    "kernel_fuzz.json": "onnx-masked-rnn fuzz --path kernel --json docs/results/kernel_fuzz.json",
    "kernel_bench.json": "onnx-masked-rnn bench --ops LSTM GRU RNN --variants kernel 'gemm floor' "
    "--repeat 30 --json docs/results/kernel_bench.json",
    "upstream.json": "bash upstream/check.sh --record docs/results/upstream.json",
    "upstream_main.json": "bash upstream/check.sh --source DIR --record docs/results/upstream_main.json",
    "pytest_times.json": f"pytest --junitxml=JUNIT.xml; python {SCRIPT} record-pytest-times JUNIT.xml "
    "--command pytest",
    "keras_export.json": "KERAS_BACKEND=torch python scripts/bench_keras_export.py --json "
    "docs/results/keras_export.json",
    "torch_export.json": "python scripts/bench_torch.py --json docs/results/torch_export.json",
    "ab_graphs.json": "python scripts/ab_graphs.py --old REV --json docs/results/ab_graphs.json",
    "keras_tf_export.json": "KERAS_BACKEND=tensorflow python scripts/bench_keras_tf_export.py",
    "body_forms.json": "python scripts/ab_body_forms.py --repeat 15",
    "tf2onnx_models.json": "python scripts/bench_tf2onnx_models.py --repeat 30",
    "tf2onnx_check.json": "bash upstream/tf2onnx/check.sh --record docs/results/tf2onnx_check.json",
}

# ---------------------------------------------------------------------------------------------
# Sections from the code (the specification)

# op -> (attributes, optional inputs supplied) of the body each spec prints.
BODY_CONFIGURATIONS: dict[str, tuple[dict, frozenset[str]]] = {
    "MaskedLSTM": (
        {"masked_output": "carry"},
        frozenset({"B", "sequence_lens", "initial_h", "initial_c", "mask"}),
    ),
    "MaskedGRU": ({"linear_before_reset": 1, "masked_output": "zero"}, frozenset({"B", "initial_h", "mask"})),
    "MaskedRNN": (
        {"direction": "reverse", "layout": 1, "masked_output": "carry"},
        frozenset({"B", "initial_h", "mask"}),
    ),
}

# The activation functions' definitions (spec/semantics.md section 9), by name: the ONNX operators'
# (ThresholdedRelu with the operator's `>`), Affine and ScaledTanh as the specification defines them.
ACTIVATION_FORMULAS = {
    "Relu": "max(0, x)",
    "Tanh": "(1 - e^{-2x}) / (1 + e^{-2x})",
    "Sigmoid": "1 / (1 + e^{-x})",
    "Affine": "alpha * x + beta",
    "LeakyRelu": "x if x >= 0 else alpha * x",
    "ThresholdedRelu": "x if x > alpha else 0",
    "ScaledTanh": "alpha * Tanh(beta * x)",
    "HardSigmoid": "min(max(alpha * x + beta, 0), 1)",
    "Elu": "x if x >= 0 else alpha * (e^x - 1)",
    "Softsign": "x / (1 + abs(x))",
    "Softplus": "log(1 + e^x)",
}


def generator_versions() -> str:
    """The versions of what renders the spec sections, recorded in their BEGIN markers."""
    return f"onnx {onnx.__version__}, onnxscript {onnxscript.__version__}"


def render_schema(path: Path) -> str:
    """The op's entry in the ``docs/Operators.md`` format, by onnx's own renderer."""
    op_type = path.stem
    register_schemas()
    # gen_doc collects onnx's example snippets when imported: quiet and slow (seconds), so lazy.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        from onnx.defs.gen_doc import display_schema

    schema = onnx.defs.get_schema(op_type, OPSET_VERSION, DOMAIN)
    name = f"{DOMAIN}.{op_type}"
    heading = f'### <a name="{name}"></a><a name="{name.lower()}">**{name}**</a>\n'
    return heading + display_schema(schema, [schema], "Changelog.md").rstrip() + "\n"


def body_attributes(op_type: str) -> RNNAttributes:
    return parse_attributes(op_type, **BODY_CONFIGURATIONS[op_type][0])


def render_function_body(path: Path) -> str:
    """The representative configuration's function body in onnx text syntax."""
    op_type = path.stem
    attributes, present = BODY_CONFIGURATIONS[op_type]
    attrs = body_attributes(op_type)
    function = build_scan_function(Configuration.of(attrs, present), FUNCTION_OPSET, "portable")
    shown = ", ".join(f"{k}={v!r}" for k, v in attributes.items()) or "all defaults"
    supplied = ", ".join(n for n in OP_SPECS[op_type].inputs if n in present)
    return (
        f"Configuration: attributes {shown}; optional inputs supplied: {supplied}; X float; "
        f"ai.onnx opset {FUNCTION_OPSET}; the portable Scan form (typed body inputs and outputs, "
        f"no outer-scope reads).\n\n```\n{onnx.printer.to_text(function).strip()}\n```\n"
    )


def activation_default_source(name: str) -> str:
    """Where a function's parameter defaults come from: the ONNX operator of the same name (its
    newest ai.onnx version in the installed onnx), or this specification for the two that are no
    longer operators."""
    if onnx.defs.has(name):
        return f"ONNX {name}-{onnx.defs.get_schema(name).since_version}"
    return "this specification"


def render_activations(path: Path) -> str:
    lines = [
        "| function | definition | alpha (default) | beta (default) | defaults from |",
        "|---|---|---|---|---|",
    ]
    for name, (takes_alpha, takes_beta, alpha, beta) in ACTIVATIONS.items():
        a = f"yes ({alpha:g})" if takes_alpha else "-"
        b = f"yes ({beta:g})" if takes_beta else "-"
        source = activation_default_source(name) if takes_alpha or takes_beta else "-"
        lines.append(f"| {name} | `{ACTIVATION_FORMULAS[name]}` | {a} | {b} | {source} |")
    return "\n".join(lines) + "\n"


def spec_files() -> list[Path]:
    return [SPEC_DIR / f"{op_type}.md" for op_type in OP_SPECS] + [SEMANTICS]


def required_sections(path: Path) -> set[str]:
    """The sections a document must hold: each spec page its schema and body, semantics.md the
    activations; other documents hold the sections their authors placed."""
    if path == SEMANTICS:
        return {"activations"}
    if path.parent == SPEC_DIR and path.stem in OP_SPECS:
        return {"schema", "function-body"}
    return set()


# ---------------------------------------------------------------------------------------------
# Records


class MissingRecord(Exception):
    """A section's record is not in docs/results/."""


def load(name: str) -> dict[str, Any]:
    path = RESULTS / name
    if not path.exists():
        raise MissingRecord(name)
    return json.loads(path.read_text())


def known_limitations() -> dict[str, Any]:
    return limitations.load()


def provenance(data: dict[str, Any], packages: tuple[str, ...] = ("onnxruntime",)) -> str:
    """One sentence: when, with what command, on which machine at what load, with which versions."""
    machine = data.get("machine", {})
    before, after = machine.get("load_average_before"), machine.get("load_average_after")
    load_text = ""
    if before is not None:
        load_text = f", 1-minute load average {before:.1f} before" + (
            f" and {after:.1f} after" if after is not None else ""
        )
    versions = data.get("versions", {})
    shown = ", ".join(f"{p} {versions[p]}" for p in packages if versions.get(p))
    date = data.get("date_utc", "?")[:10]
    cores = machine.get("cores", machine.get("nproc", "?"))
    return (
        f"Recorded {date} by `{data.get('command', data.get('script', '?'))}` on {machine.get('cpu', '?')}, "
        f"{cores} cores{load_text}" + (f"; {shown}" if shown else "") + "."
    )


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def span(values: list[float]) -> str:
    """``low x to high x`` of ``values`` (one value: itself)."""
    if not values:
        return "not measured"
    low, high = min(values), max(values)
    return f"{low:.2f}x" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}x to {high:.2f}x"


# ---------------------------------------------------------------------------------------------
# bench.json

VARIANT_LABELS = {
    "native expansion": "native expansion",
    "scan expansion": "Scan body, capture",
    "portable scan": "Scan body, portable",
    "loop (converter)": "`Loop` (what converters emit today)",
    "numpy reference": "numpy reference",
}
MASK_LABELS = {"all_true": "all true", "right_padded": "right-padded", "holes": "30% holes"}


def bench_rows(data: dict[str, Any], op: str) -> dict[tuple, dict[str, dict]]:
    """``(shape, threads, mask) -> {variant: row}`` of ``op``'s cases, in the run's order."""
    rows: dict[tuple, dict[str, dict]] = {}
    for row in data["results"]:
        if row["op"] == op:
            rows.setdefault((tuple(row["shape"]), row["threads"], row["mask"]), {})[row["variant"]] = row
    return rows


def bench_variants(data: dict[str, Any]) -> list[str]:
    """The variants the run timed besides the floor, in ``bench.VARIANTS`` order, then new ones."""
    seen = list(dict.fromkeys(r["variant"] for r in data["results"]))
    known = [v for v in bench.VARIANTS if v in seen]
    return [v for v in known + [v for v in seen if v not in known] if v != bench.FLOOR]


def cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row.get("error"):
        return "error"
    return ratio(row.get("ratio"))


def variant_span(data: dict[str, Any], op: str, variant: str) -> str:
    return span(
        [
            r["ratio"]
            for r in data["results"]
            if r["op"] == op and r["variant"] == variant and r.get("ratio") is not None
        ]
    )


def bench_provenance(data: dict[str, Any]) -> str:
    config = data["config"]
    return (
        provenance(data)
        + f" Median of {config['repeat']} interleaved runs after {config['warmup']} warm-up runs, "
        "float32, `masked_output=\"carry\"`, each variant's time as a ratio to onnxruntime's native "
        "op on the same work (no mask, or `sequence_lens` = each row's count of unmasked steps)."
    )


def render_speed(path: Path) -> str:
    """The bench table of LSTM: every shape, thread count and mask, each variant's ratio."""
    data = load("bench.json")
    variants = bench_variants(data)
    header = ["(T, N, I, H), threads", "mask", *(VARIANT_LABELS.get(v, v) for v in variants)]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for (shape, threads, mask), rows in bench_rows(data, "LSTM").items():
        cells = [f"({', '.join(map(str, shape))}), {threads}", MASK_LABELS.get(mask, mask)]
        lines.append("| " + " | ".join(cells + [cell(rows.get(v)) for v in variants]) + " |")
    lines += ["", bench_provenance(data)]
    ops = [op for op in dict.fromkeys(r["op"] for r in data["results"]) if op != "LSTM"]
    if ops:
        lines += ["", "The other ops in the same run, each variant's range over the same configurations:", ""]
        lines += ops_table(data, ops)
    return "\n".join(lines) + "\n"


def ops_table(data: dict[str, Any], ops: list[str]) -> list[str]:
    variants = bench_variants(data)
    lines = [
        "| op | " + " | ".join(VARIANT_LABELS.get(v, v) for v in variants) + " |",
        "|---" * (len(variants) + 1) + "|",
    ]
    for op in ops:
        lines.append(f"| {op} | " + " | ".join(variant_span(data, op, v) for v in variants) + " |")
    return lines


def render_speed_summary(path: Path) -> str:
    """The proposal's table: the normative Scan body (portable form), the native expansion and the
    converters' Loop, LSTM, every configuration of the run; then each op's ranges."""
    data = load("bench.json")
    variants = {
        "portable scan": "`Scan` body (normative, portable form)",
        "native expansion": "native expansion (non-normative)",
        "loop (converter)": "`Loop` (converters today)",
    }
    lines = [
        "| (T, N, I, H), threads | mask | " + " | ".join(variants.values()) + " |",
        "|---|---|" + "---|" * len(variants),
    ]
    for (shape, threads, mask), rows in bench_rows(data, "LSTM").items():
        cells = [f"({', '.join(map(str, shape))}), {threads}", MASK_LABELS.get(mask, mask)]
        lines.append("| " + " | ".join(cells + [cell(rows.get(v)) for v in variants]) + " |")
    lines += ["", bench_provenance(data), ""]
    ops = list(dict.fromkeys(r["op"] for r in data["results"]))
    lines += [
        "| op | " + " | ".join(variants.values()) + " |",
        "|---|" + "---|" * len(variants),
    ]
    for op in ops:
        lines.append(f"| {op} | " + " | ".join(variant_span(data, op, v) for v in variants) + " |")
    return "\n".join(lines) + "\n"


def render_kernel_speed(path: Path) -> str:
    """The kernel against issue 21's targets (``bench.kernel_verdicts`` of kernel_bench.json): per
    target and thread count each op's worst ratio to the native op, with the noise and the verdict;
    the ratio to the Gemm floor; the peak memory."""
    data = load("kernel_bench.json")
    verdicts = bench.kernel_verdicts(data["results"], data.get("memory", []))
    ops = list(dict.fromkeys(v["op"] for v in verdicts))
    lines = ["| target | threads | " + " | ".join(ops) + " |", "|---|---|" + "---|" * len(ops)]

    def time_cell(v: dict | None) -> str:
        if v is None:
            return "-"
        low, high = v["quartiles"]
        return f"{v['worst']:.2f}x [{low:.2f}, {high:.2f}] {v['verdict']}"

    times = [v for v in verdicts if v["kind"] == "time"]
    for what, limit in dict.fromkeys((v["what"], v["limit"]) for v in times):
        for threads in sorted({v["threads"] for v in times if v["what"] == what}):
            by_op = {v["op"]: v for v in times if v["what"] == what and v["threads"] == threads}
            cells = [time_cell(by_op.get(op)) for op in ops]
            lines.append(f"| {what}: <= {limit:.2f}x the native op | {threads} | " + " | ".join(cells) + " |")
    floors = [v for v in verdicts if v["kind"] == "gemm floor"]
    for threads in sorted({v["threads"] for v in floors}):
        by_op = {v["op"]: v for v in floors if v["threads"] == threads}
        cells = [span([by_op[op]["low"], by_op[op]["worst"]]) if op in by_op else "-" for op in ops]
        goal = floors[0]["limit"]
        lines.append(
            f"| ratio to the Gemm floor (goal <= {goal:.2f}x) | {threads} | " + " | ".join(cells) + " |"
        )
    memory = [v for v in verdicts if v["kind"] == "memory"]
    if memory:
        cells = []
        for op in ops:
            mine = [v for v in memory if v["op"] == op]
            missed = ["x".join(map(str, v["shape"])) for v in mine if v["verdict"] != "met"]
            verdict = "MISSED at " + ", ".join(missed) if missed else "met"
            cells.append(f"{span([v['worst'] for v in mine])} {verdict}" if mine else "-")
        lines.append(
            f"| peak memory: <= {memory[0]['limit']:.2f}x the native op's | 1 | " + " | ".join(cells) + " |"
        )
    shapes = ", ".join(f"({', '.join(map(str, s))})" for s in data["config"]["shapes"])
    masks = ", ".join(MASK_LABELS.get(m, m) for m in data["config"]["masks"])
    note = (
        "Each time cell: the kernel's worst ratio to onnxruntime's native op over the configurations "
        f"the target covers ((T, N, I, H) = {shapes}; masks {masks}), "
        "in brackets the quartiles of the ratios of that configuration's runs paired one after the "
        "other (the run-to-run noise), then the verdict: met, within the noise (the lower quartile "
        "meets it) or MISSED. The Gemm floor: the unmasked steps' matrix products at onnxruntime's "
        "Gemm rate (one MatMul), the range over the configurations. Peak memory: one run's working "
        "memory in a fresh process (`docs/speed.md`). "
    )
    return "\n".join(lines) + "\n\n" + note + bench_provenance(data) + "\n"


# ---------------------------------------------------------------------------------------------
# Conformance: known_limitations.json (the checked runtimes) and conformance.json (the run)

VARIANT_NAMES = {
    "base": "masked node (local functions)",
    "expanded": "Scan expansion",
    "native": "native expansion",
}
RUNTIME_NAMES = {
    "onnxruntime": "onnxruntime",
    "onnxruntime-noopt": "onnxruntime, optimizations disabled",
    "onnxruntime-kernel": "onnxruntime with the package's kernel",
    "openvino": "OpenVINO",
    "tract": "tract",
    "reference": "numpy reference",
    "onnx-reference": "`onnx.reference`",
}


def conformance_counts() -> dict[str, dict[str, dict[str, int]]]:
    """``{backend: {variant: {status: count}}}``: the checked runtimes' from known_limitations.json,
    then the other backends' from conformance.json when recorded."""
    counts = dict(known_limitations()["counts"])
    with contextlib.suppress(MissingRecord):
        for backend, variants in load("conformance.json")["counts"].items():
            counts.setdefault(backend, variants)
    return counts


def conformance_provenance() -> str:
    known = known_limitations()
    try:
        data = load("conformance.json")
    except MissingRecord:
        shown = ", ".join(f"{p} {v}" for p, v in known["versions"].items())
        return f"From `known_limitations.json` ({shown})."
    return (
        provenance(data, ("onnxruntime", "openvino", "tract", "onnx"))
        + " The checked runtimes' outcomes, case by case, are in "
        "`onnx_masked_rnn/conformance/known_limitations.json`."
    )


def render_runtimes(path: Path) -> str:
    """Every outcome's count per backend and variant."""
    lines = [
        f"| runtime | variant | {' | '.join(STATUSES)} |",
        "|---|---|" + "---|" * len(STATUSES),
    ]
    for backend, variants in conformance_counts().items():
        for variant, tally in variants.items():
            lines.append(f"| {backend} | {variant} | " + " | ".join(str(tally[s]) for s in STATUSES) + " |")
    return "\n".join(lines) + "\n\n" + conformance_provenance() + "\n"


def defects_behind(backend: str, variant: str) -> str:
    """The defects behind a checked backend's non-passing cases of ``variant``, with counts."""
    cases = known_limitations()["backends"].get(backend, {})
    tally: dict[str, int] = {}
    for case, entry in cases.items():
        if limitations.variant_of(case) == variant:
            for defect in entry["defects"]:
                tally[defect] = tally.get(defect, 0) + 1
    return ", ".join(f"`{d}`: {n}" for d, n in tally.items())


def render_runtimes_summary(path: Path) -> str:
    """passed / failed / unsupported per runtime and variant, with the defects behind each."""
    counts = conformance_counts()
    variants = list(VARIANT_NAMES)
    lines = [
        "| runtime | " + " | ".join(VARIANT_NAMES[v] for v in variants) + " |",
        "|---|" + "---|" * len(variants),
    ]
    for backend, tallies in counts.items():
        cells = []
        for variant in variants:
            tally = tallies.get(variant)
            if tally is None:  # the kernel runs the masked node only: the expansions hold none
                cells.append("no masked node to run" if backend == KERNEL_BACKEND else "not run")
                continue
            failed = tally["wrong"] + tally["error"] + tally["crashed"]
            text = f"{tally['passed']} / {failed} / {tally['unsupported']}"
            behind = defects_behind(backend, variant)
            cells.append(text + (f" ({behind})" if behind else ""))
        lines.append(f"| {RUNTIME_NAMES.get(backend, backend)} | " + " | ".join(cells) + " |")
    total = sum(next(iter(counts.values()))["base"].values())
    return (
        "\n".join(lines)
        + f"\n\nPassed / failed (wrong, error or crashed) / unsupported, of the {total} cases of each "
        "variant; in parentheses the runtime defects behind the cases that do not pass (each with a "
        "plain-ONNX repro, `docs/runtimes.md`). " + conformance_provenance() + "\n"
    )


def render_conformance_times(path: Path) -> str:
    """The recorded run's summed case seconds per backend and variant, and its wall time."""
    data = load("conformance.json")
    variants = list(VARIANT_NAMES)
    lines = [
        "| runtime | " + " | ".join(VARIANT_NAMES[v] for v in variants) + " | total |",
        "|---|" + "---|" * (len(variants) + 1),
    ]
    for backend, seconds in data["seconds"].items():
        cells = [f"{seconds[v]:.1f} s" if v in seconds else "-" for v in variants]
        lines.append(
            f"| {RUNTIME_NAMES.get(backend, backend)} | "
            + " | ".join(cells)
            + f" | {sum(seconds.values()):.1f} s |"
        )
    return "\n".join(lines) + f"\n\nWall time {data['wall_seconds']:.0f} s. " + provenance(data) + "\n"


def render_known_limitations(path: Path) -> str:
    return limitations.markdown(known_limitations()) + "\n"


# ---------------------------------------------------------------------------------------------
# The deployment forms


KERNEL_BACKEND = "onnxruntime-kernel"
"""The conformance backend of the package's onnxruntime kernel."""


def render_deployment_forms(path: Path) -> str:
    """Each form: how to get it, what runs it (conformance), how fast in onnxruntime (bench)."""
    counts = conformance_counts()
    try:
        data = load("bench.json")
    except MissingRecord:
        data = {"results": []}

    def runs(variant: str | None, backends: list[str]) -> str:
        if variant is None:
            return "not in the conformance suite"
        passing = []
        for backend in backends:
            tally = counts.get(backend, {}).get(variant)
            if tally and tally["passed"]:
                total = sum(tally.values())
                passing.append(f"{RUNTIME_NAMES.get(backend, backend)} {tally['passed']}/{total}")
        return ", ".join(passing) or "none"

    # The runtimes a user deploys to (not the references), the kernel's backend apart.
    runtimes = [b for b in counts if b not in limitations.RECORDED and b != KERNEL_BACKEND]
    forms = [
        (
            "masked node with its local functions",
            '`attach_functions(model)`, `export(..., strategy="function")`',
            runtimes,
            "base",
            None,
        ),
        (
            "the kernel (onnxruntime custom op)",
            "`onnx_masked_rnn.kernel`",
            [KERNEL_BACKEND],
            "base",
            "kernel",
        ),
        (
            "Scan expansion, portable (the spec's body)",
            '`inline(model, "scan")`, `strategy="scan"`',
            runtimes,
            "expanded",
            "portable scan",
        ),
        (
            "Scan expansion, capture",
            '`inline(model, "scan", scan_form="capture")`',
            runtimes,
            None,
            "scan expansion",
        ),
        (
            "native expansion",
            '`inline(model, "native")`, `strategy="native"`',
            runtimes,
            "native",
            "native expansion",
        ),
    ]
    lines = [
        "| form | how | passes (conformance cases, per runtime) | onnxruntime time / native LSTM |",
        "|---|---|---|---|",
    ]
    try:  # the kernel's own run (bench --variants kernel ...), else bench.json's kernel rows
        kernel_data = load("kernel_bench.json")
    except MissingRecord:
        kernel_data = None
    for name, how, backends, variant, timed in forms:
        passes = runs(variant, backends) if any(b in counts for b in backends) else "not recorded"
        timing = kernel_data if timed == "kernel" and kernel_data else data
        speed = variant_span(timing, "LSTM", timed) if timed else "not timed by the bench"
        lines.append(f"| {name} | {how} | {passes} | {speed} |")
    note = (
        "Time: the range over the bench's LSTM configurations (`speed` table: shapes, masks, 1 and 2 "
        "threads). "
    )
    if data["results"]:
        note += bench_provenance(data)
    else:
        note += f"No bench record: `{RECORDERS['bench.json']}`."
    if kernel_data:
        note += " The kernel's row: " + bench_provenance(kernel_data)
    return "\n".join(lines) + "\n\n" + note + "\n"


# ---------------------------------------------------------------------------------------------
# fuzz.json, upstream.json, pytest_times.json, the exporter benchmarks


def render_fuzz(path: Path) -> str:
    return fuzz_table(load("fuzz.json"))


def render_kernel_fuzz(path: Path) -> str:
    return fuzz_table(load("kernel_fuzz.json"))


def fuzz_table(data: dict[str, Any]) -> str:
    """A fuzz record (``onnx-masked-rnn fuzz --json``) as a table per path, then its failures."""
    statuses = data["statuses"]
    lines = [
        "| path | "
        + " | ".join(
            "agree (of which only as right as the reference)" if s == "agree" else s for s in statuses
        )
        + " |",
        "|---|" + "---|" * len(statuses),
    ]
    for p, tally in data["counts"].items():
        cells = [
            f"{tally[s]} ({data['equally_right'].get(p, 0)})" if s == "agree" else str(tally[s])
            for s in statuses
        ]
        lines.append(f"| `{p}` | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n"
    reasons = [(p, r, n) for p, by in data.get("unsupported", {}).items() for r, n in by.items()]
    if reasons:
        text += "Unsupported: " + "; ".join(f"`{p}`: {n} x {r}" for p, r, n in reasons) + ".\n\n"
    text += f"{data['cases']} cases of seed {data['seed']}. " + provenance(data) + "\n"
    if data["failures"]:
        text += "\nFailures (replay one: `onnx-masked-rnn fuzz --seed SEED --case INDEX`):\n\n"
        text += "".join(
            f"- case {f['case']}, `{f['path']}`: {f['status']}: {f['detail'][:160]}\n"
            for f in data["failures"]
        )
    return text


def upstream_table(name: str, versions: tuple[str, ...] = ("onnx", "onnxruntime")) -> str:
    """An ``upstream/check.sh --record`` record (``upstream/summarize.py``'s format): what the run
    printed, one row a suite and the total, then the tree, the series' revision and the time."""
    data = load(name)
    lines = ["| suite | passed | failed | skipped |", "|---|---|---|---|"]
    for suite in data["suites"]:
        lines.append(f"| {suite['name']} | {suite['passed']} | {suite['failed']} | {suite['skipped']} |")
    total = data["total"]
    lines.append(f"| **total** | {total['passed']} | {total['failed']} | |")
    seconds = f" in {data['seconds']:.0f} s" if data.get("seconds") else ""
    return (
        "\n".join(lines)
        + f"\n\n{data['onnx_tree']} with the series at revision `{data['series_revision']}`{seconds}. "
        + provenance(data, versions)
        + "\n"
    )


def render_upstream(path: Path) -> str:
    return upstream_table("upstream.json")


def render_upstream_main(path: Path) -> str:
    return upstream_table("upstream_main.json")


def render_tf2onnx_check(path: Path) -> str:
    """``upstream/tf2onnx/check.sh --record``: its tree names the venv's versions."""
    return upstream_table("tf2onnx_check.json", versions=())


def pytest_total(data: dict[str, Any]) -> str:
    totals = data["totals"]
    return (
        f"{totals['tests']} tests ({totals['skipped']} skipped, {totals['failed']} failed) in "
        f"{totals['wall_seconds']:.0f} s wall"
    )


def render_pytest_times_summary(path: Path) -> str:
    """README's line: the whole run's time, the slowest files, where the table is."""
    data = load("pytest_times.json")
    slowest = sorted(data["files"], key=lambda e: -e["seconds"])[:3]
    return (
        pytest_total(data)
        + "; the slowest files: "
        + ", ".join(f"`{e['file']}` {e['seconds']:.0f} s" for e in slowest)
        + " (every file: `docs/repository.md`). "
        + provenance(data, ())
        + "\n"
    )


def render_pytest_times(path: Path) -> str:
    data = load("pytest_times.json")
    lines = ["| test file | tests | seconds |", "|---|---|---|"]
    for entry in sorted(data["files"], key=lambda e: -e["seconds"]):
        lines.append(f"| `{entry['file']}` | {entry['tests']} | {entry['seconds']:.1f} |")
    return (
        "\n".join(lines)
        + "\n\n"
        + pytest_total(data)
        + "; a file's seconds are the sum of its tests' times. "
        + provenance(data, ())
        + "\n"
    )


def render_keras_tf_export(path: Path) -> str:
    """The table ``scripts/bench_keras_tf_export.py --table`` prints, from its record."""
    script = load_script("bench_keras_tf_export")
    data = load("keras_tf_export.json")
    return (
        script.table(data)
        + "\n\n"
        + provenance(data, ("tensorflow", "tf2onnx", "keras", "torch", "onnxruntime"))
        + "\n"
    )


def render_tf2onnx_models(path: Path) -> str:
    """The table ``scripts/bench_tf2onnx_models.py --table`` prints, and the record's provenance."""
    script = load_script("bench_tf2onnx_models")
    data = load("tf2onnx_models.json")
    converters = "; ".join(
        f"{label}: " + ", ".join(f"{p} {v}" for p, v in packages.items())
        for label, packages in data["versions"]["converters"].items()
    )
    return (
        script.table(data)
        + "\n"
        + provenance(data, ("onnxruntime", "onnx"))
        + f" {data['threads']} onnxruntime thread, {data['repeat']} interleaved repeats (median); "
        f"converted by {converters}.\n"
    )


def render_keras_export(path: Path) -> str:
    data = load("keras_export.json")
    lines = [
        "| export | export time | ratio | nodes | ratio | latency (ms) | ratio "
        "| max \\|diff\\| vs `predict` |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in data["rows"]:
        lines.append(
            f"| {row['export']} | {row['export_seconds']:.1f} s | {row['export_ratio']:.3f}x "
            f"| {row['nodes']} "
            f"| {row['nodes_ratio']:.3f}x | {row['latency_ms_median']:.2f} | {row['latency_ratio']:.2f}x "
            f"| {row['max_abs_diff_vs_predict']:.1e} |"
        )
    return (
        "\n".join(lines)
        + f"\n\nMedian of {data['repeat']} interleaved runs. "
        + provenance(data, ("keras", "torch", "onnxruntime"))
        + "\n"
    )


def render_torch_export(path: Path) -> str:
    data = load("torch_export.json")
    lines = ["| model in onnxruntime | median (ms) | ratio | max \\|diff\\| vs eager |", "|---|---|---|---|"]
    for row in data["rows"]:
        lines.append(
            f"| {row['model']} | {row['median_ms']:.2f} | {row['ratio']:.2f}x | {row['max_abs_diff']:.1e} |"
        )
    training = data.get("training", [])
    if training:
        lines += ["", "| eager training step (forward + backward) | median (ms) | ratio |", "|---|---|---|"]
        lines += [f"| {r['model']} | {r['median_ms']:.2f} | {r['ratio']:.2f}x |" for r in training]
    shape = ", ".join(map(str, data["shape"]))
    return (
        "\n".join(lines)
        + f"\n\n(T, N, I, H) = ({shape}), right-padded, float32, {data['threads']} thread(s), median of "
        f"{data['rounds']} interleaved runs. " + provenance(data, ("torch", "onnxruntime")) + "\n"
    )


def render_ab_graphs(path: Path) -> str:
    data = load("ab_graphs.json")
    lines = ["| model | old (ms) | new (ms) | new/old | optimized graphs |", "|---|---|---|---|---|"]
    for row in data["rows"]:
        lines.append(
            f"| {row['model']} | {row['old_ms']:.2f} | {row['new_ms']:.2f} | {row['ratio']:.3f}x "
            f"| {row['optimized']} |"
        )
    return (
        "\n".join(lines)
        + f"\n\nOld: `{data['old']}`, new: `{data['new']}`; new/old geometric mean {data['geomean']:.3f}x, "
        f"median of {data['repeat']} interleaved runs, one thread. " + provenance(data) + "\n"
    )


def render_body_forms(path: Path) -> str:
    """``scripts/ab_body_forms.py``'s record: which runtime runs each Scan body form (weights as graph
    inputs, then as initializers), and each form's time on onnxruntime as a ratio to the Loop."""
    data = load("body_forms.json")
    forms = data["forms"]
    runtimes = list(next(iter(data["acceptance"].values())))
    lines = [
        "| form | " + " | ".join(f"{r}: weights as inputs / initializers" for r in runtimes) + " |",
        "|---|" + "---|" * len(runtimes),
    ]
    for form in forms:
        cells = [
            f"{data['acceptance'][form][r]} / {data['acceptance_initializers'][form][r]}".replace("|", "\\|")
            for r in runtimes
        ]
        lines.append(f"| `{form}` | " + " | ".join(cells) + " |")
    lines += ["", "| (T, N, I, H), threads | mask | " + " | ".join(f"`{f}`" for f in forms) + " |"]
    lines.append("|---|---|" + "---|" * len(forms))
    for row in data["timings"]:
        shape = ", ".join(str(v) for v in row["shape"])
        cells = " | ".join(ratio(row["ratio_to_loop"][f]) for f in forms)
        lines.append(f"| ({shape}), {row['threads']} | {row['mask'].replace('_', ' ')} | {cells} |")
    worst = {f: max(r["ratio_to_loop"][f] for r in data["timings"]) for f in forms}
    return (
        "\n".join(lines)
        + "\n\nonnxruntime's time of each form (weights as initializers) over the `Loop`'s, median of "
        "interleaved runs; the worst: "
        + ", ".join(f"`{f}` {ratio(w)}" for f, w in worst.items())
        + ". "
        + provenance(data, ("onnxruntime", "openvino", "tract"))
        + "\n"
    )


def load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# name -> (renderer, the record it reads, or None: from the code)
SECTIONS: dict[str, tuple[Callable[[Path], str], str | None]] = {
    "schema": (render_schema, None),
    "function-body": (render_function_body, None),
    "activations": (render_activations, None),
    "speed": (render_speed, "bench.json"),
    "speed-summary": (render_speed_summary, "bench.json"),
    "kernel-speed": (render_kernel_speed, "kernel_bench.json"),
    "deployment-forms": (render_deployment_forms, "conformance.json"),
    "runtimes": (render_runtimes, "conformance.json"),
    "runtimes-summary": (render_runtimes_summary, "conformance.json"),
    "known-limitations": (render_known_limitations, "conformance.json"),
    "conformance-times": (render_conformance_times, "conformance.json"),
    "fuzz": (render_fuzz, "fuzz.json"),
    "kernel-fuzz": (render_kernel_fuzz, "kernel_fuzz.json"),
    "upstream": (render_upstream, "upstream.json"),
    "upstream-main": (render_upstream_main, "upstream_main.json"),
    "tf2onnx-check": (render_tf2onnx_check, "tf2onnx_check.json"),
    "pytest-times": (render_pytest_times, "pytest_times.json"),
    "pytest-times-summary": (render_pytest_times_summary, "pytest_times.json"),
    "keras-export": (render_keras_export, "keras_export.json"),
    "keras-tf-export": (render_keras_tf_export, "keras_tf_export.json"),
    "torch-export": (render_torch_export, "torch_export.json"),
    "ab-graphs": (render_ab_graphs, "ab_graphs.json"),
    "body-forms": (render_body_forms, "body_forms.json"),
    "tf2onnx-models": (render_tf2onnx_models, "tf2onnx_models.json"),
}

SECTION = re.compile(
    r"<!-- BEGIN GENERATED (?P<name>[\w-]+)(?: [^>]*)? -->\n.*?<!-- END GENERATED (?P=name) -->", re.S
)


NORMATIVE = re.compile(r"normative-(?P<section>[\w-]+)")
"""``normative-<section>``: a normative text block of ``onnx_masked_rnn.schema_doc``, whose
``markdown(section)`` renders it (the one source of the operators' doc text)."""


def render_normative(section: str) -> str:
    return schema_doc.markdown(section).rstrip("\n") + "\n"


def known_section(name: str) -> bool:
    return name in SECTIONS or NORMATIVE.fullmatch(name) is not None


def render(name: str, path: Path) -> tuple[str, str]:
    """The section's text and the BEGIN marker's note on its source."""
    if m := NORMATIVE.fullmatch(name):
        return render_normative(m.group("section")), "from onnx_masked_rnn/schema_doc.py"
    renderer, source = SECTIONS[name]
    if source is None:
        return renderer(path), f"with {generator_versions()}"
    try:
        return renderer(path), f"from docs/results/{source}"
    except MissingRecord as missing:
        return f"Not recorded yet: `{RECORDERS[str(missing)]}` records it.\n", f"from docs/results/{source}"


def section_names(text: str) -> list[str]:
    """The names of the generated sections in ``text``, in order."""
    return [m.group("name") for m in SECTION.finditer(text)]


def updated(text: str, path: Path) -> str:
    """``text`` with each generated section written anew; a spec page must have its sections."""
    found = set(section_names(text))
    missing = sorted(required_sections(path) - found)
    if missing:
        raise ValueError(f"{path}: no <!-- BEGIN/END GENERATED --> markers for {missing}")

    def replace(match: re.Match) -> str:
        name = match.group("name")
        if not known_section(name):
            raise ValueError(f"{path}: unknown generated section {name!r}; known: {', '.join(SECTIONS)}")
        body, source = render(name, path)
        return (
            f"<!-- BEGIN GENERATED {name} by {SCRIPT} {source}; do not edit -->\n"
            f"{body}<!-- END GENERATED {name} -->"
        )

    return SECTION.sub(replace, text)


def recorded_versions(text: str) -> set[str]:
    """The generator versions the file's BEGIN markers of code sections record."""
    return set(re.findall(r"<!-- BEGIN GENERATED [\w-]+ by \S+ with (.*?); do not edit -->", text))


def documents() -> list[Path]:
    """Every document that may hold generated sections."""
    found = [ROOT / "README.md", ROOT / "proposal.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [p for p in found if p.exists()] + spec_files()


def stale(paths: list[Path] | None = None) -> dict[Path, tuple[str, str]]:
    """``{path: (text, generated text)}`` of each document (default: :func:`documents`) that
    differs from what this writes."""
    result = {}
    for path in documents() if paths is None else paths:
        text = path.read_text()
        new = updated(text, path)
        if new != text:
            result[path] = (text, new)
    return result


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def diff(path: Path, text: str, new: str) -> str:
    name = shown(path)
    return "\n".join(
        difflib.unified_diff(text.splitlines(), new.splitlines(), name, f"{name} (generated)", lineterm="")
    )


# ---------------------------------------------------------------------------------------------
# Recorders of the measurements made outside Python: a pytest run


def file_of(classname: str, file: str | None) -> str:
    """The test file of a JUnit test case: its ``file`` attribute, else its dotted class name up to
    the ``test_*`` module."""
    if file:
        return file
    parts = classname.split(".")
    for i, part in enumerate(parts):
        if part.startswith("test_"):
            return "/".join(parts[: i + 1]) + ".py"
    return "/".join(parts) + ".py"


def record_pytest_times(junit: Path, command: str) -> dict[str, Any]:
    """A record of a pytest run's JUnit XML: per test file its tests and summed seconds."""
    data = record.start("pytest-times", ("pytest", "pytest-xdist", "hypothesis"), command=command)
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    files: dict[str, dict[str, Any]] = {}
    for case in root.iter("testcase"):
        name = file_of(case.get("classname", ""), case.get("file"))
        entry = files.setdefault(name, {"file": name, "tests": 0, "seconds": 0.0})
        entry["tests"] += 1
        entry["seconds"] += float(case.get("time", 0) or 0)
    totals = {
        "tests": sum(int(s.get("tests", 0)) for s in suites),
        "skipped": sum(int(s.get("skipped", 0)) for s in suites),
        "failed": sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites),
        "wall_seconds": max((float(s.get("time", 0) or 0) for s in suites), default=0.0),
    }
    data["date_utc"] = suites[0].get("timestamp", data["date_utc"]) if suites else data["date_utc"]
    return record.finish(data, totals=totals, files=sorted(files.values(), key=lambda e: e["file"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="print the diff of each stale document; write nothing"
    )
    sub = parser.add_subparsers(dest="record")
    for name, what in (("record-pytest-times", "JUNIT: a pytest run's --junitxml file"),):
        p = sub.add_parser(name, help=f"record {what} in docs/results/")
        p.add_argument("input", type=Path, help=what)
        p.add_argument("--command", required=True, help="the command that produced the input, as run")
    args = parser.parse_args(argv)
    if args.record:
        if not args.input.is_file():
            parser.error(f"{args.input}: no such file")
        recorder, target = {"record-pytest-times": (record_pytest_times, "pytest_times.json")}[args.record]
        record.write(recorder(args.input, args.command), RESULTS / target)
        print(f"wrote docs/results/{target}; now run python {SCRIPT}")
        return 0
    found = stale()
    for path, (text, new) in found.items():
        if args.check:
            print(diff(path, text, new))
        else:
            path.write_text(new)
            print(f"updated {shown(path)}")
    if args.check and found:
        print(f"{len(found)} stale document(s); run python {SCRIPT}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
