"""Regenerate the generated sections of the specification in ``spec/``.

Each spec file holds hand-written text and sections between ``<!-- BEGIN GENERATED name ... -->``
and ``<!-- END GENERATED name -->`` markers, written here from the code so they cannot drift:

- ``schema`` (each op): the ``docs/Operators.md`` entry, rendered by onnx's own ``gen_doc`` from the
  registered OpSchema (summary, version, attributes, inputs, outputs, type constraints);
- ``function-body`` (each op): the Scan + Where function of one representative configuration,
  built by ``onnx_masked_rnn.functions.build_scan_function`` in the portable Scan form and printed
  in onnx text syntax;
- ``activations`` (``semantics.md``): the activation functions and their alpha/beta defaults.

Usage: ``python scripts/update_spec.py`` rewrites the files; ``--check`` only reports stale files
(exit status 1). The BEGIN markers record the onnx and onnxscript versions that rendered them.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import sys
import warnings
from pathlib import Path

import onnx
import onnx.printer
import onnxscript

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package

from onnx_masked_rnn import DOMAIN, OPSET_VERSION, register_schemas  # noqa: E402
from onnx_masked_rnn.attributes import ACTIVATIONS, OP_SPECS, RNNAttributes, parse_attributes  # noqa: E402

SPEC_DIR = ROOT / "spec"
SEMANTICS = SPEC_DIR / "semantics.md"
FUNCTION_OPSET = 22
"""The ai.onnx opset of the printed function bodies."""

# op -> (attributes, optional inputs supplied) of the body each spec prints.
BODY_CONFIGURATIONS: dict[str, tuple[dict, frozenset[str]]] = {
    "MaskedLSTM": (
        {"masked_output": "carry"},
        frozenset({"B", "sequence_lens", "initial_h", "initial_c", "mask"}),
    ),
    "MaskedGRU": ({"linear_before_reset": 1, "masked_output": "zero"}, frozenset({"B", "initial_h", "mask"})),
    "MaskedRNN": (
        {"direction": "reverse", "layout": 1, "masked_output": "carry"},
        frozenset({"B", "initial_h", "mask"}),
    ),
}

# The activation functions' definitions (spec/semantics.md section 9), by name: the ONNX operators'
# (ThresholdedRelu with the operator's `>`), Affine and ScaledTanh as the specification defines them.
ACTIVATION_FORMULAS = {
    "Relu": "max(0, x)",
    "Tanh": "(1 - e^{-2x}) / (1 + e^{-2x})",
    "Sigmoid": "1 / (1 + e^{-x})",
    "Affine": "alpha * x + beta",
    "LeakyRelu": "x if x >= 0 else alpha * x",
    "ThresholdedRelu": "x if x > alpha else 0",
    "ScaledTanh": "alpha * Tanh(beta * x)",
    "HardSigmoid": "min(max(alpha * x + beta, 0), 1)",
    "Elu": "x if x >= 0 else alpha * (e^x - 1)",
    "Softsign": "x / (1 + abs(x))",
    "Softplus": "log(1 + e^x)",
}

_BLOCK = re.compile(
    r"<!-- BEGIN GENERATED (?P<name>[\w-]+)(?: [^>]*)? -->\n.*?<!-- END GENERATED (?P=name) -->", re.S
)


def generator_versions() -> str:
    return f"onnx {onnx.__version__}, onnxscript {onnxscript.__version__}"


def render_schema(op_type: str) -> str:
    """The op's entry in the ``docs/Operators.md`` format, by onnx's own renderer."""
    register_schemas()
    # gen_doc collects onnx's example snippets when imported: quiet and slow (seconds), so lazy.
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        from onnx.defs.gen_doc import display_schema

    schema = onnx.defs.get_schema(op_type, OPSET_VERSION, DOMAIN)
    name = f"{DOMAIN}.{op_type}"
    heading = f'### <a name="{name}"></a><a name="{name.lower()}">**{name}**</a>\n'
    return heading + display_schema(schema, [schema], "Changelog.md").rstrip() + "\n"


def body_attributes(op_type: str) -> RNNAttributes:
    return parse_attributes(op_type, **BODY_CONFIGURATIONS[op_type][0])


def render_function_body(op_type: str) -> str:
    """The representative configuration's function body in onnx text syntax."""
    from onnx_masked_rnn.functions import Configuration, build_scan_function

    attributes, present = BODY_CONFIGURATIONS[op_type]
    attrs = body_attributes(op_type)
    function = build_scan_function(Configuration.of(attrs, present), FUNCTION_OPSET, "portable")
    shown = ", ".join(f"{k}={v!r}" for k, v in attributes.items()) or "all defaults"
    supplied = ", ".join(n for n in OP_SPECS[op_type].inputs if n in present)
    return (
        f"Configuration: attributes {shown}; optional inputs supplied: {supplied}; X float; "
        f"ai.onnx opset {FUNCTION_OPSET}; the portable Scan form (typed body inputs and outputs, "
        f"no outer-scope reads).\n\n```\n{onnx.printer.to_text(function).strip()}\n```\n"
    )


