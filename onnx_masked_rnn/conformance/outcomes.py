"""What one conformance case did on one backend, and how a runtime's error is classified.

Five outcomes, two of them the runner's ``skipped`` and three its ``failed``:

- ``passed``: every output within the case's ``rtol``/``atol`` (onnx's backend-test comparison);
- ``wrong``: the backend ran the case and returned wrong numbers, shapes, types or output count;
- ``error``: the backend raised an error that does not say it lacks an op or type (it rejected a
  valid model, or failed while running it);
- ``crashed``: the backend's process died (a signal, an abort) or hung past the time limit;
- ``unsupported``: the backend declined the case (``unittest.SkipTest``, ``is_compatible()`` False)
  or its error says it has no implementation of an op, a type or an input form the case uses
  (:data:`UNSUPPORTED`, matched against the error text of any backend, built in or not, and the
  patterns ``conformance --unsupported REGEX`` adds for a runtime the runner does not know).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "FAILED",
    "ORT_NO_FLOAT64_KERNEL",
    "SKIPPED",
    "STATUSES",
    "UNSUPPORTED",
    "Outcome",
    "classify_error",
    "describe_mismatch",
    "summarize_error",
]

STATUSES = ("passed", "wrong", "error", "crashed", "unsupported")
FAILED = ("wrong", "error", "crashed")
SKIPPED = ("unsupported",)

# Runtime error messages that say the runtime lacks an op, a type or an input form, each with the
# reason the report prints (``{0}``, ``{1}``: the pattern's groups). Each was read off the runtime's
# own message for a case of the suite; an error that matches none of them is an ``error``.
UNSUPPORTED: list[tuple[re.Pattern[str], str]] = [
    # onnxruntime: no CPU kernel registered for the node's (op, version, types)
    (
        re.compile(r"Could not find an implementation for (\w+)\(\d+\) node"),
        "onnxruntime has no kernel for {0} with these types",
    ),
    # onnxruntime's CPU LSTM/GRU kernels are registered for double but refuse it when run
    (
        re.compile(r"(\w+) operator does not support (\w+) yet"),
        "onnxruntime's {0} kernel does not support {1}",
    ),
    # OpenVINO's ONNX frontend: an op it cannot convert (a custom domain: no local-function support)
    (
        re.compile(r"No conversion rule found for operations: ([\w.]+)"),
        "OpenVINO's ONNX frontend has no conversion for {0}",
    ),
    # tract: an op it does not implement (a custom domain: no local-function support)
    (re.compile(r"Unimplemented\((\w+)\)"), "tract has no implementation of {0}"),
    # tract: an op without a kernel for an element type
    (re.compile(r"(\w+) does not support (F64|F16|I64|I32|Bool)\b"), "tract's {0} does not support {1}"),
    # OpenVINO's LSTM/GRU/RNN: an activation it does not implement
    (
        re.compile(r"Unknown activation function: (\w+)"),
        "OpenVINO's LSTM/GRU/RNN have no activation {0}",
    ),
    (
        re.compile(r"RNNCellDecomposition.*Unsupported activation function", re.S),
        "OpenVINO's RNN cell lacks an activation this case uses",
    ),
    # tract's LSTM/GRU/RNN accept sequence_lens only as a constant
    (
        re.compile(r"Non constant seq_len is not supported"),
        "tract's LSTM/GRU/RNN accept sequence_lens only as a constant",
    ),
]

# The two above, narrowed to onnxruntime's CPU LSTM/GRU/RNN, which have no float64 kernel (the only
# unsupported outcome onnxruntime has on the suite; tests/test_bodies.py lets exactly these through).
ORT_NO_FLOAT64_KERNEL = re.compile(
    r"(LSTM|GRU|RNN) operator does not support double|Could not find an implementation for (LSTM|GRU|RNN)\("
)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One case on one backend: ``status`` (one of :data:`STATUSES`); ``detail`` the reason it
    was unsupported or what went wrong; ``error`` the largest absolute difference from the
    expected outputs (NaN when nothing was compared); ``seconds`` the time it took."""

    status: str
    detail: str = ""
    error: float = float("nan")
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        """``passed``, ``failed`` or ``skipped``: what the runner's final line counts it as."""
        return "failed" if self.status in FAILED else "skipped" if self.status in SKIPPED else "passed"


