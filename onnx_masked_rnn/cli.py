"""The ``onnx-masked-rnn`` command line (also ``python -m onnx_masked_rnn``).

Subcommands: ``conformance`` (the suite on one or more backends), ``fuzz`` (the differential
fuzz), ``bench`` (the benchmark), ``convert MODEL.keras OUT.onnx`` (Keras export),
``generate-tests DIR`` (the suite's files), ``inline IN OUT`` (expand the masked nodes) and
``from-preview IN OUT`` (tf2onnx's ``ai.onnx.preview`` nodes onto the package's domain, in one of
the deployment forms).
Each heavy subcommand lives in its own module, which declares its options (``add_arguments``)
and runs them (``run``); this module only wires them together and does the file I/O. Help texts
are plain text (argparse prints them as they are).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import onnx
from google.protobuf.message import DecodeError

from onnx_masked_rnn._domain import DOMAIN
from onnx_masked_rnn._files import write_atomic
from onnx_masked_rnn._walk import walk_nodes
from onnx_masked_rnn.conformance.generate import generate
from onnx_masked_rnn.functions import SCAN_FORMS
from onnx_masked_rnn.inline import DEFAULT_SCAN_FORM, attach_functions, inline
from onnx_masked_rnn.preview import PREVIEW_DOMAIN, from_preview

# subcommand -> (module that implements it, one-line help)
_DELEGATED = {
    "conformance": (
        "onnx_masked_rnn.conformance.runner",
        "run the conformance suite on one or all backends (--list: the cases and what each covers); "
        "ends with 'N passed, N failed, N skipped'",
    ),
    "fuzz": (
        "onnx_masked_rnn.fuzz",
        "differential fuzz: random cases through every path, compared with the numpy reference",
    ),
    "bench": ("onnx_masked_rnn.bench", "time the expansions against the native kernels, side by side"),
    "convert": (
        "onnx_masked_rnn.keras.cli",
        "convert a Keras 3 model (.keras) with masked recurrent layers to ONNX",
    ),
}


def _load_model(path: str):
    """The model in ``path``; ``ValueError`` naming the file when it is not a non-empty ONNX model."""
    if Path(path).is_dir():
        raise IsADirectoryError(21, "is a directory, not a model file", path)
    try:
        model = onnx.load(path)
    except (DecodeError, RuntimeWarning, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.HasField("graph"):
        raise ValueError(f"{path}: not an ONNX model (no graph; is the file empty?)")
    return model


def _count_masked_nodes(model) -> int:
    scopes = [model.graph.node, *(f.node for f in model.functions)]
    return sum(node.domain == DOMAIN for nodes in scopes for node in walk_nodes(nodes))


def _inline(args: argparse.Namespace) -> int:
    model = _load_model(args.input)
    count = _count_masked_nodes(from_preview(model))
    expanded = inline(model, strategy=args.strategy, scan_form=args.scan_form)
    write_atomic(Path(args.output), expanded.SerializeToString())
    if count == 0:
        print(f"{args.input} has no masked node: nothing to expand; wrote {args.output}")
    else:
        print(f"wrote {args.output} ({count} masked node(s), {args.strategy} expansion)")
    return 0


def _from_preview(args: argparse.Namespace) -> int:
    model = from_preview(_load_model(args.input))
    count = _count_masked_nodes(model)
    if args.strategy == "function":
        written = attach_functions(model, scan_form=args.scan_form)
    else:
        written = inline(model, strategy=args.strategy, scan_form=args.scan_form)
    write_atomic(Path(args.output), written.SerializeToString())
    print(f"wrote {args.output} ({count} masked node(s), {args.strategy} form)")
    return 0


def _generate_tests(args: argparse.Namespace) -> int:
    count = generate(Path(args.directory))
    print(f"wrote {count} test cases under {args.directory}")
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line on stderr (with where to find help), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# What ``onnx-masked-rnn --help`` says first (plain text: the docstring is reStructuredText).
DESCRIPTION = (
    "MaskedLSTM, MaskedGRU and MaskedRNN for ONNX: the conformance suite, the fuzz, the benchmark, "
    "Keras conversion, the suite's files, the expansion of masked nodes into standard ops and the "
    "mapping of tf2onnx's ai.onnx.preview nodes onto the package's domain (also: python -m onnx_masked_rnn)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="onnx-masked-rnn", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in _DELEGATED.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(func=lambda args, module=module: importlib.import_module(module).run(args))
    help_text = "write the conformance cases in the backend-test layout"
    p = sub.add_parser("generate-tests", help=help_text, description=help_text)
    p.add_argument("directory", help="output folder; cases go to DIR/node/test_*")
    p.set_defaults(func=_generate_tests)
    help_text = "replace every masked node by standard ONNX ops"
    p = sub.add_parser("inline", help=help_text, description=help_text)
    p.add_argument("input", help="model to read (.onnx)")
    p.add_argument("output", help="model to write (.onnx)")
    p.add_argument("--strategy", choices=("scan", "native"), default="scan", help="expansion (default: scan)")
    _add_scan_form(p)
    p.set_defaults(func=_inline)
    help_text = (
        f"map the {PREVIEW_DOMAIN} MaskedLSTM/GRU/RNN nodes that patched tf2onnx emits onto the "
        "package's domain, as one of the deployment forms"
    )
    p = sub.add_parser("from-preview", help=help_text, description=help_text)
    p.add_argument("input", help=f"model to read (.onnx) with {PREVIEW_DOMAIN} masked nodes")
    p.add_argument("output", help="model to write (.onnx)")
    p.add_argument(
        "--strategy",
        choices=("function", "scan", "native"),
        default="function",
        help="'function': the package's masked nodes with their model-local functions (runs in onnxruntime "
        "as is, and on the kernel); 'scan' or 'native': standard ops only, as inline writes them "
        "(default: function)",
    )
    _add_scan_form(p)
    p.set_defaults(func=_from_preview)
    return parser


def _add_scan_form(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--scan-form",
        choices=SCAN_FORMS,
        default=DEFAULT_SCAN_FORM,
        help="Scan bodies: 'portable' (weights as Scan state, typed body I/O: runs on every runtime tried) "
        "or 'capture' (the body reads the weights from the enclosing graph: faster in onnxruntime) "
        f"(default: {DEFAULT_SCAN_FORM})",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand. Exit status 0 on success, 2 for a usage error (bad arguments: argparse's
    message), 1 for a failure (a file that cannot be read or written, a model or option the command
    refuses): one line on stderr naming the file or argument, no traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prefix = f"onnx-masked-rnn {args.command}: error:"
    try:
        return int(args.func(args) or 0)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"{prefix} {where}{exc.strerror or exc}", file=sys.stderr)
    except (ValueError, ImportError) as exc:  # an ImportError: a missing extra (onnx_masked_rnn.extras)
        print(f"{prefix} {first_line(exc)}", file=sys.stderr)
    except Exception as exc:  # the last resort: still one line, never a traceback
        print(f"{prefix} unexpected {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
    return 1


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a runtime's can run to pages), or its type."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


if __name__ == "__main__":
    raise SystemExit(main())
