"""``onnx-masked-rnn convert MODEL.keras OUT.onnx [--strategy ...]``: a saved Keras 3 model as ONNX.

Prints a progress line per stage (the trace takes seconds to minutes) on stderr and, on stdout, a
summary: nodes, masked nodes, inputs with their dynamic axes. The process runs Keras on its torch
backend whatever ``KERAS_BACKEND`` says (a ``.keras`` file loads under any backend).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from onnx_masked_rnn.cli import first_line
from onnx_masked_rnn.keras._custom import load_specs
from onnx_masked_rnn.keras.export import STRATEGIES, WARNING_PREFIX, export
from onnx_masked_rnn.keras.layers import ExportWarning

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="Keras 3 model to read (.keras)")
    parser.add_argument("output", help="ONNX model to write (.onnx)")
    parser.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="function",
        help="function: masked nodes with their bodies attached (default); scan: the Scan + Where "
        "bodies inlined; native: the expansion onto the native LSTM/GRU/RNN kernels (fastest)",
    )
    parser.add_argument(
        "--custom-object",
        action="append",
        default=[],
        metavar="NAME=MODULE:QUALNAME",
        help="a custom class the model needs, as Keras' load_model(custom_objects=...) takes it "
        "(repeatable); classes registered with Keras or importable from the module the file records "
        "need none",
    )


def run(args: argparse.Namespace) -> int:
    """Export; errors that name the input (unsupported layer, missing file) raise ``ValueError`` or
    ``FileNotFoundError`` for the CLI to print; a failure of the exporter itself is printed here."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "torch"
    if not os.path.isfile(args.model):
        raise FileNotFoundError(f"MODEL: no such file {args.model!r}")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ExportWarning)
            summary = export(
                args.model,
                args.output,
                strategy=args.strategy,
                custom_objects=load_specs(args.custom_object),
                progress=lambda line: print(f"onnx-masked-rnn convert: {line}", file=sys.stderr, flush=True),
            )
        for warning in caught:
            if issubclass(warning.category, ExportWarning):
                print(f"{WARNING_PREFIX}{warning.message}", file=sys.stderr)
    except (ValueError, FileNotFoundError, ImportError):  # the CLI prints their one line
        raise
    except Exception as exc:  # the exporter's own failure: one clear line, no traceback
        print(
            f"onnx-masked-rnn convert: error: export of {args.model} failed: {first_line(exc)}",
            file=sys.stderr,
        )
        return 1
    print(summary)
    return 0
