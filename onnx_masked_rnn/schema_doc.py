"""The operators' normative text: the one source of the schemas' doc strings and of spec/.

Each masked operator's doc string is :func:`doc`: a summary, LSTM-22's (GRU-22's, RNN-22's) own
notation, activation list and cell equations (taken from the installed onnx's schema, with
ThresholdedRelu's ``>``), then the sections of :data:`SECTIONS` rendered for that operator. The
package's OpSchemas (:mod:`onnx_masked_rnn.schemas`) carry it, the C++ schemas of ``upstream/``
carry the same text (``upstream/tests`` compares the built onnx's doc strings with :func:`doc`),
and ``spec/semantics.md`` holds each section, rendered for the three operators at once
(:func:`markdown`), between ``normative-<section>`` markers. Nothing here is about a runtime.
"""

from __future__ import annotations

import re
import textwrap

from onnx_masked_rnn.attributes import ACTIVATIONS, OP_SPECS

__all__ = [
    "OPTIONAL_ARGUMENTS_NOTE",
    "SECTIONS",
    "STATIC_ERRORS",
    "TAIL_FIELDS",
    "counterpart_text",
    "descriptions",
    "doc",
    "doc_parts",
    "markdown",
    "tail_fields",
    "tail_template",
]

OPTIONAL_ARGUMENTS_NOTE = "This operator has **optional** inputs/outputs."
"""The first words of onnx's closing note on optional arguments, which the doc moves to its end."""

_ONNX_THRESHOLDED_RELU = "ThresholdedRelu(x)     - x if x >= alpha else 0"
_THRESHOLDED_RELU = "ThresholdedRelu(x)     - x if x > alpha else 0"

# name -> (operators it applies to, text): the static errors, in the order of the doc's list. Each one is
# decidable by shape inference from attributes, element types, known dimensions and constant
# inputs alone; spec/semantics.md section 11 says why the others are run-time errors.
STATIC_ERRORS: dict[str, tuple[tuple[str, ...], str]] = {
    "direction": (("LSTM", "GRU", "RNN"), "`direction` not one of forward, reverse, bidirectional;"),
    "layout": (("LSTM", "GRU", "RNN"), "`layout` not 0 or 1;"),
    "masked_output": (("LSTM", "GRU", "RNN"), "`masked_output` not one of zero, carry;"),
    "input_forget": (("LSTM",), "`input_forget` not 0 or 1;"),
    "linear_before_reset": (("GRU",), "`linear_before_reset` not 0 or 1;"),
    "clip": (("LSTM", "GRU", "RNN"), "`clip` NaN, zero or negative;"),
    "hidden_size": (("LSTM", "GRU", "RNN"), "`hidden_size` zero or negative;"),
    "activations": (
        ("LSTM", "GRU", "RNN"),
        "`activations` of another length than {activations_count}, or naming a function that is not"
        " one of the activation functions;",
    ),
    "activation_parameters": (
        ("LSTM", "GRU", "RNN"),
        "values of `activation_alpha` or `activation_beta` that no function consumes;",
    ),
    "types": (
        ("LSTM", "GRU", "RNN"),
        "an input of another element type than its type constraint allows, or float inputs of"
        " different types;",
    ),
    "ranks": (
        ("LSTM", "GRU", "RNN"),
        "{rank3} not of rank 3, {rank2} not of rank 2, `sequence_lens` not of rank 1;",
    ),
    "dims": (
        ("LSTM", "GRU", "RNN"),
        "a known dimension that contradicts another: `W` not `[num_directions, {gates}*hidden_size,"
        " input_size]`, `R` not `[num_directions, {gates}*hidden_size, hidden_size]`, `B` not"
        " `[num_directions, {bias}*hidden_size]`,{peepholes} {states} not the state shape of `layout`,"
        " `sequence_lens` not `[batch_size]`, `mask` not the first two axes of `X` (hidden_size from"
        " the attribute when given, else from `R`; num_directions from `direction`);",
    ),
    "sequence_lens_values": (
        ("LSTM", "GRU", "RNN"),
        "a constant `sequence_lens` with a value outside [0, seq_length], seq_length known.",
    ),
}

