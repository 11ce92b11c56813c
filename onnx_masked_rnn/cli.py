"""The ``onnx-masked-rnn`` command line (also ``python -m onnx_masked_rnn``).

Subcommands: ``conformance`` (the main job), ``generate-tests DIR``, ``inline IN OUT``, ``bench``.
Each heavy subcommand lives in its own module, which declares its options (``add_arguments``)
and runs them (``run``); this module only wires them together and does the file I/O.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

# subcommand -> (module that implements it, one-line help)
_DELEGATED = {
    "conformance": (
        "onnx_masked_rnn.conformance.runner",
        "run the conformance suite on one or all backends; ends with 'N passed, N failed'",
    ),
    "bench": ("onnx_masked_rnn.bench", "time the expansions against the native kernels, side by side"),
    "convert": (
        "onnx_masked_rnn.keras.cli",
        "convert a Keras 3 model (.keras) with masked recurrent layers to ONNX",
    ),
}


def _inline(args: argparse.Namespace) -> int:
    import onnx

    from onnx_masked_rnn.inline import inline

    model = onnx.load(args.input)
    onnx.save(inline(model, strategy=args.strategy), args.output)
    print(f"wrote {args.output} ({args.strategy} expansion)")
    return 0


def _generate_tests(args: argparse.Namespace) -> int:
    from onnx_masked_rnn.conformance.generate import generate

    count = generate(Path(args.directory))
    print(f"wrote {count} test cases under {args.directory}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnx-masked-rnn", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in _DELEGATED.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(func=lambda args, module=module: importlib.import_module(module).run(args))
    p = sub.add_parser("generate-tests", help="write the conformance cases in the backend-test layout")
    p.add_argument("directory", help="output folder; cases go to DIR/node/test_*")
    p.set_defaults(func=_generate_tests)
    p = sub.add_parser("inline", help="replace every masked node by standard ONNX ops")
    p.add_argument("input", help="model to read (.onnx)")
    p.add_argument("output", help="model to write (.onnx)")
    p.add_argument("--strategy", choices=("scan", "native"), default="scan", help="expansion (default: scan)")
    p.set_defaults(func=_inline)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as exc:
        print(f"onnx-masked-rnn {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
