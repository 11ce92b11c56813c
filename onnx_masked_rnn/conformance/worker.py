"""Each backend runs the cases in a process of its own (:class:`onnx_masked_rnn._worker.Worker`),
so a runtime that crashes or hangs on one case costs that case only: the runner reports it
``crashed`` and starts a fresh process for the next case.

The backend's module is imported there too, once per backend and within the time limit: a module
that fails to import, raises, or hangs while it loads stops the run with one line naming it
(:func:`run_cases` raises ``ValueError``) before any case runs.

:func:`run_cases` drives one worker per backend at the same time (the backends are independent; a
slow one does not hold the others up) and yields each result as it arrives; :func:`run_plan` and
:func:`run_suite` collect them per backend, in case order.
"""

from __future__ import annotations

import multiprocessing.connection
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from onnx.backend.test.case.test_case import TestCase

from onnx_masked_rnn._worker import Crash, Worker
from onnx_masked_rnn.conformance.backends import BUILTIN, resolve
from onnx_masked_rnn.conformance.case import run_case
from onnx_masked_rnn.conformance.outcomes import Outcome

__all__ = ["backend_worker", "run_cases", "run_plan", "run_suite"]

_CHECK = "check"  # the first job of each worker: load the backend (answer: None, or why it did not)


def _backend_handler(
    argument: tuple[str, Sequence[re.Pattern[str]]],
) -> Callable[[TestCase | str], Outcome | str | None]:
    """In the worker process: the first job resolves the backend (importing its module) and checks
    that it runs on the CPU, within that job's time limit; each case then runs on it. The answer to
    the :data:`_CHECK` job is what went wrong loading it, or None."""
    spec, unsupported = argument
    loaded: list[Any] = []  # the backend, once resolved

    def load() -> str | None:
        try:
            backend = resolve(spec)
            if not backend.supports_device("CPU"):
                return f"--backend {spec!r} does not support device CPU"
        except ValueError as exc:
            return str(exc)
        except Exception as exc:  # supports_device itself failed
            first = (str(exc).strip().splitlines() or [""])[0]
            return f"--backend {spec!r}: supports_device failed: {type(exc).__name__}: {first}"
        loaded.append(backend)
        return None

    def handle(job: TestCase | str) -> Outcome | str | None:
        problem = None if loaded else load()
        if isinstance(job, str):
            return problem
        if problem:
            return Outcome("error", problem)
        return run_case(loaded[0], job, unsupported=unsupported)

    return handle


def backend_worker(spec: str, timeout: float, unsupported: Sequence[re.Pattern[str]] = ()) -> Worker:
    """A worker process running cases on the backend named ``spec`` (see ``backends.resolve``);
    errors matching ``unsupported`` are unsupported (``outcomes.classify_error``). Its first job
    in each process loads the backend."""
    return Worker(_backend_handler, (spec, tuple(unsupported)), timeout, name="the backend's process")


def _module_of(spec: str) -> str:
    """The module ``--backend spec`` imports."""
    if spec in BUILTIN:
        return getattr(BUILTIN[spec], "requires", None) or BUILTIN[spec].__module__
    return spec.partition(":")[0]


def _check(spec: str, worker: Worker, timeout: float) -> None:
    """Load the backend in its worker: ``ValueError`` in one line naming the module when that
    fails, kills the process or takes longer than ``timeout`` seconds."""
    result = worker.run(_CHECK)
    if isinstance(result, Crash):
        module = _module_of(spec)
        if result.detail.startswith("no result after"):
            raise ValueError(
                f"--backend {spec!r}: backend module {module!r} did not import within {timeout:g} s"
            )
        raise ValueError(f"--backend {spec!r}: {result.detail} while importing backend module {module!r}")
    if result:
        raise ValueError(result)


def _outcome(result: Outcome | Crash) -> Outcome:
    return Outcome("crashed", result.detail, seconds=result.seconds) if isinstance(result, Crash) else result


def run_cases(
    plan: Mapping[str, Sequence[TestCase]], timeout: float, unsupported: Sequence[re.Pattern[str]] = ()
) -> Iterator[tuple[str, int, Outcome]]:
    """Run each backend's cases (``plan``: backend spec -> cases), one worker process per backend,
    all at once; yield ``(backend spec, case index, outcome)`` as results arrive (each backend's in
    case order). First each backend is loaded in its worker (``ValueError`` when one does not)."""
    workers = {spec: backend_worker(spec, timeout, unsupported) for spec in plan}
    position = dict.fromkeys(plan, 0)
    try:
        for spec, worker in workers.items():
            _check(spec, worker, timeout)
        busy = {spec for spec, cases in plan.items() if cases}
        for spec in busy:
            workers[spec].submit(plan[spec][0])
        while busy:
            wait = max(0.0, min(workers[s].deadline for s in busy) - time.monotonic())
            by_connection = {workers[s].connection: s for s in busy if not workers[s].starting_failed}
            ready = multiprocessing.connection.wait(list(by_connection), timeout=wait)
            overdue = {s for s in busy if workers[s].deadline <= time.monotonic()}
            for spec in {by_connection[c] for c in ready} | overdue:
                result = workers[spec].result()
                yield spec, position[spec], _outcome(result)
                position[spec] += 1
                if position[spec] < len(plan[spec]):
                    if isinstance(result, Crash):  # a fresh process: load the backend outside the case's time
                        workers[spec].run(_CHECK)
                    workers[spec].submit(plan[spec][position[spec]])
                else:
                    busy.discard(spec)
    finally:
        for worker in workers.values():
            worker.close()


def _progress(enabled: bool, text: str) -> None:
    if enabled:
        sys.stderr.write("\r\033[K" + text[:120])
        sys.stderr.flush()


def run_plan(
    plan: dict[str, Sequence[TestCase]],
    timeout: float = 600.0,
    progress: bool = False,
    unsupported: Sequence[re.Pattern[str]] = (),
) -> dict[str, list[tuple[str, Outcome]]]:
    """Each backend's cases (``plan``: backend -> cases), each backend in a worker process of its
    own (:func:`run_cases`: ``ValueError`` when a backend does not load), all backends at once:
    ``{backend: [(case name, outcome), ...]}``. An error matching one of ``unsupported`` is
    unsupported. ``progress``: show the case running on stderr."""
    results: dict[str, list[Any]] = {spec: [None] * len(cases) for spec, cases in plan.items()}
    total, done = sum(len(cases) for cases in plan.values()), 0
    for spec, index, outcome in run_cases(plan, timeout, unsupported):
        name = plan[spec][index].name
        results[spec][index] = (name, outcome)
        done += 1
        _progress(progress, f"{done}/{total} {spec}: {name}")
    _progress(progress, "")
    return results


def run_suite(
    specs: Sequence[str],
    cases: Sequence[TestCase],
    timeout: float = 600.0,
    progress: bool = False,
    unsupported: Sequence[re.Pattern[str]] = (),
) -> dict[str, list[tuple[str, Outcome]]]:
    """Every case on every backend: ``{backend: [(case name, outcome), ...]}`` in case order."""
    return run_plan({spec: cases for spec in specs}, timeout, progress, unsupported)