# Each section: its title in the doc, then its text with {placeholders} that `_fields` fills for
# one operator, or for the three at once (spec/semantics.md).
SECTIONS: dict[str, tuple[str, str]] = {
    "masking": (
        "Masking (per direction, steps in processing order: t = 0 .. seq_length-1 forward,\n"
        'seq_length-1 .. 0 reverse; "previous" means previously processed):',
        """\
* mt = mask[t] AND t < sequence_lens       (an absent mask or sequence_lens is all true)
* {new} = the cell equations applied to Xt and {prev}
* {state} = mt ? {new} : {prev}
* Yt = mt ? H't : (zero: 0 | carry: the previous Y of this direction, 0 before the first
  processed step)
* {finals} = the state after the last step: {initials} (0 if absent) for a row with no
  processed step, including every row when seq_length is 0.

`a ? b : c` selects per row: a value of X at a skipped step reaches no output, and NaN or Inf
there changes no output. Outputs are time-aligned in every direction: Yt belongs to input step t,
and the reverse direction of a row starts at its last processed step.""",
    ),
    "empty": (
        "Empty inputs:",
        """\
batch_size 0 and seq_length 0 are valid, not errors. With batch_size 0 every output is empty.
With seq_length 0, Y is empty and {finals} is {initials} (0 if absent); `sequence_lens`,
if given, is then all 0.""",
    ),
    "types": (
        "Element types:",
        """\
The float inputs and the outputs share one type T; `sequence_lens` is int32 and `mask` is bool.
The float attributes hold float32 values. In float and double the result is that of the equations
in that type, up to rounding; in float16 and bfloat16 an implementation may compute in the type or
in a wider one, and round the outputs to T.""",
    ),
    "errors": (
        "Errors:",
        """\
Shape inference rejects a node with any of these, each decidable from attributes, element types,
known dimensions and constant inputs:

{static_errors}

At run time an implementation rejects what shape inference could not see: the same shape
conditions on the actual tensors, and `sequence_lens` values outside [0, seq_length]. The
function body rejects at run time a `mask` that is not the shape of the first two axes of X (it
concatenates `mask` with a tensor of that shape); it checks no other run-time condition, and for
inputs that violate one what it computes is undefined.""",
    ),
}


def descriptions(op_type: str) -> dict[str, str]:
    """The descriptions of the input and the attribute the masked operator adds to its ONNX
    counterpart's (which it keeps as they are: what masking changes is in the doc string)."""
    spec = OP_SPECS[op_type]
    finals = "`Y_h` and `Y_c`" if spec.onnx_op_type == "LSTM" else "`Y_h`"
    return {
        "mask": (
            "Optional boolean tensor marking the steps to process; a false entry skips that step of"
            " that row: the state is carried across it unchanged, its value of `X` reaches no output,"
            " and `Y` at that step is set by `masked_output`. It has the shape of the first two axes of"
            " `X`: `[seq_length, batch_size]` if `layout` is 0, `[batch_size, seq_length]` if 1. If not"
            " specified - assumed all true."
        ),
        "masked_output": (
            "What `Y` holds at a skipped step (mask false or `t >= sequence_lens[b]`). `zero`"
            " (default): 0; with `mask` absent the operator then computes what"
            f" {spec.onnx_op_type}-22 computes. `carry`: the `Y` of the previous processed step of the"
            " same direction, 0 before the first processed step. Any other value is an error. The"
            f" state and {finals} do not depend on it."
        ),
    }


def _activation_parameters() -> str:
    """How ``activation_alpha`` and ``activation_beta`` are consumed, from the ACTIVATIONS table."""

    def defaults(takes: int, default: int) -> str:
        return ", ".join(f"{name} {info[default]:g}" for name, info in ACTIVATIONS.items() if info[takes])

    return (
        "Each activation function is the ONNX operator of the same name; Affine(x) = alpha*x + beta and"
        " ScaledTanh(x) = alpha*Tanh(beta*x). Walking `activations` in order, each function that takes"
        " alpha consumes the next unused value of `activation_alpha`, each that takes beta the next"
        " unused value of `activation_beta`, and a function that does not take a parameter consumes"
        " none; a function that finds the list exhausted takes its default (alpha: "
        f"{defaults(0, 2)}; beta: {defaults(1, 3)}: the ONNX operators' defaults, and for Affine and"
        " ScaledTanh those of this specification). Values that no function consumes are an error."
        " Names are matched without regard to letter case."
    )


