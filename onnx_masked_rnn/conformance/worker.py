"""Each backend runs the cases in a process of its own (:class:`onnx_masked_rnn._worker.Worker`),
so a runtime that crashes or hangs on one case costs that case only: the runner reports it
``crashed`` and starts a fresh process for the next case.

:func:`run_cases` drives one worker per backend at the same time (the backends are independent; a
slow one does not hold the others up) and yields each result as it arrives.
"""

from __future__ import annotations

import functools
import multiprocessing.connection
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from onnx_masked_rnn._worker import Crash, Worker
from onnx_masked_rnn.conformance.outcomes import Outcome

if TYPE_CHECKING:
    from onnx.backend.test.case.test_case import TestCase

__all__ = ["backend_worker", "run_cases"]


def _backend_handler(spec: str) -> Callable[[TestCase], Outcome]:
    """In the worker process: resolve the backend once; each case then runs on it."""
    from onnx_masked_rnn.conformance.backends import resolve
    from onnx_masked_rnn.conformance.runner import run_case

    return functools.partial(run_case, resolve(spec))


def backend_worker(spec: str, timeout: float) -> Worker:
    """A worker process running cases on the backend named ``spec`` (see ``backends.resolve``)."""
    return Worker(_backend_handler, spec, timeout, name="the backend's process")


def _outcome(result: Outcome | Crash) -> Outcome:
    return Outcome("crashed", result.detail, seconds=result.seconds) if isinstance(result, Crash) else result


def run_cases(plan: Mapping[str, Sequence[TestCase]], timeout: float) -> Iterator[tuple[str, int, Outcome]]:
    """Run each backend's cases (``plan``: backend spec -> cases), one worker process per backend,
    all at once; yield ``(backend spec, case index, outcome)`` as results arrive (each backend's in
    case order)."""
    workers = {spec: backend_worker(spec, timeout) for spec in plan}
    position = dict.fromkeys(plan, 0)
    try:
        busy = {spec for spec, cases in plan.items() if cases}
        for spec in busy:
            workers[spec].submit(plan[spec][0])
        while busy:
            wait = max(0.0, min(workers[s].deadline for s in busy) - time.monotonic())
            by_connection = {workers[s].connection: s for s in busy if not workers[s].starting_failed}
            ready = multiprocessing.connection.wait(list(by_connection), timeout=wait)
            overdue = {s for s in busy if workers[s].deadline <= time.monotonic()}
            for spec in {by_connection[c] for c in ready} | overdue:
                yield spec, position[spec], _outcome(workers[spec].result())
                position[spec] += 1
                if position[spec] < len(plan[spec]):
                    workers[spec].submit(plan[spec][position[spec]])
                else:
                    busy.discard(spec)
    finally:
        for worker in workers.values():
            worker.close()
