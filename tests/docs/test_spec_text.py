"""The specification's text: it stands on its own, and what it says about defaults and runtimes holds.

- No runtime is the authority of ``spec/``, ``proposal.md`` or the drafted LSTM documentation
  clarification: outside a marked non-normative note (a blockquote whose first line starts with
  ``> **Note (non-normative)**``) no sentence says "as onnxruntime does", "like Keras",
  "PyTorch's behaviour" and the like, and ``spec/`` names no runtime or framework at all there.
- The activation-default table of ``spec/semantics.md`` is the ONNX operators' schemas
  (``onnx.defs.get_schema``), and Affine/ScaledTanh have the values the text gives them.
- The reference computes those defaults, ThresholdedRelu's ``x > alpha``, and the empty inputs of
  section 6; the notes' statements about onnxruntime are measured here, so a runtime that changes
  makes a note fail instead of silently going stale.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper
from toolkit import ROOT, run

from onnx_masked_rnn import reference
from onnx_masked_rnn.attributes import ACTIVATIONS, parse_attributes, round_to_float32

SPEC_FILES = sorted((ROOT / "spec").glob("*.md"))
DOCUMENTS = [*SPEC_FILES, ROOT / "proposal.md", ROOT / "upstream" / "lstm-doc-clarification.md"]
NOTE_MARKER = "> **Note (non-normative)**"

RUNTIMES = (
    r"onnxruntime|ONNX Runtime|OpenVINO|tract|cuDNN|TensorRT|DirectML|CoreML|TensorFlow|tf\.keras"
    r"|PyTorch|torch|Keras|JAX"
)
# Phrases that take a runtime as the reason for a rule: "as onnxruntime does", "like Keras", "as in
# PyTorch", "onnxruntime's behaviour", "taken from onnxruntime", "following cuDNN", ...
AUTHORITY = re.compile(
    rf"\b(?:as|like)\s+(?:in\s+|with\s+)?(?:{RUNTIMES})\b"
    rf"|\b(?:{RUNTIMES})(?:'s|'|’s)\s+(?:own\s+)?(?:behaviou?r|convention|semantics|definition|reading|defaults?)\b"
    rf"|\b(?:taken|takes|take|copied|borrowed)\s+from\s+(?:{RUNTIMES})\b"
    rf"|\b(?:follows?|following|matching|matches|according\s+to|same\s+as)\s+(?:{RUNTIMES})\b",
    re.IGNORECASE,
)
RUNTIME_NAME = re.compile(rf"\b(?:{RUNTIMES})\b", re.IGNORECASE)


def normative_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of everything outside the marked non-normative notes.

    A note is a blockquote (consecutive lines starting with ``>``) whose first line starts with
    the marker; any other blockquote is normative text like the rest."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith(NOTE_MARKER):
            while i < len(lines) and lines[i].startswith(">"):
                i += 1
            continue
        out.append((i + 1, lines[i]))
        i += 1
    return out


def test_note_detection() -> None:
    """The check itself: a note hides its own lines and nothing after it; a plain quote hides
    nothing."""
    text = "\n".join(
        [
            "Normative, as onnxruntime does.",
            f"{NOTE_MARKER} onnxruntime's behaviour is this,",
            "> continued like Keras.",
            "",
            "> A plain quote like PyTorch.",
        ]
    )
    flagged = [n for n, line in normative_lines(text) if AUTHORITY.search(line)]
    assert flagged == [1, 5]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_runtime_is_cited_as_authority(path: Path) -> None:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing"
    found = [
        f"{n}: {line.strip()}" for n, line in normative_lines(path.read_text()) if AUTHORITY.search(line)
    ]
    assert not found, (
        f"{path.relative_to(ROOT)} cites a runtime as authority outside a '{NOTE_MARKER}' "
        "blockquote:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_spec_names_runtimes_only_in_notes(path: Path) -> None:
    """The normative text of ``spec/`` (generated sections and examples included) names no runtime
    or framework: what frameworks do is said in marked notes only."""
    found = [
        f"{n}: {line.strip()}" for n, line in normative_lines(path.read_text()) if RUNTIME_NAME.search(line)
    ]
    assert not found, f"spec/{path.name} names a runtime outside a note:\n" + "\n".join(found)


def _activation_table() -> dict[str, tuple[float | None, float | None, str]]:
    """``name -> (alpha default, beta default, source)`` as spec/semantics.md prints them."""
    text = (ROOT / "spec" / "semantics.md").read_text()
    table = text[
        text.index("<!-- BEGIN GENERATED activations") : text.index("<!-- END GENERATED activations")
    ]
    rows = {}
    for match in re.finditer(r"^\| (\w+) \| `[^`]*` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", table, re.M):
        name, alpha, beta, source = (g.strip() for g in match.groups())

        def value(cell: str) -> float | None:
            return None if cell == "-" else float(re.fullmatch(r"yes \((.*)\)", cell).group(1))

        rows[name] = (value(alpha), value(beta), source)
    return rows


def test_activation_table_lists_every_function() -> None:
    assert list(_activation_table()) == list(ACTIVATIONS)


@pytest.mark.parametrize("name", [n for n in ACTIVATIONS if onnx.defs.has(n)])
def test_activation_defaults_are_the_onnx_operators(name: str) -> None:
    """A function that is an ONNX operator takes the parameters that operator has, with that
    operator's defaults, in the spec's table and in ``ACTIVATIONS`` (the code)."""
    schema = onnx.defs.get_schema(name)
    alpha, beta, source = _activation_table()[name]
    takes_alpha, takes_beta, code_alpha, code_beta = ACTIVATIONS[name]
    for parameter, printed, takes, code in (
        ("alpha", alpha, takes_alpha, code_alpha),
        ("beta", beta, takes_beta, code_beta),
    ):
        assert (parameter in schema.attributes) == takes == (printed is not None), (name, parameter)
        if takes:
            onnx_default = schema.attributes[parameter].default_value.f
            assert round_to_float32(code) == onnx_default, (name, parameter, code, onnx_default)
            assert f"{printed:g}" == f"{onnx_default:g}", (name, parameter, printed, onnx_default)
    assert source == (f"ONNX {name}-{schema.since_version}" if takes_alpha or takes_beta else "-")


# Affine-1 and ScaledTanh-1, the former experimental operators (removed by onnx pull requests 1832
# and 1866): Affine-1 declared alpha 1.0 and beta 0.0 (docs/Changelog.md before onnx commit
# a89a4a162); ScaledTanh-1 declared alpha and beta without defaults, and the specification gives
# them 1.0 and 1.0 (section 9).
SPECIFIED_DEFAULTS = {"Affine": (1.0, 0.0), "ScaledTanh": (1.0, 1.0)}


@pytest.mark.parametrize("name", sorted(SPECIFIED_DEFAULTS))
def test_defaults_the_specification_gives(name: str) -> None:
    assert not onnx.defs.has(name), f"{name} is an ONNX operator again: take its schema's defaults"
    alpha, beta, source = _activation_table()[name]
    assert (alpha, beta, source) == (*SPECIFIED_DEFAULTS[name], "this specification")
    assert ACTIVATIONS[name] == (True, True, *SPECIFIED_DEFAULTS[name])
    prose = {  # the sentences of section 9 that give these defaults
        "Affine": "Affine-1 (alpha {:.1f}, beta {:.1f})",
        "ScaledTanh": "declared no defaults, alpha {:.1f} and beta {:.1f}",
    }
    text = " ".join((ROOT / "spec" / "semantics.md").read_text().split())
    assert prose[name].format(*SPECIFIED_DEFAULTS[name]) in text


def _rnn_inputs(T: int = 4, N: int = 3, I: int = 2, H: int = 3, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "X": rng.standard_normal((T, N, I)).astype(np.float32),
        "W": rng.standard_normal((1, H, I)).astype(np.float32),
        "R": (0.3 * rng.standard_normal((1, H, H))).astype(np.float32),
    }


@pytest.mark.parametrize("name", [n for n, (ta, tb, _, _) in ACTIVATIONS.items() if ta or tb])
def test_reference_takes_the_defaults(name: str) -> None:
    """Omitting ``activation_alpha``/``activation_beta`` is giving the table's defaults."""
    takes_alpha, takes_beta, alpha, beta = ACTIVATIONS[name]
    inputs = _rnn_inputs()
    explicit = {"activation_alpha": [alpha]} if takes_alpha else {}
    if takes_beta:
        explicit["activation_beta"] = [beta]
    omitted = reference.masked_rnn(**inputs, hidden_size=3, activations=[name])
    given = reference.masked_rnn(**inputs, hidden_size=3, activations=[name], **explicit)
    for a, b in zip(omitted, given):
        np.testing.assert_array_equal(a, b)


