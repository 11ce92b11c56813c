"""Configurations of the three ops run on the native kernel and compared with the numpy reference,
each in a child process (``_worker.Worker``: a kernel that crashes fails its job, not pytest).

A job is a :class:`Job`; :func:`run_job` builds its inputs (``testing.random_inputs``), a one-node
model with the attributes as given (omitted ones take the op's defaults), runs it in
``kernel.session`` and returns what differs from ``reference`` beyond :data:`TOLERANCE`, or None.
bfloat16, which onnxruntime's Python API cannot hand over as numpy arrays, goes in and out as
``uint16`` views bound with ``io_binding``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, reference, testing
from onnx_masked_rnn.attributes import OP_SPECS, parse_attributes

# dtype name -> (rtol, atol): float32 and float64 as the conformance suite; float16 and bfloat16
# are computed in float32 by both, so they differ by a rounding of the result (bfloat16: 2^-8).
TOLERANCE = {
    "float64": (1e-10, 1e-12),
    "float32": (1e-5, 1e-6),
    "float16": (5e-3, 5e-3),
    "bfloat16": (2e-2, 2e-2),
}
DTYPES = {
    "float64": np.float64,
    "float32": np.float32,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
}


@dataclasses.dataclass(frozen=True)
class Job:
    """One configuration: ``op`` is LSTM, GRU or RNN; ``attributes`` the node's, by ONNX name."""

    op: str
    attributes: tuple[tuple[str, Any], ...] = ()
    shape: tuple[int, int, int, int] = (5, 3, 4, 6)  # T, N, I, H
    dtype: str = "float32"
    present: tuple[str, ...] = ("B", "initial_h", "initial_c", "P", "mask")
    mask_kind: str = "holes"
    sequence_lens: str = "none"  # "none", "random" (1..T), "with_zero" (row 0 has length 0)
    outputs: tuple[str, ...] | None = None  # the node's outputs ("" omitted); None: all
    nan_at_masked_steps: bool = False
    weight_scale: float = 1.0
    seed: int = 0

    @property
    def op_type(self) -> str:
        return f"Masked{self.op}"

    def label(self) -> str:
        parts = [self.op, self.dtype, "x".join(map(str, self.shape)), self.mask_kind]
        parts += [f"{k}={v}" for k, v in self.attributes]
        if self.sequence_lens != "none":
            parts.append(f"sequence_lens={self.sequence_lens}")
        if self.outputs is not None:
            parts.append(f"outputs={list(self.outputs)}")
        if self.nan_at_masked_steps:
            parts.append("NaN at masked steps")
        return " ".join(parts)


def job(op: str, **fields: Any) -> Job:
    """A :class:`Job` with ``attributes`` given as a dict (hidden_size added from the shape)."""
    attributes = dict(fields.pop("attributes", {}))
    return Job(op, tuple(sorted(attributes.items())), **fields)


def inputs_of(job: Job) -> dict[str, np.ndarray]:
    T, N, I, H = job.shape
    attrs = parse_attributes(job.op_type, hidden_size=H, **dict(job.attributes))
    rng = np.random.default_rng(job.seed)
    lens = None
    if job.sequence_lens != "none":
        lens = rng.integers(1 if T else 0, T + 1, size=N)
        if job.sequence_lens == "with_zero" and N:
            lens[0] = 0
    values = testing.random_inputs(
        attrs, T, N, I, H, rng=rng, dtype=DTYPES[job.dtype], present=job.present, mask_kind=job.mask_kind
    )
    if lens is not None:
        values["sequence_lens"] = lens.astype(np.int32)
    for name in ("W", "R"):
        values[name] = (values[name].astype(np.float32) * job.weight_scale).astype(DTYPES[job.dtype])
    if job.nan_at_masked_steps:
        mask = values.get("mask", np.ones((T, N), bool).T if attrs.layout else np.ones((T, N), bool))
        if lens is not None:
            steps = np.arange(T)[:, None] < lens[None, :]
            mask = mask & (steps.T if attrs.layout else steps)
        X = values["X"].astype(np.float32)
        X[~mask] = np.nan
        values["X"] = X.astype(DTYPES[job.dtype])
    return values