def counterpart_text(op_type: str, onnx_doc: str) -> str:
    """The part of the ONNX counterpart's doc (``onnx_doc``) the masked operator restates: from
    its notation to its equations, ThresholdedRelu given the ThresholdedRelu operator's ``>``
    (LSTM-22's list in onnx 1.23 writes ``>=``; the documentation clarification fixes it), the note
    on optional arguments cut off."""
    body = onnx_doc.strip()
    body = body[body.index("Notations:") :].partition(OPTIONAL_ARGUMENTS_NOTE)[0].rstrip()
    if _ONNX_THRESHOLDED_RELU not in body and _THRESHOLDED_RELU not in body:
        onnx_op = OP_SPECS[op_type].onnx_op_type
        raise AssertionError(f"{onnx_op}-22's doc no longer lists ThresholdedRelu as expected")
    return body.replace(_ONNX_THRESHOLDED_RELU, _THRESHOLDED_RELU)


def _fields(op_type: str | None) -> dict[str, str]:
    """The placeholders of :data:`SECTIONS` for one operator (None: the three at once)."""
    if op_type is None:
        return {
            "new": "S't",
            "prev": "St-1",
            "state": "St",
            "finals": "Y_h (and Y_c)",
            "initials": "initial_h (initial_c)",
            "activations_count": "the number of functions per direction (LSTM 3, GRU 2, RNN 1) times"
            " num_directions (a forward or reverse MaskedRNN may also list 2)",
            "rank3": "`X`, `W`, `R`, `initial_h`, `initial_c`",
            "rank2": "`B`, `P`, `mask`",
            "gates": "G",
            "bias": "2*G",
            "peepholes": " `P` not `[num_directions, 3*hidden_size]` (G = 4, 3, 1 gates for LSTM, GRU, RNN),",
            "states": "`initial_h`/`initial_c`",
            "ops": "LSTM GRU RNN",
        }
    spec = OP_SPECS[op_type]
    lstm = spec.onnx_op_type == "LSTM"
    per_direction = spec.num_activations
    count = f"{per_direction} times num_directions"
    if spec.onnx_op_type == "RNN":
        count += " (a forward or reverse node may also list 2)"
    return {
        "new": "(H't, C't)" if lstm else "H't",
        "prev": "(Ht-1, Ct-1)" if lstm else "Ht-1",
        "state": "(Ht, Ct)" if lstm else "Ht",
        "finals": "Y_h, Y_c" if lstm else "Y_h",
        "initials": "initial_h, initial_c" if lstm else "initial_h",
        "activations_count": count,
        "rank3": "`X`, `W`, `R`, `initial_h`, `initial_c`" if lstm else "`X`, `W`, `R`, `initial_h`",
        "rank2": "`B`, `P`, `mask`" if lstm else "`B`, `mask`",
        "gates": str(spec.num_gates),
        "bias": str(2 * spec.num_gates),
        "peepholes": " `P` not `[num_directions, 3*hidden_size]`," if lstm else "",
        "states": "`initial_h`/`initial_c`" if lstm else "`initial_h`",
        "ops": spec.onnx_op_type,
    }


def _render(text: str, fields: dict[str, str]) -> str:
    for name, value in fields.items():
        text = text.replace("{" + name + "}", value)
    return text


def _static_errors(op_type: str | None) -> str:
    """The static-error list of ``op_type`` (None: the three operators), one item per error."""
    fields = _fields(op_type)
    ops = fields["ops"].split()
    errors = [_render(t, fields) for applies, t in STATIC_ERRORS.values() if set(applies) & set(ops)]
    return "\n".join(textwrap.fill(e, width=100, initial_indent="* ", subsequent_indent="  ") for e in errors)


