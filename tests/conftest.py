"""Test configuration: Keras runs on the torch backend whatever the environment says (set before
any ``import keras``: the Keras oracle tests assert the torch backend's behaviour), hypothesis runs
its profile, the conformance suite is built once for the tests that regenerate it, and the session
ends with the worst difference measured against each oracle.

The tests test the installed package: ``PYTHONSAFEPATH`` keeps the current folder (a checkout) off
the path of every ``python -c``/``-m`` child the tests start, spawned workers included."""

import os

os.environ["KERAS_BACKEND"] = "torch"
os.environ["PYTHONSAFEPATH"] = "1"

import contextlib  # noqa: E402
import io  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from unittest import mock  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from oracles import worst_differences  # noqa: E402

from onnx_masked_rnn import cli  # noqa: E402
from onnx_masked_rnn.conformance import generate  # noqa: E402

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


@pytest.fixture(scope="session")
def suite_build() -> tuple[list, dict]:
    """Every conformance case and its models (``generate.collect_cases`` and ``generate.variants``),
    built once per session: ``(cases, {case name: variants})``."""
    cases = generate.collect_cases()
    return cases, {case.name: generate.variants(case) for case in cases}


@contextlib.contextmanager
def built_once(suite_build: tuple[list, dict]) -> Iterator[None]:
    """``generate-tests`` takes the session's build instead of building every case again: the
    builders' output depends only on the case files, so one build serves every test."""
    cases, models = suite_build
    with (
        mock.patch.object(generate, "collect_cases", lambda: list(cases)),
        mock.patch.object(generate, "variants", lambda case: models[case.name]),
    ):
        yield


@pytest.fixture
def shared_suite_build(suite_build: tuple[list, dict]) -> Iterator[None]:
    """In this test ``generate-tests`` writes the session's one build (see :func:`built_once`)."""
    with built_once(suite_build):
        yield


@pytest.fixture(scope="session")
def regenerated_suite(
    tmp_path_factory: pytest.TempPathFactory, suite_build: tuple[list, dict]
) -> tuple[Path, int, str]:
    """The conformance suite as ``onnx-masked-rnn generate-tests`` writes it now, once per session
    into a fresh folder: ``(folder, exit status, standard output)``. Tests only read it."""
    folder = tmp_path_factory.mktemp("regenerated_suite")
    out = io.StringIO()
    with built_once(suite_build), contextlib.redirect_stdout(out):
        status = cli.main(["generate-tests", str(folder)])
    return folder, status, out.getvalue()
