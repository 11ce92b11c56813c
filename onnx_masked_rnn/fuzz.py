"""``onnx-masked-rnn fuzz``: a differential fuzz of every execution path against the numpy reference.

Case ``i`` of seed ``s`` is drawn from ``numpy.random.default_rng([s, i])`` (so any case replays
alone): one of the three ops with random attributes (direction, layout, activations with their
alpha/beta, clip, input_forget, linear_before_reset, masked_output, hidden_size given or not),
dtype, opset, sizes, present optional inputs, mask kind, node outputs, and sometimes a second node
of the same op configured differently (present inputs, ``beta``, ...), which needs its own
function overload. Each case runs through :data:`PATHS`:

- ``onnx-reference ops``: ``onnx.reference.ReferenceEvaluator(model, new_ops=reference.OPS)``;
- ``attach_functions``, ``inline scan``, ``inline native``: the three shipped forms in onnxruntime,
  and ``inline scan capture``: ``inline(model, "scan", scan_form="capture")``;
- ``kernel``: the masked nodes as they are, on the package's native kernel
  (``onnx_masked_rnn.kernel.session``; a node it would not cover is an error);
- ``onnx-reference scan``: ``inline(model, "scan")`` in the ReferenceEvaluator (its Scan extended
  with scan directions: :class:`onnx_masked_rnn.testing.Scan`).

and each result is compared with the reference functions' by the rule of ``fuzz_comparison``
(``numpy.isclose`` at its ``TOLERANCE``; an element that differs also agrees where it matches a
result as right as the reference's; a path that differs only where the exact result overflows the
dtype is ``OVERFLOW``, unsupported).

Cases run in worker processes: a path that kills its process (a segfault) is recorded as ``crash``
and the case goes on in a new worker from the next path. Every outcome is ``agree``,
``mismatch``, ``error`` (an exception), ``crash``, or ``unsupported`` with its reason; an
``agree`` that needed an equally right result keeps what differed from the reference as its
detail. The run ends with the counts per path (those agreements counted apart), a line per failure
that names the case, and a line per such agreement where a value is non-finite (where paths
overflow differently); ``--case I`` replays case ``I`` (with ``--seed``) and prints its whole
configuration. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import queue
import sys
import threading
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort
from onnx import helper
from onnx.reference import ReferenceEvaluator

from onnx_masked_rnn import kernel as native_kernel
from onnx_masked_rnn import record as measurement
from onnx_masked_rnn import reference
from onnx_masked_rnn._domain import DOMAIN, OPSET_VERSION
from onnx_masked_rnn._worker import Crash, Worker
from onnx_masked_rnn.attributes import (
    ACTIVATIONS,
    DIRECTIONS,
    MASKED_OUTPUT_MODES,
    OP_SPECS,
    infer_shapes,
    parse_attributes,
)
from onnx_masked_rnn.functions import MIN_OPSET, max_opset
from onnx_masked_rnn.fuzz_comparison import EQUALLY_RIGHT, OVERFLOW, judge
from onnx_masked_rnn.inline import attach_functions, inline
from onnx_masked_rnn.testing import MASK_KINDS, Scan, make_mask, value_info

__all__ = [
    "PATHS",
    "Case",
    "add_arguments",
    "draw_case",
    "make_worker",
    "run",
    "run_case",
    "run_job",
    "run_paths",
    "summary",
]

PATHS = (
    "onnx-reference ops",
    "attach_functions",
    "inline scan",
    "inline scan capture",
    "inline native",
    "kernel",
    "onnx-reference scan",
)
STATUSES = ("agree", "mismatch", "error", "crash", "unsupported")
# The documented limits a path may report as "unsupported" (anything else that fails is a failure).
NO_DOUBLE_KERNEL = "onnxruntime has no double kernel for LSTM/GRU/RNN (ONNX defines one)"
NO_EMPTY_SCAN = "onnx.reference's Scan refuses a scan of length 0"
NO_KERNEL = "the kernel library was not built (an install with ONNX_MASKED_RNN_NO_KERNEL=1)"
TIMEOUT = 300.0  # seconds one path may take before it counts as a crash (a hang)


@dataclasses.dataclass
class Case:
    """One drawn model: its nodes' attributes and inputs, the graph inputs, and the model."""

    seed: int
    index: int
    opset: int
    nodes: list[dict[str, Any]]  # each: op_type, attributes, inputs (ONNX names present), outputs
    feeds: dict[str, np.ndarray]

    def describe(self) -> str:
        shapes = {k: (str(v.dtype), list(v.shape)) for k, v in self.feeds.items()}
        nodes = [{k: v for k, v in n.items()} for n in self.nodes]
        return json.dumps(
            {"seed": self.seed, "case": self.index, "opset": self.opset, "nodes": nodes, "feeds": shapes},
            default=str,
        )

    def summary(self) -> str:
        n = self.nodes[0]
        a = n["attributes"]
        keys = (
            "direction",
            "layout",
            "masked_output",
            "activations",
            "clip",
            "input_forget",
            "linear_before_reset",
            "hidden_size",
        )
        bits = [f"{k}={a[k]}" for k in keys if k in a]
        return (
            f"{n['op_type']} {self.feeds['X'].dtype} X{list(self.feeds['X'].shape)} "
            f"{' '.join(bits)} inputs={n['inputs']} nodes={len(self.nodes)}"
        )

    def model(self) -> Any:
        """The ``onnx.ModelProto`` holding the nodes, with static shapes."""
        graph_nodes, outputs = [], []
        dtype = helper.np_dtype_to_tensor_dtype(self.feeds["X"].dtype)
        for k, n in enumerate(self.nodes):
            spec = OP_SPECS[n["op_type"]]
            attrs = parse_attributes(n["op_type"], **n["attributes"])
            last = max(spec.inputs.index(name) for name in n["inputs"])
            inputs = [name if name in n["inputs"] else "" for name in spec.inputs[: last + 1]]
            shapes = infer_shapes(
                attrs, [self.feeds[name].shape if name in n["inputs"] else None for name in spec.inputs]
            )
            names = [f"{o}_{k}" if o in n["outputs"] else "" for o in spec.outputs]
            while names and not names[-1]:
                names.pop()
            graph_nodes.append(
                helper.make_node(
                    n["op_type"], inputs, names, name=f"node_{k}", domain=DOMAIN, **n["attributes"]
                )
            )
            outputs += [helper.make_tensor_value_info(o, dtype, s) for o, s in zip(names, shapes) if o]
        graph = helper.make_graph(
            graph_nodes, "fuzz", [value_info(k, v) for k, v in self.feeds.items()], outputs
        )
        return helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
            ir_version=10,
        )

    def expected(self, compute_dtype: np.dtype | None = None) -> list[np.ndarray]:
        """The reference functions' outputs, in graph output order (``compute_dtype``: see
        ``reference.masked_lstm``)."""
        out = []
        for n in self.nodes:
            spec = OP_SPECS[n["op_type"]]
            inputs = {k: self.feeds[k] for k in n["inputs"]}
            values = reference.FUNCTIONS[n["op_type"]](
                **inputs, **n["attributes"], compute_dtype=compute_dtype
            )
            out += [v for o, v in zip(spec.outputs, values) if o in n["outputs"]]
        return out

    def reference(
        self, feeds: dict[str, np.ndarray], compute_dtype: np.dtype | None = None
    ) -> list[np.ndarray]:
        """:meth:`expected` for other ``feeds`` (``fuzz_comparison.Reference``)."""
        return dataclasses.replace(self, feeds=feeds).expected(compute_dtype)

    def node_of(self) -> list[int]:
        """The node of each graph output."""
        return [
            k for k, n in enumerate(self.nodes) for o in OP_SPECS[n["op_type"]].outputs if o in n["outputs"]
        ]


