"""Test configuration: Keras runs on the torch backend (set before any ``import keras``), and the
session ends with the worst difference measured against each oracle."""

import os

os.environ.setdefault("KERAS_BACKEND", "torch")

from oracles import worst_differences  # noqa: E402


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    worst = worst_differences()
    if worst:
        terminalreporter.section("worst absolute difference per oracle")
        for oracle, diff in sorted(worst.items()):
            terminalreporter.write_line(f"{oracle:<40} {diff:.3g}")
