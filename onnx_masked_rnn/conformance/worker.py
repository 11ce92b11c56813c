"""Each backend runs the cases in a process of its own, so a runtime that crashes or hangs on one
case costs that case only: the runner reports it ``crashed`` and starts a fresh process for the
next case.

:func:`run_cases` drives one :class:`Worker` per backend at the same time (the backends are
independent; a slow one does not hold the others up) and yields each result as it arrives.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onnx_masked_rnn.conformance.outcomes import Outcome

if TYPE_CHECKING:
    from onnx.backend.test.case.test_case import TestCase

__all__ = ["Worker", "run_cases"]


def _serve(conn: multiprocessing.connection.Connection, spec: str) -> None:
    """The worker process: resolve the backend, then run each case received until ``None``."""
    from onnx_masked_rnn.conformance.backends import resolve
    from onnx_masked_rnn.conformance.runner import run_case

    backend = resolve(spec)
    while (case := conn.recv()) is not None:
        conn.send(run_case(backend, case))


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


class Worker:
    """A child process running cases on the backend named ``spec`` (see ``backends.resolve``).

    ``submit(case)`` hands it one case; once :attr:`connection` is readable (or ``timeout``
    seconds have passed) ``result()`` returns the case's :class:`Outcome`: ``crashed`` when the
    process died or hung (it is then killed), after which the next ``submit`` starts a new one.
    """

    def __init__(self, spec: str, timeout: float) -> None:
        self.spec = spec
        self.timeout = timeout
        self._process: Any = None
        self.connection: multiprocessing.connection.Connection | None = None
        self._started = 0.0

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.spec), daemon=True)
        self._process.start()
        child.close()

    def submit(self, case: TestCase) -> None:
        if self._process is None or not self._process.is_alive():
            self._start()
        assert self.connection is not None
        self._started = time.monotonic()
        self.connection.send(case)

    @property
    def deadline(self) -> float:
        return self._started + self.timeout

    def result(self) -> Outcome:
        """The submitted case's outcome; call once the connection is readable or past the deadline."""
        assert self.connection is not None
        if self.connection.poll():
            try:
                return self.connection.recv()
            except (EOFError, ConnectionError):
                self._process.join(5)
                detail = f"the backend's process {_death(self._process.exitcode)}"
        else:
            detail = f"no result after {self.timeout:g} s: the backend's process hung and was killed"
        seconds = time.monotonic() - self._started
        self.close()
        return Outcome("crashed", detail, seconds=seconds)

    def close(self) -> None:
        if self._process is not None:
            if self._process.is_alive() and self.connection is not None:
                try:
                    self.connection.send(None)
                except (BrokenPipeError, OSError):
                    pass
                self._process.join(2)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
            self._process = None
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def run_cases(plan: Mapping[str, Sequence[TestCase]], timeout: float) -> Iterator[tuple[str, int, Outcome]]:
    """Run each backend's cases (``plan``: backend spec -> cases), one worker process per backend,
    all at once; yield ``(backend spec, case index, outcome)`` as results arrive (each backend's in
    case order)."""
    workers = {spec: Worker(spec, timeout) for spec in plan}
    position = dict.fromkeys(plan, 0)
    try:
        busy = {spec for spec, cases in plan.items() if cases}
        for spec in busy:
            workers[spec].submit(plan[spec][0])
        while busy:
            wait = max(0.0, min(workers[s].deadline for s in busy) - time.monotonic())
            by_connection = {workers[s].connection: s for s in busy}
            ready = multiprocessing.connection.wait(list(by_connection), timeout=wait)
            overdue = {s for s in busy if workers[s].deadline <= time.monotonic()}
            for spec in {by_connection[c] for c in ready} | overdue:
                yield spec, position[spec], workers[spec].result()
                position[spec] += 1
                if position[spec] < len(plan[spec]):
                    workers[spec].submit(plan[spec][position[spec]])
                else:
                    busy.discard(spec)
    finally:
        for worker in workers.values():
            worker.close()