def _section(name: str, op_type: str | None) -> str:
    fields = _fields(op_type)
    fields["static_errors"] = _static_errors(op_type)
    return _render(SECTIONS[name][1], fields)


def _cell_details(op_type: str) -> str:
    """What the masked operator fixes that its counterpart's text leaves implicit, per cell."""
    onnx_op = OP_SPECS[op_type].onnx_op_type
    if onnx_op == "LSTM":
        return (
            "`clip` bounds the arguments of f and g, not the cell state Ct, not even as the argument of h."
            " With `input_forget` = 1 the forget gate is ft = 1 - it."
        )
    if onnx_op == "GRU":
        return "`clip` bounds the arguments of f and g."
    return (
        "`clip` bounds the argument of f. As RNN-22's default `activations` [Tanh, Tanh] does, a"
        " forward or reverse node may list two functions: the first is used."
    )


def doc_parts(op_type: str) -> tuple[str, str]:
    """The doc string of ``op_type`` without its ONNX counterpart's part: the text before it (the
    summary) and after it (activation parameters, cell details and :data:`SECTIONS`)."""
    spec = OP_SPECS[op_type]
    onnx_op = f"{spec.onnx_op_type}-22"
    article = "a" if spec.onnx_op_type == "GRU" else "an"
    finals = _fields(op_type)["finals"]
    summary = f"""\
Computes a one-layer {spec.onnx_op_type} over sequences that may have masked steps anywhere.
It is {onnx_op} (the same inputs in the same positions, attributes, defaults, outputs and cell
equations) with one more optional input, `mask`, and one more attribute, `masked_output`. A
masked step leaves the state unchanged, its input reaches no output, and `masked_output` says
what the output holds there. With `mask` absent and `masked_output` at its default, the operator
computes what {onnx_op} computes, `sequence_lens` included, with one exception: for a row of
length 0, whose {finals} {onnx_op} leaves undefined, {finals} is the initial state. Replacing
{article} {onnx_op} node by a {op_type} node changes nothing else."""
    return summary, _render(tail_template(), tail_fields(op_type))


TAIL_FIELDS = ("cell", "static_errors", "new", "prev", "state", "finals", "initials")
"""The placeholders of :func:`tail_template`, which :func:`tail_fields` fills for one operator."""


def tail_template() -> str:
    """The doc string's part after the counterpart's (activation parameters, cell details and
    :data:`SECTIONS`), the same for the three operators: ``{name}`` for each of
    :data:`TAIL_FIELDS`, what differs. The C++ schemas compose their doc from it the same way."""
    paragraphs = [textwrap.fill(_activation_parameters(), width=100), "{cell}"]
    paragraphs += [f"{title}\n\n{text}" for title, text in SECTIONS.values()]
    template = "\n\n".join(paragraphs)
    if set(re.findall(r"\{(\w+)\}", template)) != set(TAIL_FIELDS):
        raise AssertionError("the doc's placeholders are not TAIL_FIELDS")
    return template


def tail_fields(op_type: str) -> dict[str, str]:
    """The values of :data:`TAIL_FIELDS` for ``op_type``."""
    fields = _fields(op_type)
    fields["cell"] = textwrap.fill(_cell_details(op_type), width=100)
    fields["static_errors"] = _static_errors(op_type)
    return {name: fields[name] for name in TAIL_FIELDS}


def doc(op_type: str, onnx_doc: str) -> str:
    """The doc string of ``op_type`` (a key of ``OP_SPECS``), given its ONNX counterpart's
    opset-22 doc string ``onnx_doc``: :func:`doc_parts` around :func:`counterpart_text`, then
    onnx's note on optional arguments."""
    head, tail = doc_parts(op_type)
    note = onnx_doc[onnx_doc.index(OPTIONAL_ARGUMENTS_NOTE) :].strip()
    return "\n\n".join([head, counterpart_text(op_type, onnx_doc), tail, note])


def markdown(name: str) -> str:
    """Section ``name`` of :data:`SECTIONS` for the three operators at once, as spec/semantics.md
    holds it (S is the state: (H, C) for LSTM, H for GRU and RNN)."""
    return _section(name, None)