def model_of(job: Job, values: dict[str, np.ndarray], dynamic: bool = False) -> onnx.ModelProto:
    """The one-node model; ``dynamic``: every graph input of unknown shape, even rank (so that
    onnxruntime hands any input to the kernel)."""
    spec = OP_SPECS[job.op_type]
    attributes = {"hidden_size": job.shape[3], **dict(job.attributes)}
    last = max(spec.inputs.index(n) for n in values)
    node_inputs = [n if n in values else "" for n in spec.inputs[: last + 1]]
    outputs = list(spec.outputs) if job.outputs is None else list(job.outputs)
    node = helper.make_node(job.op_type, node_inputs, outputs, name=job.op_type, domain=DOMAIN, **attributes)
    elem = helper.np_dtype_to_tensor_dtype(values["X"].dtype)

    def info(name: str, array: np.ndarray | None) -> onnx.ValueInfoProto:
        if array is None:
            return helper.make_tensor_value_info(name, elem, None)
        shape = None if dynamic else list(array.shape)
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(array.dtype), shape)

    graph = helper.make_graph(
        [node],
        "kernel_case",
        [info(n, values[n]) for n in node_inputs if n],
        [info(o, None) for o in outputs if o],
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(DOMAIN, OPSET_VERSION)],
        ir_version=10,
    )


def expected_of(job: Job, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The reference's outputs the node asks for, in order."""
    spec = OP_SPECS[job.op_type]
    function = reference.FUNCTIONS[job.op_type]
    attributes = {"hidden_size": job.shape[3], **dict(job.attributes)}
    with np.errstate(all="ignore"):
        results = function(**values, **attributes)
    outputs = list(spec.outputs) if job.outputs is None else list(job.outputs)
    return [r for r, name in zip(results, outputs) if name]


def run(session: Any, feeds: dict[str, np.ndarray], like: list[np.ndarray]) -> list[np.ndarray]:
    """``session.run`` for any float type: outputs of the dtypes and shapes of ``like``."""
    import onnxruntime as ort

    if all(v.dtype != ml_dtypes.bfloat16 for v in [*feeds.values(), *like]):
        return session.run(None, feeds)
    binding = session.io_binding()
    for name, value in feeds.items():
        element = helper.np_dtype_to_tensor_dtype(value.dtype)
        raw = value.view(np.uint16) if value.dtype == ml_dtypes.bfloat16 else value
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, element))
    results = [np.zeros(r.shape, r.dtype) for r in like]
    for output, result in zip(session.get_outputs(), results):
        element = helper.np_dtype_to_tensor_dtype(result.dtype)
        raw = result.view(np.uint16) if result.dtype == ml_dtypes.bfloat16 else result
        binding.bind_ortvalue_output(
            output.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, element)
        )
    session.run_with_iobinding(binding)
    return results


def kernel_session(model: onnx.ModelProto, threads: int = 1) -> Any:
    """``kernel.session`` on the CPU; a fallback to ``inline`` is an error."""
    import onnxruntime as ort

    from onnx_masked_rnn import kernel

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", kernel.KernelFallbackWarning)
        return kernel.session(model, options, providers=["CPUExecutionProvider"])