def summarize_error(exc: BaseException) -> str:
    """The exception as one line: its type and message, without source locations of the runtime
    (``Exception from src/...``, ``Check ... failed at ...``) or a Rust backtrace."""
    text = str(exc).split("Stack backtrace:")[0]
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [
        ln
        for ln in lines
        if ln and not re.match(r"(Exception from src/\S+:\d+:|Check '.*' failed at \S+:\d+:)$", ln)
    ]
    message = " | ".join(lines)
    return f"{type(exc).__name__}: {message[:600]}"


def classify_error(exc: BaseException, unsupported: Sequence[re.Pattern[str]] = ()) -> Outcome:
    """An exception raised while preparing or running a case: ``unsupported`` when its text says
    the runtime lacks an op, type or input form (one of ``unsupported``, the reason then the text
    it matched; or :data:`UNSUPPORTED`), else ``error``."""
    text = str(exc)
    for pattern in unsupported:
        match = pattern.search(text)
        if match:
            matched = " ".join(match.group(0).split())[:200]
            return Outcome("unsupported", f"matches --unsupported {pattern.pattern!r}: {matched}")
    for pattern, reason in UNSUPPORTED:
        match = pattern.search(text)
        if match:
            return Outcome("unsupported", reason.format(*match.groups()))
    return Outcome("error", summarize_error(exc))


# The axes of an LSTM/GRU/RNN output by its rank (Y; Y_h, Y_c) and the op's layout attribute.
_AXES = {
    (4, 0): ("step", "direction", "row", "hidden"),
    (4, 1): ("row", "step", "direction", "hidden"),
    (3, 0): ("direction", "row", "hidden"),
    (3, 1): ("row", "direction", "hidden"),
}
# The order in which "first" is read: earliest step, then row, then direction, then hidden unit.
_FIRST = ("step", "row", "direction", "hidden")


def _first_difference(off: Any, layout: int | None) -> tuple[tuple[int, ...], str]:
    """The index of the first element that differs and where that is, e.g. ``step 1, row 0,
    direction 0, hidden 2`` when ``layout`` (0 or 1) says what the axes are, else the index."""
    axes = _AXES.get((off.ndim, layout))
    if axes is None:
        index = tuple(int(i) for i in np.argwhere(off)[0])
        return index, f"index {list(index)}"
    order = [axes.index(a) for a in _FIRST if a in axes]
    first = np.argwhere(off.transpose(order))[0]
    position = [0] * off.ndim
    for axis, value in zip(order, first):
        position[axis] = int(value)
    return tuple(position), ", ".join(f"{axes[a]} {position[a]}" for a in order)


def describe_mismatch(
    expected: list[Any],
    outputs: list[Any],
    rtol: float,
    atol: float,
    names: Sequence[str] = (),
    layout: int | None = None,
) -> str:
    """Which outputs differ from the expected ones beyond ``atol + rtol * |expected|`` (NaN only
    where expected), and by how much, in one line; for the first output that differs, where its
    first differing element is (the earliest step, then row, when ``layout``, the masked op's
    attribute, says which axes those are) and its expected and actual values. ``names``: the
    outputs' names."""
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs, expected {len(expected)}"
    parts = []
    located = False
    for i, (out, ref) in enumerate(zip(outputs, expected)):
        label = f"output {i} ({names[i]})" if i < len(names) else f"output {i}"
        if out.shape != ref.shape or out.dtype != ref.dtype:
            parts.append(f"{label} is {out.dtype}{list(out.shape)}, expected {ref.dtype}{list(ref.shape)}")
            continue
        a, b = out.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore"):
            off = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
            diff = np.where(off & ~np.isnan(a) & ~np.isnan(b), np.abs(a - b), 0.0)
        if off.any():
            part = f"{label}: {int(off.sum())}/{off.size} elements off, max |err| {diff.max():.2g}"
            if not located:
                index, where = _first_difference(off, layout)
                part += f", first at {where}: expected {ref[index].item():.9g}, got {out[index].item():.9g}"
                located = True
            parts.append(part)
    return "; ".join(parts) or "outputs differ"
