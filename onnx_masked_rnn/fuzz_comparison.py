"""The differential fuzz's comparison rule: when a path's result agrees with the numpy reference's.

Each element is compared with ``numpy.isclose`` at :data:`TOLERANCE` for the case's dtype. An
element that differs also agrees where it matches a result as right as the reference's
(:data:`EQUALLY_RIGHT`): the exact result (the reference in float64) rounded to the case's dtype;
for float16, the reference computed in float16 at every operation (ONNX does not say where a
float16 computation rounds); or any value no farther from the exact result than the tolerance plus
the larger of the element's sensitivity (:func:`sensitivity`: every input moved by one ulp of the
dtype) and the reference's own (finite) distance from it. With large weights and unbounded
activations a recurrence can amplify a rounding a thousandfold, so that two correct
implementations (one using a fast ``tanh``, or summing in another order) differ by more than the
tolerance, and the formulas evaluated in the dtype can lose every digit to cancellation. So a
float32 overflow to ±inf agrees where the reference or the exact result has that infinity, a NaN
where the reference is NaN too. A node whose exact result exceeds the dtype's range (the
recurrence overflows) has no right answer in that dtype from there on, and implementations
overflow differently (±inf, NaN, or the largest finite value): a path that still differs there is
:data:`OVERFLOW` (unsupported).

The reference is given as a function ``reference(feeds, compute_dtype=None)`` returning the
outputs in order (``compute_dtype`` as ``onnx_masked_rnn.reference.masked_lstm``'s).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

__all__ = [
    "EQUALLY_RIGHT",
    "OVERFLOW",
    "PERTURBATIONS",
    "TOLERANCE",
    "Reference",
    "compare",
    "differing_outputs",
    "differs_only_where_overflowed",
    "judge",
    "sensitivity",
]

Reference = Callable[..., list[np.ndarray]]
"""``reference(feeds, compute_dtype=None) -> outputs``: the reference's result for ``feeds``."""

# dtype name -> (rtol, atol). float16: the reference rounds once from float32, onnxruntime at every
# step (the conformance suite's 5e-3 at magnitude 1, with room for larger weights).
TOLERANCE = {"float64": (1e-9, 1e-10), "float32": (1e-4, 1e-5), "float16": (1e-2, 1e-2)}
OVERFLOW = (
    "the exact result exceeds the dtype's range (the recurrence overflows: no value is right, and "
    "implementations overflow differently)"
)
EQUALLY_RIGHT = "the exact result, float16 rounding, or as near it as the sensitivity or the reference"
PERTURBATIONS = 4  # random one-ulp moves of the inputs that measure each element's sensitivity


