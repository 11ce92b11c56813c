"""What ``onnx-masked-rnn conformance`` prints: the table of outcomes per backend and variant with
the skip reasons and failures (:func:`report`), and the cases with what each covers (:func:`listing`,
``--list``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from onnx.backend.test.case.test_case import TestCase

from onnx_masked_rnn.conformance.outcomes import STATUSES, Outcome
from onnx_masked_rnn.conformance.suite import VARIANTS, describe_case, variant_of

__all__ = ["listing", "report"]


def _row(label: str, width: int, outcomes: Sequence[Outcome]) -> str:
    counts = Counter(o.status for o in outcomes)
    errors = [o.error for o in outcomes if o.status == "passed"]
    worst = f"{max(errors):9.1e}" if errors else f"{'-':>9}"
    seconds = sum(o.seconds for o in outcomes)
    row = f"{label:<{width}}" + "".join(f"  {counts[s]:>{max(6, len(s))}}" for s in STATUSES)
    return row + f"  {worst}  {seconds:>5.1f}s"


def report(
    results: dict[str, list[tuple[str, Outcome]]], known: dict[tuple[str, str], list[str]] | None = None
) -> str:
    """The table (a row per backend, then one per variant of the cases it ran, as
    ``docs/runtimes.md``'s: a column per outcome, the largest error among passed cases, the time),
    every unsupported reason with its count, and every failed case, with the defects that
    ``known`` (``(backend, case) -> defects``) lists for it."""
    known = known or {}
    labels = [f"  {v.label}" for v in VARIANTS.values()]
    width = max(len("backend"), *(len(b) for b in results), *(len(label) for label in labels))
    header = f"{'backend':<{width}}" + "".join(f"  {s:>{max(6, len(s))}}" for s in STATUSES)
    lines = [header + f"  {'max |err|':>9}  {'time':>6}"]
    for backend, outcomes in results.items():
        lines.append(_row(backend, width, [o for _, o in outcomes]))
        for name, variant in VARIANTS.items():
            chosen = [o for case, o in outcomes if variant_of(case) == name]
            if chosen:
                lines.append(_row(f"  {variant.label}", width, chosen))
    for backend, outcomes in results.items():
        reasons = Counter(o.detail for _, o in outcomes if o.verdict == "skipped")
        for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"skipped  {backend}: {count} x {reason}")
    for backend, outcomes in results.items():
        for name, outcome in outcomes:
            if outcome.verdict == "failed":
                defects = known.get((backend, name))
                listed = f" (known limitation: {', '.join(defects)})" if defects else ""
                lines.append(f"FAILED   {backend}: {name}: {outcome.status}: {outcome.detail}{listed}")
    return "\n".join(lines)


def listing(cases: Sequence[TestCase]) -> str:
    """``--list``: a row per case, what it covers (``suite.describe_case``) in aligned columns."""
    rows = [{"case": c.name, **describe_case(Path(c.model_dir))} for c in cases]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    widths = {k: max(len(k), *(len(row.get(k, "-")) for row in rows)) for k in columns}
    lines = ["  ".join(f"{k:<{widths[k]}}" for k in columns).rstrip()]
    lines += ["  ".join(f"{row.get(k, '-'):<{widths[k]}}" for k in columns).rstrip() for row in rows]
    return "\n".join(lines)