def draw_case(seed: int, index: int) -> Case:
    """Case ``index`` of ``seed``: a pure function of the two numbers."""
    rng = np.random.default_rng([seed, index])
    op_type = str(rng.choice(sorted(OP_SPECS)))
    spec = OP_SPECS[op_type]
    direction = str(rng.choice(DIRECTIONS))
    D, G = (2 if direction == "bidirectional" else 1), spec.num_gates
    layout = int(rng.integers(2))
    dtype = np.dtype(rng.choice(["float32"] * 6 + ["float64", "float16"]))
    T = 0 if rng.random() < 0.02 else int(rng.integers(1, 7))
    N = 0 if rng.random() < 0.02 else int(rng.integers(1, 5))
    I, H = int(rng.integers(1, 5)), int(rng.integers(1, 6))
    scale = float(rng.choice([0.5, 1.0, 2.0, 4.0])) / np.sqrt(H)
    x_scale = float(rng.choice([1.0, 1.0, 1.0, 3.0, 30.0]))

    attributes: dict[str, Any] = {
        "direction": direction,
        "layout": layout,
        "masked_output": str(rng.choice(MASKED_OUTPUT_MODES)),
    }
    if rng.random() < 0.8:
        attributes["hidden_size"] = H
    if rng.random() < 0.3:
        attributes["clip"] = round(float(rng.uniform(0.3, 3.0)), 3)
    if op_type == "MaskedLSTM":
        attributes["input_forget"] = int(rng.integers(2))
    if op_type == "MaskedGRU":
        attributes["linear_before_reset"] = int(rng.integers(2))
    if rng.random() < 0.6:
        names = [str(a) for a in rng.choice(sorted(ACTIVATIONS), size=D * spec.num_activations)]
        attributes["activations"] = names
        alphas = [round(float(rng.uniform(0.05, 1.5)), 3) for n in names if ACTIVATIONS[n][0]]
        betas = [round(float(rng.uniform(-1.0, 1.0)), 3) for n in names if ACTIVATIONS[n][1]]
        if alphas and rng.random() < 0.8:
            attributes["activation_alpha"] = alphas[: int(rng.integers(1, len(alphas) + 1))]
        if betas and rng.random() < 0.8:
            attributes["activation_beta"] = betas[: int(rng.integers(1, len(betas) + 1))]

    def normal(*shape: int, s: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(dtype)

    state = (N, D, H) if layout else (D, N, H)
    feeds = {
        "X": normal(*((N, T, I) if layout else (T, N, I)), s=x_scale),
        "W": normal(D, G * H, I, s=scale),
        "R": normal(D, G * H, H, s=scale),
        "B": normal(D, 2 * G * H, s=0.5),
        "initial_h": normal(*state, s=0.5),
        "initial_c": normal(*state, s=0.5),
        "P": normal(D, 3 * H, s=0.5),
        "sequence_lens": rng.integers(0, T + 1, size=N).astype(np.int32),
    }
    kind = str(rng.choice(MASK_KINDS))
    mask = make_mask(kind, T, N, rng) if T and N else np.ones((T, N), bool)
    feeds["mask"] = mask.T.copy() if layout else mask
    optional = [n for n in spec.inputs[3:] if n in feeds]
    present = ["X", "W", "R", *(n for n in optional if rng.random() < 0.5)]
    outputs = list(spec.outputs)
    if rng.random() < 0.3:
        outputs = [o for o in spec.outputs if rng.random() < 0.5] or [str(rng.choice(spec.outputs))]
    nodes = [{"op_type": op_type, "attributes": attributes, "inputs": present, "outputs": outputs}]
    if rng.random() < 0.3:  # a second node of the op, configured differently: its own overload
        other = dict(attributes)
        change = str(rng.choice(["inputs", "beta", "alpha", "masked_output", "clip"]))
        other_present = present
        if change == "inputs":
            other_present = ["X", "W", "R", *(n for n in optional if rng.random() < 0.5)]
        elif change in ("alpha", "beta"):
            key = f"activation_{change}"
            count = sum(ACTIVATIONS[n][0 if change == "alpha" else 1] for n in other.get("activations", ()))
            if count:
                other[key] = [round(float(rng.uniform(0.05, 1.5)), 3) for _ in range(count)]
            else:  # the default activations take no alpha or beta: vary the input set instead
                other_present = ["X", "W", "R", *(n for n in optional if rng.random() < 0.5)]
        elif change == "masked_output":
            other["masked_output"] = str(rng.choice(MASKED_OUTPUT_MODES))
        else:
            other["clip"] = round(float(rng.uniform(0.3, 3.0)), 3)
        nodes.append(
            {"op_type": op_type, "attributes": other, "inputs": other_present, "outputs": list(spec.outputs)}
        )
    used = {name for n in nodes for name in n["inputs"]}
    feeds = {k: v for k, v in feeds.items() if k in used}
    opset = int(rng.integers(MIN_OPSET, max_opset() + 1))
    return Case(seed, index, opset, nodes, feeds)


def _session_run(model: Any, feeds: dict[str, np.ndarray], kernel: bool = False) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 4  # errors come back as exceptions; do not log them too
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    if kernel:
        with warnings.catch_warnings():
            warnings.simplefilter("error", native_kernel.KernelFallbackWarning)
            session = native_kernel.session(model, options, providers=["CPUExecutionProvider"])
    else:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v for k, v in feeds.items() if k in names})


