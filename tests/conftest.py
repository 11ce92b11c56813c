"""Test configuration: Keras runs on the torch backend whatever the environment says (set before
any ``import keras``: the Keras oracle tests assert the torch backend's behaviour), hypothesis runs
its profile, and the session ends with the worst difference measured against each oracle."""

import os

os.environ["KERAS_BACKEND"] = "torch"

from hypothesis import HealthCheck, settings  # noqa: E402
from oracles import worst_differences  # noqa: E402

# Every property test: 200 examples, the same ones on every run (derandomize), no example database,
# and a failure prints the blob that replays it (@reproduce_failure).
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("ci")


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    worst = worst_differences()
    if worst:
        terminalreporter.section("worst absolute difference per oracle")
        for oracle, diff in sorted(worst.items()):
            terminalreporter.write_line(f"{oracle:<40} {diff:.3g}")
