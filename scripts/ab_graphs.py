"""Time the models of ``scripts/graph_digests.py`` as two revisions build them, side by side.

Each revision's package builds the 27 models (``bench``'s LSTM workload, 3 shapes x 3 masks,
native and both Scan forms, weights as initializers) in a child process; this process then
checks that each pair computes the same ``Y`` and times the pair interleaved (one thread, the
order alternating), printing the medians and new/old. It also says whether onnxruntime's
optimized graphs of the pair are equal (same ops in order, attributes and initializer values):
where they are, a ratio away from 1 is the machine's noise. Run from a checkout:
``python scripts/ab_graphs.py --old REV [--new REV] [--repeat N]`` (``--new`` defaults to the
working tree).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from onnx_masked_rnn import bench, record

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [(100, 32, 64, 128), (1000, 1, 64, 256), (50, 256, 64, 128)]
MASKS = ["all_true", "right_padded", "holes"]
FORMS = [("native", "capture"), ("scan", "capture"), ("scan", "portable")]

BUILD = """
import itertools, sys, onnx
from onnx_masked_rnn import bench, testing
from onnx_masked_rnn.inline import inline
# Revisions before 0827b2e named the workload and the initializer helper with a leading underscore.
workload = getattr(bench, "workload", None) or getattr(bench, "_workload")
with_initializers = getattr(bench, "with_initializers", None) or getattr(bench, "_with_initializers")
for shape, mask in itertools.product(SHAPES, MASKS):
    attrs, inputs = workload(bench.Case("LSTM", shape, mask, 1))
    model = testing.make_model(attrs, inputs, bench.OPSET)
    for strategy, form in FORMS:
        m = inline(model, strategy, scan_form=form)
        weights = [w for w in ("W", "R", "B") if any(i.name == w for i in m.graph.input)]
        stem = f"{'x'.join(map(str, shape))}_{mask}_{strategy}_{form}"
        onnx.save(with_initializers(m, inputs, weights), f"{sys.argv[1]}/{stem}.onnx")
"""


def name(shape, mask, strategy, form) -> str:
    return f"{'x'.join(map(str, shape))}_{mask}_{strategy}_{form}"


def build(revision: str | None, out: Path, scratch: Path) -> None:
    """The models as ``revision``'s package builds them (None: the working tree)."""
    source = ROOT
    if revision is not None:
        source = scratch / revision.replace("/", "_")
        source.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "onnx_masked_rnn"], check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    out.mkdir()
    code = f"SHAPES, MASKS, FORMS = {SHAPES!r}, {MASKS!r}, {FORMS!r}\n" + BUILD
    env = {**os.environ, "PYTHONPATH": str(source)}
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, env=env, cwd=scratch)


def optimized(path: Path, scratch: Path) -> tuple:
    """onnxruntime's optimized graph, without value names."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.optimized_model_filepath = str(scratch / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    model = onnx.load(scratch / "optimized.onnx")

    def nodes(graph):
        result = []
        for node in graph.node:
            attributes = []
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    attributes.append((a.name, nodes(a.g)))
                elif a.type == onnx.AttributeProto.TENSOR:
                    attributes.append((a.name, numpy_helper.to_array(a.t).tobytes()))
                else:
                    attributes.append((a.name, str(onnx.helper.get_attribute_value(a))))
            result.append((node.op_type, node.domain, len(node.input), tuple(sorted(attributes))))
        return tuple(result)

    return nodes(model.graph), sorted(numpy_helper.to_array(i).tobytes() for i in model.graph.initializer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="git revision of the old graphs")
    parser.add_argument("--new", default=None, help="git revision of the new graphs (default: working tree)")
    parser.add_argument("--repeat", type=int, default=30, help="timed runs of each model (default: 30)")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="write a record (onnx_masked_rnn.record), e.g. docs/results/ab_graphs.json",
    )
    args = parser.parse_args()
    recorded = record.start("ab-graphs")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for tag, revision in (("old", args.old), ("new", args.new)):
            build(revision, scratch / tag, scratch)
        print(f"{'model':44s} {'old ms':>8s} {'new ms':>8s} {'new/old':>8s}  optimized graphs")
        ratios = []
        for shape, mask in itertools.product(SHAPES, MASKS):
            _, inputs = bench.workload(bench.Case("LSTM", shape, mask, 1))
            feeds = {k: v for k, v in inputs.items() if k not in ("W", "R", "B")}
            for strategy, form in FORMS:
                model = name(shape, mask, strategy, form)
                paths = {tag: scratch / tag / f"{model}.onnx" for tag in ("old", "new")}
                equal = optimized(paths["old"], scratch) == optimized(paths["new"], scratch)
                sessions = {tag: bench.session(onnx.load(p), 1) for tag, p in paths.items()}
                Y = {tag: s.run(["Y"], feeds)[0] for tag, s in sessions.items()}
                assert np.array_equal(Y["old"], Y["new"]), f"{model}: old and new compute different Y"
                for _ in range(3):
                    for s in sessions.values():
                        s.run(["Y"], feeds)
                times = {"old": [], "new": []}
                for r in range(args.repeat):
                    for tag in ("old", "new") if r % 2 == 0 else ("new", "old"):
                        start = time.perf_counter()
                        sessions[tag].run(["Y"], feeds)
                        times[tag].append(time.perf_counter() - start)
                old, new = (statistics.median(times[t]) * 1e3 for t in ("old", "new"))
                ratios.append(new / old)
                same = "equal" if equal else "differ"
                print(f"{model:44s} {old:8.2f} {new:8.2f} {new / old:7.3f}x  {same}", flush=True)
                rows.append(
                    {"model": model, "old_ms": old, "new_ms": new, "ratio": new / old, "optimized": same}
                )
        geomean = float(np.exp(np.mean(np.log(ratios))))
        print(f"new/old: geometric mean {geomean:.3f}x, {min(ratios):.3f}x to {max(ratios):.3f}x")
    if args.json:
        new = args.new or "the working tree"
        fields = {"old": args.old, "new": new, "repeat": args.repeat, "geomean": geomean, "rows": rows}
        record.write(record.finish(recorded, **fields), args.json)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