def _run_path(path: str, case: Case) -> list[np.ndarray]:
    model = case.model()
    if path == "onnx-reference ops":
        return ReferenceEvaluator(model, new_ops=reference.OPS).run(None, case.feeds)
    if path == "attach_functions":
        return _session_run(attach_functions(model), case.feeds)
    if path == "inline scan":
        return _session_run(inline(model, "scan"), case.feeds)
    if path == "inline scan capture":
        return _session_run(inline(model, "scan", scan_form="capture"), case.feeds)
    if path == "inline native":
        return _session_run(inline(model, "native"), case.feeds)
    if path == "kernel":
        return _session_run(model, case.feeds, kernel=True)
    if path == "onnx-reference scan":
        return ReferenceEvaluator(inline(model, "scan"), new_ops=[Scan]).run(None, case.feeds)
    raise ValueError(f"unknown path {path!r}")


def _unsupported(path: str, case: Case, error: BaseException) -> str | None:
    """The reason a path cannot run this case, when the failure is a documented limit."""
    text = str(error)
    if (
        path == "inline native"
        and case.feeds["X"].dtype == np.float64
        and any(
            m in text
            for m in ("NOT_IMPLEMENTED", "Could not find an implementation", "does not support double")
        )
    ):
        return NO_DOUBLE_KERNEL
    if path == "onnx-reference scan" and "zero scan-input length" in text:
        return NO_EMPTY_SCAN
    if path == "kernel" and type(error).__name__ == "KernelNotBuiltError":
        return NO_KERNEL
    return None


