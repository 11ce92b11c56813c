"""Named public models through tf2onnx 1.17, unpatched against patched (upstream/tf2onnx's series:
ai.onnx.preview masked nodes), side by side in one run: node counts (top level and with subgraphs),
exactness against Keras ``predict`` (max abs diff) and onnxruntime latency (one thread, interleaved
repeats, median) with its ratio to the unpatched conversion's Loop (issue 23 item 6).

Models (``scripts/tf2onnx_models_convert.py`` builds and converts them): keras-io "Bidirectional LSTM
on IMDB" (batch 32, length 100), onnxruntime issue 12492's masked LSTM (3, 4) and a Bidirectional GRU
tagger (32, 50), inputs right-padded with zeros.

Forms timed: the unpatched conversion (Loop); the patched conversion as masked nodes with local
functions (``attach_functions(from_preview(m))``); the native expansion (``inline(m, "native")``);
the kernel (``onnx_masked_rnn.kernel.session``).

Conversion runs in a child process with the python of upstream/tf2onnx/check.sh's venv (the patched
tf2onnx installed; the unpatched one is its cached sdist, put first on ``PYTHONPATH``), or with
``--unpatched PY`` in another venv; timing runs in this process (the package's python)::

    bash upstream/tf2onnx/check.sh   # once: the venv
    python scripts/bench_tf2onnx_models.py [--repeat 30]

Writes docs/results/tf2onnx_models.json (date, machine, versions, command, rows).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

import onnx_masked_rnn
from onnx_masked_rnn import kernel, record
from onnx_masked_rnn.preview import from_preview

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "tf2onnx_models.json"
CONVERT = ROOT / "scripts" / "tf2onnx_models_convert.py"
CACHE = Path.home() / ".cache" / "onnx-masked-rnn-tf2onnx"
PATCHED = CACHE / "venv" / "bin" / "python"
SDIST = CACHE / "sdist" / "tf2onnx-1.17.0.tar.gz"
TITLES = {
    "imdb": "keras-io Bidirectional LSTM on IMDB",
    "ort12492": "onnxruntime issue 12492 (masked LSTM)",
    "gru_tagger": "GRU tagger (Bidirectional GRU)",
}
FORMS = ("unpatched tf2onnx (Loop)", "masked node with local functions", "native expansion", "kernel")
TARGET = 0.7  # the deployment form's latency over the unpatched Loop on imdb (issue 23 item 6)


def count(graph) -> tuple[int, int]:
    total = 0
    for node in graph.node:
        total += 1
        for attribute in node.attribute:
            for sub in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                total += count(sub)[1]
    return len(graph.node), total


def convert(work: Path, unpatched: str | None, patched: str) -> dict[str, dict[str, str]]:
    """Both conversions into ``work/unpatched`` and ``work/patched``; the converting versions."""
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    runs = {"patched": (patched, env)}
    if unpatched:
        runs["unpatched"] = (unpatched, env)
    else:
        if not SDIST.is_file():
            sys.exit(f"--unpatched not given and {SDIST} missing: run bash upstream/tf2onnx/check.sh first")
        with tarfile.open(SDIST) as archive:
            archive.extractall(work / "sdist", filter="data")
        (source,) = (work / "sdist").iterdir()
        runs["unpatched"] = (patched, dict(env, PYTHONPATH=str(source)))
    versions = {}
    for label in ("unpatched", "patched"):
        python, run_env = runs[label]
        if not Path(python).is_file():
            sys.exit(f"{python}: no such interpreter (bash upstream/tf2onnx/check.sh makes {PATCHED})")
        subprocess.run([python, str(CONVERT), str(work / label)], check=True, env=run_env)
        versions[label] = json.loads((work / label / "versions.json").read_text())
    return versions


def measure(args: argparse.Namespace) -> dict[str, Any]:
    header = record.start("tf2onnx-models")
    work = Path(tempfile.mkdtemp(prefix="tf2onnx-models-"))
    versions = convert(work, args.unpatched, args.patched)
    rows = []
    for name in TITLES:
        loop = onnx.load(work / "unpatched" / name / "model.onnx")
        patched = onnx.load(work / "patched" / name / "model.onnx")
        preview_types = sorted({n.op_type for n in patched.graph.node if n.domain == "ai.onnx.preview"})
        if any(n.domain == "ai.onnx.preview" for n in loop.graph.node):
            sys.exit(f"{name}: the unpatched conversion has ai.onnx.preview nodes (patched tf2onnx ran)")
        reference = np.load(work / "unpatched" / name / "ref.npz")
        x = reference["x"]
        refs = [reference[f"arr_{i}"] for i in range(len(reference.files) - 1)]
        models = {
            FORMS[0]: loop,
            FORMS[1]: onnx_masked_rnn.attach_functions(from_preview(patched)),
            FORMS[2]: onnx_masked_rnn.inline(patched, "native"),
            FORMS[3]: patched,
        }
        sessions = {}
        for form, model in models.items():
            if form == FORMS[3]:
                sessions[form] = kernel.session(model, sess_options=_one_thread())
            else:
                sessions[form] = ort.InferenceSession(
                    model.SerializeToString(), _one_thread(), providers=["CPUExecutionProvider"]
                )
        feeds = {form: {s.get_inputs()[0].name: x} for form, s in sessions.items()}
        times: dict[str, list[float]] = {form: [] for form in sessions}
        diffs = {}
        for form, s in sessions.items():
            outs = s.run(None, feeds[form])
            diffs[form] = max(float(np.max(np.abs(o - r))) for o, r in zip(outs, refs, strict=True))
            for _ in range(3):
                s.run(None, feeds[form])
        for _ in range(args.repeat):
            for form, s in sessions.items():
                start = time.perf_counter()
                s.run(None, feeds[form])
                times[form].append(time.perf_counter() - start)
        base = statistics.median(times[FORMS[0]])
        for form, model in models.items():
            top, total = count(model.graph)
            total += sum(count(f)[1] for f in model.functions)
            median = statistics.median(times[form])
            rows.append(
                {
                    "model": name,
                    "title": TITLES[name],
                    "shape": list(x.shape),
                    "form": form,
                    "preview_ops": preview_types,
                    "nodes": top,
                    "nodes_total": total,
                    "max_abs_diff": diffs[form],
                    "median_ms": median * 1e3,
                    "ratio": median / base,
                }
            )
    imdb = {r["form"]: r["ratio"] for r in rows if r["model"] == "imdb"}
    best = min(imdb[FORMS[2]], imdb[FORMS[3]])
    header["versions"]["converters"] = versions
    return record.finish(
        header,
        repeat=args.repeat,
        threads=1,
        target={"ratio": TARGET, "best_deployment_ratio_imdb": best, "met": best <= TARGET},
        rows=rows,
    )


def _one_thread() -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return options


def table(result: dict[str, Any]) -> str:
    lines = [
        "| model | form | nodes (top / total) | max abs diff vs Keras | median ms | vs unpatched Loop |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        shape = "x".join(map(str, r["shape"]))
        lines.append(
            f"| {r['title']} ({shape}) | {r['form']} | {r['nodes']} / {r['nodes_total']} | "
            f"{r['max_abs_diff']:.1e} | {r['median_ms']:.3g} | {r['ratio']:.2f}x |"
        )
    t = result["target"]
    verdict = "met" if t["met"] else "missed"
    lines.append("")
    lines.append(
        f"Target (deployment form <= {t['ratio']}x the unpatched Loop on IMDB): {verdict} "
        f"({t['best_deployment_ratio_imdb']:.2f}x)."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unpatched", help="python of a venv with unpatched tf2onnx (default: the sdist)")
    parser.add_argument("--patched", default=str(PATCHED))
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--table", action="store_true", help="print the table from the JSON record")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(RESULTS.read_text())), end="")
        return
    result = measure(args)
    record.write(result, RESULTS)
    print(table(result), end="")


if __name__ == "__main__":
    main()
