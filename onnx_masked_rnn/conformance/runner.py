"""``onnx-masked-rnn conformance``: run the conformance suite on one or more backends.

Reads a suite in ONNX's backend-test layout (``DIR/node/test_*/``, or one case folder ``DIR``; by
default the suite shipped in the package: ``suite``), runs every case on every chosen backend, each
backend in a worker process of its own (``worker``), compares with the case's ``rtol``/``atol`` the
way onnx's backend-test runner does (``case``), classifies each result (``outcomes``: passed, wrong,
error, crashed, unsupported), prints a table (per backend and per variant of the cases: masked
node, Scan expansion, native expansion, a column per outcome), every unsupported reason, every
failure (and which of them ``known_limitations.json`` lists: ``limitations``) (``report``), and ends
with the line ``N passed, M failed, K skipped`` (failed: wrong, error or crashed; skipped:
unsupported). Exit status 1 when anything failed. ``--list`` prints the cases and what each covers
instead.

This module holds the subcommand: its options (:func:`add_arguments`) and their run (:func:`run`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from onnx_masked_rnn.conformance import DATA_DIR, limitations
from onnx_masked_rnn.conformance.backends import BUILTIN, missing_package
from onnx_masked_rnn.conformance.report import listing, report
from onnx_masked_rnn.conformance.suite import load_cases
from onnx_masked_rnn.conformance.worker import run_suite

# Without --backend: onnxruntime and the package's two references, on which no case fails.
DEFAULT_BACKENDS = ("onnxruntime", "reference", "onnx-reference")

__all__ = ["DEFAULT_BACKENDS", "add_arguments", "backends_of", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory",
        nargs="?",
        metavar="DIR",
        help="suite root holding node/test_*/, or one case folder (holding model.onnx) "
        "(default: the suite shipped in the package)",
    )
    parser.add_argument(
        "--backend",
        action="append",
        metavar="NAME",
        help="onnxruntime, onnxruntime-noopt (graph optimizations disabled), onnxruntime-kernel (the "
        "masked nodes on this package's kernel), openvino, tract, reference, onnx-reference, all "
        "(every one of these whose package or library is installed), or module:Class, "
        "any object with onnx's Backend interface (prepare(model, device).run(inputs), "
        "supports_device), e.g. onnxruntime.backend.backend:OnnxRuntimeBackend, or a module that has "
        "them (onnxruntime.backend); repeatable (default: onnxruntime, reference and onnx-reference, "
        "on which nothing fails). ALLOW_RELEASED_ONNX_OPSET_ONLY=0 is set unless already set",
    )
    parser.add_argument(
        "--filter", type=_regex, metavar="REGEX", help="run only the cases whose name matches (re.search)"
    )
    parser.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=600.0,
        metavar="SECONDS",
        help="a case running longer on a backend is reported as crashed, and a backend whose module "
        "takes longer to import stops the run (default: 600)",
    )
    parser.add_argument(
        "--unsupported",
        type=_regex,
        action="append",
        default=[],
        metavar="REGEX",
        help="a backend error whose message matches (re.search) is 'unsupported' (skipped), not "
        "'error': how a runtime the runner does not know says it lacks an op or type, beside raising "
        "unittest.SkipTest from prepare(); repeatable",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print the cases (after --filter) and what each covers (variant, op, direction, layout, "
        "masked_output mode, activations and other attributes set, optional inputs, outputs, dtype); "
        "run nothing",
    )


def _regex(text: str) -> re.Pattern[str]:
    """``--filter``'s type: a bad pattern is a usage error (exit status 2) naming it."""
    try:
        return re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid regular expression: {exc}") from None


def _positive_seconds(text: str) -> float:
    """``--timeout``'s type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def backends_of(specs: Sequence[str]) -> tuple[list[str], list[str]]:
    """The backends ``--backend`` names (``all`` expanded: the built-in backends whose packages are
    installed) and the notes on those ``all`` leaves out: a package not installed, or the kernel
    (``onnxruntime-kernel``) when its library was not built. Nothing is imported here: each
    backend is loaded and checked (importable, with the Backend interface, supporting the CPU) in
    its worker process, within the time limit, when the run starts (``worker.run_cases``)."""
    names: list[str] = []
    notes: list[str] = []
    for spec in specs:
        if spec != "all":
            names.append(spec)
            continue
        for name in BUILTIN:
            package = missing_package(name)
            unavailable = getattr(BUILTIN[name], "unavailable", None)
            if package and unavailable and unavailable():  # the kernel: this package, not built
                notes.append(f"--backend all: left out {name} (its library was not built: {unavailable()})")
            elif package:
                notes.append(f"--backend all: left out {name} ({package} is not installed)")
            else:
                names.append(name)
    return list(dict.fromkeys(names)), notes


def run(args: argparse.Namespace) -> int:
    """Run the suite per ``args`` (see :func:`add_arguments`); print the report; 1 on any failure
    (``--list``: print the cases, 0)."""
    data_dir = Path(args.directory) if args.directory else DATA_DIR
    cases = load_cases(data_dir)
    if args.filter:
        cases = [c for c in cases if args.filter.search(c.name)]
    if not cases:
        matching = f" matches --filter {args.filter.pattern!r}" if args.filter else ""
        raise ValueError(f"no conformance case under {data_dir}{matching}")
    if args.list:
        print(listing(cases))
        print(f"{len(cases)} case{'' if len(cases) == 1 else 's'}")
        return 0
    names, notes = backends_of(args.backend or list(DEFAULT_BACKENDS))

    print(f"conformance suite: {data_dir} ({len(cases)} cases)")
    for note in notes:
        print(note)
    results = run_suite(names, cases, args.timeout, sys.stderr.isatty(), args.unsupported)
    listed = limitations.load()
    by_name = {c.name: c for c in cases}
    known = {
        (backend, name): defects
        for backend, outcomes in results.items()
        for name, outcome in outcomes
        if outcome.verdict == "failed"
        and (defects := limitations.known_limitation(listed, backend, by_name[name], outcome))
    }
    print(report(results, known))
    verdicts = Counter(o.verdict for outcomes in results.values() for _, o in outcomes)
    if verdicts["failed"]:
        print(
            f"{verdicts['failed']} failures, of which {len(known)} are known limitations "
            f"({limitations.PATH.name}: the runtime defects behind them are in conformance/defects.py)"
        )
    print(f"{verdicts['passed']} passed, {verdicts['failed']} failed, {verdicts['skipped']} skipped")
    return 1 if verdicts["failed"] else 0