def run_case(case: Case, path: str) -> tuple[str, str]:
    """``(status, detail)`` of one path on one case (in this process)."""
    try:
        expected = case.expected()
    except Exception as exc:  # the generator drew something the reference refuses: a fuzz bug
        return "error", f"the reference refused the case: {type(exc).__name__}: {exc}"
    try:
        with np.errstate(all="ignore"):
            actual = _run_path(path, case)
    except Exception as exc:
        reason = _unsupported(path, case, exc)
        if reason:
            return "unsupported", reason
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return "error", f"{type(exc).__name__}: {first[:300]}"
    rng = np.random.default_rng([case.seed, case.index, 1])
    return judge(actual, expected, case.reference, case.feeds, case.node_of(), rng)


def _job_handler(_: None) -> Callable[[tuple[int, int, str]], tuple[str, str]]:
    """In a worker process: the handler of one ``(seed, case, path)`` job."""
    warnings.simplefilter("ignore")
    return run_job


def run_job(job: tuple[int, int, str]) -> tuple[str, str]:
    """``(status, detail)`` of job ``(seed, case, path)`` in this process (a Python error is that
    path's ``error``)."""
    seed, index, path = job
    try:
        return run_case(draw_case(seed, index), path)
    except Exception:  # a Python error is that path's error; the worker goes on
        return "error", traceback.format_exc(limit=1).strip().splitlines()[-1]