def differing_outputs(
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    dtype: np.dtype,
    *also: Sequence[np.ndarray],
    band: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> dict[int, str]:
    """What differs in each output of ``actual`` that is not close to ``expected``, to the same
    element of one of ``also`` (equally right results), or to ``band = (center, width)`` within
    ``width`` more than the tolerance (the exact result and its :func:`sensitivity`), by output
    index (index -1 when the output counts differ): the first differing element and how many."""
    rtol, atol = TOLERANCE[dtype.name]
    if len(actual) != len(expected):
        return {-1: f"{len(actual)} outputs, expected {len(expected)}"}
    differing = {}
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        if a.shape != e.shape or a.dtype != e.dtype:
            differing[i] = f"output {i}: {a.dtype}{list(a.shape)}, expected {e.dtype}{list(e.shape)}"
            continue
        wide = a.astype(np.float64)
        bad = ~np.isclose(wide, e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        for other in also:
            bad &= ~np.isclose(wide, other[i].astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        if band is not None:
            center, width = band[0][i], band[1][i]
            with np.errstate(invalid="ignore"):
                bad &= ~(np.abs(wide - center) <= atol + rtol * np.abs(center) + width)
        if bad.any():
            with np.errstate(all="ignore"):
                diff = np.abs(wide - e.astype(np.float64))
            where = tuple(int(j) for j in np.argwhere(bad)[0])
            differing[i] = (
                f"output {i} at {list(where)}: {a[where]!r} vs reference {e[where]!r} "
                f"({int(bad.sum())} of {a.size} differ, max |diff| {np.nanmax(np.where(bad, diff, 0)):.3g})"
                + ("" if np.isfinite(a[bad]).all() and np.isfinite(e[bad]).all() else " [non-finite]")
            )
    return differing


def compare(
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    dtype: np.dtype,
    *also: Sequence[np.ndarray],
    band: tuple[Sequence[np.ndarray], Sequence[np.ndarray]] | None = None,
) -> str | None:
    """``None`` when :func:`differing_outputs` finds nothing; otherwise what differs in the first
    output that does."""
    differing = differing_outputs(actual, expected, dtype, *also, band=band)
    return next(iter(differing.values()), None)


def sensitivity(
    reference: Reference, feeds: Mapping[str, np.ndarray], rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The exact result (the reference in float64) and, per element, the most it moves over
    :data:`PERTURBATIONS` evaluations whose floating-point inputs each move by one ulp of the
    dtype of ``X`` (relative machine epsilon, random sign, drawn from ``rng``). A result within
    that of the exact one is what exact arithmetic gives for inputs within a rounding of the
    case's: right to the precision the dtype can resolve."""
    eps = float(np.finfo(feeds["X"].dtype).eps)
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feeds.items()}
    with np.errstate(all="ignore"):
        exact = reference(wide)
        width = [np.zeros_like(e) for e in exact]
        for _ in range(PERTURBATIONS):
            moved = {
                k: v * (1.0 + eps * rng.choice([-1.0, 1.0], size=v.shape)) if v.dtype.kind == "f" else v
                for k, v in wide.items()
            }
            for w, m, e in zip(width, reference(moved), exact):
                np.fmax(w, np.abs(m - e), out=w)
    return exact, width


def differs_only_where_overflowed(
    node_of: Sequence[int], differing: set[int], rounded: Sequence[np.ndarray]
) -> bool:
    """Every node with a differing output (``differing``: output indices; ``node_of``: the node
    of each output) has an output whose exact result (``rounded`` to the dtype) exceeds the
    dtype's range; another node's overflow does not count."""
    overflowed = {node_of[i] for i, e in enumerate(rounded) if not np.isfinite(e).all()}
    return {node_of[i] for i in differing} <= overflowed


def judge(
    actual: Sequence[np.ndarray],
    expected: Sequence[np.ndarray],
    reference: Reference,
    feeds: Mapping[str, np.ndarray],
    node_of: Sequence[int],
    rng: np.random.Generator,
) -> tuple[str, str]:
    """``(status, detail)`` of a path's outputs ``actual`` for ``feeds``, whose reference result is
    ``expected``: ``agree`` (detail: what differed from the reference when it took an equally
    right result), ``unsupported`` (:data:`OVERFLOW`) or ``mismatch`` (what differs). ``node_of``:
    the node of each output; ``rng`` draws the :func:`sensitivity` perturbations."""
    dtype = feeds["X"].dtype
    differs = compare(actual, expected, dtype)
    if differs is None:
        return "agree", ""
    exact, width = sensitivity(reference, feeds, rng)
    with np.errstate(invalid="ignore"):  # no farther from the exact result than the reference itself
        own = [np.abs(e.astype(np.float64) - x) for e, x in zip(expected, exact)]
        width = [np.fmax(w, np.where(np.isfinite(o), o, 0.0)) for w, o in zip(width, own)]
    with np.errstate(over="ignore"):
        rounded = [e.astype(dtype) for e in exact]
    others = [rounded]
    if dtype == np.float16:
        with np.errstate(all="ignore"):
            others.append(reference(feeds, compute_dtype=np.float16))
    differing = differing_outputs(actual, expected, dtype, *others, band=(exact, width))
    if not differing:  # it needed an equally right result: keep what differed from the reference
        return "agree", differs
    if -1 not in differing and differs_only_where_overflowed(node_of, set(differing), rounded):
        return "unsupported", OVERFLOW
    return "mismatch", next(iter(differing.values()))
