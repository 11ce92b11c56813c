"""The route a TensorFlow user gets: Keras' own ``model.export(path, format="onnx")`` on the TensorFlow
backend (tf2onnx) against ``onnx_masked_rnn.keras.export`` called from the same TensorFlow-backend
process (which exports in a torch-backend child process): export time, node count, exactness against
Keras' ``predict``, dynamic batch and time, and onnxruntime latency (one thread, interleaved runs,
median), for the Keras example "Bidirectional LSTM on IMDB" (Embedding(20000, 128, mask_zero=True) ->
Bidirectional(LSTM(64), return_sequences) -> Bidirectional(LSTM(64)) -> Dense(1, sigmoid)) at batch
32, length 100, right-padded.

Writes ``docs/results/keras_tf_export.json`` (date, machine, versions, each row) and prints the
table that docs/keras.md shows (``--table`` prints it from the JSON without measuring;
``tests/docs/test_keras_tf_export_results.py`` checks docs/keras.md against the JSON).

Run (needs TensorFlow, tf2onnx and torch in one environment; the package's test extra has no
TensorFlow): ``KERAS_BACKEND=tensorflow python scripts/bench_keras_tf_export.py [--repeat 30]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from onnx_masked_rnn.keras import export

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "keras_tf_export.json"
BATCH, LENGTH, VOCABULARY = 32, 100, 20000
BASELINE = "Keras model.export (TF backend, tf2onnx)"
# onnx_masked_rnn.keras.export strategies measured: the deployment form and the masked nodes with
# their bodies attached (attach_functions).
STRATEGIES = {"native": "native form", "function": "masked nodes + attach_functions"}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> dict[str, str]:
    names = ("tensorflow-cpu", "tensorflow", "keras", "tf2onnx", "torch", "onnx", "onnxruntime", "onnxscript")
    versions = {}
    for name in (*names, "onnx-masked-rnn", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def _count_nodes(graph: Any) -> int:
    """Nodes of a graph and of every subgraph (a tf2onnx Loop's body)."""
    total = 0
    for node in graph.node:
        total += 1
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                total += _count_nodes(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                total += sum(_count_nodes(g) for g in attribute.graphs)
    return total


def _imdb(keras: Any) -> Any:
    ids = keras.Input((None,), dtype="int32", name="ids")
    x = keras.layers.Embedding(VOCABULARY, 128, mask_zero=True)(ids)
    x = keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True))(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(64))(x)
    return keras.Model(ids, keras.layers.Dense(1, activation="sigmoid")(x))


def _right_padded(rng: Any, batch: int, length: int) -> Any:
    lengths = rng.integers(length // 4, length + 1, batch)
    lengths[0] = length
    ids = rng.integers(1, VOCABULARY, (batch, length))
    return np.where(np.arange(length) < lengths[:, None], ids, 0).astype(np.int32)


def _session(path: Path) -> Any:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def measure(repeat: int) -> dict:
    """Export both ways, check, time; the JSON record."""
    import keras

    if keras.backend.backend() != "tensorflow":
        raise SystemExit("run with KERAS_BACKEND=tensorflow: this compares the TensorFlow-backend routes")
    keras.utils.set_random_seed(0)
    model = _imdb(keras)
    rng = np.random.default_rng(0)
    ids = _right_padded(rng, BATCH, LENGTH)
    other = _right_padded(rng, 5, 37)  # another batch and length: is the model dynamic?
    expected = model.predict(ids, verbose=0)
    expected_other = model.predict(other, verbose=0)
    folder = Path(tempfile.mkdtemp(prefix="bench_keras_tf_export_"))
    load_before = os.getloadavg()[0]

    paths, export_seconds = {}, {}
    start = time.perf_counter()
    model.export(str(folder / "tf2onnx.onnx"), format="onnx", verbose=False)
    export_seconds[BASELINE] = time.perf_counter() - start
    paths[BASELINE] = folder / "tf2onnx.onnx"
    for strategy, what in STRATEGIES.items():
        name = f"onnx_masked_rnn.keras.export, {what}"
        start = time.perf_counter()
        export(model, folder / f"{strategy}.onnx", strategy=strategy)  # child process (torch backend)
        export_seconds[name] = time.perf_counter() - start
        paths[name] = folder / f"{strategy}.onnx"

    rows, sessions, times = [], {}, {}
    for name, path in paths.items():
        proto = onnx.load(path)
        sessions[name] = session = _session(path)
        feed_name = session.get_inputs()[0].name
        error = float(np.abs(session.run(None, {feed_name: ids})[0] - expected).max())
        try:
            other_error = float(np.abs(session.run(None, {feed_name: other})[0] - expected_other).max())
            dynamic = True
        except Exception:  # noqa: BLE001 (a fixed-shape model refuses the other batch)
            other_error, dynamic = None, False
        dims = [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
        rows.append(
            {
                "export": name,
                "export_seconds": export_seconds[name],
                "nodes": len(proto.graph.node),
                "nodes_with_subgraphs": _count_nodes(proto.graph),
                "loops": sum(node.op_type == "Loop" for node in proto.graph.node),
                "input_shape": dims,
                "max_abs_diff_vs_predict": error,
                "dynamic_batch_and_time": dynamic,
                "max_abs_diff_vs_predict_batch5_length37": other_error,
            }
        )
        times[name] = []
        for _ in range(3):  # warm-up
            session.run(None, {feed_name: ids})
    for _ in range(repeat):  # interleaved, so drift hits every model alike
        for name, session in sessions.items():
            feed = {session.get_inputs()[0].name: ids}
            begin = time.perf_counter()
            session.run(None, feed)
            times[name].append(time.perf_counter() - begin)
    baseline = statistics.median(times[BASELINE])
    for row in rows:
        latency = statistics.median(times[row["export"]])
        row["latency_ms_median"] = latency * 1e3
        row["latency_ratio"] = latency / baseline
    return {
        "what": (
            "IMDB Bidirectional LSTM (Embedding(20000, 128, mask_zero=True) -> Bidirectional(LSTM(64), "
            "return_sequences) -> Bidirectional(LSTM(64)) -> Dense(1, sigmoid)), batch 32, length 100, "
            "right-padded; exported from a KERAS_BACKEND=tensorflow process; onnxruntime CPU, one thread, "
            f"median of {repeat} interleaved runs"
        ),
        "script": "scripts/bench_keras_tf_export.py",
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpu": _cpu_model(),
            "nproc": os.cpu_count(),
            "load_average_1min_before": load_before,
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
        "versions": _versions(),
        "repeat": repeat,
        "rows": rows,
    }


def table(results: dict) -> str:
    """The Markdown table docs/keras.md shows, from the JSON record."""
    lines = [
        "| export (from a TensorFlow-backend process) | export time | nodes (with Loop bodies) "
        "| dynamic batch, time | latency (ms) | ratio | max \\|diff\\| vs `predict` |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['export']} | {row['export_seconds']:.1f} s | {row['nodes']} "
            f"({row['nodes_with_subgraphs']}) | {'yes' if row['dynamic_batch_and_time'] else 'no'} "
            f"| {row['latency_ms_median']:.2f} | {row['latency_ratio']:.2f}x "
            f"| {row['max_abs_diff_vs_predict']:.1e} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per model (median)")
    parser.add_argument("--table", action="store_true", help="print the table from the JSON; measure nothing")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(RESULTS.read_text())))
        return
    results = measure(args.repeat)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(results["what"])
    print(f"{results['date_utc']}, {results['machine']['cpu']}, nproc {results['machine']['nproc']}")
    print(table(results))
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
