"""Export time, node count and onnxruntime latency (one thread) of ``onnx_masked_rnn.keras.export``
with each strategy against Keras' own ``model.export(format="onnx")`` with a fixed input signature,
for the Keras example "Bidirectional LSTM on IMDB" (Embedding(20000, 128, mask_zero=True) ->
Bidirectional(LSTM(64), return_sequences) -> Bidirectional(LSTM(64)) -> Dense(1, sigmoid)) at
batch 32, length 100, right-padded. Prints one table with ratios to Keras' export and each model's
largest difference from Keras' ``predict``.

Run: ``KERAS_BACKEND=torch python scripts/bench_keras_export.py [--repeat 30]`` (several minutes:
Keras' own export unrolls the time loop).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

from onnx_masked_rnn import record  # noqa: E402
from onnx_masked_rnn.keras import STRATEGIES, export  # noqa: E402

BATCH, LENGTH, VOCABULARY = 32, 100, 20000


def imdb() -> keras.Model:
    ids = keras.Input((None,), dtype="int32", name="ids")
    x = keras.layers.Embedding(VOCABULARY, 128, mask_zero=True)(ids)
    x = keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True))(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(64))(x)
    return keras.Model(ids, keras.layers.Dense(1, activation="sigmoid")(x))


def right_padded_batch(rng: np.random.Generator) -> np.ndarray:
    lengths = rng.integers(LENGTH // 4, LENGTH + 1, BATCH)
    lengths[0] = LENGTH
    ids = rng.integers(1, VOCABULARY, (BATCH, LENGTH))
    return np.where(np.arange(LENGTH) < lengths[:, None], ids, 0).astype(np.int32)


def session(path: Path) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed runs per model (median)")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="write a record (onnx_masked_rnn.record), e.g. docs/results/keras_export.json",
    )
    args = parser.parse_args()
    recorded = record.start("keras-export", ["keras", "torch"])
    rng = np.random.default_rng(0)
    model = imdb()
    ids = right_padded_batch(rng)
    expected = model.predict(ids, verbose=0)
    folder = Path(tempfile.mkdtemp(prefix="bench_keras_export_"))

    rows: dict[str, dict] = {}
    start = time.perf_counter()
    model.export(
        str(folder / "keras.onnx"),
        format="onnx",
        input_signature=[keras.InputSpec(shape=(BATCH, LENGTH), dtype="int32")],
        verbose=False,
    )
    rows["Keras model.export (fixed signature)"] = {
        "path": folder / "keras.onnx",
        "export": time.perf_counter() - start,
    }
    for strategy in STRATEGIES:
        start = time.perf_counter()
        export(model, folder / f"{strategy}.onnx", strategy=strategy)
        rows[f"onnx_masked_rnn.keras.export {strategy}"] = {
            "path": folder / f"{strategy}.onnx",
            "export": time.perf_counter() - start,
        }

    sessions = {}
    for name, row in rows.items():
        proto = onnx.load(row["path"])
        row["nodes"] = len(proto.graph.node)
        sessions[name] = session(row["path"])
        feed = {sessions[name].get_inputs()[0].name: ids}
        row["error"] = float(np.abs(sessions[name].run(None, feed)[0] - expected).max())
        row["times"] = []
        for _ in range(3):  # warm-up
            sessions[name].run(None, feed)
    for _ in range(args.repeat):  # interleaved, so drift hits every model alike
        for name, row in rows.items():
            feed = {sessions[name].get_inputs()[0].name: ids}
            begin = time.perf_counter()
            sessions[name].run(None, feed)
            row["times"].append(time.perf_counter() - begin)

    baseline = rows["Keras model.export (fixed signature)"]
    baseline_latency = statistics.median(baseline["times"])
    print(
        f"IMDB Bidirectional LSTM, batch {BATCH}, length {LENGTH}, right-padded; onnxruntime "
        f"{ort.__version__}, 1 thread, median of {args.repeat}; keras {keras.__version__}, "
        f"torch {torch.__version__}"
    )
    columns = ("export s", "ratio", "nodes", "ratio", "ms", "ratio", "max |diff|")
    print(f"{'export':<40} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, (9, 7, 6, 7, 8, 7, 11))))
    records = []
    for name, row in rows.items():
        latency = statistics.median(row["times"])
        records.append(
            {
                "export": name,
                "export_seconds": row["export"],
                "export_ratio": row["export"] / baseline["export"],
                "nodes": row["nodes"],
                "nodes_ratio": row["nodes"] / baseline["nodes"],
                "latency_ms_median": latency * 1e3,
                "latency_ratio": latency / baseline_latency,
                "max_abs_diff_vs_predict": row["error"],
            }
        )
        print(
            f"{name:<40} {row['export']:>9.1f} {row['export'] / baseline['export']:>6.3f}x "
            f"{row['nodes']:>6} {row['nodes'] / baseline['nodes']:>6.3f}x {latency * 1e3:>8.2f} "
            f"{latency / baseline_latency:>6.3f}x {row['error']:>11.2e}"
        )
    print("dynamic batch and time: onnx_masked_rnn exports yes; Keras' export with a signature: no")
    if args.json:
        what = {"batch": BATCH, "length": LENGTH, "repeat": args.repeat}
        record.write(record.finish(recorded, **what, rows=records), args.json)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
