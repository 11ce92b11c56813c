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

_STARTUP_SECONDS = 300.0  # importing a runtime on a loaded machine


def _serve(conn: multiprocessing.connection.Connection, spec: str) -> None:
    """The worker process: resolve the backend, then run each case received until ``None``."""
    from onnx_masked_rnn.conformance.backends import resolve
    from onnx_masked_rnn.conformance.runner import run_case

    backend = resolve(spec)
    conn.send("ready")
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
        self._startup_failure: str | None = None

    def _start(self) -> str | None:
        """Start the process and wait until its backend is loaded (start-up does not count
        against a case's time limit); what went wrong when it died or hung doing so."""
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.spec), daemon=True)
        self._process.start()
        child.close()
        limit = max(self.timeout, _STARTUP_SECONDS)
        try:
            if self.connection.poll(limit) and self.connection.recv() == "ready":
                return None
        except (EOFError, ConnectionError):
            self._process.join(5)
            return f"the backend's process {_death(self._process.exitcode)} while starting"
        return f"the backend's process did not start within {limit:g} s"

    def submit(self, case: TestCase) -> None:
        self._startup_failure = None
        if self._process is None or not self._process.is_alive():
            self._startup_failure = self._start()
        self._started = time.monotonic()
        if self._startup_failure is None:
            assert self.connection is not None
            self.connection.send(case)

    @property
    def deadline(self) -> float:
        """When the submitted case counts as hung (at once when the process did not start)."""
        return self._started + (0.0 if self._startup_failure else self.timeout)

    def result(self) -> Outcome:
        """The submitted case's outcome; call once the connection is readable or past the deadline."""
        if self._startup_failure:
            detail = self._startup_failure
        else:
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
            by_connection = {workers[s].connection: s for s in busy if not workers[s]._startup_failure}
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