def activation_default_source(name: str) -> str:
    """Where a function's parameter defaults come from: the ONNX operator of the same name (its
    newest ai.onnx version in the installed onnx), or this specification for the two that are no
    longer operators."""
    if onnx.defs.has(name):
        return f"ONNX {name}-{onnx.defs.get_schema(name).since_version}"
    return "this specification"


def render_activations() -> str:
    lines = [
        "| function | definition | alpha (default) | beta (default) | defaults from |",
        "|---|---|---|---|---|",
    ]
    for name, (takes_alpha, takes_beta, alpha, beta) in ACTIVATIONS.items():
        a = f"yes ({alpha:g})" if takes_alpha else "-"
        b = f"yes ({beta:g})" if takes_beta else "-"
        source = activation_default_source(name) if takes_alpha or takes_beta else "-"
        lines.append(f"| {name} | `{ACTIVATION_FORMULAS[name]}` | {a} | {b} | {source} |")
    return "\n".join(lines) + "\n"


def sections(path: Path) -> dict[str, str]:
    """The generated sections a spec file must hold, by name."""
    if path == SEMANTICS:
        return {"activations": render_activations()}
    op_type = path.stem
    return {"schema": render_schema(op_type), "function-body": render_function_body(op_type)}


def spec_files() -> list[Path]:
    return [SPEC_DIR / f"{op_type}.md" for op_type in OP_SPECS] + [SEMANTICS]


def updated(text: str, generated: dict[str, str], path: Path) -> str:
    """``text`` with each generated section replaced; every section must have its markers."""
    found = {m.group("name") for m in _BLOCK.finditer(text)}
    missing = sorted(set(generated) - found)
    if missing:
        raise ValueError(f"{path}: no <!-- BEGIN/END GENERATED --> markers for {missing}")
    versions = generator_versions()

    def replace(match: re.Match) -> str:
        name = match.group("name")
        if name not in generated:
            raise ValueError(f"{path}: unknown generated section {name!r}")
        return (
            f"<!-- BEGIN GENERATED {name} by scripts/update_spec.py with {versions}; do not edit -->\n"
            f"{generated[name]}<!-- END GENERATED {name} -->"
        )

    return _BLOCK.sub(replace, text)


def recorded_versions(text: str) -> set[str]:
    """The generator versions the file's BEGIN markers record."""
    return set(
        re.findall(r"<!-- BEGIN GENERATED [\w-]+ by scripts/update_spec.py with (.*?); do not edit -->", text)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale files; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in spec_files():
        text = path.read_text()
        new = updated(text, sections(path), path)
        if new == text:
            continue
        stale.append(path)
        if args.check:
            diff = difflib.unified_diff(
                text.splitlines(), new.splitlines(), str(path), "generated", lineterm=""
            )
            print("\n".join(list(diff)[:40]))
        else:
            path.write_text(new)
            print(f"updated {path}")
    if args.check and stale:
        print(f"{len(stale)} stale spec file(s); run python scripts/update_spec.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
