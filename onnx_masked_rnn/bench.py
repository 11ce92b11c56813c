"""``onnx-masked-rnn bench``: the two expansions side by side with the native kernels.

For each op, shape ``(T, N, I, H)``, mask kind and thread count it times, in one process,
interleaved (each repetition runs every onnxruntime variant once, in a rotating order; the numpy
reference after them, since its BLAS threads spin on after a call), after warm-up, the median of
``--repeat`` runs of:

- ``native op``: onnxruntime's LSTM/GRU/RNN on the same work, the floor: no mask, or
  ``sequence_lens`` = each row's number of unmasked steps (so it runs as many cell steps);
- ``kernel``: the masked node as it is, on the package's native kernel (``onnx_masked_rnn.kernel``);
- ``gemm floor``: the physical floor, the unmasked steps' matrix products at onnxruntime's Gemm
  rate: one ``MatMul`` of ``[T * N, I + H] x [I + H, gates * H]`` (weights an initializer), timed
  with the others, its time scaled by the unmasked share of the ``T * N`` steps. The kernel's row
  also gets ``ratio_to_gemm_floor``;
- ``native expansion``: ``inline(model, "native")``;
- ``scan expansion``: ``inline(model, "scan", scan_form="capture")``, the specification's body
  with Scan bodies that read the weights from the enclosing graph (the form onnxruntime runs fastest);
- ``portable scan``: ``inline(model, "scan", scan_form="portable")``, the form the specification
  prints: the weights are pass-through Scan state;
- ``loop (converter)``: what a converter emits today for a masked Keras layer (tf2onnx falls back to
  the TensorFlow while-loop): a ``Loop`` whose body gathers step ``t`` of ``X`` and of the mask,
  does the per-step MatMuls and gates, and keeps state and output with ``Where``;
- ``numpy reference``: ``onnx_masked_rnn.reference``, single-shot, numpy's own threads.

The masked node is forward, ``masked_output="carry"`` (Keras' semantics), GRU with
``linear_before_reset=1`` (Keras' ``reset_after``); weights are initializers, as in a deployed
model (onnxruntime pre-packs them). Every variant's ``Y`` is checked against the reference (the
floor's only on all-true masks, where it computes the same thing).

Peak memory (per op and shape, on the ``holes`` mask, or the first mask given): each variant runs
once more in a fresh subprocess, with onnxruntime's arena and memory pattern off and glibc's mmap
threshold fixed, so that freed buffers go back to the system and nothing is reserved ahead. The
figure is the peak resident set during that run minus the resident set just before it, once the
session and the inputs exist (Linux ``/proc/self/clear_refs`` resets the peak): the run's working
memory, outputs included, weights and inputs excluded.

Ratios are to the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onnx_masked_rnn import record, testing
from onnx_masked_rnn.attributes import parse_attributes
from onnx_masked_rnn.extras import install_hint
from onnx_masked_rnn.inline import inline
from onnx_masked_rnn.kernel import register
from onnx_masked_rnn.reference import FUNCTIONS
from onnx_masked_rnn.testing import MASK_KINDS

__all__ = [
    "FLOOR",
    "GEMM_FLOOR",
    "VARIANTS",
    "Case",
    "add_arguments",
    "kernel_verdicts",
    "run",
    "session",
    "with_initializers",
    "workload",
]

VARIANTS = (
    "native op",
    "kernel",
    "gemm floor",
    "native expansion",
    "scan expansion",
    "portable scan",
    "loop (converter)",
    "numpy reference",
)
NUMPY = VARIANTS[-1]
FLOOR = VARIANTS[0]
GEMM_FLOOR = "gemm floor"
DEFAULT_SHAPES = ((100, 32, 64, 128), (1000, 1, 64, 256), (50, 256, 64, 128))
DEFAULT_MASKS = ("all_true", "right_padded", "holes")
QUICK_SHAPES = ((12, 3, 4, 8),)
QUICK_MASKS = ("all_true", "holes")
OPSET = 21
# Issue 21's targets for the kernel, judged at the end of a run: (what, limit, which rows). The
# batch-1 line takes precedence over the mask lines for N = 1.
KERNEL_TARGETS = (
    ("right-padded, N >= 32", 0.80, lambda r: r["mask"] == "right_padded" and r["shape"][1] >= 32),
    ("all true, N > 1", 1.00, lambda r: r["mask"] == "all_true" and r["shape"][1] > 1),
    ("holes, N > 1", 1.00, lambda r: r["mask"] == "holes" and r["shape"][1] > 1),
    ("batch 1", 1.05, lambda r: r["shape"][1] == 1),
)
KERNEL_MEMORY_TARGET = 1.1
KERNEL_GEMM_GOAL = 1.25


def add_arguments(parser: argparse.ArgumentParser) -> None:
    def shape(text: str) -> tuple[int, ...]:
        try:
            dims = tuple(int(v) for v in text.lower().replace("x", ",").split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"a shape is T,N,I,H (four integers), got {text!r}") from None
        if len(dims) != 4 or min(dims) < 1:
            raise argparse.ArgumentTypeError(f"a shape is T,N,I,H (four positive integers), got {text!r}")
        return dims

    parser.add_argument(
        "--shapes",
        nargs="+",
        type=shape,
        metavar="T,N,I,H",
        help="shapes to time (default: 100,32,64,128 1000,1,64,256 50,256,64,128)",
    )
    parser.add_argument(
        "--masks", nargs="+", metavar="KIND", help=f"mask kinds (default: {' '.join(DEFAULT_MASKS)})"
    )
    parser.add_argument(
        "--threads", nargs="+", type=int, metavar="K", help="intra-op thread counts (default: 1 2)"
    )
    parser.add_argument(
        "--ops",
        nargs="+",
        choices=("LSTM", "GRU", "RNN"),
        default=["LSTM"],
        help="ops to time (default: LSTM)",
    )
    parser.add_argument("--repeat", type=int, help="timed runs per variant (default: 20; --quick: 3)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per variant first (default: 3)")
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="write the results as a record (onnx_masked_rnn.record: date, machine, load, versions, "
        "command), e.g. docs/results/bench.json, from which scripts/generate_docs.py writes the docs",
    )
    parser.add_argument(
        "--plot", metavar="PATH", help="draw the ratios as a PNG (needs matplotlib: the 'bench' extra)"
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS[1:],
        metavar="NAME",
        help=f"time only these variants beside the native op (default: all: {', '.join(VARIANTS[1:])})",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--quick", action="store_true", help="a tiny configuration, for smoke tests")


@dataclass(frozen=True)
class Case:
    """One timed configuration."""

    op: str
    shape: tuple[int, int, int, int]
    mask: str
    threads: int

    @property
    def key(self) -> str:
        return f"{self.op} {'x'.join(map(str, self.shape))} {self.mask} {self.threads}t"


def run(args: argparse.Namespace) -> int:
    """Time every case, print the table, write the record (``--json``) and the plot. Returns 0;
    bad options raise ``ValueError``."""

    shapes = (
        [tuple(s) for s in args.shapes]
        if args.shapes
        else list(QUICK_SHAPES if args.quick else DEFAULT_SHAPES)
    )
    masks = args.masks or list(QUICK_MASKS if args.quick else DEFAULT_MASKS)
    threads = args.threads or ([1] if args.quick else [1, 2])
    repeat = args.repeat or (3 if args.quick else 20)
    unknown = sorted(set(masks) - set(MASK_KINDS))
    if unknown:
        raise ValueError(f"--masks: unknown kind(s) {unknown}; choose from {list(MASK_KINDS)}")
    if min(threads) < 1 or repeat < 1 or args.warmup < 0:
        raise ValueError("--threads and --repeat must be positive, --warmup non-negative")
    cases = [
        Case(op, shape, mask, k) for op in args.ops for shape in shapes for mask in masks for k in threads
    ]
    probes = sorted(
        {(c.op, c.shape, c.mask) for c in cases if c.mask == ("holes" if "holes" in masks else masks[0])}
    )
    chosen = set(args.variants or VARIANTS)
    variants = [v for v in VARIANTS if v == FLOOR or v in chosen]
    measured = [v for v in variants if v != GEMM_FLOOR]  # the floor's memory is no variant's
    steps = len(cases) * len(variants) + (0 if args.no_memory else len(probes) * len(measured))
    recorded = record.start("bench")  # before timing: the load average is then the others' work
    progress = _Progress(steps)

    results = []
    for case in cases:
        results.extend(_time_case(case, variants, repeat, args.warmup, progress))
    memory = []
    if not args.no_memory:
        for op, shape, mask in probes:
            memory.extend(_memory_case(Case(op, shape, mask, 1), measured, progress))
    progress.close()

    report = record.finish(
        recorded,
        numpy_threads="the BLAS library's default (not set by --threads)",
        config={
            "ops": list(args.ops),
            "shapes": [list(s) for s in shapes],
            "masks": masks,
            "threads": threads,
            "repeat": repeat,
            "warmup": args.warmup,
            "opset": OPSET,
            "variants": variants,
        },
        results=results,
        memory=memory,
    )
    print(_table(results, memory))
    if "kernel" in variants:
        print(_kernel_targets(results, memory))
    load, cores = report["machine"]["load_average_before"], os.cpu_count() or 1
    if load is not None and load > 0.5 * cores:
        print(f"note: load average {load:.2f} on {cores} cores before timing: other work shares the CPU")
    if args.json:
        record.write(report, args.json)
        print(f"wrote {args.json}")
    if args.plot:
        _plot(results, args.plot)
    return 0


# ---------------------------------------------------------------------------------------------
# The workload and its variants


def _attributes(op: str, H: int):

    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    return parse_attributes(f"Masked{op}", hidden_size=H, masked_output="carry", **extra)


def workload(case: Case):
    """The masked node's attributes, its inputs and the effective mask (time-major)."""

    T, N, I, H = case.shape
    attrs = _attributes(case.op, H)
    rng = np.random.default_rng(list(case.shape))
    inputs = testing.random_inputs(attrs, T, N, I, H, rng=rng, present=("B", "mask"), mask_kind=case.mask)
    return attrs, inputs


