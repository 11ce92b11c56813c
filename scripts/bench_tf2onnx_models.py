"""Named public models through tf2onnx 1.17, unpatched against patched (upstream/tf2onnx's series:
ai.onnx.preview masked nodes), side by side in one run: node counts (top level and with subgraphs),
exactness against Keras ``predict`` (max abs diff) and onnxruntime latency (one thread, interleaved
repeats, median) with its ratio to the unpatched conversion's Loop (issue 23 item 6).

Models (tf_keras, random seeded weights, no downloads), inputs right-padded with zeros:
``imdb``: keras-io "Bidirectional LSTM on IMDB" (Embedding(20000, 128, mask_zero=True) ->
Bidirectional(LSTM(64), return_sequences) -> Bidirectional(LSTM(64)) -> Dense(1, sigmoid)), batch
32, length 100; ``ort12492``: onnxruntime issue 12492's model (Embedding(5, 5, mask_zero=True) ->
LSTM(3, return_sequences, return_state)), batch 3, length 4; ``gru_tagger``: Embedding(5000, 64,
mask_zero=True) -> Bidirectional(GRU(64, return_sequences)) -> TimeDistributed(Dense(10, softmax)),
batch 32, length 50.

Forms timed: the unpatched conversion (Loop); the patched conversion as masked nodes with local
functions (``attach_functions(from_preview(m))``); the native expansion (``inline(m, "native")``);
the kernel (``onnx_masked_rnn.kernel.session``).

Conversion runs in a child process per environment (``--convert DIR``: writes model.onnx and the
Keras reference, ref.npz); timing runs in this process (the package's python)::

    python scripts/bench_tf2onnx_models.py --unpatched /tmp/he/venv-unpatched/bin/python \\
        [--patched ~/.cache/onnx-masked-rnn-tf2onnx/venv/bin/python] [--repeat 30]

Writes docs/results/tf2onnx_models.json (date, machine, versions, command, rows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "tf2onnx_models.json"
PATCHED = Path.home() / ".cache" / "onnx-masked-rnn-tf2onnx" / "venv" / "bin" / "python"
MODELS = {"imdb": (32, 100, 20000), "ort12492": (3, 4, 5), "gru_tagger": (32, 50, 5000)}
TITLES = {
    "imdb": "keras-io Bidirectional LSTM on IMDB",
    "ort12492": "onnxruntime issue 12492 (masked LSTM)",
    "gru_tagger": "GRU tagger (Bidirectional GRU)",
}
FORMS = ("unpatched tf2onnx (Loop)", "masked node with local functions", "native expansion", "kernel")
TARGET = 0.7  # the deployment form's latency over the unpatched Loop on imdb (issue 23 item 6)


def inputs(name: str) -> np.ndarray:
    batch, length, vocabulary = MODELS[name]
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, vocabulary, size=(batch, length)).astype(np.float32)
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length
    tokens[np.arange(length)[None, :] >= lengths[:, None]] = 0.0
    return tokens


def build(name: str):  # in the TensorFlow child
    import tf_keras as keras

    keras.utils.set_random_seed(0)
    layers = keras.layers
    batch, length, vocabulary = MODELS[name]
    x = keras.Input(shape=(length,), dtype="float32")
    if name == "imdb":
        h = layers.Embedding(vocabulary, 128, mask_zero=True)(x)
        h = layers.Bidirectional(layers.LSTM(64, return_sequences=True))(h)
        h = layers.Bidirectional(layers.LSTM(64))(h)
        y = layers.Dense(1, activation="sigmoid")(h)
    elif name == "ort12492":
        init = keras.initializers.RandomNormal(mean=0.0, stddev=1.0, seed=0)
        h = layers.Embedding(vocabulary, 5, mask_zero=True, embeddings_initializer=init)(x)
        y = layers.LSTM(
            3, kernel_initializer=init, recurrent_initializer=init, return_sequences=True, return_state=True
        )(h)
    else:
        h = layers.Embedding(vocabulary, 64, mask_zero=True)(x)
        h = layers.Bidirectional(layers.GRU(64, return_sequences=True))(h)
        y = layers.TimeDistributed(layers.Dense(10, activation="softmax"))(h)
    return keras.Model(x, y)


def convert(directory: Path) -> None:
    import tensorflow as tf
    import tf2onnx

    for name in MODELS:
        model = build(name)
        x = inputs(name)
        ref = model.predict(x, verbose=0)
        ref = ref if isinstance(ref, list) else [ref]
        spec = (tf.TensorSpec((None, MODELS[name][1]), tf.float32, name="x"),)
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=18)
        (directory / name).mkdir(parents=True, exist_ok=True)
        (directory / name / "model.onnx").write_bytes(proto.SerializeToString())
        np.savez(directory / name / "ref.npz", x=x, **{f"arr_{i}": r for i, r in enumerate(ref)})
    versions = {p: metadata.version(p) for p in ("tf2onnx", "tensorflow-cpu", "tf_keras", "onnx")}
    (directory / "versions.json").write_text(json.dumps(versions))


def count(graph) -> tuple[int, int]:
    total = 0
    for node in graph.node:
        total += 1
        for attribute in node.attribute:
            for sub in [attribute.g, *attribute.graphs] if attribute.HasField("g") else attribute.graphs:
                total += count(sub)[1]
    return len(graph.node), total


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import onnx
    import onnxruntime as ort

    import onnx_masked_rnn
    from onnx_masked_rnn import kernel
    from onnx_masked_rnn.preview import from_preview

    work = Path(tempfile.mkdtemp(prefix="tf2onnx-models-"))
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    versions = {}
    for label, python in (("unpatched", args.unpatched), ("patched", args.patched)):
        subprocess.run([python, __file__, "--convert", str(work / label)], check=True, env=env)
        versions[label] = json.loads((work / label / "versions.json").read_text())
    rows = []
    for name in MODELS:
        loop = onnx.load(work / "unpatched" / name / "model.onnx")
        patched = onnx.load(work / "patched" / name / "model.onnx")
        preview_types = sorted({n.op_type for n in patched.graph.node if n.domain == "ai.onnx.preview"})
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
                sessions[form] = kernel.session(model, sess_options=_one_thread(ort))
            else:
                sessions[form] = ort.InferenceSession(
                    model.SerializeToString(), _one_thread(ort), providers=["CPUExecutionProvider"]
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
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "versions": {
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            "onnx-masked-rnn": metadata.version("onnx-masked-rnn"),
            "converters": versions,
        },
        "command": "python scripts/bench_tf2onnx_models.py " + " ".join(sys.argv[1:]),
        "repeat": args.repeat,
        "threads": 1,
        "target": {"ratio": TARGET, "best_deployment_ratio_imdb": best, "met": best <= TARGET},
        "rows": rows,
    }


def _one_thread(ort):
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return options


def table(record: dict[str, Any]) -> str:
    lines = [
        "| model | form | nodes (top / total) | max abs diff vs Keras | median ms | vs unpatched Loop |",
        "|---|---|---|---|---|---|",
    ]
    for r in record["rows"]:
        shape = "x".join(map(str, r["shape"]))
        lines.append(
            f"| {r['title']} ({shape}) | {r['form']} | {r['nodes']} / {r['nodes_total']} | "
            f"{r['max_abs_diff']:.1e} | {r['median_ms']:.2f} | {r['ratio']:.2f}x |"
        )
    t = record["target"]
    verdict = "met" if t["met"] else "missed"
    lines.append("")
    lines.append(
        f"Target (deployment form <= {t['ratio']}x the unpatched Loop on IMDB): {verdict} "
        f"({t['best_deployment_ratio_imdb']:.2f}x)."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convert", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--unpatched", default="/tmp/he/venv-unpatched/bin/python")
    parser.add_argument("--patched", default=str(PATCHED))
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--table", action="store_true", help="print the table from the JSON record")
    args = parser.parse_args()
    if args.convert:
        convert(args.convert)
        return
    if args.table:
        print(table(json.loads(RESULTS.read_text())), end="")
        return
    record = measure(args)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(table(record), end="")


if __name__ == "__main__":
    main()