def make_worker() -> Worker:
    """A worker process for :func:`run_paths` (numpy and onnxruntime on one thread)."""
    return Worker(
        _job_handler,
        None,
        TIMEOUT,
        environment={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
        name="the process",
    )


def run_paths(
    worker: Worker, seed: int, index: int, paths: tuple[str, ...] = PATHS
) -> dict[str, tuple[str, str]]:
    """Each path's ``(status, detail)`` on case ``index`` of ``seed``, one job per path in
    ``worker``: a path that kills the process (or hangs) is a ``crash``, and the next path runs in a
    fresh process."""
    results: dict[str, tuple[str, str]] = {}
    for path in paths:
        result = worker.run((seed, index, path))
        results[path] = ("crash", result.detail) if isinstance(result, Crash) else tuple(result)
    return results


def fuzz(
    seed: int,
    cases: list[int],
    paths: tuple[str, ...] = PATHS,
    jobs: int = 2,
    progress: bool = False,
    on_result: Callable[[int, dict[str, tuple[str, str]]], None] | None = None,
) -> dict[int, dict[str, tuple[str, str]]]:
    """Run ``cases`` (indices) of ``seed`` through ``paths`` in ``jobs`` worker processes; return
    ``{case: {path: (status, detail)}}``. ``on_result(case, results)`` is called as each case
    completes."""
    pending: queue.Queue[int] = queue.Queue()
    for index in cases:
        pending.put(index)
    results: dict[int, dict[str, tuple[str, str]]] = {}
    lock = threading.Lock()
    start = time.monotonic()

    def work() -> None:
        slot = make_worker()
        try:
            while True:
                try:
                    index = pending.get_nowait()
                except queue.Empty:
                    return
                outcome = run_paths(slot, seed, index, paths)
                with lock:
                    results[index] = outcome
                    if on_result is not None:
                        on_result(index, outcome)
                    done = len(results)
                    if progress and (done % 500 == 0 or done == len(cases)):
                        failed = sum(
                            any(s in ("mismatch", "error", "crash") for s, _ in r.values())
                            for r in results.values()
                        )
                        print(
                            f"  {done}/{len(cases)} cases, {failed} with a failure, "
                            f"{time.monotonic() - start:.0f}s",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            slot.close()

    threads = [threading.Thread(target=work) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cases", type=int, default=300, metavar="N", help="number of cases (default: 300)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default: 0)")
    parser.add_argument(
        "--start", type=int, default=0, metavar="I", help="index of the first case (default: 0)"
    )
    parser.add_argument(
        "--case",
        type=int,
        action="append",
        metavar="I",
        help="replay case I of --seed (repeatable); prints its configuration",
    )
    parser.add_argument("--jobs", type=int, default=2, metavar="K", help="worker processes (default: 2)")
    parser.add_argument("--path", action="append", choices=PATHS, help="run only this path (repeatable)")
    parser.add_argument(
        "--log",
        metavar="PATH",
        help="append one JSON line per case as it completes (an interrupted run keeps what it did)",
    )
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="write a record of the run (onnx_masked_rnn.record: date, machine, versions; counts per "
        "path, failures), e.g. docs/results/fuzz.json, from which scripts/generate_docs.py writes the docs",
    )


def report(results: dict[int, dict[str, tuple[str, str]]], seed: int, paths: tuple[str, ...]) -> int:
    """Print the counts per path and a line per failure; return the number of failures."""
    counts = {p: Counter(results[i][p][0] for i in results if p in results[i]) for p in paths}
    reasons = {
        p: Counter(d for i in results for s, d in [results[i].get(p, ("", ""))] if s == "unsupported")
        for p in paths
    }
    print(f"fuzz: seed {seed}, {len(results)} cases")
    print(f"{'path':<22}" + "".join(f"{s:>12}" for s in STATUSES))
    for p in paths:
        print(f"{p:<22}" + "".join(f"{counts[p][s]:>12}" for s in STATUSES))
    for p in paths:
        for reason, n in reasons[p].items():
            print(f"unsupported  {p}: {n} x {reason}")
        overflowed = [i for i in sorted(results) if results[i].get(p, ("", ""))[1] == OVERFLOW]
        if overflowed:
            print(f"overflow     {p}: cases {', '.join(map(str, overflowed))}")
    for p in paths:
        n = sum(1 for i in results for s, d in [results[i].get(p, ("", ""))] if s == "agree" and d)
        if n:
            print(f"agree        {p}: {n} x only with an equally right result ({EQUALLY_RIGHT})")
    for index in sorted(results):
        for p in paths:
            status, detail = results[index].get(p, ("agree", ""))
            if status == "agree" and detail.endswith("[non-finite]"):
                print(f"AGREE*    {p}: case {index} ({draw_case(seed, index).summary()}): {detail}")
    failures = 0
    for index in sorted(results):
        for p in paths:
            status, detail = results[index].get(p, ("agree", ""))
            if status in ("mismatch", "error", "crash"):
                failures += 1
                print(f"{status.upper():<9} {p}: case {index} ({draw_case(seed, index).summary()}): {detail}")
    if failures:
        print(f"replay one: onnx-masked-rnn fuzz --seed {seed} --case INDEX")
    total = sum(sum(c.values()) for c in counts.values())
    print(f"{total - failures} passed, {failures} failed")
    return failures


def summary(results: dict[int, dict[str, tuple[str, str]]], seed: int, paths: tuple[str, ...]) -> dict:
    """The run as data: counts per path, agreements that needed an equally right result, the
    unsupported reasons and every failure."""
    outcomes = {p: [results[i][p] for i in sorted(results) if p in results[i]] for p in paths}
    return {
        "seed": seed,
        "cases": len(results),
        "first_case": min(results, default=None),
        "paths": list(paths),
        "statuses": list(STATUSES),
        "counts": {p: {s: sum(o[0] == s for o in outcomes[p]) for s in STATUSES} for p in paths},
        "equally_right": {p: sum(s == "agree" and bool(d) for s, d in outcomes[p]) for p in paths},
        "unsupported": {p: dict(Counter(d for s, d in outcomes[p] if s == "unsupported")) for p in paths},
        "failures": [
            {"case": i, "path": p, "status": results[i][p][0], "detail": results[i][p][1]}
            for i in sorted(results)
            for p in paths
            if results[i].get(p, ("agree", ""))[0] in ("mismatch", "error", "crash")
        ],
    }


def run(args: argparse.Namespace) -> int:
    if args.cases < 0 or args.jobs < 1 or args.start < 0:
        raise ValueError("--cases and --start must be non-negative, --jobs positive")
    paths = tuple(args.path) if args.path else PATHS
    indices = args.case or list(range(args.start, args.start + args.cases))
    if args.case:
        for index in args.case:
            print(f"case {index}: {draw_case(args.seed, index).describe()}")
    log = open(args.log, "a") if args.log else None  # noqa: SIM115 (closed below)

    def record(index: int, outcome: dict[str, tuple[str, str]]) -> None:
        if log is not None:
            log.write(json.dumps({"seed": args.seed, "case": index, "results": outcome}) + "\n")
            log.flush()

    recorded = measurement.start("fuzz")
    try:
        results = fuzz(args.seed, indices, paths, args.jobs, progress=len(indices) >= 1000, on_result=record)
    finally:
        if log is not None:
            log.close()
    failures = report(results, args.seed, paths)
    if args.json:
        measurement.write(measurement.finish(recorded, **summary(results, args.seed, paths)), args.json)
        print(f"wrote {args.json}")
    return 1 if failures else 0
