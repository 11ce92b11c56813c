"""A job runner in a child process of its own, so that a runtime which crashes or hangs on one job
costs that job only.

:class:`Worker` serves the conformance runner (one per backend, ``conformance/worker.py``) and the
differential fuzz (one per job slot, ``fuzz.py``): ``setup(argument)`` runs once in the child and
returns the handler that each job is handed to. A job whose process dies or does not answer in
``timeout`` seconds gives a :class:`Crash`; the next job starts a fresh process.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Crash", "Worker"]

STARTUP_SECONDS = 300.0  # importing a runtime on a loaded machine
_ENVIRONMENT = threading.Lock()  # a child takes os.environ as it is when it starts


@dataclasses.dataclass(frozen=True)
class Crash:
    """A job that killed its process or hung (``detail`` says which) after ``seconds``."""

    detail: str
    seconds: float


def _serve(
    conn: multiprocessing.connection.Connection, setup: Callable[[Any], Callable], argument: Any
) -> None:
    handle = setup(argument)
    conn.send("ready")
    while (job := conn.recv()) is not None:
        conn.send(handle(job))


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with status {exitcode}"


class Worker:
    """A child process that runs ``setup(argument)(job)`` for each submitted job.

    ``setup`` must be a module-level function (the child is spawned, not forked: a runtime's
    threads do not survive a fork). ``environment`` is added to the child's environment (e.g.
    ``OMP_NUM_THREADS``, read when a library loads). ``name`` is how messages call the process.
    ``submit(job)`` hands it one job; once :attr:`connection` is readable or :attr:`deadline` has
    passed, ``result()`` returns the handler's value, or a :class:`Crash` after which the process
    is gone. :meth:`run` does both.
    """

    def __init__(
        self,
        setup: Callable[[Any], Callable[[Any], Any]],
        argument: Any,
        timeout: float,
        *,
        environment: Mapping[str, str] | None = None,
        name: str = "the worker process",
    ) -> None:
        self.setup, self.argument, self.timeout = setup, argument, timeout
        self.environment = dict(environment or {})
        self.name = name
        self._process: Any = None
        self.connection: multiprocessing.connection.Connection | None = None
        self._started = 0.0
        self._startup_failure: str | None = None

    def _start(self) -> str | None:
        """Start the process and wait until ``setup`` has run (start-up does not count against a
        job's time limit); what went wrong when it died or hung doing so."""
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.setup, self.argument), daemon=True)
        with _ENVIRONMENT:
            saved = {k: os.environ.get(k) for k in self.environment}
            os.environ.update(self.environment)
            try:
                self._process.start()
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        child.close()
        limit = max(self.timeout, STARTUP_SECONDS)
        try:
            if self.connection.poll(limit) and self.connection.recv() == "ready":
                return None
        except (EOFError, ConnectionError):
            self._process.join(5)
            return f"{self.name} {_death(self._process.exitcode)} while starting"
        return f"{self.name} did not start within {limit:g} s"

    def submit(self, job: Any) -> None:
        self._startup_failure = None
        if self._process is None or not self._process.is_alive():
            self._startup_failure = self._start()
        self._started = time.monotonic()
        if self._startup_failure is None:
            assert self.connection is not None
            self.connection.send(job)

    @property
    def starting_failed(self) -> bool:
        """The submitted job has no process to run it (its :meth:`result` is a :class:`Crash`)."""
        return self._startup_failure is not None

    @property
    def deadline(self) -> float:
        """When the submitted job counts as hung (at once when the process did not start)."""
        return self._started + (0.0 if self._startup_failure else self.timeout)

    def result(self) -> Any:
        """The submitted job's result; call once the connection is readable or past the deadline."""
        if self._startup_failure:
            detail = self._startup_failure
        else:
            assert self.connection is not None
            if self.connection.poll():
                try:
                    return self.connection.recv()
                except (EOFError, ConnectionError):
                    self._process.join(5)
                    detail = f"{self.name} {_death(self._process.exitcode)}"
            else:
                detail = f"no result after {self.timeout:g} s: {self.name} hung and was killed"
        seconds = time.monotonic() - self._started
        self.close()
        return Crash(detail, seconds)

    def run(self, job: Any) -> Any:
        """Submit ``job`` and wait for its result (or :class:`Crash`)."""
        self.submit(job)
        if not self.starting_failed:
            assert self.connection is not None
            self.connection.poll(max(0.0, self.deadline - time.monotonic()))
        return self.result()

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