def with_initializers(model, inputs: dict, names: Sequence[str]):
    """``model`` with the graph inputs ``names`` turned into initializers holding ``inputs``."""

    kept = [i for i in model.graph.input if i.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.extend(numpy_helper.from_array(inputs[n], n) for n in names)
    return model


def session(model, threads: int, *, arena: bool = True, kernel: bool = False):
    """An onnxruntime CPU session of ``model`` as the benchmark times it: ``threads`` intra-op
    threads, spinning stopped after each run, the memory arena on or off, the package's native
    kernel registered or not."""

    options = ort.SessionOptions()
    if kernel:
        register(options)
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Pool threads spin while a run lasts (onnxruntime's default, as users get it) but stop at its
    # end: sessions run interleaved, and one's idle spinning threads would take the cores from the
    # next one's run.
    options.add_session_config_entry("session.force_spinning_stop", "1")
    options.enable_cpu_mem_arena = arena
    options.enable_mem_pattern = arena
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _build(case: Case, variant: str, *, arena: bool = True) -> tuple[Callable[[], Any], Any]:
    """A zero-argument callable running ``variant`` on the case's workload (returning ``Y``) and
    the reference's ``Y`` to compare with (None when the variant computes something else)."""

    attrs, inputs = workload(case)
    weights = ("W", "R", "B")
    reference = FUNCTIONS[attrs.op_type]
    expected = reference(**inputs, **attrs.to_onnx())[0]
    feeds = {k: v for k, v in inputs.items() if k not in weights}

    if variant == "numpy reference":
        return (lambda: reference(**inputs, **attrs.to_onnx())[0]), expected
    if variant == FLOOR:
        # The same cell steps: each row runs its count of unmasked steps, over X cut to the longest.
        mask = inputs["mask"]
        lens = None if mask.all() else mask.sum(axis=0).astype(np.int32)
        feeds = (
            {"X": inputs["X"]} if lens is None else {"X": inputs["X"][: lens.max()], "sequence_lens": lens}
        )
        node = helper.make_node(
            attrs.spec.onnx_op_type,
            ["X", *weights] + (["sequence_lens"] if lens is not None else []),
            ["Y"],
            **attrs.to_onnx(include_masked_output=False),
        )
        types = {"X": 1, "W": 1, "R": 1, "B": 1, "sequence_lens": 6}
        graph = helper.make_graph(
            [node],
            "native",
            [helper.make_tensor_value_info(n, types[n], (inputs | feeds)[n].shape) for n in node.input],
            [helper.make_tensor_value_info("Y", 1, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
        expected = expected if lens is None else None
    elif variant == "loop (converter)":
        model = loop_model(case.op, attrs, inputs)
    elif variant == "kernel":
        model = testing.make_model(attrs, inputs, OPSET)
    elif variant == GEMM_FLOOR:
        model, feeds = _gemm_model(attrs, inputs)
        expected = None
    else:
        strategy, form = {
            "native expansion": ("native", "capture"),
            "scan expansion": ("scan", "capture"),
            "portable scan": ("scan", "portable"),
        }[variant]
        model = inline(testing.make_model(attrs, inputs, OPSET), strategy, scan_form=form)
    model = with_initializers(
        model, inputs, [w for w in weights if any(i.name == w for i in model.graph.input)]
    )
    runner = session(model, case.threads, arena=arena, kernel=variant == "kernel")
    return (lambda: runner.run(["Y"], feeds)[0]), expected


def _gemm_model(attrs, inputs: dict):
    """The ``gemm floor`` variant: one MatMul doing the matrix products of every step of the cell
    (``X`` and ``h`` rows against the input and recurrent weights at once), and its feeds."""

    T, N, I = inputs["X"].shape
    H = inputs["R"].shape[-1]
    G = attrs.spec.num_gates
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((T * N, I + H)).astype(np.float32)
    weights = (rng.standard_normal((I + H, G * H)) / np.sqrt(I + H)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["rows", "weights"], ["Y"])],
        "gemm_floor",
        [helper.make_tensor_value_info("rows", 1, rows.shape)],
        [helper.make_tensor_value_info("Y", 1, None)],
        initializer=[numpy_helper.from_array(weights, "weights")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
    return model, {"rows": rows}


def loop_model(op: str, attrs, inputs: dict):
    """A converter's masked recurrence: ``Loop`` over time, the cell as per-step ops, ``Where``
    keeping state and output at masked steps (Keras ``carry``). Modelled on what tf2onnx emits for
    Keras' ``K.rnn`` while-loop: TensorArray reads become ``Gather(X, t)``, writes a scan output,
    the mask is tiled to ``[N, H]``. Gate order is ONNX's, weights transposed once outside."""

    T, N, _ = inputs["X"].shape
    H = attrs.hidden_size
    G = attrs.spec.num_gates
    W, R, B = inputs["W"][0], inputs["R"][0], inputs["B"][0]
    Wb, Rb = B[: G * H], B[G * H :]
    n = helper.make_node
    states = ["h", "c"] if op == "LSTM" else ["h"]
    cell: list = [
        n("Gather", ["X", "t"], ["x_t"], axis=0),
        n("Gather", ["mask", "t"], ["m_t"], axis=0),
        n("Unsqueeze", ["m_t", "axis1"], ["m_col"]),
        n("Tile", ["m_col", "tile"], ["m_tiled"]),
        n("MatMul", ["x_t", "kernel"], ["xw"]),
        n("MatMul", ["h", "recurrent_kernel"], ["hr"]),
    ]
    if op == "LSTM":
        cell += [
            n("Add", ["xw", "hr"], ["z0"]),
            n("Add", ["z0", "bias"], ["z"]),
            n("Split", ["z"], ["zi", "zo", "zf", "zc"], axis=1, num_outputs=4),
            n("Sigmoid", ["zi"], ["i"]),
            n("Sigmoid", ["zo"], ["o"]),
            n("Sigmoid", ["zf"], ["f"]),
            n("Tanh", ["zc"], ["g"]),
            n("Mul", ["f", "c"], ["fc"]),
            n("Mul", ["i", "g"], ["ig"]),
            n("Add", ["fc", "ig"], ["c_new"]),
            n("Tanh", ["c_new"], ["tc"]),
            n("Mul", ["o", "tc"], ["h_new"]),
        ]
        bias = {"bias": Wb + Rb}
    elif op == "GRU":  # Keras reset_after=True: the recurrent bias stays inside the reset product
        cell += [
            n("Add", ["xw", "input_bias"], ["xb"]),
            n("Add", ["hr", "recurrent_bias"], ["hb"]),
            n("Split", ["xb"], ["xz", "xr", "xh"], axis=1, num_outputs=3),
            n("Split", ["hb"], ["hz", "hr_", "hh"], axis=1, num_outputs=3),
            n("Add", ["xz", "hz"], ["az"]),
            n("Sigmoid", ["az"], ["zg"]),
            n("Add", ["xr", "hr_"], ["ar"]),
            n("Sigmoid", ["ar"], ["rg"]),
            n("Mul", ["rg", "hh"], ["rh"]),
            n("Add", ["xh", "rh"], ["ah"]),
            n("Tanh", ["ah"], ["cand"]),
            n("Sub", ["h", "cand"], ["diff"]),
            n("Mul", ["zg", "diff"], ["zd"]),
            n("Add", ["cand", "zd"], ["h_new"]),  # z·h + (1 - z)·cand
        ]
        bias = {"input_bias": Wb, "recurrent_bias": Rb}
    else:
        cell += [n("Add", ["xw", "hr"], ["z0"]), n("Add", ["z0", "bias"], ["z"]), n("Tanh", ["z"], ["h_new"])]
        bias = {"bias": Wb + Rb}
    keep = [n("Where", ["m_tiled", f"{s}_new", s], [f"{s}_out"]) for s in states]
    keep += [
        n("Where", ["m_tiled", "h_new", "y"], ["y_out"]),
        n("Identity", ["y_out"], ["y_scan"]),
        n("Add", ["t", "one"], ["t_next"]),
        n("Less", ["t_next", "steps"], ["cond_out"]),
    ]
    state_info = [helper.make_tensor_value_info(s, TensorProto.FLOAT, [N, H]) for s in [*states, "y"]]
    body = helper.make_graph(
        cell + keep,
        "step",
        [
            helper.make_tensor_value_info("t", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            *state_info,
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(f"{s}_out", TensorProto.FLOAT, [N, H]) for s in [*states, "y"]]
        + [helper.make_tensor_value_info("y_scan", TensorProto.FLOAT, [N, H])],
    )
    constants = {
        "kernel": W.T.copy(),
        "recurrent_kernel": R.T.copy(),
        **bias,
        "axis1": np.array([1], np.int64),
        "tile": np.array([1, H], np.int64),
        "one": np.array(1, np.int64),
        "steps": np.array(T, np.int64),
        "trip": np.array(T, np.int64),
        "true": np.array(True),
        "zeros": np.zeros((N, H), np.float32),
    }
    zeros = ["zeros"] * (len(states) + 1)
    graph = helper.make_graph(
        [
            n("Loop", ["trip", "true", *zeros], [f"{s}_T" for s in [*states, "y"]] + ["Y_steps"], body=body),
            n("Unsqueeze", ["Y_steps", "axis1"], ["Y"]),
        ],
        "loop",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, inputs["X"].shape),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, inputs["mask"].shape),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in constants.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)


# ---------------------------------------------------------------------------------------------
# Timing and memory


def _time_case(
    case: Case, variants: Sequence[str], repeat: int, warmup: int, progress: _Progress
) -> list[dict]:
    """Each of ``variants`` of ``case``: built, checked against the reference, warmed up, then
    timed interleaved. A variant that fails to build or run is reported with its error."""

    runners: dict[str, Callable[[], Any]] = {}
    rows: dict[str, dict] = {}
    for variant in variants:
        progress.step(f"{case.key}: build {variant}")
        row = {"key": case.key, **asdict(case), "variant": variant, "median_ms": None, "ratio": None}
        row["shape"] = list(case.shape)
        try:
            runner, expected = _build(case, variant)
            Y = runner()
            for _ in range(warmup):
                runner()
        except Exception as error:  # reported in the table and the JSON, never hidden
            row["error"] = f"{type(error).__name__}: {str(error).strip().splitlines()[0][:200]}"
        else:
            runners[variant] = runner
            row["max_abs_diff"] = None if expected is None else float(np.max(np.abs(Y - expected)))
        rows[variant] = row
    times: dict[str, list[float]] = {v: [] for v in runners}
    # numpy's BLAS threads keep spinning after a call and would take a core from the next
    # onnxruntime run: the numpy reference is timed on its own, after the interleaved sessions.
    order = [v for v in runners if v != NUMPY]
    for r in range(repeat):
        for variant in order[r % len(order) :] + order[: r % len(order)]:
            start = time.perf_counter()
            runners[variant]()
            times[variant].append(time.perf_counter() - start)
    for _ in range(repeat if NUMPY in runners else 0):
        start = time.perf_counter()
        runners[NUMPY]()
        times[NUMPY].append(time.perf_counter() - start)
    if GEMM_FLOOR in times:
        share = _unmasked_share(case)
        times[GEMM_FLOOR] = [t * share for t in times[GEMM_FLOOR]]
    floor = statistics.median(times[FLOOR]) if FLOOR in times else None
    for variant, samples in times.items():
        median = statistics.median(samples)
        rows[variant].update(
            median_ms=median * 1e3, min_ms=min(samples) * 1e3, times_ms=[t * 1e3 for t in samples]
        )
        rows[variant]["ratio"] = median / floor if floor else None
        if floor and variant != FLOOR and variant != NUMPY:
            # run-to-run noise: the quartiles of the ratios of runs made one after the other
            paired = sorted(t / f for t, f in zip(samples, times[FLOOR]))
            rows[variant]["ratio_quartiles"] = [paired[len(paired) // 4], paired[(3 * len(paired)) // 4]]
    if "kernel" in times and GEMM_FLOOR in times:
        rows["kernel"]["ratio_to_gemm_floor"] = statistics.median(times["kernel"]) / statistics.median(
            times[GEMM_FLOOR]
        )
    return list(rows.values())


def _unmasked_share(case: Case) -> float:
    """The share of the ``T * N`` steps that the mask keeps (the floor's work)."""
    _, inputs = workload(case)
    return float(inputs["mask"].mean()) if inputs["mask"].size else 0.0


def _memory_case(case: Case, variants: Sequence[str], progress: _Progress) -> list[dict]:
    """Peak working memory of one run of each of ``variants``, each in a fresh subprocess."""
    rows = []
    for variant in variants:
        progress.step(f"{case.key}: memory of {variant}")
        row = {"key": case.key, **asdict(case), "variant": variant, "peak_mb": None, "ratio": None}
        row["shape"] = list(case.shape)
        spec = json.dumps({**asdict(case), "variant": variant})
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, spec],
            capture_output=True,
            text=True,
            env=_child_env(),
            timeout=900,
        )
        if done.returncode == 0:
            row["peak_mb"] = json.loads(done.stdout.strip().splitlines()[-1])["peak_mb"]
        else:
            lines = done.stderr.strip().splitlines() or ["no output"]
            row["error"] = lines[-1][:200]
        rows.append(row)
    floor = next((r["peak_mb"] for r in rows if r["variant"] == FLOOR), None)
    for row in rows:
        if floor and row["peak_mb"] is not None:
            row["ratio"] = row["peak_mb"] / floor
    return rows


_PROBE = "import sys, json; from onnx_masked_rnn.bench import _probe; print(json.dumps(_probe(sys.argv[1])))"


def _child_env() -> dict[str, str]:
    """This environment, with this package importable from the child, and glibc's mmap threshold
    fixed at 128 KiB: every large buffer is then mapped on allocation and unmapped when freed, so the
    resident set follows the live buffers (by default glibc raises the threshold after the first free
    and keeps freed buffers resident in its heap, which would make the peak depend on history)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)
    return env


def _resident_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


def _probe(spec_json: str) -> dict:
    """In a fresh process: build the variant (arena off), then measure one run's peak."""
    spec = json.loads(spec_json)
    variant = spec.pop("variant")
    case = Case(spec["op"], tuple(spec["shape"]), spec["mask"], spec["threads"])
    runner, _ = _build(case, variant, arena=False)
    before = _resident_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak resident set (VmHWM) to the current one
    runner()
    return {"peak_mb": max(_resident_kb("VmHWM") - before, 0) / 1024}


# ---------------------------------------------------------------------------------------------
# Reporting


class _Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal, else a line per 10%)."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.last_decile = -1

    def step(self, text: str) -> None:
        self.done += 1
        fraction = self.done / max(self.total, 1)
        bar = "#" * int(30 * fraction)
        line = f"[{bar:<30}] {self.done}/{self.total} {time.perf_counter() - self.start:5.0f}s {text}"
        if self.tty:
            sys.stderr.write("\r\033[K" + line[:150])
        elif int(fraction * 10) != self.last_decile:
            self.last_decile = int(fraction * 10)
            sys.stderr.write(line[:150] + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
        sys.stderr.write(f"bench: {self.total} steps in {time.perf_counter() - self.start:.0f}s\n")


def _cell(row: dict | None, floor_cell: bool) -> str:
    if row is None:
        return "-"
    if row.get("error"):
        return "error"
    if row["ratio"] is None:  # the floor failed: no ratio
        return f"{row['median_ms']:.2f} ms"
    value = f"{row['median_ms']:.2f} ms" if floor_cell else f"{row['ratio']:.2f}x"
    if row.get("max_abs_diff") is not None and row["max_abs_diff"] > 1e-3:
        value += " (!)"  # disagrees with the reference
    return value


def _table(results: list[dict], memory: list[dict]) -> str:
    present = {r["variant"] for r in results}
    variants = [v for v in VARIANTS if v in present]
    header = ["op", "T", "N", "I", "H", "mask", "thr", *variants]
    lines = []
    by_key: dict[str, dict[str, dict]] = {}
    for row in results:
        by_key.setdefault(row["key"], {})[row["variant"]] = row
    table = []
    for rows in by_key.values():
        first = next(iter(rows.values()))
        table.append(
            [first["op"], *map(str, first["shape"]), first["mask"], str(first["threads"])]
            + [_cell(rows.get(v), v == FLOOR) for v in variants]
        )
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(header)] if table else []
    lines.append(
        "time: the floor's median, then each variant's ratio to it  ((!): differs from the reference)"
    )
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    lines.extend("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in table)
    errors = [f"  {r['key']} {r['variant']}: {r['error']}" for r in results + memory if r.get("error")]
    if memory:
        lines.append("")
        lines.append("peak memory of one run (MB above the resident set before it; ratio to the floor):")
        by_key = {}
        for row in memory:
            by_key.setdefault(row["key"], {})[row["variant"]] = row
        for key, rows in by_key.items():
            cells = []
            for v in (v for v in variants if v != GEMM_FLOOR):
                r = rows.get(v)
                if r is None or r["peak_mb"] is None:
                    cells.append(f"{v}: error")
                elif v == FLOOR:
                    cells.append(f"{v}: {r['peak_mb']:.1f} MB")
                else:
                    cells.append(
                        f"{v}: {r['peak_mb']:.1f} MB ({r['ratio']:.2f}x)" if r["ratio"] else f"{v}: -"
                    )
            lines.append(f"  {key.rsplit(' ', 1)[0]}: " + ", ".join(cells))
    if errors:
        lines.append("")
        lines.append("errors:")
        lines.extend(errors)
    return "\n".join(lines)


def kernel_verdicts(results: list[dict], memory: list[dict]) -> list[dict]:
    """Issue 21's targets judged on a run's rows: for each op and thread count, each of
    :data:`KERNEL_TARGETS` (``kind`` "time": the worst ratio of the kernel to the native op over
    the configurations it covers, that configuration's quartiles of the paired runs' ratios, the
    noise, and the verdict: met, within the noise (the lower quartile meets it), or MISSED) and the
    range of the ratio to the Gemm floor (``kind`` "gemm floor", a goal, no verdict); for each op
    and shape measured, the peak memory (``kind`` "memory")."""
    verdicts = []
    rows = [r for r in results if r["variant"] == "kernel" and r["ratio"] is not None]
    for op in dict.fromkeys(r["op"] for r in rows):
        for threads in sorted({r["threads"] for r in rows if r["op"] == op}):
            mine = [r for r in rows if r["op"] == op and r["threads"] == threads]
            for what, limit, chosen in KERNEL_TARGETS:
                found = [r for r in mine if chosen(r)]
                if not found:
                    continue
                worst = max(found, key=lambda r: r["ratio"])
                low, high = worst.get("ratio_quartiles", [worst["ratio"]] * 2)
                verdict = (
                    "met" if worst["ratio"] <= limit else "within the noise" if low <= limit else "MISSED"
                )
                verdicts.append(
                    {"kind": "time", "op": op, "threads": threads, "what": what, "limit": limit}
                    | {
                        "worst": worst["ratio"],
                        "quartiles": [low, high],
                        "key": worst["key"],
                        "verdict": verdict,
                    }
                )
            floors = [r for r in mine if r.get("ratio_to_gemm_floor")]
            if floors:
                worst = max(floors, key=lambda r: r["ratio_to_gemm_floor"])
                verdicts.append(
                    {"kind": "gemm floor", "op": op, "threads": threads, "limit": KERNEL_GEMM_GOAL}
                    | {"low": min(r["ratio_to_gemm_floor"] for r in floors)}
                    | {"worst": worst["ratio_to_gemm_floor"], "key": worst["key"]}
                )
    for row in (r for r in memory if r["variant"] == "kernel" and r["ratio"] is not None):
        verdict = "met" if row["ratio"] <= KERNEL_MEMORY_TARGET else "MISSED"
        verdicts.append(
            {"kind": "memory", "op": row["op"], "shape": row["shape"], "limit": KERNEL_MEMORY_TARGET}
            | {"worst": row["ratio"], "key": row["key"], "verdict": verdict}
        )
    return verdicts


def _kernel_targets(results: list[dict], memory: list[dict]) -> str:
    """:func:`kernel_verdicts` as the lines the run prints at its end."""
    lines = ["", "kernel targets (ratio to the native op; [quartiles of the paired runs]):"]
    for v in kernel_verdicts(results, memory):
        if v["kind"] == "time":
            low, high = v["quartiles"]
            lines.append(
                f"  {v['op']} {v['threads']}t {v['what']} <= {v['limit']:.2f}x: worst {v['worst']:.3f}x "
                f"[{low:.3f}, {high:.3f}] ({v['key']}) {v['verdict']}"
            )
        elif v["kind"] == "gemm floor":
            lines.append(
                f"  {v['op']} {v['threads']}t ratio to the Gemm floor (goal <= {v['limit']}x): "
                f"{v['low']:.2f}x to {v['worst']:.2f}x (worst: {v['key']})"
            )
        else:
            where = v["key"].rsplit(" ", 1)[0]
            lines.append(f"  {where} peak memory <= {v['limit']}x: {v['worst']:.2f}x {v['verdict']}")
    return "\n".join(lines)


def _plot(results: list[dict], path: str) -> None:
    try:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed ({install_hint('bench')}): no plot written to {path}")
        return
    threads = sorted({r["threads"] for r in results})
    variants = [v for v in VARIANTS if v != FLOOR]
    fig, axes = plt.subplots(
        len(threads),
        1,
        figsize=(max(12, 0.5 * len({r["key"] for r in results}) / len(threads)), 5.5 * len(threads)),
        squeeze=False,
    )
    for ax, k in zip(axes[:, 0], threads):
        keys = list(dict.fromkeys(r["key"] for r in results if r["threads"] == k))
        width = 0.8 / len(variants)
        for j, variant in enumerate(variants):
            ratios = [
                next((r["ratio"] or 0 for r in results if r["key"] == key and r["variant"] == variant), 0)
                for key in keys
            ]
            ax.bar([i + j * width for i in range(len(keys))], ratios, width, label=variant)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%gx"))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_ylabel("time / native op")
        ax.set_title(f"{k} thread(s)")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))])
        # key: "LSTM 100x32x64x128 holes 1t" -> "LSTM 100x32x64x128 holes", rotated to stay legible
        ax.set_xticklabels([key.rsplit(" ", 1)[0] for key in keys], fontsize=7, rotation=60, ha="right")
        ax.legend(fontsize=8)
    fig.suptitle("onnx-masked-rnn bench: median run time relative to onnxruntime's native op on equal work")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