def exact_of(job: Job, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The reference computed in float64 from the same inputs."""
    wide = {
        k: v.astype(np.float64) if v.dtype.kind == "f" or v.dtype == ml_dtypes.bfloat16 else v
        for k, v in values.items()
    }
    return expected_of(job, wide)


def differences(
    actual: list[np.ndarray], expected: list[np.ndarray], dtype: str, exact: list[np.ndarray] | None = None
) -> str | None:
    """What differs from ``expected`` beyond the dtype's tolerance (NaN equal to NaN), or None.
    Given the ``exact`` result (float64), an element also agrees when it is no farther from it
    than the reference is (plus the tolerance): unbounded activations make some recurrences grow
    until float32 keeps few digits, and then two right implementations differ by more."""
    rtol, atol = TOLERANCE[dtype]
    if len(actual) != len(expected):
        return f"{len(actual)} outputs, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        if a.shape != e.shape or a.dtype != e.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
        wide, ref = a.astype(np.float64), e.astype(np.float64)
        bad = ~np.isclose(wide, ref, rtol=rtol, atol=atol, equal_nan=True)
        if exact is not None and bad.any():
            with np.errstate(invalid="ignore"):
                own = np.abs(ref - exact[i])
                bad &= ~(np.abs(wide - exact[i]) <= own + atol + rtol * np.abs(exact[i]))
        if bad.any():
            where = tuple(int(j) for j in np.argwhere(bad)[0])
            return (
                f"output {i} at {list(where)}: {a[where]} vs reference {e[where]} ({int(bad.sum())} differ)"
            )
    return None


def run_job(job: Job) -> str | None:
    """In the child: what differs from the reference, or an exception's first line, or None."""
    try:
        values = inputs_of(job)
        expected = expected_of(job, values)
        session = kernel_session(model_of(job, values))
        with np.errstate(all="ignore"):
            actual = run(session, values, expected)
            exact = exact_of(job, values)
    except Exception as error:
        first = (str(error).strip().splitlines() or [""])[0]
        return f"{type(error).__name__}: {first[:400]}"
    return differences(actual, expected, job.dtype, exact)


def bad_inputs(job: Job) -> dict[str, tuple[str, np.ndarray]]:
    """Inputs the kernel must refuse at run time, by label: (input name, value)."""
    values = inputs_of(job)
    mask, lens = values["mask"], values["sequence_lens"]
    T = job.shape[0]
    return {
        "mask transposed": ("mask", mask.T.copy()),
        "mask of rank 1": ("mask", mask[0].copy()),
        "mask one step short": ("mask", mask[:-1].copy()),
        "mask of rank 3": ("mask", mask[..., None].copy()),
        "sequence_lens above seq_length": ("sequence_lens", np.where(np.arange(len(lens)) == 1, T + 1, lens)),
        "sequence_lens negative": ("sequence_lens", np.where(np.arange(len(lens)) == 0, -1, lens)),
        "sequence_lens one row short": ("sequence_lens", lens[:-1].copy()),
    }


def run_errors(job: Job) -> dict[str, str]:
    """In the child: for each of :func:`bad_inputs`, the exception's class name and message (or
    "no error"), then whether the same session still gives the reference's result ("after")."""
    values = inputs_of(job)
    session = kernel_session(model_of(job, values, dynamic=True))
    found = {}
    for label, (name, value) in bad_inputs(job).items():
        try:
            session.run(None, {**values, name: value.astype(values[name].dtype)})
        except Exception as error:
            found[label] = f"{type(error).__name__}: {error}"
        else:
            found[label] = "no error"
    found["after"] = (
        differences(run(session, values, expected_of(job, values)), expected_of(job, values), job.dtype) or ""
    )
    return found


def thread_counts_agree(job: Job, threads: int = 2) -> str | None:
    """The kernel on 1 and on ``threads`` intra-op threads: what differs between them (they must
    agree bit for bit: a step's rows are split between threads, never a row's sums) or from the
    reference, or None."""
    values = inputs_of(job)
    expected = expected_of(job, values)
    model = model_of(job, values)
    one, many = (run(kernel_session(model, threads=k), values, expected) for k in (1, threads))
    for k, (x, y) in enumerate(zip(one, many)):
        if x.tobytes() != y.tobytes():
            return f"output {k}: {threads} threads differ from 1"
    return differences(many, expected, job.dtype)


def concurrent_runs(job: Job, threads: int, repeats: int, intra_op_threads: int) -> str | None:
    """In the child: one session run from ``threads`` Python threads at once, each on inputs of
    its own (``repeats`` times), against the same runs one at a time: what differs, or None."""
    from concurrent.futures import ThreadPoolExecutor

    feeds = [inputs_of(dataclasses.replace(job, seed=job.seed + i)) for i in range(threads)]
    session = kernel_session(model_of(job, feeds[0]), threads=intra_op_threads)
    alone = [session.run(None, f) for f in feeds]
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            together = list(pool.map(lambda f: session.run(None, f), feeds))
            for i, (a, b) in enumerate(zip(together, alone)):
                for k, (x, y) in enumerate(zip(a, b)):
                    if not np.array_equal(x, y, equal_nan=True):
                        return f"thread {i}, output {k}: differs from the same run alone"
    return None


def _handle(job: Any) -> Any:
    if isinstance(job, Job):
        return run_job(job)
    name, *arguments = job
    handlers = {
        "run_errors": run_errors,
        "concurrent_runs": concurrent_runs,
        "thread_counts_agree": thread_counts_agree,
    }
    return handlers[name](*arguments)


def setup(_: Any) -> Any:
    """The :class:`~onnx_masked_rnn._worker.Worker` handler (run in the child): a :class:`Job`
    gives :func:`run_job`'s result; ``("run_errors", job)`` and ``("concurrent_runs", job, ...)``
    those functions'."""
    return _handle