def test_thresholded_relu_is_strict() -> None:
    """``ThresholdedRelu`` passes ``x`` only where ``x > alpha``: at ``x = alpha`` (the default 1.0)
    it gives 0, just above it ``x``."""
    X = np.zeros((1, 2, 1), np.float32)
    W = np.zeros((1, 1, 1), np.float32)
    R = np.zeros((1, 1, 1), np.float32)
    B = np.array([[1.0, 0.0]], np.float32)  # Wb = 1: the argument is exactly 1.0
    Y, _ = reference.masked_rnn(X, W, R, B, hidden_size=1, activations=["ThresholdedRelu"])
    assert not Y.any()
    B[0, 1] = 2.0**-20
    Y, _ = reference.masked_rnn(X, W, R, B, hidden_size=1, activations=["ThresholdedRelu"])
    assert (Y == np.float32(1 + 2.0**-20)).all()


@pytest.mark.parametrize("op", ["masked_lstm", "masked_gru", "masked_rnn"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_empty_batch_and_empty_sequence(op: str, direction: str) -> None:
    """Section 6: batch_size 0 gives empty outputs; seq_length 0 gives an empty ``Y`` and the
    initial states as ``Y_h``/``Y_c``."""
    gates = {"masked_lstm": 4, "masked_gru": 3, "masked_rnn": 1}[op]
    D, I, H = (2 if direction == "bidirectional" else 1), 2, 3
    rng = np.random.default_rng(1)
    W = rng.standard_normal((D, gates * H, I)).astype(np.float32)
    R = rng.standard_normal((D, gates * H, H)).astype(np.float32)
    function = getattr(reference, op)
    states = {"initial_h": rng.standard_normal((D, 2, H)).astype(np.float32)}
    if op == "masked_lstm":
        states["initial_c"] = rng.standard_normal((D, 2, H)).astype(np.float32)
    empty_sequence = function(
        np.zeros((0, 2, I), np.float32),
        W,
        R,
        **states,
        sequence_lens=np.zeros(2, np.int32),
        hidden_size=H,
        direction=direction,
    )
    assert empty_sequence[0].shape == (0, D, 2, H)
    for output, initial in zip(empty_sequence[1:], states.values()):
        np.testing.assert_array_equal(output, initial)
    empty_batch = function(
        np.zeros((5, 0, I), np.float32),
        W,
        R,
        **{k: v[:, :0] for k, v in states.items()},
        hidden_size=H,
        direction=direction,
    )
    assert [o.shape for o in empty_batch] == [(5, D, 0, H)] + [(D, 0, H)] * (len(empty_batch) - 1)


# --- The notes' statements about onnxruntime (1.32), measured -------------------------------------


def _onnxruntime_rnn(inputs: dict[str, np.ndarray], **attributes) -> np.ndarray:
    node = helper.make_node("RNN", list(inputs), ["Y"], hidden_size=inputs["R"].shape[-1], **attributes)
    graph = helper.make_graph(
        [node],
        "rnn",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    return run(model, inputs)[0]


OTHER_DEFAULTS = {"ThresholdedRelu", "Affine", "ScaledTanh"}


@pytest.mark.parametrize(
    ("name", "onnxruntime_default"),
    [("ThresholdedRelu", (0.0,)), ("Affine", (0.0, 0.0)), ("ScaledTanh", (0.0, 0.0))],
)
def test_note_onnxruntime_has_other_defaults(name: str, onnxruntime_default: tuple[float, ...]) -> None:
    """Section 9's note: onnxruntime's RNN kernel gives these functions other defaults than the
    specification, so a node that leaves them a default computes something else there."""
    inputs = _rnn_inputs()
    params = {"activation_alpha": [onnxruntime_default[0]]}
    if len(onnxruntime_default) == 2:
        params["activation_beta"] = [onnxruntime_default[1]]
    omitted = _onnxruntime_rnn(inputs, activations=[name])
    np.testing.assert_array_equal(omitted, _onnxruntime_rnn(inputs, activations=[name], **params))
    ours, _ = reference.masked_rnn(**inputs, hidden_size=3, activations=[name])
    assert not np.allclose(omitted, ours, atol=1e-3)


def test_note_onnxruntime_consumes_the_lists_in_order() -> None:
    """Section 9's note: onnxruntime's RNN kernel, bidirectional, reads ``activation_alpha`` and
    ``activation_beta`` in the order the specification says, for every pair of functions and every
    number of values given (each direction compared with a one-direction node given its values
    explicitly); values left over are ignored there (an error in the specification)."""
    takes = [n for n, (ta, tb, _, _) in ACTIVATIONS.items() if ta or tb] + ["Tanh"]
    rng = np.random.default_rng(2)
    X = rng.standard_normal((3, 2, 2)).astype(np.float32)
    W = rng.standard_normal((2, 3, 2)).astype(np.float32)
    R = (0.3 * rng.standard_normal((2, 3, 3))).astype(np.float32)
    mismatches = []
    for names in itertools.product(takes, repeat=2):
        num_alpha = sum(ACTIVATIONS[n][0] for n in names)
        num_beta = sum(ACTIVATIONS[n][1] for n in names)
        for given_alpha, given_beta in itertools.product(range(num_alpha + 1), range(num_beta + 1)):
            alphas, betas = [0.3, 0.7][:given_alpha], [0.4, 0.6][:given_beta]
            params = ({"activation_alpha": alphas} if alphas else {}) | (
                {"activation_beta": betas} if betas else {}
            )
            attrs = parse_attributes(
                "MaskedRNN", direction="bidirectional", activations=list(names), **params
            )
            if OTHER_DEFAULTS & set(names) and (given_alpha < num_alpha or given_beta < num_beta):
                continue  # a default that onnxruntime does not share: the other note's subject
            both = _onnxruntime_rnn(
                {"X": X, "W": W, "R": R}, direction="bidirectional", activations=list(names), **params
            )
            for d, direction in enumerate(("forward", "reverse")):
                (act,) = attrs.activations[d]
                explicit = {"activation_alpha": [act.alpha], "activation_beta": [act.beta]}
                one = _onnxruntime_rnn(
                    {"X": X, "W": W[d : d + 1], "R": R[d : d + 1]},
                    direction=direction,
                    activations=[act.name],
                    **explicit,
                )
                if not np.allclose(both[:, d], one[:, 0], rtol=1e-6, atol=1e-6):
                    mismatches.append((names, alphas, betas, direction))
    assert not mismatches, mismatches[:10]
    leftover = _onnxruntime_rnn(
        {"X": X, "W": W[:1], "R": R[:1]}, activations=["LeakyRelu"], activation_alpha=[0.3, 0.7]
    )
    np.testing.assert_array_equal(
        leftover,
        _onnxruntime_rnn({"X": X, "W": W[:1], "R": R[:1]}, activations=["LeakyRelu"], activation_alpha=[0.3]),
    )
    with pytest.raises(ValueError, match="activation_alpha"):
        parse_attributes("MaskedRNN", activations=["LeakyRelu"], activation_alpha=[0.3, 0.7])


def test_note_onnxruntime_thresholded_relu_is_strict() -> None:
    """The LSTM documentation clarification's note: onnxruntime's ThresholdedRelu activation, as
    the specification's, gives 0 at ``x = alpha``."""
    inputs = {
        "X": np.zeros((1, 2, 1), np.float32),
        "W": np.zeros((1, 1, 1), np.float32),
        "R": np.zeros((1, 1, 1), np.float32),
        "B": np.array([[0.5, 0.0]], np.float32),  # the argument is exactly alpha = 0.5
    }
    Y = _onnxruntime_rnn(inputs, activations=["ThresholdedRelu"], activation_alpha=[0.5])
    assert not Y.any()
    inputs["B"][0, 1] = 2.0**-20
    Y = _onnxruntime_rnn(inputs, activations=["ThresholdedRelu"], activation_alpha=[0.5])
    assert (Y == np.float32(0.5 + 2.0**-20)).all()
